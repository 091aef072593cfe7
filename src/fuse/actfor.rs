//! "Act for": a supervisor (`udsfs run --front seccomp`, src/supervisor/)
//! makes the daemon calls of the programs it traps, so without help every
//! socket it makes carries its own credentials (SO_PEERCRED, SCM_CREDENTIALS,
//! permission checks, the abstract namespace). A supervisor thread names the
//! thread it works for in the xattr `user.udsfs.act_for` of the mount root;
//! from then on requests of that thread are taken as the target's. Allowed
//! when the caller is root or the target's user, and the target is in the
//! caller's process tree (a descendant of its process), and only while the
//! target stays the process it was and keeps the credentials it had: a
//! setuid exec or a reused pid is another principal (as ptrace would judge).
//!
//! The thread is named by its id in the granting thread's pid namespace (as
//! the supervisor's seccomp notifications give it). A supervisor in a
//! namespace below the daemon's adds a pidfd of the thread it holds
//! (`pidfd=FD`), whose `/proc/TID/fdinfo` says the thread's id here; the
//! thread so found must still have the named id in the granter's namespace
//! and be below the granter's process (`set`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::errno::Errno;
use parking_lot::Mutex;

use crate::engine::cred::{self, CheckedCreds};
use crate::engine::fds::ChargedFd;
use crate::engine::quota::Quota;
use crate::engine::userns;
use crate::pidfd::alive;
use crate::procfs::{self, Status};

pub const XATTR: &str = "user.udsfs.act_for";
/// The same in the security namespace, for a supervisor with CAP_SYS_ADMIN
/// over the mount: the kernel lets only such a caller set it and checks no
/// file permission (xattr_permission), so the setxattr is one round trip,
/// without the GETATTR that the root's permission check makes for the
/// user name (attributes are never cached). The daemon checks the same.
pub const XATTR_SECURITY: &str = "security.udsfs.act_for";

struct Grant {
    /// The supervisor thread's process and its start time: a reused thread
    /// id never inherits a grant.
    tgid: i32,
    started: u64,
    /// The target thread, in the daemon's pid namespace.
    target: u32,
    /// The target as the granting thread names it, in its own pid
    /// namespace (`target` for a granter in the daemon's).
    named: u32,
    /// The target's fsuid and fsgid, as the requests made for it carry.
    fs: (u32, u32),
    /// The target as granted.
    checked: Target,
    /// "TID netns": sockets made under the grant are made in the network
    /// namespace the granting thread is in (the supervisor enters a kernel
    /// socket's namespace to make its udsfs stand-in there, as Linux keeps
    /// a socket in the namespace it was made in). It can only be in a
    /// namespace it could enter, where it could make sockets itself.
    granter_netns: bool,
    /// Pidfds of the supervisor's process and of the target thread
    /// (PIDFD_THREAD), opened once they were checked: each request asks
    /// whether the supervisor's still names a process (a pid reused is
    /// another struct pid) and asks the target's for its ids (`look`),
    /// instead of reading start times and the status from /proc (the
    /// largest part of the daemon's time under `udsfs run`'s supervisor).
    /// Shared with `CHECKED`'s entries; each charged to the user that had
    /// it opened, on the daemon's descriptor quota (`Engine::fds`, the
    /// per-user share). None: not to be had (past the user's share or
    /// PIDFD_GRANTS); /proc decides.
    pidfds: Option<Pidfds>,
    /// A pidfd of the granting thread itself (PIDFD_THREAD): alive, it is
    /// the thread that set the grant, not another that got its id since.
    /// Charged as `pidfds`. None: not to be had; /proc/TGID/task/TID decides.
    /// Shared so that a request asks it outside `GRANTS`'s lock.
    thread: Option<Arc<ChargedFd>>,
}

/// The supervisor process's pidfd and the target thread's.
type Pidfds = (Arc<ChargedFd>, Arc<ChargedFd>);

/// A target that a supervisor's thread was let act for: the full check of
/// `set` (the tree, the ids, the capabilities, both start times) is not
/// made again while both processes are the ones checked (their pidfds) and
/// the target's credentials are the ones it was checked with (one read of
/// its status). Keyed by (supervisor process, setter's fsuid, target
/// thread as the supervisor names it in its pid namespace).
struct Checked {
    started: u64,
    /// The target thread, in the daemon's pid namespace.
    tid: u32,
    target: Target,
    pidfds: Pidfds,
}

/// A target as checked: its process's start time and its credentials.
#[derive(Clone, Copy)]
struct Target {
    started: u64,
    creds: CheckedCreds,
}

impl Target {
    fn of(st: &Status, started: u64) -> Target {
        Target {
            started,
            creds: CheckedCreds::of(st),
        }
    }

    fn tgid(&self) -> i32 {
        self.creds.tgid
    }

    /// Whether `st` is of this target's process, with the ids and
    /// capabilities it was checked with.
    fn same(&self, st: &Status) -> bool {
        self.creds == CheckedCreds::of(st)
    }
}

/// Thread `tid`'s effective capabilities now (capget names any thread by
/// its id; it reads them as /proc's CapEff shows them).
fn cap_eff_of(tid: u32) -> Option<u64> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut h = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: tid as i32,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: a version 3 header and the two data records it fills.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    (r == 0 && tid != 0).then(|| d[0].effective as u64 | (d[1].effective as u64) << 32)
}

/// The target thread `tid`'s process, ids and effective capabilities now,
/// given its pidfd (PIDFD_THREAD): capget, then PIDFD_GET_INFO (two system
/// calls and no text, where a read of its status is three and has the
/// kernel print some sixty lines; at every request under a grant it was
/// most of the daemon's time a call under `udsfs run`'s supervisor).
/// capget names the thread by its id, so it comes first: the pidfd's
/// answer after it says that the thread lived on, so the id was still its
/// own. These are everything the checks compare (`Target::same`), and a
/// setuid or setgid exec, a set*id call, capset and a file-capability exec
/// each change one of them. Before PIDFD_GET_INFO (Linux 6.13), the
/// status. None: the thread is gone.
fn look(thread: &impl AsRawFd, tid: u32) -> Option<CheckedCreds> {
    let cap_eff = cap_eff_of(tid)?;
    match cred::pidfd_ids(thread.as_raw_fd()) {
        Ok((tgid, uids, gids)) => Some(CheckedCreds {
            tgid,
            uids,
            gids,
            cap_eff,
        }),
        Err(Errno::ESRCH) => None,
        Err(_) => Status::read(tid)
            .ok()
            .filter(|_| alive(thread))
            .map(|st| CheckedCreds::of(&st)),
    }
}

/// `fd` charged to `uid` on `quota` (the daemon's descriptor quota): None
/// when there is no `fd`, or past the user's share (then /proc decides,
/// as it does past PIDFD_GRANTS).
fn charged(quota: &Arc<Quota>, uid: u32, fd: Option<OwnedFd>) -> Option<ChargedFd> {
    ChargedFd::new(quota, uid, fd?).ok()
}

/// (supervisor process, setter's fsuid, target thread as the supervisor
/// names it).
type CheckedKey = (i32, u32, u32);

static CHECKED: Mutex<Option<HashMap<CheckedKey, Checked>>> = Mutex::new(None);

/// A pidfd of process `pid`.
fn pidfd(pid: i32) -> Option<OwnedFd> {
    crate::pidfd::open(pid, 0).ok()
}

/// A pidfd of thread `tid` alone (PIDFD_THREAD, Linux 6.9).
fn thread_pidfd(tid: u32) -> Option<OwnedFd> {
    crate::pidfd::open(tid as i32, crate::pidfd::PIDFD_THREAD).ok()
}

/// Is thread `tid` of process `tgid` the one granted: its own pidfd alive
/// (a thread pidfd is signalled as that thread; one that exited is gone
/// even if its id was taken again), or without one, its /proc entry there.
fn same_thread(thread: Option<&ChargedFd>, tgid: i32, tid: u32) -> bool {
    match thread {
        Some(fd) => alive(fd),
        None => std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists(),
    }
}

/// Has the process of `pidfd` exited (a zombie too: its pidfd is readable
/// from its exit on)? The exits thread asks this, not `alive`: it wakes at
/// the exit, often before the supervisor's parent reaps it, and a zombie
/// kept as alive then held its grants' pidfds for the daemon's life (the
/// set is one-shot per pidfd: no second wake comes).
fn exited(pidfd: &impl AsRawFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours; no wait.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r == 1 && p.revents & libc::POLLIN != 0
}

static GRANTS: Mutex<Option<HashMap<u32, Grant>>> = Mutex::new(None);

/// The epoll set of the supervisors' pidfds that grants hold (-1: not made
/// yet), and the thread that drops a supervisor's grants when it exits: a
/// grant is otherwise dropped only when its thread id asks again, and its
/// pidfds would stay open in the daemon after every run.
static EXITS: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// Makes the exits set and its thread (the mount's start: the daemon's
/// descriptors are counted from then on).
pub fn start() {
    exits();
}

fn exits() -> i32 {
    *EXITS.get_or_init(|| {
        // SAFETY: a new epoll set, owned by the daemon from here on.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep >= 0 {
            let spawned = std::thread::Builder::new()
                .name("udsfs-actfor-exits".into())
                .spawn(move || reap_exits(ep));
            if spawned.is_err() {
                log::warn!("act_for: no thread to drop the grants of exited supervisors");
            }
        }
        ep
    })
}

/// Drops the grants and checked targets of supervisor `sup` once its
/// process has exited (once per pidfd: they share it).
fn watch_exit(sup: &ChargedFd) {
    let ep = exits();
    if ep < 0 {
        return;
    }
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        u64: 0,
    };
    // SAFETY: `ev` is ours; a pidfd is readable once its process exited.
    // Closing the pidfd (the last grant or checked target that shares it
    // dropped) takes it out of the set.
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, sup.as_raw_fd(), &mut ev) };
}

/// The exits thread: a supervisor that exited loses its threads' grants
/// and its checked targets (a grant or check of a living supervisor that
/// took one of its thread ids stays).
fn reap_exits(ep: i32) {
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        // SAFETY: `evs` holds 64 events.
        let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 64, -1) };
        if n <= 0 {
            continue;
        }
        let mut g = GRANTS.lock();
        if let Some(map) = g.as_mut() {
            map.retain(|_, gr| gr.pidfds.as_ref().is_none_or(|(sup, _)| !exited(&**sup)));
            COUNT.store(map.len(), Ordering::Relaxed);
        }
        drop(g);
        if let Some(m) = CHECKED.lock().as_mut() {
            m.retain(|_, c| !exited(&*c.pidfds.0));
        }
    }
}

/// How many grants there are: requests pay no lock while there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Past this many grants, those of threads gone are swept out before another
/// is made: a grant left by an exited thread is otherwise dropped only when
/// its thread id asks again, so threads that grant and exit would grow the map.
const SWEEP_AT: usize = 1024;
/// The size of the grants' map at which the next sweep comes: `SWEEP_AT`,
/// or twice what the last sweep left (so a sweep costs each grant set O(1)).
static NEXT_SWEEP: AtomicUsize = AtomicUsize::new(SWEEP_AT);
/// Grants that hold pidfds, at most (the daemon's descriptors are few).
const PIDFD_GRANTS: usize = 256;
/// Checked targets kept, at most (each holds the pidfds of two processes,
/// shared with the grants and checks of the same processes).
const CHECKED_MAX: usize = 256;

/// Is `pid` (a process) `ancestor` or below it?
fn in_tree(mut pid: i32, ancestor: i32) -> bool {
    for _ in 0..4096 {
        if pid == ancestor {
            return true;
        }
        if pid <= 1 {
            return false;
        }
        match Status::read(pid as u32) {
            Ok(st) => pid = st.ppid,
            Err(_) => return false,
        }
    }
    false
}

/// Whether the caller (thread `tid`, status `me`) holds every capability
/// the target (`target`, status `them`) has, as cap_ptrace_access_check
/// asks: in one user namespace, the target's CapEff within the caller's;
/// in another, CAP_SYS_PTRACE over the target's namespace (a CapEff is
/// relative to its own namespace: a target in a namespace of its own shows
/// a full set, which the caller may own or not). The namespaces are read
/// after the statuses (see engine/userns.rs); unreadable: not covered.
fn caps_covered(tid: u32, me: &Status, target: u32, them: &Status) -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    let (Some(my_ns), Some(their_ns)) = (
        procfs::ns_inode(tid, "user"),
        procfs::ns_inode(target, "user"),
    ) else {
        return false;
    };
    if my_ns == their_ns {
        return them.cap_eff & !me.cap_eff == 0;
    }
    let holder = userns::Holder {
        ns: my_ns,
        euid: me.uids[1],
        cap_eff: me.cap_eff,
    };
    procfs::open_ns(target, "user").is_ok_and(|ns| holder.capable_in(ns, CAP_SYS_PTRACE))
}

/// A grant's value: "TID", then "netns" (`Grant::granter_netns`) and
/// "pidfd=FD" (a descriptor of the granting thread's that holds a pidfd of
/// TID, for a granter below the daemon's pid namespace), in any order.
struct Value {
    named: u32,
    granter_netns: bool,
    pidfd: Option<i32>,
}

fn parse_value(value: &[u8]) -> Result<Value, i32> {
    let text = std::str::from_utf8(value).map_err(|_| libc::EINVAL)?;
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    let mut words = text.split(' ');
    let named = match words.next() {
        None | Some("") => 0,
        Some(n) => n.parse().map_err(|_| libc::EINVAL)?,
    };
    let mut v = Value {
        named,
        granter_netns: false,
        pidfd: None,
    };
    for w in words {
        match (w, w.strip_prefix("pidfd=")) {
            ("netns", _) if !v.granter_netns => v.granter_netns = true,
            (_, Some(fd)) if v.pidfd.is_none() => {
                v.pidfd = Some(
                    fd.parse()
                        .ok()
                        .filter(|&fd: &i32| fd >= 0)
                        .ok_or(libc::EINVAL)?,
                )
            }
            _ => return Err(libc::EINVAL),
        }
    }
    Ok(v)
}

/// Thread `named` of the granting thread `tid`'s pid namespace (`me` its
/// status), by its id in the daemon's: `named` itself where the granter is
/// in the daemon's namespace; else the thread of the pidfd at the
/// granter's descriptor `pidfd` (its `Pid:` in /proc/TID/fdinfo, which
/// /proc gives in the daemon's namespace). Only a hint: `set` checks that
/// the thread found has id `named` in the granter's namespace and is below
/// its process, as any other. No pidfd from a granter below: EXDEV, which
/// tells the supervisor to give one (src/supervisor/actfor.rs).
fn in_daemon_ns(tid: u32, me: &Status, named: u32, pidfd: Option<i32>) -> Result<u32, i32> {
    let below = crate::engine::pidns::own_depth().is_some_and(|own| me.ns_pid.len() > own);
    if !below {
        return Ok(named);
    }
    let fd = pidfd.ok_or(libc::EXDEV)?;
    // One read of its start: a pidfd's `Pid:` is its fifth line, and
    // another file's fdinfo (an epoll set's lists every descriptor it
    // watches) is not read on.
    let mut info = [0u8; 512];
    let len = std::fs::File::open(format!("/proc/{tid}/fdinfo/{fd}"))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut info))
        .map_err(|_| libc::EBADF)?;
    let pid = String::from_utf8_lossy(&info[..len])
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse::<i32>().ok())
        .ok_or(libc::EBADF)?;
    // (-1: the thread is gone.)
    u32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or(libc::ESRCH)
}

/// Whether `them` is the thread that the granter of status `me` names
/// `named` in its own pid namespace: its id at the granter's depth. With
/// the tree check (every process below the granter's lives in the
/// granter's pid namespace or one below it), only one thread is.
fn named_there(me: &Status, them: &Status, named: u32) -> bool {
    match me.ns_pid.len() {
        0 => true, // (no NSpid: a kernel without pid namespaces)
        depth => them.ns_pid.get(depth - 1) == Some(&(named as i32)),
    }
}

/// `user.udsfs.act_for` (or the security name) set to `value` by thread
/// `tid` (fsuid `uid`): a thread id to act for, in the setter's pid
/// namespace (`Value`), or empty / "0" to stop. Errno on refusal. The
/// pidfds a grant keeps are charged to `uid` on `fds` (`Engine::fds`).
pub fn set(fds: &Arc<Quota>, tid: u32, uid: u32, value: &[u8]) -> Result<(), i32> {
    let Value {
        named,
        granter_netns,
        pidfd,
    } = parse_value(value)?;
    if named == 0 {
        let mut g = GRANTS.lock();
        let map = g.get_or_insert_with(HashMap::new);
        map.remove(&tid);
        COUNT.store(map.len(), Ordering::Relaxed);
        return Ok(());
    }
    if let Some(gr) = checked_before(tid, uid, named, granter_netns) {
        // (Replacing the grant it took the thread's pidfd from.)
        let mut g = GRANTS.lock();
        let map = g.get_or_insert_with(HashMap::new);
        map.insert(tid, gr);
        COUNT.store(map.len(), Ordering::Relaxed);
        return Ok(());
    }
    // (Before `GRANTS`'s lock, which every request takes.)
    let me = Status::read(tid).map_err(|_| libc::ESRCH)?;
    let target = in_daemon_ns(tid, &me, named, pidfd)?;
    let mut g = GRANTS.lock();
    let map = g.get_or_insert_with(HashMap::new);
    // Opened while the thread is in this request (its id cannot be taken
    // again meanwhile): it names this thread, whose process was read.
    let thread = if map.len() < PIDFD_GRANTS {
        charged(fds, uid, thread_pidfd(tid)).map(Arc::new)
    } else {
        None
    };
    let them = Status::read(target).map_err(|_| libc::ESRCH)?;
    if them.tgid == me.tgid || !in_tree(them.tgid, me.tgid) || !named_there(&me, &them, named) {
        return Err(libc::EPERM);
    }
    // As ptrace would allow: the caller's user in each of the target's real,
    // effective and saved ids (a setuid program in flight is not its own),
    // its groups likewise, and no capability the caller lacks.
    if uid != 0
        && (them.uids[..3].iter().any(|&u| u != uid)
            || them.gids[..3].iter().any(|g| !me.gids.contains(g))
            || !caps_covered(tid, &me, target, &them))
    {
        return Err(libc::EPERM);
    }
    let started = procfs::start_time(me.tgid).ok_or(libc::ESRCH)?;
    let target_started = procfs::start_time(them.tgid).ok_or(libc::ESRCH)?;
    // The start time must be the checked process's, not a successor's that
    // got its pid meanwhile: read again, the same process with the same ids.
    // The pidfds, opened before the second look: if it finds the same
    // process, they name that one.
    // (Two descriptors a process: past PIDFD_GRANTS grants, /proc alone.)
    let pidfds = if map.len() < PIDFD_GRANTS {
        pidfds_of(
            fds,
            uid,
            (me.tgid, started),
            (target, them.tgid, target_started),
        )
    } else {
        None
    };
    let checked = Target::of(&them, target_started);
    let again = Status::read(target).map_err(|_| libc::ESRCH)?;
    if !checked.same(&again)
        || !named_there(&me, &again, named)
        || procfs::start_time(them.tgid) != Some(target_started)
    {
        return Err(libc::ESRCH);
    }
    // Swept again only once the map has doubled since: a sweep reads /proc
    // twice a grant under the grants' lock, which every request waits for,
    // and a user whose 1,500 threads held grants made each further grant
    // sweep them all (adversarial_actfor2.sh grant_stall).
    if map.len() >= NEXT_SWEEP.load(Ordering::Relaxed) {
        map.retain(|t, g| {
            Status::read(*t).is_ok_and(|st| st.tgid == g.tgid)
                && procfs::start_time(g.tgid) == Some(g.started)
        });
        NEXT_SWEEP.store((map.len() * 2).max(SWEEP_AT), Ordering::Relaxed);
    }
    if let Some(p) = &pidfds {
        remember(
            (me.tgid, uid, named),
            Checked {
                started,
                tid: target,
                target: checked,
                pidfds: p.clone(),
            },
        );
    }
    map.insert(
        tid,
        Grant {
            tgid: me.tgid,
            started,
            target,
            named,
            fs: (them.uids[3], them.gids[3]),
            checked,
            granter_netns,
            pidfds,
            thread,
        },
    );
    COUNT.store(map.len(), Ordering::Relaxed);
    Ok(())
}

/// The grant of thread `tid` (fsuid `uid`) for `target` without the full
/// check, when `tid` granted before as a thread of a supervisor that
/// `target` was checked for with this user (`CHECKED`): the supervisor's
/// and the target's processes the ones checked (their pidfds, asked after
/// the reads), `tid` still a thread of the supervisor's process (a thread
/// id that another process reused is not), and the target thread's ids
/// and capabilities (`look`) the ones checked (else the full check:
/// a setgid or file-capability exec, a raw setresuid since). Threads of one
/// supervisor with the same fsuid count as one principal. None: the full
/// check decides.
/// Its system calls are made outside `GRANTS`'s lock, which every request
/// of every user takes (only thread `tid`'s own requests change its grant,
/// one at a time).
fn checked_before(tid: u32, uid: u32, named: u32, granter_netns: bool) -> Option<Grant> {
    let (tgid, started, prev_thread) = {
        let g = GRANTS.lock();
        let prev = g.as_ref()?.get(&tid)?;
        prev.pidfds.as_ref()?;
        (prev.tgid, prev.started, prev.thread.clone())
    };
    let c = CHECKED.lock();
    let ch = c.as_ref()?.get(&(tgid, uid, named))?;
    if ch.started != started {
        return None;
    }
    // (Its pidfd alive, the thread has the ids it was checked with, in
    // every pid namespace: `named` still names it.)
    let (pidfds, checked, target) = (ch.pidfds.clone(), ch.target, ch.tid);
    drop(c);
    let thread = same_thread(prev_thread.as_deref(), tgid, tid);
    let now = look(&*pidfds.1, target)?;
    let same = thread && now == checked.creds && alive(&*pidfds.0);
    same.then(|| Grant {
        tgid,
        started,
        target,
        named,
        fs: (now.uids[3], now.gids[3]),
        checked,
        granter_netns,
        pidfds: Some(pidfds),
        thread: prev_thread,
    })
}

/// Pidfds of the supervisor's process, (tgid, start time), and of the
/// target thread, (tid, tgid, its process's start time): those a checked
/// target already holds for the same process or thread while it lives,
/// else new ones charged to `uid` on `fds` (a new supervisor's watched for
/// its exit). (A start time counts clock ticks: a pid that came round
/// within one tick of its last process's exit looks the same, and that
/// one's pidfd, dead, refused every request of the grant.)
fn pidfds_of(
    fds: &Arc<Quota>,
    uid: u32,
    sup: (i32, u64),
    target: (u32, i32, u64),
) -> Option<Pidfds> {
    let c = CHECKED.lock();
    let (old_sup, old_target) = c.as_ref().map_or((None, None), |m| {
        let s = m
            .iter()
            .find(|((tgid, _, _), ch)| (*tgid, ch.started) == sup && alive(&*ch.pidfds.0))
            .map(|(_, ch)| ch.pidfds.0.clone());
        let t = m
            .iter()
            .find(|(_, ch)| {
                (ch.tid, ch.target.tgid(), ch.target.started) == target && alive(&*ch.pidfds.1)
            })
            .map(|(_, ch)| ch.pidfds.1.clone());
        (s, t)
    });
    drop(c);
    let s = match old_sup {
        Some(s) => s,
        None => {
            let s = Arc::new(charged(fds, uid, pidfd(sup.0))?);
            watch_exit(&s);
            s
        }
    };
    let t = match old_target {
        Some(t) => t,
        None => Arc::new(charged(fds, uid, thread_pidfd(target.0))?),
    };
    Some((s, t))
}

/// Keeps a checked target (past CHECKED_MAX, those whose processes are
/// gone go, then all).
fn remember(key: CheckedKey, ch: Checked) {
    let mut c = CHECKED.lock();
    let m = c.get_or_insert_with(HashMap::new);
    if m.len() >= CHECKED_MAX && !m.contains_key(&key) {
        m.retain(|_, c| alive(&*c.pidfds.0) && alive(&*c.pidfds.1));
        if m.len() >= CHECKED_MAX {
            m.clear();
        }
    }
    m.insert(key, ch);
}

/// setxattr of `name` on inode `ino` by thread `tid` (fsuid `uid`): the
/// grant, `user.udsfs.act_for` or `security.udsfs.act_for`, on any file of
/// the mount; nothing else is there to set.
pub(super) fn set_xattr(
    fds: &Arc<Quota>,
    _ino: u64,
    name: &[u8],
    tid: u32,
    uid: u32,
    value: &[u8],
) -> Result<(), Errno> {
    // Which file does not matter: the grant is the calling thread's, and
    // `set` checks it as ptrace would. The supervisor sets it on a socket of
    // its own per thread (a setxattr holds its inode's lock; on the shared
    // root every grant waited for every other). The user name on the root
    // alone left a user who does not own the mount without a grant: the
    // kernel lets only the owner set a user.* name on a sticky directory, so
    // its programs' credentials were the supervisor's (run_rsyslog.sh).
    let named = name == XATTR.as_bytes() || name == XATTR_SECURITY.as_bytes();
    if !named {
        return Err(Errno::ENOTSUP);
    }
    set(fds, tid, uid, value).map_err(Errno::from_raw)
}

/// Who a request is made for (`caller_of`).
pub struct ActFor {
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Under a grant whose processes have no pidfds kept, the target's
    /// status as read for this request.
    pub status: Option<Status>,
    /// Under a grant, the target's credentials as checked for this request
    /// (engine::cred's `with_checked`): its status, if an operation reads
    /// it, carries them.
    pub checked: Option<CheckedCreds>,
    /// Under a "netns" grant, the granting thread's network namespace, and
    /// that thread (whose namespace a new socket holds open).
    pub netns: Option<(crate::engine::netns::NetNs, u32)>,
}

/// The (thread, fsuid, fsgid) a request of thread `tid` is made for, and
/// under a grant the target's credentials as checked: the request uses
/// those, not a later read that a setuid exec in between could change.
pub fn caller_of(tid: u32, uid: u32, gid: u32) -> ActFor {
    let own = ActFor {
        tid,
        uid,
        gid,
        status: None,
        checked: None,
        netns: None,
    };
    if COUNT.load(Ordering::Relaxed) == 0 {
        return own;
    }
    let g = GRANTS.lock();
    let Some(gr) = g.as_ref().and_then(|m| m.get(&tid)) else {
        return own;
    };
    let granter_netns = gr.granter_netns;
    let (tgid, started, who) = (gr.tgid, gr.started, (gr.target, gr.fs.0, gr.fs.1));
    let t = gr.checked;
    let (thread_fd, pidfds) = (gr.thread.clone(), gr.pidfds.clone());
    drop(g);
    // The grant's thread must still be the supervisor's, and the target the
    // same process with the same credentials (else: reused pid, setuid exec).
    let (same, target) = if let Some((sup, target_fd)) = pidfds {
        // A thread of the supervisor's process (the one granted, or one that
        // took its id since: the same process), and the target thread the
        // one granted (its pidfd), its ids and capabilities now (`look`) the
        // ones checked: the daemon cannot tell a target trapped in a call
        // (which cannot change its own credentials) from one that runs on.
        // A grant left after its call serves only the calls that are the
        // same whoever makes them (the supervisor sets one for each call
        // that is not: src/supervisor/actfor.rs). Asked outside `GRANTS`'s
        // lock, which every request of every user takes: its descriptors
        // were taken with the grant under one look at it (only this
        // thread's own requests change it, one at a time).
        // A living granting thread keeps its process (with no pidfd of its
        // own, the /proc look, then the process's pidfd).
        let thread =
            same_thread(thread_fd.as_deref(), tgid, tid) && (thread_fd.is_some() || alive(&*sup));
        // The target's credentials now, not the ones kept from the grant: a
        // target that is not trapped (a child the caller merely forked) may
        // have exec'd a setuid program since, and a kept status, equal to
        // the checked one by construction, let the caller speak as that
        // process for as long as it ran (adversarial_actfor2.sh).
        let now = look(&*target_fd, who.0);
        (
            thread && now.is_some(),
            now.filter(|n| *n == t.creds).map(|_| None),
        )
    } else {
        let same = Status::read(tid).is_ok_and(|st| st.tgid == tgid)
            && procfs::start_time(tgid) == Some(started);
        let target = Status::read(who.0)
            .ok()
            .filter(|st| t.same(st) && procfs::start_time(t.tgid()) == Some(t.started))
            .map(Some);
        (same, target)
    };
    if same && let Some(status) = target {
        // Read now: where the granting thread is for this request.
        // One the daemon may not read (no CAP_SYS_PTRACE, or gone) is
        // decided as Caller::netns decides it.
        let netns = granter_netns.then(|| {
            use crate::engine::netns;
            let ns = netns::of_thread(tid).unwrap_or_else(|| netns::of_unreadable(tid));
            (ns, tid)
        });
        return ActFor {
            tid: who.0,
            uid: who.1,
            gid: who.2,
            status,
            checked: Some(t.creds),
            netns,
        };
    }
    if same {
        log::warn!(
            "act_for: thread {} is no longer the process or credentials granted to thread {tid}: grant dropped",
            who.0
        );
    }
    let mut g = GRANTS.lock();
    if let Some(m) = g.as_mut() {
        m.remove(&tid);
        COUNT.store(m.len(), Ordering::Relaxed);
    }
    own
}

/// Who a send ioctl of thread `tid` (fsuid `uid`) that names thread `named`
/// (of its own pid namespace, as a grant names it) in its head
/// (`MsgHead::act_for`) is made for: that thread, only when this thread
/// holds a grant for exactly it, or granted it before as a thread of a
/// supervisor that `named` was checked for with this user
/// (`checked_before`: the same processes by their pidfds, the thread
/// still the granter, the target's ids unchanged); the grant is then this
/// thread's, as a setxattr naming it would have made it. Anything else is
/// EPERM, never the caller's own credentials: a program that names a pid
/// gets no more than it had, and a supervisor refused sets the grant by
/// setxattr (the full check) and sends again. The number is the caller's
/// to write: it decides nothing that a grant set by the full check did not.
pub fn caller_named(tid: u32, uid: u32, gid: u32, named: u32) -> Result<ActFor, i32> {
    // (The grant's `target`, in the daemon's namespace, is who the
    // request is taken as.)
    let held = GRANTS
        .lock()
        .as_ref()
        .and_then(|m| m.get(&tid))
        .filter(|gr| gr.named == named && !gr.granter_netns)
        .map(|gr| gr.target);
    let Some(target) = held else {
        {
            // (Its system calls outside `GRANTS`'s lock.)
            let gr = checked_before(tid, uid, named, false).ok_or(libc::EPERM)?;
            // Checked just now, as `caller_of` would (the thread, both
            // processes, the target's ids): its answer, without asking twice.
            let who = ActFor {
                tid: gr.target,
                uid: gr.fs.0,
                gid: gr.fs.1,
                status: None,
                checked: Some(gr.checked.creds),
                netns: None,
            };
            let mut g = GRANTS.lock();
            let map = g.get_or_insert_with(HashMap::new);
            map.insert(tid, gr);
            COUNT.store(map.len(), Ordering::Relaxed);
            return Ok(who);
        }
    };
    // The grant's checks at every request (`caller_of`): a target gone or
    // changed since it was set drops it, and the call is refused.
    let who = caller_of(tid, uid, gid);
    if who.tid != target || who.checked.is_none() {
        return Err(libc::EPERM);
    }
    Ok(who)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tree::ROOT_INO;

    fn tid() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }

    /// The descriptor quota the tests' grants are charged on (no bound).
    fn fds() -> Arc<Quota> {
        static FDS: std::sync::OnceLock<Arc<Quota>> = std::sync::OnceLock::new();
        FDS.get_or_init(|| Arc::new(Quota::new("descriptors held for clients")))
            .clone()
    }

    #[test]
    fn a_child_may_be_acted_for_and_a_stranger_not() {
        let mut child = crate::procfs::sleeping_child(5);
        let pid = child.id();
        let me = tid();
        assert_eq!(
            set(&fds(), me, 0, b"1"),
            Err(libc::EPERM),
            "init is not below us"
        );
        let own = std::process::id().to_string();
        assert_eq!(
            set(&fds(), me, 0, own.as_bytes()),
            Err(libc::EPERM),
            "not ourselves"
        );
        assert_eq!(set(&fds(), me, 0, b"x"), Err(libc::EINVAL));
        set(&fds(), me, 0, pid.to_string().as_bytes()).unwrap();
        assert_eq!(caller_of(me, 0, 0).tid, pid);
        assert!(
            caller_of(me, 0, 0).checked.is_some(),
            "the credentials checked come along"
        );
        // (A thread of no grant: me + 1 may be another test's, granting.)
        assert_eq!(caller_of(pid, 7, 8).tid, pid, "only the granted thread");
        assert!(caller_of(me, 0, 0).netns.is_none());
        set(&fds(), me, 0, format!("{pid} netns").as_bytes()).unwrap();
        let own_ns = crate::engine::netns::of_thread(me);
        assert_eq!(
            caller_of(me, 0, 0).netns,
            own_ns.map(|ns| (ns, me)),
            "the granter's namespace, and the granter"
        );
        assert_eq!(
            set(&fds(), me, 0, format!("{pid} x").as_bytes()),
            Err(libc::EINVAL)
        );
        set(&fds(), me, 0, b"0").unwrap();
        assert_eq!(caller_of(me, 0, 0).tid, me);
        // Another user may not act for it (unless root: uid 0 above).
        assert_eq!(
            set(&fds(), me, 12345, pid.to_string().as_bytes()),
            Err(libc::EPERM)
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A grant's value: the thread, then "netns" and "pidfd=FD" in any
    /// order, each once; anything else EINVAL.
    #[test]
    fn a_value_is_a_thread_then_netns_and_a_pidfd() {
        let parsed = |v: &[u8]| parse_value(v).map(|v| (v.named, v.granter_netns, v.pidfd));
        assert_eq!(parsed(b"12"), Ok((12, false, None)));
        assert_eq!(parsed(b"12 netns\0"), Ok((12, true, None)));
        assert_eq!(parsed(b"12 pidfd=7"), Ok((12, false, Some(7))));
        assert_eq!(parsed(b"12 pidfd=7 netns"), Ok((12, true, Some(7))));
        assert_eq!(parsed(b"12 netns pidfd=7"), Ok((12, true, Some(7))));
        assert_eq!(parsed(b""), Ok((0, false, None)));
        assert_eq!(parsed(b"0 netns"), Ok((0, true, None)));
        for bad in [
            &b"12 netns netns"[..],
            b"12 pidfd=7 pidfd=8",
            b"12 pidfd=-1",
            b"12 pidfd=",
            b"12 pidfd=x",
            b"12  netns",
            b"12 other",
            b"netns",
            b"pidfd=3",
            b"-1",
        ] {
            assert_eq!(
                parsed(bad),
                Err(libc::EINVAL),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// The look a request takes (capget and PIDFD_GET_INFO) says what the
    /// status says, for this thread and another of this process; none once
    /// that one is gone. (No child: the reused-pid test turns pids round.)
    #[test]
    fn a_look_agrees_with_the_status() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            tx.send(tid()).unwrap();
            done_rx.recv().unwrap();
        });
        let them = rx.recv().unwrap();
        for who in [tid(), them] {
            let fd = thread_pidfd(who).expect("a thread pidfd (Linux 6.9)");
            let looked = look(&fd, who);
            let st = Status::read(who).map(|st| CheckedCreds::of(&st)).ok();
            let info = cred::pidfd_ids(fd.as_raw_fd());
            println!("thread {who}: look {looked:?}, status {st:?}, PIDFD_GET_INFO {info:?}");
            assert!(looked.is_some());
            assert_eq!(looked, st);
        }
        let fd = thread_pidfd(them).unwrap();
        done_tx.send(()).unwrap();
        other.join().unwrap();
        let gone = look(&fd, them);
        println!("thread {them} exited: look {gone:?}");
        assert_eq!(gone, None, "a thread gone has no credentials");
    }

    #[test]
    fn grants_of_exited_threads_are_swept() {
        let mut child = crate::procfs::sleeping_child(20);
        let pid = child.id().to_string();
        for _ in 0..SWEEP_AT + 10 {
            let p = pid.clone();
            std::thread::spawn(move || set(&fds(), tid(), 0, p.as_bytes()).unwrap())
                .join()
                .unwrap();
        }
        let n = GRANTS.lock().as_ref().map_or(0, |m| m.len());
        assert!(n <= SWEEP_AT, "{n} grants kept for exited threads");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A child `sleep 20`.
    fn sleeper() -> std::process::Child {
        crate::procfs::sleeping_child(20)
    }

    #[test]
    fn a_grant_is_not_kept_for_a_thread_that_exited() {
        let mut child = sleeper();
        let pid = child.id();
        let p = pid.to_string();
        let dead = std::thread::spawn(move || {
            let t = tid();
            set(&fds(), t, 0, p.as_bytes()).unwrap();
            assert_eq!(
                caller_of(t, 0, 0).tid,
                pid,
                "granted while the thread lives"
            );
            t
        })
        .join()
        .unwrap();
        // The thread is gone: a request or grant under its id comes from
        // another thread (here the id is only named; a reused one looks
        // the same to the daemon).
        let again = set(&fds(), dead, 0, pid.to_string().as_bytes());
        println!("set by exited thread {dead}: {again:?}");
        assert_eq!(
            again,
            Err(libc::ESRCH),
            "the target checked before is not reused"
        );
        let who = caller_of(dead, 0, 0).tid;
        println!("request of exited thread {dead} taken as {who}");
        assert_eq!(who, dead, "no grant for a thread that exited");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_grant_is_not_kept_for_a_target_that_exited() {
        let mut child = sleeper();
        let pid = child.id();
        let me = tid();
        set(&fds(), me, 0, pid.to_string().as_bytes()).unwrap();
        assert_eq!(caller_of(me, 0, 0).tid, pid);
        child.kill().unwrap();
        child.wait().unwrap();
        let who = caller_of(me, 0, 0).tid;
        println!("request after target {pid} exited taken as {who}");
        assert_eq!(who, me, "no grant for a target that exited");
    }

    /// A target checked once is checked again when its ids changed: here
    /// a setgid exec (group 4242, which the caller is not in) between two
    /// grants of a caller of its user (4243).
    #[test]
    fn a_target_whose_ids_changed_is_checked_again() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("udsfs-actfor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sg = dir.join("sgsleep");
        std::fs::copy("/bin/sleep", &sg).unwrap();
        std::os::unix::fs::chown(&sg, Some(0), Some(4242)).unwrap();
        std::fs::set_permissions(&sg, std::fs::Permissions::from_mode(0o2755)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = format!("read x; exec {} 20", sg.display());
        let mut child = std::process::Command::new("setpriv")
            .args([
                "--reuid=4243",
                "--regid=0",
                "--clear-groups",
                "sh",
                "-c",
                &script,
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let me = tid();
        let gids = |pid: u32| Status::read(pid).map(|st| st.gids).unwrap_or_default();
        // Once setpriv has dropped to the user (its exec of sh).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Status::read(pid).ok().map(|st| st.uids[0]) != Some(4243) {
            assert!(std::time::Instant::now() < deadline, "setpriv did not run");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let first = set(&fds(), me, 4243, pid.to_string().as_bytes());
        println!(
            "grant for {pid} (gids {:?}) by uid 4243: {first:?}",
            gids(pid)
        );
        assert_eq!(first, Ok(()));
        // The setgid exec.
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        while gids(pid)[1] != 4242 {
            assert!(
                std::time::Instant::now() < deadline,
                "the setgid exec did not happen"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let second = set(&fds(), me, 4243, pid.to_string().as_bytes());
        println!(
            "grant for {pid} (gids {:?}) by uid 4243: {second:?}",
            gids(pid)
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            second,
            Err(libc::EPERM),
            "the new group is not the caller's"
        );
    }

    /// A send naming a thread (`MsgHead::act_for`) is taken as that
    /// thread's only under a checked grant of the caller for exactly it:
    /// a caller with no grant naming its own child, a user naming root's
    /// child, a granted caller naming another child, and a target that
    /// exited are all refused.
    #[test]
    fn a_named_send_needs_a_checked_grant_for_exactly_that_thread() {
        let mut child = sleeper();
        let mut other = sleeper();
        let (pid, opid) = (child.id(), other.id());
        let plain = std::thread::spawn(move || caller_named(tid(), 0, 0, pid).map(|w| w.tid))
            .join()
            .unwrap();
        println!("thread without a grant names its child {pid}: {plain:?}");
        assert_eq!(plain, Err(libc::EPERM), "no grant, no acting for");
        let me = tid();
        let stranger = caller_named(me, 12345, 12345, pid).map(|w| w.tid);
        println!("uid 12345 names root's child {pid}: {stranger:?}");
        assert_eq!(stranger, Err(libc::EPERM));
        set(&fds(), me, 0, pid.to_string().as_bytes()).unwrap();
        assert_eq!(caller_named(me, 0, 0, pid).map(|w| w.tid), Ok(pid));
        let unchecked = caller_named(me, 0, 0, opid).map(|w| w.tid);
        println!("granted for {pid}, names {opid} never checked: {unchecked:?}");
        assert_eq!(unchecked, Err(libc::EPERM));
        // Checked once, then another target: both by name from then on.
        set(&fds(), me, 0, opid.to_string().as_bytes()).unwrap();
        assert_eq!(caller_named(me, 0, 0, pid).map(|w| w.tid), Ok(pid));
        assert_eq!(caller_named(me, 0, 0, opid).map(|w| w.tid), Ok(opid));
        // Another user's check is not this one's (the key holds the fsuid).
        let as_other = caller_named(me, 12345, 12345, pid).map(|w| w.tid);
        println!("checked as uid 0, named as uid 12345: {as_other:?}");
        assert_eq!(as_other, Err(libc::EPERM));
        other.kill().unwrap();
        other.wait().unwrap();
        let gone = caller_named(me, 0, 0, opid).map(|w| w.tid);
        println!("{opid} exited, named again: {gone:?}");
        assert_eq!(gone, Err(libc::EPERM));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A pid reused after its checked target exited names another process:
    /// refused (the checked target's pidfd, not the number, decides). The
    /// pid is made to come round again by ns_last_pid (root), tries until
    /// it does.
    #[test]
    fn a_named_send_for_a_reused_pid_is_refused() {
        let me = tid();
        for attempt in 0..200 {
            let mut first = sleeper();
            let pid = first.id();
            set(&fds(), me, 0, pid.to_string().as_bytes()).unwrap();
            assert_eq!(caller_named(me, 0, 0, pid).map(|w| w.tid), Ok(pid));
            // The grant held is for another target now: naming `pid`
            // again goes by its checked entry.
            let mut holder = sleeper();
            set(&fds(), me, 0, holder.id().to_string().as_bytes()).unwrap();
            holder.kill().unwrap();
            holder.wait().unwrap();
            first.kill().unwrap();
            first.wait().unwrap();
            if std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).is_err() {
                println!("no ns_last_pid to write: not root");
                return;
            }
            let mut second = sleeper();
            if second.id() != pid {
                second.kill().unwrap();
                second.wait().unwrap();
                continue;
            }
            let named = caller_named(me, 0, 0, pid).map(|w| w.tid);
            println!(
                "pid {pid} reused (attempt {attempt}) after its checked target exited, named: {named:?}"
            );
            second.kill().unwrap();
            second.wait().unwrap();
            assert_eq!(named, Err(libc::EPERM), "a reused pid is another process");
            return;
        }
        panic!("the pid never came round again");
    }

    /// The user name is the root's alone (the kernel lets only who may
    /// write the root set it there); the security name, CAP_SYS_ADMIN's
    /// alone, is taken on any file.
    #[test]
    fn both_names_on_any_file_and_nothing_else() {
        let me = tid();
        let other = ROOT_INO + 7;
        let user = set_xattr(&fds(), other, XATTR.as_bytes(), me, 0, b"x");
        let secure = set_xattr(&fds(), other, XATTR_SECURITY.as_bytes(), me, 0, b"x");
        println!("on inode {other}: user name {user:?}, security name {secure:?}");
        // EINVAL: the value was looked at, so the name was taken on that file.
        assert_eq!(user, Err(Errno::EINVAL), "the user name on a socket's file");
        assert_eq!(secure, Err(Errno::EINVAL), "the security name on any file");
        assert_eq!(
            set_xattr(&fds(), ROOT_INO, XATTR.as_bytes(), me, 0, b"x"),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            set_xattr(&fds(), other, b"user.other", me, 0, b"1"),
            Err(Errno::ENOTSUP)
        );
    }
}

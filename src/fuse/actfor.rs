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

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::errno::Errno;
use parking_lot::Mutex;

use crate::engine::tree::ROOT_INO;
use crate::engine::userns;
use crate::procfs::{self, Status};

pub const XATTR: &str = "user.udsfs.act_for";

struct Grant {
    /// The supervisor thread's process and its start time: a reused thread
    /// id never inherits a grant.
    tgid: i32,
    started: u64,
    target: u32,
    fsuid: u32,
    fsgid: u32,
    /// The target as granted: its process, start time and credentials.
    target_tgid: i32,
    target_started: u64,
    uids: [u32; 4],
    gids: [u32; 4],
    cap_eff: u64,
    /// "TID netns": sockets made under the grant are made in the network
    /// namespace the granting thread is in (the supervisor enters a kernel
    /// socket's namespace to make its udsfs stand-in there, as Linux keeps
    /// a socket in the namespace it was made in). It can only be in a
    /// namespace it could enter, where it could make sockets itself.
    granter_netns: bool,
    /// Pidfds of the supervisor's process and of the target's, opened once
    /// they were checked: each request asks whether they still name a
    /// process (a pid reused is another struct pid), instead of reading
    /// both start times from /proc (with the supervisor's status, three of
    /// the four /proc reads a request made: over half the daemon's time
    /// under `udsfs run`'s supervisor). None: not to be had; /proc decides.
    pidfds: Option<(OwnedFd, OwnedFd)>,
}

/// A pidfd of process `pid`.
fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: as above.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Is the process of `pidfd` still there (a zombie too, as its /proc entry
/// and start time stay until it is reaped)?
fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: signal 0 only checks; no memory is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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

/// Drops grant `tid` once the process of `sup` (its supervisor) has exited.
fn watch_exit(sup: &OwnedFd, tid: u32) {
    let ep = exits();
    if ep < 0 {
        return;
    }
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: u64::from(tid),
    };
    // SAFETY: `ev` is ours; a pidfd is readable once its process exited.
    // Closing the pidfd (the grant dropped) takes it out of the set.
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, sup.as_raw_fd(), &mut ev) };
}

/// The exits thread: each supervisor that exited loses its thread's grant
/// (unless a new grant with a living supervisor took that thread id).
fn reap_exits(ep: i32) {
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        // SAFETY: `evs` holds 64 events.
        let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 64, -1) };
        if n < 0 {
            continue;
        }
        let mut g = GRANTS.lock();
        let Some(map) = g.as_mut() else { continue };
        for ev in &evs[..n as usize] {
            let tid = ev.u64 as u32;
            let gone = map
                .get(&tid)
                .and_then(|gr| gr.pidfds.as_ref())
                .is_some_and(|(sup, _)| !alive(sup));
            if gone {
                map.remove(&tid);
            }
        }
        COUNT.store(map.len(), Ordering::Relaxed);
    }
}
/// How many grants there are: requests pay no lock while there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Past this many grants, those of threads gone are swept out before another
/// is made: a grant left by an exited thread is otherwise dropped only when
/// its thread id asks again, so threads that grant and exit would grow the map.
const SWEEP_AT: usize = 1024;
/// Grants that hold pidfds, at most (the daemon's descriptors are few).
const PIDFD_GRANTS: usize = 256;

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

/// `user.udsfs.act_for` set to `value` by thread `tid` (fsuid `uid`): a
/// thread id to act for, or empty / "0" to stop. Errno on refusal.
pub fn set(tid: u32, uid: u32, value: &[u8]) -> Result<(), i32> {
    let text = std::str::from_utf8(value).map_err(|_| libc::EINVAL)?;
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    let (text, granter_netns) = match text.split_once(' ') {
        Some((t, "netns")) => (t, true),
        Some(_) => return Err(libc::EINVAL),
        None => (text, false),
    };
    let target: u32 = if text.is_empty() {
        0
    } else {
        text.parse().map_err(|_| libc::EINVAL)?
    };
    let mut g = GRANTS.lock();
    let map = g.get_or_insert_with(HashMap::new);
    if target == 0 {
        map.remove(&tid);
        COUNT.store(map.len(), Ordering::Relaxed);
        return Ok(());
    }
    let me = Status::read(tid).map_err(|_| libc::ESRCH)?;
    let them = Status::read(target).map_err(|_| libc::ESRCH)?;
    if them.tgid == me.tgid || !in_tree(them.tgid, me.tgid) {
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
    // (Two descriptors a grant: past PIDFD_GRANTS grants, /proc alone.)
    let pidfds = if map.len() < PIDFD_GRANTS {
        pidfd(me.tgid).zip(pidfd(them.tgid))
    } else {
        None
    };
    let again = Status::read(target).map_err(|_| libc::ESRCH)?;
    if (again.tgid, again.uids, again.gids, again.cap_eff)
        != (them.tgid, them.uids, them.gids, them.cap_eff)
        || procfs::start_time(them.tgid) != Some(target_started)
    {
        return Err(libc::ESRCH);
    }
    if map.len() >= SWEEP_AT {
        map.retain(|t, g| {
            Status::read(*t).is_ok_and(|st| st.tgid == g.tgid)
                && procfs::start_time(g.tgid) == Some(g.started)
        });
    }
    if let Some((sup, _)) = &pidfds {
        watch_exit(sup, tid);
    }
    map.insert(
        tid,
        Grant {
            tgid: me.tgid,
            started,
            target,
            fsuid: them.uids[3],
            fsgid: them.gids[3],
            target_tgid: them.tgid,
            target_started,
            uids: them.uids,
            gids: them.gids,
            cap_eff: them.cap_eff,
            granter_netns,
            pidfds,
        },
    );
    COUNT.store(map.len(), Ordering::Relaxed);
    Ok(())
}

/// setxattr of `name` on inode `ino` by thread `tid` (fsuid `uid`): only
/// the mount root's `user.udsfs.act_for` is there to set.
pub(super) fn set_xattr(
    ino: u64,
    name: &[u8],
    tid: u32,
    uid: u32,
    value: &[u8],
) -> Result<(), Errno> {
    if ino != ROOT_INO || name != XATTR.as_bytes() {
        return Err(Errno::ENOTSUP);
    }
    set(tid, uid, value).map_err(Errno::from_raw)
}

/// Who a request is made for (`caller_of`).
pub struct ActFor {
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Under a grant, the target's status as checked.
    pub status: Option<Status>,
    /// Under a "netns" grant, the granting thread's network namespace.
    pub netns: Option<crate::engine::netns::NetNs>,
}

/// The (thread, fsuid, fsgid) a request of thread `tid` is made for, and
/// under a grant the target's status as checked: the request uses that one,
/// not a later read that a setuid exec in between could change.
pub fn caller_of(tid: u32, uid: u32, gid: u32) -> ActFor {
    let own = ActFor {
        tid,
        uid,
        gid,
        status: None,
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
    let (tgid, started, who) = (gr.tgid, gr.started, (gr.target, gr.fsuid, gr.fsgid));
    let (t_tgid, t_started, ids) = (
        gr.target_tgid,
        gr.target_started,
        (gr.uids, gr.gids, gr.cap_eff),
    );
    let has_pidfds = gr.pidfds.is_some();
    drop(g);
    // The grant's thread must still be the supervisor's, and the target the
    // same process with the same credentials (else: reused pid, setuid exec).
    let (same, target) = if has_pidfds {
        // A thread of the supervisor's process (the one granted, or one that
        // took its id since: the same process) and the target's status, read
        // before the pidfds are asked: alive after the reads, each process
        // was the one granted all along, so the reads were of it.
        let thread = std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists();
        let st = Status::read(who.0).ok();
        let g = GRANTS.lock();
        let lives = g
            .as_ref()
            .and_then(|m| m.get(&tid))
            .filter(|gr| (gr.started, gr.target_started) == (started, t_started))
            .and_then(|gr| gr.pidfds.as_ref())
            .is_some_and(|(sup, tgt)| alive(sup) && alive(tgt));
        drop(g);
        (
            thread && lives,
            st.filter(|st| lives && st.tgid == t_tgid && (st.uids, st.gids, st.cap_eff) == ids),
        )
    } else {
        let same = Status::read(tid).is_ok_and(|st| st.tgid == tgid)
            && procfs::start_time(tgid) == Some(started);
        let target = Status::read(who.0).ok().filter(|st| {
            st.tgid == t_tgid
                && (st.uids, st.gids, st.cap_eff) == ids
                && procfs::start_time(t_tgid) == Some(t_started)
        });
        (same, target)
    };
    if same && let Some(st) = target {
        // Read now: where the granting thread is for this request.
        let netns = granter_netns.then(|| {
            crate::engine::netns::of_thread(tid).unwrap_or_else(crate::engine::netns::unknown)
        });
        return ActFor {
            tid: who.0,
            uid: who.1,
            gid: who.2,
            status: Some(st),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tid() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }

    #[test]
    fn a_child_may_be_acted_for_and_a_stranger_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        let me = tid();
        assert_eq!(set(me, 0, b"1"), Err(libc::EPERM), "init is not below us");
        let own = std::process::id().to_string();
        assert_eq!(
            set(me, 0, own.as_bytes()),
            Err(libc::EPERM),
            "not ourselves"
        );
        assert_eq!(set(me, 0, b"x"), Err(libc::EINVAL));
        set(me, 0, pid.to_string().as_bytes()).unwrap();
        assert_eq!(caller_of(me, 0, 0).tid, pid);
        assert!(
            caller_of(me, 0, 0).status.is_some(),
            "the status checked comes along"
        );
        assert_eq!(
            caller_of(me + 1, 7, 8).tid,
            me + 1,
            "only the granted thread"
        );
        assert!(caller_of(me, 0, 0).netns.is_none());
        set(me, 0, format!("{pid} netns").as_bytes()).unwrap();
        let own_ns = crate::engine::netns::of_thread(me);
        assert_eq!(caller_of(me, 0, 0).netns, own_ns, "the granter's namespace");
        assert_eq!(set(me, 0, format!("{pid} x").as_bytes()), Err(libc::EINVAL));
        set(me, 0, b"0").unwrap();
        assert_eq!(caller_of(me, 0, 0).tid, me);
        // Another user may not act for it (unless root: uid 0 above).
        assert_eq!(set(me, 12345, pid.to_string().as_bytes()), Err(libc::EPERM));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn grants_of_exited_threads_are_swept() {
        let mut child = std::process::Command::new("sleep")
            .arg("20")
            .spawn()
            .unwrap();
        let pid = child.id().to_string();
        for _ in 0..SWEEP_AT + 10 {
            let p = pid.clone();
            std::thread::spawn(move || set(tid(), 0, p.as_bytes()).unwrap())
                .join()
                .unwrap();
        }
        let n = GRANTS.lock().as_ref().map_or(0, |m| m.len());
        assert!(n <= SWEEP_AT, "{n} grants kept for exited threads");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

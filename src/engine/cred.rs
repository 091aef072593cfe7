//! Who is calling. A FUSE request carries a thread id and the fsuid/fsgid; the
//! rest (thread-group id, real and effective ids, umask, groups) is read from
//! `/proc/<tid>/status`, once, and only when an operation needs it.

use std::sync::OnceLock;

use nix::errno::Errno;
use std::time::{Duration, Instant};

use super::log_limit::LogLimit;
use super::netns::{self, NetNs};
use super::userns::{self, Holder, UserNs};
use crate::sharded::ShardedMap;

use crate::procfs;

/// Credentials as SCM_CREDENTIALS and SO_PEERCRED carry them: the wire's
/// `Cred`, which the fronts and the `msg` records carry too.
pub use udsfs_proto::Cred as Ucred;

/// Which of `ProcStatus::uids` and `gids` is the real id, and which the
/// effective one.
const REAL: usize = 0;
const EFFECTIVE: usize = 1;

/// The caller's `/proc/<tid>/status`, as the supervisor and the act-for
/// checks read it too.
pub type ProcStatus = procfs::Status;

/// Statuses read lately, by thread id, for SCM_CREDENTIALS only, on kernels
/// without PIDFD_GET_INFO (before 6.13; `pidfd_creds` answers first). A
/// thread that sends with credentials sends many messages: reading /proc for
/// each halves the throughput. An entry serves for a short
/// while and only while the request's fsuid/fsgid still match it, so
/// setuid() is seen at once; there a change of the real ids alone is seen
/// within `CACHE_FRESH`. Permission checks, umask and SO_PEERCRED always
/// read afresh.
const CACHE_FRESH: Duration = Duration::from_millis(200);
/// Entries per shard before stale ones are swept out.
const CACHE_MAX: usize = 1024;

struct Cached {
    at: Instant,
    fsuid: u32,
    fsgid: u32,
    status: ProcStatus,
}

fn cache() -> &'static ShardedMap<u32, Cached> {
    static CACHE: OnceLock<ShardedMap<u32, Cached>> = OnceLock::new();
    CACHE.get_or_init(ShardedMap::new)
}

fn cache_get(tid: u32, fsuid: u32, fsgid: u32) -> Option<ProcStatus> {
    let shard = cache().shard(&tid);
    let c = shard.get(&tid)?;
    (c.fsuid == fsuid && c.fsgid == fsgid && c.at.elapsed() < CACHE_FRESH).then(|| c.status.clone())
}

fn cache_put(tid: u32, fsuid: u32, fsgid: u32, status: &ProcStatus) {
    let mut shard = cache().shard(&tid);
    if shard.len() >= CACHE_MAX {
        shard.retain(|_, c| c.at.elapsed() < CACHE_FRESH);
    }
    shard.insert(
        tid,
        Cached {
            at: Instant::now(),
            fsuid,
            fsgid,
            status: status.clone(),
        },
    );
}

/// struct pidfd_info up to exit_code (PIDFD_INFO_SIZE_VER0, linux/pidfd.h).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

/// PIDFD_GET_INFO: _IOWR(PIDFS_IOCTL_MAGIC, 11, struct pidfd_info).
const PIDFD_GET_INFO: u64 =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as u64) << 16) | (0xff << 8) | 11;
const PIDFD_INFO_PID: u64 = 1;
const PIDFD_INFO_CREDS: u64 = 2;
/// pidfd_open's flag for a thread id (O_EXCL).
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// Thread `tid`'s thread-group id and real ids as the kernel has them now
/// (Linux 6.13 and later; None before, or when the thread is gone).
fn pidfd_creds(tid: u32) -> Option<Ucred> {
    // SAFETY: pidfd_open takes a pid and flags; the fd is closed below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if fd < 0 {
        return None;
    }
    let ids = pidfd_ids(fd as i32);
    // SAFETY: closes the pidfd opened above.
    unsafe { libc::close(fd as i32) };
    let (tgid, uids, gids) = ids.ok()?;
    Some(Ucred {
        pid: tgid,
        uid: uids[REAL],
        gid: gids[REAL],
    })
}

/// The thread-group id and the (real, effective, saved, fs) uids and gids
/// of the task of `pidfd` as the kernel has them now: one PIDFD_GET_INFO
/// (Linux 6.13 and later; ENOTTY or EINVAL before, ESRCH once the task is
/// gone).
pub fn pidfd_ids(pidfd: i32) -> Result<(i32, [u32; 4], [u32; 4]), Errno> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_PID | PIDFD_INFO_CREDS,
        ..Default::default()
    };
    // SAFETY: the ioctl fills at most size_of::<PidfdInfo>() bytes of info.
    let r = unsafe { libc::ioctl(pidfd, PIDFD_GET_INFO as _, &mut info as *mut PidfdInfo) };
    if r != 0 {
        return Err(Errno::last());
    }
    let want = PIDFD_INFO_PID | PIDFD_INFO_CREDS;
    if info.mask & want != want {
        return Err(Errno::EINVAL);
    }
    Ok((
        info.tgid as i32,
        [info.ruid, info.euid, info.suid, info.fsuid],
        [info.rgid, info.egid, info.sgid, info.fsgid],
    ))
}

/// A thread's process, ids and effective capabilities as an act-for grant
/// checked them (src/fuse/actfor.rs) at the start of a request made under
/// it: the request speaks with these, as a Linux system call keeps the
/// credentials it started with, whatever its status says when read later
/// (a target that is not trapped may exec a setuid program meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedCreds {
    pub tgid: i32,
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    pub cap_eff: u64,
}

impl CheckedCreds {
    pub fn of(st: &ProcStatus) -> CheckedCreds {
        CheckedCreds {
            tgid: st.tgid,
            uids: st.uids,
            gids: st.gids,
            cap_eff: st.cap_eff,
        }
    }

    /// `st` with these ids and capabilities in place of its own.
    fn stamped(&self, mut st: ProcStatus) -> ProcStatus {
        st.tgid = self.tgid;
        st.uids = self.uids;
        st.gids = self.gids;
        st.cap_eff = self.cap_eff;
        st
    }
}

/// Capability numbers (linux/capability.h).
const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;
const CAP_SYS_ADMIN: u32 = 21;

/// The caller of one operation.
pub struct Caller {
    pub tid: u32,
    pub fsuid: u32,
    pub fsgid: u32,
    /// The FUSE request's id (0: not a FUSE request): a FUSE_INTERRUPT names it.
    pub unique: u64,
    status: OnceLock<ProcStatus>,
    netns: OnceLock<NetNs>,
    /// The thread `netns` is read from (the caller's own unless a "netns"
    /// grant names the granter's; 0: a number given alone, tests): the
    /// namespace a new socket's pin opens (netns_pin.rs).
    netns_of: u32,
    userns: OnceLock<Option<UserNs>>,
    /// Under an act-for grant: the target's credentials as checked for
    /// this request (`with_checked`).
    checked: Option<CheckedCreds>,
}

impl Caller {
    pub fn new(tid: u32, fsuid: u32, fsgid: u32) -> Caller {
        Caller {
            tid,
            fsuid,
            fsgid,
            unique: 0,
            status: OnceLock::new(),
            netns: OnceLock::new(),
            netns_of: tid,
            userns: OnceLock::new(),
            checked: None,
        }
    }

    /// This process itself (in-process users of the engine).
    pub fn current() -> Caller {
        let tid = nix::unistd::gettid().as_raw() as u32;
        Caller::new(
            tid,
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    }

    /// The caller of a retried request: its ids, and the status read for it
    /// when the request came (a retry need not read `/proc` again, and a
    /// caller made in-process keeps the status it was given).
    pub fn again(tid: u32, fsuid: u32, fsgid: u32, status: Option<ProcStatus>) -> Caller {
        let c = Caller::new(tid, fsuid, fsgid);
        if let Some(st) = status {
            let _ = c.status.set(st);
        }
        c
    }

    /// The user namespace, if it was read already (None inside: unknown).
    pub fn known_userns(&self) -> Option<Option<UserNs>> {
        self.userns.get().copied()
    }

    /// The caller with the user namespace read for an earlier attempt of
    /// the same request (`known_userns`): a thread blocked in a request
    /// cannot change its own user namespace meanwhile (unshare and setns of
    /// a user namespace act on the calling thread of a single-threaded
    /// process).
    pub fn knowing_userns(self, ns: Option<Option<UserNs>>) -> Caller {
        if let Some(ns) = ns {
            let _ = self.userns.set(ns);
        }
        self
    }

    /// A caller whose credentials an act-for grant checked at the start of
    /// the request (src/fuse/actfor.rs): its status, read when an operation
    /// needs it, carries these ids and capabilities, and SCM_CREDENTIALS
    /// take them without a look at the kernel.
    pub fn with_checked(mut self, checked: Option<CheckedCreds>) -> Caller {
        self.checked = checked;
        self
    }

    /// The credentials checked for this request, if any (`with_checked`),
    /// for a retry of it.
    pub fn checked(&self) -> Option<CheckedCreds> {
        self.checked
    }

    /// The status, if it was read already.
    pub fn known_status(&self) -> Option<&ProcStatus> {
        self.status.get()
    }

    /// A caller with known ids and no process behind it (tests).
    /// It stands in the daemon's user namespace.
    pub fn with_status(tid: u32, status: ProcStatus) -> Caller {
        let c = Caller::new(tid, status.uids[3], status.gids[3]);
        let _ = c.status.set(status);
        let _ = c.userns.set(userns::own());
        c
    }

    /// The process status; a vanished process reads as its fs ids with no groups.
    pub fn status(&self) -> &ProcStatus {
        self.status.get_or_init(|| {
            let st = ProcStatus::read(self.tid).unwrap_or_else(|_| ProcStatus {
                tgid: self.tid as i32,
                uids: [self.fsuid; 4],
                gids: [self.fsgid; 4],
                umask: 0o022,
                ..ProcStatus::default()
            });
            if let Some(k) = self.checked {
                // (Not cached: the ids are this request's, not the thread's.)
                return k.stamped(st);
            }
            cache_put(self.tid, self.fsuid, self.fsgid, &st);
            st
        })
    }

    /// A caller in network namespace `ns`, a number with no thread behind
    /// it (tests): its sockets hold no namespace open.
    pub fn in_netns(self, ns: NetNs) -> Caller {
        self.in_netns_of(ns, 0)
    }

    /// A caller in network namespace `ns`, which thread `tid` is in (a
    /// supervisor's "netns" act-for grant, src/fuse/actfor.rs: the granter).
    pub fn in_netns_of(mut self, ns: NetNs, tid: u32) -> Caller {
        let _ = self.netns.set(ns);
        self.netns_of = tid;
        self
    }

    /// The thread the caller's network namespace is read from (0: none).
    pub fn netns_thread(&self) -> u32 {
        self.netns_of
    }

    /// The caller's network namespace, read once, when it makes a socket
    /// (the socket's for good) or looks in `.udsfs/abstract/` (one readlink
    /// of `/proc/<tid>/ns/net`).
    pub fn netns(&self) -> NetNs {
        *self.netns.get_or_init(|| {
            if self.tid == 0 {
                // Outside the daemon's pid namespace: its namespace cannot be
                // read, so it reaches no namespace's names (fail closed).
                log::debug!("a caller with pid 0: netns unknown, it finds no abstract names");
                return netns::unknown();
            }
            match procfs::ns_link(self.tid, "net") {
                Ok(ns) => ns,
                // Alive, but the daemon may not look.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                    netns::of_unreadable(self.tid)
                }
                Err(_) => {
                    log::info!(
                        "thread {} is gone: its netns is taken as the daemon's",
                        self.tid
                    );
                    netns::own()
                }
            }
        })
    }

    pub fn is_root(&self) -> bool {
        self.fsuid == 0
    }

    /// The caller's user namespace, read after its status (so that the
    /// CapEff read belongs to this namespace or an ancestor of it: a task
    /// never moves to an ancestor, see userns.rs). None: unknown.
    fn userns(&self) -> Option<UserNs> {
        let _ = self.status();
        *self
            .userns
            .get_or_init(|| procfs::ns_inode(self.tid, "user"))
    }

    /// The caller as a capability check sees it; None (no capability at
    /// all) when its namespace cannot be read.
    fn holder(&self) -> Option<Holder> {
        let ns = self.userns()?;
        let st = self.status();
        Some(Holder {
            ns,
            euid: st.uids[EFFECTIVE],
            cap_eff: st.cap_eff,
        })
    }

    /// A capability in the caller's own user namespace (CapEff is held
    /// there): `ns_capable(current_user_ns(), cap)`.
    fn has_own_cap(&self, cap: u32) -> bool {
        self.status().cap_eff & (1 << cap) != 0
    }

    /// CAP_SYS_ADMIN over the caller's pid namespace (its owning user
    /// namespace), which naming another process's pid needs.
    fn pid_ns_admin(&self) -> bool {
        let Some(h) = self.holder() else { return false };
        userns::pid_ns_owner(self.tid).is_some_and(|owner| h.capable_in(owner, CAP_SYS_ADMIN))
    }

    /// Where the caller stands among user namespaces; one known to be in
    /// the daemon's (`with_status`) without a look at /proc.
    fn standing(&self) -> userns::Standing {
        match self.userns.get() {
            Some(Some(ns)) if Some(*ns) == userns::own() => userns::Standing::Own,
            _ => userns::standing(self.tid),
        }
    }

    /// Explicit SCM_CREDENTIALS uid and gid, which the caller names in its
    /// own user namespace, in the daemon's (make_kuid/make_kgid): EINVAL
    /// for an id its namespace does not map ((u32)-1 never is); EPERM when
    /// the caller's namespace cannot be read (fail closed).
    pub fn claimed_ids(&self, c: Ucred) -> Result<Ucred, Errno> {
        let m = match self.standing() {
            userns::Standing::Own if c.uid == u32::MAX || c.gid == u32::MAX => {
                return Err(Errno::EINVAL);
            }
            userns::Standing::Own => return Ok(c),
            userns::Standing::Other(m) => m,
            userns::Standing::Unknown => {
                static LIMIT: OnceLock<LogLimit> = OnceLock::new();
                if let Some(left_out) = LIMIT.get_or_init(LogLimit::default).admit() {
                    log::info!(
                        "thread {}: its user namespace cannot be read: SCM_CREDENTIALS refused (EPERM; {left_out} more left out)",
                        self.tid
                    );
                }
                return Err(Errno::EPERM);
            }
        };
        match (m.uid.to_outside(c.uid), m.gid.to_outside(c.gid)) {
            (Some(uid), Some(gid)) => Ok(Ucred { uid, gid, ..c }),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Explicit SCM_CREDENTIALS (the ids in the daemon's namespace, see
    /// `claimed_ids`) as scm_check_creds allows them: EINVAL for uid or
    /// gid -1; another process's pid needs CAP_SYS_ADMIN over the caller's
    /// pid namespace, a uid other than the real, effective or saved one
    /// CAP_SETUID, a gid likewise CAP_SETGID (in the caller's own user
    /// namespace: effective capabilities, read afresh; uid 0 alone is not
    /// enough); ESRCH for a pid that does not exist.
    pub fn check_creds(&self, c: &Ucred) -> Result<(), Errno> {
        if c.uid == u32::MAX || c.gid == u32::MAX {
            return Err(Errno::EINVAL);
        }
        let st = self.status();
        let uid_ok = st.uids[..3].contains(&c.uid) || self.has_own_cap(CAP_SETUID);
        let gid_ok = st.gids[..3].contains(&c.gid) || self.has_own_cap(CAP_SETGID);
        let pid_ok = uid_ok && gid_ok && (c.pid == st.tgid || self.pid_ns_admin());
        if !pid_ok {
            return Err(Errno::EPERM);
        }
        if !procfs::exists(c.pid) {
            return Err(Errno::ESRCH);
        }
        Ok(())
    }

    /// CAP_NET_ADMIN (bit 12) in the daemon's user namespace (`capable()`:
    /// held by a task in it only), which SO_SNDBUFFORCE and SO_RCVBUFFORCE
    /// need.
    pub fn has_cap_net_admin(&self) -> bool {
        self.holder().is_some_and(|h| h.capable(12))
    }

    /// CAP_NET_RAW (bit 13) or CAP_NET_ADMIN in the daemon's user namespace,
    /// which an SO_PRIORITY outside 0..=6 needs. Linux asks the owner of the
    /// socket's network namespace; the daemon's stands for it here.
    pub fn has_cap_net_raw_or_admin(&self) -> bool {
        self.holder()
            .is_some_and(|h| h.capable(13) || h.capable(12))
    }

    pub fn umask(&self) -> u32 {
        self.status().umask
    }

    /// SCM_CREDENTIALS: thread-group id, real uid, real gid. The hot path
    /// of credential-carrying messages: from a pidfd of the thread (three
    /// system calls, and a setresuid is seen at once), else from a fresh
    /// cached status.
    pub fn scm_creds(&self) -> Ucred {
        if let Some(k) = self.checked {
            return Ucred {
                pid: k.tgid,
                uid: k.uids[REAL],
                gid: k.gids[REAL],
            };
        }
        if self.status.get().is_none()
            && let Some(c) = pidfd_creds(self.tid)
        {
            return c;
        }
        self.use_cached_status();
        self.status_creds(REAL)
    }

    /// The caller's thread-group id, for labels (a capture's sender, a fault
    /// rule's pid): from the status when read, else from the status cache
    /// (fresh for `CACHE_FRESH`), so a busy sender does not read /proc for
    /// every message.
    pub fn tgid(&self) -> u32 {
        self.use_cached_status();
        self.status().tgid as u32
    }

    /// Takes a fresh cached status (same thread and fs ids, younger than
    /// `CACHE_FRESH`) when none was read yet, so `status()` need not read /proc.
    fn use_cached_status(&self) {
        if self.status.get().is_none()
            && self.checked.is_none()
            && let Some(st) = cache_get(self.tid, self.fsuid, self.fsgid)
        {
            let _ = self.status.set(st);
        }
    }

    /// SO_PEERCRED: thread-group id, effective uid, effective gid.
    pub fn peer_creds(&self) -> Ucred {
        self.status_creds(EFFECTIVE)
    }

    /// SO_PEERGROUPS: the supplementary groups, when SO_PEERCRED is taken.
    pub fn peer_groups(&self) -> std::sync::Arc<[u32]> {
        self.status().groups.as_slice().into()
    }

    /// The thread group with one of its id pairs (`REAL`, `EFFECTIVE`).
    fn status_creds(&self, which: usize) -> Ucred {
        let st = self.status();
        Ucred {
            pid: st.tgid,
            uid: st.uids[which],
            gid: st.gids[which],
        }
    }

    /// The soft RLIMIT_NOFILE of the caller's process; 0 when it cannot
    /// be read (fail closed: nothing is passed or kept on its account).
    pub fn nofile_limit(&self) -> usize {
        procfs::nofile_limit(self.status().tgid).unwrap_or(0)
    }

    /// Whether `gid` is the caller's fsgid or one of its supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        gid == self.fsgid || self.status().groups.contains(&gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let text = "Name:\tx\nUmask:\t0027\nTgid:\t42\nPid:\t43\nUid:\t1000\t65534\t2000\t65534\nGid:\t10\t11\t12\t11\nGroups:\t4 24 27 \n";
        let st = ProcStatus::parse(text);
        assert_eq!(st.tgid, 42);
        assert_eq!(st.umask, 0o027);
        assert_eq!(st.uids, [1000, 65534, 2000, 65534]);
        assert_eq!(st.gids, [10, 11, 12, 11]);
        assert_eq!(st.groups, vec![4, 24, 27]);
    }

    #[test]
    fn cache_serves_only_matching_fresh_entries() {
        let tid = u32::MAX - 7;
        let st = ProcStatus {
            tgid: 9,
            ..Default::default()
        };
        cache_put(tid, 1000, 100, &st);
        assert_eq!(cache_get(tid, 1000, 100).map(|s| s.tgid), Some(9));
        // setuid() is seen at once: other fs ids miss.
        assert!(cache_get(tid, 0, 100).is_none());
        assert!(cache_get(tid + 1, 1000, 100).is_none());
    }

    #[test]
    fn forged_credentials_need_capabilities_not_uid_0() {
        let me = std::process::id() as i32;
        let root = |cap_eff: u64| {
            Caller::with_status(
                me as u32,
                ProcStatus {
                    tgid: me,
                    cap_eff,
                    ..Default::default()
                },
            )
        };
        let own = Ucred {
            pid: me,
            uid: 0,
            gid: 0,
        };
        let other_pid = Ucred { pid: 1, ..own };
        let other_uid = Ucred { uid: 65534, ..own };
        let other_gid = Ucred { gid: 65534, ..own };
        let all = root(!0);
        for c in [own, other_pid, other_uid, other_gid] {
            assert_eq!(all.check_creds(&c), Ok(()));
        }
        let no_admin = root(!(1 << CAP_SYS_ADMIN));
        assert_eq!(no_admin.check_creds(&own), Ok(()));
        assert_eq!(no_admin.check_creds(&other_pid), Err(Errno::EPERM));
        assert_eq!(no_admin.check_creds(&other_uid), Ok(()));
        let no_setid = root(!((1 << CAP_SETUID) | (1 << CAP_SETGID)));
        assert_eq!(no_setid.check_creds(&other_pid), Ok(()));
        assert_eq!(no_setid.check_creds(&other_uid), Err(Errno::EPERM));
        assert_eq!(no_setid.check_creds(&other_gid), Err(Errno::EPERM));
        let bad = Ucred {
            uid: u32::MAX,
            ..own
        };
        assert_eq!(all.check_creds(&bad), Err(Errno::EINVAL));
    }

    #[test]
    fn claimed_ids_in_the_daemons_user_namespace_are_the_ids() {
        let me = Caller::current();
        let c = Ucred {
            pid: 1,
            uid: 1000,
            gid: 7,
        };
        assert_eq!(me.claimed_ids(c), Ok(c), "the identity map");
        let minus_one = Ucred { uid: u32::MAX, ..c };
        assert_eq!(me.claimed_ids(minus_one), Err(Errno::EINVAL));
        let gone = Caller::new(0, 0, 0);
        assert_eq!(gone.claimed_ids(c), Err(Errno::EPERM), "unknown: refused");
        assert!(!gone.has_cap_net_admin(), "unknown: no capability");
    }

    #[test]
    fn nofile_limit_fails_closed() {
        let st = ProcStatus {
            tgid: i32::MAX - 3,
            ..Default::default()
        };
        assert_eq!(Caller::with_status(1, st).nofile_limit(), 0);
        assert!(Caller::current().nofile_limit() > 0);
    }

    #[test]
    fn reads_this_process() {
        let c = Caller::current();
        assert_eq!(c.scm_creds().pid, std::process::id() as i32);
        let p = pidfd_creds(c.tid).expect("PIDFD_GET_INFO (Linux 6.13) on this kernel");
        assert_eq!(p.pid, std::process::id() as i32);
        assert_eq!(p.uid, nix::unistd::getuid().as_raw());
        assert_eq!(p.gid, nix::unistd::getgid().as_raw());
    }
}

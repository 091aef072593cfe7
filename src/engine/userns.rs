//! User namespaces. The daemon sees every caller's ids in its own user
//! namespace (FUSE gives the fsuid there, `/proc/<tid>/status` shows the
//! ids there), but Linux maps the ids a process names (SCM_CREDENTIALS)
//! through the process's own namespace (`make_kuid`: an id with no mapping
//! is EINVAL) and the ids a process is shown (SO_PEERCRED, received
//! SCM_CREDENTIALS) into the process's namespace (`from_kuid_munged`: an id
//! with no mapping is the overflow id). And a capability (`CapEff`) is held
//! in the task's own namespace only: `capable()` asks the initial one.
//!
//! A task in the daemon's own namespace (the common case) costs one
//! readlink of `/proc/<tid>/ns/user`; the maps are read only for a task in
//! another one, and never cached: a namespace's inode number is reused
//! once it is gone, so a map kept by inode could be another namespace's.
//! A task never goes back to an ancestor namespace (setns needs
//! CAP_SYS_ADMIN in the target; unshare makes a child), so a task read in
//! the daemon's namespace after its status was read was in it when the
//! status was read: callers read the status first (`Caller::userns`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use crate::procfs::{self, IdExtent};

/// A user namespace, by its nsfs inode number.
pub type UserNs = u64;

/// The daemon's own user namespace.
pub fn own() -> Option<UserNs> {
    static OWN: OnceLock<Option<UserNs>> = OnceLock::new();
    *OWN.get_or_init(|| procfs::ns_inode(std::process::id(), "user"))
}

/// The overflow uid and gid (kernel.overflowuid, kernel.overflowgid): what
/// an id with no mapping in the reader's namespace shows as.
fn overflow() -> (u32, u32) {
    static V: OnceLock<(u32, u32)> = OnceLock::new();
    *V.get_or_init(|| {
        let read = |n| procfs::sysctl(n).and_then(|v| u32::try_from(v).ok());
        (
            read("kernel.overflowuid").unwrap_or(65534),
            read("kernel.overflowgid").unwrap_or(65534),
        )
    })
}

/// One namespace's uid_map or gid_map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdMap(pub Vec<IdExtent>);

impl IdMap {
    /// `make_kuid`: id `id` of the namespace in the daemon's terms; None
    /// when the map does not cover it ((u32)-1 never is).
    pub fn to_outside(&self, id: u32) -> Option<u32> {
        if id == u32::MAX {
            return None;
        }
        self.0.iter().find_map(|e| {
            let off = id.checked_sub(e.inside)?;
            (off < e.count)
                .then(|| e.outside.checked_add(off))
                .flatten()
        })
    }

    /// `from_kuid`: the daemon's id `id` in the namespace; None when no
    /// line maps it.
    pub fn to_inside(&self, id: u32) -> Option<u32> {
        if id == u32::MAX {
            return None;
        }
        self.0.iter().find_map(|e| {
            let off = id.checked_sub(e.outside)?;
            (off < e.count).then(|| e.inside.checked_add(off)).flatten()
        })
    }
}

/// Both maps of a namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Maps {
    pub uid: IdMap,
    pub gid: IdMap,
}

impl Maps {
    /// `from_kuid_munged` of a uid and gid: the overflow ids where unmapped.
    pub fn shown(&self, uid: u32, gid: u32) -> (u32, u32) {
        let (ou, og) = overflow();
        (
            self.uid.to_inside(uid).unwrap_or(ou),
            self.gid.to_inside(gid).unwrap_or(og),
        )
    }
}

/// Where a task stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// In the daemon's namespace: ids are the same on both sides.
    Own,
    /// In another one, with its maps.
    Other(Maps),
    /// Gone, not visible, or it changed namespace while its maps were read
    /// (the callers fail closed).
    Unknown,
}

/// Where task `tid` stands.
pub fn standing(tid: u32) -> Standing {
    let Some(ns) = procfs::ns_inode(tid, "user") else {
        return by_maps(tid);
    };
    if Some(ns) == own() {
        return Standing::Own;
    }
    let Some(maps) = maps_of(tid) else {
        return Standing::Unknown;
    };
    // The maps must be those of the namespace the task was found in.
    if procfs::ns_inode(tid, "user") != Some(ns) {
        return Standing::Unknown;
    }
    Standing::Other(maps)
}

/// Where task `tid` stands by its maps alone, for a task whose namespace
/// link the daemon may not read (another user's process, to a daemon that
/// is not root: the link needs ptrace access, the maps anyone may read).
/// Read from the initial namespace the maps are in the daemon's terms, and
/// an identity map maps ids as the daemon's own namespace does; a daemon
/// in another namespace cannot tell (Unknown). Enough for ids; a
/// capability check still needs the namespace itself (`Caller::holder`).
fn by_maps(tid: u32) -> Standing {
    if !daemon_in_initial() {
        return Standing::Unknown;
    }
    let Some(maps) = maps_of(tid) else {
        return Standing::Unknown;
    };
    let identity = |m: &IdMap| m.0 == [IDENTITY];
    if identity(&maps.uid) && identity(&maps.gid) {
        return Standing::Own;
    }
    Standing::Other(maps)
}

/// Task `tid`'s uid and gid maps, or None when either cannot be read.
fn maps_of(tid: u32) -> Option<Maps> {
    Some(Maps {
        uid: IdMap(procfs::id_map(tid, "uid_map").ok()?),
        gid: IdMap(procfs::id_map(tid, "gid_map").ok()?),
    })
}

/// The initial namespace's map, as read in it.
const IDENTITY: IdExtent = IdExtent {
    inside: 0,
    outside: 0,
    count: u32::MAX,
};

/// Whether the daemon is in the initial user namespace (its own uid_map,
/// read in it, is the identity).
fn daemon_in_initial() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| procfs::id_map(std::process::id(), "uid_map").is_ok_and(|m| m == [IDENTITY]))
}

/// A uid and gid of the daemon's namespace as task `viewer` is shown them
/// (SO_PEERCRED, received SCM_CREDENTIALS): unchanged in the daemon's
/// namespace, mapped into another one, the overflow ids where that cannot
/// be read (fail closed: nothing of the daemon's view leaks).
pub fn shown_to(viewer: u32, uid: u32, gid: u32) -> (u32, u32) {
    match standing(viewer) {
        Standing::Own => (uid, gid),
        Standing::Other(m) => m.shown(uid, gid),
        Standing::Unknown => overflow(),
    }
}

/// NS_GET_USERNS, NS_GET_PARENT, NS_GET_OWNER_UID (linux/nsfs.h: _IO(0xb7, n)).
const NS_GET_USERNS: u64 = 0xb701;
const NS_GET_PARENT: u64 = 0xb702;
const NS_GET_OWNER_UID: u64 = 0xb704;

fn ns_ioctl_fd(fd: &OwnedFd, op: u64) -> Option<OwnedFd> {
    // SAFETY: these ioctls take no argument and return a new descriptor.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), op as _) };
    // SAFETY: a non-negative return is a descriptor the kernel just made ours.
    (r >= 0).then(|| unsafe { OwnedFd::from_raw_fd(r) })
}

fn inode(fd: &OwnedFd) -> Option<u64> {
    std::fs::File::from(fd.try_clone().ok()?)
        .metadata()
        .ok()
        .map(|m| m.ino())
}

fn owner_uid(fd: &OwnedFd) -> Option<u32> {
    let mut uid: libc::uid_t = 0;
    // SAFETY: NS_GET_OWNER_UID writes one uid_t to the pointer.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_OWNER_UID as _, &mut uid) };
    (r == 0).then_some(uid)
}

/// Is task `tid`'s mount namespace the daemon's own, or one made by a
/// process privileged in the daemon's user namespace (its owner is that
/// namespace)? A mount namespace an unprivileged user made (under a user
/// namespace of its own) can show any directory at any path, so what it
/// shows decides nothing for others (src/engine/kernel_dirs.rs).
pub fn mnt_ns_trusted(tid: u32) -> bool {
    if tid == 0 {
        return false;
    }
    let (Some(theirs), Some(ours)) = (
        procfs::ns_inode(tid, "mnt"),
        procfs::ns_inode(std::process::id(), "mnt"),
    ) else {
        return false;
    };
    if theirs == ours {
        return true;
    }
    let owner = procfs::open_ns(tid, "mnt")
        .ok()
        .and_then(|ns| ns_ioctl_fd(&ns, NS_GET_USERNS))
        .and_then(|u| inode(&u));
    owner.is_some() && owner == procfs::ns_inode(std::process::id(), "user")
}

/// The user namespace that owns task `tid`'s pid namespace (the one
/// `ns_capable(task_active_pid_ns(current)->user_ns, ...)` asks).
pub fn pid_ns_owner(tid: u32) -> Option<OwnedFd> {
    let pidns = procfs::open_ns(tid, "pid").ok()?;
    ns_ioctl_fd(&pidns, NS_GET_USERNS)
}

/// A task's standing for a capability check: its user namespace, its
/// effective uid (the daemon's terms) and its CapEff (held in `ns`).
#[derive(Clone, Copy, Debug)]
pub struct Holder {
    pub ns: UserNs,
    pub euid: u32,
    pub cap_eff: u64,
}

impl Holder {
    fn has(&self, cap: u32) -> bool {
        self.cap_eff & (1u64 << cap) != 0
    }

    /// `capable(cap)`: held in the daemon's namespace (standing in for the
    /// initial one): only by a task in it. A task in a child namespace holds
    /// nothing here; one in an ancestor is not expected (fail closed).
    pub fn capable(&self, cap: u32) -> bool {
        Some(self.ns) == own() && self.has(cap)
    }

    /// `ns_capable(target, cap)` as cap_capable decides: in its own
    /// namespace by its CapEff; in a namespace below it every capability
    /// when its euid owns the child of its namespace on the way down; in
    /// any other none. Fails closed where the namespaces cannot be walked.
    pub fn capable_in(&self, target: OwnedFd, cap: u32) -> bool {
        let mut ns = target;
        // 32 levels of user namespaces at most; one more to be sure.
        for _ in 0..34 {
            let Some(ino) = inode(&ns) else { return false };
            if ino == self.ns {
                return self.has(cap);
            }
            let Some(parent) = ns_ioctl_fd(&ns, NS_GET_PARENT) else {
                return false;
            };
            if inode(&parent) == Some(self.ns) && owner_uid(&ns) == Some(self.euid) {
                return true;
            }
            ns = parent;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(lines: &str) -> IdMap {
        IdMap(procfs::parse_id_map(lines))
    }

    #[test]
    fn make_kuid_and_from_kuid_follow_the_map() {
        let m = map("0 65534 1\n");
        assert_eq!(m.to_outside(0), Some(65534));
        assert_eq!(m.to_outside(1), None);
        assert_eq!(m.to_outside(1000), None);
        assert_eq!(m.to_inside(65534), Some(0));
        assert_eq!(m.to_inside(0), None);
        // Several lines, ranges, their ends.
        let m = map("0 1000 1\n1 100000 65536\n70000 5 10\n");
        assert_eq!(m.to_outside(0), Some(1000));
        assert_eq!(m.to_outside(1), Some(100000));
        assert_eq!(m.to_outside(65536), Some(165535));
        assert_eq!(m.to_outside(65537), None);
        assert_eq!(m.to_outside(70009), Some(14));
        assert_eq!(m.to_outside(70010), None);
        assert_eq!(m.to_inside(1000), Some(0));
        assert_eq!(m.to_inside(165535), Some(65536));
        assert_eq!(m.to_inside(165536), None);
        assert_eq!(m.to_inside(5), Some(70000));
        assert_eq!(m.to_inside(999), None);
        // The identity map of the initial namespace leaves out (u32)-1.
        let id = map("0 0 4294967295\n");
        assert_eq!(id.to_outside(4294967294), Some(4294967294));
        assert_eq!(id.to_outside(u32::MAX), None);
        assert_eq!(id.to_inside(u32::MAX), None);
        // A namespace whose map is not written yet maps nothing.
        assert_eq!(map("").to_outside(0), None);
        // Overflowing ranges map nothing past u32.
        assert_eq!(map("0 4294967290 100\n").to_outside(10), None);
    }

    #[test]
    fn shown_ids_are_munged_to_the_overflow_ids() {
        let m = Maps {
            uid: map("0 65534 1\n"),
            gid: map("0 65534 1\n"),
        };
        assert_eq!(m.shown(65534, 65534), (0, 0));
        assert_eq!(m.shown(0, 0), overflow());
        assert_eq!(m.shown(65534, 1000), (0, overflow().1));
    }

    #[test]
    fn this_thread_is_in_the_daemons_namespace() {
        let me = nix::unistd::gettid().as_raw() as u32;
        assert_eq!(standing(me), Standing::Own);
        assert_eq!(shown_to(me, 1000, 7), (1000, 7));
        assert_eq!(shown_to(0, 1000, 7), overflow(), "unknown: overflow");
        // By the maps alone (a link the daemon may not read): this process's
        // are the identity, here in the initial namespace.
        assert!(daemon_in_initial());
        assert_eq!(by_maps(me), Standing::Own);
        let ns = own().unwrap();
        let all = Holder {
            ns,
            euid: 0,
            cap_eff: !0,
        };
        assert!(all.capable(12));
        assert!(
            !Holder { ns: ns + 1, ..all }.capable(12),
            "another namespace"
        );
        assert!(!Holder { cap_eff: 0, ..all }.capable(12));
        let mine = procfs::open_ns(me, "user").unwrap();
        assert!(all.capable_in(mine, 7));
        let owner = pid_ns_owner(me).unwrap();
        assert!(!Holder { cap_eff: 0, ..all }.capable_in(owner, 21));
    }
}

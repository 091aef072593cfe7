//! Pids across pid namespaces. The daemon sees every pid in its own
//! namespace (FUSE gives the caller's pid there); Linux gives a process the
//! pids of others in its own namespace (`pid_vnr`), 0 for a process it
//! cannot see, and checks a sender's SCM_CREDENTIALS pid in the sender's
//! namespace. A caller in the daemon's namespace (the common case) costs one
//! stat of `/proc/<tid>/ns/pid`; `/proc/<pid>/status` (NStgid) is read only
//! for a caller in another one.

use std::sync::OnceLock;

use crate::procfs;
use nix::errno::Errno;

use super::log_limit::limited;

/// The daemon's own pid namespace and its depth (entries of its NStgid).
fn own() -> Option<(u64, usize)> {
    static OWN: OnceLock<Option<(u64, usize)>> = OnceLock::new();
    *OWN.get_or_init(|| {
        let me = std::process::id();
        let depth = procfs::Status::read(me).ok()?.ns_tgid.len();
        Some((procfs::pid_ns(me)?, depth))
    })
}

/// How deep the daemon's own pid namespace is (the entries of its
/// NStgid): a task whose NSpid has more lives in a namespace below it.
pub fn own_depth() -> Option<usize> {
    own().map(|(_, depth)| depth)
}

/// Where task `tid` lives, if not in the daemon's namespace: its
/// namespace, and the depth of its NStgid.
fn foreign_ns(tid: u32) -> Option<(u64, usize)> {
    let (own_ns, _) = own()?;
    let ns = procfs::pid_ns(tid)?;
    if ns == own_ns {
        return None;
    }
    Some((ns, procfs::Status::read(tid).ok()?.ns_tgid.len()))
}

/// Where a process's pid lives, taken while the process surely lived (when
/// it was pinned, src/engine/pins.rs): what its number shows as to a reader
/// in another pid namespace, even after the number names another process
/// (Linux translates the peer's own `struct pid`, whose numbers outlive it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidSeen {
    /// In the daemon's namespace: 0 to a reader in any other.
    Own,
    /// In namespace `ns`, `depth` entries of NStgid deep, where it is `there`.
    In { ns: u64, depth: usize, there: i32 },
    /// Not read (gone, or past the descriptor quota before it was pinned): 0
    /// to a reader in another namespace (fails closed).
    Unknown,
}

/// Where process `pid` of the daemon's namespace lives now: one lookup of
/// its namespace link, and its status only for one in another namespace.
/// The caller makes sure it read the process it meant (a pidfd alive after).
pub fn seen(pid: i32) -> PidSeen {
    let (Some((own_ns, _)), Some(ns)) = (own(), procfs::pid_ns(pid as u32)) else {
        return PidSeen::Unknown;
    };
    if ns == own_ns {
        return PidSeen::Own;
    }
    match procfs::Status::read(pid as u32) {
        Ok(st) => PidSeen::In {
            ns,
            depth: st.ns_tgid.len(),
            there: st.ns_tgid.last().copied().unwrap_or(0),
        },
        Err(_) => PidSeen::Unknown,
    }
}

/// Pid `pid` of the daemon's namespace, of a process that lives where `seen`
/// says, as task `viewer` sees it: itself in the daemon's namespace; else its
/// number in the viewer's namespace, or 0 where the viewer cannot see it (a
/// process outside its container), as Linux gives. `seen` is asked only for
/// a viewer in another namespace.
pub fn shown(pid: i32, seen: impl FnOnce() -> PidSeen, viewer: u32) -> i32 {
    if pid <= 0 {
        return pid;
    }
    let Some((ns, depth)) = foreign_ns(viewer) else {
        return pid;
    };
    // Only a process of the viewer's own namespace is translated; one in a
    // namespace nested below it shows as 0 (a conservative answer).
    match seen() {
        PidSeen::In {
            ns: n,
            depth: d,
            there,
        } if n == ns && d == depth => there,
        _ => 0,
    }
}

/// `shown` for a pid read now: whatever process has the number at this
/// moment (F_GETOWN's owner, which names a number, not a process).
pub fn to_viewer(pid: i32, viewer: u32) -> i32 {
    shown(pid, || seen(pid), viewer)
}

/// A pid a sender names in its own namespace (SCM_CREDENTIALS), in the
/// daemon's: in the daemon's namespace as given (check_creds then refuses
/// another process's unless the sender may name others); from another
/// namespace the sender's own getpid() becomes its tgid here, and any
/// other number is None: the daemon does not look it up in the sender's
/// namespace (Linux's find_vpid does), and as a number of its own it would
/// name whatever process has it here, another user's (a root of its own
/// user and pid namespaces may name other pids of its namespace:
/// integration/actfor_pidns.sh creds_named_child_translated).
pub fn from_sender(pid: i32, sender_tid: u32, sender_tgid: i32) -> Option<i32> {
    if pid <= 0 || foreign_ns(sender_tid).is_none() {
        return Some(pid);
    }
    match procfs::Status::read(sender_tid) {
        Ok(st) if st.ns_tgid.last() == Some(&pid) => Some(sender_tgid),
        _ => None,
    }
}

/// An F_SETOWN target a caller names in its own namespace, in the
/// daemon's. A caller in another namespace may name itself or its own
/// process group (`-getpgrp()`); any other number there is not mapped
/// (None: no owner, rather than signal whoever has that number in the
/// daemon's namespace).
pub fn owner_from_sender(target: i32, caller: &super::Caller) -> Option<i32> {
    owner_from_task(target, caller.tid, || caller.status().tgid)
}

/// `owner_from_sender` for task `tid` of thread group `tgid` (asked only
/// when `tid` is in another namespace): the supervisor's FIOSETOWN on its
/// copy of a program's descriptor names the owner in its own namespace.
pub fn owner_from_task(target: i32, tid: u32, tgid: impl FnOnce() -> i32) -> Option<i32> {
    if foreign_ns(tid).is_none() {
        return Some(target);
    }
    if target < 0 {
        // Its own group: the group's number here is the first of NSpgid.
        let st = procfs::Status::read(tid).ok();
        let own = st
            .as_ref()
            .and_then(|s| s.ns_pgid.last().zip(s.ns_pgid.first()));
        if let Some((&there, &here)) = own.filter(|(there, _)| **there == target.saturating_neg()) {
            log::debug!("thread {tid}: owner group {there} of its namespace is {here} here");
            return Some(-here);
        }
    } else {
        let tgid = tgid();
        if from_sender(target, tid, tgid) == Some(tgid) {
            return Some(tgid);
        }
    }
    log::info!("thread {tid}: F_SETOWN {target} in another pid namespace: not mapped, no owner");
    None
}

/// Explicit SCM_CREDENTIALS of `caller`, with its own-namespace pid in
/// the daemon's namespace (before check_creds compares it). EPERM for
/// another pid of another namespace (`from_sender`), logged: refused
/// where Linux would translate it, never taken as a pid of the daemon's.
pub fn sender_creds(c: super::Ucred, caller: &super::Caller) -> Result<super::Ucred, Errno> {
    let Some(pid) = from_sender(c.pid, caller.tid, caller.status().tgid) else {
        limited!(
            info,
            "thread {}: SCM_CREDENTIALS name pid {} of another pid namespace, not its own: refused (EPERM), not looked up there",
            caller.tid,
            c.pid
        );
        return Err(Errno::EPERM);
    };
    Ok(super::Ucred { pid, ..c })
}

impl super::Received {
    /// The credentials and SCM_PIDFD pid a receive returns, in the pid
    /// and user namespaces of the reading task.
    pub fn for_viewer(&mut self, tid: u32) {
        if let Some(c) = &mut self.creds {
            c.pid = to_viewer(c.pid, tid);
            (c.uid, c.gid) = super::userns::shown_to(tid, c.uid, c.gid);
        }
        if let Some(p) = &mut self.pidfd {
            *p = to_viewer(*p, tid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_namespace_is_the_identity() {
        let me = std::process::id();
        assert_eq!(to_viewer(me as i32, me), me as i32);
        assert_eq!(from_sender(5, me, me as i32), Some(5));
        assert_eq!(to_viewer(0, me), 0);
        let unread = || -> PidSeen { panic!("read for a viewer of the daemon's namespace") };
        assert_eq!(shown(5, unread, me), 5);
        assert_eq!(seen(me as i32), PidSeen::Own);
    }
}

//! "Act for": a supervisor (`udsfs run --front seccomp`, src/supervisor/)
//! makes the daemon calls of the programs it traps, so without help every
//! socket it makes carries its own credentials (SO_PEERCRED, SCM_CREDENTIALS,
//! permission checks, the abstract namespace). A supervisor thread names the
//! thread it works for in the xattr `user.udsfs.act_for` of the mount root;
//! from then on requests of that thread are taken as the target's. Allowed
//! when the caller is root or the target's user, and the target is in the
//! caller's process tree (a descendant of its process).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

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
}

static GRANTS: Mutex<Option<HashMap<u32, Grant>>> = Mutex::new(None);
/// How many grants there are: requests pay no lock while there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);

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

/// `user.udsfs.act_for` set to `value` by thread `tid` (fsuid `uid`): a
/// thread id to act for, or empty / "0" to stop. Errno on refusal.
pub fn set(tid: u32, uid: u32, value: &[u8]) -> Result<(), i32> {
    let text = std::str::from_utf8(value).map_err(|_| libc::EINVAL)?;
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
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
    // The target's effective user, as kill(2) would compare.
    if uid != 0 && uid != them.uids[1] {
        return Err(libc::EPERM);
    }
    let started = procfs::start_time(me.tgid).ok_or(libc::ESRCH)?;
    map.insert(
        tid,
        Grant {
            tgid: me.tgid,
            started,
            target,
            fsuid: them.uids[3],
            fsgid: them.gids[3],
        },
    );
    COUNT.store(map.len(), Ordering::Relaxed);
    Ok(())
}

/// The (thread, fsuid, fsgid) a request of thread `tid` is made for.
pub fn caller_of(tid: u32, uid: u32, gid: u32) -> (u32, u32, u32) {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return (tid, uid, gid);
    }
    let g = GRANTS.lock();
    let Some(gr) = g.as_ref().and_then(|m| m.get(&tid)) else {
        return (tid, uid, gid);
    };
    let (tgid, started, who) = (gr.tgid, gr.started, (gr.target, gr.fsuid, gr.fsgid));
    drop(g);
    // The grant's thread must still be the supervisor's.
    let same = Status::read(tid).is_ok_and(|st| st.tgid == tgid)
        && procfs::start_time(tgid) == Some(started);
    if same {
        return who;
    }
    let mut g = GRANTS.lock();
    if let Some(m) = g.as_mut() {
        m.remove(&tid);
        COUNT.store(m.len(), Ordering::Relaxed);
    }
    (tid, uid, gid)
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
        assert_eq!(caller_of(me, 0, 0).0, pid);
        assert_eq!(
            caller_of(me + 1, 7, 8),
            (me + 1, 7, 8),
            "only the granted thread"
        );
        set(me, 0, b"0").unwrap();
        assert_eq!(caller_of(me, 0, 0).0, me);
        // Another user may not act for it (unless root: uid 0 above).
        assert_eq!(set(me, 12345, pid.to_string().as_bytes()), Err(libc::EPERM));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

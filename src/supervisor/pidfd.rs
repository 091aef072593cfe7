//! SO_PEERPIDFD and SCM_PIDFD for a supervised program, as the library
//! gives them (preload/src/pidfd.rs): the daemon pins the peer and each
//! sender with a pidfd of its own (src/engine/pins.rs) and hands out only a
//! tag, which the supervisor claims over the fd channel and installs in the
//! target, close-on-exec as Linux installs every pidfd. The tag comes from
//! the daemon's answer on the program's own socket, never from the
//! program's memory, so a program gets only pidfds the daemon gives it.

use std::os::fd::{AsRawFd, OwnedFd};

use super::call::{Ctx, say};
use super::daemon::Res;
use super::fdpass;

/// The peer's pidfd pinned when it connected (ENODATA without one). Never
/// made from the pid now: the peer may have exited and its number been
/// reused.
pub fn peer(ctx: &Ctx, s: &OwnedFd) -> Res<OwnedFd> {
    let tag = udsfs_calls::pidfd::peer_tag(s.as_raw_fd())?;
    let fds = fdpass::connect(&ctx.daemon.mount)?
        .claim(&[tag], true)
        .inspect_err(|e| {
            say(&format!(
                "SO_PEERPIDFD: the daemon's pidfd could not be claimed: errno {e}"
            ))
        })?;
    fds.into_iter().next().ok_or(libc::ENODATA)
}

/// A pidfd of `pid`, for a message whose sender no pin reached (a record
/// of the `msg` file names the pid only). The daemon gave the pid as
/// target thread `tid` sees it (src/engine/pidns.rs); where that is not
/// the supervisor's own pid namespace the number is first found there
/// (`in_our_ns`), for as a number of ours it would name another process.
pub fn open(pid: i32, tid: i32) -> Res<OwnedFd> {
    if pid <= 0 {
        // No process to refer to (udsfs_calls::pidfd::open says so too).
        return Err(libc::ESRCH);
    }
    let ours = crate::procfs::pid_ns(std::process::id()).ok_or(libc::ESRCH)?;
    let theirs = crate::procfs::pid_ns(tid as u32).ok_or(libc::ESRCH)?;
    let pid = if theirs == ours {
        pid
    } else {
        in_our_ns(pid, theirs).ok_or_else(|| {
            say(&format!(
                "SCM_PIDFD: no process is pid {pid} of the program's pid namespace; none given (MSG_CTRUNC)"
            ));
            libc::ESRCH
        })?
    };
    udsfs_calls::pidfd::open(pid, say)
}

/// The process that is `pid` in pid namespace `ns`, by its number in ours:
/// the one of that namespace whose own getpid() (the last of its NStgid)
/// is `pid`. A walk of /proc, made only for this rare fallback.
fn in_our_ns(pid: i32, ns: u64) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let n: u32 = e.file_name().to_str()?.parse().ok()?;
        if crate::procfs::pid_ns(n) != Some(ns) {
            return None;
        }
        let st = crate::procfs::Status::read(n).ok()?;
        (st.ns_tgid.last() == Some(&pid)).then_some(n as i32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_found_only_in_its_own_namespace() {
        let me = std::process::id();
        let ns = crate::procfs::pid_ns(me).expect("our pid namespace");
        assert_eq!(in_our_ns(me as i32, ns), Some(me as i32));
        // No process of ours has a pid past pid_max (at most 2^22).
        assert_eq!(in_our_ns(1 << 23, ns), None);
        // Nothing lives in a namespace no process is in.
        assert_eq!(in_our_ns(me as i32, u64::MAX), None);
    }
}

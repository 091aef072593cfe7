//! SO_PEERPIDFD and SCM_PIDFD (Linux 6.5) on udsfs sockets. The daemon pins
//! the peer (at connect, listen, socketpair) and the sender of each message
//! (at send) with a pidfd of its own (src/engine/pins.rs); the library
//! claims a copy over the fd channel. Where no pin reached the message (see
//! README), it makes the pidfd from the sender's pid.

use libc::c_int;
use udsfs_proto::ioctl::{Op, PeerPidfd};

use crate::errno::{errno, Res};
use crate::{fdpass, ioctl, log, mount};

/// A new pidfd of `pid` in this process. Close-on-exec always, as pidfds
/// are and as Linux 6.18 gives SCM_PIDFD even without MSG_CMSG_CLOEXEC.
pub fn open(pid: i32) -> Res<c_int> {
    if pid <= 0 {
        // No process to refer to (credentials of nobody): as pidfd_prepare.
        return Err(libc::ESRCH);
    }
    // SAFETY: pidfd_open only creates a descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as c_int;
    if fd < 0 {
        let e = errno();
        log::say(&format!("pidfd_open({pid}): errno {e}"));
        return Err(e);
    }
    Ok(fd)
}

/// SO_PEERPIDFD: a pidfd of the peer pinned by the daemon when it connected
/// (ENODATA without one). Never made from the pid now: the peer may have
/// exited and its number been reused.
pub fn peer(fd: c_int) -> Res<c_int> {
    let tag = ioctl::op(fd, Op::PeerPidfd, 0)?.values::<PeerPidfd>().tag;
    let m = mount::get().ok_or(libc::ENODATA)?;
    let fds = fdpass::claim(&fdpass::connect(m)?, &[tag], true)?;
    fds.first().copied().ok_or(libc::ENODATA)
}

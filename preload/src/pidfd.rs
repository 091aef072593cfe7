//! SO_PASSPIDFD, SO_PEERPIDFD and SCM_PIDFD (Linux 6.5) on udsfs sockets.
//! The daemon keeps the option and the sender's pid with each message; the
//! library makes the pidfd in the receiving process with pidfd_open, as the
//! kernel does in the receiver's recvmsg.

use libc::c_int;

use crate::sock::Res;
use crate::{errno, log};

/// asm-generic/socket.h; the libc crate may lack them.
pub const SO_PASSPIDFD: c_int = 76;
pub const SO_PEERPIDFD: c_int = 77;
pub const SCM_PIDFD: c_int = 4;

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

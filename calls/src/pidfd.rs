//! SO_PEERPIDFD and SCM_PIDFD (Linux 6.5) on a udsfs socket. The daemon
//! pins the peer (at connect, listen, socketpair) and the sender of each
//! message with a pidfd of its own (src/engine/pins.rs) and hands out a tag
//! to claim over the fd channel (`peer_tag`); a pidfd is made from a pid
//! (`open`) only for a message no pin reached, never for the peer (it may
//! have exited and its number been reused).

use std::os::fd::{FromRawFd, OwnedFd};

use udsfs_proto::Res;
use udsfs_proto::ioctl::{Op, PeerPidfd};

use crate::client;

/// The daemon's tag of the pidfd of udsfs socket `fd`'s peer, pinned when
/// it connected (ENODATA without one).
pub fn peer_tag(fd: i32) -> Res<u64> {
    Ok(client::op(fd, Op::PeerPidfd, 0)?.values::<PeerPidfd>().tag)
}

/// A pidfd of `pid` (a number of the caller's pid namespace), close-on-exec
/// as Linux makes every pidfd: ESRCH for no process (pid 0 or less, the
/// credentials of nobody, as pidfd_prepare), else pidfd_open's errno, said.
pub fn open(pid: i32, say: impl FnOnce(&str)) -> Res<OwnedFd> {
    if pid <= 0 {
        return Err(libc::ESRCH);
    }
    // SAFETY: pidfd_open only creates a descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        say(&format!("pidfd_open({pid}): errno {e}"));
        return Err(e);
    }
    // SAFETY: the descriptor was just made and is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfd_of_nobody_is_esrch() {
        let said = std::cell::Cell::new(false);
        for pid in [0, -1] {
            assert_eq!(open(pid, |_| said.set(true)).err(), Some(libc::ESRCH));
        }
        let me = open(std::process::id() as i32, |_| said.set(true));
        println!("pidfd of nobody: ESRCH; of this process: {me:?}");
        assert!(me.is_ok());
        assert!(!said.get());
    }
}

//! SO_PEERPIDFD and SCM_PIDFD (Linux 6.5) on udsfs sockets. The daemon pins
//! the peer (at connect, listen, socketpair) and the sender of each message
//! (at send) with a pidfd of its own (src/engine/pins.rs); the library
//! claims a copy over the fd channel. Where no pin reached the message (see
//! README), it makes the pidfd from the sender's pid.

use std::os::fd::{FromRawFd, OwnedFd};

use libc::c_int;

use crate::errno::Res;
use crate::{fdpass, log, mount};

/// A new pidfd of `pid` in this process (udsfs_calls::pidfd::open).
pub fn open(pid: i32) -> Res<OwnedFd> {
    udsfs_calls::pidfd::open(pid, log::say)
}

/// SO_PEERPIDFD: a pidfd of the peer pinned by the daemon when it connected
/// (ENODATA without one), claimed into this process.
pub fn peer(fd: c_int) -> Res<OwnedFd> {
    let tag = udsfs_calls::pidfd::peer_tag(fd)?;
    let m = mount::get().ok_or(libc::ENODATA)?;
    let fds = fdpass::claim(&fdpass::connect(m)?, &[tag], true)?;
    let fd = fds.first().copied().ok_or(libc::ENODATA)?;
    // SAFETY: the claim's new descriptor, ours until handed over.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

//! getsockopt, setsockopt and the queue ioctls (FIONREAD/SIOCINQ,
//! SIOCOUTQ) on udsfs sockets, as udsfs_calls::opts decides them from this
//! process's memory; SO_PEERPIDFD claims a pidfd (`pidfd`).

use std::os::fd::{IntoRawFd, OwnedFd};

use libc::{c_int, c_void, socklen_t};
use udsfs_proto::sockopt;

use crate::errno::Res;
use crate::{log, pidfd, user};

/// A getsockopt's `optval` and `optlen` in this process (EFAULT when they
/// cannot be read or written).
struct Args {
    out: *mut c_void,
    len: *mut socklen_t,
}

impl udsfs_calls::opts::Args for Args {
    fn room(&self) -> Res<u32> {
        user::read(self.len)
    }
    fn put(&self, val: &[u8]) -> Res<()> {
        user::write_from(self.out.cast(), val)
    }
    fn put_len(&self, n: u32) -> Res<()> {
        user::write(self.len, n)
    }
}

fn say(what: &str) {
    log::say(what)
}

/// getsockopt, as udsfs_calls::opts::get decides it; SO_PEERPIDFD's pidfd
/// is claimed into this process and closed again unless the program gets
/// it.
pub fn get(fd: c_int, level: c_int, name: c_int, out: *mut c_void, len: *mut socklen_t) -> Res<()> {
    let peer = || pidfd::peer(fd);
    let give = |f: OwnedFd| Ok(f.into_raw_fd());
    udsfs_calls::opts::get(fd, (level, name), &Args { out, len }, peer, give, say)
}

/// setsockopt, as udsfs_calls::opts::set decides it.
pub fn set(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> Res<()> {
    let read = |local: &mut [u8]| user::read_into(local, val.cast());
    udsfs_calls::opts::set(fd, (level, name), len, read, say)
}

/// FIONREAD/SIOCINQ and SIOCOUTQ; the kernel answers FIONREAD for a
/// regular file itself (its size), so the library asks the daemon.
pub fn queue_ioctl(fd: c_int, req: libc::c_ulong, out: *mut c_void) -> Res<()> {
    let n = sockopt::queue_ioctl(fd, req).unwrap_or(Err(libc::ENOTTY))?;
    user::write_from(out.cast(), &n.to_ne_bytes())
}

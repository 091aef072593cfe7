//! getsockopt, setsockopt and the queue ioctls on a udsfs socket, answered
//! by `udsfs_proto::sockopt` as for the preload library, from the one copy
//! of the program's arguments (SO_PEERPIDFD, which installs a pidfd, is
//! pidfd.rs's).

use std::os::fd::{AsRawFd, OwnedFd};

use udsfs_proto::sockopt;

use super::daemon::Res;
use super::mem;

/// How long a wait in direction `dir` (0 receive, 1 send) may last:
/// None for ever, Some(zero) not at all (a negative tv_sec).
pub fn timeout(s: &OwnedFd, dir: i32) -> Option<std::time::Duration> {
    sockopt::timeout(s.as_raw_fd(), dir).ok().flatten()
}

/// FIONREAD, SIOCOUTQ and SIOCATMARK.
pub fn queue_ioctl(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let n = sockopt::queue_ioctl(s.as_raw_fd(), a[1] as u32 as libc::c_ulong)
        .unwrap_or(Err(libc::ENOTTY))?;
    mem::write_u32(tid, a[2], n as u32)
}

pub fn get(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let (level, name) = (a[1] as i32, a[2] as i32);
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let val = sockopt::get(s.as_raw_fd(), name)?;
    let room = mem::read_u32(tid, a[4])?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    let n = match sockopt::fit(name, room, val.len()) {
        Ok(n) => n,
        Err(need) => {
            mem::write_u32(tid, a[4], need)?;
            return Err(libc::ERANGE);
        }
    };
    mem::write(tid, a[3], &val[..n])?;
    mem::write_u32(tid, a[4], n as u32)
}

pub fn set(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let (level, name, len) = (a[1] as i32, a[2] as i32, a[4] as usize);
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    // The longest option value is a timeval.
    let val = if len == 0 {
        Vec::new()
    } else {
        mem::read(tid, a[3], len.min(16))?
    };
    sockopt::set(s.as_raw_fd(), name, &val)
}

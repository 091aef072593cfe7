//! getsockopt, setsockopt and the queue ioctls on a udsfs socket, as
//! udsfs_calls::opts decides them from the target's memory (SO_PEERPIDFD's
//! claim is pidfd.rs's).

use std::os::fd::{AsRawFd, OwnedFd};

use udsfs_calls as calls;
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

/// A getsockopt's `optval` (a[3]) and `optlen` (a[4]) in the target.
struct Args {
    tid: i32,
    a: [u64; 6],
}

impl calls::opts::Args for Args {
    fn room(&self) -> Res<u32> {
        mem::read_u32(self.tid, self.a[4])
    }
    fn put(&self, val: &[u8]) -> Res<()> {
        mem::write(self.tid, self.a[3], val)
    }
    fn put_len(&self, n: u32) -> Res<()> {
        mem::write_u32(self.tid, self.a[4], n)
    }
}

/// getsockopt, as udsfs_calls::opts::get decides it; SO_PEERPIDFD's pidfd
/// is `peer`'s (pidfd.rs: claimed by the supervisor), installed in the
/// target by `install`.
pub fn get(
    s: &OwnedFd,
    tid: i32,
    a: [u64; 6],
    peer: impl FnOnce() -> Res<OwnedFd>,
    install: impl FnOnce(OwnedFd) -> Res<i32>,
    say: impl FnOnce(&str),
) -> Res<()> {
    let level_name = (a[1] as i32, a[2] as i32);
    calls::opts::get(
        s.as_raw_fd(),
        level_name,
        &Args { tid, a },
        peer,
        install,
        say,
    )
}

/// setsockopt, as udsfs_calls::opts::set decides it.
pub fn set(s: &OwnedFd, tid: i32, a: [u64; 6], say: impl FnOnce(&str)) -> Res<()> {
    let read = |local: &mut [u8]| {
        let got = mem::read(tid, a[3], local.len())?;
        local.copy_from_slice(&got);
        Ok(())
    };
    calls::opts::set(
        s.as_raw_fd(),
        (a[1] as i32, a[2] as i32),
        a[4] as u32,
        read,
        say,
    )
}

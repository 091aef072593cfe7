//! Readiness on a lane (issue 30 stage c, docs/LANE.md): the daemon's part.
//! Each lane has one eventfd per end, the end's wake-up: the peer writes it
//! when it publishes while the end's waiting flag is up (the library sleeps
//! on it in a blocking call, and puts it in place of the data file in what
//! the program polls and in its epoll sets). The daemon makes them with the
//! region, hands both to the pair's maker (`Op::LaneClaim` arg 4, through
//! the depot), and writes both when the lane goes down, so that a poller
//! or an epoll_wait asleep on the ring wakes and goes on through the data
//! file. It closes its own descriptors with the lane.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use udsfs_proto::ioctl::LaneEvents;
use udsfs_proto::lane::futex;

use super::Result;
use super::depot::Depot;
use super::fds::ChargedFd;

/// End A's and end B's eventfds.
pub struct Evs([OwnedFd; 2]);

impl Evs {
    pub fn new() -> Result<Evs> {
        let one = || {
            // SAFETY: eventfd makes a new descriptor, ours alone.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                Err(Errno::last())
            } else {
                // SAFETY: a fresh descriptor nothing else owns.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        };
        Ok(Evs([one()?, one()?]))
    }

    /// Wakes both ends (the lane's state changed).
    pub fn signal(&self) {
        for e in &self.0 {
            futex::eventfd_signal(e.as_raw_fd());
        }
    }

    /// Both eventfds for socket `sock`'s maker (`uid`), as files received
    /// by it: their depot tags, which it claims over the fd channel.
    pub fn deposit(&self, depot: &Depot, sock: u64, uid: u32) -> Result<LaneEvents> {
        let mut tags = [0u64; 2];
        for (t, e) in tags.iter_mut().zip(&self.0) {
            let fd = e.try_clone().map_err(|_| Errno::EMFILE)?;
            let fd = ChargedFd::new(&depot.quota, uid, fd)?;
            *t = depot
                .keep_received(sock, uid, Arc::new(fd))
                .ok_or(Errno::ETOOMANYREFS)?;
        }
        Ok(LaneEvents {
            tag0: tags[0],
            tag1: tags[1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(fd: &OwnedFd) -> Option<u64> {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
        (n == 8).then_some(v)
    }

    /// The way down's wake-up reaches a sleeper on either end's eventfd,
    /// and the eventfds never block the daemon (non-blocking, empty: EAGAIN).
    #[test]
    fn a_signal_makes_both_ends_eventfds_readable() {
        let e = Evs::new().expect("eventfds");
        let before: Vec<_> = e.0.iter().map(count).collect();
        println!("before: {before:?}");
        assert_eq!(
            before,
            [None, None],
            "fresh eventfds are empty and do not block"
        );
        e.signal();
        let after: Vec<_> = e.0.iter().map(count).collect();
        println!("after a signal: {after:?}");
        assert_eq!(after, [Some(1), Some(1)]);
    }
}

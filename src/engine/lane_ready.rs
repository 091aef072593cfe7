//! Readiness on a lane (issue 30 stage c, docs/LANE.md): the daemon's part.
//! Each lane has one eventfd per end, the end's wake-up: the peer writes it
//! when it publishes while the end's waiting flag is up (the library sleeps
//! on it in a blocking call, and puts it in place of the data file in what
//! the program polls and in its epoll sets). The daemon makes them with the
//! region, hands both to each asker (`Op::LaneClaim` arg 4, through the
//! depot: an end needs its peer's to wake it), and writes both when the
//! lane goes down. Since a peer holds the end's eventfd it may also read
//! it, and so take the way down's wake-up before the end's sleep sees it
//! (integration/adversarial_lanes2.sh hup_drained): each end therefore has
//! a second, daemon-only eventfd (`hup`), given only to a library holding
//! that end, slept on beside the first and written only here, at the way
//! down, and never drained (after the way down nothing sleeps on it: the
//! end's calls and registrations go to the data file). So a poller or an
//! epoll_wait asleep on the ring wakes and goes on through the data file,
//! whatever the peer does. It closes its own descriptors with the lane.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use udsfs_proto::ioctl::LaneEvents;
use udsfs_proto::lane::futex;

use super::Result;
use super::depot::Depot;
use super::fds::ChargedFd;

/// End A's and end B's eventfds (written by the peer and by the daemon),
/// then their daemon-only ones.
pub struct Evs {
    ev: [OwnedFd; 2],
    hup: [OwnedFd; 2],
}

/// The daemon's descriptors of a lane's `Evs`.
pub const EVS_FDS: u64 = 4;

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
        Ok(Evs {
            ev: [one()?, one()?],
            hup: [one()?, one()?],
        })
    }

    /// Side `i`'s eventfd (a lane through the daemon: side 1's is the
    /// daemon's own, which its mover polls: src/engine/lane/through.rs).
    pub fn ev_fd(&self, i: usize) -> std::os::fd::RawFd {
        self.ev[i].as_raw_fd()
    }

    /// Wakes both ends (the lane's state changed): their shared eventfds
    /// and, the wake-up no peer can take, their daemon-only ones.
    pub fn signal(&self) {
        for e in self.ev.iter().chain(&self.hup) {
            futex::eventfd_signal(e.as_raw_fd());
        }
    }

    /// Both ends' eventfds and the daemon-only ones of the ends `mine`
    /// names, for socket `sock`'s asker (`uid`), as files received by it:
    /// their depot tags (0: not given), which it claims over the fd channel.
    pub fn deposit(
        &self,
        depot: &Depot,
        sock: u64,
        uid: u32,
        mine: [bool; 2],
    ) -> Result<LaneEvents> {
        let keep = |e: &OwnedFd| -> Result<u64> {
            let fd = e.try_clone().map_err(|_| Errno::EMFILE)?;
            let fd = ChargedFd::new(&depot.quota, uid, fd)?;
            depot
                .keep_received(sock, uid, Arc::new(fd))
                .ok_or(Errno::ETOOMANYREFS)
        };
        let hup = |i: usize| if mine[i] { keep(&self.hup[i]) } else { Ok(0) };
        Ok(LaneEvents {
            tag0: keep(&self.ev[0])?,
            tag1: keep(&self.ev[1])?,
            hup0: hup(0)?,
            hup1: hup(1)?,
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

    /// The way down's wake-up reaches a sleeper on either end's eventfds,
    /// and the eventfds never block the daemon (non-blocking, empty: EAGAIN).
    #[test]
    fn a_signal_makes_both_ends_eventfds_readable() {
        let e = Evs::new().expect("eventfds");
        let all = || e.ev.iter().chain(&e.hup).map(count).collect::<Vec<_>>();
        let before = all();
        println!("before: {before:?}");
        assert_eq!(
            before, [None; 4],
            "fresh eventfds are empty and do not block"
        );
        e.signal();
        let after = all();
        println!("after a signal: {after:?}");
        assert_eq!(after, [Some(1); 4]);
    }
}

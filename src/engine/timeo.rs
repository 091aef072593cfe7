//! SO_RCVTIMEO and SO_SNDTIMEO: how long a blocking receive (accept too) or
//! send (connect too) may wait before it gives EAGAIN. Kept as atomics so
//! that parking a request reads them without the socket's lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::errno::Errno;

/// Linux keeps timeouts in jiffies; the kernel here has HZ=250, so a
/// timeout rounds up to 4 ms, and reads back so (1234 us reads 4000 us).
const TICK_US: u64 = 4000;
const USEC_PER_SEC: i64 = 1_000_000;
/// No timeout: wait for ever (what Linux reads back as 0).
const NONE: u64 = 0;
/// A negative tv_sec: Linux stores a zero timeout, which reads back as 0
/// and makes every blocking call fail at once (sock_set_timeout).
const IMMEDIATE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Recv,
    Send,
}

#[derive(Default, Debug)]
pub struct Timeouts {
    rcv_us: AtomicU64,
    snd_us: AtomicU64,
}

impl Timeouts {
    fn slot(&self, d: Direction) -> &AtomicU64 {
        match d {
            Direction::Recv => &self.rcv_us,
            Direction::Send => &self.snd_us,
        }
    }

    /// setsockopt's `timeval`: EDOM for a usec outside 0..1_000_000, as
    /// sock_set_timeout; 0 s 0 us clears the timeout.
    pub fn set(&self, d: Direction, sec: i64, usec: i64) -> Result<(), Errno> {
        if !(0..USEC_PER_SEC).contains(&usec) {
            log::debug!("SO_{:?}TIMEO: usec {usec} out of range: EDOM", d);
            return Err(Errno::EDOM);
        }
        let us = if sec < 0 {
            IMMEDIATE
        } else {
            let total = (sec as u64)
                .saturating_mul(USEC_PER_SEC as u64)
                .saturating_add(usec as u64);
            total
                .div_ceil(TICK_US)
                .saturating_mul(TICK_US)
                .min(IMMEDIATE - 1)
        };
        self.slot(d).store(us, Ordering::Relaxed);
        Ok(())
    }

    /// getsockopt's `timeval` (sec, usec); 0, 0 for none.
    pub fn get(&self, d: Direction) -> (i64, i64) {
        match self.slot(d).load(Ordering::Relaxed) {
            NONE | IMMEDIATE => (0, 0),
            us => ((us / 1_000_000) as i64, (us % 1_000_000) as i64),
        }
    }

    /// How long a blocking call may wait; None: for ever.
    pub fn limit(&self, d: Direction) -> Option<Duration> {
        match self.slot(d).load(Ordering::Relaxed) {
            NONE => None,
            IMMEDIATE => Some(Duration::ZERO),
            us => Some(Duration::from_micros(us)),
        }
    }

    /// The timeout in whole milliseconds, for `status` (0: none).
    pub fn millis(&self, d: Direction) -> u64 {
        let (s, us) = self.get(d);
        s as u64 * 1000 + us as u64 / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_ticks_and_refuses_bad_usec() {
        let t = Timeouts::default();
        assert_eq!(t.get(Direction::Recv), (0, 0));
        assert_eq!(t.limit(Direction::Recv), None);
        t.set(Direction::Recv, 0, 1234).unwrap();
        assert_eq!(t.get(Direction::Recv), (0, 4000));
        t.set(Direction::Recv, 0, 999_999).unwrap();
        assert_eq!(t.get(Direction::Recv), (1, 0));
        assert_eq!(t.set(Direction::Recv, 0, 1_000_000), Err(Errno::EDOM));
        assert_eq!(t.set(Direction::Send, 0, -1), Err(Errno::EDOM));
        t.set(Direction::Send, -1, 0).unwrap();
        assert_eq!(t.get(Direction::Send), (0, 0));
        assert_eq!(t.limit(Direction::Send), Some(Duration::ZERO));
        t.set(Direction::Send, 0, 0).unwrap();
        assert_eq!(t.limit(Direction::Send), None);
        assert_eq!(t.limit(Direction::Recv), Some(Duration::from_secs(1)));
        assert_eq!(t.millis(Direction::Recv), 1000);
    }
}

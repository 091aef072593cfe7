//! The watchdog: answers EAGAIN (or what a write got out) to parked requests
//! whose socket timeout (SO_RCVTIMEO / SO_SNDTIMEO) ran out. It sleeps until
//! the soonest deadline, and is woken when a sooner one is parked, so it costs
//! nothing while requests wait without one.
//!
//! Signals are not its business: the kernel sends FUSE_INTERRUPT for the one
//! request a signal interrupts, SIGKILL included (`UdsFs::interrupt` in
//! mod.rs, `ParkTable::interrupt_request` in park.rs).

use std::sync::Weak;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::park::ParkTable;

/// Longest sleep with no deadline pending: only to notice the park table is gone.
const IDLE: Duration = Duration::from_secs(5);

/// A wake-up call for the watchdog; a ring before it sleeps is not lost.
#[derive(Default)]
pub struct Alarm {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Alarm {
    pub fn ring(&self) {
        *self.rung.lock() = true;
        self.cv.notify_one();
    }

    /// Sleeps until `at` or a ring.
    fn sleep_until(&self, at: Instant) {
        let mut rung = self.rung.lock();
        if !*rung {
            self.cv.wait_until(&mut rung, at);
        }
        *rung = false;
    }
}

/// Runs the watchdog until the park table is dropped.
pub fn spawn(table: Weak<ParkTable>) {
    std::thread::Builder::new()
        .name("udsfs-watchdog".into())
        .spawn(move || {
            loop {
                let Some(t) = table.upgrade() else { return };
                let now = Instant::now();
                t.expire(now);
                let until = t
                    .next_deadline()
                    .map_or(now + IDLE, |at| at.min(now + IDLE));
                let alarm = t.alarm();
                drop(t);
                alarm.sleep_until(until);
            }
        })
        .expect("spawn watchdog");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_before_the_sleep_is_kept() {
        let a = Alarm::default();
        a.ring();
        let t = Instant::now();
        a.sleep_until(t + Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(5));
        // Taken: the next sleep lasts.
        let t = Instant::now();
        a.sleep_until(t + Duration::from_millis(50));
        assert!(t.elapsed() >= Duration::from_millis(50));
    }
}

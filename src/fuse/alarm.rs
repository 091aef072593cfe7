//! The watchdog's alarm clock: rung by the park table when a request with
//! a sooner deadline parks, slept on by the watchdog (`watchdog.rs`).

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

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
    pub fn sleep_until(&self, at: Instant) {
        let mut rung = self.rung.lock();
        if !*rung {
            self.cv.wait_until(&mut rung, at);
        }
        *rung = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

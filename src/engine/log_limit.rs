//! At most one log line a second for a refusal a client can repeat at will
//! (a send in a loop past a bound would otherwise write a line per call and
//! fill the daemon's log), with the count of those left out in the next.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
pub struct LogLimit {
    /// The second (since the first use, plus one) of the last line; 0: none yet.
    second: AtomicU64,
    /// Lines left out since the last one written.
    skipped: AtomicU64,
}

fn seconds_now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs() + 1
}

impl LogLimit {
    /// Whether a line may be written now: Some(lines left out before it).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(seconds_now())
    }

    fn admit_at(&self, now: u64) -> Option<u64> {
        let last = self.second.load(Ordering::Relaxed);
        let ours = last != now
            && self
                .second
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if !ours {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.skipped.swap(0, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_second_then_the_count_of_those_left_out() {
        let l = LogLimit::default();
        assert_eq!(l.admit_at(5), Some(0));
        for _ in 0..99 {
            assert_eq!(l.admit_at(5), None);
        }
        assert_eq!(l.admit_at(6), Some(99));
        assert_eq!(l.admit_at(6), None);
        assert_eq!(l.admit_at(9), Some(1));
    }

    #[test]
    fn a_tight_loop_writes_a_line_or_two() {
        let l = LogLimit::default();
        let lines = (0..100_000).filter(|_| l.admit().is_some()).count();
        assert!((1..=2).contains(&lines), "{lines} lines");
    }
}

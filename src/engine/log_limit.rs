//! At most one log line a second for a refusal a client can repeat at will
//! (a send in a loop past a bound would otherwise write a line per call and
//! fill the daemon's log), with the count of those left out in the next.
//! Every line a client can cause, per request or per message, goes through
//! a `LogLimit`: `limited!` gives each call site its own.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub struct LogLimit {
    /// The second (since the first use, plus one) of the last line; 0: none yet.
    second: AtomicU64,
    /// Lines left out since the last one written.
    skipped: AtomicU64,
}

impl Default for LogLimit {
    fn default() -> LogLimit {
        LogLimit::new()
    }
}

fn seconds_now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs() + 1
}

/// `log::LEVEL!(...)` at most once a second from this call site, with the
/// count of lines left out since the last one: for every line a client can
/// cause again and again. `limited!(unless COND, LEVEL, ...)` logs every
/// line while COND holds (root's own doings: root may fill its disk).
macro_rules! limited {
    (unless $cond:expr, $level:ident, $($arg:tt)+) => {{
        if $cond {
            log::$level!($($arg)+);
        } else {
            $crate::engine::log_limit::limited!($level, $($arg)+);
        }
    }};
    ($level:ident, $($arg:tt)+) => {{
        static LIMIT: $crate::engine::log_limit::LogLimit =
            $crate::engine::log_limit::LogLimit::new();
        if let Some(skipped) = LIMIT.admit() {
            if skipped == 0 {
                log::$level!($($arg)+);
            } else {
                log::$level!("{} ({skipped} more such lines left out)", format_args!($($arg)+));
            }
        }
    }};
}
pub(crate) use limited;

impl LogLimit {
    pub const fn new() -> LogLimit {
        LogLimit {
            second: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

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

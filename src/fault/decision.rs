//! What the message path is to do to one message: the sum of what every
//! rule that hit it decided. A value, so that the rule set stays free of the
//! engine; the engine applies it just before the message is queued.

use std::time::{Duration, Instant};

use nix::errno::Errno;

/// One rule that acted on a message, for the log and the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injection {
    pub rule: super::id::RuleId,
    pub fault: &'static str,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// The receiver may read the message only this long after it is queued
    /// (latency, bandwidth). Messages queued behind it wait for it: a
    /// connection's order never changes.
    pub delay: Option<Duration>,
    /// Queue a stream write as pieces of these sizes, which sum to the bytes
    /// queued; a read returns at most one piece (slicer).
    pub slice: Option<Vec<usize>>,
    /// Between one piece and the next.
    pub slice_delay: Duration,
    /// connect fails with this errno; EAGAIN as a full backlog: a
    /// non-blocking connect fails, a blocking one waits (refuse).
    pub refuse: Option<Errno>,
    /// The receiver's queue counts as full: EAGAIN for a non-blocking
    /// sender, a blocking one waits (full).
    pub full: bool,
    /// A message (or connect) newly held by `full` or `refuse errno=EAGAIN`
    /// is let go then: who waits is to be woken. None with `full` or
    /// `refuse`: held while the rule stands, or held already.
    pub hold_until: Option<Instant>,
    /// Queue only the first this many bytes of a stream write, which the
    /// send returns (short_write, limit_data).
    pub short: Option<usize>,
    /// The passed sockets and files are dropped at the receiver, which gets
    /// MSG_CTRUNC (ctrunc).
    pub drop_refs: bool,
    /// Once the message is queued the connection ends as when the sender's
    /// process dies: the receiver reads what is queued, then EOF; writes on
    /// either end get EPIPE (die_after, limit_data).
    pub close_after: bool,
    /// Do not deliver the message, nor the connection's later ones, while
    /// the rule stands (timeout).
    pub hold: bool,
    /// End the connection, as `close_after`, this long from now (timeout).
    pub close_in: Option<Duration>,
    /// Reset the connection this long from now: the next read on either end
    /// gives ECONNRESET, the next write EPIPE and SIGPIPE (reset_peer).
    pub reset_after: Option<Duration>,
    /// A close reaches the peer this long late (slow_close).
    pub close_delay: Option<Duration>,
    pub injected: Vec<Injection>,
}

impl Decision {
    /// No rule acted: the message goes as if there were none. (A message
    /// a rule holds already is acted on again, though not injected anew.)
    pub fn is_none(&self) -> bool {
        *self == Decision::default()
    }

    /// Adds what one more rule decided: delays add up, the first slicing
    /// and errno stand, the shortest cut and the soonest end win.
    pub fn merge(&mut self, other: Decision) {
        self.delay = match (self.delay, other.delay) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        if self.slice.is_none() && other.slice.is_some() {
            self.slice = other.slice;
            self.slice_delay = other.slice_delay;
        }
        self.refuse = self.refuse.or(other.refuse);
        self.full |= other.full;
        self.hold_until = min_some(self.hold_until, other.hold_until);
        self.short = min_some(self.short, other.short);
        self.drop_refs |= other.drop_refs;
        self.close_after |= other.close_after;
        self.hold |= other.hold;
        self.close_in = min_some(self.close_in, other.close_in);
        self.reset_after = min_some(self.reset_after, other.reset_after);
        self.close_delay = self.close_delay.max(other.close_delay);
        self.injected.extend(other.injected);
    }

    /// Makes the pieces fit a write cut short: they cover the bytes queued.
    pub fn settle(&mut self) {
        let (Some(short), Some(slice)) = (self.short, self.slice.as_mut()) else {
            return;
        };
        let mut left = short;
        slice.retain_mut(|piece| {
            *piece = (*piece).min(left);
            left -= *piece;
            *piece > 0
        });
        if slice.len() <= 1 {
            self.slice = None;
        }
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_delays_and_keeps_the_strongest_cut() {
        let ms = Duration::from_millis;
        let mut d = Decision {
            delay: Some(ms(10)),
            short: Some(100),
            reset_after: Some(ms(50)),
            ..Decision::default()
        };
        d.merge(Decision {
            delay: Some(ms(5)),
            short: Some(40),
            slice: Some(vec![30, 30, 40]),
            reset_after: Some(ms(70)),
            full: true,
            ..Decision::default()
        });
        assert_eq!(d.delay, Some(ms(15)));
        assert_eq!(d.short, Some(40));
        assert_eq!(d.reset_after, Some(ms(50)));
        assert!(d.full);
        d.settle();
        assert_eq!(d.slice, Some(vec![30, 10]));
        assert_eq!(d.slice.iter().flatten().sum::<usize>(), 40);
    }
}

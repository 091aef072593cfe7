//! The messages of a receive queue that a fault holds back: queued, but
//! not yet for readers to see (timer.rs shows them when due). Kept free
//! of the queue's own types so that the queue can hold one.

use std::collections::VecDeque;
use std::time::Instant;

/// What the held queue needs of a message: who sent it, for order.
pub trait Sent {
    fn sender_id(&self) -> u64;
}

/// When a held message may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    At(Instant),
    /// Until the rule holding it goes (timeout): `Engine::release_held`.
    Released,
}

/// The messages of one receive queue that readers may not see yet, in the
/// order they were sent.
pub struct HeldQueue<T> {
    msgs: VecDeque<(T, Until)>,
}

impl<T> Default for HeldQueue<T> {
    fn default() -> Self {
        HeldQueue {
            msgs: VecDeque::new(),
        }
    }
}

impl<T: Sent> HeldQueue<T> {
    pub(crate) fn push(&mut self, m: T, until: Until) {
        self.msgs.push_back((m, until));
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Whether a message of `sender` is held: its later ones wait behind it.
    pub(crate) fn holds_from(&self, sender: u64) -> bool {
        self.msgs.iter().any(|(m, _)| m.sender_id() == sender)
    }

    /// When the last held message of `sender` is due, if one is held.
    pub(crate) fn last_from(&self, sender: u64) -> Option<Until> {
        let mut last = None;
        for (m, until) in &self.msgs {
            if m.sender_id() == sender {
                last = match (last, *until) {
                    (Some(Until::Released), _) | (_, Until::Released) => Some(Until::Released),
                    (Some(Until::At(a)), Until::At(b)) => Some(Until::At(a.max(b))),
                    (None, u) => Some(u),
                };
            }
        }
        last
    }

    /// Takes every held message (a purge).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.msgs.drain(..).map(|(m, _)| m)
    }

    /// Takes, in order, the messages due at `now` whose earlier messages
    /// from the same sender are gone.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<T> {
        let mut blocked: Vec<u64> = Vec::new();
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.msgs.len() {
            let (m, until) = &self.msgs[i];
            let sender = m.sender_id();
            let ready = matches!(until, Until::At(t) if *t <= now);
            if ready && !blocked.contains(&sender) {
                due.push(self.msgs.remove(i).expect("held message exists").0);
            } else {
                if !blocked.contains(&sender) {
                    blocked.push(sender);
                }
                i += 1;
            }
        }
        due
    }

    /// The rules holding messages went: they are due now.
    pub(crate) fn release_all(&mut self, now: Instant) {
        for (_, until) in self.msgs.iter_mut() {
            if *until == Until::Released {
                *until = Until::At(now);
            }
        }
    }
}

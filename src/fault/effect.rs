//! What one fault does to one message, given the dice of its rule and what
//! the rule remembers of the connection. Faults that act on a connection as
//! a whole (limit_data, timeout, reset_peer, die_after) throw their
//! toxicity once per connection, as Toxiproxy does for every toxic; the
//! others throw it per message.

use std::time::{Duration, Instant};

use super::decision::Decision;
use super::kind::Fault;
use super::message::Message;
use super::prng::Prng;

/// What a rule remembers of one connection, one direction.
#[derive(Clone, Debug, Default)]
pub struct ConnState {
    /// The once-per-connection toxicity throw, when made.
    toxic: Option<bool>,
    /// Messages and bytes the fault has seen on it.
    messages: u64,
    bytes: u64,
    /// A timer (timeout, reset_peer) has been asked for.
    armed: bool,
    /// bandwidth: when the connection's last paced message may be read.
    paced_until: Option<Instant>,
    /// full, refuse errno=EAGAIN: the message (or connect) the fault holds,
    /// met again each time it is retried.
    held: Option<Held>,
}

/// How long a message hit by `full` (or a connect by `refuse
/// errno=EAGAIN`) is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Until(Instant),
    WhileTheRuleStands,
}

/// A retry of what a rule holds, as `ConnState::retry` finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Still held: the retry meets the same full queue (or backlog).
    Held,
    /// Its time is up: the retry goes through, not thrown for again.
    Through,
}

impl ConnState {
    /// Whether the connection has a message (or connect) held at `now`,
    /// and whether a retry of it goes through; the first retry that does
    /// clears it when `take` is set.
    pub fn retry(&mut self, now: Instant, take: bool) -> Option<Retry> {
        let held = self.held?;
        match held {
            Held::Until(t) if t <= now => {
                if take {
                    self.held = None;
                }
                Some(Retry::Through)
            }
            _ => Some(Retry::Held),
        }
    }
}

impl Fault {
    fn per_connection(&self) -> bool {
        matches!(
            self,
            Fault::LimitData { .. }
                | Fault::Timeout { .. }
                | Fault::ResetPeer { .. }
                | Fault::DieAfter { .. }
        )
    }

    /// Whether the fault keeps a `ConnState` per connection.
    pub fn remembers_connections(&self) -> bool {
        self.per_connection() || self.holds() || matches!(self, Fault::Bandwidth { .. })
    }

    /// Whether what the fault hits stays held, the same message (or
    /// connect) at each retry: full, refuse errno=EAGAIN.
    pub fn holds(&self) -> bool {
        match self {
            Fault::Full { .. } => true,
            Fault::Refuse { errno } => *errno == nix::errno::Errno::EAGAIN,
            _ => false,
        }
    }

    /// The fault's decision for `msg`, or None when it leaves the message
    /// alone (the dice said no, or there is nothing to do to it).
    pub fn apply(
        &self,
        msg: &Message<'_>,
        toxicity: f64,
        dice: &mut Prng,
        conn: &mut ConnState,
    ) -> Option<Decision> {
        let hit = if self.per_connection() {
            *conn.toxic.get_or_insert_with(|| dice.chance(toxicity))
        } else {
            dice.chance(toxicity)
        };
        if !hit {
            return None;
        }
        let ms = Duration::from_millis;
        let mut d = Decision::default();
        match *self {
            Fault::Latency {
                latency_ms,
                jitter_ms,
            } => {
                let off = dice.plus_minus(jitter_ms);
                d.delay = Some(ms(latency_ms.saturating_add_signed(off)));
            }
            Fault::Bandwidth { rate_kb } => {
                // rate KB/s is rate bytes per ms.
                let cost =
                    Duration::from_micros((msg.len as u64).saturating_mul(1000) / rate_kb.max(1));
                let start = conn.paced_until.map_or(msg.now, |t| t.max(msg.now));
                let until = start + cost;
                conn.paced_until = Some(until);
                d.delay = Some(until - msg.now);
            }
            Fault::Slicer {
                average_size,
                size_variation,
                delay_us,
            } => {
                d.slice = Some(slice(msg.len, average_size, size_variation, dice))
                    .filter(|s| s.len() > 1);
                d.slice.as_ref()?;
                d.slice_delay = Duration::from_micros(delay_us);
            }
            Fault::LimitData { bytes } => {
                let left = bytes.saturating_sub(conn.bytes);
                let len = msg.len as u64;
                conn.bytes = conn.bytes.saturating_add(len.min(left));
                if len < left {
                    return None;
                }
                if len > left {
                    d.short = Some(left as usize);
                }
                d.close_after = true;
            }
            Fault::Timeout { timeout_ms } => {
                d.hold = true;
                if !conn.armed && timeout_ms > 0 {
                    d.close_in = Some(ms(timeout_ms));
                }
                conn.armed = true;
            }
            Fault::ResetPeer { timeout_ms } => {
                if conn.armed {
                    return None;
                }
                conn.armed = true;
                d.reset_after = Some(ms(timeout_ms));
            }
            Fault::SlowClose { delay_ms } => d.close_delay = Some(ms(delay_ms)),
            Fault::Refuse { errno } => {
                d.refuse = Some(errno);
                if self.holds() {
                    conn.held = Some(Held::WhileTheRuleStands);
                }
            }
            Fault::Full { timeout_ms } => {
                d.full = true;
                conn.held = Some(if timeout_ms == 0 {
                    Held::WhileTheRuleStands
                } else {
                    let until = msg.now + ms(timeout_ms);
                    d.hold_until = Some(until);
                    Held::Until(until)
                });
            }
            Fault::ShortWrite { bytes } => {
                // The send's first `bytes`, whichever of its pieces they end in.
                let room = bytes.saturating_sub(msg.offset as u64);
                if msg.len as u64 <= room || room == 0 {
                    // room 0: the rule came while the send was under way.
                    return None;
                }
                d.short = Some(room as usize);
            }
            Fault::Ctrunc => {
                if msg.refs == 0 {
                    return None;
                }
                d.drop_refs = true;
            }
            Fault::DieAfter { messages } => {
                conn.messages += 1;
                if conn.messages != messages {
                    return None;
                }
                d.close_after = true;
            }
        }
        Some(d)
    }
}

/// Piece sizes for a stream write of `len` bytes: each `average` give or
/// take `variation` (at least 1), the last what is left; one piece when the
/// write is no longer than `average + variation`.
pub fn slice(len: usize, average: u64, variation: u64, dice: &mut Prng) -> Vec<usize> {
    let most = average.saturating_add(variation) as usize;
    let mut left = len;
    let mut pieces = Vec::new();
    while left > most {
        let size = average
            .saturating_add_signed(dice.plus_minus(variation))
            .max(1) as usize;
        pieces.push(size.min(most));
        left -= size.min(most);
    }
    if left > 0 || pieces.is_empty() {
        pieces.push(left);
    }
    pieces
}

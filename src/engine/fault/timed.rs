//! The faults that hold messages back in time (latency, bandwidth, slicer,
//! timeout, slow_close) on the message path: the rules' decision on a
//! message turns into deadlines for the timer (timer.rs).

use std::sync::Arc;
use std::time::Instant;

use super::held::Until;
use crate::engine::peer_close::Closing;
use crate::engine::socket::{Msg, SockState, Socket};
use crate::engine::{Engine, Waiter};
use crate::fault::{Decision, Kind, Message, Pid};

impl Engine {
    /// Queues `m` at `receiver` as `d` says: whole or in slices, visible
    /// now, late, or once the rule holding it goes; a timeout's end is
    /// armed. Returns the readers to wake.
    pub(crate) fn queue_decided(
        &self,
        receiver: u64,
        rt: &mut SockState,
        m: Msg,
        stream: bool,
        timed: Option<(Decision, Instant)>,
    ) -> Vec<Waiter> {
        let Some((d, now)) = timed else {
            return self.queue_timed(receiver, &mut rt.queue, m, stream, None);
        };
        if let Some(after) = d.close_in
            && let Some(dir) = self.socks.get(receiver)
        {
            self.end_later(now + after, &dir.sock, &m.sender);
        }
        // When the message may first be read: None for at once.
        let first = d.delay.map(|delay| now + delay);
        let until = |i: u32| {
            if d.hold {
                return Some(Until::Released);
            }
            let gap = d.slice_delay * i;
            match first {
                Some(t) => Some(Until::At(t + gap)),
                None if i > 0 => Some(Until::At(now + gap)),
                None => None,
            }
        };
        let mut readers = Vec::new();
        match d.slice.as_deref().filter(|s| stream && s.len() > 1) {
            None => readers.extend(self.queue_timed(receiver, &mut rt.queue, m, stream, until(0))),
            Some(sizes) => {
                for (i, piece) in slice_msg(m, sizes).into_iter().enumerate() {
                    let u = until(i as u32);
                    readers.extend(self.queue_timed(receiver, &mut rt.queue, piece, stream, u));
                }
            }
        }
        readers
    }

    /// How late the close of `s` (locked as `st`) reaches its peer
    /// (slow_close), if a rule says so. The peer's name is not looked at:
    /// its lock may not be taken under `s`'s.
    pub(crate) fn close_delay(&self, s: &Socket, st: &SockState) -> Option<Instant> {
        if !self.faults.any() || !s.ty.connection_oriented() {
            return None;
        }
        let peer = Socket::peer(st)?;
        let now = Instant::now();
        let from = self.fault_end(s.id, st.name.as_deref());
        let d = self.faults.check(&Message {
            kind: Kind::Close,
            pid: Pid::Known(0),
            uid: from.owner_uid,
            from,
            to: self.fault_end(peer.id, None),
            ty: s.ty,
            len: 0,
            refs: 0,
            offset: 0,
            now,
        });
        d.close_delay.map(|delay| now + delay)
    }

    /// Hands the peer's part of a close to the timer: it comes `at`
    /// (slow_close), or (None) once the data `c.closed` sent and a rule
    /// holds back is due.
    pub(crate) fn close_late(&self, at: Option<Instant>, c: Closing) {
        self.close_later(at.unwrap_or_else(Instant::now), c);
    }
}

/// Cuts a stream chunk into pieces of `sizes` bytes: the first carries
/// the passed references, the last the sender's charge (given back once
/// the whole chunk is read).
fn slice_msg(mut m: Msg, sizes: &[usize]) -> Vec<Msg> {
    let mut pieces = Vec::with_capacity(sizes.len());
    let mut at = m.off;
    let data = std::mem::take(&mut m.data);
    for (i, &n) in sizes.iter().enumerate() {
        let end = (at + n).min(data.len());
        let last = i + 1 == sizes.len();
        let bytes = if last {
            data[at..].to_vec()
        } else {
            data[at..end].to_vec()
        };
        at = end;
        pieces.push(Msg {
            data: bytes,
            off: 0,
            from: m.from.clone(),
            creds: m.creds,
            sender: Arc::clone(&m.sender),
            charge: if last { m.charge } else { 0 },
            charged_uid: m.charged_uid,
            rights: if i == 0 {
                std::mem::take(&mut m.rights)
            } else {
                Vec::new()
            },
            rights_uid: m.rights_uid,
            oob: last && m.oob,
            files: if i == 0 {
                std::mem::take(&mut m.files)
            } else {
                Vec::new()
            },
            pidfd: m.pidfd.clone(),
            ctrunc: i == 0 && m.ctrunc,
            piece_end: true,
            stamp: m.stamp,
            msg_id: m.msg_id,
            origin: m.origin,
        });
    }
    pieces
}

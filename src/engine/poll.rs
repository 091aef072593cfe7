//! poll(): the readiness mask Linux's unix_poll and unix_dgram_poll report.

use std::sync::Arc;

use super::socket::{Conn, RCV_SHUTDOWN, SockType, Socket, pollbits};
use super::{Engine, Waiter};

impl Engine {
    /// The poll mask of `s` (unix_poll, unix_dgram_poll); `w` is woken at the
    /// next change that may alter it.
    pub fn poll(&self, s: &Arc<Socket>, w: Option<&Waiter>) -> u32 {
        let mut held = None;
        let (mut mask, full_peer) = {
            let mut st = s.lock();
            let mut mask = 0;
            if st.err.is_some() {
                mask |= pollbits::ERR;
            }
            if st.shutdown == super::socket::SHUTDOWN_MASK {
                mask |= pollbits::HUP;
            }
            if st.shutdown & RCV_SHUTDOWN != 0 {
                mask |= pollbits::RDHUP | pollbits::IN;
            }
            let readable = match &st.conn {
                Conn::Listening { pending, .. } => !pending.is_empty(),
                _ => !st.queue.msgs().is_empty(),
            };
            if readable {
                mask |= pollbits::IN;
            }
            if st.queue.oob_pending() {
                mask |= pollbits::PRI;
            }
            if s.ty.connection_oriented() && st.conn.is_unconnected() {
                mask |= pollbits::HUP;
            }
            if s.writable(&st) {
                mask |= pollbits::OUT;
            }
            if let Some(w) = w {
                st.queue.readers().add(w.clone());
                st.queue.writers().add(w.clone());
            }
            // A `full` rule makes the peer's queue count as full.
            if mask & pollbits::OUT != 0
                && self.faults.any()
                && let Some(p) = Socket::peer(&st).cloned()
            {
                held = Some((p, st.name.clone()));
            }
            let peer = (s.ty == SockType::Dgram)
                .then(|| Socket::peer(&st).cloned())
                .flatten();
            (mask, peer)
        };
        if let Some((p, name)) = held
            && self.fault_holds_sends(s, name.as_deref(), &p)
        {
            mask &= !pollbits::OUT;
        }
        // A dgram socket is not writable while its one-way peer's queue is full.
        if let Some(p) = full_peer.filter(|p| p.id != s.id) {
            let mut pt = p.lock();
            let mutual = Socket::peer(&pt).is_some_and(|x| x.id == s.id);
            if !mutual && pt.queue.full() {
                mask &= !pollbits::OUT;
                if let Some(w) = w {
                    pt.queue.writers().add(w.clone());
                }
            }
        }
        mask
    }
}

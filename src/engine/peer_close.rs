//! The peer's part of a close (unix_release_sock's for the other end): EOF
//! once its queue is read, ECONNRESET first if the closing end left data
//! unread. Done at the close, or late by the fault timer (slow_close, or a
//! close behind held data): below both.

use std::sync::Arc;

use nix::errno::Errno;

use super::socket::{Conn, SHUTDOWN_MASK, Socket};
use super::tap::Event;
use super::{Engine, Wakeups};

/// The part of a close that its peer sees, done now or late.
pub(crate) struct Closing {
    pub closed: u64,
    pub peer: Arc<Socket>,
    pub had_data: bool,
    pub was_embryo: bool,
}

impl Engine {
    /// The peer's part of a close: it sees EOF once its queue is read,
    /// ECONNRESET first if the closing end left data unread.
    pub(crate) fn peer_closed(&self, c: &Closing, wake: &mut Wakeups) {
        let mut reset = None;
        // What the peer sent while the close came late (slow_close) goes
        // now, unread, as it would have at the close.
        let closed = Socket::peer(&c.peer.lock()).cloned();
        let mut late_data = false;
        if let Some(closed) = closed.filter(|p| p.id == c.closed) {
            let msgs = {
                let mut st = closed.lock();
                st.queue.set_closing_late(false);
                st.queue.drain()
            };
            late_data = !msgs.is_empty();
            for m in msgs {
                self.dequeued(c.closed, m, wake);
            }
        }
        {
            let mut pt = c.peer.lock();
            if let Conn::Connected {
                peer: p, peer_gone, ..
            } = &mut pt.conn
                && p.id == c.closed
            {
                *peer_gone = true;
                pt.shutdown = SHUTDOWN_MASK;
                // unix_release_sock: SIGIO (POLL_HUP) to the peer.
                wake.sigio(&pt);
                if c.had_data || late_data || c.was_embryo {
                    pt.err = Some(Errno::ECONNRESET);
                    reset = Some(pt.name.clone());
                }
            }
            wake.extend(pt.queue.readers().take());
            wake.extend(pt.queue.writers().take());
        }
        if let Some(name) = reset {
            self.tap_event(None, || Event::Reset {
                sock: self.endpoint(&c.peer, name.as_deref()),
            });
        }
    }
}

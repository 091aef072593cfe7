//! A connection ended by a fault (reset_peer, close_after, limit_data), as
//! the death of the process holding one end would end it. Below both the
//! faults that act at once (immediate.rs) and the timer (timer.rs).

use std::sync::Arc;

use nix::errno::Errno;

use crate::engine::log_limit::limited;
use crate::engine::socket::{Conn, SHUTDOWN_MASK, Socket, lock2};
use crate::engine::{Engine, Wakeups};

impl Engine {
    /// Ends the connection of `s` and `peer` as the kernel does when the
    /// process holding `peer` (reset: the receiver, with a message unread)
    /// or `s` (the sender, after its last message) dies: both ends are shut
    /// down and see the other gone; with a reset the sender's next read
    /// gives ECONNRESET, as does the receiver's, whose process udsfs
    /// cannot kill. Without one the receiver reads what is queued, then
    /// EOF (ECONNRESET first if the sender left data unread).
    pub(crate) fn sever(&self, s: &Arc<Socket>, peer: &Arc<Socket>, reset: bool) {
        if s.id == peer.id {
            return;
        }
        let mut wake = Wakeups::new();
        {
            let Ok((mut st, mut pt)) = lock2(s, peer) else {
                return;
            };
            let sender_had_data = !st.queue.msgs().is_empty();
            for (side, gone_err) in [(&mut *st, reset), (&mut *pt, reset || sender_had_data)] {
                if let Conn::Connected { peer_gone, .. } = &mut side.conn {
                    *peer_gone = true;
                } else {
                    continue;
                }
                side.shutdown = SHUTDOWN_MASK;
                if gone_err {
                    side.err = Some(Errno::ECONNRESET);
                }
                wake.extend(side.queue.readers().take());
                wake.extend(side.queue.writers().take());
            }
        }
        limited!(
            info,
            "fault: connection {} <-> {} {}",
            s.id,
            peer.id,
            if reset { "reset" } else { "closed" }
        );
        self.finish(wake);
    }
}

//! The end of a socket: what its last reference going away does to its
//! names, its peer, its pending connections and the messages it held.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::peer_close::Closing;
use super::socket::{Conn, Socket};
use super::tap::Event;
use super::{Engine, NameKey, Wakeups};

impl Engine {
    /// unix_release_sock.
    pub(crate) fn release(&self, s: &Arc<Socket>) {
        // A lane made since its last data file's release took the old one
        // down (the peer's library asked again meanwhile: its end had seen
        // the way down) would outlive the socket, its peer asleep on the
        // ring for ever (adversarial_lanes2.sh hup_drained, block): down
        // now, its rings drained while the socket is still connected.
        let _ = self.lane_down(s, None);
        let mut wake = Wakeups::new();
        let (conn, msgs, name, aliases, received, was_embryo, late) = {
            let mut st = s.lock();
            wake.extend(st.queue.readers().take());
            wake.extend(st.queue.writers().take());
            let was_embryo = st.conn.is_embryo();
            // slow_close: the peer may still send here until it sees the close.
            let late = if self.faults.any() {
                self.close_delay(s, &st)
            } else {
                None
            };
            st.queue.set_closing_late(late.is_some());
            (
                std::mem::replace(&mut st.conn, Conn::Closed),
                st.queue.drain(),
                // The name leaves the table but stays on the socket:
                // getpeername on a dead peer still shows it, as in Linux.
                st.name.clone(),
                std::mem::take(&mut *s.aliases.lock()),
                std::mem::take(&mut st.received),
                was_embryo,
                late,
            )
        };
        let had_data = !msgs.is_empty();
        self.names.remove(&NameKey::Unbound(s.id), s);
        if let Some(n) = &name {
            self.names.remove(&n.key, s);
        }
        self.tap_event(None, || Event::Closed {
            sock: self.endpoint_gone(s, name.as_deref()),
        });
        match conn {
            Conn::Listening { pending, .. } => {
                // Pending connections die with the listener: their clients
                // see ECONNRESET (unix_release_sock with embrion set).
                for e in pending {
                    self.put(&e);
                }
            }
            Conn::Connected { peer, .. } if s.ty.connection_oriented() => {
                // A close never overtakes data a fault holds back.
                let held = peer.lock().queue.holds_back();
                let c = Closing {
                    closed: s.id,
                    peer,
                    had_data,
                    was_embryo,
                };
                if late.is_some() || held {
                    self.close_late(late, c);
                } else {
                    self.peer_closed(&c, &mut wake);
                }
            }
            _ => {}
        }
        for m in msgs {
            self.dequeued(s.id, m, &mut wake);
        }
        self.gc.forget_receiver(s.id);
        // Received sockets nobody opened go with the receiver.
        for id in received {
            let r = self.unopened.lock().remove(&id);
            if let Some(r) = r {
                self.remove_alias(&r, id);
                wake.drop_ref(r);
            }
        }
        for id in aliases {
            let r = self.unopened.lock().remove(&id);
            drop(r);
            self.remove_dir(id);
        }
        self.depot.socket_closed(s.id);
        if self.faults.any() {
            self.fault_forget(s);
        }
        self.remove_dir(s.id);
        // Its names are gone: nothing is looked up under its namespace's
        // number now. A peer that keeps this struct (B's accepted socket,
        // a queued message's sender) keeps no descriptor charged to this
        // socket's user with it (adversarial_pins.sh payer_netns).
        s.unpin_netns();
        self.live.fetch_sub(1, Ordering::Relaxed);
        log::debug!("socket {} released", s.id);
        self.finish(wake);
    }
}

//! The end of a socket: what its last reference going away does to its
//! names, its peer, its pending connections and the messages it held.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::deferred::Closing;
use super::socket::{Conn, Msg, SHUTDOWN_MASK, Socket};
use super::tap::Event;
use super::{Engine, NameKey, Wakeups};

impl Engine {
    /// unix_release_sock.
    pub(crate) fn release(&self, s: &Arc<Socket>) {
        let mut wake = Wakeups::new();
        let (conn, msgs, name, aliases, received, was_embryo, late) = {
            let mut st = s.lock();
            wake.extend(st.queue.readers.take());
            wake.extend(st.queue.writers.take());
            let was_embryo = st.conn.is_embryo();
            // slow_close: the peer may still send here until it sees the close.
            let late = self.close_delay(s, &st);
            st.queue.closing_late = late.is_some();
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
                let held = !peer.lock().queue.held.is_empty();
                let c = Closing {
                    closed: s.id,
                    peer,
                    had_data,
                    was_embryo,
                };
                if let Some(c) = self.defer_close(late, held, c) {
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
        self.live.fetch_sub(1, Ordering::Relaxed);
        log::debug!("socket {} released", s.id);
        self.finish(wake);
    }

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
                st.queue.closing_late = false;
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
                if c.had_data || late_data || c.was_embryo {
                    pt.err = Some(Errno::ECONNRESET);
                    reset = Some(pt.name.clone());
                }
            }
            wake.extend(pt.queue.readers.take());
            wake.extend(pt.queue.writers.take());
        }
        if let Some(name) = reset {
            self.tap_event(None, || Event::Reset {
                sock: self.endpoint(&c.peer, name.as_deref()),
            });
        }
    }

    /// A message left a queue without being delivered: its charge goes
    /// back and the sockets it carried are dropped.
    pub(crate) fn dequeued(&self, receiver: u64, mut m: Msg, wake: &mut Wakeups) {
        self.uncharge(&m, wake);
        for r in self.take_rights(receiver, &mut m) {
            wake.drop_ref(r);
        }
        // Held files close here, as fput does in the kernel.
        drop(self.take_files(&mut m));
    }

    /// Takes the files a dequeued message carries out of flight.
    pub(crate) fn take_files(&self, m: &mut Msg) -> Vec<super::depot::PassedFile> {
        if m.files.is_empty() {
            return Vec::new();
        }
        self.gc.remove_files(m.files.len(), m.rights_uid);
        std::mem::take(&mut m.files)
    }

    /// Takes the sockets a dequeued message carries out of flight.
    pub(crate) fn take_rights(&self, receiver: u64, m: &mut Msg) -> Vec<Arc<Socket>> {
        if m.rights.is_empty() {
            return Vec::new();
        }
        let rights = std::mem::take(&mut m.rights);
        self.gc.remove(&rights, receiver, m.rights_uid);
        rights
    }

    /// Runs the wake-ups, then drops the references they collected: a
    /// bounded number here, the rest on the release thread
    /// (release_queue.rs).
    pub(crate) fn finish(&self, mut wake: Wakeups) {
        let drops = std::mem::take(&mut wake.drops);
        wake.run();
        self.put_all(drops);
    }

    /// Gives a dequeued message's charge back to its sender.
    pub(crate) fn uncharge(&self, m: &Msg, wake: &mut Wakeups) {
        m.sender.wmem.fetch_sub(m.charge, Ordering::AcqRel);
        if self.cfg.max_queued_bytes != 0 {
            self.queued.give(m.charged_uid, m.charge as u64);
        }
        wake.sender(m.sender.clone());
    }
}

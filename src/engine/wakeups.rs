//! Wake-ups gathered under socket locks and run once every lock is
//! dropped: the waiters taken, the senders whose budget grew, the owners
//! to send SIGIO (O_ASYNC), and the references whose drop may close a
//! socket.

use std::sync::Arc;

use super::socket::{SockState, Socket};
use super::urg::UrgOwner;
use super::wait::Waiter;

/// Wake-ups gathered under a lock and run once every lock is dropped.
#[derive(Default)]
#[must_use]
pub struct Wakeups {
    waiters: Vec<Waiter>,
    /// Senders whose budget grew: their writers are taken at run time, when
    /// no socket lock is held (a socket may be its own sender).
    senders: Vec<Arc<Socket>>,
    /// References to drop once no lock is held (dropping one may close a socket).
    pub(crate) drops: Vec<Arc<Socket>>,
    /// Owners of sockets with O_ASYNC that get SIGIO (src/engine/sigio.rs).
    sigio: Vec<UrgOwner>,
}

impl Wakeups {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn extend(&mut self, waiters: Vec<Waiter>) {
        self.waiters.extend(waiters);
    }
    pub fn sender(&mut self, s: Arc<Socket>) {
        if !self.senders.iter().any(|x| x.id == s.id) {
            self.senders.push(s);
        }
    }
    pub fn drop_ref(&mut self, s: Arc<Socket>) {
        self.drops.push(s);
    }

    /// sk_wake_async: SIGIO to the owner of the socket whose state `st`
    /// is, if O_ASYNC is on and it has one. Linux signals data or a
    /// connection queued for a reader, a peer's close or shutdown of its
    /// sending side (stream and seqpacket), and room for a writer that
    /// found none (see `run`).
    pub(crate) fn sigio(&mut self, st: &SockState) {
        if let Some(o) = st.urg_owner.filter(|_| st.fasync)
            && !self.sigio.contains(&o)
        {
            self.sigio.push(o);
        }
    }

    /// Runs the wake-ups; references to drop must go through `Engine::finish`.
    pub fn run(mut self) {
        debug_assert!(self.drops.is_empty());
        for s in std::mem::take(&mut self.senders) {
            // unix_write_space: a sender is woken only once three quarters
            // of its budget are free again, not at every message received.
            let mut st = s.lock();
            if s.writable(&st) || st.conn.is_closed() {
                self.waiters.extend(st.queue.writers().take());
            }
            // unix_write_space's SOCK_WAKE_SPACE: SIGIO only to a writer
            // that found no room since the last one.
            if s.writable(&st) && std::mem::take(&mut st.nospace) {
                self.sigio(&st);
            }
        }
        for w in self.waiters {
            w.wake();
        }
        super::sigio::note(&self.sigio);
    }
}

//! Wake-ups gathered under socket locks and run once every lock is
//! dropped: the waiters taken, the senders whose budget grew, and the
//! references whose drop may close a socket.

use std::sync::Arc;

use super::socket::Socket;
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
        }
        for w in self.waiters {
            w.wake();
        }
    }
}

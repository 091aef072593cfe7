//! A message leaving a queue: its charge goes back to its sender, the
//! sockets and files it passes go out of flight.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::socket::{Msg, Socket};
use super::{Engine, Wakeups};

impl Engine {
    /// A message left a queue without being delivered: its charge goes
    /// back and the sockets it carried are dropped.
    pub(crate) fn dequeued(&self, receiver: u64, mut m: Msg, wake: &mut Wakeups) {
        self.uncharge(&m, wake);
        for r in self.take_rights(receiver, &mut m).0 {
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
    /// Takes the sockets a dequeued message carries out of flight, and
    /// which of them were passed from an O_NONBLOCK descriptor.
    pub(crate) fn take_rights(&self, receiver: u64, m: &mut Msg) -> (Vec<Arc<Socket>>, Vec<bool>) {
        if m.rights.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let (rights, nonblock): (Vec<_>, Vec<_>) =
            std::mem::take(&mut m.rights).into_iter().unzip();
        self.gc.remove(&rights, receiver, m.rights_uid);
        (rights, nonblock)
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

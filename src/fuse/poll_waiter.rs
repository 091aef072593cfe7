//! The poll registration of one open file: the waiter that tells the
//! kernel (through its poll notifier) that the file's readiness may have
//! changed.

use std::sync::Arc;

use fuser::PollNotifier;
use parking_lot::Mutex;

use crate::engine::Wake;

/// Registered on the socket's lists once (they keep a waiter once),
/// re-armed with the kernel's latest notifier at each poll, so an idle
/// socket holds one per file however often it is polled.
#[derive(Default)]
pub struct PollWaiter(Mutex<Option<PollNotifier>>);

impl PollWaiter {
    /// Notifies through `n` at the next change.
    pub fn arm(&self, n: PollNotifier) {
        *self.0.lock() = Some(n);
    }

    /// The file is closed: its registration is dropped at the next prune.
    pub fn disarm(&self) {
        self.0.lock().take();
    }
}

impl Wake for PollWaiter {
    fn wake(self: Arc<Self>) {
        if let Some(n) = self.0.lock().take() {
            let _ = n.notify();
        }
    }
    fn is_live(&self) -> bool {
        self.0.lock().is_some()
    }
    fn rearms(&self) -> bool {
        true
    }
}

//! poll, select and epoll: the readiness of a socket file, and a
//! notification to the kernel when it may have changed.

use std::sync::Arc;

use fuser::{Errno as FErrno, PollEvents, PollFlags, PollNotifier, ReplyPoll};
use parking_lot::Mutex;

use super::Inner;
use super::files::FileKind;
use crate::engine::{Waiter, Wake};

/// A poll registration: tells the kernel to poll again at the next change.
struct PollWaiter(Mutex<Option<PollNotifier>>);

impl Wake for PollWaiter {
    fn wake(&self) {
        if let Some(n) = self.0.lock().take() {
            let _ = n.notify();
        }
    }
    fn is_live(&self) -> bool {
        self.0.lock().is_some()
    }
}

impl Inner {
    pub(super) fn poll(&self, fh: u64, ph: PollNotifier, flags: PollFlags, reply: ReplyPoll) {
        let Some(f) = self.files.get(fh) else {
            return reply.error(FErrno::EBADF);
        };
        let mask = match (&f.kind, &f.sock) {
            (FileKind::Snapshot(_) | FileKind::Gc(_), _) | (_, None) => {
                (libc::POLLIN | libc::POLLOUT) as u32
            }
            (_, Some(s)) => {
                let w: Option<Waiter> = flags
                    .contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY)
                    .then(|| Arc::new(PollWaiter(Mutex::new(Some(ph)))) as Waiter);
                self.eng.poll(s, w.as_ref())
            }
        };
        reply.poll(PollEvents::from_bits_retain(mask));
    }
}

//! poll, select and epoll: the readiness of a socket file, and a
//! notification to the kernel when it may have changed.

use std::sync::Arc;

use fuser::{Errno as FErrno, PollEvents, PollFlags, PollNotifier, ReplyPoll};
use parking_lot::Mutex;

use super::Inner;
use super::files::FileKind;
use crate::engine::{Waiter, Wake};

/// The poll registration of one open file: registered on the socket's
/// lists once (they keep a waiter once), re-armed with the kernel's latest
/// notifier at each poll, so an idle socket holds one per file however often
/// it is polled.
#[derive(Default)]
pub struct PollWaiter(Mutex<Option<PollNotifier>>);

impl PollWaiter {
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

impl Inner {
    pub(super) fn poll(&self, fh: u64, ph: PollNotifier, flags: PollFlags, reply: ReplyPoll) {
        let Some(f) = self.files.get(fh) else {
            return reply.error(FErrno::EBADF);
        };
        let schedule = flags.contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY);
        let mask = match (&f.kind, &f.sock) {
            (FileKind::Capture(h), _) => {
                let w = schedule.then(|| {
                    let pw = f.poller.get_or_init(Default::default);
                    *pw.0.lock() = Some(ph);
                    pw.clone() as Waiter
                });
                let ready = h.reader.readable(w.as_ref());
                let mut m = libc::POLLOUT as u32;
                if ready {
                    m |= (libc::POLLIN | libc::POLLRDNORM) as u32;
                }
                m
            }
            (FileKind::Snapshot(_) | FileKind::Gc(_), _) | (_, None) => {
                (libc::POLLIN | libc::POLLOUT) as u32
            }
            (_, Some(s)) => {
                let w = flags
                    .contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY)
                    .then(|| {
                        let pw = f.poller.get_or_init(Default::default);
                        *pw.0.lock() = Some(ph);
                        pw.clone() as Waiter
                    });
                self.eng.poll(s, w.as_ref())
            }
        };
        reply.poll(PollEvents::from_bits_retain(mask));
    }
}

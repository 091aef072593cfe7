//! poll, select and epoll: the readiness of a socket file, and a
//! notification to the kernel when it may have changed (`poll_waiter.rs`).

use fuser::PollNotifier;
use nix::errno::Errno;

use super::files::FileKind;
use super::front::Inner;
use crate::engine::Waiter;

impl Inner {
    /// The POLL* bits of open file `fh`; with `notify`, the kernel is told
    /// through it when they may have changed.
    pub(super) fn poll(&self, fh: u64, notify: Option<PollNotifier>) -> Result<u32, Errno> {
        let f = self.files.get(fh).ok_or(Errno::EBADF)?;
        // Readiness of a laned socket is the daemon's (stage c is not built).
        if let Some(s) = &f.sock {
            self.eng.lane_polled(s);
        }
        Ok(match (&f.kind, &f.sock) {
            (FileKind::Capture(h), _) => {
                let w = notify.map(|n| {
                    let pw = f.poller.get_or_init(Default::default);
                    pw.arm(n);
                    pw.clone() as Waiter
                });
                let mut m = libc::POLLOUT as u32;
                if h.reader.readable(w.as_ref()) {
                    m |= (libc::POLLIN | libc::POLLRDNORM) as u32;
                }
                m
            }
            (FileKind::Snapshot(_) | FileKind::Gc(_), _) | (_, None) => {
                (libc::POLLIN | libc::POLLOUT) as u32
            }
            (_, Some(s)) => {
                let w = notify.map(|n| {
                    let pw = f.poller.get_or_init(Default::default);
                    pw.arm(n);
                    pw.clone() as Waiter
                });
                self.eng.poll(s, w.as_ref())
            }
        })
    }
}

//! poll, select and epoll: the readiness of a socket file, and a
//! notification to the kernel when it may have changed (`poll_waiter.rs`).

use fuser::PollNotifier;
use nix::errno::Errno;

use super::files::FileKind;
use super::front::Inner;
use crate::engine::Waiter;

/// What the library's own poll of a laned end it has yet to claim is told.
const LANE_READY: u32 = (libc::POLLIN | libc::POLLRDNORM | libc::POLLOUT | libc::POLLWRNORM) as u32;

impl Inner {
    /// The POLL* bits of open file `fh` for thread `tid`; with `notify`,
    /// the kernel is told through it when they may have changed.
    pub(super) fn poll(
        &self,
        fh: u64,
        notify: Option<PollNotifier>,
        tid: u32,
    ) -> Result<u32, Errno> {
        let f = self.files.get(fh).ok_or(Errno::EBADF)?;
        // A laned socket's readiness is its library's (src/engine/lane.rs's
        // polled rule): a poll the library does not answer takes the lane
        // down; its own poll of an end it has yet to claim (or once per
        // thread after the claim: a sleeper the grant woke) is told "ready",
        // and its wrapper claims the end, moves the registration and looks
        // at the ring. The poll registers all
        // the same: an epoll set may keep the data file (the library moves
        // a registration only at its next epoll call), and when the lane
        // goes down before that call (nginx's readv of the request body),
        // the bytes that then come through the daemon must wake it, or an
        // EPOLLET registration, polled last while the lane was up, sleeps
        // for good (integration/lanes_programs.sh nginx_post).
        if let Some(s) = &f.sock
            && self.eng.lane_polled(s, tid)
        {
            if let Some(n) = notify {
                let pw = f.poller.get_or_init(Default::default);
                pw.arm(n);
                let w = pw.clone() as Waiter;
                let _ = self.eng.poll(s, Some(&w));
            }
            return Ok(LANE_READY);
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
                let m = self.eng.poll(s, w.as_ref());
                if let Some(w) = &w {
                    self.eng.lane_after_poll(s, tid, w);
                }
                m
            }
        })
    }
}

//! The FUSE front end's state (`Inner`): the engine, the open files, the
//! parked requests. Its operations are split by topic (`attr`, `lookup`,
//! `readdir`, `tree_edit`, `open`, `io`, `poll`) and return values or
//! answer through a typed reply (`reply.rs`); none sees fuser's replies.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::files::Files;
use super::park::{Outcome, ParkTable, Parked, Retry};
use super::pending::{OpenOp, Pending};
use crate::engine::quota::Quota;
use crate::engine::timeo::Direction;
use crate::engine::{Caller, Claim, Engine, Socket, Waiter};

/// Is O_NONBLOCK among an open file's `flags`?
pub(super) fn nonblocking(flags: i32) -> bool {
    flags & libc::O_NONBLOCK != 0
}

/// Everything the mount holds: the engine, the open files, the parked requests.
pub struct Inner {
    pub eng: Arc<Engine>,
    /// Itself, for a request parked until a lane is down (io.rs), which
    /// runs it again.
    pub(super) me: Weak<Inner>,
    pub(super) files: Files,
    pub parks: Arc<ParkTable<Pending>>,
    /// Owner of the control tree.
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// socketpair() second halves not yet opened, by socket number, each
    /// with the claim that keeps its directory open to its owner.
    pub(super) unopened_halves: Mutex<HashMap<u64, (Arc<Socket>, Claim)>>,
    /// `-o capture=root`: only root may open captures.
    pub(super) capture_root_only: std::sync::atomic::AtomicBool,
    /// Bytes of text made at open (`.udsfs/unix`, `graph`, `faults`, `gc`,
    /// status files) that open handles keep, by opener: without a bound one
    /// user's thousands of opens of a large listing would hold gigabytes.
    pub listings: Arc<Quota>,
}

impl Inner {
    /// The open-file layer and park table over `eng`, with no mount and no
    /// watchdog (in-process callers interrupt with `ParkTable::interrupt_threads`
    /// and time out with `ParkTable::expire`).
    pub fn new(eng: Arc<Engine>, uid: u32, gid: u32) -> Arc<Inner> {
        Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            eng,
            me: weak.clone(),
            files: Files::default(),
            parks: ParkTable::new(Box::new(Retrier(weak.clone()))),
            uid,
            gid,
            unopened_halves: Mutex::new(Default::default()),
            capture_root_only: Default::default(),
            listings: Arc::new(Quota::new("bytes of listings held by open handles")),
        })
    }

    /// Parks `p` with its socket's timeout: SO_RCVTIMEO for reads and
    /// accept, SO_SNDTIMEO for writes (a ctl file's `connect` too).
    pub(super) fn park(&self, p: Pending, c: &Caller) {
        let limit = match &p {
            Pending::Read { fh, .. } => self.file_timeout(*fh, Direction::Recv),
            Pending::Write { fh, .. } => self.file_timeout(*fh, Direction::Send),
            Pending::Msg { call, .. } => call.limit(),
            Pending::Open {
                op: OpenOp::Accept { sock, .. },
                ..
            } => sock.timeouts.limit(Direction::Recv),
            Pending::Open { .. } | Pending::AfterLane { .. } => None,
        };
        self.parks.park_until(p, c, limit);
    }

    fn file_timeout(&self, fh: u64, d: Direction) -> Option<std::time::Duration> {
        let f = self.files.get(fh)?;
        f.sock.as_ref()?.timeouts.limit(d)
    }

    /// Answers every parked request and stops parking new ones (unmount).
    pub fn shutdown(&self) {
        self.parks.fail_all(Errno::ENOTCONN);
    }
}

/// Retries parked requests on behalf of the park table (`Inner::attempt`
/// and `Inner::abandon`, in io.rs).
struct Retrier(Weak<Inner>);

impl Retry<Pending> for Retrier {
    fn attempt(
        &self,
        p: Pending,
        caller: &Caller,
        waiter: &Arc<Parked<Pending>>,
    ) -> Outcome<Pending> {
        let Some(inner) = self.0.upgrade() else {
            p.fail(Errno::ENOTCONN);
            return Outcome::Done;
        };
        let w: Waiter = waiter.clone();
        inner.attempt(p, caller, Some(&w))
    }

    fn abandon(&self, p: Pending, err: Errno) {
        match self.0.upgrade() {
            Some(inner) => inner.abandon(p, err),
            None => p.fail(err),
        }
    }
}

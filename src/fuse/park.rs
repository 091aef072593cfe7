//! Parked requests: a read, write or open that cannot complete now keeps its
//! reply here and is retried by whoever changes the socket. A watchdog
//! answers EINTR for callers that got a signal, since fuser does not pass
//! FUSE_INTERRUPT on and the kernel would otherwise make them wait forever.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::ioctl::MsgCall;
use super::outgoing::WriteJob;
use super::reply::ReplySink;
use super::watchdog::Watched;
use crate::engine::Wake;
use crate::engine::quota::Quota;
use crate::sharded::ShardedMap;

/// A reply still owed, with what is needed to retry the operation.
pub enum Pending {
    Read {
        fh: u64,
        size: u32,
        reply: ReplySink,
    },
    Write {
        fh: u64,
        /// What was taken and how far it got.
        job: WriteJob<'static>,
        reply: ReplySink,
    },
    Open {
        op: OpenOp,
        reply: ReplySink,
    },
    /// A UDSFS_IOC_MSG send or receive of a caller that blocks.
    Msg {
        fh: u64,
        call: MsgCall,
        reply: ReplySink,
    },
}

/// Opens that can block.
pub enum OpenOp {
    /// Opening `.udsfs/sock/N/accept`.
    Accept {
        sock: Arc<crate::engine::Socket>,
        uid: u32,
        gid: u32,
    },
    /// Opening a node of the connect view: the client socket made for it.
    Connect {
        client: Arc<crate::engine::Socket>,
        target: Arc<crate::engine::Socket>,
    },
}

impl Pending {
    /// Answers with an error, whatever was done (see `Retry::abandon`).
    pub fn fail(self, err: Errno) {
        match self {
            Pending::Read { reply, .. }
            | Pending::Write { reply, .. }
            | Pending::Open { reply, .. }
            | Pending::Msg { reply, .. } => reply.error(err),
        }
    }
}

/// What retrying a pending request came to.
pub enum Outcome {
    Done,
    Blocked(Pending),
}

/// Retries a pending request, leaving `waiter` on the socket if it blocks.
pub trait Retry: Send + Sync + 'static {
    fn attempt(&self, p: Pending, tid: u32, uid: u32, gid: u32, waiter: &Arc<Parked>) -> Outcome;
    /// Answers a request that will not be retried: a write that got part
    /// of its bytes out reports them, a pending open lets go of what it made.
    fn abandon(&self, p: Pending, err: Errno);
}

pub struct Parked {
    pub id: u64,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bytes charged to `ParkTable::held` while it waits.
    held: u64,
    slot: Mutex<Option<Pending>>,
    kicked: AtomicBool,
    done: AtomicBool,
    /// A read: woken one per message.
    exclusive: bool,
    /// When the request gives up with EAGAIN (its socket's timeout).
    deadline: Option<Instant>,
    owner: Weak<ParkTable>,
}

thread_local! {
    /// Requests woken on this thread while it runs a file operation or a
    /// retry: they are retried once that has let go of its locks, since a
    /// retry may need the same locks (a file's reader or assembler).
    static DEFERRED: RefCell<Option<Vec<Arc<Parked>>>> = const { RefCell::new(None) };
}

/// Ends a deferring scope, even if the operation panicked.
struct DeferScope;

impl Drop for DeferScope {
    fn drop(&mut self) {
        DEFERRED.with(|d| *d.borrow_mut() = None);
    }
}

/// Runs `op` with the retries it wakes held back until it returns; then
/// runs them, and the retries they wake in turn, on this thread. Nested
/// calls leave that to the outermost.
pub fn deferring_wakeups<R>(op: impl FnOnce() -> R) -> R {
    let outermost = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        d.is_none().then(|| *d = Some(Vec::new())).is_some()
    });
    if !outermost {
        return op();
    }
    let _scope = DeferScope;
    let r = op();
    loop {
        let batch = DEFERRED.with(|d| d.borrow_mut().as_mut().map(std::mem::take));
        match batch {
            Some(b) if !b.is_empty() => b.into_iter().for_each(|p| p.kick()),
            _ => break,
        }
    }
    r
}

impl Parked {
    /// Retries until done or blocked. A retry already running on another
    /// thread (or up this thread's stack) is told to go round once more.
    pub fn kick(self: &Arc<Self>) {
        self.kicked.store(true, Ordering::SeqCst);
        let Some(table) = self.owner.upgrade() else {
            return;
        };
        loop {
            // Whoever holds the slot looks at `kicked` again after letting
            // go of it, so a kick that found the slot busy is never lost.
            let Some(mut slot) = self.slot.try_lock() else {
                return;
            };
            if self.kicked.swap(false, Ordering::SeqCst) {
                let Some(p) = slot.take() else {
                    return;
                };
                table.retries.fetch_add(1, Ordering::Relaxed);
                let outcome = deferring_wakeups(|| {
                    table.retry.attempt(p, self.tid, self.uid, self.gid, self)
                });
                match outcome {
                    Outcome::Done => {
                        self.done.store(true, Ordering::SeqCst);
                        drop(slot);
                        table.remove(self.id);
                        return;
                    }
                    Outcome::Blocked(p) => *slot = Some(p),
                }
            }
            drop(slot);
            if !self.kicked.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        let me = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(later) => {
                later.push(self);
                None
            }
            None => Some(self),
        });
        if let Some(me) = me {
            me.kick();
        }
    }

    fn is_live(&self) -> bool {
        !self.done.load(Ordering::SeqCst)
    }

    fn exclusive(&self) -> bool {
        self.exclusive
    }
}

/// Every parked request, for the watchdog and for unmount.
pub struct ParkTable {
    requests: ShardedMap<u64, Arc<Parked>>,
    next: AtomicU64,
    count: AtomicU64,
    /// Retries run so far.
    retries: AtomicU64,
    retry: Box<dyn Retry>,
    /// Requests with a deadline, soonest first.
    deadlines: Mutex<BTreeMap<(Instant, u64), Arc<Parked>>>,
    closing: AtomicBool,
    /// Requests parked, per user too (`--max-parked`).
    pub parked: Quota,
    /// Bytes held by parked writes and `msg` assemblers (`--max-held-bytes`).
    pub held: Arc<Quota>,
    watched: Watched,
}

impl ParkTable {
    pub fn new(retry: Box<dyn Retry>) -> Arc<ParkTable> {
        Arc::new(ParkTable {
            requests: ShardedMap::new(),
            next: AtomicU64::new(1),
            count: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retry,
            deadlines: Mutex::new(BTreeMap::new()),
            closing: AtomicBool::new(false),
            parked: Quota::new("requests parked"),
            held: Arc::new(Quota::new("bytes held by waiting writes and msg records")),
            watched: Watched::default(),
        })
    }

    /// Caps the requests parked at once; past it a would-be-blocking
    /// request fails with ENOBUFS instead of waiting.
    pub fn set_max(&self, n: u64) {
        self.parked.set_max(n);
    }

    /// Answers a request that will not be retried, releasing what a
    /// pending open made for it.
    fn answer(&self, p: Pending, err: Errno) {
        self.retry.abandon(p, err);
    }

    fn remove(&self, id: u64) {
        if let Some(p) = self.requests.remove(&id) {
            if let Some(at) = p.deadline {
                self.deadlines.lock().remove(&(at, id));
            }
            self.count.fetch_sub(1, Ordering::SeqCst);
            self.watched.remove(p.tid);
            self.parked.give(p.uid, 1);
            self.held.give(p.uid, p.held);
        }
    }

    /// Parks `p` and runs its first waiting attempt.
    pub fn park(self: &Arc<Self>, p: Pending, tid: u32, uid: u32, gid: u32) {
        self.park_until(p, tid, uid, gid, None)
    }

    /// Parks `p` for at most `limit` (None: until done or interrupted);
    /// past it the request is answered EAGAIN, or the bytes a write got out.
    pub fn park_until(
        self: &Arc<Self>,
        p: Pending,
        tid: u32,
        uid: u32,
        gid: u32,
        limit: Option<Duration>,
    ) {
        if self.closing.load(Ordering::SeqCst) {
            return self.answer(p, Errno::ENOTCONN);
        }
        if limit == Some(Duration::ZERO) {
            // A zero timeout (negative tv_sec): no waiting at all.
            return self.answer(p, Errno::EAGAIN);
        }
        // A parked write holds its data until it is sent.
        let held = match &p {
            Pending::Write { job, .. } => job.held_bytes(),
            Pending::Msg { call, .. } => call.held_bytes(),
            _ => 0,
        };
        if self.parked.take(uid, 1).is_err() {
            log::warn!("thread {tid}: {} requests parked: ENOBUFS", self.len());
            return self.answer(p, Errno::ENOBUFS);
        }
        if self.held.take(uid, held).is_err() {
            self.parked.give(uid, 1);
            log::warn!("thread {tid}: a write of {held} bytes cannot wait: ENOBUFS");
            return self.answer(p, Errno::ENOBUFS);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let exclusive = matches!(p, Pending::Read { .. });
        let parked = Arc::new(Parked {
            id,
            tid,
            uid,
            gid,
            held,
            slot: Mutex::new(Some(p)),
            kicked: AtomicBool::new(false),
            done: AtomicBool::new(false),
            exclusive,
            deadline: limit.map(|l| Instant::now() + l),
            owner: Arc::downgrade(self),
        });
        self.watched.add(tid);
        self.requests.insert(id, parked.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
        if let Some(at) = parked.deadline {
            self.deadlines.lock().insert((at, id), parked.clone());
        }
        parked.kick();
    }

    /// How many retries ran (each wake-up of a parked request runs one).
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn all(&self) -> Vec<Arc<Parked>> {
        self.requests.values()
    }

    /// Answers every parked request with `err` (unmount).
    pub fn fail_all(&self, err: Errno) {
        self.closing.store(true, Ordering::SeqCst);
        for p in self.all() {
            self.interrupt(&p, err);
        }
    }

    /// Answers `err` to every request parked by one of `tids` (the
    /// watchdog found a signal for them, or an in-process caller
    /// interrupts); returns how many there were.
    pub fn interrupt_threads(&self, tids: &HashSet<u32>, err: Errno) -> usize {
        let mine: Vec<_> = self
            .all()
            .into_iter()
            .filter(|p| tids.contains(&p.tid))
            .collect();
        for p in &mine {
            log::debug!("request of thread {} interrupted: {}", p.tid, err.desc());
            self.interrupt(p, err);
        }
        mine.len()
    }

    /// Answers EAGAIN to every request whose deadline is `now` or past;
    /// returns how many there were.
    pub fn expire(&self, now: Instant) -> usize {
        let due: Vec<Arc<Parked>> = {
            let mut d = self.deadlines.lock();
            let later = d.split_off(&(now, u64::MAX));
            std::mem::replace(&mut *d, later).into_values().collect()
        };
        for p in &due {
            log::debug!("request of thread {} timed out: EAGAIN", p.tid);
            self.interrupt(p, Errno::EAGAIN);
        }
        due.len()
    }

    /// The soonest deadline of a parked request.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.lock().keys().next().map(|(at, _)| *at)
    }

    fn interrupt(&self, p: &Parked, err: Errno) {
        let pending = p.slot.lock().take();
        p.done.store(true, Ordering::SeqCst);
        self.remove(p.id);
        if let Some(pending) = pending {
            self.answer(pending, err);
        }
    }

    /// The threads with requests parked, for the watchdog.
    pub fn watched(&self) -> &Watched {
        &self.watched
    }
}

//! Parked requests: a read, write or open that cannot complete now keeps its
//! reply here and is retried by whoever changes the socket. A watchdog
//! answers EINTR for callers that got a signal, since fuser does not pass
//! FUSE_INTERRUPT on and the kernel would otherwise make them wait forever.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::reply::ReplySink;

use super::outgoing::WriteJob;
use crate::engine::Wake;
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
            | Pending::Open { reply, .. } => reply.error(err),
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
    slot: Mutex<Option<Pending>>,
    kicked: AtomicBool,
    done: AtomicBool,
    /// A read: woken one per message.
    exclusive: bool,
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
    parked: ShardedMap<u64, Arc<Parked>>,
    next: AtomicU64,
    count: AtomicU64,
    /// Retries run so far.
    retries: AtomicU64,
    retry: Box<dyn Retry>,
    closing: AtomicBool,
    max: AtomicU64,
}

impl ParkTable {
    pub fn new(retry: Box<dyn Retry>) -> Arc<ParkTable> {
        Arc::new(ParkTable {
            parked: ShardedMap::new(),
            next: AtomicU64::new(1),
            count: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retry,
            closing: AtomicBool::new(false),
            max: AtomicU64::new(u64::MAX),
        })
    }

    /// Caps the requests parked at once; past it a would-be-blocking
    /// request fails with ENOBUFS instead of waiting.
    pub fn set_max(&self, n: u64) {
        self.max.store(n, Ordering::Relaxed);
    }

    /// Answers a request that will not be retried, releasing what a
    /// pending open made for it.
    fn answer(&self, p: Pending, err: Errno) {
        self.retry.abandon(p, err);
    }

    fn remove(&self, id: u64) {
        if self.parked.remove(&id).is_some() {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Parks `p` and runs its first waiting attempt.
    pub fn park(self: &Arc<Self>, p: Pending, tid: u32, uid: u32, gid: u32) {
        if self.closing.load(Ordering::SeqCst) {
            return self.answer(p, Errno::ENOTCONN);
        }
        if self.len() >= self.max.load(Ordering::Relaxed) {
            log::warn!(
                "thread {tid}: {} requests parked already: ENOBUFS",
                self.len()
            );
            return self.answer(p, Errno::ENOBUFS);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let exclusive = matches!(p, Pending::Read { .. });
        let parked = Arc::new(Parked {
            id,
            tid,
            uid,
            gid,
            slot: Mutex::new(Some(p)),
            kicked: AtomicBool::new(false),
            done: AtomicBool::new(false),
            exclusive,
            owner: Arc::downgrade(self),
        });
        self.parked.insert(id, parked.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
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
        self.parked.values()
    }

    /// Answers every parked request with `err` (unmount).
    pub fn fail_all(&self, err: Errno) {
        self.closing.store(true, Ordering::SeqCst);
        for p in self.all() {
            self.interrupt(&p, err);
        }
    }

    /// Answers `err` to the requests parked for thread `tid` (a signal to
    /// it, as the watchdog sees one); returns how many there were.
    pub fn interrupt_thread(&self, tid: u32, err: Errno) -> usize {
        let mine: Vec<_> = self.all().into_iter().filter(|p| p.tid == tid).collect();
        for p in &mine {
            self.interrupt(p, err);
        }
        mine.len()
    }

    fn interrupt(&self, p: &Parked, err: Errno) {
        let pending = p.slot.lock().take();
        p.done.store(true, Ordering::SeqCst);
        self.remove(p.id);
        if let Some(pending) = pending {
            self.answer(pending, err);
        }
    }

    /// One watchdog pass: EINTR for every caller with a signal pending.
    pub fn scan(&self) {
        for p in self.all() {
            if signal_pending(p.tid) {
                log::debug!("request of thread {} interrupted by a signal", p.tid);
                self.interrupt(&p, Errno::EINTR);
            }
        }
    }

    /// Runs the watchdog until the table is dropped.
    pub fn spawn_watchdog(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("udsfs-watchdog".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(20));
                    let Some(t) = weak.upgrade() else { return };
                    if !t.is_empty() {
                        t.scan();
                    }
                }
            })
            .expect("spawn watchdog");
    }
}

/// Whether thread `tid` has an unblocked signal pending, or is gone.
pub fn signal_pending(tid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let mut pend = 0u64;
    let mut blocked = 0u64;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = u64::from_str_radix(v.trim(), 16).unwrap_or(0);
        match k {
            "SigPnd" | "ShdPnd" => pend |= v,
            "SigBlk" => blocked = v,
            _ => {}
        }
    }
    // SIGKILL (bit 8) can never be blocked.
    pend & (!blocked | (1 << 8)) != 0
}

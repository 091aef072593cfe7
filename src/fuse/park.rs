//! Parked requests: a read, write or open that cannot complete now keeps its
//! reply here and is retried by whoever changes the socket. A watchdog
//! answers EINTR for callers that got a signal, since fuser does not pass
//! FUSE_INTERRUPT on and the kernel would otherwise make them wait forever.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use fuser::{Errno, ReplyData, ReplyOpen, ReplyWrite};
use parking_lot::Mutex;

use super::watchdog::Watched;
use crate::engine::Wake;
use crate::engine::quota::Quota;

/// A reply still owed, with what is needed to retry the operation.
pub enum Pending {
    Read {
        fh: u64,
        size: u32,
        reply: ReplyData,
    },
    Write {
        fh: u64,
        data: Vec<u8>,
        /// Bytes already sent (stream) or commands already run (ctl).
        done: usize,
        /// What to report on success when `data` is not what was written
        /// (msg files send whole records assembled from several writes).
        report: Option<usize>,
        reply: ReplyWrite,
    },
    Open {
        op: OpenOp,
        reply: ReplyOpen,
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
    /// Answers with an error; a write that already sent bytes reports them.
    pub fn fail(self, err: Errno) {
        match self {
            Pending::Read { reply, .. } => reply.error(err),
            Pending::Write {
                reply,
                done,
                report: None,
                ..
            } if done > 0 => reply.written(done as u32),
            Pending::Write { reply, .. } => reply.error(err),
            Pending::Open { reply, .. } => reply.error(err),
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
    fn cleanup_open(&self, op: OpenOp);
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
    owner: Weak<ParkTable>,
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
                match table.retry.attempt(p, self.tid, self.uid, self.gid, self) {
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
    fn wake(&self) {
        // Wake is called through an Arc; rebuild it to kick.
        if let Some(table) = self.owner.upgrade()
            && let Some(me) = table.get(self.id)
        {
            me.kick();
        }
    }

    fn is_live(&self) -> bool {
        !self.done.load(Ordering::SeqCst)
    }
}

const SHARDS: usize = 16;

/// Every parked request, for the watchdog and for unmount.
pub struct ParkTable {
    shards: Vec<Mutex<HashMap<u64, Arc<Parked>>>>,
    next: AtomicU64,
    count: AtomicU64,
    retry: Box<dyn Retry>,
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
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            next: AtomicU64::new(1),
            count: AtomicU64::new(0),
            retry,
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
        if let Pending::Open { op, reply } = p {
            self.retry.cleanup_open(op);
            reply.error(err);
        } else {
            p.fail(err);
        }
    }

    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, Arc<Parked>>> {
        &self.shards[(id % SHARDS as u64) as usize]
    }

    fn get(&self, id: u64) -> Option<Arc<Parked>> {
        self.shard(id).lock().get(&id).cloned()
    }

    fn remove(&self, id: u64) {
        if let Some(p) = self.shard(id).lock().remove(&id) {
            self.count.fetch_sub(1, Ordering::SeqCst);
            self.watched.remove(p.tid);
            self.parked.give(p.uid, 1);
            self.held.give(p.uid, p.held);
        }
    }

    /// Parks `p` and runs its first waiting attempt.
    pub fn park(self: &Arc<Self>, p: Pending, tid: u32, uid: u32, gid: u32) {
        if self.closing.load(Ordering::SeqCst) {
            return self.answer(p, Errno::ENOTCONN);
        }
        // A parked write holds its data until it is sent.
        let held = match &p {
            Pending::Write { data, .. } => data.len() as u64,
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
        let parked = Arc::new(Parked {
            id,
            tid,
            uid,
            gid,
            held,
            slot: Mutex::new(Some(p)),
            kicked: AtomicBool::new(false),
            done: AtomicBool::new(false),
            owner: Arc::downgrade(self),
        });
        self.watched.add(tid);
        self.shard(id).lock().insert(id, parked.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
        parked.kick();
    }

    pub fn len(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn all(&self) -> Vec<Arc<Parked>> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// Answers every parked request with `err` (unmount).
    pub fn fail_all(&self, err: Errno) {
        self.closing.store(true, Ordering::SeqCst);
        for p in self.all() {
            self.interrupt(&p, err);
        }
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

    /// Answers EINTR to every request parked by one of `tids` (the
    /// watchdog found a signal for them).
    pub fn interrupt_threads(&self, tids: &HashSet<u32>) {
        for p in self.all() {
            if tids.contains(&p.tid) {
                log::debug!("request of thread {} interrupted by a signal", p.tid);
                self.interrupt(&p, Errno::EINTR);
            }
        }
    }
}

//! Parked requests: a request that cannot complete now keeps what it owes
//! (its reply, with what is needed to retry it: a `Park`) here and is
//! retried by whoever changes the socket. The table knows nothing of what
//! it parks: the FUSE front end's kinds are in `pending.rs`. A caller that
//! gets a signal makes the kernel send FUSE_INTERRUPT with the request's id
//! (`interrupt_request`, found through `by_unique`); the watchdog thread
//! ends the ones whose socket timeout runs out.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::alarm::Alarm;
use crate::engine::cred::ProcStatus;
use crate::engine::quota::Quota;
use crate::engine::{Caller, Wake};
use crate::sharded::ShardedMap;

/// How long an interrupt is kept for a request not parked yet, and how many
/// are kept at most: one whose request was answered without parking is never
/// claimed.
const EARLY_TTL: Duration = Duration::from_secs(60);
const EARLY_MAX: usize = 4096;

/// What the table parks: a request with the reply it still owes.
pub trait Park: Send + 'static {
    /// The bytes it holds while it waits (a write's data), charged to
    /// `ParkTable::held`.
    fn held_bytes(&self) -> u64;
    /// Woken one per message (a read), rather than all at once.
    fn exclusive(&self) -> bool;
    /// A plain read of a data file (`Wake::read_by`).
    fn plain_read(&self) -> bool {
        false
    }
}

/// Keeps an early interrupt, dropping those past `EARLY_TTL` (and the
/// oldest) when `EARLY_MAX` are kept.
fn remember(early: &mut HashMap<u64, Instant>, unique: u64, now: Instant) {
    if early.len() >= EARLY_MAX {
        early.retain(|_, at| now.duration_since(*at) < EARLY_TTL);
    }
    if early.len() >= EARLY_MAX
        && let Some(oldest) = early.iter().min_by_key(|(_, at)| **at).map(|(u, _)| *u)
    {
        early.remove(&oldest);
    }
    early.insert(unique, now);
}

/// What retrying a parked request came to.
pub enum Outcome<P> {
    Done,
    Blocked(P),
}

/// Retries a parked request, leaving `waiter` on the socket if it blocks.
pub trait Retry<P: Park>: Send + Sync + 'static {
    fn attempt(&self, p: P, caller: &Caller, waiter: &Arc<Parked<P>>) -> Outcome<P>;
    /// Answers a request that will not be retried: a write that got part
    /// of its bytes out reports them, a pending open lets go of what it made.
    fn abandon(&self, p: P, err: Errno);
}

pub struct Parked<P: Park> {
    pub id: u64,
    /// The FUSE request's id (0: an in-process caller).
    pub unique: u64,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    /// The caller's status as read when the request came, for its retries.
    status: Option<ProcStatus>,
    /// The credentials an act-for grant checked for it (engine::cred's
    /// `with_checked`), for its retries.
    checked: Option<crate::engine::cred::CheckedCreds>,
    /// The user namespace read for it, if any (`Caller::known_userns`).
    userns: Option<Option<crate::engine::userns::UserNs>>,
    /// Bytes charged to `ParkTable::held` while it waits.
    held: u64,
    slot: Mutex<Option<P>>,
    kicked: AtomicBool,
    done: AtomicBool,
    /// A read: woken one per message.
    exclusive: bool,
    /// A plain read of a data file (`Park::plain_read`).
    plain_read: bool,
    /// When the request gives up with EAGAIN (its socket's timeout), at
    /// most `limit` after it parked or last got further (`kick`). Changed
    /// only under `ParkTable::deadlines`' lock.
    deadline: Mutex<Option<Instant>>,
    limit: Option<Duration>,
    /// Its deadline passed: the attempt under way is its last look unless
    /// it gets further (`ParkTable::expire`).
    due: AtomicBool,
    owner: Weak<ParkTable<P>>,
}

/// A parked request of any kind, as the wake-ups deferred on a thread hold it.
trait Kick {
    fn kick_now(self: Arc<Self>);
}

impl<P: Park> Kick for Parked<P> {
    fn kick_now(self: Arc<Self>) {
        self.kick()
    }
}

thread_local! {
    /// Requests woken on this thread while it runs a file operation or a
    /// retry: they are retried once that has let go of its locks, since a
    /// retry may need the same locks (a file's reader or assembler).
    static DEFERRED: RefCell<Option<Vec<Arc<dyn Kick>>>> = const { RefCell::new(None) };
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
            Some(b) if !b.is_empty() => b.into_iter().for_each(|p| p.kick_now()),
            _ => break,
        }
    }
    r
}

impl<P: Park> Parked<P> {
    /// The caller again, for a retry.
    fn caller(&self) -> Caller {
        Caller::again(self.tid, self.uid, self.gid, self.status.clone())
            .knowing_userns(self.userns)
            .with_checked(self.checked)
    }

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
                let held = p.held_bytes();
                let outcome = deferring_wakeups(|| table.retry.attempt(p, &self.caller(), self));
                match outcome {
                    Outcome::Done => {
                        self.done.store(true, Ordering::SeqCst);
                        drop(slot);
                        table.remove(self.id);
                        return;
                    }
                    // A send that got further (queued bytes) waits its
                    // timeout afresh, as Linux's sender waits per skb
                    // (sock_alloc_send_pskb takes sock_sndtimeo each time).
                    Outcome::Blocked(p) if p.held_bytes() < held => {
                        *slot = Some(p);
                        table.rearm(self);
                    }
                    Outcome::Blocked(p) => {
                        *slot = Some(p);
                        if self.due.load(Ordering::SeqCst) && !self.kicked.load(Ordering::SeqCst) {
                            drop(slot);
                            log::debug!("request of thread {} timed out: EAGAIN", self.tid);
                            table.interrupt(self, Errno::EAGAIN);
                            return;
                        }
                    }
                }
            }
            drop(slot);
            if !self.kicked.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}

impl<P: Park> Wake for Parked<P> {
    fn wake(self: Arc<Self>) {
        let me = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(later) => {
                later.push(self as Arc<dyn Kick>);
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

    fn read_by(&self) -> Option<u32> {
        self.plain_read.then_some(self.tid)
    }
}

/// Parked requests with a deadline, by (deadline, id): soonest first.
type Deadlines<P> = BTreeMap<(Instant, u64), Arc<Parked<P>>>;

/// Every parked request, for interrupts, timeouts and unmount.
pub struct ParkTable<P: Park> {
    requests: ShardedMap<u64, Arc<Parked<P>>>,
    /// The requests of `requests` that came from FUSE, by their FUSE id.
    by_unique: ShardedMap<u64, Arc<Parked<P>>>,
    /// Interrupts that came while their request was still on its way here
    /// (on another worker thread), by FUSE id, with when they came. Its lock
    /// is held across the `by_unique` look-up on both sides, so an interrupt
    /// and its request's parking always meet.
    early: Mutex<HashMap<u64, Instant>>,
    next: AtomicU64,
    count: AtomicU64,
    /// Retries run so far.
    retries: AtomicU64,
    retry: Box<dyn Retry<P>>,
    /// Requests with a deadline, soonest first.
    deadlines: Mutex<Deadlines<P>>,
    closing: AtomicBool,
    /// Requests parked, per user too (`--max-parked`).
    pub parked: Quota,
    /// Bytes held by parked writes and `msg` assemblers (`--max-held-bytes`).
    pub held: Arc<Quota>,
    /// Wakes the watchdog when a deadline sooner than all others arrives.
    alarm: Arc<Alarm>,
}

impl<P: Park> ParkTable<P> {
    pub fn new(retry: Box<dyn Retry<P>>) -> Arc<ParkTable<P>> {
        Arc::new(ParkTable {
            requests: ShardedMap::new(),
            by_unique: ShardedMap::new(),
            early: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            count: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retry,
            deadlines: Mutex::new(BTreeMap::new()),
            closing: AtomicBool::new(false),
            parked: Quota::new("requests parked"),
            held: Arc::new(Quota::new("bytes held by waiting writes and msg records")),
            alarm: Arc::new(Alarm::default()),
        })
    }

    /// Caps the requests parked at once; past it a would-be-blocking
    /// request fails with ENOBUFS instead of waiting.
    pub fn set_max(&self, n: u64) {
        self.parked.set_max(n);
    }

    /// Answers a request that will not be retried, releasing what a
    /// pending open made for it.
    fn answer(&self, p: P, err: Errno) {
        self.retry.abandon(p, err);
    }

    fn remove(&self, id: u64) {
        if let Some(p) = self.requests.remove(&id) {
            if p.limit.is_some() {
                let mut d = self.deadlines.lock();
                if let Some(at) = p.deadline.lock().take() {
                    d.remove(&(at, id));
                }
            }
            if p.unique != 0 {
                self.by_unique.remove(&p.unique);
            }
            self.count.fetch_sub(1, Ordering::SeqCst);
            self.parked.give(p.uid, 1);
            self.held.give(p.uid, p.held);
        }
    }

    /// Parks `p` and runs its first waiting attempt.
    pub fn park(self: &Arc<Self>, p: P, c: &Caller) {
        self.park_until(p, c, None)
    }

    /// Parks `p` for `c` for at most `limit` (None: until done or
    /// interrupted); past it the request is answered EAGAIN, or the bytes a
    /// write got out.
    pub fn park_until(self: &Arc<Self>, p: P, c: &Caller, limit: Option<Duration>) {
        let (tid, uid, gid) = (c.tid, c.fsuid, c.fsgid);
        if self.closing.load(Ordering::SeqCst) {
            return self.answer(p, Errno::ENOTCONN);
        }
        if limit == Some(Duration::ZERO) {
            // A zero timeout (negative tv_sec): no waiting at all.
            return self.answer(p, Errno::EAGAIN);
        }
        // A parked write holds its data until it is sent.
        let held = p.held_bytes();
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
        let (exclusive, plain_read) = (p.exclusive(), p.plain_read());
        let parked = Arc::new(Parked {
            id,
            unique: c.unique,
            tid,
            uid,
            gid,
            status: c.known_status().cloned(),
            userns: c.known_userns(),
            checked: c.checked(),
            held,
            slot: Mutex::new(Some(p)),
            kicked: AtomicBool::new(false),
            done: AtomicBool::new(false),
            exclusive,
            plain_read,
            deadline: Mutex::new(None),
            limit,
            due: AtomicBool::new(false),
            owner: Arc::downgrade(self),
        });
        self.requests.insert(id, parked.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
        self.rearm(&parked);
        if c.unique != 0 {
            let mut early = self.early.lock();
            self.by_unique.insert(c.unique, parked.clone());
            if early.remove(&c.unique).is_some() {
                drop(early);
                log::debug!(
                    "request {} of thread {tid} was interrupted before it parked",
                    c.unique
                );
                return self.interrupt(&parked, Errno::EINTR);
            }
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

    fn all(&self) -> Vec<Arc<Parked<P>>> {
        self.requests.values()
    }

    /// Answers every parked request with `err` (unmount).
    pub fn fail_all(&self, err: Errno) {
        self.closing.store(true, Ordering::SeqCst);
        for p in self.all() {
            self.interrupt(&p, err);
        }
    }

    /// Answers FUSE request `unique` as interrupted by a signal, if it is
    /// parked. EINTR, or what a write got out (`Retry::abandon`): never
    /// ERESTARTSYS, which this kernel refuses in a reply (the caller would
    /// then wait forever); the preload library restarts where SA_RESTART
    /// asks for it (preload/src/restart.rs).
    /// One not parked yet is answered as soon as it parks; one for a request
    /// answered meanwhile is never claimed and dropped later (`remember`).
    pub fn interrupt_request(&self, unique: u64) {
        let p = {
            let mut early = self.early.lock();
            match self.by_unique.get(&unique) {
                Some(p) => p,
                None => {
                    log::debug!("request {unique} interrupted before it parked (or answered)");
                    remember(&mut early, unique, Instant::now());
                    return;
                }
            }
        };
        log::debug!("request {unique} of thread {} interrupted", p.tid);
        self.interrupt(&p, Errno::EINTR);
    }

    /// Answers `err` to every request parked by one of `tids` (an
    /// in-process caller interrupts); returns how many there were.
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

    /// Sets `p`'s deadline to its timeout from now (none without one), as
    /// it parks and whenever it gets further.
    fn rearm(&self, p: &Arc<Parked<P>>) {
        let Some(limit) = p.limit else { return };
        let at = Instant::now() + limit;
        let mut d = self.deadlines.lock();
        if p.done.load(Ordering::SeqCst) {
            return;
        }
        if let Some(old) = p.deadline.lock().replace(at) {
            d.remove(&(old, p.id));
        }
        p.due.store(false, Ordering::SeqCst);
        d.insert((at, p.id), p.clone());
        if d.keys().next() == Some(&(at, p.id)) {
            self.alarm.ring();
        }
    }

    /// Gives every request whose deadline is `now` or past a last look, as
    /// Linux's sleeper whose timeout ran out tries once more (a sender
    /// finds the room that is there though too little to wake it,
    /// sock_alloc_send_pskb; unix_wait_for_peer's caller retries): EAGAIN,
    /// or what a send got out, unless it completes or gets further (a send
    /// then waits afresh: `kick`). Returns how many there were.
    pub fn expire(&self, now: Instant) -> usize {
        let due: Vec<Arc<Parked<P>>> = {
            let mut d = self.deadlines.lock();
            let later = d.split_off(&(now, u64::MAX));
            let due: Vec<_> = std::mem::replace(&mut *d, later).into_values().collect();
            for p in &due {
                *p.deadline.lock() = None;
                p.due.store(true, Ordering::SeqCst);
            }
            due
        };
        for p in &due {
            p.kick();
        }
        due.len()
    }

    /// The soonest deadline of a parked request.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.lock().keys().next().map(|(at, _)| *at)
    }

    fn interrupt(&self, p: &Parked<P>, err: Errno) {
        let pending = p.slot.lock().take();
        p.done.store(true, Ordering::SeqCst);
        self.remove(p.id);
        if let Some(pending) = pending {
            self.answer(pending, err);
        }
    }

    /// What the watchdog sleeps on between deadlines.
    pub(super) fn alarm(&self) -> Arc<Alarm> {
        self.alarm.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_interrupts_stay_bounded() {
        let t0 = Instant::now();
        let mut early = HashMap::new();
        for u in 0..EARLY_MAX as u64 {
            remember(&mut early, u, t0);
        }
        // Full, none stale: the oldest goes.
        let later = t0 + Duration::from_secs(1);
        remember(&mut early, 1 << 40, later);
        assert_eq!(early.len(), EARLY_MAX);
        assert!(early.contains_key(&(1 << 40)));
        // Full again, all but the newest stale: they go at once.
        let much_later = t0 + EARLY_TTL + Duration::from_millis(500);
        remember(&mut early, 1 << 41, much_later);
        assert_eq!(early.len(), 2);
    }
}

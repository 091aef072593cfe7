//! Bounded release work: a close that drops thousands of references (a
//! receiver closed with 19,000 sockets in flight in its queue) releases at
//! most `INLINE_PUTS` of them itself and hands the rest to one background
//! thread. FUSE releases are ordered (vendor/fuser/UDSFS-PATCH.md): every
//! request read after a RELEASE waits for it, so a release that walked all
//! 19,000 stalled every user's requests; now it holds them up for a bounded
//! time and the bulk costs only a thread of low priority.
//!
//! What the closer's own socket does at its close (its peer's EPIPE and
//! EOF, its name) is still done before the release returns; only the
//! sockets it dropped past the budget close a little later.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::socket::Socket;
use super::worker::Worker;
use super::{Engine, Wakeups};

/// References one outermost `Engine::finish` drops itself (with those of
/// the releases they cause).
pub(crate) const INLINE_PUTS: usize = 256;

thread_local! {
    /// Puts this thread may still do inline in the current outermost
    /// `finish`; None outside one.
    static BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
    /// Puts this thread did inline (tests).
    #[cfg(test)]
    static INLINE_DONE: Cell<usize> = const { Cell::new(0) };
}

#[derive(Default)]
pub(crate) struct ReleaseQueue {
    queue: Mutex<Vec<Arc<Socket>>>,
    /// The thread is busy with a batch (for `settle`).
    busy: AtomicBool,
    cv: Condvar,
    thread: Worker,
}

impl ReleaseQueue {
    /// Set once the engine is in its Arc (the thread holds it weakly).
    pub(crate) fn attach(&self, eng: &Arc<Engine>) {
        self.thread.attach(eng);
    }

    fn defer(&self, socks: Vec<Arc<Socket>>) {
        self.thread.start("udsfs-release", "release", run);
        self.queue.lock().extend(socks);
        self.cv.notify_one();
    }
}

/// The release thread: puts what was deferred, a batch at a time (each
/// batch bounded as a request's is, the rest queued again), at a low
/// priority so that it takes the CPU from no request.
fn run(eng: &Weak<Engine>) {
    // SAFETY: setpriority and gettid have no memory-safety preconditions;
    // PRIO_PROCESS with a thread id sets that thread's nice value.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
    loop {
        let Some(e) = eng.upgrade() else { return };
        let batch = {
            let q = &e.releases;
            let mut queue = q.queue.lock();
            q.busy.store(false, Ordering::Release);
            while queue.is_empty() {
                q.cv.notify_all();
                if q.cv
                    .wait_for(&mut queue, Duration::from_millis(500))
                    .timed_out()
                    && Arc::strong_count(&e) == 1
                {
                    return;
                }
            }
            q.busy.store(true, Ordering::Release);
            let at = queue.len().saturating_sub(INLINE_PUTS);
            queue.split_off(at)
        };
        e.put_all(batch);
    }
}

impl Engine {
    /// Runs the wake-ups, then drops the references they collected: a
    /// bounded number here, the rest on the release thread
    /// (below).
    pub(crate) fn finish(&self, mut wake: Wakeups) {
        let drops = std::mem::take(&mut wake.drops);
        wake.run();
        self.put_all(drops);
    }

    /// Drops `drops`, at most the budget's worth here and the rest on the
    /// release thread.
    pub(crate) fn put_all(&self, drops: Vec<Arc<Socket>>) {
        if drops.is_empty() {
            return;
        }
        let outermost = BUDGET.get().is_none();
        if outermost {
            BUDGET.set(Some(INLINE_PUTS));
        }
        let can_defer = self.releases.thread.attached();
        let mut rest = Vec::new();
        for s in drops {
            let inline = match BUDGET.get() {
                Some(n) if n > 0 => {
                    BUDGET.set(Some(n - 1));
                    true
                }
                _ => !can_defer,
            };
            if inline {
                #[cfg(test)]
                INLINE_DONE.set(INLINE_DONE.get() + 1);
                self.put(&s);
            } else {
                rest.push(s);
            }
        }
        if outermost {
            BUDGET.set(None);
        }
        if !rest.is_empty() {
            self.releases.defer(rest);
        }
    }

    /// Waits until the release thread has put everything deferred (tests).
    #[cfg(test)]
    pub(crate) fn settle_releases(&self) {
        let q = &self.releases;
        let mut queue = q.queue.lock();
        while !queue.is_empty() || q.busy.load(Ordering::Acquire) {
            q.cv.wait_for(&mut queue, Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{engine, root};
    use super::super::{SendMsg, SockType};
    use super::*;

    #[test]
    fn a_close_drops_a_bounded_number_itself_and_the_rest_on_the_thread() {
        let (e, c) = (engine(), root());
        let (a, b) = e.socketpair(SockType::Stream, &c);
        const N: usize = 4 * INLINE_PUTS;
        for _ in 0..N / 128 {
            let mut rights: Vec<_> = (0..128).map(|_| e.socket(SockType::Stream, &c)).collect();
            e.sendmsg(&a, SendMsg::new(b"x").rights(&mut rights), &c, None)
                .unwrap();
        }
        assert_eq!(e.live_sockets(), N + 2);
        INLINE_DONE.set(0);
        e.put(&b);
        let here = INLINE_DONE.get();
        assert!(here <= INLINE_PUTS, "{here} puts in the closer's call");
        e.settle_releases();
        assert_eq!(e.live_sockets(), 1);
        assert_eq!(e.gc.stats().inflight, 0);
        // A small close is done whole before it returns.
        let (x, y) = e.socketpair(SockType::Stream, &c);
        let mut rights: Vec<_> = (0..10).map(|_| e.socket(SockType::Stream, &c)).collect();
        e.sendmsg(&x, SendMsg::new(b"x").rights(&mut rights), &c, None)
            .unwrap();
        e.put(&y);
        assert_eq!(e.live_sockets(), 2);
    }
}

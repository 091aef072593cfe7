//! Waiting without blocking: a blocked operation leaves a waiter on a socket's
//! list; whoever changes the state that the operation waits for takes the list
//! and wakes it after dropping its locks (the waker retries the operation).

use std::sync::Arc;

/// Something to call when a socket's state may let a blocked operation proceed.
pub trait Wake: Send + Sync {
    /// Takes the waiter's reference: a parked request retries itself from it.
    fn wake(self: Arc<Self>);
    /// False once the waiter was answered another way (signal, unmount): the
    /// list drops it instead of keeping it until the next wake-up.
    fn is_live(&self) -> bool {
        true
    }
    /// An exclusive waiter (a parked read) is woken one per new message,
    /// as Linux's exclusive waits are; others (poll) are all woken.
    fn exclusive(&self) -> bool {
        false
    }
    /// A waiter that registers again and again while it stays on the lists
    /// (a poll registration re-armed at each poll): lists keep it once.
    fn rearms(&self) -> bool {
        false
    }
    /// A parked plain read (a FUSE read of a data file): its caller's
    /// thread. A connection's lane may be made under it: the grant wakes it
    /// and it is answered EINTR, which the library of the end's asker
    /// restarts through the ring (src/engine/lane.rs, `lane_kicks`).
    fn read_by(&self) -> Option<u32> {
        None
    }
}

pub type Waiter = Arc<dyn Wake>;

/// The waiters of one event of one socket.
#[derive(Default)]
pub struct WaitList {
    waiters: Vec<Waiter>,
}

/// Beyond this many entries a registration first drops the dead ones.
const PRUNE_AT: usize = 32;

/// The same waiter, whatever trait-object vtable the pointer carries.
fn same(a: &Waiter, b: &Waiter) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl WaitList {
    /// Adds `w`; a waiter that re-arms (poll) is kept once, however often
    /// it registers. (Others are added once per block, after their wake-up
    /// took them off, so they need no search of the list.)
    pub fn add(&mut self, w: Waiter) {
        if w.rearms() && self.waiters.iter().any(|x| same(x, &w)) {
            return;
        }
        if self.waiters.len() >= PRUNE_AT {
            self.waiters.retain(|w| w.is_live());
        }
        self.waiters.push(w);
    }

    pub fn take(&mut self) -> Vec<Waiter> {
        std::mem::take(&mut self.waiters)
    }

    /// The waiters one new message wakes: every non-exclusive one and the
    /// first live exclusive one; the other exclusive ones keep waiting.
    pub fn take_for_one(&mut self) -> Vec<Waiter> {
        let mut out = Vec::new();
        let mut picked = false;
        self.waiters.retain(|w| {
            if !w.is_live() {
                return false;
            }
            if w.exclusive() {
                if picked {
                    return true;
                }
                picked = true;
            }
            out.push(w.clone());
            false
        });
        out
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// A waiter still waits (one answered another way does not count) for
    /// which `spared` says no.
    pub fn any_live_but(&self, spared: impl Fn(&Waiter) -> bool) -> bool {
        self.waiters.iter().any(|w| w.is_live() && !spared(w))
    }

    /// The waiters `which` picks, taken off the list (to be woken: a poller
    /// polls again, and registers again if it still waits).
    pub fn take_where(&mut self, which: impl Fn(&Waiter) -> bool) -> Vec<Waiter> {
        let mut out = Vec::new();
        self.waiters.retain(|w| {
            if which(w) {
                out.push(w.clone());
                false
            } else {
                true
            }
        });
        out
    }
}

const YIELDS_BEFORE_SLEEP: usize = 10;

/// An in-process caller that blocks its own thread until woken (tests, benchmarks).
pub struct ThreadWaiter {
    woken: parking_lot::Mutex<bool>,
    cv: parking_lot::Condvar,
}

impl ThreadWaiter {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            woken: parking_lot::Mutex::new(false),
            cv: parking_lot::Condvar::new(),
        })
    }

    /// Blocks until `wake` was called since the last `wait`. It first gives
    /// the processor away a few times: the waker is usually runnable and
    /// about to send, and sleeping at once costs a futex wake-up per message.
    pub fn wait(&self) {
        for _ in 0..YIELDS_BEFORE_SLEEP {
            {
                let mut w = self.woken.lock();
                if *w {
                    *w = false;
                    return;
                }
            }
            std::thread::yield_now();
        }
        let mut w = self.woken.lock();
        while !*w {
            self.cv.wait(&mut w);
        }
        *w = false;
    }
}

impl Wake for ThreadWaiter {
    fn wake(self: Arc<Self>) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rearming;
    impl Wake for Rearming {
        fn wake(self: Arc<Self>) {}
        fn rearms(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_rearming_waiter_is_kept_once() {
        let mut l = WaitList::default();
        let w: Waiter = Arc::new(Rearming);
        for _ in 0..1000 {
            l.add(w.clone());
        }
        assert_eq!(l.len(), 1);
        l.add(Arc::new(Rearming));
        assert_eq!(l.len(), 2);
    }
}

//! A thread's turn at one end's reader or writer (lane.rs): a lock the
//! program's other threads wait for, as Linux's callers of one socket
//! queue on its `iolock` (a reader) or the receiver's queue lock (a
//! writer). It is held while bytes are copied, never across a sleep for
//! bytes or room (those let go of it and take it again), so a wait for it
//! is short and needs no timeout or signal: hackbench's twenty threads
//! writing to every receiver's socket wait their turns here instead of
//! going through the daemon, which took the lane down for good.
//!
//! One futex word: 0 free, else the holder thread's number shifted left
//! by one, with bit 0 set once a thread sleeps on it (the holder wakes
//! one as it lets go). The holder in the word itself, so that a signal
//! handler that interrupted the holder's copy is told to go elsewhere
//! rather than wait for itself.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use udsfs_proto::lane::futex;

pub struct Turn {
    word: AtomicU32,
}

/// Looks at a taken turn before sleeping on it: a copy is short.
const SPIN: u32 = 100;

const SLEPT_ON: u32 = 1;

impl Turn {
    pub const fn new() -> Turn {
        Turn {
            word: AtomicU32::new(0),
        }
    }

    /// The turn if it is free now (the slot's own changes, which must not
    /// wait for a call).
    pub fn try_take(&self) -> Option<Taken<'_>> {
        self.word
            .compare_exchange(0, me(), Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(Taken(self))
    }

    /// The turn, once the thread holding it lets go; None when this very
    /// thread holds it (a signal handler ran in its copy).
    pub fn take(&self) -> Option<Taken<'_>> {
        let me = me();
        let mut spins = 0;
        // Once this thread slept, others may sleep too: it takes the turn
        // marked as slept on, so its let-go wakes the next.
        let mut mark = 0;
        loop {
            let v = self.word.load(Ordering::Relaxed);
            if v == 0 {
                if self
                    .word
                    .compare_exchange(0, me | mark, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(Taken(self));
                }
                continue;
            }
            if v & !SLEPT_ON == me {
                return None;
            }
            if spins < SPIN {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            if v & SLEPT_ON == 0
                && self
                    .word
                    .compare_exchange(v, v | SLEPT_ON, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            mark = SLEPT_ON;
            // EINTR, EAGAIN (the word changed): look again.
            let _ = futex::wait_private(&self.word, v | SLEPT_ON);
        }
    }
}

impl Turn {
    /// Lets go of the turn if this thread holds it: a signal handler
    /// jumped out of a look that held it (wait_record.rs), whose `Taken`
    /// is never dropped.
    pub fn let_go_if_mine(&self) {
        if self.word.load(Ordering::Relaxed) & !SLEPT_ON == me()
            && self.word.swap(0, Ordering::Release) & SLEPT_ON != 0
        {
            futex::wake_one_private(&self.word);
        }
    }

    /// After fork, in the child: a turn another thread of the parent
    /// held is nobody's (that thread is not in the child).
    pub fn reset(&self) {
        self.word.store(0, Ordering::Relaxed);
    }
}

thread_local! {
    /// This thread's number in turn words (0: not given yet).
    static ME: Cell<u32> = const { Cell::new(0) };
}

/// Numbers given so far.
static THREADS: AtomicU32 = AtomicU32::new(0);

/// This thread's number, shifted: never 0, bit 0 clear. (A thread-local
/// without a destructor: async-signal-safe.)
fn me() -> u32 {
    ME.with(|m| {
        if m.get() == 0 {
            let n = (THREADS.fetch_add(1, Ordering::Relaxed) % (u32::MAX >> 1)) + 1;
            m.set(n << 1);
        }
        m.get()
    })
}

/// A turn taken; let go when dropped.
pub struct Taken<'a>(&'a Turn);

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if self.0.word.swap(0, Ordering::Release) & SLEPT_ON != 0 {
            futex::wake_one_private(&self.0.word);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Turn;
    use std::cell::UnsafeCell;

    struct Shared(Turn, UnsafeCell<u64>);
    // SAFETY: the counter is touched only under the turn.
    unsafe impl Sync for Shared {}

    #[test]
    fn threads_take_turns_and_none_is_lost() {
        let shared = Shared(Turn::new(), UnsafeCell::new(0));
        let s = &shared;
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(move || {
                    for i in 0..20_000 {
                        let t = s.0.take().expect("another thread's turn is waited for");
                        // SAFETY: under the turn.
                        let v = unsafe { *s.1.get() };
                        if i % 1000 == 0 {
                            // A holder that sleeps: the others sleep on the word.
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                        // SAFETY: under the turn.
                        unsafe { *s.1.get() = v + 1 };
                        drop(t);
                    }
                });
            }
        });
        // SAFETY: every thread is done.
        assert_eq!(unsafe { *s.1.get() }, 8 * 20_000);
    }

    #[test]
    fn the_holder_is_told_not_to_wait_for_itself() {
        let t = Turn::new();
        let held = t.take().expect("free");
        assert!(
            t.take().is_none(),
            "a signal handler on the holder's thread would wait forever"
        );
        assert!(t.try_take().is_none());
        drop(held);
        assert!(t.try_take().is_some());
    }
}

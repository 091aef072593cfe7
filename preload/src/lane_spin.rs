//! How many looks a blocking laned call, a poll or an epoll_wait makes at
//! its ends before it sleeps, learnt as it goes. On two CPUs the peer is
//! often writing or reading on the other one, and a sleep then costs an
//! eventfd write, a wake-up and a ppoll for what a few microseconds would
//! have brought (lane_pingpong through `udsfs run`: ~700,000 round trips/s
//! with 400 looks at a blocking read, ~20,000 without). But on a loaded
//! machine the peer is often not running, and every look is a CPU taken
//! from it: a wait whose looks were in vain halves the next waits' looks,
//! one that found its bytes while looking doubles them, up to the most its
//! kind of wait allows; below `FEW`, one wait in `PROBE` looks the most
//! times (the load may have gone). And whatever their count, a poll's or
//! an epoll_wait's looks last at most about what a sleep would cost
//! (`RUN_TIME`), a little longer, yielding, while the peer is still to run
//! (`WAKE_TIME`): a peer that takes longer is better waited for asleep,
//! its CPU free.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The most looks a blocking read or write makes before it sleeps (each
/// takes the turn and looks at the ring: a few microseconds in all).
pub const CALL_LOOKS: u32 = 400;
/// The most a poll or an epoll_wait makes: its look at a ring is far
/// cheaper (lane_pingpong --mode kernel-poll through `udsfs run`: with at
/// most 400 looks, 71% of its polls slept, 25,000 round trips/s; with
/// 4,000, ten polls of 200,000, 519,000/s).
pub const POLL_LOOKS: u32 = 4000;
/// The longest a wait looks while a peer it waits for runs: about what the
/// sleep and wake-up it would spare cost (a futex wake-up reaches a
/// sleeper of another process in ~6 us here, median). Longer looks only
/// take a CPU a runnable program wants: pgbench -S -c 2 -j 2 (four
/// programs on two CPUs) on lanes went from 0.83x the kernel's rate with
/// looks bounded by count alone (up to ~50 us at a poll) to ~1.0x.
const RUN_TIME: Duration = Duration::from_micros(3);
/// The longest a wait looks while every peer it waits for waits itself
/// (ready.rs `peer_waits`: asleep, or woken by this end and not running
/// yet), yielding the CPU at each look: long enough for a peer woken on
/// the other CPU to run (its flags go down, and the looks go on as
/// `RUN_TIME`'s), so a ping-pong that slept once comes back to looks;
/// short enough that a peer waiting for this CPU gets it.
const WAKE_TIME: Duration = Duration::from_micros(10);
/// How many looks between two looks at the clock (while every peer waits:
/// each look, which yields).
const CLOCK_EVERY: u32 = 16;

/// What one look found.
pub struct Seen {
    pub ready: bool,
    /// At how many rings it looked.
    pub rings: u32,
    /// Every peer it looked for waits (ready.rs `peer_waits`).
    pub peers_wait: bool,
}

/// Fewer looks than these find a peer's bytes too seldom to learn from.
const FEW: u32 = 16;
/// Below `FEW`, one wait in this many looks the most times.
const PROBE: u32 = 32;

/// The looks of one kind of wait (an end's reads, its writes, a process's
/// polls) for its next waits.
pub struct Spin {
    most: u32,
    looks: AtomicU32,
    waits: AtomicU32,
}

impl Spin {
    pub const fn new(most: u32) -> Spin {
        Spin {
            most,
            looks: AtomicU32::new(most),
            waits: AtomicU32::new(0),
        }
    }

    /// The looks the next wait may make before it sleeps.
    pub fn looks(&self) -> u32 {
        let n = self.looks.load(Ordering::Relaxed);
        if n >= FEW
            || !self
                .waits
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(PROBE)
        {
            return n;
        }
        self.most
    }

    /// A wait that was given `given` looks and made `made` (more than
    /// given: it went on to sleep).
    pub fn learn(&self, given: u32, made: u32) {
        let now = self.looks.load(Ordering::Relaxed);
        let next = if made <= given {
            (now.max(given) * 2).clamp(FEW, self.most)
        } else {
            now / 2
        };
        // (Racing waits of other threads: any of their answers will do.)
        self.looks.store(next, Ordering::Relaxed);
    }
}

/// Looks with `look` until it finds something ready or has looked at
/// `spin`'s looks' worth of rings (a poll's or an epoll_wait's look at its
/// laned ends before it sleeps: `look` says whether one is ready and at how
/// many rings it looked, so a server's wait over 50 connections does not
/// look 50 times as long as a client's over one); stops at a signal handler
/// that ran meanwhile (the caller's wait is then interrupted: `Handled`), as
/// Linux's poll would have been in its sleep; and after `RUN_TIME` looking
/// while a peer runs, or `WAKE_TIME` while every peer waits (the time
/// counted from the last change between the two).
pub fn look_for(spin: &Spin, look: impl FnMut() -> Seen) -> Found {
    look_within(spin, look, [RUN_TIME, WAKE_TIME])
}

/// `look_for` for a blocking read or write: bounded by its count alone.
/// The clock's bounds cost hackbench -T through `udsfs run` (40 threads
/// on two CPUs, each blocked in a read or a write) ~20% of its time
/// (0.19 s against 0.156 s, medians of 16 alternated runs), and the
/// waits they help are a poll's and an epoll_wait's (a server's, a
/// client's waiting for its query).
pub fn look_for_call(spin: &Spin, look: impl FnMut() -> Seen) -> Found {
    look_within(spin, look, UNTIMED)
}

/// Looks bounded by their count alone.
const UNTIMED: [Duration; 2] = [Duration::MAX, Duration::MAX];

/// `look_for` with its two times (`most[0]` while a peer runs, `most[1]`
/// while every peer waits).
fn look_within(spin: &Spin, mut look: impl FnMut() -> Seen, most: [Duration; 2]) -> Found {
    let given = spin.looks();
    let ran = crate::wait_note::handlers_ran();
    let mut made = 0u32;
    let (mut since, mut waiting, mut looks) = (Instant::now(), false, 0u32);
    while made < given {
        let seen = look();
        made = made.saturating_add(seen.rings.max(1));
        if seen.ready {
            spin.learn(given, made.min(given));
            return Found::Ready;
        }
        if crate::wait_note::handlers_ran() != ran {
            return Found::Handled;
        }
        looks += 1;
        if seen.peers_wait != waiting {
            (since, waiting) = (Instant::now(), seen.peers_wait);
        } else if (waiting || looks.is_multiple_of(CLOCK_EVERY))
            && since.elapsed() > most[usize::from(waiting)]
        {
            break;
        }
        if waiting {
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
        } else {
            std::hint::spin_loop();
        }
    }
    spin.learn(given, given + 1);
    Found::Nothing
}

/// What `look_for` found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Found {
    Ready,
    Nothing,
    /// A signal handler ran during the looks: EINTR.
    Handled,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOST: u32 = CALL_LOOKS;

    /// A wait given the spin's looks that finds its bytes at look `found`
    /// (None: it sleeps): the looks it was given.
    fn wait(s: &Spin, found: Option<u32>) -> u32 {
        let given = s.looks();
        let made = match found {
            Some(k) if k <= given => k,
            _ => given + 1,
        };
        s.learn(given, made);
        given
    }

    #[test]
    fn looks_in_vain_halve_and_found_bytes_double() {
        let s = Spin::new(MOST);
        assert_eq!(wait(&s, None), MOST);
        assert_eq!(s.looks.load(Ordering::Relaxed), MOST / 2);
        // A peer that is never running in time: a wait in PROBE looks.
        let given: Vec<u32> = (0..4 * PROBE).map(|_| wait(&s, None)).collect();
        let spent: u32 = given[PROBE as usize..].iter().sum();
        assert_eq!(spent, 3 * MOST, "below FEW only the probes look: {given:?}");
        // The load goes: a probe finds the bytes, and the looks are back.
        while wait(&s, Some(100)) != MOST {}
        assert_eq!(s.looks(), MOST);
        assert_eq!(wait(&s, Some(1)), MOST);
        assert_eq!(s.looks(), MOST);
    }

    /// `look_within`, bounded by count alone, with a look that finds at
    /// look `found` (None: never), looks at `rings` rings and runs a
    /// signal handler at look `handler`: what it found, after how many.
    fn looked(s: &Spin, found: Option<u32>, rings: u32, handler: Option<u32>) -> (Found, u32) {
        let mut n = 0;
        let look = || {
            n += 1;
            if Some(n) == handler {
                crate::wait_note::handler_ran();
            }
            Seen {
                ready: Some(n) == found,
                rings,
                peers_wait: false,
            }
        };
        let found = look_within(s, look, UNTIMED);
        (found, n)
    }

    #[test]
    fn a_look_that_finds_ends_the_looks_and_a_handler_interrupts_them() {
        let s = Spin::new(POLL_LOOKS);
        assert_eq!(looked(&s, Some(10), 1, None), (Found::Ready, 10));
        assert_eq!(looked(&s, None, 1, None), (Found::Nothing, POLL_LOOKS));
        // Fifty rings a look: a fiftieth of the looks (the looks halved
        // by the look in vain before).
        assert_eq!(
            looked(&s, None, 50, None),
            (Found::Nothing, POLL_LOOKS / 2 / 50)
        );
        assert_eq!(looked(&s, None, 1, Some(5)), (Found::Handled, 5));
    }

    /// Looks that would go on for seconds by their count end by the clock,
    /// a peer running or waiting; one waiting yields at each look.
    #[test]
    fn looks_end_by_the_clock_whatever_their_count() {
        for peers_wait in [false, true] {
            let s = Spin::new(u32::MAX / 2);
            let mut n = 0u32;
            let began = Instant::now();
            let found = look_for(&s, || {
                n += 1;
                Seen {
                    ready: false,
                    rings: 1,
                    peers_wait,
                }
            });
            println!(
                "peers waiting {peers_wait}: {n} looks in {:?}",
                began.elapsed()
            );
            assert_eq!(found, Found::Nothing);
            assert!(n < u32::MAX / 4, "{n} looks: not ended by the clock");
        }
    }
}

//! One direction of a lane: a single-writer single-reader byte ring in the
//! shared region, with stream or record (seqpacket) framing.
//!
//! Positions are u64 counters each end keeps in its own memory; the region
//! holds their low 32 bits (`tail`, `head`), published with Release. An end
//! reads only the other end's word, once per call, and accepts it only if
//! it moved forward by no more than the ring allows (`Corrupt` otherwise);
//! every offset into the ring is its own counter modulo the capacity it was
//! given, so nothing in the region can send it outside the ring.
//!
//! Records: a u32 length, then the bytes, padded to 4 (a record's header is
//! always 4-byte aligned and never wraps); a length past the published
//! bytes is corruption.
//!
//! Sleeping without lost wake-ups: a sleeper raises its count (a thread's
//! sleep: `*_sleeping`; a poller, or a sleep with a timeout: `*_waiting`),
//! arms its event word (`data_ev` for a reader, `space_ev` for a writer:
//! `ARMED`, reading the word as it sets it), fences (SeqCst), looks again,
//! and sleeps on the event word with the value it read (futex) or polls its
//! eventfd (drained before the look). The other side publishes its
//! position, fences, and only when a count is up wakes that kind: the
//! pollers' eventfd, and the futex only if the word is armed, which the
//! wake-up disarms as it bumps it (a system call only when someone went to
//! sleep since the last one). The daemon bumps and wakes every event word
//! when it changes the state. Every bump adds `BUMP`, which leaves `ARMED`
//! as it is.
//!
//! The bytes themselves are copied with plain memory copies: the peer may
//! change them under the copy, which spoils only its own bytes.

use std::cell::Cell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use super::futex;
use super::state::State;
use crate::Errno;
use crate::skb::{message_max, message_truesize, stream_chunk_max, stream_truesize};

/// The region's words and ring for one direction.
#[derive(Clone, Copy)]
pub struct Dir<'a> {
    pub(super) state: &'a AtomicU32,
    pub(super) tail: &'a AtomicU32,
    pub(super) fin: &'a AtomicU32,
    pub(super) writer_waiting: &'a AtomicU32,
    pub(super) data_ev: &'a AtomicU32,
    pub(super) writer_sleeping: &'a AtomicU32,
    pub(super) head: &'a AtomicU32,
    pub(super) reader_waiting: &'a AtomicU32,
    pub(super) space_ev: &'a AtomicU32,
    pub(super) reader_sleeping: &'a AtomicU32,
    /// The writer's count of writes (low 32 bits), each the next mark's.
    pub(super) writes: &'a AtomicU32,
    /// The ends of the last writes (region.rs `mark_word`).
    pub(super) marks: &'a [AtomicU32],
    /// The charged writer's ledger as it published it (`Ledger::word`).
    pub(super) ledger: &'a AtomicU64,
    /// The writer's SO_SNDBUF, which its unread writes' charges are held
    /// to (region.rs `with_budgets`); 0: the ring's size alone bounds it.
    pub(super) budget: u32,
    pub(super) data: *mut u8,
    pub(super) cap: u32,
}

// SAFETY: `data` points into a Region, which is Sync and outlives 'a; a
// Writer or Reader (one per direction and end) may move to another thread.
unsafe impl Send for Dir<'_> {}

impl<'a> Dir<'a> {
    /// The waits for this direction's bytes (its reader's).
    fn readers(&self) -> Waits<'a> {
        Waits {
            pollers: self.reader_waiting,
            sleepers: self.reader_sleeping,
            ev: self.data_ev,
        }
    }

    /// The waits for room in this direction's ring (its writer's).
    fn writers(&self) -> Waits<'a> {
        Waits {
            pollers: self.writer_waiting,
            sleepers: self.writer_sleeping,
            ev: self.space_ev,
        }
    }

    /// Copies `src` into the ring at position `at`, wrapping.
    fn copy_in(&self, at: u64, src: &[u8]) {
        let pos = (at % self.cap as u64) as usize;
        let first = src.len().min(self.cap as usize - pos);
        // SAFETY: pos + first <= cap and src.len() - first <= cap (callers
        // never copy more than cap): both inside this direction's ring.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(pos), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.data, src.len() - first);
        }
    }

    /// Copies from the ring at position `at` into `dst`, wrapping.
    fn copy_out(&self, at: u64, dst: &mut [u8]) {
        let pos = (at % self.cap as u64) as usize;
        let first = dst.len().min(self.cap as usize - pos);
        // SAFETY: as in copy_in.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(pos), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                self.data,
                dst.as_mut_ptr().add(first),
                dst.len() - first,
            );
        }
    }

    /// The aligned header word at position `at` (a multiple of 4).
    fn record_word(&self, at: u64) -> &AtomicU32 {
        let pos = (at % self.cap as u64) as usize;
        debug_assert!(pos.is_multiple_of(4) && pos + 4 <= self.cap as usize);
        // SAFETY: pos is a multiple of 4 below cap, and cap is a multiple
        // of 4: the word is inside the ring and aligned (the ring starts
        // 4-byte aligned).
        unsafe { &*(self.data.add(pos) as *const AtomicU32) }
    }
}

/// How the socket frames its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Stream,
    /// Seqpacket: each write one record, each read one record.
    Record,
}

/// Why a lane call did not do what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneErr {
    /// Nothing to read, or no room (EAGAIN).
    WouldBlock,
    /// A record that no ring of this size can hold (EMSGSIZE).
    TooBig,
    /// Written after this end's own shutdown (EPIPE).
    Shut,
    /// The connection is not direct: the daemon decides.
    NotDirect(State),
    /// A wait's deadline passed (SO_RCVTIMEO/SO_SNDTIMEO: EAGAIN).
    TimedOut,
    /// A signal interrupted a wait (EINTR, or a restart).
    Interrupted,
    /// The region broke the protocol: the connection is to be reset.
    Corrupt(&'static str),
}

impl LaneErr {
    /// The errno a socket call reports; None where the daemon decides.
    pub fn errno(self) -> Option<Errno> {
        Some(match self {
            LaneErr::WouldBlock | LaneErr::TimedOut => libc::EAGAIN,
            LaneErr::TooBig => libc::EMSGSIZE,
            LaneErr::Shut => libc::EPIPE,
            LaneErr::Interrupted => libc::EINTR,
            LaneErr::Corrupt(_) => libc::ECONNRESET,
            LaneErr::NotDirect(_) => return None,
        })
    }
}

/// How an end sleeps and wakes its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// On the region's futex words.
    Futex,
    /// In ppoll on `mine` (non-blocking eventfd, the end's readiness, which
    /// a program's poll/epoll can watch too); the peer is woken by writing
    /// on `peer` (the peer end's eventfd). `hup`, beside `mine` in every
    /// sleep, is the end's daemon-only eventfd (-1: none): the peer holds
    /// `mine` too (to write it) and may drain it, so the daemon's wake-up
    /// at the way down comes on `hup`, which only the end's process holds
    /// and nobody drains (docs/LANE.md "No peer keeps an end asleep").
    Eventfd {
        mine: RawFd,
        peer: RawFd,
        hup: RawFd,
    },
}

/// One kind of wait on a direction (for its bytes, or for room in it):
/// the count of pollers waiting on the end's eventfd (a program's poll or
/// epoll, a sleep with a timeout), the count of threads asleep on the
/// futex word `ev`, and `ev`, bumped at each wake-up.
#[derive(Clone, Copy)]
struct Waits<'a> {
    pollers: &'a AtomicU32,
    sleepers: &'a AtomicU32,
    ev: &'a AtomicU32,
}

impl Notify {
    /// After a store the other end must see (a position, `fin`): the fence
    /// of the protocol above, then a wake-up of whoever waits (`signal`:
    /// the eventfd of the pollers, the peer's or this end's own).
    fn wake_if_waiting(self, w: Waits, signal: impl FnOnce(Notify) -> Option<RawFd>) {
        fence(Ordering::SeqCst);
        let pollers = w.pollers.load(Ordering::Relaxed) != 0;
        let sleepers = w.sleepers.load(Ordering::Relaxed) != 0;
        if !pollers && !sleepers {
            return;
        }
        if sleepers {
            wake_armed(w.ev);
        }
        if let Some(fd) = signal(self).filter(|_| pollers) {
            futex::eventfd_signal(fd);
        }
    }

    /// The peer's eventfd (its pollers').
    fn peer(self) -> Option<RawFd> {
        match self {
            Notify::Futex => None,
            Notify::Eventfd { peer, .. } => Some(peer),
        }
    }
}

/// An event word's flag: a thread read the word as it set this, looked,
/// and sleeps (or is about to) on that value. The first wake-up clears it,
/// so that a woken thread that has not run yet costs the publishes after
/// it no system call (Linux's waker takes the woken task off the wait
/// queue: autoremove_wake_function). A hackbench through lanes made one
/// FUTEX_WAKE a message for one sleep in three before.
pub(super) const ARMED: u32 = 1;
/// What a bump adds to an event word: its count, above `ARMED`.
pub const BUMP: u32 = 2;

/// Wakes every thread asleep on `ev` if one armed it: the word disarmed
/// and bumped at once (a sleeper that armed it after sees the bump and
/// does not sleep on its old value). Lost to nobody: a sleeper arms,
/// fences, then looks; the waker publishes, fences, then reads the word.
fn wake_armed(ev: &AtomicU32) {
    let mut v = ev.load(Ordering::Relaxed);
    while v & ARMED != 0 {
        let next = (v & !ARMED).wrapping_add(BUMP);
        match ev.compare_exchange_weak(v, next, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return futex::wake(ev),
            Err(now) => v = now,
        }
    }
}

fn state_of(w: &AtomicU32) -> Result<(), LaneErr> {
    match State::from_word(w.load(Ordering::Acquire)) {
        Some(State::Direct) => Ok(()),
        Some(s) => Err(LaneErr::NotDirect(s)),
        None => Err(LaneErr::Corrupt("state word")),
    }
}

/// Linux's largest AF_UNIX stream skb's payload, near enough
/// (`UNIX_SKB_FRAGS_SZ`): a stream write goes into a ring in pieces of at
/// most this (`Writer::stream_piece`), each whole or not at all.
const STREAM_PIECE: usize = 32768;

const fn pad4(n: u32) -> u32 {
    (n + 3) & !3
}

/// How long a sleep on an end's eventfd lasts before it looks again
/// (`wait_until`).
const SLICE: Duration = Duration::from_millis(100);

/// Sleeps until `ready` says so, the deadline passes or a signal comes:
/// `spin` looks first, then the flag/fence/look/sleep protocol above.
///
/// A sleep without a timeout is on the futex word `ev`, counted in
/// `sleepers`: every sleeper sees every wake-up (FUTEX_WAKE wakes them
/// all, and a word that moved since the look ends the sleep at once).
/// A sleep with a timeout on an end with eventfds polls the end's
/// eventfd, counted with the pollers: Linux ends such a call with EINTR
/// when its process is stopped and continued (signal(7)), as epoll_wait
/// does, where a futex sleep restarts. An end's readers, writers and the
/// program's pollers share that eventfd, and each drains it before it
/// looks: a wake-up one of them drains before another's poll runs is lost
/// to that other (a reader asleep for bytes while the end's writer, asleep
/// for room, drained the peer's wake-up:
/// `an_ends_reader_and_writer_asleep_at_once_both_see_their_wake_ups`).
/// So such a sleep lasts `SLICE` at most and looks again: at worst that
/// late, never asleep for good with its bytes or room there.
fn wait_until(
    mut ready: impl FnMut() -> Result<bool, LaneErr>,
    w: Waits,
    notify: Notify,
    spin: u32,
    timeout: Option<Duration>,
    raised: Option<&Cell<usize>>,
) -> Result<(), LaneErr> {
    for _ in 0..spin {
        if ready()? {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let polled = match notify {
        Notify::Eventfd { mine, hup, .. } if timeout.is_some() => Some((mine, hup)),
        _ => None,
    };
    // A count, not a flag: several threads of a process may sleep on
    // one end (each its own turn between sleeps), and pollers too
    // (ready.rs `set_waiting`); the first to wake must not lower it
    // under the others.
    let count = if polled.is_some() {
        w.pollers
    } else {
        w.sleepers
    };
    let mut woke = false;
    loop {
        if let Some((mine, _)) = polled {
            futex::eventfd_drain(mine);
        }
        // After a sleep, a look before arming: a sleep that is over
        // leaves the word disarmed (arming is for a sleep to come).
        if woke && ready()? {
            return Ok(());
        }
        woke = true;
        count.fetch_add(1, Ordering::Relaxed);
        let e = match polled {
            None => w.ev.fetch_or(ARMED, Ordering::AcqRel) | ARMED,
            Some(_) => 0,
        };
        // Marked after the raise and unmarked before the lowering: a
        // jump out of a handler between the two leaves the count raised
        // (wake-ups to spare), never lowered twice (a lost one).
        let mark = |on: bool| {
            if let Some(m) = raised {
                m.set(if on {
                    count as *const AtomicU32 as usize
                } else {
                    0
                });
            }
        };
        mark(true);
        fence(Ordering::SeqCst);
        let r = ready();
        if !matches!(r, Ok(false)) {
            mark(false);
            count.fetch_sub(1, Ordering::Relaxed);
            return r.map(|_| ());
        }
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(l) if !l.is_zero() => Some(l),
                _ => {
                    mark(false);
                    count.fetch_sub(1, Ordering::Relaxed);
                    return Err(LaneErr::TimedOut);
                }
            },
        };
        let slept = match polled {
            None => futex::wait(w.ev, e, left),
            Some((mine, hup)) => futex::poll_in(mine, hup, left.map(|l| l.min(SLICE))),
        };
        mark(false);
        count.fetch_sub(1, Ordering::Relaxed);
        if slept == Err(libc::EINTR) {
            return Err(LaneErr::Interrupted);
        }
    }
}

/// What a sleep on one end's direction needs, apart from its reader or
/// writer: a thread that let go of its turn at the end (the library's
/// lane.rs: other threads copy meanwhile) sleeps with this and looks
/// whether to wake under the turn again (`ready`).
#[derive(Clone, Copy)]
pub struct Sleeper<'a> {
    waits: Waits<'a>,
    notify: Notify,
}

impl<'a> Sleeper<'a> {
    /// Sleeps until `ready` says so (spinning `spin` looks first), at most
    /// `timeout`, or a signal comes (Interrupted).
    pub fn wait(
        self,
        ready: impl FnMut() -> Result<bool, LaneErr>,
        spin: u32,
        timeout: Option<Duration>,
    ) -> Result<(), LaneErr> {
        wait_until(ready, self.waits, self.notify, spin, timeout, None)
    }

    /// `wait`, with `raised` set to the address of the count of sleepers
    /// this sleep raised, while raised (0 otherwise): a program that jumps
    /// out of the sleep from a signal handler skips its lowering, which
    /// the library then makes (preload/src/wait_record.rs).
    pub fn wait_marked(
        self,
        ready: impl FnMut() -> Result<bool, LaneErr>,
        spin: u32,
        timeout: Option<Duration>,
        raised: &Cell<usize>,
    ) -> Result<(), LaneErr> {
        wait_until(ready, self.waits, self.notify, spin, timeout, Some(raised))
    }

    /// The futex word a sleep without a timeout sleeps on: a signal
    /// handler that ran during the sleep bumps it (the library's
    /// trampoline), since the kernel restarts a futex sleep after a
    /// handler with SA_RESTART, and the sleeper must look again then.
    pub fn word(&self) -> &'a AtomicU32 {
        self.waits.ev
    }

    /// After a call that leaves what others sleep for (bytes after a short
    /// read, room after a write): wakes this process's other sleepers on
    /// the end, when any (`still` asked only then). A wake-up on the
    /// eventfd may reach one of them only (the first drains it), which must
    /// pass it on rather than leave the rest asleep with their bytes or
    /// room there (Linux wakes every sleeper of the socket).
    pub fn pass_on(self, still: impl FnOnce() -> bool) {
        let w = self.waits;
        let idle = |c: &AtomicU32| c.load(Ordering::Relaxed) == 0;
        if idle(w.pollers) && idle(w.sleepers) || !still() {
            return;
        }
        self.notify.wake_if_waiting(w, |n| match n {
            Notify::Futex => None,
            Notify::Eventfd { mine, .. } => Some(mine),
        });
    }
}

/// A charged writer's running account of what its unread writes cost it
/// (Linux's sk_wmem_alloc): `at`, the oldest write whose charge is not
/// given back yet (its count's low 32 bits; it starts at the mark before
/// its own), and `charge`, what the writes from it on are charged. The
/// writer keeps its own and publishes it (one 64-bit word, region.rs
/// `OFF_LEDGER`) for poll's look, which reads both halves at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Ledger {
    pub(super) at: u32,
    pub(super) charge: u32,
}

impl Ledger {
    pub(super) fn word(self) -> u64 {
        u64::from(self.at) | u64::from(self.charge) << 32
    }

    pub(super) fn from_word(w: u64) -> Ledger {
        Ledger {
            at: w as u32,
            charge: (w >> 32) as u32,
        }
    }
}

/// The charge of one write of `size` ring bytes (a record's: with its
/// header and padding): Linux's skb truesize. None: no write a sender
/// with this budget makes (`largest`: `largest_write`), a peer's scribble.
pub(super) fn write_truesize(size: usize, framing: Framing, largest: usize) -> Option<u32> {
    if size == 0 || size > largest {
        return None;
    }
    let t = match framing {
        Framing::Stream => stream_truesize(size),
        Framing::Record if size < 4 || !size.is_multiple_of(4) => return None,
        Framing::Record => message_truesize(size - 4),
    };
    u32::try_from(t).ok()
}

/// The most ring bytes one write of a sender with SO_SNDBUF `sndbuf`
/// takes: a stream chunk, or a whole record with its header and padding.
pub(super) fn largest_write(framing: Framing, sndbuf: usize) -> usize {
    match framing {
        Framing::Stream => stream_chunk_max(sndbuf),
        Framing::Record => 4 + message_max(sndbuf).next_multiple_of(4),
    }
}

/// A charged writer's most unread writes (poll's look holds it to them
/// too, ready.rs): the marks keep one more, the oldest one's start.
pub(super) fn most_unread(marks: &[AtomicU32]) -> usize {
    marks.len() - 1
}

/// `l` with the charges of the writes the reader has passed whole given
/// back: a walk forward from `l.at` over the marks (`writes` of them made,
/// the last ending at `tail`; the reader at `head`, all low 32 bits) that
/// stops at the first write not read whole, so that each write's mark is
/// looked at once however many stay unread. An empty ring owes nothing
/// (no mark looked at). None: the ledger or the marks are no such writes
/// (a peer scribbled them): a ledger more writes behind than the marks
/// keep, a write that does not end after its start and at or before the
/// tail, one no write of the sender's (`write_truesize`), or more charge
/// given back than was owed. The writer trusts it with nothing but its
/// own charge (it checks the ring's room itself); poll's look (ready.rs)
/// uses it as advice on the published ledger, storing nothing.
pub(super) fn credit(
    marks: &[AtomicU32],
    writes: u32,
    mut l: Ledger,
    (tail, head): (u32, u32),
    framing: Framing,
    sndbuf: usize,
) -> Option<Ledger> {
    if writes.wrapping_sub(l.at) as usize > most_unread(marks) {
        return None;
    }
    if tail == head {
        return Some(Ledger {
            at: writes,
            charge: 0,
        });
    }
    let mark = |i: u32| marks[i as usize % marks.len()].load(Ordering::Relaxed);
    let largest = largest_write(framing, sndbuf);
    // Positions as distances back from the tail: a read one is at least
    // `unread` back.
    let unread = tail.wrapping_sub(head);
    let mut start = tail.wrapping_sub(mark(l.at.wrapping_sub(1)));
    while l.at != writes {
        let end = tail.wrapping_sub(mark(l.at));
        if end >= start {
            return None;
        }
        if end < unread {
            break;
        }
        let t = write_truesize((start - end) as usize, framing, largest)?;
        l.charge = l.charge.checked_sub(t)?;
        l.at = l.at.wrapping_add(1);
        start = end;
    }
    Some(l)
}

/// The writing half of one end.
pub struct Writer<'a> {
    d: Dir<'a>,
    framing: Framing,
    notify: Notify,
    tail: u64,
    head_seen: u64,
    shut: bool,
    bad: Option<&'static str>,
    /// Writes so far: the next mark's slot.
    writes: u32,
    /// A charged writer's own ledger, which it publishes (`Dir::ledger`).
    ledger: Ledger,
}

impl<'a> Writer<'a> {
    pub(super) fn new(d: Dir<'a>, framing: Framing, pos: u64) -> Writer<'a> {
        Writer {
            d,
            framing,
            notify: Notify::Futex,
            tail: pos,
            head_seen: pos,
            shut: false,
            bad: None,
            writes: 0,
            ledger: Ledger::default(),
        }
    }

    pub fn set_notify(&mut self, n: Notify) {
        self.notify = n;
    }

    pub fn capacity(&self) -> u32 {
        self.d.cap
    }

    fn corrupt(&mut self, why: &'static str) -> LaneErr {
        self.bad = Some(why);
        LaneErr::Corrupt(why)
    }

    fn usable(&self) -> Result<(), LaneErr> {
        if let Some(w) = self.bad {
            return Err(LaneErr::Corrupt(w));
        }
        state_of(self.d.state)
    }

    /// Bytes written and not yet read (SIOCOUTQ), the reader's position
    /// read once and checked: it may only move forward, up to our tail.
    pub fn queued(&mut self) -> Result<u32, LaneErr> {
        if let Some(w) = self.bad {
            return Err(LaneErr::Corrupt(w));
        }
        let h = self.d.head.load(Ordering::Acquire);
        let moved = h.wrapping_sub(self.head_seen as u32);
        if moved as u64 > self.tail - self.head_seen {
            return Err(self.corrupt("head moved backwards or past the tail"));
        }
        self.head_seen += moved as u64;
        Ok((self.tail - self.head_seen) as u32)
    }

    /// The writer's own position (bytes written into the ring).
    pub fn position(&self) -> u64 {
        self.tail
    }

    /// The reader's position as last checked (a writer made again at
    /// `position` goes on from it: `resumed`).
    pub fn head_seen(&self) -> u64 {
        self.head_seen
    }

    /// This writer, made at its tail, with `head_seen` as an earlier one
    /// of the same ring left it (bytes still unread: without it the
    /// reader's head would look as if it moved backwards).
    pub fn resumed(mut self, head_seen: u64) -> Self {
        if head_seen <= self.tail && self.tail - head_seen <= self.d.cap as u64 {
            self.head_seen = head_seen;
        }
        self
    }

    /// A stream write's piece, Linux's largest skb (about 32 KiB, at most
    /// half of SO_SNDBUF): a write goes into the ring in whole pieces.
    pub fn stream_piece(&self) -> usize {
        STREAM_PIECE.min(self.d.cap as usize / 2).max(1)
    }

    /// Room for bytes now.
    pub fn free(&mut self) -> Result<u32, LaneErr> {
        Ok(self.d.cap - self.queued()?)
    }

    /// Writes: for a stream as many of `data`'s bytes as fit (WouldBlock if
    /// none does), for records `data` whole as one record or nothing. A
    /// charged writer (`Dir::budget`) writes while its unread writes are
    /// charged less than its SO_SNDBUF, as Linux's sender allocates skbs.
    pub fn write(&mut self, data: &[u8]) -> Result<usize, LaneErr> {
        self.usable()?;
        if self.shut {
            return Err(LaneErr::Shut);
        }
        let free = self.free()?;
        if self.d.budget != 0 {
            return self.write_charged(data, free as usize);
        }
        match self.framing {
            Framing::Stream => {
                // Linux queues a stream write as skbs of at most
                // `stream_piece` bytes, each whole or not at all: a write
                // that fits goes whole, a longer one as the whole pieces
                // that fit, none: WouldBlock. (Taking the 72 bytes left of
                // a full ring from a 1000-byte send made a reader that
                // counts its sends read into the next message: issue 30.)
                let piece = self.stream_piece();
                let free = free as usize;
                let n = if data.len() <= free {
                    data.len()
                } else {
                    free - free % piece
                };
                if n == 0 {
                    return if data.is_empty() {
                        Ok(0)
                    } else {
                        Err(self.would_block())
                    };
                }
                self.d.copy_in(self.tail, &data[..n]);
                self.mark(self.tail + n as u64);
                self.publish(n as u64);
                Ok(n)
            }
            Framing::Record => {
                if data.len() > (self.d.cap - 4) as usize {
                    return Err(LaneErr::TooBig);
                }
                let len = data.len() as u32;
                let need = 4 + pad4(len);
                if need > free {
                    return Err(self.would_block());
                }
                self.d.record_word(self.tail).store(len, Ordering::Relaxed);
                self.d.copy_in(self.tail + 4, data);
                self.publish(need as u64);
                Ok(data.len())
            }
        }
    }

    /// Where a write ends (`end`), before the tail that publishes it.
    fn mark(&mut self, end: u64) {
        let slot = self.writes as usize % self.d.marks.len();
        self.writes = self.writes.wrapping_add(1);
        self.d.marks[slot].store(end as u32, Ordering::Relaxed);
        self.d.writes.store(self.writes, Ordering::Relaxed);
    }

    /// What the unread writes are charged against the writer's SO_SNDBUF
    /// (Linux's sk_wmem_alloc; 0 for a writer without one).
    pub fn charge(&mut self) -> Result<usize, LaneErr> {
        self.queued()?;
        if self.d.budget == 0 {
            return Ok(0);
        }
        Ok(self.charged()?.0)
    }

    /// What the unread writes are charged and how many they are (the
    /// reader's head as `queued` last checked it): the ledger with what
    /// the reader passed since given back (`credit`), published when it
    /// moved; Corrupt when the marks are not ours.
    fn charged(&mut self) -> Result<(usize, usize), LaneErr> {
        let at = (self.tail as u32, self.head_seen as u32);
        let sndbuf = self.d.budget as usize;
        let l = credit(
            self.d.marks,
            self.writes,
            self.ledger,
            at,
            self.framing,
            sndbuf,
        )
        .ok_or_else(|| self.corrupt("write marks"))?;
        if l != self.ledger {
            self.ledger = l;
            self.d.ledger.store(l.word(), Ordering::Relaxed);
        }
        Ok((l.charge as usize, self.writes.wrapping_sub(l.at) as usize))
    }

    /// A charged write of `size` ring bytes, just marked: its charge on
    /// the ledger, published before the tail that publishes the write.
    fn owe(&mut self, size: usize) {
        let largest = largest_write(self.framing, self.d.budget as usize);
        // write_charged's writes are within `largest`: never 0 here.
        let t = write_truesize(size, self.framing, largest).unwrap_or(0);
        self.ledger.charge = self.ledger.charge.saturating_add(t);
        self.d.ledger.store(self.ledger.word(), Ordering::Relaxed);
    }

    /// `write` for a charged writer, `free` bytes of room in the ring
    /// (which, sized by `ring_bytes_for`, holds whatever the charges let
    /// in: checked all the same). A stream write goes as skbs cut from its
    /// start, each taken while the charge is below SO_SNDBUF
    /// (unix_stream_sendmsg's sock_alloc_send_pskb), a record whole while
    /// it is (unix_dgram_sendmsg), and longer than SO_SNDBUF allows:
    /// TooBig (the daemon's EMSGSIZE).
    fn write_charged(&mut self, data: &[u8], free: usize) -> Result<usize, LaneErr> {
        let sndbuf = self.d.budget as usize;
        let (mut charge, mut unread) = self.charged()?;
        let most = most_unread(self.d.marks);
        let room = |charge: usize, unread: usize| charge < sndbuf && unread < most;
        match self.framing {
            Framing::Stream => {
                let chunk = stream_chunk_max(sndbuf);
                let mut n = 0;
                while n < data.len() && room(charge, unread) {
                    let c = (data.len() - n).min(chunk);
                    if n + c > free {
                        break;
                    }
                    self.d.copy_in(self.tail + n as u64, &data[n..n + c]);
                    n += c;
                    self.mark(self.tail + n as u64);
                    self.owe(c);
                    charge = self.ledger.charge as usize;
                    unread += 1;
                }
                if n == 0 {
                    return if data.is_empty() {
                        Ok(0)
                    } else {
                        Err(self.would_block())
                    };
                }
                self.publish(n as u64);
                Ok(n)
            }
            Framing::Record => {
                if data.len() > message_max(sndbuf).min((self.d.cap - 4) as usize) {
                    return Err(LaneErr::TooBig);
                }
                let len = data.len() as u32;
                let need = 4 + pad4(len);
                if !room(charge, unread) || need as usize > free {
                    return Err(self.would_block());
                }
                self.d.record_word(self.tail).store(len, Ordering::Relaxed);
                self.d.copy_in(self.tail + 4, data);
                self.mark(self.tail + need as u64);
                self.owe(need as usize);
                self.publish(need as u64);
                Ok(data.len())
            }
        }
    }

    /// WouldBlock, unless the region's tail, writes or ledger word is not
    /// ours: only we write them, so the peer lied there (poll's look at the
    /// region's words then says writable while we are full: ready.rs).
    fn would_block(&mut self) -> LaneErr {
        if self.d.tail.load(Ordering::Relaxed) != self.tail as u32 {
            return self.corrupt("tail word not the writer's");
        }
        if self.d.budget != 0 && self.d.writes.load(Ordering::Relaxed) != self.writes {
            return self.corrupt("writes word not the writer's");
        }
        if self.d.budget != 0 && self.d.ledger.load(Ordering::Relaxed) != self.ledger.word() {
            return self.corrupt("ledger word not the writer's");
        }
        LaneErr::WouldBlock
    }

    fn publish(&mut self, n: u64) {
        self.tail += n;
        self.d.tail.store(self.tail as u32, Ordering::Release);
        self.notify.wake_if_waiting(self.d.readers(), Notify::peer);
    }

    /// No more bytes from this end (shutdown(SHUT_WR), close): the reader
    /// sees the end after the bytes before it.
    pub fn shutdown(&mut self) {
        if self.shut {
            return;
        }
        self.shut = true;
        self.d.fin.store(1, Ordering::Release);
        self.notify.wake_if_waiting(self.d.readers(), Notify::peer);
    }

    /// Whether a write of `want` bytes (a record: its whole size; a stream:
    /// its first piece, `stream_piece`) would not block, or the state sends
    /// the caller elsewhere.
    pub fn writable(&mut self, want: usize) -> Result<bool, LaneErr> {
        match self.usable() {
            Err(LaneErr::NotDirect(_)) => return Ok(true),
            r => r?,
        }
        let need = match self.framing {
            Framing::Stream => want.clamp(1, self.stream_piece()) as u32,
            Framing::Record => 4 + pad4(want.min((self.d.cap - 4) as usize) as u32),
        };
        let room = self.free()? >= need;
        if self.d.budget == 0 || !room {
            return Ok(room);
        }
        // unix_writable: a sender asleep for room is woken (sock_wfree's
        // write_space) once at most a quarter of its budget is charged.
        let (charge, unread) = self.charged()?;
        Ok(charge * 4 <= self.d.budget as usize && unread < most_unread(self.d.marks))
    }

    /// Sleeps until `writable(want)` (spinning `spin` looks first), at most
    /// `timeout`.
    pub fn wait_writable(
        &mut self,
        want: usize,
        spin: u32,
        timeout: Option<Duration>,
    ) -> Result<(), LaneErr> {
        let sleeper = self.sleeper();
        sleeper.wait(|| self.writable(want), spin, timeout)
    }

    /// The sleep for room, without this writer (`Sleeper`).
    pub fn sleeper(&self) -> Sleeper<'a> {
        Sleeper {
            waits: self.d.writers(),
            notify: self.notify,
        }
    }

    /// Writes all of a stream's `data` or one record, sleeping for room.
    pub fn write_all(&mut self, mut data: &[u8], spin: u32) -> Result<(), LaneErr> {
        loop {
            match self.write(data) {
                Ok(n) if n == data.len() => return Ok(()),
                Ok(n) => data = &data[n..],
                Err(LaneErr::WouldBlock) => {}
                Err(e) => return Err(e),
            }
            self.wait_writable(data.len(), spin, None)?;
        }
    }
}

/// The reading half of one end.
pub struct Reader<'a> {
    d: Dir<'a>,
    framing: Framing,
    notify: Notify,
    head: u64,
    tail_seen: u64,
    /// The tail when the writer's end was first seen: nothing may follow.
    fin_tail: Option<u64>,
    bad: Option<&'static str>,
}

/// One record read: the bytes copied and the record's length (larger when
/// the buffer was short: the rest is dropped, MSG_TRUNC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub copied: usize,
    pub len: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(d: Dir<'a>, framing: Framing, pos: u64) -> Reader<'a> {
        Reader {
            d,
            framing,
            notify: Notify::Futex,
            head: pos,
            tail_seen: pos,
            fin_tail: None,
            bad: None,
        }
    }

    pub fn set_notify(&mut self, n: Notify) {
        self.notify = n;
    }

    fn corrupt(&mut self, why: &'static str) -> LaneErr {
        self.bad = Some(why);
        LaneErr::Corrupt(why)
    }

    /// The bytes readable now and whether the writer has finished, its
    /// words read once (fin before tail: the tail read after a fin of 1 is
    /// final) and checked.
    fn look(&mut self) -> Result<(u32, bool), LaneErr> {
        if let Some(w) = self.bad {
            return Err(LaneErr::Corrupt(w));
        }
        let fin = match self.d.fin.load(Ordering::Acquire) {
            0 => false,
            1 => true,
            _ => return Err(self.corrupt("fin word")),
        };
        let t = self.d.tail.load(Ordering::Acquire);
        let moved = t.wrapping_sub(self.tail_seen as u32);
        let room = self.d.cap as u64 - (self.tail_seen - self.head);
        if moved as u64 > room {
            return Err(self.corrupt("tail moved backwards or past the ring"));
        }
        if self.framing == Framing::Record && !moved.is_multiple_of(4) {
            return Err(self.corrupt("tail not at a record boundary"));
        }
        if moved != 0 && self.fin_tail.is_some() {
            return Err(self.corrupt("bytes after the writer's end"));
        }
        self.tail_seen += moved as u64;
        if fin && self.fin_tail.is_none() {
            self.fin_tail = Some(self.tail_seen);
        }
        Ok(((self.tail_seen - self.head) as u32, self.fin_tail.is_some()))
    }

    /// The record at our head: its length, checked against the bytes
    /// published (`used` of them).
    fn record_len(&mut self, used: u32) -> Result<u32, LaneErr> {
        if used < 4 {
            return Err(self.corrupt("a record shorter than its header"));
        }
        let len = self.d.record_word(self.head).load(Ordering::Relaxed);
        if len > used - 4 || 4 + pad4(len) > used {
            return Err(self.corrupt("a record length past the written bytes"));
        }
        Ok(len)
    }

    /// WouldBlock, unless the region's head word is not our head: only we
    /// write it, so the peer lied there (poll's look at the region's words
    /// then says readable while we have nothing: ready.rs).
    fn would_block(&mut self) -> LaneErr {
        if self.d.head.load(Ordering::Relaxed) != self.head as u32 {
            return self.corrupt("head word not the reader's");
        }
        LaneErr::WouldBlock
    }

    fn consume(&mut self, n: u64) {
        self.head += n;
        self.d.head.store(self.head as u32, Ordering::Release);
        self.notify.wake_if_waiting(self.d.writers(), Notify::peer);
    }

    fn usable(&self) -> Result<(), LaneErr> {
        if let Some(w) = self.bad {
            return Err(LaneErr::Corrupt(w));
        }
        state_of(self.d.state)
    }

    /// A stream read: up to `buf.len()` bytes (0 at the end of the stream),
    /// WouldBlock when none is there yet; `peek` leaves them.
    pub fn read(&mut self, buf: &mut [u8], peek: bool) -> Result<usize, LaneErr> {
        debug_assert_eq!(self.framing, Framing::Stream);
        self.usable()?;
        let (used, fin) = self.look()?;
        if used == 0 {
            return if fin || buf.is_empty() {
                Ok(0)
            } else {
                Err(self.would_block())
            };
        }
        let n = buf.len().min(used as usize);
        self.d.copy_out(self.head, &mut buf[..n]);
        if !peek {
            self.consume(n as u64);
        }
        Ok(n)
    }

    /// A record read: the next record into `buf` (None at the end).
    pub fn read_record(&mut self, buf: &mut [u8], peek: bool) -> Result<Option<Record>, LaneErr> {
        debug_assert_eq!(self.framing, Framing::Record);
        self.usable()?;
        let (used, fin) = self.look()?;
        if used == 0 {
            return if fin {
                Ok(None)
            } else {
                Err(self.would_block())
            };
        }
        let len = self.record_len(used)?;
        let copied = buf.len().min(len as usize);
        self.d.copy_out(self.head + 4, &mut buf[..copied]);
        if !peek {
            self.consume(4 + pad4(len) as u64);
        }
        Ok(Some(Record {
            copied,
            len: len as usize,
        }))
    }

    /// FIONREAD: a stream's bytes queued, a record socket's next record's.
    pub fn available(&mut self) -> Result<u32, LaneErr> {
        let (used, _) = self.look()?;
        match self.framing {
            Framing::Stream => Ok(used),
            Framing::Record if used == 0 => Ok(0),
            Framing::Record => self.record_len(used),
        }
    }

    /// Whether a read would not block (bytes, the writer's end, or a state
    /// that sends the caller to the daemon).
    pub fn readable(&mut self) -> Result<bool, LaneErr> {
        match self.usable() {
            Err(LaneErr::NotDirect(_)) => return Ok(true),
            r => r?,
        }
        let (used, fin) = self.look()?;
        Ok(used > 0 || fin)
    }

    /// Sleeps until `readable()` (spinning `spin` looks first), at most
    /// `timeout`.
    pub fn wait_readable(&mut self, spin: u32, timeout: Option<Duration>) -> Result<(), LaneErr> {
        let sleeper = self.sleeper();
        sleeper.wait(|| self.readable(), spin, timeout)
    }

    /// The sleep for bytes, without this reader (`Sleeper`).
    pub fn sleeper(&self) -> Sleeper<'a> {
        Sleeper {
            waits: self.d.readers(),
            notify: self.notify,
        }
    }

    /// Whether the writer's end came and every byte before it was read
    /// (the daemon's mover passes the end on then: pump.rs).
    pub fn ended(&mut self) -> Result<bool, LaneErr> {
        let (used, fin) = self.look()?;
        Ok(used == 0 && fin)
    }

    /// The reader's own position (bytes read through the ring).
    pub fn position(&self) -> u64 {
        self.head
    }

    /// Reads exactly `buf.len()` stream bytes, sleeping for them; Ok(false)
    /// at an early end.
    pub fn read_exact(&mut self, buf: &mut [u8], spin: u32) -> Result<bool, LaneErr> {
        let mut got = 0;
        while got < buf.len() {
            match self.read(&mut buf[got..], false) {
                Ok(0) => return Ok(false),
                Ok(n) => got += n,
                Err(LaneErr::WouldBlock) => self.wait_readable(spin, None)?,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

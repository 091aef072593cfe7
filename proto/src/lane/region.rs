//! One connection's shared region: a header page, then the ring of direction
//! A->B (`cap[0]` bytes), then B->A (`cap[1]`).
//!
//! The region is a memfd sealed against shrinking and growing (a holder that
//! could shrink it would make the other side's accesses fault: SIGBUS), and is
//! mapped between two PROT_NONE guard pages, so that a bug that strays out of
//! it faults at once instead of touching the process's other memory.
//! The capacities are never read from the region: whoever maps it is told
//! them by the daemon, with the fd.
//!
//! Header (4-byte words; each end's words on cache lines of their own):
//!
//! | offset | word | written by |
//! |---|---|---|
//! | 0 | magic | creator |
//! | 4 | version | creator |
//! | 8 | state (`State`) | the daemon only |
//! | 16 + 4 side | busy: the end is moving bytes (stage b's way down waits for 0) | that end |
//! | 64 + 256 d + 0 | tail: bytes written into ring d (low 32 bits) | d's writer |
//! | 64 + 256 d + 4 | fin: 1 once d's writer sent its last byte | d's writer |
//! | 64 + 256 d + 8 | writer_waiting: d's writer's pollers wait for space (eventfd) | d's writer |
//! | 64 + 256 d + 12 | data_ev: futex word d's reader sleeps on (bit 0: armed) | d's reader arms it; d's writer, the daemon bump it |
//! | 64 + 256 d + 16 | writer_sleeping: d's writer threads asleep on space_ev | d's writer |
//! | 64 + 256 d + 20 | writes: d's writes so far, each the next mark's (low 32 bits) | d's writer |
//! | 64 + 256 d + 24 | ledger (8 bytes): d's charged writer's oldest write not given back and what it owes (ring.rs `Ledger`) | d's writer |
//! | 64 + 256 d + 128 | head: bytes read from ring d (low 32 bits) | d's reader |
//! | 64 + 256 d + 132 | reader_waiting: d's reader's pollers wait for data (eventfd) | d's reader |
//! | 64 + 256 d + 136 | space_ev: futex word d's writer sleeps on (bit 0: armed) | d's writer arms it; d's reader, the daemon bump it |
//! | 64 + 256 d + 140 | reader_sleeping: d's reader threads asleep on data_ev | d's reader |
//! | 4096 + 4096 d + 4 i | mark i: the tail after write i (mod `MARKS`) of d's last ones | d's writer |
//!
//! The marks are where Linux would have ended an skb: the way down queues a
//! stream ring's unread bytes split at them (SIOCOUTQ counts each write's
//! overhead, bufs.sh), and trusts them for nothing else. A ring whose
//! writer is charged as Linux charges its sender (`with_budgets`: each
//! write's skb truesize against SO_SNDBUF, given back once the write is
//! read whole) keeps a running charge, the ledger, and gives a write's
//! charge back when the reader has passed its mark (ring.rs `credit`:
//! each mark looked at once), records too; a peer that scribbles the
//! marks or the ledger spoils only its own connection (the writer finds
//! them corrupt, or is charged wrongly while bytes are unread; never once
//! the ring is empty).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::futex;
use super::ring::{Dir, Framing, Reader, Writer};
use super::state::State;
use crate::{Errno, Res};

pub const MAGIC: u32 = u32::from_le_bytes(*b"UDLN");
/// 5: the header is three pages, 1024 marks a direction, the writes word,
/// the ledger; 6: the event words' low bit is a sleeper's arm (ring.rs
/// `ARMED`), bumps add 2.
pub const VERSION: u32 = 6;
/// The header's size; the rings follow it.
pub const HEADER: usize = 3 * 4096;
const PAGE: usize = 4096;

pub const OFF_MAGIC: usize = 0;
pub const OFF_VERSION: usize = 4;
pub const OFF_STATE: usize = 8;
/// End `side`'s busy word (0: A, 1: B): raised (SeqCst) before it looks at
/// the state and moves bytes, lowered after, a count of the end's threads
/// doing so; the daemon sets the state, then waits for both to be 0 before
/// it drains the rings.
pub const fn busy_word(side: usize) -> usize {
    16 + 4 * side
}
const DIR_BASE: usize = 64;
const DIR_SIZE: usize = 256;
pub const OFF_TAIL: usize = 0;
pub const OFF_FIN: usize = 4;
pub const OFF_WRITER_WAITING: usize = 8;
pub const OFF_DATA_EV: usize = 12;
pub const OFF_WRITER_SLEEPING: usize = 16;
pub const OFF_WRITES: usize = 20;
/// 8 bytes, 8-aligned: poll reads the ledger's two halves at once.
pub const OFF_LEDGER: usize = 24;
pub const OFF_HEAD: usize = 128;
pub const OFF_READER_WAITING: usize = 132;
pub const OFF_SPACE_EV: usize = 136;
pub const OFF_READER_SLEEPING: usize = 140;

/// How many of a ring's last writes' ends its header keeps (a power of
/// two: a write's slot is its count's low 32 bits modulo it). A charged
/// writer has at most `MARKS - 1` writes unread (Linux's 212992 bytes of
/// SO_SNDBUF hold at most 278 skbs).
pub const MARKS: usize = 1024;
const MARKS_BASE: usize = 4096;
const MARKS_SIZE: usize = 4096;
const _: () = assert!(MARKS.is_power_of_two());
const _: () = assert!(MARKS * 4 <= MARKS_SIZE && MARKS_BASE + 2 * MARKS_SIZE <= HEADER);
const _: () = assert!(DIR_BASE + 2 * DIR_SIZE <= MARKS_BASE);
const _: () = assert!((DIR_BASE + OFF_LEDGER).is_multiple_of(8) && DIR_SIZE.is_multiple_of(8));

/// The offset of mark `i` of direction `d` (`i < MARKS`).
pub const fn mark_word(d: usize, i: usize) -> usize {
    MARKS_BASE + MARKS_SIZE * d + 4 * i
}

/// The smallest and largest ring (bytes). Positions are published as their
/// low 32 bits and differences must stay far below 2^31.
pub const MIN_CAP: u32 = 64;
pub const MAX_CAP: u32 = 1 << 30;

/// The offset of header word `off` of direction `d` (0: A->B, 1: B->A).
pub const fn dir_word(d: usize, off: usize) -> usize {
    DIR_BASE + DIR_SIZE * d + off
}

/// Which end of the connection: A writes ring 0 and reads ring 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// The ring capacity for a sender's SO_SNDBUF: rounded up to a multiple of 4
/// (records are 4-byte aligned), within MIN_CAP..=MAX_CAP.
pub fn cap_for_sndbuf(sndbuf: u32) -> u32 {
    sndbuf.clamp(MIN_CAP, MAX_CAP).next_multiple_of(4)
}

/// The bytes a ring must hold for a writer charged against `sndbuf`
/// (`with_budgets`): Linux takes a write while less than SO_SNDBUF is
/// charged, and a write's bytes are never more than its charge, so the
/// ring holds less than `sndbuf` bytes before the last write plus that
/// write's: a stream chunk (`stream_chunk_max`), or a whole record (at
/// most `message_max`, with its header and padding).
pub fn ring_bytes_for(sndbuf: usize, framing: Framing) -> usize {
    let last = match framing {
        Framing::Stream => crate::skb::stream_chunk_max(sndbuf),
        Framing::Record => 4 + crate::skb::message_max(sndbuf).next_multiple_of(4),
    };
    sndbuf + last
}

/// The region's size for two ring capacities (checked ones).
fn size_for(caps: [u32; 2]) -> Res<usize> {
    for c in caps {
        if !(MIN_CAP..=MAX_CAP).contains(&c) || !c.is_multiple_of(4) {
            return Err(libc::EINVAL);
        }
    }
    Ok(HEADER + caps[0] as usize + caps[1] as usize)
}

fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A mapping of one connection's region.
pub struct Region {
    /// The reservation: a guard page, the region, a guard page.
    reserve: *mut u8,
    reserve_len: usize,
    base: *mut u8,
    len: usize,
    caps: [u32; 2],
    /// Each ring's writer's SO_SNDBUF, its charges' bound, and the rings'
    /// framing (`with_budgets`); None: bounded by the ring alone.
    budgets: Option<([u32; 2], Framing)>,
}

// SAFETY: the region is only accessed through atomics and raw copies whose
// bounds come from `caps`, which never change; the mapping lives as long as
// the Region.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// A new region (the daemon's part): a memfd sized for `caps`, sealed
    /// against shrinking, growing and further sealing, mapped, its header
    /// written, in state `Setup`. The fd is what the ends map.
    pub fn create(caps: [u32; 2]) -> Res<(OwnedFd, Region)> {
        let len = size_for(caps)?;
        // SAFETY: a NUL-terminated name; returns a new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_memfd_create,
                c"udsfs-lane".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // SAFETY: plain calls on an fd we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
            return Err(errno());
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(errno());
        }
        let r = Region::map(fd.as_raw_fd(), caps)?;
        r.word(OFF_VERSION).store(VERSION, Ordering::Relaxed);
        r.word(OFF_MAGIC).store(MAGIC, Ordering::Release);
        Ok((fd, r))
    }

    /// Maps the region of `fd` whose capacities the daemon gave as `caps`.
    /// Refuses (EINVAL) a file that is not sealed against shrinking and
    /// growing or is smaller than `caps` need; never reads the header for
    /// a bound.
    pub fn map(fd: RawFd, caps: [u32; 2]) -> Res<Region> {
        let len = size_for(caps)?;
        // SAFETY: F_GET_SEALS on a caller's fd.
        let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
        let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        if seals < 0 || seals & need != need {
            return Err(libc::EINVAL);
        }
        // SAFETY: a zeroed stat filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } < 0 {
            return Err(errno());
        }
        if (st.st_mode & libc::S_IFMT) != libc::S_IFREG || (st.st_size as u64) < len as u64 {
            return Err(libc::EINVAL);
        }
        let reserve_len = len.next_multiple_of(PAGE) + 2 * PAGE;
        // SAFETY: a new anonymous PROT_NONE reservation.
        let reserve = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if reserve == libc::MAP_FAILED {
            return Err(errno());
        }
        let reserve = reserve as *mut u8;
        // SAFETY: MAP_FIXED inside our own reservation, past its first page.
        let base = unsafe {
            libc::mmap(
                reserve.add(PAGE) as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = errno();
            // SAFETY: the reservation made above.
            unsafe { libc::munmap(reserve as *mut libc::c_void, reserve_len) };
            return Err(e);
        }
        Ok(Region {
            reserve,
            reserve_len,
            base: base as *mut u8,
            len,
            caps,
            budgets: None,
        })
    }

    pub fn caps(&self) -> [u32; 2] {
        self.caps
    }

    /// This mapping with ring d's writer charged as Linux charges a sender
    /// with SO_SNDBUF `sndbufs[d]` (0: that ring is bounded by its size
    /// alone), the rings framed as `framing`. Given by the daemon with the
    /// fd, as the capacities are; never read from the region. The rings
    /// must hold what such a sender may have queued (`ring_cap_for`).
    pub fn with_budgets(mut self, sndbufs: [u32; 2], framing: Framing) -> Region {
        self.budgets = Some((sndbufs, framing));
        self
    }

    /// The budgets `with_budgets` gave: ring d's writer's SO_SNDBUF (0:
    /// none) and the framing.
    pub fn budgets(&self) -> Option<([u32; 2], Framing)> {
        self.budgets
    }

    /// The region's bytes (for tests that play the adversary).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The header word at byte `off` (a multiple of 4 below HEADER).
    pub fn word(&self, off: usize) -> &AtomicU32 {
        assert!(
            off.is_multiple_of(4) && off + 4 <= HEADER,
            "header word {off}"
        );
        // SAFETY: in the mapping, aligned; AtomicU32 has u32's layout.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// The 8-byte header word at byte `off` (a multiple of 8 below HEADER).
    pub fn word64(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= HEADER,
            "header word64 {off}"
        );
        // SAFETY: in the mapping (page-aligned), 8-aligned; AtomicU64 has
        // u64's layout.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// A raw pointer to byte `off` of the region (tests scribble through it).
    pub fn byte_ptr(&self, off: usize) -> *mut u8 {
        assert!(off < self.len, "region byte {off} of {}", self.len);
        // SAFETY: in bounds, checked above.
        unsafe { self.base.add(off) }
    }

    /// The connection's state as the region says; None for a value that is
    /// no state (corruption).
    pub fn state(&self) -> Option<State> {
        State::from_word(self.word(OFF_STATE).load(Ordering::Acquire))
    }

    /// The daemon's change of state: stored, then every sleeper on the
    /// region's futex words woken so that it looks again (an eventfd sleeper
    /// is the daemon's to signal).
    pub fn set_state(&self, s: State) {
        self.word(OFF_STATE).store(s as u32, Ordering::SeqCst);
        self.wake_all();
    }

    /// Bumps and wakes the four futex words.
    pub fn wake_all(&self) {
        for d in 0..2 {
            for off in [OFF_DATA_EV, OFF_SPACE_EV] {
                let w = self.word(dir_word(d, off));
                w.fetch_add(super::ring::BUMP, Ordering::SeqCst);
                futex::wake(w);
            }
        }
    }

    /// Direction `d`'s marks (`mark_word`).
    pub fn marks(&self, d: usize) -> &[AtomicU32] {
        let first = self.word(mark_word(d, 0)) as *const AtomicU32;
        // SAFETY: MARKS words from mark_word(d, 0), inside the header
        // (mark_word(1, MARKS) <= HEADER), aligned as `word`'s are.
        unsafe { std::slice::from_raw_parts(first, MARKS) }
    }

    fn dir(&self, d: usize) -> Dir<'_> {
        let data_off = HEADER + if d == 0 { 0 } else { self.caps[0] as usize };
        Dir {
            state: self.word(OFF_STATE),
            tail: self.word(dir_word(d, OFF_TAIL)),
            fin: self.word(dir_word(d, OFF_FIN)),
            writer_waiting: self.word(dir_word(d, OFF_WRITER_WAITING)),
            data_ev: self.word(dir_word(d, OFF_DATA_EV)),
            writer_sleeping: self.word(dir_word(d, OFF_WRITER_SLEEPING)),
            head: self.word(dir_word(d, OFF_HEAD)),
            reader_waiting: self.word(dir_word(d, OFF_READER_WAITING)),
            space_ev: self.word(dir_word(d, OFF_SPACE_EV)),
            reader_sleeping: self.word(dir_word(d, OFF_READER_SLEEPING)),
            writes: self.word(dir_word(d, OFF_WRITES)),
            ledger: self.word64(dir_word(d, OFF_LEDGER)),
            marks: self.marks(d),
            budget: self.budgets.map_or(0, |(b, _)| b[d]),
            // SAFETY: data_off + cap[d] <= len (size_for).
            data: unsafe { self.base.add(data_off) },
            cap: self.caps[d],
        }
    }

    /// The two halves of end `side` of a fresh connection (positions 0):
    /// its writer and its reader, with `framing` (the socket's type).
    pub fn end(&self, side: Side, framing: Framing) -> (Writer<'_>, Reader<'_>) {
        self.end_at(side, framing, [0, 0])
    }

    /// The two halves of end `side` whose rings are at positions `pos`
    /// (`pos[d]`: bytes through ring d so far, as the daemon knows them; a
    /// record ring's a multiple of 4). The region's words are not read.
    pub fn end_at(&self, side: Side, framing: Framing, pos: [u64; 2]) -> (Writer<'_>, Reader<'_>) {
        let (w, r) = match side {
            Side::A => (0, 1),
            Side::B => (1, 0),
        };
        (
            Writer::new(self.dir(w), framing, pos[w]),
            Reader::new(self.dir(r), framing, pos[r]),
        )
    }

    /// The data area of direction `d`: its offset in the region and size.
    pub fn data_area(&self, d: usize) -> (usize, usize) {
        let off = HEADER + if d == 0 { 0 } else { self.caps[0] as usize };
        (off, self.caps[d] as usize)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the reservation this Region made; nothing borrows it any
        // more (Writer and Reader borrow the Region).
        unsafe { libc::munmap(self.reserve as *mut libc::c_void, self.reserve_len) };
    }
}

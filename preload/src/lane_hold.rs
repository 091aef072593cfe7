//! Who owns a lane's descriptors and mapping in this process (issue 30,
//! docs/LANE.md "Giving a lane back"): one entry of a fixed table per
//! region this process mapped, holding the region and the eventfds that
//! came with it (each side's shared one, each held side's daemon-only one),
//! with a count of its holders. The last holder to let go closes the
//! eventfds and unmaps the region, so a closed laned connection gives
//! them back instead of keeping them for the process's life.
//!
//! The holders: the lane table's slot of each end (lane.rs; a socketpair's
//! two ends hold one entry twice), each epoll registration of an end
//! (lane_ready.rs: the kernel's epoll set holds the eventfd's number until
//! its EPOLL_CTL_DEL, made while the registration still holds the entry),
//! and each call that uses an end (a read, a write, a poll, a sleep in
//! epoll_wait) for its length. A close in another thread thus never closes
//! a number a running call still sleeps on or writes to, and never unmaps
//! the ring it copies from; nothing is closed by number after it was given
//! back, so a number the next lane reuses is never touched on the old
//! one's behalf.
//!
//! A holder that knows only the entry's key (a slot, whose end another
//! thread may be freeing) takes a hold with `get`, which fails once the
//! count reached 0 or the entry was given to another region (the key's
//! generation). No allocation: the table is static (close is
//! async-signal-safe, and the last hold may go in one).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::c_int;
use udsfs_proto::lane::Region;

/// Entries: as many regions as a process may map at once.
pub const MAX: usize = 256;

/// Regions this process maps now, or is about to (reserved before the
/// daemon is asked for a lane, so that it makes none this process could
/// not hold); one is given back with each entry's last holder.
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// Reserves room for one more region: false when MAX are mapped or about
/// to be.
pub fn reserve() -> bool {
    if RESERVED.fetch_add(1, Ordering::Relaxed) >= MAX {
        RESERVED.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    true
}

/// Gives back a `reserve` that made no entry.
pub fn unreserve() {
    RESERVED.fetch_sub(1, Ordering::Relaxed);
}

/// Whether no region could be reserved now.
pub fn full() -> bool {
    RESERVED.load(Ordering::Relaxed) >= MAX
}

struct Entry {
    /// generation << 32 | holders.
    word: AtomicU64,
    /// Taken from `make` until the entry is given back whole.
    used: AtomicBool,
    region: UnsafeCell<Option<Region>>,
    /// Side 0's and side 1's shared eventfd.
    ev: [AtomicI32; 2],
    /// Side 0's and side 1's daemon-only eventfd (-1: not this process's).
    hup: [AtomicI32; 2],
}

// SAFETY: `region` is written only by the thread that took `used` (before
// the first holder exists) and by the last holder's release (after the
// count reached 0, when nobody may read it any more).
unsafe impl Sync for Entry {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    word: AtomicU64::new(0),
    used: AtomicBool::new(false),
    region: UnsafeCell::new(None),
    ev: [AtomicI32::new(-1), AtomicI32::new(-1)],
    hup: [AtomicI32::new(-1), AtomicI32::new(-1)],
};

static POOL: [Entry; MAX] = [EMPTY; MAX];
/// Entries in use: 0 makes `program_closed` one load.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// An entry's name at one generation (0: none): index + 1 in the low 32
/// bits, the generation in the high ones.
pub type Key = u64;

fn key_of(i: usize, gen: u64) -> Key {
    gen << 32 | (i as u64 + 1)
}

/// One counted hold of an entry: the region stays mapped and its
/// eventfds open while it lives.
pub struct Hold {
    i: usize,
}

impl Hold {
    /// The region, for as long as any hold of it lives: a holder keeps a
    /// `Hold` beside every reference it keeps (lane.rs's End, lane_ready's
    /// Laned).
    pub fn region(&self) -> &'static Region {
        // SAFETY: set before the first hold and cleared only when the last
        // one goes; the caller keeps a hold as long as the reference.
        unsafe { (*POOL[self.i].region.get()).as_ref() }.expect("a held lane has its region")
    }

    /// Side `side`'s shared eventfd and its daemon-only one (-1: none).
    pub fn ev(&self, side: usize) -> c_int {
        POOL[self.i].ev[side & 1].load(Ordering::Relaxed)
    }

    pub fn hup(&self, side: usize) -> c_int {
        POOL[self.i].hup[side & 1].load(Ordering::Relaxed)
    }

    /// The entry's key now (its generation is fixed while held).
    pub fn key(&self) -> Key {
        key_of(self.i, POOL[self.i].word.load(Ordering::Relaxed) >> 32)
    }

    /// Gives this hold to whoever keeps the key (`release` lets it go).
    pub fn into_key(self) -> Key {
        let k = self.key();
        std::mem::forget(self);
        k
    }
}

impl Clone for Hold {
    fn clone(&self) -> Hold {
        // A hold is held: the count is at least 1, the generation fixed.
        POOL[self.i].word.fetch_add(1, Ordering::Relaxed);
        Hold { i: self.i }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let e = &POOL[self.i];
        if e.word.fetch_sub(1, Ordering::AcqRel) & 0xffff_ffff != 1 {
            return;
        }
        // The last holder: nothing reads the entry any more (`get` fails
        // at a count of 0), so it is given back, then freed for `make`.
        for f in e.ev.iter().chain(&e.hup) {
            let fd = f.swap(-1, Ordering::AcqRel);
            if fd >= 0 {
                // SAFETY: the library's own eventfd (not the C library's
                // close, whose wrapper is the program's: closes.rs).
                unsafe { crate::real::own_close(fd) };
            }
        }
        // SAFETY: the count is 0: no reference to the region is left.
        drop(unsafe { (*e.region.get()).take() });
        RESERVED.fetch_sub(1, Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
        e.used.store(false, Ordering::Release);
    }
}

/// A hold of the entry `key` names, if it still holds that region.
pub fn get(key: Key) -> Option<Hold> {
    let lo = key & 0xffff_ffff;
    if lo == 0 || lo > MAX as u64 {
        return None;
    }
    let i = (lo - 1) as usize;
    let e = &POOL[i];
    let mut w = e.word.load(Ordering::Acquire);
    loop {
        if w >> 32 != key >> 32 || w & 0xffff_ffff == 0 {
            return None;
        }
        match e
            .word
            .compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(Hold { i }),
            Err(now) => w = now,
        }
    }
}

/// Lets go of the hold a key was given (`into_key`).
pub fn release(key: Key) {
    let lo = key & 0xffff_ffff;
    if lo == 0 || lo > MAX as u64 {
        return;
    }
    drop(Hold {
        i: (lo - 1) as usize,
    });
}

/// The first hold of a new entry owning `region` and the eventfds (by
/// side; -1: none), or Err with them back (no entry free).
pub fn make(region: Region, ev: [c_int; 2], hup: [c_int; 2]) -> Result<Hold, Region> {
    let Some(i) = POOL.iter().position(|e| {
        e.used
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }) else {
        return Err(region);
    };
    LIVE.fetch_add(1, Ordering::Relaxed);
    let e = &POOL[i];
    // SAFETY: `used` is ours and the count is 0: nobody reads the entry.
    unsafe { *e.region.get() = Some(region) };
    for s in 0..2 {
        e.ev[s].store(ev[s], Ordering::Relaxed);
        e.hup[s].store(hup[s], Ordering::Relaxed);
    }
    let gen = (e.word.load(Ordering::Relaxed) >> 32) + 1;
    e.word.store(gen << 32 | 1, Ordering::Release);
    Ok(Hold { i })
}

/// The program is closing (or putting another file at) numbers
/// `first..=last` (closes.rs, before the call: a lane made once they are
/// closed may put its own eventfds there): an eventfd of a lane among them
/// is not the library's any more, and is not closed again when its lane is
/// given back (it may name the program's next file by then).
pub fn program_closed(first: c_int, last: c_int) {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    for e in &POOL {
        if !e.used.load(Ordering::Relaxed) {
            continue;
        }
        for f in e.ev.iter().chain(&e.hup) {
            let fd = f.load(Ordering::Relaxed);
            if fd >= first && fd <= last {
                let _ = f.compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }
}

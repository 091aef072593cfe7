//! The fast lane's library side, stage (b)'s first cut (docs/LANE.md): the
//! plain reads and writes of a udsfs stream socketpair's end go through a
//! region shared with the peer's process instead of FUSE requests.
//!
//! `socketpair` notes both descriptors as candidates; the first plain
//! read/write/send/recv on one claims its end from the daemon
//! (`Op::LaneClaim`: the daemon makes the region at the first claim of the
//! pair), takes the region's memfd over the fd channel and maps it. A
//! process that claims an end is its only user on the lane: another holder
//! (a forked child, a receiver over SCM_RIGHTS, a shell) reaches the socket
//! through the daemon, which takes the lane down first and moves the rings'
//! bytes into its queues; every call here that finds the lane not `Direct`
//! goes on through the daemon as before (None). So does any call the lane
//! does not do (flags, control messages, poll, ioctl, shutdown, close).
//!
//! The table is fixed-size (no allocation on the read/write path: signal
//! handlers call it), keyed by descriptor number and checked against the
//! data file's inode (numbers are reused). Each end's reader and writer are
//! used by one thread at a time: a second thread waits for its turn
//! (lane_turn.rs), which a call lets go of while it sleeps for bytes or
//! room.

use std::cell::UnsafeCell;
use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::time::{Duration, Instant};

use libc::{c_int, c_void, size_t, ssize_t};
use udsfs_proto::ioctl::{timeo_left_ns, LaneEvents, LaneGrant, Op, Timeo, LANE_RECORD, MSG_ROOM};
use udsfs_proto::lane::region::busy_word;
use udsfs_proto::lane::{ready, Framing, LaneErr, Notify, Reader, Region, Side, State, Writer};

use crate::errno::{len_ret, Res};
use crate::iovs::Iovs;
use crate::lane_hold::{self, Hold};
use crate::lane_spin::{self, Spin};
use crate::lane_turn::{Taken, Turn};
use crate::msg::Handed;
use crate::{fdpass, ioctl, log, mount, real, user, wait_note, wait_record};

const SLOTS: usize = 64;

const FREE: u32 = 0;
/// Noted at socketpair, not claimed yet.
const CANDIDATE: u32 = 1;
/// A thread is claiming it.
const CLAIMING: u32 = 2;
/// Mapped: `end` is set.
const LANE: u32 = 3;
/// Noted at connect/accept: the daemon makes the region when both ends
/// may have one (`Op::LaneClaim` arg 5 at a plain call, `join`).
const JOIN: u32 = 4;

/// How many plain calls of a connect/accept socket ask for its lane (an
/// ioctl each) before it goes without: enough for a ping-pong through the
/// daemon to find both ends between calls (docs/LANE.md).
const JOIN_TRIES: u32 = 16;
/// Asks after a lane came up and went down (`ask`).
const REJOIN_TRIES: u32 = 64;

struct End {
    /// Valid while a hold of the slot's `own` is held (lane_hold.rs).
    region: &'static Region,
    /// Its side; its eventfds (its own, its peer's, its daemon-only one:
    /// lane_ready.rs) are the slot's hold's, copied into the reader's and
    /// writer's `Notify`.
    side: usize,
    /// Seqpacket: the rings carry records.
    record: bool,
    /// Made by connect/accept's `join`: may ask again after a way down.
    joined: bool,
    /// SO_RCVTIMEO, SO_SNDTIMEO as at the claim (setting one takes the
    /// lane down: the daemon does not count SetTimeo as the lane's own).
    timeo: [Option<Duration>; 2],
    w: UnsafeCell<Writer<'static>>,
    r: UnsafeCell<Reader<'static>>,
}

struct Slot {
    state: AtomicU32,
    ino: AtomicU64,
    /// This process's reader and writer of the end, one thread each.
    rtaken: Turn,
    wtaken: Turn,
    /// JOIN: the asks left.
    tries: AtomicU32,
    /// JOIN: the program's latest copy of the end's number (-1: none),
    /// where the note moves when that number is closed (`duped`).
    copy: AtomicI32,
    /// The end carries records (set with `end`, read without it).
    record: AtomicBool,
    /// A connect/accept end whose lane just came up: its epoll
    /// registrations are still the data file's (`fresh_ends`).
    fresh: AtomicBool,
    /// The looks a blocking read and a blocking write make before they
    /// sleep (lane_spin.rs).
    rspin: Spin,
    wspin: Spin,
    /// The descriptor generation at which `fd` was last seen to name the
    /// socket `ino` (fdgen.rs; 0: never).
    checked: AtomicU64,
    /// The slot's hold of its end's region and eventfds (lane_hold.rs key;
    /// 0: none), let go when the slot is freed. A call takes a hold of its
    /// own from it (`held`) before it touches `end`'s region or eventfds,
    /// so a close in another thread gives them back only after the call.
    own: AtomicU64,
    end: UnsafeCell<Option<End>>,
}

// SAFETY: `end` is written only by the thread that moved the slot from
// CLAIMING to LANE (before the Release store of LANE), and its reader and
// writer are used only under `rtaken`/`wtaken`.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    ino: AtomicU64::new(0),
    rtaken: Turn::new(),
    wtaken: Turn::new(),
    tries: AtomicU32::new(0),
    copy: AtomicI32::new(-1),
    record: AtomicBool::new(false),
    fresh: AtomicBool::new(false),
    rspin: Spin::new(lane_spin::CALL_LOOKS),
    wspin: Spin::new(lane_spin::CALL_LOOKS),
    checked: AtomicU64::new(0),
    own: AtomicU64::new(0),
    end: UnsafeCell::new(None),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Each slot's descriptor number (-1: none), apart from the slots: every
/// laned call looks its number up here, and a scan of the slots themselves
/// read 64 cache lines that other threads' calls write (their turns and
/// busy counts), a few percent of hackbench -T's time.
#[allow(clippy::declare_interior_mutable_const)]
const NO_FD: AtomicI32 = AtomicI32::new(-1);
static FDS: [AtomicI32; SLOTS] = [NO_FD; SLOTS];

/// Slot `s`'s descriptor number word.
fn fd_word(s: &Slot) -> &'static AtomicI32 {
    let i = (s as *const Slot as usize - TABLE.as_ptr() as usize) / std::mem::size_of::<Slot>();
    &FDS[i]
}

/// The slot noted for descriptor number `fd`, in whatever state.
fn slot_of_fd(fd: c_int) -> Option<&'static Slot> {
    let i = FDS.iter().position(|f| f.load(Ordering::Relaxed) == fd)?;
    Some(&TABLE[i])
}
/// Slots not FREE: 0 makes every look-up one load.
static USED: AtomicUsize = AtomicUsize::new(0);

/// A hold of slot `s`'s region and eventfds for a call's length; None: the
/// slot was freed (the program closed the socket) under the caller.
fn held(s: &Slot) -> Option<Hold> {
    lane_hold::get(s.own.load(Ordering::Acquire))
}

/// `held` for a call on `fd`, which found slot `s` before taking its flag:
/// None unless the slot is still `fd`'s lane (another thread's close may
/// have freed it and a new socket taken it meanwhile, whose end the call
/// would otherwise use for `fd`).
fn held_for(s: &Slot, fd: c_int) -> Option<Hold> {
    let h = held(s)?;
    (fd_word(s).load(Ordering::Relaxed) == fd && s.state.load(Ordering::Acquire) == LANE)
        .then_some(h)
}

/// Sets slot `s`'s hold (a key given by `into_key`; 0: none) and lets go
/// of the one it had.
fn set_own(s: &Slot, key: lane_hold::Key) {
    lane_hold::release(s.own.swap(key, Ordering::AcqRel));
}
/// The mount said it has no lanes: nothing is noted any more.
static OFF: AtomicBool = AtomicBool::new(false);
/// Slots `fresh`: 0 makes `fresh_ends` one load.
static FRESH: AtomicUsize = AtomicUsize::new(0);

/// The inode of `fd`'s file, from the kernel's cache (AT_STATX_DONT_SYNC:
/// an fstat of a FUSE file may be a GETATTR round trip to the daemon, which
/// would cost what the lane saves; an inode number never changes). None
/// for a file of another filesystem: a number another thread's open took
/// between a close and the close's bookkeeping may name a file with the
/// same inode number elsewhere, which must not pass for the socket.
pub(crate) fn ino_of(fd: c_int) -> Option<u64> {
    // SAFETY: statx fills the zeroed struct it is given.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let flags = libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC;
    // The system call from the library's call site, not the C library's
    // statx (which is the library's own entry, `stat_entry`: its frames
    // overflowed hackbench -T's 16 KiB thread stacks in a debug build).
    let r = unsafe { crate::real::statx(fd, c"".as_ptr(), flags, libc::STATX_INO, &mut st) };
    let ours = crate::mount::get().is_none_or(|m| m.owns_dev(st.stx_dev_major, st.stx_dev_minor));
    (r == 0 && ours).then_some(st.stx_ino)
}

/// socketpair made `fds`, udsfs stream sockets: the daemon makes their
/// region (the first pair of a process on a mount without lanes says so,
/// and no later one asks), which is mapped here, on the caller's stack (a
/// thread with a small stack reads and writes later: its first call only
/// claims the end, one ioctl).
pub fn note_pair(fds: [c_int; 2]) {
    if OFF.load(Ordering::Relaxed) {
        return;
    }
    // Two free slots, and a mapping left to spend (at most lane_hold::MAX
    // at once per process, then pairs go without lanes).
    let room = TABLE
        .iter()
        .filter(|s| s.state.load(Ordering::Relaxed) == FREE)
        .count();
    if room < 2 || !lane_hold::reserve() {
        return;
    }
    // The pair's first hold: each end's slot takes one of its own; what
    // no slot took is given back when it goes.
    let (hold, evs, hups, record) = match prepare(fds[0]) {
        Ok(r) => r,
        Err(e) => {
            lane_hold::unreserve();
            if e == libc::ENOPROTOOPT {
                OFF.store(true, Ordering::Relaxed);
            }
            return;
        }
    };
    let region = hold.region();
    for (side, fd) in fds.into_iter().enumerate() {
        let Some(ino) = ino_of(fd) else { continue };
        let Some((s, held)) = slot_for(fd) else {
            return;
        };
        let end = new_end(region, side, record, [evs[side], evs[1 - side]], hups[side]);
        s.record.store(record, Ordering::Relaxed);
        // SAFETY: CLAIMING is ours.
        unsafe { *s.end.get() = Some(end) };
        set_own(s, hold.clone().into_key());
        fd_word(s).store(fd, Ordering::Relaxed);
        s.ino.store(ino, Ordering::Relaxed);
        drop(held);
        s.state.store(CANDIDATE, Ordering::Release);
    }
}

/// An end of `region` on `side`, its sleeps and wake-ups through the
/// eventfds `ev` (this end's, the peer's) and `hup` (this end's
/// daemon-only one), which poll and epoll can watch too (stage c).
fn new_end(region: &'static Region, side: usize, record: bool, ev: [c_int; 2], hup: c_int) -> End {
    let framing = if record {
        Framing::Record
    } else {
        Framing::Stream
    };
    let (mut w, mut r) = region.end(if side == 0 { Side::A } else { Side::B }, framing);
    let notify = Notify::Eventfd {
        mine: ev[0],
        peer: ev[1],
        hup,
    };
    w.set_notify(notify);
    r.set_notify(notify);
    End {
        region,
        side,
        record,
        joined: false,
        timeo: [None, None],
        w: UnsafeCell::new(w),
        r: UnsafeCell::new(r),
    }
}

/// A slot for `fd` in CLAIMING, ours, with its reader and writer flags
/// held (no thread still uses its old end); a slot left for an earlier
/// socket at this number (socket numbers, and so inode numbers, are
/// reused) is freed first. None: the table is full.
fn slot_for(fd: c_int) -> Option<(&'static Slot, (Taken<'static>, Taken<'static>))> {
    for (i, f) in FDS.iter().enumerate() {
        let old = &TABLE[i];
        if f.load(Ordering::Relaxed) == fd {
            let st = old.state.load(Ordering::Acquire);
            if (st == CANDIDATE || st == LANE || st == JOIN)
                && old
                    .state
                    .compare_exchange(st, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                free(old);
            }
        }
    }
    let (s, held) = TABLE.iter().find_map(|s| {
        if s.state
            .compare_exchange(FREE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        match (s.rtaken.try_take(), s.wtaken.try_take()) {
            (Some(r), Some(w)) => Some((s, (r, w))),
            _ => {
                s.state.store(FREE, Ordering::Release);
                None
            }
        }
    })?;
    USED.fetch_add(1, Ordering::Relaxed);
    // No asks but those `note_conn` gives (an earlier socket's are not
    // this one's: `down_for_good`).
    s.tries.store(0, Ordering::Relaxed);
    // SAFETY: CLAIMING is ours: an old end (its region stays mapped) goes.
    unsafe { *s.end.get() = None };
    Some((s, held))
}

/// connect() or accept() gave `fd`, a udsfs socket: its first plain calls
/// ask the daemon for the connection's lane (`join`). Nothing is asked
/// here: the daemon makes a lane only once both ends are accepted and
/// quiet, which an accept or connect that just returned rarely finds.
pub fn note_conn(fd: c_int) {
    if OFF.load(Ordering::Relaxed) || lane_hold::full() {
        return;
    }
    let Some(ino) = ino_of(fd) else { return };
    let Some((s, held)) = slot_for(fd) else {
        return;
    };
    s.tries.store(JOIN_TRIES, Ordering::Relaxed);
    fd_word(s).store(fd, Ordering::Relaxed);
    s.ino.store(ino, Ordering::Relaxed);
    drop(held);
    s.state.store(JOIN, Ordering::Release);
}

/// Asks the daemon for `fd`'s connection's lane, claiming this end: the
/// region mapped (kept for the process's life) and the end. EAGAIN: not
/// now.
fn join(fd: c_int) -> Res<(End, Hold)> {
    if !lane_hold::reserve() {
        return Err(libc::EOPNOTSUPP);
    }
    // Arg 6: arg 5's join, saying that this library answers every poll of
    // the end and moves its epoll registrations onto the lane's eventfd
    // (lane_ready.rs `move_fresh`), so that the daemon's FUSE POLLs of it
    // made before the lane do not forbid one (src/engine/lane.rs's polled
    // rule).
    // The fd channel first (`channel`): a library that cannot claim the
    // region asks for no lane.
    let r = channel().and_then(|ch| {
        let g = ioctl::op_values::<LaneGrant>(fd, Op::LaneClaim, 6)?;
        // The lane went down before its eventfds were asked for (a call
        // of the other end's was on its way through the daemon): ENOENT,
        // or EOPNOTSUPP once it left the map. As one that goes down after:
        // ask again while tries are left.
        let (hold, evs, hups) = map_grant(fd, &g, &ch).map_err(|e| match e {
            libc::ENOENT | libc::EOPNOTSUPP => libc::EAGAIN,
            e => e,
        })?;
        let side = (g.side & 1) as usize;
        let ev = [evs[side], evs[1 - side]];
        let mut e = new_end(
            hold.region(),
            side,
            g.side & LANE_RECORD != 0,
            ev,
            hups[side],
        );
        e.joined = true;
        Ok((e, hold))
    });
    if r.is_err() {
        lane_hold::unreserve();
    }
    r
}

/// A connection to the daemon's fd channel, made before a lane is asked
/// for: a process that cannot reach it (a network namespace of its own,
/// where the channel's abstract name is not the daemon's) would have the
/// daemon make a lane it cannot claim, whose other end's process then
/// claimed its own (three descriptors and a mapping kept for its life:
/// adversarial_lanes3.sh netns_asks). Refused (ECONNREFUSED) or no channel
/// (EINVAL): this process asks for no more lanes.
fn channel() -> Res<fdpass::Channel> {
    let m = mount::get().ok_or(libc::EINVAL)?;
    fdpass::connect_for_lane(m).inspect_err(|&e| {
        if e == libc::ECONNREFUSED || e == libc::EINVAL {
            OFF.store(true, Ordering::Relaxed);
        }
    })
}

/// The pair's region and eventfds (`map_grant`), and whether it carries
/// records.
type Grant = (Hold, [c_int; 2], [c_int; 2]);
fn prepare(fd: c_int) -> Res<(Hold, [c_int; 2], [c_int; 2], bool)> {
    let ch = channel()?;
    let g = ioctl::op_values::<LaneGrant>(fd, Op::LaneClaim, 3)?;
    let (region, evs, hups) = map_grant(fd, &g, &ch)?;
    Ok((region, evs, hups, g.side & LANE_RECORD != 0))
}

/// The region a grant for `fd` names, mapped, the lane's two eventfds
/// (side 0's, side 1's; `Op::LaneClaim` arg 4) and the daemon-only
/// eventfds of the sides this process holds (-1 for the other side of a
/// connection: the daemon gives it to its own end's library only), placed
/// above the program's descriptors, all claimed over the fd channel, in
/// the first hold of a lane_hold.rs entry (given back with the last: a lane
/// that goes down keeps its mapping while its ends are open, docs/LANE.md).
fn map_grant(fd: c_int, g: &LaneGrant, ch: &fdpass::Channel) -> Res<Grant> {
    let e = ioctl::op_values::<LaneEvents>(fd, Op::LaneClaim, 4)?;
    // (a tag of 0: that side's daemon-only eventfd is not ours)
    let hups = [e.hup0, e.hup1];
    let mut tags = [g.tag, e.tag0, e.tag1, 0, 0];
    let mut n = 3;
    for &h in hups.iter().filter(|&&h| h != 0) {
        tags[n] = h;
        n += 1;
    }
    let fds = fdpass::claim(ch, &tags[..n], true)?;
    if fds.len() != n || (hups == [0, 0]) {
        // A daemon that gives no daemon-only eventfd: no lane (its end
        // could be kept asleep through the way down).
        fds.iter().for_each(|&f| crate::files::close(f));
        return Err(libc::EIO);
    }
    // Each ring's writer charged against its SO_SNDBUF as Linux's sender.
    let framing = if g.side & LANE_RECORD != 0 {
        Framing::Record
    } else {
        Framing::Stream
    };
    let budgets = [g.sndbuf0, g.sndbuf1].map(|b| b.clamp(0, u32::MAX as i64) as u32);
    let region = Region::map(fds[0], [g.cap0 as u32, g.cap1 as u32])
        .map(|r| r.with_budgets(budgets, framing));
    crate::files::close(fds[0]);
    let mut high = [Ok(-1); 4];
    for (h, &f) in high.iter_mut().zip(&fds[1..]) {
        *h = ready::move_high(f);
    }
    let region = match (region, high.iter().all(Result::is_ok)) {
        (Ok(r), true) => r,
        (r, _) => {
            high.iter()
                .flatten()
                .filter(|&&f| f >= 0)
                .for_each(|&f| crate::files::close(f));
            return Err(r.err().unwrap_or(libc::EMFILE));
        }
    };
    let high = high.map(|h| h.unwrap_or(-1));
    let evs = [high[0], high[1]];
    let mut rest = high[2..].iter();
    let hups = hups.map(|h| {
        if h == 0 {
            -1
        } else {
            *rest.next().unwrap_or(&-1)
        }
    });
    match lane_hold::make(region, evs, hups) {
        Ok(h) => Ok((h, evs, hups)),
        Err(region) => {
            drop(region);
            high.iter()
                .filter(|&&f| f >= 0)
                .for_each(|&f| crate::files::close(f));
            Err(libc::EMFILE)
        }
    }
}

/// What readiness on `fd`'s lane needs (lane_ready.rs): its region, side,
/// eventfd, daemon-only eventfd and the socket's inode (`fd` was seen to
/// name it); None when `fd` has no lane here (claimed now if it was a
/// candidate) or the lane is not `Direct`.
pub fn ready_end(fd: c_int) -> Option<ReadyEnd> {
    let s = find(fd)?;
    let hold = held_for(s, fd)?;
    // SAFETY: LANE was seen with Acquire: `end` is set and stays.
    let e = unsafe { (*s.end.get()).as_ref()? };
    let ino = s.ino.load(Ordering::Relaxed);
    let side = e.side;
    (hold.region().state() == Some(State::Direct)).then(|| ReadyEnd {
        region: hold.region(),
        side,
        ev: hold.ev(side),
        hup: hold.hup(side),
        ino,
        hold,
    })
}

/// `ready_end`'s answer: `region`, `ev` and `hup` are valid while `hold`
/// (or a clone of it) lives.
pub struct ReadyEnd {
    pub hold: Hold,
    pub region: &'static Region,
    pub side: usize,
    pub ev: c_int,
    pub hup: c_int,
    pub ino: u64,
}

/// The connect/accept ends whose lanes came up since the last call, each
/// once (its descriptor and inode): lane_ready.rs moves their epoll
/// registrations from the data file to the lane's eventfd.
pub fn fresh_ends(mut f: impl FnMut(c_int, u64)) {
    if FRESH.load(Ordering::Acquire) == 0 {
        return;
    }
    for s in &TABLE {
        if s.state.load(Ordering::Acquire) == LANE && s.fresh.swap(false, Ordering::AcqRel) {
            FRESH.fetch_sub(1, Ordering::Relaxed);
            f(
                fd_word(s).load(Ordering::Relaxed),
                s.ino.load(Ordering::Relaxed),
            );
        }
    }
}

/// A registration of laned `fd` stays on its data file in a kernel set
/// (lane_ready.rs could not move it to the lane): the daemon takes the
/// lane down (`Op::LaneClaim` arg 9), as the kernel's set would not hear of
/// the ring's bytes. Its first poll after the claim would be answered
/// "ready" instead, as one of a thread the library wakes and moves
/// (src/engine/lane.rs `lane_polled`).
pub fn left_polled(fd: c_int) {
    let _ = ioctl::op(fd, Op::LaneClaim, 9);
}

/// Whether `fd` is an end that still has or asks for a lane (JOIN, LANE,
/// CLAIMING), one between two lanes included: not given up (its slot
/// freed). No system call.
pub fn in_play(fd: c_int) -> bool {
    if USED.load(Ordering::Relaxed) == 0 || fd < 0 {
        return false;
    }
    slot_of_fd(fd)
        .is_some_and(|s| matches!(s.state.load(Ordering::Acquire), JOIN | LANE | CLAIMING))
}

/// Whether `fd` is a connect/accept end still asking for its lane (JOIN),
/// or one another thread was asking for (CLAIMING, waited out for a
/// while) that has it now.
pub fn joining(fd: c_int) -> bool {
    if USED.load(Ordering::Relaxed) == 0 || fd < 0 {
        return false;
    }
    let Some(s) = slot_of_fd(fd) else {
        return false;
    };
    let mut waited = false;
    for _ in 0..1000 {
        match s.state.load(Ordering::Acquire) {
            JOIN => return true,
            LANE => return waited,
            CLAIMING => {
                waited = true;
                std::thread::yield_now();
            }
            _ => return false,
        }
    }
    false
}

/// After an EINTR of a call on `fd`, a udsfs socket, that no signal
/// handler of this thread explains: whether it was the daemon's answer to
/// a read of this thread parked there when the connection's lane came up
/// under it (src/engine/lane.rs `lane_kicks`; `Op::LaneClaim` arg 8 asks),
/// so that the call is made again: through the ring, or the daemon again
/// if the lane went meanwhile.
pub fn woken(fd: c_int) -> bool {
    if OFF.load(Ordering::Relaxed) || ioctl::op(fd, Op::LaneClaim, 8).is_err() {
        return false;
    }
    // Another thread may be claiming the end (its own ask made the lane):
    // waited out for a while, so that the call made again finds the lane
    // rather than going to the daemon, which would take it down.
    if let Some(s) = slot_of_fd(fd) {
        for _ in 0..1000 {
            if s.state.load(Ordering::Acquire) != CLAIMING {
                break;
            }
            std::thread::yield_now();
        }
    }
    true
}

/// Whether this process may have lanes at all (one load).
pub fn any() -> bool {
    USED.load(Ordering::Relaxed) != 0
}

fn free(s: &Slot) {
    if s.fresh.swap(false, Ordering::Relaxed) {
        FRESH.fetch_sub(1, Ordering::Relaxed);
    }
    // The slot's hold goes: the region and eventfds are given back now, or
    // when the last call or epoll registration holding them lets go.
    set_own(s, 0);
    fd_word(s).store(-1, Ordering::Relaxed);
    s.copy.store(-1, Ordering::Relaxed);
    s.checked.store(0, Ordering::Relaxed);
    s.state.store(FREE, Ordering::Release);
    USED.fetch_sub(1, Ordering::Relaxed);
}

/// Whether slot `s` (in state `st`: CANDIDATE or LANE), whose region is
/// in `state`, will never use its lane again: the daemon took it down
/// (`Through`: a pass over SCM_RIGHTS, another holder's call, an
/// observer's switch) or closed it, and the end has no asks left (a
/// socketpair's end has none: it is asked once; a connect/accept end asks
/// again while its tries last, `rejoin`).
fn down_for_good(s: &Slot, st: u32, state: Option<State>) -> bool {
    match state {
        Some(State::Closed) => true,
        Some(State::Through) => st == CANDIDATE || s.tries.load(Ordering::Relaxed) == 0,
        _ => false,
    }
}

/// Frees slot `s`, found in state `st` with its lane down for good: its
/// number's calls go through the daemon as a number without a slot does,
/// and its hold goes now, not at the socket's close, so a process that
/// keeps such sockets open (their other ends passed away over
/// SCM_RIGHTS) keeps no eventfds for them (adversarial_lanes4.sh
/// downheld). Nothing notes the number again (only socketpair, connect and
/// accept do, for a new socket). Not if another thread took the slot first.
fn give_back(s: &Slot, st: u32) {
    if s.state
        .compare_exchange(st, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        free(s);
    }
}

/// Gives back the slots whose lanes are down for good (`give_back`),
/// found or not by a call of their own since: a socketpair's end the
/// program no longer calls after passing its other end away, say. Made at
/// each close of the program's (`closed`); a slot with a direct lane costs
/// one hold taken and let go.
fn sweep() {
    for s in &TABLE {
        let st = s.state.load(Ordering::Acquire);
        // A connect/accept end's (asks left: it rejoins) is not touched.
        if (st != CANDIDATE && st != LANE) || s.tries.load(Ordering::Relaxed) != 0 {
            continue;
        }
        let Some(h) = held(s) else { continue };
        let state = h.region().state();
        drop(h);
        if down_for_good(s, st, state) {
            give_back(s, st);
        }
    }
}

/// Whether `fd` still names slot `s`'s socket: a statx only when a
/// descriptor number was closed since the last look (fdgen.rs).
fn same_file(fd: c_int, s: &Slot) -> bool {
    let now = crate::fdgen::now();
    if s.checked.load(Ordering::Acquire) == now {
        return true;
    }
    let same = ino_of(fd) == Some(s.ino.load(Ordering::Relaxed));
    if same {
        s.checked.store(now, Ordering::Release);
    }
    same
}

/// How long a call waits for another thread's claim of its end: a claim
/// is a round trip to the daemon (and a memfd over the fd channel), long
/// on a loaded machine.
const CLAIM_WAIT: Duration = Duration::from_secs(1);

/// The slot of `fd` with a usable lane (claimed now if it was a
/// candidate). While another thread claims it (hackbench's twenty senders
/// make their first writes to each socket at once), the call waits for
/// the claim rather than go through the daemon, which would take the new
/// lane down for good.
fn find(fd: c_int) -> Option<&'static Slot> {
    if USED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut until = None;
    loop {
        match look(fd) {
            Look::Found(s) => return s,
            Look::Claiming => {}
        }
        let end = *until.get_or_insert_with(|| Instant::now() + CLAIM_WAIT);
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

enum Look {
    Found(Option<&'static Slot>),
    /// Another thread claims or joins the slot now.
    Claiming,
}

fn look(fd: c_int) -> Look {
    let Some(s) = slot_of_fd(fd) else {
        return Look::Found(None);
    };
    let st = s.state.load(Ordering::Acquire);
    if st == CLAIMING {
        return Look::Claiming;
    }
    if st != CANDIDATE && st != LANE && st != JOIN {
        return Look::Found(None);
    }
    match look_at(fd, s, st) {
        // Another thread's claim or join began since the look.
        None if s.state.load(Ordering::Acquire) == CLAIMING
            && fd_word(s).load(Ordering::Relaxed) == fd =>
        {
            Look::Claiming
        }
        r => Look::Found(r),
    }
}

fn look_at(fd: c_int, s: &'static Slot, st: u32) -> Option<&'static Slot> {
    if !same_file(fd, s) {
        // The number now names another file: the socket was closed.
        if s.state
            .compare_exchange(st, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            free(s);
        }
        return None;
    }
    if st == LANE {
        let h = held(s)?;
        // SAFETY: LANE was seen with Acquire: `end` is set and stays.
        let joined = unsafe { (*s.end.get()).as_ref() }.is_some_and(|e| e.joined);
        let state = h.region().state();
        drop(h);
        if down_for_good(s, LANE, state) {
            // Through the daemon from now on, the region and eventfds given back.
            give_back(s, LANE);
            return None;
        }
        let down = joined && state == Some(State::Through);
        return if down { rejoin(fd, s) } else { Some(s) };
    }
    if st == JOIN {
        return joined(fd, s);
    }
    if s.state
        .compare_exchange(CANDIDATE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return None;
    }
    // SAFETY: CLAIMING is ours: nobody else touches `end`.
    let end = unsafe { (*s.end.get()).as_mut() };
    match (end, claim(fd)) {
        (Some(e), Ok(side)) if side & 1 == e.side => {
            e.timeo = [timeout(fd, 0), timeout(fd, 1)];
            s.state.store(LANE, Ordering::Release);
            Some(s)
        }
        _ => {
            free(s);
            None
        }
    }
}

/// A JOIN slot's call: asks for the lane; the slot is a LANE, waits for a
/// later call (EAGAIN, while tries are left) or is freed.
fn joined(fd: c_int, s: &'static Slot) -> Option<&'static Slot> {
    if s.state
        .compare_exchange(JOIN, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return None;
    }
    // Held while the end is written: after a way down (`rejoin`) a thread
    // that found the slot a LANE may still reach for the old one.
    let (Some(r), Some(w)) = (s.rtaken.try_take(), s.wtaken.try_take()) else {
        s.state.store(JOIN, Ordering::Release);
        return None;
    };
    let up = ask(fd, s);
    drop((r, w));
    up.then_some(s)
}

/// With the slot CLAIMING (and no thread using its end): asks for the
/// lane; true: the slot is a LANE.
fn ask(fd: c_int, s: &'static Slot) -> bool {
    match join(fd) {
        Ok((mut e, hold)) => {
            // A lane up: a way down later (an observer's: a capture's gets a
            // lane through the daemon at an ask after it) has asks of its
            // own; the daemon gives a connection LANES_PER_CONN lanes at
            // most. More than the first: after a way down the rings' bytes
            // sit in the daemon's queues, and a busy connection's asks are
            // refused while any do (16 went in a burst of requests).
            s.tries.store(REJOIN_TRIES, Ordering::Relaxed);
            e.timeo = [timeout(fd, 0), timeout(fd, 1)];
            s.record.store(e.record, Ordering::Relaxed);
            // SAFETY: CLAIMING is ours: nobody else touches `end`.
            unsafe { *s.end.get() = Some(e) };
            // The lane before (a rejoin's, down) is let go.
            set_own(s, hold.into_key());
            if !s.fresh.swap(true, Ordering::Relaxed) {
                FRESH.fetch_add(1, Ordering::Release);
            }
            s.state.store(LANE, Ordering::Release);
            true
        }
        Err(libc::EAGAIN) if s.tries.fetch_sub(1, Ordering::Relaxed) > 1 => {
            s.state.store(JOIN, Ordering::Release);
            false
        }
        Err(e) => {
            if e == libc::ENOPROTOOPT {
                OFF.store(true, Ordering::Relaxed);
            } else {
                // No more asks: the daemon no longer counts this end as
                // asked, nor makes a lane under this process's reads of it
                // (their restart through the daemon would take it down).
                let _ = ioctl::op(fd, Op::LaneClaim, 7);
            }
            free(s);
            false
        }
    }
}

/// A connect/accept end whose lane went down (the daemon took it down:
/// another call of the other end's was on its way through the daemon when
/// the lane was made, or anything else): asks again while tries are left
/// (the daemon makes a connection a few lanes at most). The slot as it is
/// when a thread uses its end now (that call goes through the daemon).
fn rejoin(fd: c_int, s: &'static Slot) -> Option<&'static Slot> {
    if s.tries.load(Ordering::Relaxed) == 0
        || s.state
            .compare_exchange(LANE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return Some(s);
    }
    // Held until the new end is in place: a thread that found the slot
    // before cannot take the old end meanwhile.
    let (Some(r), Some(w)) = (s.rtaken.try_take(), s.wtaken.try_take()) else {
        s.state.store(LANE, Ordering::Release);
        return Some(s);
    };
    let up = ask(fd, s);
    drop((r, w));
    up.then_some(s)
}

/// Claims `fd`'s end for this process: its side.
fn claim(fd: c_int) -> Res<usize> {
    let g = ioctl::op_values::<LaneGrant>(fd, Op::LaneClaim, 0)?;
    Ok(g.side as usize)
}

/// The program closed descriptor numbers `first..=last` (fdgen.rs): their
/// slots are freed now, as `find` frees the slot of a number that names
/// another file, rather than when the number is next used (a server whose
/// clients come and go held its closed connections' slots until their
/// numbers came back, and new connections found the 64 slots full: no lane).
/// A slot another thread is claiming, or whose end a call is using, is
/// left to `find`.
pub fn closed(first: c_int, last: c_int) {
    if USED.load(Ordering::Relaxed) == 0 {
        return;
    }
    for (i, f) in FDS.iter().enumerate() {
        let fd = f.load(Ordering::Relaxed);
        if fd < first || fd > last {
            continue;
        }
        let s = &TABLE[i];
        let st = s.state.load(Ordering::Acquire);
        if (st == CANDIDATE || st == LANE || st == JOIN)
            && s.state
                .compare_exchange(st, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            // The number may name a new socket already: once the close
            // returned, another thread's accept or connect can take it and
            // note its connection here before this runs (memcached: a
            // worker's close, the listener's accept), and that slot is not
            // the closed file's to free (its end would never ask, and the
            // epoll_ctl that would have asked polls it through the daemon
            // first: no lane for good, run_memcached.sh).
            let ino = s.ino.load(Ordering::Relaxed);
            if fd_word(s).load(Ordering::Relaxed) == fd && ino_of(fd) != Some(ino) {
                if st == JOIN && moved(s, ino) {
                    s.state.store(JOIN, Ordering::Release);
                } else {
                    free(s);
                }
            } else {
                s.state.store(st, Ordering::Release);
            }
        }
    }
    sweep();
}

/// The program copied descriptor `old` to `new` (fcntl F_DUPFD, dup,
/// dup2, dup3): a connect/accept end still asking for its lane (JOIN) notes the
/// copy, where its note moves if `old` is closed (`moved`). Postfix's
/// servers and qmgr move each connection above 127 so (F_DUPFD, then
/// close): the copy's first poll reached the daemon as that of a number
/// the library never noted, which ruled the lane out for good (the polled
/// rule, docs/LANE.md "Programs that poll"). A laned end's copy is left
/// alone: its calls go through the daemon, which takes the lane down.
pub fn duped(old: c_int, new: c_int) {
    if USED.load(Ordering::Relaxed) == 0 || old < 0 || new < 0 || old == new {
        return;
    }
    if let Some(s) = slot_of_fd(old).filter(|s| s.state.load(Ordering::Acquire) == JOIN) {
        s.copy.store(new, Ordering::Relaxed);
    }
}

/// JOIN slot `s` (CLAIMING, ours), of socket `ino`, whose number was
/// closed: its note moved to the program's copy (`duped`) if that still
/// names the socket and has no slot of its own.
fn moved(s: &Slot, ino: u64) -> bool {
    let to = s.copy.swap(-1, Ordering::Relaxed);
    if to < 0 || ino_of(to) != Some(ino) || FDS.iter().any(|f| f.load(Ordering::Relaxed) == to) {
        return false;
    }
    fd_word(s).store(to, Ordering::Relaxed);
    s.checked.store(0, Ordering::Relaxed);
    true
}

/// After fork, in the child: the parent keeps its claimed ends; the
/// child's calls on them go through the daemon (which takes the lane down
/// when they come). Candidates stay candidates.
pub fn forked() {
    // The copies the parent's running calls keep are theirs, not the
    // child's (its close of the socket's numbers closes it for it).
    for (w, c) in WAITS.iter().zip(&COPIES) {
        w.store(-1, Ordering::Relaxed);
        let fd = c.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            // SAFETY: the parent's copy, inherited: the child's own now.
            unsafe { real::own_close(fd) };
        }
    }
    for s in &TABLE {
        s.rtaken.reset();
        s.wtaken.reset();
        if s.state.load(Ordering::Relaxed) == LANE {
            free(s);
        }
    }
}

/// close(2) of `fd`: Some(its result) when `fd` is a laned end here, None
/// for the C library's call.
///
/// Linux: once close() of the socket's last descriptor returns, the peer
/// reads EOF. The daemon hears of the last close only at FUSE RELEASE,
/// which the kernel sends after close() returned, so the peer read EAGAIN
/// meanwhile. The library cannot count the socket's descriptors (a dup, a
/// forked or spawned child that kept it, as its stderr say), but the kernel
/// tells: an inotify watch on the data file gets IN_CLOSE when the file's
/// last reference goes (the VFS's __fput, which runs before close() returns
/// to the caller); no event, another holder keeps it. With the event the
/// end's writer finishes as shutdown(SHUT_WR) does (`fin`: the peer reads
/// EOF after the bytes and sees POLLIN|POLLRDHUP); the daemon's RELEASE
/// then closes the lane as before (POLLHUP, EPIPE), the authority still.
pub fn close(fd: c_int) -> Option<c_int> {
    if USED.load(Ordering::Relaxed) == 0 || fd < 0 {
        return None;
    }
    let i = FDS.iter().enumerate().position(|(i, f)| {
        f.load(Ordering::Relaxed) == fd && TABLE[i].state.load(Ordering::Acquire) == LANE
    })?;
    let s = &TABLE[i];
    if ino_of(fd) != Some(s.ino.load(Ordering::Relaxed)) {
        return None;
    }
    // The end's writer, held across the close and the look after it: once
    // the number is closed another thread may get it at once (a socket,
    // an accept) and its `slot_for` take this very slot and rewrite `end`
    // under us, unless a flag of the slot is held (gdbus-auth's worker
    // thread died in `direct` on a null region, run_glib_tests.sh;
    // lanes_programs.sh close_reuse). Another thread writing on the end:
    // the C library's close, the daemon's RELEASE finishes the end.
    let w = s.wtaken.try_take()?;
    // Held across the close: the slot is freed when it returns (closes.rs).
    let h = held_for(s, fd)?;
    // SAFETY: LANE was seen with Acquire: `end` is set and stays while `w`
    // is held.
    let e = unsafe { (*s.end.get()).as_ref()? };
    if e.record || !direct(e) {
        return None;
    }
    // SAFETY: plain calls on a local path and a new descriptor.
    let watch = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if watch < 0 {
        return None;
    }
    let path = fd_path(fd);
    let mask = libc::IN_CLOSE_WRITE | libc::IN_CLOSE_NOWRITE;
    // SAFETY: a NUL-terminated path; inotify follows the magic link to the file.
    if unsafe { libc::inotify_add_watch(watch, path.as_ptr().cast(), mask) } < 0 {
        // SAFETY: ours.
        unsafe { real::close(watch) };
        return None;
    }
    // SAFETY: the program's call.
    let r = unsafe { real::close(fd) };
    let err = crate::errno::errno();
    let mut buf = [0u64; 64];
    // SAFETY: reads into a local buffer.
    let n = unsafe { libc::read(watch, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
    // SAFETY: ours.
    unsafe { real::close(watch) };
    if r == 0 && n > 0 && direct(e) {
        // SAFETY: the writer is this thread's while taken (`w`).
        unsafe { (*e.w.get()).shutdown() };
    }
    drop(w);
    drop(h);
    crate::errno::set_errno(err);
    Some(r)
}

/// "/proc/self/fd/N\0" on the stack (close is async-signal-safe: no
/// allocation).
pub(crate) fn fd_path(fd: c_int) -> [u8; 32] {
    let mut p = [0u8; 32];
    let head = b"/proc/self/fd/";
    let mut buf = [0u8; 10];
    let digits = crate::exec::itoa(fd.unsigned_abs(), &mut buf);
    p[..head.len()].copy_from_slice(head);
    p[head.len()..head.len() + digits.len()].copy_from_slice(digits);
    p
}

/// The end's busy word, a count: a reader thread and a writer thread of
/// the end copy at once, and the first to finish must not lower it under
/// the other (the daemon's way down waits for 0, then drains the rings).
fn busy(e: &End) -> &AtomicU32 {
    e.region.word(busy_word(e.side))
}

/// SO_RCVTIMEO (`dir` 0) or SO_SNDTIMEO (1) from the daemon (at the
/// claim); None: none.
/// A zero timeout that reads 0 (a negative one set) is no wait at all.
fn timeout(fd: c_int, dir: i32) -> Option<Duration> {
    let t = ioctl::op_values::<Timeo>(fd, Op::GetTimeo, dir).ok()?;
    if t.zero {
        return Some(Duration::ZERO);
    }
    let d = Duration::new(t.sec.max(0) as u64, (t.usec.max(0) as u32) * 1000);
    (!d.is_zero()).then_some(d)
}

fn nonblocking(fd: c_int, flags: c_int) -> bool {
    // SAFETY: F_GETFL reads the file's flags.
    flags & libc::MSG_DONTWAIT != 0
        || unsafe { real::own_fcntl(fd, libc::F_GETFL, 0) } & libc::O_NONBLOCK != 0
}

/// A corrupt region: the daemon resets the connection; ECONNRESET.
fn corrupt(fd: c_int, s: &Slot, why: &str) -> ssize_t {
    log::say(&format!(
        "lane of fd {fd}: {why}: the connection is reset (ECONNRESET)"
    ));
    let _ = ioctl::op(fd, Op::LaneClaim, 1);
    let _ = s;
    len_ret(Err(libc::ECONNRESET))
}

/// A write's count, or `err` when nothing was written.
fn stop(done: usize, err: c_int) -> Option<ssize_t> {
    Some(if done > 0 {
        done as ssize_t
    } else {
        len_ret(Err(err))
    })
}

/// A laned call's start on `fd`'s end (its writer when `write`, else its
/// reader): the handlers run so far (one run from here on interrupts a
/// sleep of the call), the slot, the turn, the hold that keeps the region
/// and eventfds while the call uses them (a close in another thread frees
/// the slot, not them), the end. None: not the lane's.
type Entered = (
    u32,
    &'static Slot,
    crate::lane_turn::Taken<'static>,
    Hold,
    &'static End,
);

/// A laned read (a write when `write`) on an entered end (`enter`, made
/// by the caller: its claim of a lane is deep enough on a 16 KiB stack):
/// `call`, recorded for a handler's jump out of it (wait_record.rs).
fn recorded_call(
    (ran, s, t, held, e): Entered,
    write: bool,
    call: impl FnOnce(Laned, &wait_record::Rec) -> Option<ssize_t>,
) -> Option<ssize_t> {
    let undo = wait_record::Undo::Call(wait_record::Call {
        hold: held.key(),
        turn: if write { &s.wtaken } else { &s.rtaken } as *const Turn as usize,
        kept: None,
        word: wait_note::sleep_word(),
    });
    let rec = wait_record::begin(undo, undo_call);
    let r = call((ran, s, t, held.key(), e), &rec);
    // After the record's end: a jump out of the call lets go of it once.
    drop(rec);
    drop(held);
    r
}

/// An entered call's (`Entered`) with the key of its hold in place of the
/// hold, which its caller keeps.
type Laned = (
    u32,
    &'static Slot,
    crate::lane_turn::Taken<'static>,
    lane_hold::Key,
    &'static End,
);

fn enter(fd: c_int, write: bool) -> Option<Entered> {
    wait_record::reap();
    let ran = wait_note::handlers_ran();
    let s = find(fd)?;
    let t = if write { &s.wtaken } else { &s.rtaken }.take()?;
    let h = held_for(s, fd)?;
    // SAFETY: LANE was seen with Acquire: `end` is set and stays while a
    // turn is held.
    let e = unsafe { (*s.end.get()).as_ref()? };
    Some((ran, s, t, h, e))
}

/// FIONREAD (SIOCINQ) on `fd`'s stream lane: the bytes its incoming ring
/// holds (Linux's unix_inq_len), from the ring's positions. Through the
/// daemon the question takes the lane down (its queue is counted there),
/// and Postfix asks it before each read: its connections kept a lane for
/// a moment only. None: not the lane's (a lane going down, a ring found
/// corrupt: the daemon answers and sees to it), or a seqpacket lane's
/// (Linux sums every queued record's bytes, which the ring's positions,
/// counting headers and padding, do not say).
pub fn inq(fd: c_int) -> Option<c_int> {
    let (_ran, _s, _t, _held, e) = enter(fd, false)?;
    if e.record {
        return None;
    }
    // SAFETY: the reader is this thread's while its turn (`_t`) is held.
    let r = unsafe { &mut *e.r.get() };
    busy(e).fetch_add(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    let n = r.available();
    busy(e).fetch_sub(1, Ordering::Release);
    c_int::try_from(n.ok()?).ok()
}

/// A plain read/recv of up to `n` bytes on `fd`'s lane; None: not the
/// lane's (the caller goes through the daemon). MSG_PEEK leaves the bytes
/// (the record); MSG_WAITALL (a stream's) reads until `n` bytes, the end,
/// a signal or the timeout, as unix_stream_read_generic does; MSG_TRUNC
/// (a record's) returns the record's length.
pub fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> Option<ssize_t> {
    recv_with(fd, buf, n, flags, Rest::Here)
}

/// Who finishes a laned receive whose lane went down under it: the lane's
/// own receive through the daemon (`recv_rest`, `read_rest`: bytes only),
/// or the caller (`Rest::Caller`, a recvmsg with room for control
/// messages: the message that took the lane down may carry descriptors or
/// credentials, which only the caller's msghdr can take), told there how
/// far the call got.
#[derive(Clone, Copy)]
enum Rest<'a> {
    Here,
    Caller(&'a std::cell::Cell<Option<Handed>>),
}

fn recv_with(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, rest: Rest) -> Option<ssize_t> {
    let known = libc::MSG_DONTWAIT | libc::MSG_TRUNC | libc::MSG_PEEK | libc::MSG_WAITALL;
    if flags & !known != 0 {
        return None;
    }
    // A peek that waits for all is the daemon's (the target moves).
    if flags & libc::MSG_PEEK != 0 && flags & libc::MSG_WAITALL != 0 {
        return None;
    }
    recorded_call(enter(fd, false)?, false, |laned, rec| {
        recv_laned(fd, (buf, n), flags, rest, laned, rec)
    })
}

/// Entered (`enter`) `fd`'s end for a recv of up to `n` bytes at `buf`,
/// the call recorded (`rec`: wait_record.rs) for a handler's jump out of it.
fn recv_laned(
    fd: c_int,
    (buf, n): (*mut c_void, size_t),
    flags: c_int,
    rest: Rest,
    (ran, s, t, key, e): Laned,
    rec: &wait_record::Rec,
) -> Option<ssize_t> {
    // MSG_TRUNC on a stream is the daemon's (Linux discards the bytes).
    if flags & libc::MSG_TRUNC != 0 && !e.record {
        return None;
    }
    let (ino, record) = (s.ino.load(Ordering::Relaxed), e.record);
    let peek = flags & libc::MSG_PEEK != 0;
    // MSG_WAITALL means nothing to a record socket.
    let all = flags & libc::MSG_WAITALL != 0 && !record;
    let room = user::writable(buf.cast(), n);
    if room == 0 && n != 0 {
        return Some(len_ret(Err(libc::EFAULT)));
    }
    let n = room;
    let dst = if n == 0 {
        &mut [][..]
    } else {
        // SAFETY: the program's buffer, probed writable for n bytes.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }
    };
    let mut done = 0;
    // SO_RCVTIMEO bounds the whole call, as unix_stream_read_generic's one
    // timeo that each wait spends: a MSG_WAITALL read fed in pieces gives
    // up when it is spent, not a timeout after each piece.
    let timeo = e.timeo[0];
    let mut left = timeo;
    let mut kept = None;
    let mut turn = Some((t, e));
    loop {
        // The turn again after a sleep, if the slot is still this lane's.
        let (t, e) = match turn.take() {
            Some(te) => te,
            None => match retake(s, &s.rtaken, fd, key) {
                Some(te) => te,
                // A MSG_WAITALL read fed in part whose lane went down while
                // it slept, seen first by another thread of the end (which
                // may have asked for the next lane already): the rest as
                // when the sleep itself sees the way down (a number closed
                // under it ends it with what came). Returned here, the
                // program got a short count Linux never gives.
                None if done > 0 && all && handed(rest, fd, s, done, left) => {
                    return Some(done as ssize_t);
                }
                None if done > 0 && all && open_under(fd, s) => {
                    return Some(recv_rest(fd, s, dst, done, (all, peek), left));
                }
                None if done > 0 => return Some(done as ssize_t),
                // The number closed or reused under the sleep (the slot
                // went): the call goes on on the file it keeps, as
                // Linux's does.
                None => return kept_read(&kept, flags, dst).or_else(|| closed_ino(fd, ino)),
            },
        };
        // SAFETY: the reader is this thread's while its turn (`t`) is held.
        let r = unsafe { &mut *e.r.get() };
        busy(e).fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let got = if record {
            // A record: its length under MSG_TRUNC, else what was copied
            // (the rest of a longer one is dropped, as Linux does).
            r.read_record(dst, peek).map(|rec| match rec {
                Some(rec) if flags & libc::MSG_TRUNC != 0 => rec.len,
                Some(rec) => rec.copied,
                None => 0,
            })
        } else {
            r.read(&mut dst[done..], peek)
        };
        busy(e).fetch_sub(1, Ordering::Release);
        if got.is_ok() {
            r.sleeper().pass_on(|| r.readable().unwrap_or(false));
        }
        match got {
            Ok(k) if all && k > 0 && done + k < n => {
                done += k;
                turn = Some((t, e));
                continue;
            }
            Ok(k) => return Some((done + k) as ssize_t),
            Err(LaneErr::WouldBlock) if nonblocking(fd, flags) => return stop(done, libc::EAGAIN),
            Err(LaneErr::WouldBlock) => {
                if kept.is_none() {
                    kept = Kept::new(fd, s, rec);
                }
                let began = Instant::now();
                let sleeper = r.sleeper();
                // Other threads read meanwhile: the turn goes during the
                // sleep and is taken for each look.
                drop(t);
                let slept = sleep(sleeper, &s.rspin, left, rec, || {
                    look_again(s, &s.rtaken, fd, key, ran, |e| {
                        // SAFETY: the turn is held (look_again).
                        unsafe { &mut *e.r.get() }.readable()
                    })
                });
                left = left.map(|l| l.saturating_sub(began.elapsed()));
                match slept {
                    Ok(()) => {}
                    Err(LaneErr::TimedOut) => return stop(done, libc::EAGAIN),
                    Err(LaneErr::Interrupted) => {
                        wait_note::interrupted(fd, timeo.is_none());
                        return stop(done, libc::EINTR);
                    }
                    Err(LaneErr::NotDirect(_)) if handed(rest, fd, s, done, left) => {
                        return Some(done as ssize_t);
                    }
                    Err(LaneErr::NotDirect(_)) if left.is_some() && !record => {
                        return Some(recv_rest(fd, s, dst, done, (all, peek), left));
                    }
                    Err(LaneErr::NotDirect(_)) if left.is_some() && open_under(fd, s) => {
                        return record_rest(fd, dst, flags, left);
                    }
                    Err(LaneErr::NotDirect(_)) if done > 0 => {
                        return Some(read_rest(fd, s, dst, done));
                    }
                    Err(LaneErr::NotDirect(_)) => {
                        return closed_under(fd, s)
                            .map(|r| kept_read(&kept, flags, dst).unwrap_or(r))
                    }
                    Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
                    Err(_) => return stop(done, libc::EIO),
                }
            }
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            Err(LaneErr::NotDirect(_)) if handed(rest, fd, s, done, left) => {
                return Some(done as ssize_t)
            }
            // After a sleep: the daemon waits only what is left.
            Err(LaneErr::NotDirect(_)) if left != timeo && !record => {
                return Some(recv_rest(fd, s, dst, done, (all, peek), left))
            }
            Err(LaneErr::NotDirect(_)) if left != timeo && open_under(fd, s) => {
                return record_rest(fd, dst, flags, left)
            }
            Err(LaneErr::NotDirect(_)) if done > 0 => return Some(read_rest(fd, s, dst, done)),
            Err(LaneErr::NotDirect(_)) => {
                return closed_under(fd, s).map(|r| kept_read(&kept, flags, dst).unwrap_or(r))
            }
            Err(_) if done > 0 => return Some(done as ssize_t),
            Err(_) => return None,
        }
    }
}

/// Whether the receive whose lane went down under it after `done` bytes,
/// `left` of its timeout, is its caller's to finish (`Rest::Caller`,
/// told so): not when the program closed the number under the call
/// (`closed_under` answers that).
fn handed(rest: Rest, fd: c_int, s: &Slot, done: usize, left: Option<Duration>) -> bool {
    match rest {
        Rest::Caller(to) if closed_under(fd, s).is_none() => {
            to.set(Some(Handed { done, left }));
            true
        }
        _ => false,
    }
}

/// The turn `which` of slot `s` again, after a sleep without it, and the
/// slot's end: None unless the slot is still `fd`'s lane of the region the
/// call holds (`key`: another thread's close may have freed the slot
/// meanwhile and a new socket taken it, whose end a call must not use for
/// the old one). No hold of its own: the call's keeps the region (a look
/// costs no count, and a handler's jump out of one leaks none).
fn retake<'a>(
    s: &'a Slot,
    which: &'a Turn,
    fd: c_int,
    key: lane_hold::Key,
) -> Option<(Taken<'a>, &'a End)> {
    let t = which.take()?;
    let still = s.own.load(Ordering::Acquire) == key
        && fd_word(s).load(Ordering::Relaxed) == fd
        && s.state.load(Ordering::Acquire) == LANE;
    if !still {
        return None;
    }
    // SAFETY: LANE seen with the turn held: `end` is set and stays; its
    // region is the one the call holds.
    let e = unsafe { (*s.end.get()).as_ref()? };
    Some((t, e))
}

/// A blocking call's sleep on `sleeper` until `ready`, after the looks
/// `spin` has learnt (which it learns from), at most `timeout`; the sleep's
/// futex word noted for the signal trampoline (wait_note.rs), the count of
/// sleepers it raises marked in the call's record (`rec`: wait_record.rs).
fn sleep(
    sleeper: udsfs_proto::lane::Sleeper,
    spin: &Spin,
    timeout: Option<Duration>,
    rec: &wait_record::Rec,
    mut ready: impl FnMut() -> Result<bool, LaneErr>,
) -> Result<(), LaneErr> {
    let noted = wait_note::sleeping_on(sleeper.word());
    // The looks first (a handler that ran meanwhile: the sleep below
    // sees it, as before), then the sleep.
    let mut failed = None;
    let found = lane_spin::look_for_call(spin, || {
        let ready = ready().unwrap_or_else(|e| {
            failed = Some(e);
            true
        });
        lane_spin::Seen {
            ready,
            rings: 1,
            peers_wait: false,
        }
    });
    let slept = if let Some(e) = failed {
        Err(e)
    } else if found == lane_spin::Found::Ready {
        Ok(())
    } else {
        match rec.raised() {
            Some(raised) => sleeper.wait_marked(ready, 0, timeout, raised),
            None => sleeper.wait(ready, 0, timeout),
        }
    };
    wait_note::slept(noted);
    slept
}

/// Undoes a laned call that a signal handler jumped out of
/// (wait_record.rs): the count of sleepers its sleep raised (`raised`, 0:
/// none) lowered, the futex word noted before it noted again, its turn let
/// go if held, its note of its file left, its hold of the region let go
/// (last: the count lives in the region).
fn undo_call(u: wait_record::Undo, raised: usize) {
    let wait_record::Undo::Call(u) = u else {
        return;
    };
    if raised != 0 {
        // SAFETY: a count in the region, which the sleep's hold (let go
        // below) keeps mapped.
        unsafe { &*(raised as *const AtomicU32) }.fetch_sub(1, Ordering::Relaxed);
    }
    wait_note::slept(u.word);
    if u.turn != 0 {
        // SAFETY: a turn of a slot of the lane table, a static.
        unsafe { &*(u.turn as *const Turn) }.let_go_if_mine();
    }
    if let Some((at, ino)) = u.kept {
        leave_kept(at, ino);
    }
    lane_hold::release(u.hold);
}

/// A sleeping call's look whether to wake (`ready` on its end, under the
/// turn `which`): Interrupted once a handler ran on the thread since the
/// call began (`ran`: between two slices of the sleep, outside the system
/// call, which Linux's sleep would have ended); Ok(true) when the slot is
/// no longer the call's lane (the call's own retake says what to return).
fn look_again(
    s: &Slot,
    which: &Turn,
    fd: c_int,
    key: lane_hold::Key,
    ran: u32,
    ready: impl FnOnce(&End) -> Result<bool, LaneErr>,
) -> Result<bool, LaneErr> {
    if wait_note::handlers_ran() != ran {
        return Err(LaneErr::Interrupted);
    }
    match retake(s, which, fd, key) {
        Some((_t, e)) => ready(e),
        None => Ok(true),
    }
}

/// A call whose slot went while it slept: EBADF when `fd` no longer names
/// the socket `ino` (closed under the call), else None (the daemon's).
fn closed_ino(fd: c_int, ino: u64) -> Option<ssize_t> {
    if ino_of(fd) == Some(ino) {
        return None;
    }
    Some(len_ret(Err(libc::EBADF)))
}

/// The program's numbers that this process's running calls wait on (-1:
/// none; -2: being taken; -3: being left), the inode each names, and the
/// copy of its file made when the program closed the number under the call
/// (-1: none; `going`). A fork child closes the copies (`forked`).
static WAITS: [AtomicI32; 64] = [const { AtomicI32::new(-1) }; 64];
static WAIT_INOS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
static COPIES: [AtomicI32; 64] = [const { AtomicI32::new(-1) }; 64];

/// The data file of a blocking call's end kept open for the call's length,
/// as Linux's call holds its file (fdget): a close of the number in another
/// thread (or a dup2 of another file onto it) then leaves the socket open
/// under the call, which goes on and gets its peer's bytes, and the socket
/// closes when the call ends (adversarial_lanes4.sh dupover, closerace of
/// adversarial_lanes3.sh). The call notes the number it waits on
/// (`WAITS`), and the program's close of it copies the file first
/// (`going`, in the closing thread, before the close): above the
/// program's numbers (lane_ready's floor, close-on-exec), and only then, so
/// a wait costs no system call (a copy made at each wait, then closed, was
/// five: half of a laned ping-pong's). None when the 64 places are taken
/// (the call is as before: EBADF once the socket closes under it).
struct Kept<'a> {
    ino: u64,
    at: usize,
    /// The call's record, which names the place while it is the call's.
    rec: &'a wait_record::Rec,
}

impl<'a> Kept<'a> {
    fn new(fd: c_int, s: &Slot, rec: &'a wait_record::Rec) -> Option<Kept<'a>> {
        let ino = s.ino.load(Ordering::Relaxed);
        let at = WAITS.iter().position(|k| {
            k.compare_exchange(-1, -2, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        rec.kept(Some((at, ino)));
        WAIT_INOS[at].store(ino, Ordering::Relaxed);
        WAITS[at].store(fd, Ordering::Release);
        fence(Ordering::SeqCst);
        let k = Kept { ino, at, rec };
        // Closed and reused since the call found its slot (a close after
        // this note copies the file first, which the drop closes): nothing
        // to keep.
        same_file(fd, s).then_some(k)
    }

    /// The copy made when the program closed the number, if it did.
    fn fd(&self) -> Option<c_int> {
        let c = COPIES[self.at].load(Ordering::Acquire);
        (c >= 0).then_some(c)
    }
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        // The record first: a jump between the two leaves the place taken
        // (a note that a close of the number copies the file for), never
        // let go twice (another call's by then).
        self.rec.kept(None);
        leave_kept(self.at, self.ino);
    }
}

/// A call's note of its file at `at` (`Kept`) left, and the copy made when
/// the program closed the number closed.
fn leave_kept(at: usize, ino: u64) {
    // Left first, so that a close copying the file now takes its copy
    // back (`going`).
    WAITS[at].store(-3, Ordering::SeqCst);
    let c = COPIES[at].swap(-1, Ordering::AcqRel);
    // Closed only when the number still names the end's file (a
    // program's close_range may have taken it meanwhile and reused it).
    if c >= 0 && ino_of(c) == Some(ino) {
        // SAFETY: our copy, closed from the library's call site: not a
        // close of the program's (closes.rs), which would move the
        // descriptor generation and send every laned call of the
        // process to a statx.
        unsafe { real::own_close(c) };
    }
    WAITS[at].store(-1, Ordering::Release);
}

/// The program is about to close numbers `first..=last` (closes.rs
/// `going`, in the closing thread): a call waiting on one of them gets a
/// copy of its file first, which the call goes on with (`Kept`). Not a copy
/// inside the range (close_range would close it too), nor of another file
/// than the call's (a close past the library reused the number).
pub fn going(first: c_int, last: c_int) {
    wait_record::reap();
    for (at, w) in WAITS.iter().enumerate() {
        let fd = w.load(Ordering::Acquire);
        if fd < first || fd > last || fd < 0 || COPIES[at].load(Ordering::Acquire) >= 0 {
            continue;
        }
        let e = crate::errno::errno();
        let floor = udsfs_proto::lane::ready::high_floor();
        // SAFETY: a copy of the program's descriptor, ours.
        let d = unsafe { real::own_fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
        let mine = d >= 0
            && (d < first || d > last)
            && ino_of(d) == Some(WAIT_INOS[at].load(Ordering::Relaxed))
            && COPIES[at]
                .compare_exchange(-1, d, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        // The call left meanwhile (its Drop took no copy): taken back.
        let stays = mine
            && (w.load(Ordering::SeqCst) == fd
                || COPIES[at]
                    .compare_exchange(d, -1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err());
        if d >= 0 && !stays {
            // SAFETY: the copy just made, not handed to any call.
            unsafe { real::own_close(d) };
        }
        crate::errno::set_errno(e);
    }
}

/// A plain read the lane began, whose number the program closed under it,
/// and which the daemon is to end (the lane went down: the peer closed):
/// made on the end's file the call keeps (`Kept`), as Linux's read goes on
/// on its file; None without one. A recv's flags go with it, through the
/// library's recv on the copy (which has no lane: the daemon's).
fn kept_read(kept: &Option<Kept>, flags: c_int, dst: &mut [u8]) -> Option<ssize_t> {
    let fd = kept.as_ref()?.fd()?;
    let (p, n) = (dst.as_mut_ptr().cast(), dst.len());
    // SAFETY: the program's buffer, probed writable; our copy of its file.
    Some(unsafe {
        match flags {
            0 => crate::real::read(fd, p, n),
            _ => crate::recv(fd, p, n, flags),
        }
    })
}

/// `kept_read`'s write: the rest of a blocking write or send whose number
/// the program closed or reused under its sleep, on the call's file (a
/// send(MSG_NOSIGNAL) gave up with what the ring held, lanes_threads.sh).
fn kept_write(kept: &Option<Kept>, flags: c_int, src: &[u8]) -> Option<ssize_t> {
    let fd = kept.as_ref()?.fd()?;
    let (p, n) = (src.as_ptr().cast(), src.len());
    // SAFETY: the program's buffer, probed readable; our copy of its file.
    Some(unsafe {
        match flags {
            0 => crate::real::write(fd, p, n),
            _ => crate::send(fd, p, n, flags),
        }
    })
}

/// The rest of a blocking stream receive under SO_RCVTIMEO that slept in
/// the ring and the lane went down under (`done` bytes in `dst` already;
/// `(all, peek)`: MSG_WAITALL, MSG_PEEK): MSG ioctls that wait in the daemon
/// only what its sleeps left of the timeout (`timeo_left`, MSGF_CONT), as
/// unix_stream_read_generic has one timeo for the call, until `dst` is full
/// with MSG_WAITALL, else one. The count, or the error when nothing came.
fn recv_rest(
    fd: c_int,
    s: &Slot,
    dst: &mut [u8],
    mut done: usize,
    (all, peek): (bool, bool),
    timeo_left: Option<Duration>,
) -> ssize_t {
    let mut cont = timeo_left_ns(timeo_left);
    let mut buf = ioctl::MsgBuf::new();
    // (Not from a number the program closed under the call: `closed_under`.)
    while done < dst.len() && closed_under(fd, s).is_none() {
        let ask = ioctl::Ask {
            want: (dst.len() - done).min(MSG_ROOM),
            peek,
            waitall: all,
            wait: Some(ioctl::Wait {
                waitall: all,
                cont: Some(cont),
                ..ioctl::Wait::default()
            }),
            ..ioctl::Ask::default()
        };
        match ioctl::recv(fd, &mut buf, &ask) {
            Ok(g) if g.len > 0 => {
                dst[done..done + g.len].copy_from_slice(buf.payload(g.len));
                done += g.len;
                cont = g.timeo_left;
                if !all {
                    break;
                }
            }
            Ok(_) => break,
            Err(libc::EINTR) if all && !peek => match rest_on_new_lane(fd, &mut dst[done..]) {
                Some(Ok(0)) | Some(Err(_)) => break,
                Some(Ok(n)) => done += n,
                None => {}
            },
            Err(e) if done == 0 => {
                if e == libc::EINTR {
                    wait_note::interrupted(fd, timeo_left.is_none());
                }
                return len_ret(Err(e));
            }
            Err(_) => break,
        }
    }
    done as ssize_t
}

/// The record a blocking receive under SO_RCVTIMEO slept for in the ring
/// when the lane went down under it: the daemon's receive (`msg::recv_from`,
/// which takes a record larger than one ioctl through the `msg` file too),
/// waiting only what the sleeps left (`left`, MSGF_CONT), as
/// unix_dgram_recvmsg has one timeo for the call. None: no mount (the
/// caller's call through the daemon).
fn record_rest(fd: c_int, dst: &mut [u8], flags: c_int, left: Option<Duration>) -> Option<ssize_t> {
    let m = mount::get()?;
    let mut iov = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    // SAFETY: a zeroed msghdr is empty: no name, no control room.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    let handed = Handed { done: 0, left };
    Some(len_ret(crate::msg::recv_from(
        m,
        fd,
        &mut h,
        flags,
        false,
        Some(handed),
    )))
}

/// A MSG_WAITALL read the lane began and the daemon is to end (the lane
/// went down under it, its bytes now in the engine's queue): the rest by
/// reads of the data file until it is full, the end or an error.
fn read_rest(fd: c_int, s: &Slot, dst: &mut [u8], mut done: usize) -> ssize_t {
    // (Not from a number the program closed under the call: `closed_under`.)
    while done < dst.len() && closed_under(fd, s).is_none() {
        let left = &mut dst[done..];
        // SAFETY: the program's buffer, probed writable.
        let r = unsafe { crate::real::read(fd, left.as_mut_ptr().cast(), left.len()) };
        if r < 0 && crate::errno::errno() == libc::EINTR {
            match rest_on_new_lane(fd, left) {
                Some(Ok(0)) | Some(Err(_)) => break,
                Some(Ok(n)) => done += n,
                None => {}
            }
            continue;
        }
        if r <= 0 {
            break;
        }
        done += r as usize;
    }
    done as ssize_t
}

/// After an EINTR of a MSG_WAITALL rest parked in the daemon: when it was
/// the daemon's kick because the connection's lane came up again under it
/// (another thread of the end asked), the rest through the new lane, all
/// of `left` or the end (None: no lane after all, the daemon again).
/// Ended there, the program got a short count, which MSG_WAITALL never
/// gives but at a signal, the end or an error.
fn rest_on_new_lane(fd: c_int, left: &mut [u8]) -> Option<Result<usize, ()>> {
    if !woken(fd) {
        return Some(Err(()));
    }
    let n = recv_with(
        fd,
        left.as_mut_ptr().cast(),
        left.len(),
        libc::MSG_WAITALL,
        Rest::Here,
    )?;
    Some(usize::try_from(n).map_err(|_| ()))
}

/// A plain write/send of `n` bytes on `fd`'s lane; None: not the lane's.
pub fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> Option<ssize_t> {
    if flags & !(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) != 0 || n == 0 {
        return None;
    }
    recorded_call(enter(fd, true)?, true, |laned, rec| {
        send_laned(fd, (buf, n), flags, laned, rec)
    })
}

/// Entered (`enter`) `fd`'s end for a send of the `n` bytes at `buf`, the
/// call recorded (`rec`: wait_record.rs) for a handler's jump out of it.
fn send_laned(
    fd: c_int,
    (buf, n): (*const c_void, size_t),
    flags: c_int,
    (ran, s, t, key, e): Laned,
    rec: &wait_record::Rec,
) -> Option<ssize_t> {
    let (ino, timeo) = (s.ino.load(Ordering::Relaxed), e.timeo[1]);
    if user::readable(buf.cast(), n) < n {
        return Some(len_ret(Err(libc::EFAULT)));
    }
    // SAFETY: the program's buffer, probed readable for n bytes.
    let src = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) };
    // O_NONBLOCK matters only when the ring is full: looked at then (the
    // open file's flags may change under us, from another process too).
    let mut nonblock: Option<bool> = None;
    let mut done = 0;
    // Found the ring full: as Linux's sender asleep in sock_alloc_send_pskb.
    let mut waited = false;
    // Its sleep for room timed out: the write that follows is its last look
    // (`ParkTable::expire` in the daemon does the same).
    let mut timed_out = false;
    // When its wait for room gives up under SO_SNDTIMEO: one timeout from its
    // first sleep since it last wrote, as Linux's sender has one per skb
    // however often it wakes; the daemon gets what is left of it when the
    // lane goes down under the wait (`resumed`).
    let mut wait_ends: Option<Instant> = None;
    let mut kept = None;
    let mut turn = Some((t, e));
    loop {
        let (t, e) = match turn.take() {
            Some(te) => te,
            None => match retake(s, &s.wtaken, fd, key) {
                Some(te) => te,
                // The lane went down while the call slept (another
                // thread saw it first): the daemon takes the rest, as
                // when the sleep itself saw it (NotDirect below).
                None if closed_under(fd, s).is_none() => {
                    return resumed(fd, s, src, done, flags, left(wait_ends));
                }
                // As in recv: on the file the call keeps.
                None => match kept_write(&kept, flags, &src[done..]) {
                    Some(r) if r >= 0 => return Some((done + r as usize) as ssize_t),
                    _ if done > 0 => return Some(done as ssize_t),
                    Some(r) => return Some(r),
                    None => return closed_ino(fd, ino),
                },
            },
        };
        // SAFETY: the writer is this thread's while its turn (`t`) is held.
        let w = unsafe { &mut *e.w.get() };
        busy(e).fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let put = w.write(&src[done..]);
        busy(e).fetch_sub(1, Ordering::Release);
        if put.is_ok() {
            w.sleeper().pass_on(|| w.writable(1).unwrap_or(false));
        }
        match put {
            Ok(k) => {
                done += k;
                // The next piece waits SO_SNDTIMEO afresh, as Linux's next skb.
                timed_out = false;
                wait_ends = None;
                if done == n || *nonblock.get_or_insert_with(|| nonblocking(fd, flags)) {
                    return Some(done as ssize_t);
                }
            }
            Err(LaneErr::WouldBlock) if timed_out => return stop(done, libc::EAGAIN),
            Err(LaneErr::WouldBlock) if *nonblock.get_or_insert_with(|| nonblocking(fd, flags)) => {
                return stop(done, libc::EAGAIN)
            }
            Err(LaneErr::WouldBlock) => waited = true,
            // The daemon takes what is left (its queue follows the ring).
            Err(LaneErr::NotDirect(_)) if done > 0 || waited => {
                return resumed(fd, s, src, done, flags, left(wait_ends))
            }
            Err(LaneErr::NotDirect(_)) => return closed_under(fd, s),
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            // A record longer than the ring: the daemon's (EMSGSIZE or
            // its queue), the lane goes down.
            Err(_) if done > 0 => return Some(done as ssize_t),
            Err(_) => return None,
        }
        if kept.is_none() {
            kept = Kept::new(fd, s, rec);
        }
        let want = n - done;
        let sleeper = w.sleeper();
        // Other threads write meanwhile: the turn goes during the sleep.
        drop(t);
        let limit =
            timeo.and_then(|t| left(Some(*wait_ends.get_or_insert_with(|| Instant::now() + t))));
        let slept = sleep(sleeper, &s.wspin, limit, rec, || {
            look_again(s, &s.wtaken, fd, key, ran, |e| {
                // SAFETY: the turn is held (look_again).
                unsafe { &mut *e.w.get() }.writable(want)
            })
        });
        match slept {
            Ok(()) => {}
            // Linux's sender whose timeout ran out looks once more and takes
            // the room there, though too little to have woken it
            // (sock_alloc_send_pskb): one more write.
            Err(LaneErr::TimedOut) => timed_out = true,
            Err(LaneErr::Interrupted) => {
                wait_note::interrupted(fd, timeo.is_none());
                return stop(done, libc::EINTR);
            }
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            Err(LaneErr::NotDirect(_)) => return resumed(fd, s, src, done, flags, left(wait_ends)),
            Err(_) if done > 0 => return Some(done as ssize_t),
            Err(_) => return None,
        }
    }
}

/// The time left until `deadline` (None: none; zero once past).
pub(crate) fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// A call the lane began and the daemon is to end, before it moved a byte:
/// None (the caller's call through the daemon) unless the program closed
/// `fd` under it (another thread's close, which took the lane down): then
/// EBADF, rather than the daemon's call on whatever file the number names
/// now (the next connection's, whose bytes it would take).
fn closed_under(fd: c_int, s: &Slot) -> Option<ssize_t> {
    closed_ino(fd, s.ino.load(Ordering::Relaxed))
}

/// Whether `fd` still names the socket of slot `s` (`closed_under`'s no).
fn open_under(fd: c_int, s: &Slot) -> bool {
    closed_under(fd, s).is_none()
}

/// A blocking write the lane began and the daemon is to end (the lane went
/// down under it) once the call is past its start: it queued bytes
/// (`done`) or waited for room. Linux's sender is then inside its loop,
/// where sock_alloc_send_pskb reports a pending error before the shutdown
/// (a reader that closed with bytes unread: ECONNRESET, which the call
/// takes, then EPIPE), and raises no SIGPIPE once bytes went: the rest goes
/// as MSG ioctls that say so (`msg::send_resumed`), the first waiting at
/// most `timeo_left`, what its sleep in the ring left of SO_SNDTIMEO. The count,
/// or the error when nothing went. A record end's call: the daemon's
/// (None), as a record goes whole or not at all.
fn resumed(
    fd: c_int,
    s: &Slot,
    src: &[u8],
    done: usize,
    flags: c_int,
    timeo_left: Option<Duration>,
) -> Option<ssize_t> {
    if let Some(r) = closed_under(fd, s) {
        return Some(if done > 0 { done as ssize_t } else { r });
    }
    if s.record.load(Ordering::Relaxed) {
        // Nothing of a record went (it goes whole). One that waited under
        // SO_SNDTIMEO waits only what the ring's sleep left, as
        // unix_dgram_sendmsg's one timeo; one larger than an ioctl goes
        // through the `msg` file, which waits a whole timeout.
        return match timeo_left {
            _ if done > 0 => Some(done as ssize_t),
            Some(left) if src.len() <= MSG_ROOM => Some(len_ret(crate::msg::send_record_waited(
                fd, src, flags, left,
            ))),
            _ => None,
        };
    }
    let left = &src[done..];
    let iov = libc::iovec {
        iov_base: left.as_ptr() as *mut c_void,
        iov_len: left.len(),
    };
    let flags = if done > 0 {
        flags | libc::MSG_NOSIGNAL
    } else {
        flags
    };
    let sent = crate::msg::send_resumed(fd, Iovs::new(&iov, 1), flags, timeo_left);
    Some(match sent {
        Ok(n) => (done + n) as ssize_t,
        Err(_) if done > 0 => done as ssize_t,
        Err(e) => len_ret(Err(e)),
    })
}

/// Whether the region says `State::Direct` (tests and status only).
#[allow(dead_code)]
fn direct(e: &End) -> bool {
    e.region.state() == Some(State::Direct)
}

/// The program's iovec `i` of `iov`, None when it cannot be read (the
/// daemon's path gives EFAULT).
fn iovec_at(iov: *const libc::iovec, i: usize) -> Option<libc::iovec> {
    user::read(iov.wrapping_add(i)).ok()
}

/// Whether `fd` has a stream lane now (a record socket's writev is one
/// record: the daemon's).
fn stream_lane(fd: c_int) -> bool {
    find(fd).is_some_and(|s| !s.record.load(Ordering::Relaxed))
}

/// writev on `fd`'s stream lane: each iovec in turn, as one blocking call
/// (a short write, an error after bytes: their count). None: not the
/// lane's (nothing was written).
pub fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> Option<ssize_t> {
    writev_flags(fd, iov, cnt, 0)
}

fn writev_flags(fd: c_int, iov: *const libc::iovec, cnt: c_int, flags: c_int) -> Option<ssize_t> {
    if flags & !(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) != 0 {
        return None;
    }
    vectored(fd, iov, cnt, |i, one, total| {
        let r = match send(fd, one.iov_base, one.iov_len, flags) {
            Some(r) => r,
            None if total == 0 => return Step::Stop(None),
            // The lane went down under the call: the rest through the
            // daemon, in order (a sendmsg's flags: what was sent).
            None if flags != 0 => return Step::Stop(Some(total as ssize_t)),
            None => {
                // SAFETY: the program's iovecs from i on.
                let r = unsafe { crate::real::writev(fd, iov.wrapping_add(i), cnt - i as c_int) };
                return Step::Stop(Some((total + r.max(0) as usize) as ssize_t));
            }
        };
        if r < 0 {
            return Step::Stop(Some(if total > 0 { total as ssize_t } else { r }));
        }
        Step::Got(r)
    })
}

/// What one iovec of a vectored call on a lane gave.
enum Step {
    /// Its count (the next iovec follows unless it was short).
    Got(ssize_t),
    /// The call's result.
    Stop(Option<ssize_t>),
}

/// readv/writev on `fd`'s stream lane: every iovec readable first (as the
/// kernel copies them in), then `one` for each non-empty iovec in turn (its
/// index, it, the count so far) until one says Stop or comes short: the
/// count. None: not the lane's.
fn vectored(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    mut one: impl FnMut(usize, libc::iovec, usize) -> Step,
) -> Option<ssize_t> {
    if !(1..=1024).contains(&cnt) || !stream_lane(fd) {
        return None;
    }
    let v = |i| iovec_at(iov, i);
    (0..cnt as usize).try_for_each(|i| v(i).map(|_| ()))?;
    let mut total = 0usize;
    for i in 0..cnt as usize {
        let it = v(i)?;
        if it.iov_len == 0 {
            continue;
        }
        let r = match one(i, it, total) {
            Step::Got(r) => r,
            Step::Stop(r) => return r,
        };
        total += r as usize;
        if (r as usize) < it.iov_len {
            break;
        }
    }
    Some(total as ssize_t)
}

/// readv on `fd`'s stream lane: the first non-empty iovec as a read (it
/// waits as read does), the next ones with what is there without waiting.
/// None: not the lane's.
pub fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> Option<ssize_t> {
    readv_flags(fd, iov, cnt, 0, Rest::Here)
}

fn readv_flags(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    flags: c_int,
    rest: Rest,
) -> Option<ssize_t> {
    // A peek or a wait for all across buffers is the daemon's.
    if flags & !libc::MSG_DONTWAIT != 0 {
        return None;
    }
    vectored(fd, iov, cnt, |_, one, total| {
        // Only the first waits.
        let f = if total == 0 {
            flags
        } else {
            libc::MSG_DONTWAIT
        };
        let got = recv_with(fd, one.iov_base, one.iov_len, f, rest);
        // Handed to the caller: it finishes the call after the bytes of
        // this buffer and the ones before.
        if let Rest::Caller(to) = rest {
            if let Some(h) = to.get() {
                to.set(Some(Handed {
                    done: total + h.done,
                    ..h
                }));
                return Step::Stop(None);
            }
        }
        match got {
            None if total == 0 => Step::Stop(None),
            None => Step::Stop(Some(total as ssize_t)),
            Some(r) if r <= 0 => Step::Stop(Some(if total == 0 { r } else { total as ssize_t })),
            Some(r) => Step::Got(r),
        }
    })
}

/// sendmsg on `fd`'s stream lane: no address, no control message, flags
/// at most MSG_DONTWAIT and MSG_NOSIGNAL; its iovecs as writev's. None:
/// not the lane's.
pub fn sendmsg(fd: c_int, m: *const libc::msghdr, flags: c_int) -> Option<ssize_t> {
    if USED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let h: libc::msghdr = user::read(m).ok()?;
    if !h.msg_name.is_null() || h.msg_controllen != 0 {
        return None;
    }
    writev_flags(fd, h.msg_iov, h.msg_iovlen as c_int, flags)
}

/// recvmsg on `fd`'s stream lane, without a name wanted (a stream's
/// recvmsg reports the peer's address) and flags at most MSG_DONTWAIT: its
/// iovecs as readv's; no control message comes on a lane that is up (one
/// sent takes it down first), so msg_controllen and msg_flags say none.
/// None: not the lane's, or, when `handed` is set, the lane went down
/// under a call with room for control messages, which the caller finishes
/// through the daemon from there (the message that took the lane down
/// may carry descriptors: haproxy's `-x` lost its listeners).
pub fn recvmsg(
    fd: c_int,
    m: *mut libc::msghdr,
    flags: c_int,
    handed: &std::cell::Cell<Option<Handed>>,
) -> Option<ssize_t> {
    if USED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let h: libc::msghdr = user::read(m).ok()?;
    if !h.msg_name.is_null() {
        return None;
    }
    let rest = if h.msg_control.is_null() || h.msg_controllen == 0 {
        Rest::Here
    } else {
        Rest::Caller(handed)
    };
    let r = readv_flags(fd, h.msg_iov, h.msg_iovlen as c_int, flags, rest)?;
    if r >= 0 {
        let at = m.cast::<u8>();
        let ctl = at.wrapping_add(std::mem::offset_of!(libc::msghdr, msg_controllen));
        let fl = at.wrapping_add(std::mem::offset_of!(libc::msghdr, msg_flags));
        if user::write(ctl.cast::<usize>(), 0).is_err()
            || user::write(fl.cast::<c_int>(), 0).is_err()
        {
            return Some(len_ret(Err(libc::EFAULT)));
        }
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    /// A close's `closed` that runs after the number was taken again (by
    /// another thread's accept, which noted its connection) leaves the new
    /// socket's slot: a file that still has the slot's inode at the number
    /// is not the one closed.
    #[test]
    fn a_close_leaves_the_slot_of_the_file_that_took_its_number() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let fd = f.as_raw_fd();
        super::note_conn(fd);
        assert!(super::joining(fd), "note_conn gave fd {fd} no slot");
        super::closed(fd, fd);
        assert!(
            super::joining(fd),
            "closed() freed the slot of the file fd {fd} still names"
        );
        drop(f);
        super::closed(fd, fd);
        assert!(!super::joining(fd), "the slot of closed fd {fd} stayed");
    }

    #[test]
    fn fd_paths_are_the_proc_links() {
        for fd in [0, 7, 10, 4095, i32::MAX] {
            let p = super::fd_path(fd);
            let got = std::ffi::CStr::from_bytes_until_nul(&p).unwrap();
            assert_eq!(
                got.to_str().unwrap(),
                format!("/proc/self/fd/{fd}"),
                "fd {fd}"
            );
        }
    }
}

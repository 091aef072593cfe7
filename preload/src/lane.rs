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
//! used by one thread at a time: a second thread finds it taken and goes
//! through the daemon, which takes the lane down (correct, not fast).

use std::cell::UnsafeCell;
use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::time::Duration;

use libc::{c_int, c_void, size_t, ssize_t};
use udsfs_proto::ioctl::{LaneEvents, LaneGrant, Op, Timeo};
use udsfs_proto::lane::region::busy_word;
use udsfs_proto::lane::{ready, Framing, LaneErr, Notify, Reader, Region, Side, State, Writer};

use crate::errno::{len_ret, Res};
use crate::{fdpass, ioctl, log, mount, user};

const SLOTS: usize = 64;

const FREE: u32 = 0;
/// Noted at socketpair, not claimed yet.
const CANDIDATE: u32 = 1;
/// A thread is claiming it.
const CLAIMING: u32 = 2;
/// Mapped: `end` is set.
const LANE: u32 = 3;

struct End {
    region: &'static Region,
    side: usize,
    /// This end's eventfd (its wake-up, lane_ready.rs) and the peer's.
    ev: [c_int; 2],
    /// SO_RCVTIMEO, SO_SNDTIMEO as at the claim (setting one takes the
    /// lane down: the daemon does not count SetTimeo as the lane's own).
    timeo: [Option<Duration>; 2],
    w: UnsafeCell<Writer<'static>>,
    r: UnsafeCell<Reader<'static>>,
}

struct Slot {
    state: AtomicU32,
    fd: AtomicI32,
    ino: AtomicU64,
    /// This process's reader and writer of the end, one thread each.
    rtaken: AtomicBool,
    wtaken: AtomicBool,
    end: UnsafeCell<Option<End>>,
}

// SAFETY: `end` is written only by the thread that moved the slot from
// CLAIMING to LANE (before the Release store of LANE), and its reader and
// writer are used only under `rtaken`/`wtaken`.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    fd: AtomicI32::new(-1),
    ino: AtomicU64::new(0),
    rtaken: AtomicBool::new(false),
    wtaken: AtomicBool::new(false),
    end: UnsafeCell::new(None),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Slots not FREE: 0 makes every look-up one load.
static USED: AtomicUsize = AtomicUsize::new(0);
/// Regions this process mapped (each is kept for its life).
static REGIONS: AtomicUsize = AtomicUsize::new(0);
const MAX_REGIONS: usize = 256;
/// The mount said it has no lanes: nothing is noted any more.
static OFF: AtomicBool = AtomicBool::new(false);

/// The inode of `fd`'s file, from the kernel's cache (AT_STATX_DONT_SYNC:
/// an fstat of a FUSE file may be a GETATTR round trip to the daemon, which
/// would cost what the lane saves; an inode number never changes).
fn ino_of(fd: c_int) -> Option<u64> {
    // SAFETY: statx fills the zeroed struct it is given.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let flags = libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC;
    let r = unsafe { libc::statx(fd, c"".as_ptr(), flags, libc::STATX_INO, &mut st) };
    (r == 0).then_some(st.stx_ino)
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
    // Two free slots, and a mapping left to spend (they are kept: at most
    // MAX_REGIONS per process, then pairs go without lanes).
    let room = TABLE
        .iter()
        .filter(|s| s.state.load(Ordering::Relaxed) == FREE)
        .count();
    if room < 2 || REGIONS.fetch_add(1, Ordering::Relaxed) >= MAX_REGIONS {
        return;
    }
    let (region, evs) = match prepare(fds[0]) {
        Ok(r) => r,
        Err(e) => {
            if e == libc::ENOPROTOOPT {
                OFF.store(true, Ordering::Relaxed);
            }
            return;
        }
    };
    for (side, fd) in fds.into_iter().enumerate() {
        let Some(ino) = ino_of(fd) else { continue };
        // A slot left for an earlier socket at this number (socket numbers,
        // and so inode numbers, are reused) goes first.
        for old in &TABLE {
            if old.fd.load(Ordering::Relaxed) == fd {
                let st = old.state.load(Ordering::Acquire);
                if (st == CANDIDATE || st == LANE)
                    && old
                        .state
                        .compare_exchange(st, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    free(old);
                }
            }
        }
        // A free slot whose old end no thread still uses.
        let Some((s, held)) = TABLE.iter().find_map(|s| {
            if s.state
                .compare_exchange(FREE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return None;
            }
            match (take(&s.rtaken), take(&s.wtaken)) {
                (Some(r), Some(w)) => Some((s, (r, w))),
                _ => {
                    s.state.store(FREE, Ordering::Release);
                    None
                }
            }
        }) else {
            return;
        };
        USED.fetch_add(1, Ordering::Relaxed);
        let (mut w, mut r) = region.end(if side == 0 { Side::A } else { Side::B }, Framing::Stream);
        // Every sleep and wake-up of the lane goes through the eventfds,
        // which poll and epoll can watch too (stage c).
        let ev = [evs[side], evs[1 - side]];
        let notify = Notify::Eventfd {
            mine: ev[0],
            peer: ev[1],
        };
        w.set_notify(notify);
        r.set_notify(notify);
        let end = End {
            region,
            side,
            ev,
            timeo: [None, None],
            w: UnsafeCell::new(w),
            r: UnsafeCell::new(r),
        };
        // SAFETY: CLAIMING is ours.
        unsafe { *s.end.get() = Some(end) };
        s.fd.store(fd, Ordering::Relaxed);
        s.ino.store(ino, Ordering::Relaxed);
        drop(held);
        s.state.store(CANDIDATE, Ordering::Release);
    }
}

/// The pair's region, mapped, and its two eventfds, placed above the
/// program's descriptors (all kept for the process's life: a lane that
/// goes down keeps its mapping, docs/LANE.md).
fn prepare(fd: c_int) -> Res<(&'static Region, [c_int; 2])> {
    let g = ioctl::op(fd, Op::LaneClaim, 3)?.values::<LaneGrant>();
    let e = ioctl::op(fd, Op::LaneClaim, 4)?.values::<LaneEvents>();
    let m = mount::get().ok_or(libc::EINVAL)?;
    let fds = fdpass::claim(&fdpass::connect(m)?, &[g.tag, e.tag0, e.tag1], true)?;
    let &[rfd, e0, e1] = &fds[..] else {
        fds.iter().for_each(|&f| crate::files::close(f));
        return Err(libc::EIO);
    };
    let region = Region::map(rfd, [g.cap0 as u32, g.cap1 as u32]);
    crate::files::close(rfd);
    let high = [ready::move_high(e0), ready::move_high(e1)];
    let (region, evs) = match (region, high) {
        (Ok(r), [Ok(a), Ok(b)]) => (r, [a, b]),
        (r, high) => {
            high.iter().flatten().for_each(|&f| crate::files::close(f));
            return Err(r.err().unwrap_or(libc::EMFILE));
        }
    };
    Ok((Box::leak(Box::new(region)), evs))
}

/// What readiness on `fd`'s lane needs (lane_ready.rs): its region, side
/// and eventfd; None when `fd` has no lane here (claimed now if it was a
/// candidate) or the lane is not `Direct`.
pub fn ready_end(fd: c_int) -> Option<(&'static Region, usize, c_int)> {
    let s = find(fd)?;
    // SAFETY: LANE was seen with Acquire: `end` is set and stays.
    let e = unsafe { (*s.end.get()).as_ref()? };
    (e.region.state() == Some(State::Direct)).then_some((e.region, e.side, e.ev[0]))
}

/// Whether this process may have lanes at all (one load).
pub fn any() -> bool {
    USED.load(Ordering::Relaxed) != 0
}

fn free(s: &Slot) {
    s.fd.store(-1, Ordering::Relaxed);
    s.state.store(FREE, Ordering::Release);
    USED.fetch_sub(1, Ordering::Relaxed);
}

/// The slot of `fd` with a usable lane (claimed now if it was a candidate).
fn find(fd: c_int) -> Option<&'static Slot> {
    if USED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let s = TABLE.iter().find(|s| s.fd.load(Ordering::Relaxed) == fd)?;
    let st = s.state.load(Ordering::Acquire);
    if st != CANDIDATE && st != LANE {
        return None;
    }
    if ino_of(fd) != Some(s.ino.load(Ordering::Relaxed)) {
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
        return Some(s);
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
        (Some(e), Ok(side)) if side == e.side => {
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

/// Claims `fd`'s end for this process: its side.
fn claim(fd: c_int) -> Res<usize> {
    let g = ioctl::op(fd, Op::LaneClaim, 0)?.values::<LaneGrant>();
    Ok(g.side as usize)
}

/// After fork, in the child: the parent keeps its claimed ends; the
/// child's calls on them go through the daemon (which takes the lane down
/// when they come). Candidates stay candidates.
pub fn forked() {
    for s in &TABLE {
        if s.state.load(Ordering::Relaxed) == LANE {
            free(s);
        }
    }
}

fn busy(e: &End) -> &AtomicU32 {
    e.region.word(busy_word(e.side))
}

/// SO_RCVTIMEO (`dir` 0) or SO_SNDTIMEO (1) from the daemon (at the
/// claim); None: none.
/// A zero timeout that reads 0 (a negative one set) is no wait at all.
fn timeout(fd: c_int, dir: i32) -> Option<Duration> {
    let t = ioctl::op(fd, Op::GetTimeo, dir).ok()?.values::<Timeo>();
    if t.zero {
        return Some(Duration::ZERO);
    }
    let d = Duration::new(t.sec.max(0) as u64, (t.usec.max(0) as u32) * 1000);
    (!d.is_zero()).then_some(d)
}

fn nonblocking(fd: c_int, flags: c_int) -> bool {
    // SAFETY: F_GETFL reads the file's flags.
    flags & libc::MSG_DONTWAIT != 0
        || unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0
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

struct Taken<'a>(&'a AtomicBool);
impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A write's count, or `err` when nothing was written.
fn stop(done: usize, err: c_int) -> Option<ssize_t> {
    Some(if done > 0 {
        done as ssize_t
    } else {
        len_ret(Err(err))
    })
}

fn take(flag: &AtomicBool) -> Option<Taken<'_>> {
    (!flag.swap(true, Ordering::Acquire)).then_some(Taken(flag))
}

/// A plain read/recv of up to `n` bytes on `fd`'s lane; None: not the
/// lane's (the caller goes through the daemon).
pub fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> Option<ssize_t> {
    if flags & !libc::MSG_DONTWAIT != 0 {
        return None;
    }
    let s = find(fd)?;
    let _t = take(&s.rtaken)?;
    // SAFETY: LANE was seen with Acquire: `end` is set and stays.
    let e = unsafe { (*s.end.get()).as_ref()? };
    // SAFETY: `rtaken` is ours.
    let r = unsafe { &mut *e.r.get() };
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
    loop {
        busy(e).store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let got = r.read(dst, false);
        busy(e).store(0, Ordering::Release);
        match got {
            Ok(k) => return Some(k as ssize_t),
            Err(LaneErr::WouldBlock) if nonblocking(fd, flags) => {
                return Some(len_ret(Err(libc::EAGAIN)))
            }
            Err(LaneErr::WouldBlock) => {
                let t = e.timeo[0];
                match r.wait_readable(0, t) {
                    Ok(()) => {}
                    Err(LaneErr::TimedOut) => return Some(len_ret(Err(libc::EAGAIN))),
                    Err(LaneErr::Interrupted) => return Some(len_ret(Err(libc::EINTR))),
                    Err(LaneErr::NotDirect(_)) => return None,
                    Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
                    Err(_) => return None,
                }
            }
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            Err(_) => return None,
        }
    }
}

/// A plain write/send of `n` bytes on `fd`'s lane; None: not the lane's.
pub fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> Option<ssize_t> {
    if flags & !(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) != 0 || n == 0 {
        return None;
    }
    let s = find(fd)?;
    let _t = take(&s.wtaken)?;
    // SAFETY: as in recv.
    let e = unsafe { (*s.end.get()).as_ref()? };
    // SAFETY: `wtaken` is ours.
    let w = unsafe { &mut *e.w.get() };
    if user::readable(buf.cast(), n) < n {
        return Some(len_ret(Err(libc::EFAULT)));
    }
    // SAFETY: the program's buffer, probed readable for n bytes.
    let src = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) };
    // O_NONBLOCK matters only when the ring is full: looked at then (the
    // open file's flags may change under us, from another process too).
    let mut nonblock: Option<bool> = None;
    let mut done = 0;
    loop {
        busy(e).store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let put = w.write(&src[done..]);
        busy(e).store(0, Ordering::Release);
        match put {
            Ok(k) => {
                done += k;
                if done == n || *nonblock.get_or_insert_with(|| nonblocking(fd, flags)) {
                    return Some(done as ssize_t);
                }
            }
            Err(LaneErr::WouldBlock) if *nonblock.get_or_insert_with(|| nonblocking(fd, flags)) => {
                return stop(done, libc::EAGAIN)
            }
            Err(LaneErr::WouldBlock) => {}
            // The daemon takes what is left (its queue follows the ring).
            Err(LaneErr::NotDirect(_)) if done > 0 => return Some(rest(fd, src, done, flags)),
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            Err(_) if done > 0 => return Some(done as ssize_t),
            Err(_) => return None,
        }
        let t = e.timeo[1];
        match w.wait_writable(n - done, 0, t) {
            Ok(()) => {}
            Err(LaneErr::TimedOut) => return stop(done, libc::EAGAIN),
            Err(LaneErr::Interrupted) => return stop(done, libc::EINTR),
            Err(LaneErr::Corrupt(why)) => return Some(corrupt(fd, s, why)),
            Err(LaneErr::NotDirect(_)) if done > 0 => return Some(rest(fd, src, done, flags)),
            Err(_) if done > 0 => return Some(done as ssize_t),
            Err(_) => return None,
        }
    }
}

/// A blocking write the lane began and the daemon is to end (the lane went
/// down under it): the rest as a write of the data file, unless the caller
/// asked for flags a write cannot carry (then the short count).
fn rest(fd: c_int, src: &[u8], done: usize, flags: c_int) -> ssize_t {
    if flags != 0 {
        return done as ssize_t;
    }
    let left = &src[done..];
    // SAFETY: the program's buffer, probed readable.
    let r = unsafe { crate::real::write(fd, left.as_ptr().cast(), left.len()) };
    if r < 0 {
        done as ssize_t
    } else {
        (done + r as usize) as ssize_t
    }
}

/// Whether the region says `State::Direct` (tests and status only).
#[allow(dead_code)]
fn direct(e: &End) -> bool {
    e.region.state() == Some(State::Direct)
}

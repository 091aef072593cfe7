//! Readiness on a lane (issue 30 stage c, docs/LANE.md): poll, ppoll,
//! select, pselect, epoll_ctl and epoll_wait on a laned descriptor answer
//! from the ring, with no FUSE request.
//!
//! Each laned end has an eventfd, its wake-up (lane.rs: the peer writes it
//! when it publishes while the end's waiting flag is up; the daemon writes
//! it when the lane goes down). A poll puts the eventfd in place of the data
//! file in a copy of the program's array on the stack, raises the flags for
//! what the program waits for, looks at the rings, and sleeps in the C
//! library's ppoll only when nothing is ready; the socket's revents come
//! from the ring (`udsfs_proto::lane::ready`). select and pselect are that
//! poll. An epoll registration of a laned descriptor registers the end's
//! eventfd in the program's set instead (level-triggered, EPOLLIN, with a
//! tag for data), and this table keeps the program's events and data;
//! epoll_wait looks at the rings of the set's registrations first (level:
//! each ready one; EPOLLET: one whose ring moved since it was last
//! reported; EPOLLONESHOT: until reported, then disarmed until MOD), sleeps
//! in the kernel's epoll_wait when none is ready, and turns a tag that
//! comes back into a look. A registration whose lane went down (the
//! daemon's wake-up tells a sleeper) is moved back to the data file with
//! the program's events and data, so it goes on through the daemon.
//!
//! A case the ring cannot answer goes through the daemon as before, which
//! takes the lane down: an array of more than MAX_POLL entries, an fd_set
//! with more than MAX_POLL descriptors, a second registration of the same
//! end in one set (a duplicate descriptor), a laned end of another process.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use libc::{c_int, epoll_event, nfds_t, pollfd, sigset_t};
use udsfs_proto::lane::{futex, ready, Region};

use crate::errno::{errno, set_errno};
use crate::lane::left;
use crate::lane_spin::{self, Found, Spin};
use crate::{lane, lane_hold, real, user, wait_record};

/// The most entries a poll array (or fd_set) may have to be answered here.
pub const MAX_POLL: usize = 64;

/// An unused entry of a poll array made here.
const NO_POLL: pollfd = pollfd {
    fd: -1,
    events: 0,
    revents: 0,
};

/// A laned end as a call or a registration uses it: `hold` keeps its
/// region mapped and its eventfds open (lane_hold.rs) as long as this
/// lives, so no number here is closed and reused under it.
#[derive(Clone)]
struct Laned {
    _hold: lane_hold::Hold,
    region: &'static Region,
    side: usize,
    ev: c_int,
    /// The end's daemon-only eventfd (-1: none), in every sleep beside
    /// `ev`: written at the way down only, never drained (lane.rs).
    hup: c_int,
}

fn laned(fd: c_int) -> Option<Laned> {
    if fd < 0 {
        return None;
    }
    lane::ready_end(fd).map(|e| Laned {
        _hold: e.hold,
        region: e.region,
        side: e.side,
        ev: e.ev,
        hup: e.hup,
    })
}

const WANT_IN: i16 = libc::POLLIN | libc::POLLRDNORM | libc::POLLRDHUP;
const WANT_OUT: i16 = libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND;
const ALWAYS: u32 = (libc::POLLERR | libc::POLLHUP) as u32;

/// The looks a poll and an epoll_wait make at their rings before they
/// sleep (lane_spin.rs), learnt per process.
static POLL_SPIN: Spin = Spin::new(lane_spin::POLL_LOOKS);
static EPOLL_SPIN: Spin = Spin::new(lane_spin::POLL_LOOKS);

/// Threads of this process about to sleep on each lane eventfd (by its
/// number: kept for the process's life). Only the first drains it (a drain
/// by a later one could take the wake-up of one already asleep, which the
/// kernel's poll would then put back to sleep: hackbench -T's 40 threads
/// polling one end), and only the last lowers the end's waiting flags.
const WSLOTS: usize = 256;
static WFD: [AtomicI32; WSLOTS] = [const { AtomicI32::new(-1) }; WSLOTS];
static WCOUNT: [AtomicU32; WSLOTS] = [const { AtomicU32::new(0) }; WSLOTS];

fn wslot(ev: c_int) -> Option<usize> {
    if let Some(i) = WFD.iter().position(|f| f.load(Ordering::Acquire) == ev) {
        return Some(i);
    }
    WFD.iter().position(
        |f| match f.compare_exchange(-1, ev, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(now) => now == ev,
        },
    )
}

/// Each lane eventfd (by `wslot`) may be non-zero: epoll_wait drains one
/// before a sleep only then, not each of the set's at every sleep (a read
/// per registration per sleep: redis's 50). Set when its tag came back from
/// the kernel (`wait`, `drop_kernel`), so cleared only by a drain.
static WDIRTY: [AtomicBool; WSLOTS] = [const { AtomicBool::new(true) }; WSLOTS];

fn dirty(ev: c_int) {
    if let Some(i) = wslot(ev) {
        WDIRTY[i].store(true, Ordering::SeqCst);
    }
}

/// This thread is to sleep on `ev`: whether it is the process's first.
fn enter(ev: c_int) -> bool {
    wslot(ev).is_none_or(|i| WCOUNT[i].fetch_add(1, Ordering::SeqCst) == 0)
}

/// `enter` for epoll_wait: whether `ev` is to be drained (the first
/// sleeper, and the eventfd may be non-zero: `WDIRTY`).
///
/// No wake-up is lost by leaving a clean eventfd undrained: the peer
/// writes it only for a publish it made while our waiting flag was up,
/// and every write makes it readable, so the kernel's level-triggered
/// registration reports its tag to the next epoll_wait on the set, which
/// marks it dirty (`wait`); the drain that follows is made before the
/// ring is looked at again (`raise`, then `ready::look`), so a publish
/// before the drain is seen by that look and one after it writes the
/// eventfd again. A write that came while no flag was up (the daemon's
/// at a way down, a MOD's, `move_one`'s) is reported the same way. What
/// an undrained eventfd costs is one return of the kernel's epoll_wait
/// that finds nothing, after which it is drained.
fn enter_drain(ev: c_int) -> bool {
    match wslot(ev) {
        None => true,
        Some(i) => {
            WCOUNT[i].fetch_add(1, Ordering::SeqCst) == 0 && WDIRTY[i].swap(false, Ordering::SeqCst)
        }
    }
}

/// This thread woke from `ev` (the waiting flags count sleepers: each
/// lowers its own, `lower`).
fn leave(ev: c_int) {
    if let Some(i) = wslot(ev) {
        WCOUNT[i].fetch_sub(1, Ordering::SeqCst);
    }
}

/// Raises `l`'s waiting flags for `events` after `enter` (`first`: the
/// eventfd is drained first, before the caller's look).
fn raise(l: &Laned, events: u32, first: bool) {
    let ev = events as i16;
    if first {
        futex::eventfd_drain(l.ev);
    }
    ready::set_waiting(
        l.region,
        l.side,
        ev & WANT_IN != 0,
        ev & WANT_OUT != 0,
        true,
    );
}

fn lower(l: &Laned, events: u32) {
    lower_at(l.region, l.side, events);
}

fn lower_at(region: &Region, side: usize, events: u32) {
    let ev = events as i16;
    ready::set_waiting(region, side, ev & WANT_IN != 0, ev & WANT_OUT != 0, false);
}

/// What a wait records of an end it raised (wait_record.rs), with the key
/// of its hold of it when `held` (else recorded by `held`).
fn wait_end(l: &Laned, events: u32, held: bool) -> wait_record::WaitEnd {
    wait_record::WaitEnd {
        hold: if held { l._hold.key() } else { 0 },
        ev: l.ev,
        region: l.region as *const Region as usize,
        side: l.side as u8,
        events: events as u16,
    }
}

/// Undoes a poll or epoll_wait that a handler jumped out of
/// (wait_record.rs): uncounted from the epoll sleepers, each raised end's
/// count on its eventfd and waiting flags lowered, as its own end would
/// have (else every later wait on the end is never its eventfd's first
/// sleeper, never drains it, and spins), then its holds let go.
fn undo_wait(u: wait_record::Undo, _: usize) {
    let wait_record::Undo::Wait(w) = u else {
        return;
    };
    if w.counted {
        SLEEPERS.fetch_sub(1, Ordering::SeqCst);
    }
    for e in &w.ends[..w.n.min(wait_record::WAIT_ENDS)] {
        leave(e.ev);
        // SAFETY: kept mapped by the wait's hold of the end, which the
        // jump leaked.
        lower_at(
            unsafe { &*(e.region as *const Region) },
            e.side as usize,
            u32::from(e.events),
        );
    }
    let ends = w.ends[..w.n.min(wait_record::WAIT_ENDS)]
        .iter()
        .map(|e| e.hold);
    for key in ends.chain(w.holds).filter(|&k| k != 0) {
        lane_hold::release(key);
    }
}

/// A wait with nothing of its own recorded yet.
const WAIT: wait_record::Undo = wait_record::Undo::Wait(wait_record::Wait::NONE);

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// poll/ppoll of `n` entries at `fds` with laned descriptors among them:
/// Some(the call's result, errno set) or None (no laned descriptor, or too
/// many entries: the caller makes the C library's call).
pub fn poll(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: Option<Duration>,
    sigmask: *const sigset_t,
) -> Option<c_int> {
    wait_record::reap();
    if HELD.load(Ordering::Relaxed) != 0 && n > 0 {
        let bytes = (n as usize).saturating_mul(std::mem::size_of::<pollfd>());
        if user::readable(fds.cast(), bytes) == bytes {
            for i in 0..n as usize {
                // SAFETY: probed readable for n entries.
                nested(unsafe { (*fds.add(i)).fd }, false);
            }
        }
    }
    if !lane::any() || n == 0 {
        return None;
    }
    if n as usize > MAX_POLL {
        let bytes = (n as usize).saturating_mul(std::mem::size_of::<pollfd>());
        if user::readable(fds.cast(), bytes) == bytes {
            // SAFETY: probed readable for n entries.
            left_polled((0..n as usize).map(|i| unsafe { (*fds.add(i)).fd }));
        }
        return None;
    }
    let n = n as usize;
    let bytes = n * std::mem::size_of::<pollfd>();
    if user::writable(fds.cast(), bytes) < bytes {
        return None;
    }
    // SAFETY: the program's array, probed writable for n entries.
    let prog = unsafe { std::slice::from_raw_parts_mut(fds, n) };
    // A few entries (most polls) on a small frame: a thread of a 16 KiB
    // stack polls too (hackbench -T's, with the debug build's frames).
    if n <= SMALL_POLL {
        poll_of::<SMALL_POLL, { 2 * SMALL_POLL }>(prog, (timeout, sigmask))
    } else {
        poll_of::<MAX_POLL, { 2 * MAX_POLL }>(prog, (timeout, sigmask))
    }
}

/// The laned ones of descriptors `fds`, which the C library's poll or
/// select is to poll through their data files (too many for the lane's
/// way): their lanes go down first (`lane::left_polled`).
fn left_polled(fds: impl Iterator<Item = c_int>) {
    for fd in fds {
        if laned(fd).is_some() {
            lane::left_polled(fd);
        }
    }
}

/// Poll arrays of at most this many entries take the small frame.
const SMALL_POLL: usize = 8;

/// `poll` of `prog` (at most N entries; K = 2 N): None without a laned end.
fn poll_of<const N: usize, const K: usize>(
    prog: &mut [pollfd],
    (timeout, sigmask): (Option<Duration>, *const sigset_t),
) -> Option<c_int> {
    let n = prog.len();
    let mut ends: [Option<Laned>; N] = [const { None }; N];
    let mut any = false;
    for (e, p) in ends.iter_mut().zip(prog.iter()) {
        *e = laned(p.fd);
        any |= e.is_some();
    }
    if !any {
        return None;
    }
    let rec = wait_record::begin(WAIT, undo_wait);
    Some(poll_laned::<K>(
        prog,
        &mut ends[..n],
        (timeout, sigmask),
        &rec,
    ))
}

/// The poll of `prog` with its laned `ends` (K: room for twice as many
/// entries: each end's daemon-only eventfd beside it).
fn poll_laned<const K: usize>(
    prog: &mut [pollfd],
    ends: &mut [Option<Laned>],
    (timeout, sigmask): (Option<Duration>, *const sigset_t),
    rec: &wait_record::Rec,
) -> c_int {
    for l in ends.iter().flatten() {
        rec.held(l._hold.key(), true);
    }
    let n = prog.len();
    let deadline = timeout.map(|t| Instant::now() + t);
    // The program's entries (a laned one's the end's eventfd), then each
    // laned end's daemon-only eventfd: the way down wakes the sleep even
    // when the peer took the first one's wake-up.
    let mut k = [NO_POLL; K];
    // Set when a lane went down under the last round: its socket is polled
    // again through the daemon, at once if something else was ready.
    let mut had = 0;
    let ready = |i: usize, l: &Laned, prog: &[pollfd]| match ready::look(l.region, l.side) {
        Some(lk) => lk.mask & (prog[i].events as u16 as u32 | ALWAYS) != 0,
        None => true,
    };
    loop {
        k[..n].copy_from_slice(prog);
        let mut ready_now = had;
        let mut nk = n;
        for (i, e) in ends.iter().enumerate() {
            let Some(l) = e else { continue };
            k[i].fd = l.ev;
            k[i].events = libc::POLLIN;
            if l.hup >= 0 {
                k[nk] = pollfd {
                    fd: l.hup,
                    events: libc::POLLIN,
                    revents: 0,
                };
                nk += 1;
            }
            ready_now += usize::from(ready(i, l, prog));
        }
        // Nothing ready: a few looks at the rings first (the peer may be
        // writing on the other CPU: lane_spin.rs; a kernel entry's event
        // waits for them at most), then the flags up (and the eventfds
        // drained) before a second look, and a sleep; a ready ring needs
        // none of it.
        if ready_now == 0 && left(deadline) != Some(Duration::ZERO) {
            let rings = ends.iter().flatten().count() as u32;
            let any = || {
                let each = ends.iter().enumerate();
                let mut peers_wait = true;
                let found = each
                    .filter_map(|(i, e)| Some((i, e.as_ref()?)))
                    .any(|(i, l)| {
                        peers_wait &= ready::peer_waits(l.region, l.side);
                        ready(i, l, prog)
                    });
                lane_spin::Seen {
                    ready: found,
                    rings,
                    peers_wait,
                }
            };
            match lane_spin::look_for(&POLL_SPIN, any) {
                Found::Ready => ready_now = 1,
                Found::Handled => {
                    set_errno(libc::EINTR);
                    return -1;
                }
                Found::Nothing => {}
            }
        }
        let sleeping = ready_now == 0;
        if sleeping {
            for (i, e) in ends.iter().enumerate() {
                let Some(l) = e else { continue };
                raise(l, prog[i].events as u32, enter(l.ev));
                rec.raised_end(wait_end(l, prog[i].events as u32, false));
                ready_now += usize::from(ready(i, l, prog));
            }
        }
        let wait = if ready_now > 0 {
            Some(Duration::ZERO)
        } else {
            left(deadline)
        };
        let r = if ready_now > 0 && ends.iter().all(Option::is_some) {
            // Every entry is the ring's: no call.
            k[..n].iter_mut().for_each(|e| e.revents = 0);
            0
        } else {
            let ts = wait.map(timespec);
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: k holds nk live entries; ts and sigmask are the caller's or null.
            unsafe { real::ppoll(k.as_mut_ptr(), nk as nfds_t, tsp, sigmask) }
        };
        let err = errno();
        if sleeping {
            rec.lowering();
            for (i, e) in ends.iter().enumerate() {
                if let Some(l) = e {
                    // Every raise is lowered (the flags count sleepers).
                    leave(l.ev);
                    lower(l, prog[i].events as u32);
                }
            }
        }
        if r < 0 {
            set_errno(err);
            return -1;
        }
        let mut count = 0;
        let mut again = false;
        for (i, e) in ends.iter_mut().enumerate() {
            prog[i].revents = match e {
                // A data file's readiness may be the daemon's "ready" to
                // this library's own poll of an end whose lane came up
                // meanwhile (src/engine/lane.rs's polled rule; a lane that
                // went down under this poll, made again): claimed here and
                // looked at through the ring, as `poll_came_up` does after
                // the C library's poll. Told to the program, Postfix's
                // local read FIONREAD 0 after its "readable" poll and took
                // it for the end of the connection.
                None if k[i].revents != 0 => match laned(prog[i].fd) {
                    Some(l) => {
                        rec.held(l._hold.key(), true);
                        *e = Some(l);
                        again = true;
                        0
                    }
                    None => k[i].revents,
                },
                None => k[i].revents,
                Some(l) => match ready::look(l.region, l.side) {
                    Some(lk) => (lk.mask & (prog[i].events as u16 as u32 | ALWAYS)) as i16,
                    None => {
                        // Down: its data file, through the daemon, next
                        // round (by its number, as Linux's poll looks each
                        // number up again at each round: a number the
                        // program closed meanwhile is polled as what it
                        // names now).
                        if let Some(l) = e.take() {
                            rec.held(l._hold.key(), false);
                        }
                        again = true;
                        0
                    }
                },
            };
            if prog[i].revents != 0 {
                count += 1;
            }
        }
        if again {
            had = count;
            continue;
        }
        if count > 0 || left(deadline) == Some(Duration::ZERO) {
            return count as c_int;
        }
    }
}

/// Whether a readiness the kernel reported for `fd` (of `events`, poll
/// bits) is not the program's: its lane came up (claimed now), or the end
/// still asks for one and `nothing_now`.
fn not_the_programs(fd: c_int, events: i16) -> bool {
    laned(fd).is_some() || (lane::joining(fd) && nothing_now(fd, events))
}

/// Whether the data file of `fd`, an end with no lane here, polled again
/// now is ready for none of `events` (with no lane up the daemon answers
/// its real readiness), or its lane came up meanwhile: a "ready" reported
/// for it was the daemon's for a lane that went down again before this
/// thread could claim it (the peer asked for a lane and took it down at
/// once: adversarial_lanes8.sh threads_up), no event of the program's.
fn nothing_now(fd: c_int, events: i16) -> bool {
    let mut p = pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack; no wait.
    let r = unsafe { real::poll(&mut p, 1, 0) };
    r == 0 || laned(fd).is_some()
}

/// After the C library's poll of the `n` entries at `fds` returned `r`:
/// whether an entry it reported is a connect/accept end whose lane came up
/// while it slept (its library's own poll of an end not yet claimed is
/// told "ready" by the daemon, src/engine/lane.rs's polled rule), claimed
/// here: the caller polls again, through the lane, for the time left.
pub fn poll_came_up(fds: *const pollfd, n: nfds_t, r: c_int) -> bool {
    if r <= 0 || !lane::any() || n == 0 || n as usize > MAX_POLL {
        return false;
    }
    let bytes = n as usize * std::mem::size_of::<pollfd>();
    if user::readable(fds.cast(), bytes) < bytes {
        return false;
    }
    // SAFETY: the program's array, probed readable for n entries.
    let prog = unsafe { std::slice::from_raw_parts(fds, n as usize) };
    let mut up = false;
    for p in prog {
        if p.revents != 0 && not_the_programs(p.fd, p.events) {
            up = true;
        }
    }
    up
}

/// `poll_came_up` for the C library's select: a descriptor below `nfds`
/// left in one of the sets.
pub fn select_came_up(nfds: c_int, sets: [*mut libc::fd_set; 3]) -> bool {
    if !lane::any() || nfds <= 0 || nfds as usize > libc::FD_SETSIZE {
        return false;
    }
    let mut up = false;
    for fd in 0..nfds {
        // What the C library reported fd for, as poll bits.
        let mut events = 0;
        for (&s, ev) in sets
            .iter()
            .zip([libc::POLLIN, libc::POLLOUT, libc::POLLPRI])
        {
            // SAFETY: fd_sets the C library just wrote, fd below FD_SETSIZE.
            if !s.is_null() && unsafe { libc::FD_ISSET(fd, s) } {
                events |= ev;
            }
        }
        if events != 0 && not_the_programs(fd, events) {
            up = true;
        }
    }
    up
}

/// select/pselect with laned descriptors in the sets: Some(result) or None
/// (the caller makes the C library's call). `tv`: select's timeval, which
/// Linux updates with the time left.
pub fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    x: *mut libc::fd_set,
    timeout: Option<Duration>,
    sigmask: *const sigset_t,
    tv: *mut libc::timeval,
) -> Option<c_int> {
    wait_record::reap();
    if !lane::any() || nfds <= 0 || nfds as usize > libc::FD_SETSIZE {
        return None;
    }
    let sets = [r, w, x];
    let size = std::mem::size_of::<libc::fd_set>();
    for s in sets {
        if !s.is_null() && user::writable(s.cast(), size) < size {
            return None;
        }
    }
    let isset = |s: *mut libc::fd_set, fd: c_int| {
        // SAFETY: a probed fd_set, fd below FD_SETSIZE.
        !s.is_null() && unsafe { libc::FD_ISSET(fd, s) }
    };
    let mut p = [NO_POLL; MAX_POLL];
    let mut n = 0;
    for fd in 0..nfds {
        let mut ev = 0;
        if isset(r, fd) {
            ev |= libc::POLLIN;
        }
        if isset(w, fd) {
            ev |= libc::POLLOUT;
        }
        if isset(x, fd) {
            ev |= libc::POLLPRI;
        }
        if ev != 0 {
            nested(fd, false);
            if n == MAX_POLL {
                left_polled((0..nfds).filter(|&fd| sets.iter().any(|&s| isset(s, fd))));
                return None;
            }
            p[n] = pollfd {
                fd,
                events: ev,
                revents: 0,
            };
            n += 1;
        }
    }
    let mut ends: [Option<Laned>; MAX_POLL] = [const { None }; MAX_POLL];
    let mut any = false;
    for i in 0..n {
        ends[i] = laned(p[i].fd);
        any |= ends[i].is_some();
    }
    if !any {
        return None;
    }
    let start = Instant::now();
    let rec = wait_record::begin(WAIT, undo_wait);
    let got = poll_laned::<{ 2 * MAX_POLL }>(&mut p[..n], &mut ends[..n], (timeout, sigmask), &rec);
    drop(rec);
    if got < 0 {
        return Some(-1);
    }
    if p[..n].iter().any(|e| e.revents & libc::POLLNVAL != 0) {
        set_errno(libc::EBADF);
        return Some(-1);
    }
    let mut count = 0;
    for s in sets.into_iter().filter(|s| !s.is_null()) {
        // SAFETY: a probed fd_set.
        unsafe { libc::FD_ZERO(s) };
    }
    let in_set = libc::POLLIN | libc::POLLRDNORM | libc::POLLRDBAND | libc::POLLHUP | libc::POLLERR;
    let out_set = libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND | libc::POLLERR;
    for e in &p[..n] {
        for (s, want, bits) in [
            (r, libc::POLLIN, in_set),
            (w, libc::POLLOUT, out_set),
            (x, libc::POLLPRI, libc::POLLPRI),
        ] {
            if e.events & want != 0 && e.revents & bits != 0 {
                // SAFETY: a probed fd_set, fd below nfds.
                unsafe { libc::FD_SET(e.fd, s) };
                count += 1;
            }
        }
    }
    if !tv.is_null() {
        if let Some(t) = timeout {
            let rest = t.saturating_sub(start.elapsed());
            let _ = user::write(
                tv,
                libc::timeval {
                    tv_sec: rest.as_secs() as libc::time_t,
                    tv_usec: rest.subsec_micros() as libc::suseconds_t,
                },
            );
        }
    }
    Some(count)
}

/// A tag's high half: the epoll data of a lane's eventfd registration.
/// Never handed to the program: a tag event of its set is left out, mapped
/// or not (0x75647366_xxxxxxxx is no user pointer on x86_64 or aarch64).
const TAG: u64 = 0x7564_7366 << 32;

fn is_tag(data: u64) -> bool {
    data & 0xffff_ffff_0000_0000 == TAG
}

/// Whether descriptors `a` and `b` name the same open file (one epoll set
/// reached through a dup: mio registers through a dup of the descriptor it
/// waits on). Registrations are matched by the set, not its number. The
/// epoll files' fstat (dev, ino) cannot tell sets apart (every one is the
/// kernel's one anon inode), so kcmp(KCMP_FILE): one call, made only when
/// the numbers differ; where kcmp is refused, the number alone.
fn same_set(a: c_int, b: c_int) -> bool {
    if a == b {
        return true;
    }
    if a < 0 || b < 0 {
        return false;
    }
    const KCMP_FILE: c_int = 0;
    // SAFETY: kcmp reads nothing of ours.
    let pid = unsafe { libc::getpid() };
    let r = unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b) };
    r == 0
}

/// `same_set` against one set for the length of a call, remembering the
/// numbers it was asked about (a set's registrations share a few).
struct SetOf {
    epfd: c_int,
    memo: [(c_int, bool); 8],
    n: usize,
}

impl SetOf {
    fn new(epfd: c_int) -> SetOf {
        SetOf {
            epfd,
            memo: [(-1, false); 8],
            n: 0,
        }
    }

    fn has(&mut self, other: c_int) -> bool {
        if other == self.epfd {
            return true;
        }
        if let Some(&(_, same)) = self.memo[..self.n].iter().find(|m| m.0 == other) {
            return same;
        }
        let same = same_set(self.epfd, other);
        if self.n < self.memo.len() {
            self.memo[self.n] = (other, same);
            self.n += 1;
        }
        same
    }
}

/// One epoll registration of a laned descriptor. Its `end` holds the
/// lane's eventfds: it is taken out of the kernel's set (`del_end`) before
/// it is dropped, while the numbers are still its own.
struct Reg {
    id: u32,
    epfd: c_int,
    /// The number the program registered (Linux's item is the file and
    /// this number: its EPOLL_CTL_MOD/DEL reach the item by this number
    /// while it names the file).
    fd: c_int,
    /// A number of this process that names the socket now: `fd`, or once
    /// `fd` was closed with the file open at another number (a dup), that
    /// one (`relocate`); -1: none here, the file held elsewhere (a forked
    /// child's copy), kept until the lane goes down (the daemon takes it
    /// down at the file's last close).
    at: c_int,
    /// An inotify watch on the socket's data file for a close of `at` in
    /// progress (`closing`; -1: none): an IN_CLOSE event means the file's
    /// last reference went with it (the VFS's __fput, before close
    /// returns).
    watch: c_int,
    /// The socket's inode (the descriptor may be closed and reused).
    ino: u64,
    /// The descriptor generation at which `at` was last seen to name
    /// `ino` (fdgen.rs; 0: never): a statx only when it moved.
    checked: u64,
    events: u32,
    data: u64,
    end: Laned,
    /// EPOLLONESHOT: false once reported, until MOD.
    armed: bool,
    /// EPOLLET: the positions when last reported (None: never since ADD/MOD).
    last: Option<(u32, u32)>,
    /// False once the program deleted it: its eventfd stays in the kernel's
    /// set (no epoll_ctl for a DEL and the next ADD), nothing is reported.
    live: bool,
    /// Made before this process forked (it is the child): the kernel's
    /// set is shared with the parent, whose registration it is, so the
    /// child's close of the socket leaves it in the set (`closed`).
    inherited: bool,
    /// Moved from its data file when the lane came up (`move_fresh`): a
    /// kernel event with its data in its set, of a kernel wait that began
    /// before the move (`id` not below the `REGS.next` of that moment), is
    /// the data file's (`drop_kernel` leaves it out).
    moved: bool,
    /// A one-shot `move_one` read disarmed from the kernel's item, with the
    /// program's events from its `Pend`. A data file event of it left out
    /// later (`drop_kernel`) was collected by a thread's kernel wait between
    /// `drop_kernel`'s arming again and that read: it disarmed the item and
    /// the program never got it, so the registration is armed again (three
    /// threads in one one-shot set hung at the lane's coming up, the moved
    /// registration disarmed for good: adversarial_lanes8.py threads_up).
    moved_disarmed: bool,
}

impl Reg {
    /// A new live registration of number `fd` (laned end `end`, socket
    /// `ino`) in set `epfd`, as the program asked (`events`, `data`).
    fn new(id: u32, epfd: c_int, fd: c_int, ino: u64, events: u32, data: u64, end: Laned) -> Reg {
        Reg {
            id,
            epfd,
            fd,
            at: fd,
            watch: -1,
            ino,
            checked: 0,
            events,
            data,
            end,
            armed: true,
            last: None,
            live: true,
            inherited: false,
            moved: false,
            moved_disarmed: false,
        }
    }
}

impl Drop for Reg {
    fn drop(&mut self) {
        unwatch(&mut self.watch);
        mark_gone(self.id);
    }
}

fn mark_gone(id: u32) {
    let at = GONE_AT.fetch_add(1, Ordering::Relaxed) as usize % GONE.len();
    GONE[at].store(id, Ordering::Relaxed);
}

/// Registration `i` taken off the list, known as gone at once: its
/// eventfd leaves the set after the lock (`del_end`), and a tag another
/// thread's kernel wait collects meanwhile is this process's (said as a
/// foreign set's before: adversarial_lanes8.sh threads).
fn take(list: &mut Vec<Reg>, i: usize) -> Reg {
    let r = list.swap_remove(i);
    mark_gone(r.id);
    r
}

/// The ids of the registrations dropped last: a tag of one may still come
/// out of a C library's epoll_wait that collected it before its eventfd
/// left the set (a connection closed by another thread meanwhile). Such a
/// tag is this process's, stale, not a foreign set's (`after_wait`).
static GONE: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
static GONE_AT: AtomicU32 = AtomicU32::new(0);

fn gone(id: u32) -> bool {
    GONE.iter().any(|g| g.load(Ordering::Relaxed) == id)
}

/// Closes a `Reg::watch` (the library's own descriptor: not the C
/// library's close, whose wrapper is the program's).
fn unwatch(w: &mut c_int) {
    if *w >= 0 {
        // SAFETY: our inotify descriptor.
        unsafe { crate::real::own_close(*w) };
        *w = -1;
    }
}

/// An epoll registration of a connect/accept end still asking for its
/// lane (`lane::joining`): the data file's, with the program's data, by
/// which an event the kernel reports for it is known (`drop_kernel`).
#[derive(Clone, Copy)]
struct Pend {
    epfd: c_int,
    fd: c_int,
    /// The socket's inode: `closed` keeps the registration of a new socket
    /// that took the number before it ran.
    ino: Option<u64>,
    /// The program's events: a one-shot's data-file event left out is
    /// armed again (`drop_kernel`).
    events: u32,
    data: u64,
}

struct Regs {
    lock: AtomicBool,
    next: AtomicU32,
    list: UnsafeCell<Vec<Reg>>,
    pend: UnsafeCell<Vec<Pend>>,
}

// SAFETY: `list` is used only under `lock`.
unsafe impl Sync for Regs {}

static REGS: Regs = Regs {
    lock: AtomicBool::new(false),
    next: AtomicU32::new(1),
    list: UnsafeCell::new(Vec::new()),
    pend: UnsafeCell::new(Vec::new()),
};
/// Registrations held: 0 makes every epoll call here one load.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// The most `Pend`s kept (past it an end's first event after its lane came
/// up reaches the program, whose read or write claims the end).
const MAX_PENDS: usize = 4096;
/// `Pend`s held: 0 makes the look at a kernel epoll_wait's events one load.
static PENDS: AtomicUsize = AtomicUsize::new(0);

struct Held;
impl Drop for Held {
    fn drop(&mut self) {
        REGS.lock.store(false, Ordering::Release);
    }
}

fn locked() -> (Held, &'static mut Vec<Reg>) {
    let (h, list, _) = locked_all();
    (h, list)
}

fn locked_all() -> (Held, &'static mut Vec<Reg>, &'static mut Vec<Pend>) {
    while REGS
        .lock
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    // SAFETY: the lock is ours until Held drops.
    (Held, unsafe { &mut *REGS.list.get() }, unsafe {
        &mut *REGS.pend.get()
    })
}

/// `locked_all`, or None after `spins` failed tries.
fn try_locked_all(spins: u32) -> Option<(Held, &'static mut Vec<Reg>, &'static mut Vec<Pend>)> {
    for _ in 0..spins {
        if REGS
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the lock is ours until Held drops.
            return Some((Held, unsafe { &mut *REGS.list.get() }, unsafe {
                &mut *REGS.pend.get()
            }));
        }
        std::hint::spin_loop();
    }
    None
}

fn set_pends(pend: &[Pend]) {
    PENDS.store(pend.len(), Ordering::Relaxed);
}

/// `p` noted in place of any earlier note of its descriptor in its set.
fn note(pend: &mut Vec<Pend>, p: Pend) {
    forget(pend, p.fd, p.epfd);
    if pend.len() < MAX_PENDS {
        pend.push(p);
        set_pends(pend);
    }
}

/// The note of `fd` in set `epfd` gone; whether there was one.
fn forget(pend: &mut Vec<Pend>, fd: c_int, epfd: c_int) -> bool {
    let had = pend.len();
    pend.retain(|p| !(p.fd == fd && same_set(p.epfd, epfd)));
    set_pends(pend);
    pend.len() < had
}

fn set_count(list: &[Reg]) {
    HELD.store(list.len(), Ordering::Relaxed);
}

/// After fork, in the child: a lock another thread held is free (the
/// registrations stay: the epoll sets are shared with the parent).
pub fn forked() {
    REGS.lock.store(false, Ordering::Release);
    // SAFETY: one thread in the child, the lock freed above.
    unsafe { &mut *REGS.list.get() }.iter_mut().for_each(|r| {
        r.inherited = true;
        // A watch of a close the parent was making: its copy is the parent's.
        unwatch(&mut r.watch);
    });
    WCOUNT.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    WDIRTY.iter().for_each(|d| d.store(true, Ordering::Relaxed));
}

/// The program is about to close descriptor numbers `first..=last`
/// (closes.rs, before the call): each registration whose socket is open
/// at one of them gets an inotify watch on its data file, by which
/// `closed` learns whether that close was the file's last (Linux drops an
/// epoll item only with its file: a dup, or a forked child's copy, keeps
/// it).
pub fn closing(first: c_int, last: c_int) {
    if HELD.load(Ordering::Relaxed) == 0 {
        return;
    }
    let e = errno();
    // The lock may be this very thread's (`closed`): no watch then, and
    // `closed` looks for another number instead.
    if let Some((_h, list, _)) = try_locked_all(1 << 16) {
        for r in list.iter_mut() {
            if r.at < first || r.at > last || r.inherited || !still_at(r) {
                continue;
            }
            unwatch(&mut r.watch);
            r.watch = watch(r.at);
        }
    }
    set_errno(e);
}

/// An inotify descriptor watching for the close of `fd`'s file (-1: none).
fn watch(fd: c_int) -> c_int {
    // SAFETY: plain calls on a local path and a new descriptor of ours.
    let w = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if w < 0 {
        return -1;
    }
    let mut path = [0u8; 32];
    let mut c = std::io::Cursor::new(&mut path[..]);
    let _ = std::io::Write::write_fmt(&mut c, format_args!("/proc/self/fd/{fd}\0"));
    let mask = libc::IN_CLOSE_WRITE | libc::IN_CLOSE_NOWRITE;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::inotify_add_watch(w, path.as_ptr().cast(), mask) } < 0 {
        // SAFETY: ours.
        unsafe { crate::real::own_close(w) };
        return -1;
    }
    w
}

/// Whether watch `w` (`watch`) saw its file closed; the watch is closed.
fn last_closed(w: &mut c_int) -> Option<bool> {
    if *w < 0 {
        return None;
    }
    let mut buf = [0u64; 64];
    // SAFETY: reads into a local buffer.
    let n = unsafe { libc::read(*w, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
    unwatch(w);
    Some(n > 0)
}

/// The program closed descriptor numbers `first..=last` (closes.rs): the
/// registrations of laned sockets open at those numbers whose files went
/// with them are taken out now, under the table's lock, rather than at
/// the set's next epoll_wait or epoll_ctl (Linux drops a registration with
/// its file). A file still open (`closing`'s watch saw no last close) is
/// kept, at another number of this process that names it (a dup: a
/// daemon that dup2s the registered socket to 0 and 1 and closes it), or
/// at none (a forked child's copy: kept until the lane goes down, which
/// the daemon does at the file's last close); with no watch, kept only
/// when another number names it. One taken out leaves the kernel's set
/// while it still holds its lane's eventfds (the daemon and the peer hold
/// the same eventfd files, so the kernel would not drop the item when this
/// process closes its descriptor), then lets go of them: the numbers may
/// be given back now (lane_hold.rs), and no later EPOLL_CTL_DEL by number
/// is made for this registration, which could take a new lane's out once
/// a number is reused. A registration inherited across fork is the
/// parent's too (the set is shared): only the child's hold goes.
pub fn closed(first: c_int, last: c_int) {
    if HELD.load(Ordering::Relaxed) == 0 && PENDS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let e = errno();
    // The lock may be this very thread's (a close in a signal handler that
    // interrupted an epoll call here): after a while the registrations are
    // left to the lazy removal (epoll_wait, epoll_ctl), as safe, only later.
    let Some((_h, list, pend)) = try_locked_all(1 << 16) else {
        return;
    };
    let mut i = 0;
    while i < list.len() {
        let r = &mut list[i];
        if r.at < first || r.at > last {
            i += 1;
            continue;
        }
        let last_close = last_closed(&mut r.watch);
        if crate::lane::ino_of(r.at) == Some(r.ino) {
            // Not closed (the close failed, or the same file put back).
            i += 1;
            continue;
        }
        let keep = !r.inherited
            && match last_close {
                Some(true) => false,
                Some(false) => {
                    if !relocate(r) {
                        r.at = -1;
                    }
                    true
                }
                None => relocate(r),
            };
        if keep {
            i += 1;
            continue;
        }
        let r = take(list, i);
        if !r.inherited {
            del_end(r.epfd, &r.end);
        }
    }
    set_count(list);
    pend.retain(|p| p.fd < first || p.fd > last || crate::lane::ino_of(p.fd) == p.ino);
    set_pends(pend);
    set_errno(e);
}

/// A new epoll set took number `epfd`: registrations of an earlier set of
/// that number died with it.
pub fn epoll_made(epfd: c_int) {
    if epfd < 0 || (HELD.load(Ordering::Relaxed) == 0 && PENDS.load(Ordering::Relaxed) == 0) {
        return;
    }
    let (_h, list, pend) = locked_all();
    list.retain(|r| r.epfd != epfd);
    set_count(list);
    pend.retain(|p| p.epfd != epfd);
    set_pends(pend);
}

/// Moves the epoll registrations of the connect/accept ends whose lanes
/// came up (`lane::fresh_ends`) from their data files to the lanes'
/// eventfds, with the same events, flags and data, as `ctl` registers a
/// laned descriptor (`epolls::held` reads them from /proc/self, as a
/// conversion does). Made before any epoll call of the process goes to
/// the kernel: a kernel epoll call on a data file the end claimed would
/// poll it through the daemon, which takes the lane down (the polled rule).
///
/// No wake-up is lost. A registration is moved as a whole: the data file's
/// taken out, then the eventfd's put in, then the eventfd written. A
/// thread asleep in epoll_wait on that set meanwhile (in `wait`, or in the
/// kernel through the C library's call) wakes on that write, with the tag,
/// and looks at the ring (`wait`, `drop_kernel`) with the end's waiting
/// flags raised before its next sleep (stage c's protocol: the peer writes
/// the eventfd for every message published while a flag is up). A thread
/// asleep in the kernel on the data file when the lane was made (a poll()
/// of another thread, another epoll set) was woken by the daemon at the
/// grant (src/engine/lane.rs `lane_pollers`, `lane_after_poll` for one
/// that registered while the lane was being made) and polls the data file
/// again: it is told "ready" (after this process claimed the end, once
/// per thread) and its wrapper claims the end, moves the registration and
/// looks at the ring (`poll_came_up`, `after_wait`, `drop_kernel`); a poll
/// the library does not take over (a thread's second after the claim)
/// takes the lane down, the ring's bytes moved into the daemon's queue,
/// answered from there. Either way the bytes are seen. A registration
/// that cannot move (the eventfd's ADD refused: the same end twice in one
/// set) goes back to the data file after the library took the lane down
/// (`lane::left_polled`: correct, not fast).
pub fn move_fresh() {
    lane::fresh_ends(|fd, ino| {
        MOVING.fetch_add(1, Ordering::SeqCst);
        let _moving = Moving;
        let Some(end) = laned(fd) else { return };
        repoint(fd, ino, &end);
        for h in crate::epolls::held(fd, ino) {
            move_one(h.epfd, fd, ino, h.events, h.data, end.clone());
        }
        let (_h, _, pend) = locked_all();
        pend.retain(|p| p.fd != fd);
        set_pends(pend);
    });
}

/// Ends whose registrations a thread is moving (`move_fresh`): their
/// fresh mark is taken, their data files may still be in the sets.
static MOVING: AtomicU32 = AtomicU32::new(0);

/// Counted in `MOVING` until dropped.
struct Moving;

impl Drop for Moving {
    fn drop(&mut self) {
        MOVING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `move_fresh`, then the moves other threads are making are let finish
/// (10 ms at most): after a kernel wait, so that a data file's event of an
/// end they claimed is known as moved (`drop_kernel`) rather than
/// reported; before a wait, so that it does not poll the data file again
/// (a second poll of the thread takes the lane down: src/engine/lane.rs
/// `lane_polled`); before an epoll_ctl, so that the program's change is
/// not made on the data file after the mover read its events.
fn moves_done() {
    move_fresh();
    let until = Instant::now() + Duration::from_millis(10);
    while MOVING.load(Ordering::SeqCst) != 0 && Instant::now() < until {
        std::thread::yield_now();
    }
}

/// The registrations of `fd` (the socket `ino`) still on an earlier lane
/// of it, which went down and came up again before the program's next
/// epoll call (a timeout set, say): onto `end`, the new lane's eventfds.
/// Back on the data file instead (`wait`'s way down), their next poll would
/// take the new lane down for good (the polled rule). The old lane's hold
/// keeps its eventfds open until here: the new ones are other numbers.
fn repoint(fd: c_int, ino: u64, end: &Laned) {
    let e = errno();
    let (h, list, pend) = locked_all();
    let mut i = 0;
    let mut back = Vec::new();
    let mut moved = false;
    while i < list.len() {
        let r = &mut list[i];
        if !r.live || r.fd != fd || r.ino != ino || r.end.ev == end.ev {
            i += 1;
            continue;
        }
        del_end(r.epfd, &r.end);
        if add_end(r.epfd, end, TAG | u64::from(r.id)) < 0 {
            let r = take(list, i);
            note_leaving(pend, &r);
            back.push(r);
            continue;
        }
        r.end = end.clone();
        moved = true;
        i += 1;
    }
    set_count(list);
    drop(h);
    back.iter().for_each(to_data_file);
    if moved {
        // A thread asleep on the set looks at the new ring.
        futex::eventfd_signal(end.ev);
    }
    set_errno(e);
}

fn move_one(epfd: c_int, fd: c_int, ino: u64, events: u32, data: u64, end: Laned) {
    let (h, list, pend) = locked_all();
    if let Some(i) = list
        .iter()
        .position(|r| r.fd == fd && r.ino == ino && same_set(r.epfd, epfd))
    {
        if list[i].live {
            return;
        }
        // One the program deleted, of an earlier lane of the descriptor.
        let r = take(list, i);
        set_count(list);
        del_end(epfd, &r.end);
    }
    let e = errno();
    kernel_ctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0);
    let id = REGS.next.fetch_add(1, Ordering::Relaxed);
    let tag = TAG | u64::from(id);
    let private =
        (libc::EPOLLONESHOT | libc::EPOLLET | libc::EPOLLWAKEUP | libc::EPOLLEXCLUSIVE) as u32;
    if events & libc::EPOLLEXCLUSIVE as u32 != 0 || in_nested(epfd) || add_end(epfd, &end, tag) < 0
    {
        drop(h);
        lane::left_polled(fd);
        kernel_ctl(epfd, libc::EPOLL_CTL_ADD, fd, events, data);
        set_errno(e);
        return;
    }
    let ev = end.ev;
    // A one-shot the kernel disarmed keeps only its flags: the program's
    // events are its note's, for `drop_kernel` to arm it again.
    let armed = events & libc::EPOLLONESHOT as u32 == 0 || events & !private != 0;
    let noted = pend
        .iter()
        .find(|p| p.fd == fd && same_set(p.epfd, epfd) && p.data == data)
        .map(|p| p.events)
        .filter(|_| !armed);
    let mut reg = Reg::new(id, epfd, fd, ino, noted.unwrap_or(events), data, end);
    reg.moved = true;
    reg.armed = armed;
    reg.moved_disarmed = noted.is_some();
    list.push(reg);
    set_count(list);
    drop(h);
    futex::eventfd_signal(ev);
    set_errno(e);
}

/// Whether kernel epoll event `data` of set `epfd` is to be left out of
/// what the program gets: a lane's tag (a thread in the C library's call
/// when a registration moved: its ring is looked at by the next wait), or
/// the data file's event of an end whose lane came up (its library's poll
/// of the end is told "ready": the end is claimed here, or was by another
/// thread while this one slept in a kernel wait that began before `from`
/// (`REGS.next` then), and its registration moved; the ring is looked at
/// by the next wait).
fn drop_kernel(epfd: c_int, data: u64, from: u32) -> bool {
    if HELD.load(Ordering::Relaxed) != 0 {
        let (_h, list) = locked();
        let tag = is_tag(data);
        if let Some(r) = list.iter_mut().find(|r| {
            same_set(r.epfd, epfd)
                && if tag {
                    r.id == data as u32
                } else {
                    r.moved && r.live && r.data == data && r.id >= from
                }
        }) {
            if !tag && r.moved_disarmed {
                r.moved_disarmed = false;
                r.armed = true;
            }
            dirty(r.end.ev);
            return true;
        }
    }
    if PENDS.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let (fd, events) = {
        let (_h, _, pend) = locked_all();
        match pend
            .iter()
            .find(|p| p.data == data && same_set(p.epfd, epfd))
        {
            Some(p) => (p.fd, p.events),
            None => return false,
        }
    };
    // Laned (here, or claimed by another thread: this one was asleep in
    // the kernel on the data file, whose poll the daemon answered
    // "ready"), or the daemon's "ready" for a lane gone already; the note
    // goes when the end asks no more (not when it is between two lanes:
    // another thread's move of the next reads it).
    let up = laned(fd).is_some();
    if !up && !lane::in_play(fd) {
        let (_h, _, pend) = locked_all();
        pend.retain(|p| p.fd != fd);
        set_pends(pend);
    }
    // (epoll's event bits below 0x10000 are poll's)
    if !up && !nothing_now(fd, (events & 0xffff & !ALWAYS) as i16) {
        return false;
    }
    // The kernel disarmed a one-shot at this event, which the program
    // never gets: armed again (before the move reads its events).
    if events & libc::EPOLLONESHOT as u32 != 0 {
        kernel_ctl(epfd, libc::EPOLL_CTL_MOD, fd, events, data);
    }
    move_fresh();
    true
}

/// After the C library's epoll_wait on `epfd` returned `r` events at
/// `out`: the events the program gets (`drop_kernel`'s left out, the rest
/// moved up), or None when every one was left out (the caller waits again
/// for the time left, now through `wait`).
///
/// A lane's tag never reaches the program. One this process cannot map to
/// a registration of the set (the set came over SCM_RIGHTS from another
/// process's library, or its registration is gone) is left out too, and
/// when nothing else came the call returns 0 (as at a timeout: the program
/// waits again) rather than waiting here again on an eventfd that is not
/// this process's to drain. One of a registration this process dropped
/// meanwhile (`gone`) is left out as the others: the wait goes on.
pub fn after_wait(epfd: c_int, out: *mut epoll_event, r: c_int) -> Option<c_int> {
    if r <= 0 {
        return Some(r);
    }
    // Registrations still on their data files in the kernel's set while
    // another thread claimed their ends move now (`moved`: their events
    // here are left out, the next wait looks at the rings).
    moves_done();
    let ours = HELD.load(Ordering::Relaxed) != 0 || PENDS.load(Ordering::Relaxed) != 0;
    let mut kept = 0;
    let mut foreign = false;
    for i in 0..r as usize {
        // SAFETY: the kernel wrote r entries at out.
        let e = unsafe { std::ptr::read_unaligned(out.add(i)) };
        if ours && drop_kernel(epfd, e.u64, WAIT_FROM.get()) {
            continue;
        }
        if is_tag(e.u64) {
            foreign |= !gone(e.u64 as u32);
            continue;
        }
        // SAFETY: kept <= i < r.
        unsafe { std::ptr::write_unaligned(out.add(kept), e) };
        kept += 1;
    }
    if foreign && !SAID_FOREIGN.swap(true, Ordering::Relaxed) {
        crate::log::say(&format!(
            "epoll set {epfd}: an event of a lane's eventfd this process did not register (a set from another process?) left out; said once"
        ));
    }
    (kept > 0 || foreign).then_some(kept as c_int)
}

/// Whether the foreign tag of `after_wait` was said (once a process).
static SAID_FOREIGN: AtomicBool = AtomicBool::new(false);

/// Whether registration `r`'s socket is still open in this process (as
/// Linux keeps an epoll item until its file's last reference goes): `at`
/// still names it (a statx only when a descriptor number was closed since
/// its last look: fdgen.rs), or another number does now (`relocate`), or
/// no number here was ever known to (`at` -1: kept until the lane goes
/// down).
fn still(r: &mut Reg) -> bool {
    r.at < 0 || still_at(r) || relocate(r)
}

/// Whether `r.at` still names its socket (cached by descriptor generation).
fn still_at(r: &mut Reg) -> bool {
    let now = crate::fdgen::now();
    if r.checked == now && r.at >= 0 {
        return true;
    }
    let same = r.at >= 0 && crate::lane::ino_of(r.at) == Some(r.ino);
    if same {
        r.checked = now;
    }
    same
}

/// Whether program number `fd` names registration `r`'s socket now (the
/// number an EPOLL_CTL_MOD/DEL reaches it by).
fn names(r: &mut Reg, fd: c_int) -> bool {
    if r.fd != fd {
        return false;
    }
    if r.at == fd {
        return still_at(r);
    }
    crate::lane::ino_of(fd) == Some(r.ino)
}

/// Registration `r`'s number `at` no longer names its socket: another
/// number of this process that does, if any (`at` set to it: true).
fn relocate(r: &mut Reg) -> bool {
    match number_of(r.ino, r.at) {
        Some(n) => {
            r.at = n;
            r.checked = crate::fdgen::now();
            true
        }
        None => false,
    }
}

/// A descriptor number of this process, other than `not`, whose file has
/// inode `ino`: a walk of /proc/self/fd with a statx a number (made only
/// when a registered number was closed while its file stays open, or was
/// closed behind the library's back). No allocation (a close may be in a
/// signal handler).
fn number_of(ino: u64, not: c_int) -> Option<c_int> {
    // SAFETY: a NUL-terminated path; the directory is ours and closed below.
    let dir = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    } as c_int;
    if dir < 0 {
        return None;
    }
    let mut buf = [0u64; 512];
    let mut found = None;
    'read: loop {
        // SAFETY: getdents64 writes at most the buffer's size.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n <= 0 {
            break;
        }
        let bytes = buf.as_ptr().cast::<u8>();
        let mut off = 0usize;
        while off + 19 < n as usize {
            // linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
            // SAFETY: within the n bytes the kernel wrote.
            let reclen = unsafe { std::ptr::read_unaligned(bytes.add(off + 16).cast::<u16>()) };
            let mut num: i64 = 0;
            let mut digits = 0;
            let mut k = off + 19;
            // SAFETY: the name is NUL-terminated within the record.
            while k < off + reclen as usize && unsafe { *bytes.add(k) }.is_ascii_digit() {
                num = num * 10 + i64::from(unsafe { *bytes.add(k) } - b'0');
                digits += 1;
                k += 1;
            }
            off += reclen.max(1) as usize;
            if digits == 0 || digits > 9 {
                continue;
            }
            let fd = num as c_int;
            if fd != not && fd != dir && crate::lane::ino_of(fd) == Some(ino) {
                found = Some(fd);
                break 'read;
            }
        }
    }
    // SAFETY: ours.
    unsafe { crate::real::own_close(dir) };
    found
}

fn kernel_ctl(epfd: c_int, op: c_int, fd: c_int, events: u32, data: u64) -> c_int {
    let mut ev = epoll_event { events, u64: data };
    // SAFETY: a local epoll_event.
    unsafe { real::epoll_ctl(epfd, op, fd, &mut ev) }
}

/// Registers `end`'s eventfd and its daemon-only one in set `epfd` with
/// `tag` (level, EPOLLIN): both or neither (-1, errno the kernel's). The
/// daemon-only one tells a sleeper of the way down even when the peer,
/// which holds the first, drained it.
fn add_end(epfd: c_int, end: &Laned, tag: u64) -> c_int {
    let r = kernel_ctl(epfd, libc::EPOLL_CTL_ADD, end.ev, libc::EPOLLIN as u32, tag);
    if r < 0 || end.hup < 0 {
        return r;
    }
    if kernel_ctl(
        epfd,
        libc::EPOLL_CTL_ADD,
        end.hup,
        libc::EPOLLIN as u32,
        tag,
    ) < 0
    {
        let e = errno();
        kernel_ctl(epfd, libc::EPOLL_CTL_DEL, end.ev, 0, 0);
        set_errno(e);
        return -1;
    }
    0
}

/// Takes `end`'s two eventfds out of set `epfd` (`add_end`).
fn del_end(epfd: c_int, end: &Laned) {
    kernel_ctl(epfd, libc::EPOLL_CTL_DEL, end.ev, 0, 0);
    if end.hup >= 0 {
        kernel_ctl(epfd, libc::EPOLL_CTL_DEL, end.hup, 0, 0);
    }
}

/// Moves registration `r`, whose lane is down, back to its data file (the
/// program's events and data; a disarmed one-shot stays disarmed) unless
/// the descriptor now names another file.
/// Registration `r`, taken off the list to go back to its data file
/// (`to_data_file`), noted before the lock is let go: another thread's
/// kernel wait may report the data file's event before `to_data_file`
/// notes it (`note_back`), and a "ready" the daemon gave for the next lane
/// then reached the program (adversarial_lanes8.sh threads_up).
fn note_leaving(pend: &mut Vec<Pend>, r: &Reg) {
    if r.live {
        note(
            pend,
            Pend {
                epfd: r.epfd,
                fd: r.fd,
                ino: Some(r.ino),
                events: back_events(r),
                data: r.data,
            },
        );
    }
}

/// The events registration `r` goes back to its data file with: a one-shot
/// the program got disarmed keeps only its flag; one disarmed by a kernel
/// event the program never got (`moved_disarmed`) is the program's armed
/// one.
fn back_events(r: &Reg) -> u32 {
    if r.armed || r.moved_disarmed {
        r.events
    } else {
        libc::EPOLLONESHOT as u32
    }
}

/// `note_leaving`'s note of `r` taken back (its registration did not go
/// back on its data file at that number).
fn unnote(r: &Reg) {
    let (_h, _, pend) = locked_all();
    forget(pend, r.fd, r.epfd);
}

fn to_data_file(r: &Reg) {
    let e = errno();
    del_end(r.epfd, &r.end);
    // The program's number if it still names the socket, else the one
    // its file is open at now (the kernel's item is then keyed by that
    // number; Linux's by the closed one).
    let fd = [r.fd, r.at]
        .into_iter()
        .find(|&n| n >= 0 && crate::lane::ino_of(n) == Some(r.ino));
    if fd != Some(r.fd) {
        unnote(r);
    }
    if let (true, Some(fd)) = (r.live, fd) {
        let events = back_events(r);
        if ready::look(r.end.region, r.end.side).is_some() {
            // Still up (a nested set's): down before the kernel polls it.
            lane::left_polled(fd);
        }
        // EBADF: another thread closed the descriptor or the set since the
        // look above, which ends the registration on Linux too.
        if kernel_ctl(r.epfd, libc::EPOLL_CTL_ADD, fd, events, r.data) < 0 {
            let e = errno();
            unnote(r);
            set_errno(e);
            if errno() != libc::EBADF {
                crate::log::say(&format!(
                    "fd {fd}: its lane went down; could not move its registration in epoll set {} back to the socket: errno {}",
                    r.epfd,
                    errno()
                ));
            }
        } else {
            note_back(r.epfd, fd, r.ino, events, r.data);
        }
    }
    set_errno(e);
}

/// A registration of `fd` (socket `ino`) put back on its data file in set
/// `epfd` after its lane went down (`to_data_file`, or the program's MOD
/// that found it down: `ctl`), noted as a connect/accept end's still
/// asking: when the peer asks for another lane, the daemon tells this data
/// file's poll "ready" (the polled rule's word to the library, to claim the
/// new end), which is no event of the program's (`drop_kernel`). Told to
/// it, the program read FIONREAD 0 after a "readable" epoll_wait
/// (lanes_ready.py down_rejoin_waits; after a MOD: adversarial_lanes8.sh
/// late).
fn note_back(epfd: c_int, fd: c_int, ino: u64, events: u32, data: u64) {
    let (_h, _, pend) = locked_all();
    note(
        pend,
        Pend {
            epfd,
            fd,
            ino: Some(ino),
            events,
            data,
        },
    );
}

/// An epoll set with registrations here, itself waited on (in poll,
/// select, or another epoll set): its own readiness would not follow the
/// rings (the kernel sees only the eventfds, drained or not), so its laned
/// registrations go back to their data files, which takes their lanes down
/// (correct, not fast); and the set is remembered (`NESTED`), so that no
/// lane that comes up later moves a registration into it.
/// `added`: `fd` is being added to another epoll set (an epoll_ctl ADD,
/// once: the set is remembered even with nothing moved, its ends still
/// asking for their lanes); else it is polled (each poll and select: what
/// costs no system call first).
fn nested(fd: c_int, added: bool) {
    let any = HELD.load(Ordering::Relaxed) != 0 || PENDS.load(Ordering::Relaxed) != 0;
    if fd < 0 || !any || laned(fd).is_some() {
        return;
    }
    if added && is_epoll(fd) {
        mark_nested(fd);
    }
    if HELD.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut set = SetOf::new(fd);
    let moved: Vec<Reg> = {
        let (_h, list) = locked();
        let mut out = Vec::new();
        let mut i = 0;
        while i < list.len() {
            if set.has(list[i].epfd) {
                out.push(take(list, i));
            } else {
                i += 1;
            }
        }
        set_count(list);
        out
    };
    if !moved.is_empty() {
        mark_nested(fd);
    }
    moved.iter().for_each(to_data_file);
}

/// Epoll sets seen waited on themselves (`nested`), by number, for the
/// process's life: a registration never moves onto a lane in one
/// (`move_one`, `ctl`'s ADD), as through the outer set or poll its
/// readiness would follow the eventfds, not the rings (after a lane came
/// up under a nested set, its quiet wait said readable and the last bytes
/// went unreported: adversarial_lanes8.sh `nested`). A number reused by
/// another set costs that set its lanes only (correct, not fast).
static NESTED: [AtomicI32; 16] = [const { AtomicI32::new(-1) }; 16];
static NESTED_AT: AtomicU32 = AtomicU32::new(0);

fn mark_nested(epfd: c_int) {
    if !in_nested(epfd) {
        let at = NESTED_AT.fetch_add(1, Ordering::Relaxed) as usize % NESTED.len();
        NESTED[at].store(epfd, Ordering::Relaxed);
    }
}

/// Whether set `epfd` was seen nested (`NESTED`).
fn in_nested(epfd: c_int) -> bool {
    NESTED_AT.load(Ordering::Relaxed) != 0
        && NESTED.iter().any(|n| {
            let v = n.load(Ordering::Relaxed);
            v >= 0 && same_set(v, epfd)
        })
}

/// Whether descriptor `fd` is an epoll set (its /proc/self/fd link).
fn is_epoll(fd: c_int) -> bool {
    const EPOLL: &[u8] = b"anon_inode:[eventpoll]";
    let path = lane::fd_path(fd);
    let mut link = [0u8; 32];
    // SAFETY: a NUL-terminated path on the stack; readlink writes at most
    // link.len() bytes.
    let r = unsafe { libc::readlink(path.as_ptr().cast(), link.as_mut_ptr().cast(), link.len()) };
    r == EPOLL.len() as isize && &link[..EPOLL.len()] == EPOLL
}

/// epoll_ctl: Some(result) for a laned descriptor or one registered here,
/// None for the C library's call.
pub fn ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> Option<c_int> {
    // (a noted registration's change is noted too, also while no lane is
    // up: its data is what `drop_kernel` knows its events by)
    if HELD.load(Ordering::Relaxed) == 0 && PENDS.load(Ordering::Relaxed) == 0 && !lane::any() {
        return None;
    }
    // (another thread's move read the registration's events from fdinfo:
    // a MOD of the data file meanwhile would be lost)
    moves_done();
    let read_event = || -> Option<epoll_event> {
        let size = std::mem::size_of::<epoll_event>();
        (user::readable(event.cast(), size) == size)
            // SAFETY: probed readable; epoll_event is packed on x86_64.
            .then(|| unsafe { std::ptr::read_unaligned(event) })
    };
    let (h, list, pend) = locked_all();
    let mut set = SetOf::new(epfd);
    // The registration `fd` reaches: one made by that number, which still
    // names its socket (closed with its file open at a dup, it is reached
    // by none, as Linux's item keyed by the closed number).
    let mut at = None;
    let mut i = 0;
    while i < list.len() {
        if list[i].fd != fd || !set.has(list[i].epfd) {
            i += 1;
            continue;
        }
        // The program closed the socket since (Linux drops its registration
        // with the file). Or the lane went down under a registration the
        // program had deleted.
        let down = !list[i].live && ready::look(list[i].end.region, list[i].end.side).is_none();
        if down || !still(&mut list[i]) {
            let r = take(list, i);
            set_count(list);
            del_end(epfd, &r.end);
            continue;
        }
        if names(&mut list[i], fd) {
            at = Some(i);
            break;
        }
        i += 1;
    }
    match (op, at) {
        (libc::EPOLL_CTL_ADD, Some(i)) if !list[i].live => {
            // Deleted by the program, its eventfd still in the set: live
            // again, with no call to the kernel.
            let Some(ev) = read_event() else {
                set_errno(libc::EFAULT);
                return Some(-1);
            };
            if ev.events & libc::EPOLLEXCLUSIVE as u32 != 0 {
                // The C library's call on the data file (the lane goes down).
                let r = take(list, i);
                set_count(list);
                del_end(epfd, &r.end);
                drop(h);
                lane::left_polled(fd);
                return None;
            }
            rearm(&mut list[i], ev);
            Some(0)
        }
        (libc::EPOLL_CTL_ADD, Some(_)) => {
            set_errno(libc::EEXIST);
            Some(-1)
        }
        (libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL, Some(i)) if !list[i].live => {
            // Deleted: as Linux answers for a descriptor not in the set.
            set_errno(libc::ENOENT);
            Some(-1)
        }
        (libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL, Some(i)) => {
            if ready::look(list[i].end.region, list[i].end.side).is_none() {
                // Down: the data file takes the program's call.
                let r = take(list, i);
                set_count(list);
                if op != libc::EPOLL_CTL_DEL {
                    note_leaving(pend, &r);
                }
                drop(h);
                del_end(epfd, &r.end);
                if op == libc::EPOLL_CTL_DEL {
                    return Some(0);
                }
                let Some(ev) = read_event() else {
                    unnote(&r);
                    return None;
                };
                let added = kernel_ctl(epfd, libc::EPOLL_CTL_ADD, fd, ev.events, ev.u64);
                let e = errno();
                if added == 0 {
                    note_back(epfd, fd, r.ino, ev.events, ev.u64);
                }
                if added != 0 || r.fd != fd {
                    unnote(&r);
                }
                set_errno(e);
                return Some(added);
            }
            if op == libc::EPOLL_CTL_DEL {
                // The eventfd stays in the set, reported nothing (`report`)
                // until an ADD makes it live again: an event loop that
                // deletes and adds a descriptor per message (redis-benchmark's
                // ae: 4 epoll_ctl per request) costs no system call here.
                list[i].live = false;
                return Some(0);
            }
            let Some(ev) = read_event() else {
                set_errno(libc::EFAULT);
                return Some(-1);
            };
            let r = &mut list[i];
            // The number the program reaches the set by now.
            r.epfd = epfd;
            rearm(r, ev);
            Some(0)
        }
        (libc::EPOLL_CTL_ADD, None) => {
            drop(h);
            nested(fd, true);
            // A check of `fd`'s file by `laned` is at this generation or a
            // later one.
            let gen = crate::fdgen::now();
            let Some(re) = lane::ready_end(fd) else {
                return pend_ctl(epfd, op, fd, read_event());
            };
            // `ready_end` may have brought the lane up just now (a JOIN end's
            // ask): the data file's registrations, this set's too, move onto
            // it first, so that an ADD of a descriptor already in the set is
            // EEXIST as on Linux (mosquitto's ADD, then MOD on EEXIST), not a
            // second registration beside the data file left in the set.
            moves_done();
            let ino = re.ino;
            let end = Laned {
                _hold: re.hold,
                region: re.region,
                side: re.side,
                ev: re.ev,
                hup: re.hup,
            };
            let ev = read_event()?;
            if ev.events & libc::EPOLLEXCLUSIVE as u32 != 0 || in_nested(epfd) {
                lane::left_polled(fd);
                return None;
            }
            let (h, list) = locked();
            if list
                .iter()
                .any(|r| r.fd == fd && r.ino == ino && set.has(r.epfd))
            {
                set_errno(libc::EEXIST);
                return Some(-1);
            }
            let id = REGS.next.fetch_add(1, Ordering::Relaxed);
            let r = add_end(epfd, &end, TAG | u64::from(id));
            if r < 0 {
                let e = errno();
                drop(h);
                if e == libc::EEXIST {
                    // The same end twice in one set (a duplicate): the
                    // daemon's way (the lane goes down).
                    lane::left_polled(fd);
                    return None;
                }
                set_errno(e);
                return Some(-1);
            }
            let evfd = end.ev;
            let mut reg = Reg::new(id, epfd, fd, ino, ev.events, ev.u64, end);
            reg.checked = gen;
            list.push(reg);
            set_count(list);
            wake_sleepers(evfd);
            Some(0)
        }
        (libc::EPOLL_CTL_DEL, None) => {
            drop(h);
            // Linux ignores a DEL's event (NULL, most often): never read.
            pend_ctl(epfd, op, fd, None)
        }
        (libc::EPOLL_CTL_MOD, None) => {
            drop(h);
            pend_ctl(epfd, op, fd, read_event())
        }
        _ => None,
    }
}

/// A MOD of registration `r`, or an ADD of one the program deleted: the
/// program's new events and data, armed, no edge seen; a thread asleep in
/// `wait` looks again (as ep_modify and ep_insert wake the set's waiters).
fn rearm(r: &mut Reg, ev: epoll_event) {
    r.events = ev.events;
    r.data = ev.u64;
    r.armed = true;
    r.moved_disarmed = false;
    r.last = None;
    r.live = true;
    wake_sleepers(r.end.ev);
}

/// Threads of this process between their last look at the registrations
/// and the end of their sleep in `wait` (counted under the table's lock).
static SLEEPERS: AtomicUsize = AtomicUsize::new(0);

/// A registration of `ev`'s end changed (made, MOD, made live again) under
/// the table's lock: a thread asleep in `wait` is woken to look (the
/// eventfd's tag comes back to it). None asleep: nothing to do, as a thread
/// that goes to sleep later looks at the registrations first. Why no
/// sleeper is missed: a sleeper counts itself under the lock before its
/// last look (`wait`, pass 1), so a change made under the lock after that
/// look sees it counted and writes the eventfd, which the kernel reports
/// to the sleeper; one made before it is seen by that look. A sleeper
/// uncounts itself after its sleep, then looks again.
fn wake_sleepers(ev: c_int) {
    if SLEEPERS.load(Ordering::SeqCst) > 0 {
        futex::eventfd_signal(ev);
    }
}

/// epoll_ctl of a descriptor without a lane here: the C library's call;
/// for a connect/accept end still asking for its lane, its registration
/// noted (`Pend`) so that an event the kernel reports for it is known.
fn pend_ctl(epfd: c_int, op: c_int, fd: c_int, ev: Option<epoll_event>) -> Option<c_int> {
    let noted = PENDS.load(Ordering::Relaxed) != 0;
    let joining = lane::joining(fd);
    if (!noted && (op != libc::EPOLL_CTL_ADD || !joining))
        || (op != libc::EPOLL_CTL_DEL && ev.is_none())
    {
        return None;
    }
    let (data, events) = ev.map_or((0, 0), |e| (e.u64, e.events));
    let r = kernel_ctl(epfd, op, fd, events, data);
    if r < 0 {
        return Some(r);
    }
    let e = errno();
    let ino = (op != libc::EPOLL_CTL_DEL)
        .then(|| crate::lane::ino_of(fd))
        .flatten();
    let (_h, _, pend) = locked_all();
    let had = forget(pend, fd, epfd);
    // A noted registration keeps its note through the program's MOD: the
    // end may be between two lanes (asking for no lane while another
    // thread claims the next, which moves the registration), and the
    // daemon's "ready" for it is still no event of the program's.
    if op != libc::EPOLL_CTL_DEL && (joining || had) {
        let p = Pend {
            epfd,
            fd,
            ino,
            events,
            data,
        };
        note(pend, p);
    }
    set_errno(e);
    Some(r)
}

/// What registration `r` reports for look `lk` (and its one-shot and edge
/// state updated), or None.
/// Whether a registration of `set` may have something to report (a look
/// at each ring, nothing reported yet: `report` decides), and at how many
/// rings it looked.
fn any_ready(set: &mut SetOf) -> lane_spin::Seen {
    let (_h, list) = locked();
    let mut rings = 0;
    let mut peers_wait = true;
    let found = list.iter().any(|r| {
        if !(set.has(r.epfd) && r.live && r.armed) {
            return false;
        }
        rings += 1;
        peers_wait &= ready::peer_waits(r.end.region, r.end.side);
        ready::look(r.end.region, r.end.side).is_none_or(|lk| lk.mask & (r.events | ALWAYS) != 0)
    });
    lane_spin::Seen {
        ready: found,
        rings,
        peers_wait: peers_wait && rings > 0,
    }
}

fn report(r: &mut Reg, lk: ready::Look) -> Option<u32> {
    if !r.armed || !r.live {
        return None;
    }
    let mask = lk.mask & (r.events | ALWAYS);
    if mask == 0 {
        return None;
    }
    if r.events & libc::EPOLLET as u32 != 0 {
        let now = (lk.tail_in, lk.head_out);
        if let Some((t, h)) = r.last {
            let edge_in = mask & ready::IN != 0 && t != now.0;
            let edge_out = mask & ready::OUT != 0 && h != now.1;
            if !edge_in && !edge_out {
                return None;
            }
        }
        r.last = Some(now);
    }
    if r.events & libc::EPOLLONESHOT as u32 != 0 {
        r.armed = false;
    }
    Some(mask)
}

const KMAX: usize = 64;

/// epoll_wait/epoll_pwait/epoll_pwait2 on a set holding registrations of
/// laned descriptors: Some(result) or None (the C library's call).
pub fn wait(
    epfd: c_int,
    out: *mut epoll_event,
    max: c_int,
    timeout: Option<Duration>,
    sigmask: *const sigset_t,
) -> Option<c_int> {
    wait_record::reap();
    WAIT_FROM.set(REGS.next.load(Ordering::Relaxed));
    let rec = wait_record::begin(WAIT, undo_wait);
    wait_recorded(epfd, (out, max), (timeout, sigmask), &rec)
}

thread_local! {
    /// `REGS.next` when this thread's last `wait` began: the C library's
    /// epoll_wait that may follow began after it (`after_wait`).
    static WAIT_FROM: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// `wait`, recorded (`rec`) for a handler's jump out of its sleep.
fn wait_recorded(
    epfd: c_int,
    (out, max): (*mut epoll_event, c_int),
    (timeout, sigmask): (Option<Duration>, *const sigset_t),
    rec: &wait_record::Rec,
) -> Option<c_int> {
    moves_done();
    if HELD.load(Ordering::Relaxed) == 0 || max <= 0 {
        return None;
    }
    let max = max as usize;
    let size = std::mem::size_of::<epoll_event>();
    if user::writable(out.cast(), max * size) < max * size {
        return None;
    }
    // The set's registrations, made through this number or another of
    // the same set (a dup).
    let mut set = SetOf::new(epfd);
    {
        let (_h, list) = locked();
        if !list.iter().any(|r| set.has(r.epfd)) {
            return None;
        }
    }
    let put = |i: usize, events: u32, data: u64| {
        // SAFETY: probed writable for max entries; i < max.
        unsafe { std::ptr::write_unaligned(out.add(i), epoll_event { events, u64: data }) };
    };
    let deadline = timeout.map(|t| Instant::now() + t);
    // (once a call: a wake-up that brings nothing sleeps again at once)
    let mut spun = false;
    loop {
        let mut got = 0;
        // Registrations whose lane went down, moved back to their data
        // files after the lock (the kernel's ADD polls the daemon).
        let mut down: Vec<Reg> = Vec::new();
        // Registrations reported by this call (once each, as Linux does).
        let mut seen: Vec<u32> = Vec::new();
        // A first look leaves the eventfds and flags alone; only when
        // nothing is ready are the flags raised (the eventfds drained) and
        // the rings looked at again before the sleep.
        let mut sleeping = false;
        // The ends this thread is to sleep on, left after the sleep.
        let mut entered: Vec<(Laned, u32)> = Vec::new();
        // Counted in SLEEPERS (`wake_sleepers`) until the sleep is over.
        let mut counted = false;
        let mut pass = 0;
        while pass < 2 {
            pass += 1;
            if pass == 2 {
                if got > 0 {
                    break;
                }
                // Nothing ready: a few looks at the rings before the sleep
                // (lane_spin.rs; the set's kernel descriptors wait for them
                // at most), and the first look again if one is ready now.
                if !spun && left(deadline) != Some(Duration::ZERO) {
                    spun = true;
                    match lane_spin::look_for(&EPOLL_SPIN, || any_ready(&mut set)) {
                        Found::Ready => {
                            pass = 0;
                            continue;
                        }
                        Found::Handled => {
                            set_errno(libc::EINTR);
                            return Some(-1);
                        }
                        Found::Nothing => {}
                    }
                }
                sleeping = true;
            }
            let (_h, list, pend) = locked_all();
            if sleeping && !counted {
                SLEEPERS.fetch_add(1, Ordering::SeqCst);
                rec.counted(true);
                counted = true;
            }
            let mut i = 0;
            while i < list.len() {
                let r = &mut list[i];
                if !set.has(r.epfd) || !r.live {
                    i += 1;
                    continue;
                }
                // The number the program waits on (a dup it made the
                // registration through may be closed later).
                r.epfd = epfd;
                if !still(r) {
                    // The program closed the socket: Linux drops the
                    // registration with the file (one a dup keeps open
                    // stays: `still`).
                    let r = take(list, i);
                    del_end(epfd, &r.end);
                    continue;
                }
                if r.armed && sleeping {
                    raise(&r.end, r.events, enter_drain(r.end.ev));
                    entered.push((r.end.clone(), r.events));
                    rec.raised_end(wait_end(&r.end, r.events, true));
                }
                let Some(lk) = ready::look(r.end.region, r.end.side) else {
                    let r = take(list, i);
                    note_leaving(pend, &r);
                    down.push(r);
                    continue;
                };
                if got < max {
                    if let Some(m) = report(r, lk) {
                        put(got, m, r.data);
                        seen.push(r.id);
                        got += 1;
                    }
                }
                i += 1;
            }
            set_count(list);
        }
        down.iter().for_each(to_data_file);
        let mut moved = !down.is_empty();
        let wait = if got > 0 || moved {
            Some(Duration::ZERO)
        } else {
            left(deadline)
        };
        let mut k = [epoll_event { events: 0, u64: 0 }; KMAX];
        let kmax = (max - got).min(KMAX);
        // Registrations moved from now on may have data-file events here.
        let from = REGS.next.load(Ordering::Relaxed);
        let r = if kmax == 0 {
            0
        } else {
            let ms = wait.map_or(-1, |d| {
                d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as c_int
            });
            // SAFETY: k holds kmax entries; sigmask is the caller's or null.
            unsafe { real::epoll_pwait(epfd, k.as_mut_ptr(), kmax as c_int, ms, sigmask) }
        };
        let err = errno();
        rec.counted(false);
        if counted {
            SLEEPERS.fetch_sub(1, Ordering::SeqCst);
        }
        rec.lowering();
        for (end, events) in &entered {
            leave(end.ev);
            lower(end, *events);
        }
        // The data file's events of ends whose lanes came up (moved now;
        // one another thread claimed while this one slept: `after_wait`).
        let mut skip = [false; KMAX];
        if r > 0 {
            moves_done();
            for (s, e) in skip.iter_mut().zip(&k[..r as usize]) {
                let data = e.u64;
                *s = !is_tag(data) && drop_kernel(epfd, data, from);
                moved |= *s;
            }
        }
        let (h, list) = locked();
        if r < 0 {
            drop(h);
            if got > 0 {
                return Some(got as c_int);
            }
            set_errno(err);
            return Some(-1);
        }
        for (e, skip) in k[..r as usize].iter().zip(skip) {
            let (events, data) = (e.events, e.u64);
            if skip {
                continue;
            }
            if !is_tag(data) {
                put(got, events, data);
                got += 1;
                continue;
            }
            // A lane's eventfd: a wake-up; look at that ring.
            let id = data as u32;
            let Some(at) = list.iter().position(|r| r.id == id && set.has(r.epfd)) else {
                continue;
            };
            let r = &mut list[at];
            dirty(r.end.ev);
            if !r.live {
                // Deleted by the program, and its eventfd written (the
                // daemon's at a way down, a blocking read's wake-up): out of
                // the set now, as nothing here drains it.
                let r = take(list, at);
                set_count(list);
                del_end(epfd, &r.end);
                moved = true;
                continue;
            }
            if seen.contains(&id) {
                continue;
            }
            if let Some(lk) = ready::look(r.end.region, r.end.side) {
                if let Some(m) = report(r, lk) {
                    put(got, m, r.data);
                    got += 1;
                }
            } else {
                moved = true;
            }
        }
        drop(h);
        if got > 0 || (!moved && left(deadline) == Some(Duration::ZERO)) {
            return Some(got as c_int);
        }
    }
}

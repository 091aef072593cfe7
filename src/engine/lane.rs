//! The fast lane, stage (b)'s first cut (docs/LANE.md, issue 30): a
//! connected stream pair whose two ends are each claimed by one process
//! running the library moves its plain bytes through a shared region
//! (`udsfs_proto::lane`); the daemon makes the region, hands it out and
//! takes the lane down when anything else touches the connection.
//!
//! One decision here: any request on a laned socket other than the
//! library's own lane calls (a FUSE read, write, poll, ioctl, an open of
//! its data or msg file, the release of its last handle) takes the lane
//! down first (`lane_down`): the state goes to `Through`, the daemon waits
//! until neither end is moving bytes (each end's busy word; the request
//! parked meanwhile, on no thread, and a stuck end reset at `BUSY_WAIT`),
//! and moves what the rings hold into the engine's queues (as sends of the
//! end that wrote them: nothing lost or reordered), so the request then
//! sees the connection as if every byte had gone through the daemon. A
//! lane that is down stays down. A lane's cost is on the user whose call
//! made the connection (`payer`). Off unless the mount has `--lanes`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::{Condvar, Mutex};
use udsfs_proto::ioctl::{LANE_RECORD, LaneEvents, LaneGrant};
use udsfs_proto::lane::region::{
    MAX_CAP, MIN_CAP, OFF_HEAD, OFF_TAIL, Region, busy_word, cap_for_sndbuf, dir_word,
    ring_bytes_for,
};
use udsfs_proto::lane::{Framing, State};

use super::cred::ProcStatus;
use super::fds::{ChargedFd, refused_errno};
use super::lane_ready::Evs;
use super::log_limit::limited;
use super::message::SendMsg;
use super::quota::{Charge, Quota};
use super::socket::{Conn, RCV_SHUTDOWN, SEND_SHUTDOWN, SockType, Socket};
use super::worker::Worker;
use super::{Caller, Engine, Result, Waiter};

mod through;

/// How long the way down waits for an end to finish moving bytes (a copy
/// of at most a ring takes far less); an end that stays busy longer
/// (stopped, or hostile) is reset: the rings' published bytes are drained
/// as they are and the stuck end's connection ends (ECONNRESET). The wait
/// is on no request's thread: the requests that need the lane down park
/// (`lane_down` with a waiter) and the drainer thread looks every
/// `DRAIN_LOOK` (below).
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// How often the drainer thread looks at the busy words of the lanes
/// whose way down waits for them.
const DRAIN_LOOK: Duration = Duration::from_micros(500);

/// Threads a socket keeps as woken by its lane (`SockState::lane_woken`):
/// each was parked in a read of it when the lane came, and asks once.
pub(crate) const WOKEN_KEPT: usize = 64;

/// Reads of an end's asker parked in the daemon that a lane may be made
/// under (`goes_on`: each is a look in /proc, under the socket's lock and
/// the map's, which every lane call of the mount waits for): with more,
/// the lane waits, so that a process cannot make each ask cost a look per
/// thread it parks.
const READS_UNDER_LANE: usize = 16;

/// Lanes a connection made by connect and accept may have in its life.
pub(crate) const LANES_PER_CONN: u32 = 3;

/// Lanes up at once on a mount: each holds a memfd and a mapping in the
/// daemon (vm.max_map_count is 65530); past it a pair has no lane. On an
/// `--allow-other` mount each user but root may hold its `--user-share`
/// of them (`Lanes::quota`), so one user's lanes leave the others theirs.
const MAX_LANES: u64 = 4096;

pub(super) struct Lane {
    pub(super) region: Region,
    pub(super) fd: std::os::fd::OwnedFd,
    /// End A's socket (ring 0's writer), end B's.
    pub(super) socks: [Arc<Socket>; 2],
    /// Who claimed each end: the claiming thread and its status, the
    /// caller of the drain of that end's ring.
    pub(super) claimed: [Option<(u32, ProcStatus)>; 2],
    /// Who asked for the lane (its thread and status): the caller of the
    /// drain of an end nobody claimed, whose ring only the asker's region
    /// could have filled (never the daemon, which no share bounds).
    pub(super) maker: (u32, ProcStatus),
    /// One of the mount's lanes, held by the asker until the way down.
    count: Charge,
    phase: Phase,
    /// Requests parked until the way down is done (`lane_down`).
    waiters: Vec<Waiter>,
    /// Each end's wake-up for poll and epoll (lane_ready.rs).
    pub(super) evs: Evs,
    /// Per end, the threads of its claimer's process whose poll of the
    /// data file after the claim was answered "ready" (`lane_polled`):
    /// a second one takes the lane down.
    told: [Vec<u32>; 2],
    /// Made by connect/accept (arg 5/6: an asker holds one end), not a
    /// socketpair (arg 3: its maker holds both).
    joined: bool,
    /// Seqpacket: the rings carry records.
    pub(super) record: bool,
    /// A lane through the daemon (an observer sees it): end B's region,
    /// `region` being end A's (src/engine/lane/through.rs). None: direct.
    pub(super) through: Option<Box<through::Far>>,
    /// The daemon's descriptors above (the memfd, the four eventfds), on
    /// the asker's descriptor budget as a deposit's are (ChargedFd): given
    /// back when the lane is dropped and they close (last: after them).
    _fds: Charge,
    /// Its rings' bytes on the payer's queued bytes (`lane_make`), until
    /// the way down moves what they hold into the queues.
    rings: Charge,
}

/// Where a lane is on its way down.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Up,
    /// `Through` is set and an end's busy word was up: the rings are
    /// drained once neither is, or at the deadline (the stuck end reset).
    Draining(Instant),
    Down,
}

impl Lane {
    pub(super) fn is_up(&self) -> bool {
        self.phase == Phase::Up
    }

    /// Through the daemon, end B's own half (end `e` 1's); else None: end
    /// `e` uses the lane's region, memfd and eventfds.
    fn far(&self, e: usize) -> Option<&through::Far> {
        self.through.as_deref().filter(|_| e == 1)
    }

    /// End `e`'s region: the lane's one, or through the daemon its own.
    pub(super) fn region_of(&self, e: usize) -> &Region {
        self.far(e).map_or(&self.region, through::Far::region)
    }

    /// End `e`'s region's memfd.
    fn fd_of(&self, e: usize) -> &std::os::fd::OwnedFd {
        self.far(e).map_or(&self.fd, through::Far::fd)
    }

    /// End `e`'s region's eventfds.
    pub(super) fn evs_of(&self, e: usize) -> &Evs {
        self.far(e).map_or(&self.evs, through::Far::evs)
    }

    /// End `e`'s busy word (through the daemon: side A of its region).
    fn busy(&self, e: usize) -> &std::sync::atomic::AtomicU32 {
        match &self.through {
            Some(_) => self.region_of(e).word(busy_word(0)),
            None => self.region.word(busy_word(e)),
        }
    }

    /// The grant of side `side` of this lane, `tag` its memfd's depot tag.
    /// Through the daemon each end is side A of a region of its own.
    fn grant(&self, tag: u64, side: usize) -> LaneGrant {
        let region = self.region_of(side);
        let [cap0, cap1] = region.caps();
        let [sndbuf0, sndbuf1] = region.budgets().map_or([0, 0], |(b, _)| b);
        let side = if self.through.is_some() { 0 } else { side };
        LaneGrant {
            tag,
            side: side_word(side, self.record),
            cap0: cap0 as i32,
            cap1: cap1 as i32,
            sndbuf0: sndbuf0 as i64,
            sndbuf1: sndbuf1 as i64,
        }
    }
}

/// Descriptors a lane holds in the daemon: its memfd and four eventfds
/// (each end's, each end's daemon-only one: lane_ready.rs).
pub(super) const LANE_FDS: u64 = 1 + super::lane_ready::EVS_FDS;

/// The mount's lanes, by socket number (both ends of each).
pub struct Lanes {
    up: AtomicUsize,
    pub(super) map: Mutex<HashMap<u64, Arc<Mutex<Lane>>>>,
    /// Lanes up, per user (`MAX_LANES`, shared out by `--user-share`).
    pub(crate) quota: Arc<Quota>,
    /// Lanes whose way down waits for an end's busy word, for the drainer
    /// thread (started at the first), which wakes on `more`.
    draining: Mutex<Vec<Arc<Mutex<Lane>>>>,
    more: Condvar,
    drainer: Worker,
    /// The mover of the lanes through the daemon (lane/through.rs).
    pub(super) mover: through::Mover,
}

impl Lanes {
    pub fn new(user_share_permille: u64) -> Lanes {
        let quota = Arc::new(Quota::new("lanes"));
        quota.set_max(MAX_LANES);
        quota.set_user_share(user_share_permille);
        Lanes {
            up: AtomicUsize::new(0),
            map: Mutex::default(),
            quota,
            draining: Mutex::default(),
            more: Condvar::new(),
            drainer: Worker::default(),
            mover: through::Mover::default(),
        }
    }

    /// Set once the engine is in its Arc (the drainer holds it weakly).
    pub(crate) fn attach(&self, eng: &Arc<Engine>) {
        self.drainer.attach(eng);
        self.mover.attach(eng);
    }

    /// Hands `lane` to the drainer thread (started at the first).
    fn wait_busy(&self, lane: Arc<Mutex<Lane>>) {
        self.drainer
            .start("udsfs-lane-drain", "lane drainer", drainer);
        self.draining.lock().push(lane);
        self.more.notify_one();
    }
}

/// The drainer thread: finishes each lane's way down once neither end is
/// busy, or at its deadline (`Engine::lane_end`), looking every
/// `DRAIN_LOOK` while any waits; the requests parked on it are woken then.
fn drainer(eng: &Weak<Engine>) {
    loop {
        let Some(e) = eng.upgrade() else { return };
        let lanes = {
            let mut q = e.lanes.draining.lock();
            while q.is_empty() {
                if e.lanes
                    .more
                    .wait_for(&mut q, Duration::from_millis(500))
                    .timed_out()
                    && Arc::strong_count(&e) == 1
                {
                    return;
                }
            }
            q.clone()
        };
        for l in &lanes {
            let _ = e.lane_end(l, true, None);
        }
        e.lanes
            .draining
            .lock()
            .retain(|l| l.lock().phase != Phase::Down);
        drop(e);
        std::thread::sleep(DRAIN_LOOK);
    }
}

/// A ring's capacity for a sender's SO_SNDBUF: a power of two (the ends
/// publish only the low 32 bits of their positions, which then still name
/// the offset). A direct lane's writer is charged as Linux charges the
/// sender (`charged`: the rings' framing; region.rs `with_budgets`), and
/// its ring holds all that lets in (`ring_bytes_for`); through the daemon
/// (uncharged) the ring is the bound, at most the buffer.
fn ring_cap(sndbuf: usize, charged: Option<Framing>) -> u32 {
    if let Some(framing) = charged {
        let want = ring_bytes_for(sndbuf, framing).next_power_of_two();
        return want.clamp(MIN_CAP as usize, MAX_CAP as usize) as u32;
    }
    let c = cap_for_sndbuf(sndbuf.min(u32::MAX as usize) as u32);
    if c.is_power_of_two() {
        c
    } else {
        c.next_power_of_two() / 2
    }
}

/// Whether `s` may have a lane now, and its peer and SO_SNDBUF. EAGAIN:
/// not yet (an embryo not accepted, bytes or a pending error queued, a
/// reader or writer blocked in the daemon that would not hear of the
/// ring's bytes: any but those of the end's asker that the grant wakes,
/// `goes_on`); EOPNOTSUPP: never (unconnected, closed, dgram,
/// SO_PASSCRED, SO_PEEK_OFF, shut down, polled).
fn eligible(s: &Arc<Socket>) -> Result<(Arc<Socket>, usize)> {
    let mut st = s.lock();
    let peer = match &st.conn {
        Conn::Connected {
            peer_gone: false,
            listener: Some(_),
            ..
        } => return Err(Errno::EAGAIN),
        Conn::Connected {
            peer,
            peer_gone: false,
            listener: None,
            ..
        } => peer.clone(),
        _ => return Err(Errno::EOPNOTSUPP),
    };
    let kind = matches!(s.ty, SockType::Stream | SockType::Seqpacket);
    // SO_PEEK_OFF moves MSG_PEEK's start: the ring's peek does not.
    let peek_off = st.queue.peek_off() >= 0;
    if !kind
        || st.may_passcred()
        || st.shutdown != 0
        || peek_off
        || s.polled.load(Ordering::Acquire)
    {
        log::debug!(
            "socket {}: no lane for good (passcred {}, shut {}, peek_off {peek_off}, polled {})",
            s.id,
            st.may_passcred(),
            st.shutdown,
            s.polled.load(Ordering::Acquire)
        );
        return Err(Errno::EOPNOTSUPP);
    }
    // What waits of the end's asker (a poll registration, a plain read)
    // is woken by the grant (`lane_wake`) and goes on through the lane.
    let asker = s.polls_mine.load(Ordering::Acquire);
    let reads = std::cell::Cell::new(0);
    let waits = |l: &super::wait::WaitList| {
        l.any_live_but(|w| {
            let read = w.read_by().is_some();
            reads.set(reads.get() + usize::from(read));
            !(read && reads.get() > READS_UNDER_LANE) && goes_on(w, asker)
        })
    };
    let queued = st.queue.bytes() != 0 || !st.queue.msgs().is_empty() || st.err.is_some();
    let quiet = !queued && !waits(st.queue.readers()) && !waits(st.queue.writers());
    if !quiet {
        log::debug!(
            "socket {}: no lane yet (queued {queued}, someone waits in the daemon; asker {asker})",
            s.id
        );
        return Err(Errno::EAGAIN);
    }
    Ok((peer, st.sndbuf))
}

/// Whether waiter `w` of an end whose asker is process `asker`
/// (`polls_mine`: its library answers the end's polls and restarts a read
/// answered EINTR when the lane came up) goes on through a lane made now,
/// woken by the grant (`lane_wake`): a poll registration (the poller, the
/// library, polls again and finds the lane), or a plain read by one of the
/// asker's threads (answered EINTR, `lane_kicks`; its library asks, claims
/// the end and reads the ring). Anything else (a parked write, a message
/// call, another process's read) would not hear of the ring's bytes.
fn goes_on(w: &Waiter, asker: i32) -> bool {
    asker > 0 && (w.rearms() || w.read_by().is_some_and(|t| thread_of(t, asker)))
}

/// A grant's `side` word: the side, and whether the rings carry records.
fn side_word(side: usize, record: bool) -> i32 {
    side as i32 | if record { LANE_RECORD } else { 0 }
}

/// Ring bytes the daemon could not queue: said once (rate-limited).
fn lane_lost(sock: &Socket, n: usize, r: Result<usize>) {
    limited!(
        warn,
        "socket {}: {n} bytes of its lane could not be queued: {r:?}",
        sock.id
    );
}

/// Whether `s` is an end of a socketpair the caller's own process made
/// (its SO_PEERCRED: the caller's thread group and euid). A connection's
/// end is not: its other end is another process's, which never asked for
/// a region whose busy word the asker could hold up under its calls
/// (adversarial_lanes.sh peer_lane).
fn made_by(s: &Socket, c: &Caller) -> bool {
    let st = c.status();
    s.paired.load(Ordering::Acquire)
        && s.lock()
            .conn
            .cred()
            .is_some_and(|p| p.cred.pid == st.tgid && p.cred.uid == st.uids[1])
}

/// The user a connection's lane is charged to (its one of the mount's
/// lanes and the daemon's five descriptors for it): the user whose call
/// made the connection, fixed then: the connecting process's (an accepted
/// end's SO_PEERCRED), a socketpair's maker (either end's). Not the end
/// whose ask makes the lane, which the other end could choose by asking
/// first or later: a client could put its lanes on a server's user.
fn payer(s: &Socket, peer: &Socket) -> Option<u32> {
    let made = if peer.accepted.load(Ordering::Acquire) {
        peer
    } else {
        s
    };
    made.lock().conn.cred().map(|p| p.cred.uid)
}

/// Who writes each ring of a lane (a fault rule by pid or uid selects by
/// it): its end's claiming process and fs user, where claimed.
fn senders(claimed: &[Option<(u32, ProcStatus)>; 2]) -> [Option<(u32, u32)>; 2] {
    claimed
        .each_ref()
        .map(|c| c.as_ref().map(|(_, st)| (st.tgid as u32, st.uids[3])))
}

/// Whether thread `tid` (the daemon's view) is one of process `tgid`'s.
fn thread_of(tid: u32, tgid: i32) -> bool {
    tid as i32 == tgid || std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists()
}

impl Engine {
    /// `Op::LaneClaim` with arg 3, on the first socket of a pair the library
    /// just made: the pair's region (its depot tag and capacities; `side` 0
    /// is this socket), mapped by the library at once, each end claimed by
    /// the process that uses it first (arg 0). ENOPROTOOPT: the mount has no
    /// lanes (the library stops asking); EOPNOTSUPP: not this pair.
    pub fn lane_prepare(&self, s: &Arc<Socket>, c: &Caller) -> Result<LaneGrant> {
        if !self.cfg.lanes {
            return Err(Errno::ENOPROTOOPT);
        }
        let lane = {
            let mut map = self.lanes.map.lock();
            if map.contains_key(&s.id) {
                return Err(Errno::EOPNOTSUPP);
            }
            // Not now is not at all: the library asks this once per pair.
            self.lane_insert(&mut map, s, c, false)
                .map_err(|e| match e {
                    Errno::EAGAIN => Errno::EOPNOTSUPP,
                    e => e,
                })?
        };
        let l = lane.lock();
        let tag = self.lane_fd(&l, s, c)?;
        Ok(l.grant(tag, 0))
    }

    /// Makes `s`'s connection's lane (`lane_make`) and files it under both
    /// sockets, with the map locked by the caller. `up` counts it *before*
    /// the sockets are looked at: a request through the daemon that queues
    /// or parks on either socket after that look (under the socket's lock)
    /// then sees `up` and waits for the map in its `lane_down` after it ran
    /// (src/fuse/io.rs), which takes the new lane down again; counted
    /// after, such a request could miss it, and its bytes would sit in the
    /// engine's queue while the reader sleeps on the ring.
    fn lane_insert(
        &self,
        map: &mut HashMap<u64, Arc<Mutex<Lane>>>,
        s: &Arc<Socket>,
        c: &Caller,
        joined: bool,
    ) -> Result<Arc<Mutex<Lane>>> {
        self.lanes.up.fetch_add(1, Ordering::SeqCst);
        let l = match self.lane_make(s, c, joined) {
            Ok(l) => Arc::new(Mutex::new(l)),
            Err(e) => {
                self.lanes.up.fetch_sub(1, Ordering::SeqCst);
                return Err(e);
            }
        };
        let ids = l.lock().socks.each_ref().map(|s| s.id);
        for id in ids {
            map.insert(id, l.clone());
        }
        {
            let g = l.lock();
            if let Some(far) = &g.through {
                far.start(&self.lanes.mover, ids, &g.evs);
            }
        }
        Ok(l)
    }

    /// The region's memfd, kept for the caller to claim over the fd
    /// channel: its depot tag.
    fn lane_fd(&self, l: &Lane, s: &Arc<Socket>, c: &Caller) -> Result<u64> {
        let side = usize::from(l.socks[0].id != s.id);
        let fd = l.fd_of(side).try_clone().map_err(|_| Errno::EMFILE)?;
        let fd = ChargedFd::new(&self.depot.quota, c.fsuid, fd)?;
        self.depot
            .keep_received(s.id, c.fsuid, Arc::new(fd))
            .ok_or(Errno::ETOOMANYREFS)
    }

    /// `Op::LaneClaim` with arg 5, on a socket connect() or accept() gave a
    /// process running the library, at its first plain call: this end is
    /// claimed for the caller's process, the connection's region made
    /// first if it has none and may have one now (`eligible`: both ends
    /// accepted, quiet, nobody blocked in the daemon). The grant carries
    /// the region's depot tag: each end's process maps it. EAGAIN: not
    /// now, the library asks again at a later call. `mine` (arg 6): the
    /// asker's library answers every poll of this end and moves its epoll
    /// registrations to the lane (`polls_mine`, `lane_polled`).
    pub fn lane_join(&self, s: &Arc<Socket>, c: &Caller, mine: bool) -> Result<LaneGrant> {
        if !self.cfg.lanes {
            return Err(Errno::ENOPROTOOPT);
        }
        if mine {
            s.polls_mine.store(c.status().tgid, Ordering::Release);
        }
        let lane = {
            let mut map = self.lanes.map.lock();
            match map.get(&s.id) {
                Some(l) => l.clone(),
                None => {
                    s.lane_asked.store(true, Ordering::Release);
                    let l = self.lane_insert(&mut map, s, c, true).inspect_err(|e| {
                        log::debug!("socket {}: lane asked by thread {}: {e}", s.id, c.tid)
                    })?;
                    drop(map);
                    self.lane_wake(&l);
                    l
                }
            }
        };
        let got = self.claim_end(&lane, s, c, true);
        log::debug!(
            "socket {}: lane asked by thread {} (polls its own: {mine}): {:?}",
            s.id,
            c.tid,
            got.as_ref().map(|_| ())
        );
        got
    }

    /// `Op::LaneClaim` arg 7: the library of the caller's process stops
    /// asking for `s`'s lane (its asks ran out, or were refused for good):
    /// the end no longer counts as asked, and its asker's reads parked in
    /// the daemon no longer let a lane be made under them (`goes_on`): the
    /// library would not take their EINTR for the daemon's.
    pub fn lane_stop(&self, s: &Socket, c: &Caller) {
        let tgid = c.status().tgid;
        if s.polls_mine
            .compare_exchange(tgid, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            s.lane_asked.store(false, Ordering::Release);
        }
    }

    /// `Op::LaneClaim` (arg 0): this end of `s`'s lane for the caller's
    /// process, which alone moves its bytes from now on. A second claim of
    /// an end (another process) takes the lane down: ENOENT.
    pub fn lane_claim(&self, s: &Arc<Socket>, c: &Caller) -> Result<LaneGrant> {
        let lane = self.lanes.map.lock().get(&s.id).cloned();
        let lane = lane.ok_or(Errno::EOPNOTSUPP)?;
        self.claim_end(&lane, s, c, false)
    }

    /// `s`'s end of `lane` claimed for the caller's process (arg 0, or the
    /// asker's own end at arg 5), with the region's memfd deposited for it
    /// when `give_fd` (its depot tag in the grant; else 0: the caller maps
    /// the region already). A second claim of an end (another process)
    /// takes the lane down, as the ring is single-writer, single-reader:
    /// ENOENT.
    fn claim_end(
        &self,
        lane: &Arc<Mutex<Lane>>,
        s: &Arc<Socket>,
        c: &Caller,
        give_fd: bool,
    ) -> Result<LaneGrant> {
        let mut l = lane.lock();
        if !l.is_up() {
            // An asker (`give_fd`) met a way down still draining (an end's
            // busy word was up): a lane may be made once it is out of the
            // map, so it asks again later. ENOENT would end its asks for
            // good and the connection would get no lane again
            // (lanes_live_capture.sh: the capture's way down met the server
            // mid-copy, 2 runs of 12 under load).
            return Err(if give_fd {
                Errno::EAGAIN
            } else {
                Errno::ENOENT
            });
        }
        let side = usize::from(l.socks[0].id != s.id);
        if l.claimed[side].is_some() {
            drop(l);
            let _ = self.lane_down(s, None);
            return Err(Errno::ENOENT);
        }
        // A fault rule by pid or uid selects a ring by its writer, known
        // only now (its end's one claimer writes it).
        let mut claimed = l.claimed.clone();
        claimed[side] = Some((c.tid, c.status().clone()));
        if self.faults.any() {
            let socks = l.socks.clone();
            let through = l.through.is_some();
            drop(l);
            if self.lane_observed_as(&socks, senders(&claimed), through) {
                let _ = self.lane_down(s, None);
                return Err(Errno::ENOENT);
            }
            l = lane.lock();
            if !l.is_up() || l.claimed[side].is_some() {
                drop(l);
                let _ = self.lane_down(s, None);
                return Err(Errno::ENOENT);
            }
        }
        let tag = if give_fd { self.lane_fd(&l, s, c)? } else { 0 };
        l.claimed[side] = claimed[side].take();
        Ok(l.grant(tag, side))
    }

    /// `Op::LaneClaim` arg 4, after arg 3 or 5 on the same socket: the lane's
    /// two eventfds for its asker, and the daemon-only eventfd of each end
    /// it holds (lane_ready.rs): a connection's asker holds `s`'s end only,
    /// and must not get the peer's (it could drain it: the peer would sleep
    /// through the way down); a socketpair's maker holds both.
    pub fn lane_events(&self, s: &Arc<Socket>, c: &Caller) -> Result<LaneEvents> {
        let lane = self.lanes.map.lock().get(&s.id).cloned();
        let lane = lane.ok_or(Errno::EOPNOTSUPP)?;
        let l = lane.lock();
        if !l.is_up() {
            return Err(Errno::ENOENT);
        }
        if l.through.is_some() {
            // Its own region's: side A its end, side B the daemon.
            let side = usize::from(l.socks[0].id != s.id);
            return l
                .evs_of(side)
                .deposit(&self.depot, s.id, c.fsuid, [true, false]);
        }
        let mine = [0, 1].map(|i| !l.joined || l.socks[i].id == s.id);
        l.evs.deposit(&self.depot, s.id, c.fsuid, mine)
    }

    fn lane_make(&self, s: &Arc<Socket>, c: &Caller, joined: bool) -> Result<Lane> {
        let (peer, sndbuf_a) = eligible(s)?;
        let (back, sndbuf_b) = eligible(&peer)?;
        if back.id != s.id || peer.ty != s.ty {
            return Err(Errno::EOPNOTSUPP);
        }
        // An observer that may see or select the connection sees every
        // message through the daemon: not now, before the connection
        // spends one of its lanes (asked again later: the observer may go).
        // A connection only a capture sees gets a lane through the daemon
        // (its mover runs the taps: src/engine/lane/through.rs).
        let pair = [s.clone(), peer.clone()];
        let through = self.lane_observed(&pair, [None, None]);
        if through && (!joined || !through::ON || self.lane_selected(&pair, [None, None])) {
            return Err(Errno::EAGAIN);
        }
        // Arg 3 (a socketpair's) only for the asker's own pair; a
        // connection's lane (arg 5) needs both ends' asks instead: each
        // asks once its connect or accept has returned, so neither end's
        // set-up (the accepter's open of its data file) is still to come.
        if !joined && (!made_by(s, c) || !made_by(&peer, c)) {
            return Err(Errno::EOPNOTSUPP);
        }
        if joined && !peer.lane_asked.load(Ordering::Acquire) {
            log::debug!(
                "socket {}: no lane yet (its peer {} has not asked)",
                s.id,
                peer.id
            );
            return Err(Errno::EAGAIN);
        }
        // One of the mount's lanes and the daemon's five descriptors, on
        // the user whose call made the connection (`payer`): refused past
        // the mount's or that user's share, before the connection spends
        // one of its lanes.
        let payer = payer(s, &peer).unwrap_or(c.fsuid);
        // (Through the daemon: two regions, each one of the lanes.)
        let regions = if through { 2 } else { 1 };
        let mut count = Charge::new(self.lanes.quota.clone());
        count.set(payer, regions).map_err(|_| Errno::EOPNOTSUPP)?;
        let mut fds = Charge::new(self.depot.quota.clone());
        fds.set(payer, regions * LANE_FDS).map_err(refused_errno)?;
        // And, where other users share the mount, its rings' bytes
        // (through the daemon: each end's region's two) on the payer's
        // share of --max-queued-bytes: they are queued bytes the daemon's
        // memfd keeps (each page a ring touched, read or not, for the
        // lane's life), moved into the queues at the way down
        // (adversarial_lanes5.sh ring_bound: B's 12 laned pairs held three
        // times its share). Root's are on no share, as its queues; on a
        // mount without --allow-other the bound stays the queues' alone.
        // Rings take at most half the payer's share: the other half stays
        // for its sends through the daemon, so a user with many idle
        // lanes (a pool of connections) still sends on its others; past
        // it, a new connection goes through the daemon.
        let framing = match s.ty {
            SockType::Seqpacket => Framing::Record,
            _ => Framing::Stream,
        };
        let charged = (!through).then_some(framing);
        let caps = [ring_cap(sndbuf_a, charged), ring_cap(sndbuf_b, charged)];
        let mut rings = Charge::new(self.queued.clone());
        let limit = self.queued.user_limit();
        if payer != 0 && self.cfg.max_queued_bytes != 0 && limit != u64::MAX {
            let bytes = regions * (u64::from(caps[0]) + u64::from(caps[1]));
            if self.queued.user_used(payer) + bytes > limit / 2 {
                return Err(Errno::EOPNOTSUPP);
            }
            rings.set(payer, bytes).map_err(|_| Errno::EOPNOTSUPP)?;
        }
        // A few lanes in a connection's life (the way down may wait
        // BUSY_WAIT for a peer's busy word: a few times per connection, not
        // at will). More than one: a lane an end's ask made while the other
        // end's call was on its way through the daemon goes down at once.
        let most = if joined { LANES_PER_CONN } else { 1 };
        let made = [s, &peer].map(|x| x.lanes_made.fetch_add(1, Ordering::AcqRel));
        if made.iter().any(|&n| n >= most) {
            return Err(Errno::EOPNOTSUPP);
        }
        let (fd, mut region) = Region::create(caps).map_err(Errno::from_raw)?;
        if !through {
            // SO_SNDBUF fits an int (bufsize.rs).
            let budget = |b: usize| b.min(i32::MAX as usize) as u32;
            region = region.with_budgets([budget(sndbuf_a), budget(sndbuf_b)], framing);
        }
        let evs = Evs::new()?;
        let through = match through {
            true => Some(Box::new(through::Far::new(
                &region,
                [caps[1], caps[0]],
                payer,
            )?)),
            false => None,
        };
        region.set_state(State::Direct);
        Ok(Lane {
            through,
            region,
            fd,
            socks: [s.clone(), peer],
            claimed: [None, None],
            maker: (c.tid, c.status().clone()),
            count,
            phase: Phase::Up,
            waiters: Vec::new(),
            evs,
            told: [Vec::new(), Vec::new()],
            joined,
            record: s.ty == SockType::Seqpacket,
            _fds: fds,
            rings,
        })
    }

    /// Takes `s`'s lane down if it has one (see the module's comment):
    /// called before any request on `s` other than the lane's own. Ok: it
    /// has none (any more); its bytes are in the engine's queues. EAGAIN:
    /// the way down waits for an end's busy word (`lane_end`), on no
    /// request's thread: `w`, if given, is woken when it is done (or reset
    /// at `BUSY_WAIT`), and the request that needs it parks until then.
    #[track_caller]
    pub fn lane_down(&self, s: &Socket, w: Option<&Waiter>) -> Result<()> {
        match self.lane_of(s) {
            Some(lane) => {
                // Which request took it down (RUST_LOG=udsfs::engine::lane=debug).
                log::debug!(
                    "socket {}: lane down at {}",
                    s.id,
                    std::panic::Location::caller()
                );
                self.lane_end(&lane, true, w)
            }
            None => Ok(()),
        }
    }

    fn lane_of(&self, s: &Socket) -> Option<Arc<Mutex<Lane>>> {
        if self.lanes.up.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.lanes.map.lock().get(&s.id).cloned()
    }

    /// As `lane_down`, for a request that only reads the socket's state:
    /// while neither end is claimed (the rings are empty) the lane stays.
    #[track_caller]
    pub fn lane_down_if_claimed(&self, s: &Socket, w: Option<&Waiter>) -> Result<()> {
        let Some(lane) = self.lane_of(s) else {
            return Ok(());
        };
        let unclaimed = {
            let l = lane.lock();
            l.is_up() && l.claimed.iter().all(Option::is_none)
        };
        if unclaimed {
            return Ok(());
        }
        log::debug!(
            "socket {}: lane down at {}",
            s.id,
            std::panic::Location::caller()
        );
        self.lane_end(&lane, true, w)
    }

    /// Whether an observer may see or select a message of the connection
    /// between `socks`, its rings written by `senders` (each end's
    /// claiming process and user, where known): a capture whose reader may
    /// see it (`Taps::may_see`: the rule that decides what the reader gets,
    /// who may open either end), a fault rule that may act on its sends
    /// (`Rules::may_select`: the test the message path makes), or messages
    /// a rule still holds back in either queue (the lane's bytes would
    /// pass them). Such a connection has no lane: its bytes go through the
    /// daemon, its taps and rules (stage d would keep it, `Through`). The
    /// one decision for making a lane (`lane_make`), claiming an end
    /// (`claim_end`) and an observer's coming (`lanes_observed_down`).
    fn lane_observed(&self, socks: &[Arc<Socket>; 2], senders: [Option<(u32, u32)>; 2]) -> bool {
        self.lane_observed_as(socks, senders, false)
    }

    /// `lane_observed` but for the capture taps, which a lane through the
    /// daemon runs (src/engine/lane/through.rs): a fault rule that may
    /// select it, or messages a rule holds back.
    pub(super) fn lane_selected(
        &self,
        socks: &[Arc<Socket>; 2],
        senders: [Option<(u32, u32)>; 2],
    ) -> bool {
        self.lane_observed_as(socks, senders, true)
    }

    fn lane_observed_as(
        &self,
        socks: &[Arc<Socket>; 2],
        senders: [Option<(u32, u32)>; 2],
        through: bool,
    ) -> bool {
        // Pairs with `lanes_observed_down`'s: an observer attached (its
        // relaxed `any` stored) before the maker counted `up` is seen here,
        // else its scan sees `up` and this lane.
        fence(Ordering::SeqCst);
        if socks.iter().any(|x| x.lock().queue.holds_back()) {
            return true;
        }
        if !through
            && self
                .taps
                .may_see(|| socks.each_ref().map(|x| self.openers(x)))
        {
            return true;
        }
        if !self.faults.any() {
            return false;
        }
        let names = socks.each_ref().map(|x| x.lock().name.clone());
        let ends = [0, 1].map(|i| self.fault_end(socks[i].id, names[i].as_deref()));
        self.faults.may_select(socks[0].ty, ends, senders)
    }

    /// A capture opened, a fault rule added, or a socket received by
    /// another user (who may see it now): each lane the observers may now
    /// see or select goes down (its bytes through the taps and rules as
    /// they are drained, those of a lane that waits for a busy word a
    /// little later); the others stay up. Called after the observer is in
    /// place, so that a lane made meanwhile sees it (`lane_make` asks under
    /// the map lock, looked at here after).
    pub fn lanes_observed_down(&self) {
        fence(Ordering::SeqCst);
        if self.lanes.up.load(Ordering::SeqCst) == 0 {
            return;
        }
        let all: Vec<_> = self.lanes.map.lock().values().cloned().collect();
        // Filed under both sockets: each looked at once.
        let mut seen = std::collections::HashSet::new();
        for l in all {
            if seen.insert(Arc::as_ptr(&l)) {
                self.lane_down_if_observed(&l);
            }
        }
    }

    /// `lanes_observed_down` for `s`'s lane only (a new opener of `s`).
    pub(crate) fn lane_observed_down(&self, s: &Socket) {
        if !self.taps.any() {
            return;
        }
        if let Some(l) = self.lane_of(s) {
            self.lane_down_if_observed(&l);
        }
    }

    fn lane_down_if_observed(&self, lane: &Arc<Mutex<Lane>>) {
        let (socks, claimed, through) = {
            let l = lane.lock();
            if !l.is_up() {
                return;
            }
            (l.socks.clone(), l.claimed.clone(), l.through.is_some())
        };
        if self.lane_observed_as(&socks, senders(&claimed), through) {
            let _ = self.lane_end(lane, true, None);
        }
    }

    /// A poll of `s` through the daemon (a FUSE POLL by thread `tid`:
    /// poll, select, epoll_ctl, epoll_wait's look). By a holder whose
    /// library does not answer it from the ring (lane_ready.rs): a kernel
    /// epoll set holding the data file would not hear of the ring's bytes,
    /// so the socket has no lane from now on. By the process whose library
    /// said its polls are its own (`polls_mine`): no mark without a lane;
    /// with one up, true (answered "ready": the poller returns to its
    /// library's wrapper, which claims the end if it has yet to, moves its
    /// registrations to the lane's eventfd and looks at the ring). After
    /// the claim that holds once per thread (`told`): a thread asleep in
    /// the kernel on the data file when another thread claimed (slapd's
    /// listener in epoll_wait while a worker reads) polls once more at the
    /// grant's wake-up; a second poll is one the library did not take over
    /// (a raw epoll_wait, a registration it could not move), which would
    /// not hear of the ring's bytes: the lane goes down, as before.
    pub fn lane_polled(&self, s: &Socket, tid: u32) -> bool {
        if !self.cfg.lanes {
            return false;
        }
        let mine = s.polls_mine.load(Ordering::Acquire);
        if mine > 0 && thread_of(tid, mine) {
            match self.lane_claimed(s) {
                None => return false,
                Some(false) => return true,
                Some(true) if self.first_told(s, tid) => return true,
                Some(true) => {}
            }
        }
        if !s.polled.swap(true, Ordering::AcqRel) {
            log::debug!(
                "socket {}: polled by thread {tid} (its library's process: {mine}): no lane from now on",
                s.id
            );
        }
        self.lane_down_by_poll(s, tid, mine, "poll");
        false
    }

    /// `Op::LaneClaim` arg 9: the library of thread `tid` left a
    /// registration of `s` on its data file in a kernel set (it could not
    /// move it to the lane: EPOLLEXCLUSIVE, the same end twice in one set,
    /// a nested set, more than 64 poll entries), whose first poll after
    /// the claim `lane_polled` would answer "ready": the polled rule's way
    /// down now.
    pub fn lane_left_polled(&self, s: &Socket, tid: u32) {
        if !self.cfg.lanes {
            return;
        }
        s.polled.store(true, Ordering::Release);
        let mine = s.polls_mine.load(Ordering::Acquire);
        self.lane_down_by_poll(s, tid, mine, "registration left on its data file");
    }

    /// Whether thread `tid`'s poll of `s`'s claimed end is its first since
    /// the claim (noted now; at most `WOKEN_KEPT` threads, then none is).
    fn first_told(&self, s: &Socket, tid: u32) -> bool {
        let Some(lane) = self.lanes.map.lock().get(&s.id).cloned() else {
            return false;
        };
        let mut l = lane.lock();
        let side = usize::from(l.socks[0].id != s.id);
        let told = &mut l.told[side];
        if told.contains(&tid) || told.len() >= WOKEN_KEPT {
            return false;
        }
        told.push(tid);
        log::debug!(
            "socket {}: a poll of thread {tid} after the claim answered ready",
            s.id
        );
        true
    }

    /// The polled rule's way down, with a debug line saying whose poll
    /// took which lane down (`RUST_LOG=udsfs=debug`): only when there was
    /// a lane, so that the polls of sockets without one say nothing.
    fn lane_down_by_poll(&self, s: &Socket, tid: u32, mine: i32, what: &str) {
        if let Some(lane) = self.lane_of(s) {
            log::debug!(
                "socket {}: lane down by a {what} of thread {tid} (its library's process: {mine})",
                s.id
            );
            let _ = self.lane_end(&lane, true, None);
        }
    }

    /// After a FUSE POLL of `s` by `tid` registered `w` (the socket's lock
    /// held for the look): a lane made meanwhile (`up` counted before its
    /// maker looked at the sockets, so the map lock waits for it) would
    /// leave `w` asleep. The library's own poller is woken to poll again;
    /// any other takes the lane down.
    pub fn lane_after_poll(&self, s: &Socket, tid: u32, w: &super::Waiter) {
        if self.lanes.up.load(Ordering::SeqCst) == 0 || self.lane_claimed(s).is_none() {
            return;
        }
        let mine = s.polls_mine.load(Ordering::Acquire);
        if mine > 0 && thread_of(tid, mine) {
            w.clone().wake();
        } else {
            self.lane_down_by_poll(s, tid, mine, "poll registered while the lane was made");
        }
    }

    /// Whether a plain read of `s` by thread `tid`, parked in the daemon
    /// (woken by the grant, `lane_wake`), is answered EINTR now: `s` has a
    /// lane up and `tid` is one of its asker's threads, whose library then
    /// asks whether the EINTR was the lane's (arg 8, `lane_woke`: noted
    /// here for it) and makes the call again, through the ring
    /// (preload/src/restart.rs `retry`). Any other read of a laned socket
    /// took the lane down before it ran.
    pub fn lane_kicks(&self, s: &Socket, tid: u32) -> bool {
        if !self.goes_on_now(s, tid) {
            return false;
        }
        let mut st = s.lock();
        if st.lane_woken.len() >= WOKEN_KEPT {
            st.lane_woken.remove(0);
        }
        st.lane_woken.push(tid);
        true
    }

    /// Whether a read of `s` by thread `tid` would go on through `s`'s
    /// lane: it is up and `tid` one of its asker's threads.
    fn goes_on_now(&self, s: &Socket, tid: u32) -> bool {
        let asker = s.polls_mine.load(Ordering::Acquire);
        asker > 0 && self.lane_claimed(s).is_some() && thread_of(tid, asker)
    }

    /// `Op::LaneClaim` arg 8, after an EINTR of a call on `s` that no
    /// signal handler of the calling thread explains: Ok when it was the
    /// daemon's, a read of the caller's answered so when the lane came up
    /// under it (`lane_kicks`), which its library then makes again;
    /// ENOENT: not (a signal's: the library decides as Linux would).
    pub fn lane_woke(&self, s: &Socket, c: &Caller) -> Result<()> {
        let mut st = s.lock();
        let at = st.lane_woken.iter().position(|&t| t == c.tid);
        at.map(|i| {
            st.lane_woken.remove(i);
        })
        .ok_or(Errno::ENOENT)
    }

    /// After a FUSE read of `s` by `tid` ran (and parked, or not): a lane
    /// made meanwhile by the other end's ask (`up` counted before its look
    /// at the sockets, so the map lock waits for it) must not leave a read
    /// asleep in the daemon. A read of the asker's, which parked after the
    /// look, is woken now to go on through the ring (`lane_kicks`); any
    /// other's would not hear of the ring's bytes: the lane goes down.
    pub fn lane_after_read(&self, s: &Socket, tid: u32) {
        let Some(lane) = self.lane_of(s) else {
            return;
        };
        if self.goes_on_now(s, tid) {
            self.lane_wake(&lane);
        } else {
            let _ = self.lane_end(&lane, true, None);
        }
    }

    /// Whether `s` has a lane up: Some(whether its end is claimed).
    fn lane_claimed(&self, s: &Socket) -> Option<bool> {
        if self.lanes.up.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let lane = self.lanes.map.lock().get(&s.id).cloned()?;
        let l = lane.lock();
        let side = usize::from(l.socks[0].id != s.id);
        l.is_up().then_some(l.claimed[side].is_some())
    }

    /// A new connection lane: every poll registration of both sockets and
    /// every plain read of an end's asker parked in the daemon is woken
    /// (taken off their lists, `goes_on`): a poller asleep in the kernel on
    /// a data file (a poll() of another thread, an epoll set) polls again
    /// (the library's own finds the lane, `lane_polled`; any other takes it
    /// down), a parked read is answered EINTR (`lane_kicks`), which the
    /// asker's library restarts through the ring. Only an end whose library
    /// answers its polls has any here (`eligible`).
    fn lane_wake(&self, lane: &Arc<Mutex<Lane>>) {
        let socks = lane.lock().socks.clone();
        let mut woken: Vec<super::Waiter> = Vec::new();
        for x in socks {
            let asker = x.polls_mine.load(Ordering::Acquire);
            let mine = |w: &Waiter| w.rearms() || goes_on(w, asker);
            let mut st = x.lock();
            let mut all = st.queue.readers().take_where(mine);
            all.extend(st.queue.writers().take_where(mine));
            // (one registration is on both lists: woken once)
            for w in all {
                if !woken
                    .iter()
                    .any(|u| std::ptr::addr_eq(Arc::as_ptr(u), Arc::as_ptr(&w)))
                {
                    woken.push(w);
                }
            }
        }
        woken.into_iter().for_each(|w| w.wake());
    }

    /// `Op::LaneClaim` with arg 1: an end found the region corrupt. The
    /// lane goes down without moving its bytes and the connection is reset.
    pub fn lane_corrupt(&self, s: &Arc<Socket>) {
        let Some(lane) = self.lanes.map.lock().get(&s.id).cloned() else {
            return;
        };
        limited!(
            warn,
            "socket {}: its lane's region broke the protocol: the connection is reset",
            s.id
        );
        let _ = self.lane_end(&lane, false, None);
        let socks = lane.lock().socks.clone();
        for x in socks {
            x.lock().err = Some(Errno::ECONNRESET);
        }
    }

    /// The way down, or its next look (`drain` false: a corrupt region,
    /// taken down at once without its bytes). The first call sets `Through`
    /// and wakes both ends; the rings are drained once neither end's busy
    /// word is up (an end raises it before it looks at the state and moves
    /// bytes: a copy under way finishes first). While one is, EAGAIN: `w`
    /// waits on the lane and the drainer thread looks again. At the
    /// deadline a busy end is taken as stuck (stopped, or hostile): the
    /// rings' published bytes are drained as they are and the stuck end's
    /// socket is reset (ECONNRESET pending, both ways shut: its peer reads
    /// what was published, then EOF), since a copy it finishes later would
    /// land in a ring nobody reads. Nobody's request waits on a thread.
    fn lane_end(&self, lane: &Arc<Mutex<Lane>>, drain: bool, w: Option<&Waiter>) -> Result<()> {
        let mut l = lane.lock();
        let now = Instant::now();
        let deadline = match l.phase {
            Phase::Down => return Ok(()),
            Phase::Draining(at) => at,
            Phase::Up => {
                l.region.set_state(State::Through);
                // Pollers and epoll sets asleep on the ring's eventfds.
                l.evs.signal();
                if let Some(far) = &l.through {
                    far.stop(&self.lanes.mover, &l.evs);
                }
                fence(Ordering::SeqCst);
                now + BUSY_WAIT
            }
        };
        // A corrupt region's busy words mean nothing: no wait.
        let busy = [0, 1].map(|e| drain && l.busy(e).load(Ordering::SeqCst) != 0);
        let stuck = busy.contains(&true);
        if stuck && now < deadline {
            if let Some(w) = w {
                l.waiters.push(w.clone());
            }
            if l.phase == Phase::Up {
                l.phase = Phase::Draining(deadline);
                drop(l);
                self.lanes.wait_busy(lane.clone());
            }
            return Err(Errno::EAGAIN);
        }
        l.phase = Phase::Down;
        // Back to its payer's share only now: a lane whose way down waits
        // (a busy word held up, BUSY_WAIT) is still one of the mount's,
        // its region mapped here; given back at the way down's start, its
        // user made a share more while they waited (adversarial_lanes2.sh
        // share_draining: 40 more past 204).
        let _ = l.count.set(0, 0);
        // The rings' bytes become queued messages, charged as they go
        // (past the share by their skbs' overhead at most: past_bound).
        let _ = l.rings.set(0, 0);
        if stuck {
            limited!(
                warn,
                "socket {}: a lane end stayed busy {BUSY_WAIT:?}: its ring is drained as published and the stuck end reset",
                l.socks[0].id
            );
        }
        if drain && l.through.is_some() {
            self.through_drain(&l);
        } else if drain {
            for d in 0..2 {
                self.lane_drain(&l, d);
            }
        }
        // Out of the map only now: a request on either socket that comes
        // meanwhile (an end that found the lane not Direct and goes on
        // through the daemon) waits in its `lane_down` (parked, or for this
        // lock), so its bytes queue after the ring's.
        {
            let mut map = self.lanes.map.lock();
            for x in &l.socks {
                map.remove(&x.id);
            }
        }
        self.lanes.up.fetch_sub(1, Ordering::SeqCst);
        let waiters = std::mem::take(&mut l.waiters);
        let socks = l.socks.clone();
        drop(l);
        for (x, _) in socks.iter().zip(busy).filter(|(_, b)| *b) {
            x.lock().err = Some(Errno::ECONNRESET);
            let _ = self.shutdown(x, RCV_SHUTDOWN | SEND_SHUTDOWN);
        }
        for w in waiters {
            w.wake();
        }
        Ok(())
    }

    /// Moves ring `d`'s unread bytes into the reader's queue, as sends of
    /// the end that wrote them (a record lane's records one message each).
    fn lane_drain(&self, l: &Lane, d: usize) {
        self.ring_drain(l, &l.region, d, d, false);
    }

    /// `bytes` sent on `sock` whatever its sender's wmem says: SO_SNDBUF
    /// lifted for the one call, put back unless set meanwhile. For bytes a
    /// ring took, whose writer was told they were sent.
    fn send_past_sndbuf(
        &self,
        sock: &Arc<Socket>,
        bytes: &[u8],
        untapped: bool,
        caller: &Caller,
    ) -> Result<usize> {
        let was = std::mem::replace(&mut sock.lock().sndbuf, usize::MAX / 4);
        let r = self.sendmsg(
            sock,
            SendMsg {
                untapped,
                past_bound: true,
                ..SendMsg::new(bytes)
            },
            caller,
            None,
        );
        let mut st = sock.lock();
        if st.sndbuf == usize::MAX / 4 {
            st.sndbuf = was;
        }
        r
    }

    /// Ring `ring` of `r` into the queue of end `1 - d`, as sends of end
    /// `d` (`untapped`: bytes the taps saw already, on their way through
    /// the daemon: src/engine/lane/through.rs).
    pub(super) fn ring_drain(&self, l: &Lane, r: &Region, ring: usize, d: usize, untapped: bool) {
        let head = r.word(dir_word(ring, OFF_HEAD)).load(Ordering::Acquire);
        let tail = r.word(dir_word(ring, OFF_TAIL)).load(Ordering::Acquire);
        let (off, cap) = r.data_area(ring);
        let used = tail.wrapping_sub(head) as usize;
        if used == 0 {
            return;
        }
        if used > cap {
            limited!(
                warn,
                "socket {}: a lane ring's positions are past its size: {used} bytes dropped",
                l.socks[d].id
            );
            return;
        }
        let mut bytes = vec![0u8; used];
        let at = head as usize % cap;
        let first = used.min(cap - at);
        // SAFETY: at + first <= cap and used - first <= cap: inside the ring.
        unsafe {
            std::ptr::copy_nonoverlapping(r.byte_ptr(off + at), bytes.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                r.byte_ptr(off),
                bytes.as_mut_ptr().add(first),
                used - first,
            );
        }
        // An end nobody claimed drains as the lane's asker, never as the
        // daemon (uid 0, which no share bounds).
        let (tid, st) = l.claimed[d].as_ref().unwrap_or(&l.maker);
        let caller = Caller::with_status(*tid, st.clone());
        let sock = &l.socks[d];
        if !l.record {
            // Split where the writer's last writes ended (Linux's skbs:
            // SIOCOUTQ counts each one's overhead); the marks are the
            // peer's to scribble, so only those inside the unread bytes
            // count, at most MARKS pieces.
            let mut cuts: Vec<usize> = r
                .marks(ring)
                .iter()
                .map(|m| m.load(Ordering::Relaxed).wrapping_sub(head) as usize)
                .filter(|&at| at > 0 && at < used)
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            cuts.push(used);
            let mut from = 0;
            for to in cuts {
                let mut rest = &bytes[from..to];
                from = to;
                while !rest.is_empty() {
                    match self.sendmsg(
                        sock,
                        SendMsg {
                            untapped,
                            past_bound: true,
                            ..SendMsg::new(rest)
                        },
                        &caller,
                        None,
                    ) {
                        Ok(n) if n > 0 => rest = &rest[n..],
                        // The ring took the bytes and its writer was told
                        // they were sent: the rest is queued whatever the
                        // sender's wmem says (its pieces' overhead, and
                        // through the daemon a direction's two rings, may
                        // pass SO_SNDBUF; as a record below).
                        Err(Errno::EAGAIN) => {
                            match self.send_past_sndbuf(sock, rest, untapped, &caller) {
                                Ok(n) if n > 0 => rest = &rest[n..],
                                r => return lane_lost(sock, used - to + rest.len(), r),
                            }
                        }
                        r => return lane_lost(sock, used - to + rest.len(), r),
                    }
                }
            }
            return;
        }
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            // Each record: a u32 length, the bytes, padding to 4 (as
            // published by the peer: checked, not trusted).
            let Some(len) = rest
                .get(..4)
                .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as usize)
                .filter(|&n| n <= rest.len() - 4)
            else {
                return lane_lost(sock, rest.len(), Err(Errno::EBADMSG));
            };
            let rec = &rest[4..4 + len];
            rest = &rest[(4 + len.next_multiple_of(4)).min(rest.len())..];
            let mut r = self.sendmsg(
                sock,
                SendMsg {
                    untapped,
                    past_bound: true,
                    ..SendMsg::new(rec)
                },
                &caller,
                None,
            );
            if r == Err(Errno::EAGAIN) {
                // The ring took the record and its writer was told it was
                // sent: it is queued whatever the sender's wmem says (a
                // ring holds more small records than SO_SNDBUF's skbs).
                r = self.send_past_sndbuf(sock, rec, untapped, &caller);
            }
            if r != Ok(len) {
                return lane_lost(sock, rest.len() + len, r);
            }
        }
    }

    /// `f` on `s`'s lane's region, while it has one (the front's tests).
    #[cfg(test)]
    pub(crate) fn lane_region<R>(&self, s: &Socket, f: impl FnOnce(&Region) -> R) -> Option<R> {
        let lane = self.lane_of(s)?;
        let l = lane.lock();
        Some(f(&l.region))
    }

    /// The status files' `lane=` word.
    pub fn lane_status(&self, s: &Socket) -> &'static str {
        if self.lanes.up.load(Ordering::SeqCst) == 0 {
            return "none";
        }
        let lane = self.lanes.map.lock().get(&s.id).cloned();
        match lane {
            Some(l) if l.lock().through.is_some() => "through",
            Some(_) => "direct",
            None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::root;

    /// A lanes engine with a stream socket listening at abstract `name`,
    /// and two thread ids for the rules: root()'s own (pid 1) and this test
    /// thread's, another process's.
    fn two_processes_listening(
        name: &[u8],
    ) -> (
        Arc<Engine>,
        Caller,
        u32,
        u32,
        crate::engine::addr::Addr,
        Arc<Socket>,
    ) {
        let (e, c) = (lanes_engine(), root());
        let (own, other) = (1, nix::unistd::gettid().as_raw() as u32);
        let addr = crate::engine::addr::Addr::Abstract(name.to_vec());
        let srv = e.socket(SockType::Stream, &c);
        e.bind(&srv, &addr, &c).unwrap();
        e.listen(&srv, 8, &c).unwrap();
        (e, c, own, other, addr, srv)
    }

    fn lanes_engine() -> Arc<Engine> {
        Engine::new(crate::engine::Config {
            lanes: true,
            ..crate::engine::Config::small()
        })
    }

    /// An engine with lanes on, each user's bounds at `share_permille` of
    /// the mount's (0: no shares) and `--max-queued-bytes` at `queued`.
    fn lanes_engine_with(share_permille: u64, queued: u64) -> Arc<Engine> {
        Engine::new(crate::engine::Config {
            lanes: true,
            user_share_permille: share_permille,
            max_queued_bytes: queued,
            ..crate::engine::Config::small()
        })
    }

    /// A stream connection on a lanes engine whose client asked first
    /// (EAGAIN: its peer had not) and whose accepted end asked then (the
    /// lane is made, the accepted end's claimed): the engine, the caller,
    /// the client and the accepted socket.
    fn asked_connection(name: &[u8]) -> (Arc<Engine>, Caller, Arc<Socket>, Arc<Socket>) {
        let (e, c) = (lanes_engine(), root());
        let (srv, addr) = listener(&e, name, SockType::Stream, &c);
        let (cli, acc) = connection(&e, &srv, &addr, &c);
        assert_eq!(e.lane_join(&cli, &c, false).map(|_| ()), Err(Errno::EAGAIN));
        e.lane_join(&acc, &c, false).expect("both asked");
        (e, c, cli, acc)
    }

    /// A waiter that counts its wake-ups.
    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicU32);

    impl crate::engine::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A peer that holds its busy word up (stopped mid-copy, or hostile)
    /// keeps no request's thread: the way down answers EAGAIN at once, the
    /// request waits parked, and at BUSY_WAIT the drainer thread drains the
    /// published bytes and resets the stuck end (ECONNRESET, shut down both
    /// ways: its peer reads what was published, then EOF). A connection
    /// gets one lane in its life, so the peer cannot make a new one for
    /// each of the other side's calls.
    #[test]
    fn a_held_busy_word_keeps_no_thread_and_resets_the_stuck_end_once() {
        use udsfs_proto::lane::{Framing, Side};
        let (e, c) = (lanes_engine(), root());
        let (a, b) = e.socketpair(SockType::Stream, &c);
        let g = e.lane_prepare(&a, &c).expect("a fresh pair gets a lane");
        println!("prepared: {g:?}");
        let lane = e.lanes.map.lock().get(&a.id).cloned().unwrap();
        {
            let l = lane.lock();
            let (mut w, _) = l.region.end(Side::A, Framing::Stream);
            assert_eq!(w.write(b"published"), Ok(9));
            l.region.word(busy_word(0)).store(1, Ordering::SeqCst);
        }
        let woken = Arc::new(Woken::default());
        let w: Waiter = woken.clone();
        let t = Instant::now();
        let first = e.lane_down(&b, Some(&w));
        let took = t.elapsed();
        println!("way down with a busy word held: {first:?} after {took:?}");
        assert_eq!(first, Err(Errno::EAGAIN));
        assert!(took < BUSY_WAIT / 5, "the caller waited {took:?}");
        assert_eq!(
            e.lane_status(&a),
            "direct",
            "not drained before the deadline"
        );
        while woken.0.load(Ordering::SeqCst) == 0 && t.elapsed() < BUSY_WAIT * 10 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let done = t.elapsed();
        println!("the waiter woken after {done:?}");
        assert!(done >= BUSY_WAIT && done < BUSY_WAIT * 10, "{done:?}");
        assert_eq!(e.lane_status(&a), "none");
        assert_eq!(e.lane_down(&b, None), Ok(()));
        let (err_a, err_b) = (a.lock().err, b.lock().err);
        let queued = b.lock().queue.bytes();
        println!(
            "stuck end's error {err_a:?}, its peer's {err_b:?}; the peer's queue {queued} bytes"
        );
        assert_eq!(err_a, Some(Errno::ECONNRESET), "the stuck end is reset");
        assert_eq!(err_b, None, "its peer is not");
        assert_eq!(queued, 9, "the published bytes are kept");
        for s in [&a, &b] {
            let again = e.lane_prepare(s, &c);
            println!("a second lane on socket {}: {again:?}", s.id);
            assert_eq!(again.map(|_| ()), Err(Errno::EOPNOTSUPP));
        }
    }

    /// Each end's daemon-only eventfd goes only to a library holding that
    /// end: a connection's asker gets its own end's (its peer, which holds
    /// the end's shared eventfd to wake it and may drain it, must not get
    /// the one that tells the end of the way down:
    /// integration/adversarial_lanes2.sh hup_drained), a socketpair's maker
    /// both; the way down makes each readable, and a drain of the shared
    /// one takes nothing from it.
    #[test]
    fn a_peer_gets_no_ends_daemon_only_eventfd_and_the_way_down_writes_it() {
        use std::os::fd::AsRawFd;
        let count = |fd: i32| {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into a live u64.
            let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
            (n == 8).then_some(v)
        };
        let (e, c, cli, acc) = asked_connection(b"lane-hup");
        e.lane_join(&cli, &c, false)
            .expect("the client claims its end");
        let lane = e.lanes.map.lock().get(&acc.id).cloned().unwrap();
        let cli_side = usize::from(lane.lock().socks[1].id == cli.id);
        let got = e.lane_events(&cli, &c).expect("the client's eventfds");
        println!("the client (side {cli_side}) gets {got:?}");
        let hups = [got.hup0, got.hup1];
        assert_ne!(hups[cli_side], 0, "its own end's daemon-only eventfd");
        assert_eq!(hups[1 - cli_side], 0, "not its peer's");
        let mut tags = vec![got.tag0, got.tag1, hups[cli_side]];
        let files = e.depot.claim(&tags, 0).expect("claimed");
        let peer_ev = files[1 - cli_side].as_raw_fd();
        let acc_tags = e.lane_events(&acc, &c).expect("the accepter's eventfds");
        println!("the accepter gets {acc_tags:?}");
        let acc_hup = [acc_tags.hup0, acc_tags.hup1][1 - cli_side];
        assert_ne!(acc_hup, 0);
        tags = vec![acc_hup];
        let acc_files = e.depot.claim(&tags, 0).expect("claimed");
        e.lane_down(&cli, None).expect("no busy word: down at once");
        // The client (B) drains its peer's shared eventfd at the way down.
        let stolen = count(peer_ev);
        let told = count(acc_files[0].as_raw_fd());
        println!(
            "the peer's drain of the accepter's eventfd: {stolen:?}; the accepter's daemon-only one then: {told:?}"
        );
        assert_eq!(stolen, Some(1));
        assert_eq!(told, Some(1), "the way down reached the accepter anyway");

        let (a, b) = e.socketpair(SockType::Stream, &c);
        e.lane_prepare(&a, &c).expect("a fresh pair gets a lane");
        let pair = e.lane_events(&a, &c).expect("the maker's eventfds");
        println!("a socketpair's maker gets {pair:?}");
        assert!(pair.hup0 != 0 && pair.hup1 != 0, "both ends are its");
        drop(b);
    }

    /// An end's ask while the way down of its connection's lane waits for
    /// the other end's busy word (a copy under way when a capture opened)
    /// is answered EAGAIN, to be asked again, and the ask after the drain
    /// makes the next lane. Before, ENOENT: the asker's library stopped
    /// asking for good and the connection stayed off the lanes.
    #[test]
    fn an_ask_while_the_way_down_drains_is_asked_again() {
        let (e, c, cli, acc) = asked_connection(b"lane-draining");
        e.lane_join(&cli, &c, false)
            .expect("the client claims its end");
        let lane = e.lanes.map.lock().get(&acc.id).cloned().unwrap();
        lane.lock().busy(0).store(1, Ordering::SeqCst);
        assert_eq!(e.lane_down(&cli, None), Err(Errno::EAGAIN), "draining");
        let during = e.lane_join(&acc, &c, false).map(|_| ());
        println!("an ask while the way down drains: {during:?}");
        assert_eq!(during, Err(Errno::EAGAIN));
        lane.lock().busy(0).store(0, Ordering::SeqCst);
        e.lane_down(&cli, None)
            .expect("drained once the busy word is down");
        assert_eq!(e.lane_status(&acc), "none");
        e.lane_join(&acc, &c, false)
            .expect("the accepter asks again");
        e.lane_join(&cli, &c, false)
            .expect("and the client: a lane again");
        assert_eq!(e.lane_status(&acc), "direct");
    }

    /// A lane made again between the way down at a socket's last data file
    /// release and the socket's end (its peer's library asked again, having
    /// seen the first lane go down) goes down with the socket: before, it
    /// stayed up with a closed peer, and the peer's reader slept on its
    /// ring for ever (adversarial_lanes2.sh hup_drained, A in a blocking
    /// recv: 1 EOF in 10 never).
    #[test]
    fn a_lane_made_while_a_socket_is_released_goes_down_with_it() {
        let (e, c, cli, acc) = asked_connection(b"lane-release");
        // The client's data file released: its way down first...
        e.lane_down(&cli, None).expect("no busy word: down at once");
        // ...then the accepter, woken by it, asks again before the put.
        let again = e.lane_join(&acc, &c, false).map(|_| ());
        println!("the accepter's ask between the way down and the put: {again:?}");
        assert_eq!(again, Ok(()), "a second lane (the case to cover)");
        e.put(&cli);
        let status = e.lane_status(&acc);
        println!("the accepter's lane after the client's end: {status}");
        assert_eq!(status, "none");
    }

    /// A connection made by connect and accept gets its lane only when it
    /// is accepted and both ends' libraries asked (the accepter's set-up is
    /// done then); a seqpacket lane says so in the grant, and the records
    /// its ring holds reach the queue one message each at the way down.
    #[test]
    fn a_connection_gets_its_lane_when_both_ends_asked_and_its_records_drain_whole() {
        use udsfs_proto::lane::{Framing, Side};
        let (e, c) = (lanes_engine(), root());
        let (srv, addr) = listener(&e, b"lane-join", SockType::Seqpacket, &c);
        let cli = e.socket(SockType::Seqpacket, &c);
        e.connect(&cli, &addr, &c, None).unwrap();
        let embryo = e.lane_join(&cli, &c, false).map(|_| ());
        println!("the client asks before the accept: {embryo:?}");
        assert_eq!(embryo, Err(Errno::EAGAIN));
        let acc = e.accept(&srv, None).unwrap();
        let g = e
            .lane_join(&acc, &c, false)
            .expect("both asked, both quiet");
        println!("the accepter asks: {g:?}");
        assert_eq!(g.side, LANE_RECORD);
        let g = e
            .lane_join(&cli, &c, false)
            .expect("the client claims its end");
        assert_eq!(g.side, 1 | LANE_RECORD);
        assert_eq!(e.lane_status(&cli), "direct");
        let again = e.lane_join(&cli, &c, false).map(|_| ());
        println!("a second claim of the client's end: {again:?}");
        assert_eq!(again, Err(Errno::ENOENT));
        assert_eq!(e.lane_status(&cli), "none");

        // A second connection: records in the accepter's ring at the way down.
        let cli = e.socket(SockType::Seqpacket, &c);
        e.connect(&cli, &addr, &c, None).unwrap();
        let acc = e.accept(&srv, None).unwrap();
        assert_eq!(e.lane_join(&acc, &c, false).map(|_| ()), Err(Errno::EAGAIN));
        e.lane_join(&cli, &c, false).expect("both asked");
        let lane = e.lanes.map.lock().get(&acc.id).cloned().unwrap();
        {
            let l = lane.lock();
            // The client made the region: it is side A, ring 0 its sends.
            let (mut w, _) = l.region.end(Side::A, Framing::Record);
            for r in [&b"one"[..], b"", b"three"] {
                w.write(r).unwrap();
            }
        }
        e.lane_down(&acc, None).expect("no busy word: down at once");
        let lens: Vec<usize> = acc
            .lock()
            .queue
            .msgs()
            .iter()
            .map(|m| m.data.len())
            .collect();
        println!("the accepter's queue after the way down: {lens:?}");
        assert_eq!(lens, [3, 0, 5]);
    }

    /// A waiter of the lane tests that counts its wake-ups, live (armed)
    /// until the first: a poll registration (`reader` None; it rearms), or
    /// a plain read parked in the daemon by thread `reader` (exclusive).
    #[derive(Default)]
    struct Waiting {
        reader: Option<u32>,
        woken: std::sync::atomic::AtomicU32,
    }
    impl Waiting {
        fn woken(&self) -> u32 {
            self.woken.load(Ordering::SeqCst)
        }
    }
    impl crate::engine::Wake for Waiting {
        fn wake(self: Arc<Self>) {
            self.woken.fetch_add(1, Ordering::SeqCst);
        }
        fn is_live(&self) -> bool {
            self.woken() == 0
        }
        fn rearms(&self) -> bool {
            self.reader.is_none()
        }
        fn exclusive(&self) -> bool {
            self.reader.is_some()
        }
        fn read_by(&self) -> Option<u32> {
            self.reader
        }
    }

    /// The polled rule (docs/LANE.md "Programs that poll"): a FUSE POLL by
    /// the process whose library asked with arg 6 neither forbids the
    /// connection's lane nor holds it back (its armed registration is
    /// woken at the grant; before its end's claim it is told "ready", and
    /// after it once per thread: a thread asleep in the kernel when another
    /// claimed); a thread's second poll after the claim, a registration
    /// its library says it left on the data file (arg 9), or any other
    /// process's poll, takes the lane down for good (a second user's poll
    /// of a socket it holds keeps the old rule).
    #[test]
    fn a_poll_by_the_asking_library_leaves_the_lane_one_by_another_process_ends_it() {
        // root()'s process is pid 1: its own thread polls as tid 1; this
        // test's thread is another process's for the rule.
        let (e, c, own, other, addr, srv) = two_processes_listening(b"lane-polled");
        let (cli, acc) = connection(&e, &srv, &addr, &c);
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        // The client's library polls through the daemon before the lane
        // (an epoll registration, armed).
        let p = Arc::new(Waiting::default());
        let w: crate::engine::Waiter = p.clone();
        let ready = e.lane_polled(&cli, own);
        e.poll(&cli, Some(&w));
        println!("the client's own poll before the lane: told ready {ready}");
        assert!(!ready);
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        println!("the accepter asks (the client's registration armed): {g:?}");
        assert_eq!(g, Ok(()));
        let woken = p.woken();
        println!("the client's registration woken at the grant: {woken} time(s)");
        assert_eq!(woken, 1);
        // The client's poll: what it is told and what becomes of the lane.
        let polled = |when: &str, ready: bool, lane: &str| {
            let got = e.lane_polled(&cli, own);
            let now = e.lane_status(&cli);
            println!("{when}: told ready {got}, lane={now}");
            assert_eq!((got, now), (ready, lane), "{when}");
        };
        polled("its poll again, its end not claimed yet", true, "direct");
        e.lane_join(&cli, &c, true)
            .expect("the client claims its end");
        polled(
            "its first poll after the claim (a sleeper the grant woke)",
            true,
            "direct",
        );
        polled(
            "the same thread's second (one its library did not take over)",
            false,
            "none",
        );

        // A registration the library left on the data file of its claimed end.
        let (cli, acc) = connection(&e, &srv, &addr, &c);
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        e.lane_join(&acc, &c, true).expect("the accepter asks");
        e.lane_join(&cli, &c, true)
            .expect("the client claims its end");
        assert_eq!(e.lane_status(&cli), "direct");
        e.lane_left_polled(&cli, own);
        println!(
            "arg 9 of the client's library: lane={}",
            e.lane_status(&cli)
        );
        assert_eq!(e.lane_status(&cli), "none");
        assert!(!e.lane_polled(&cli, own));
        assert_eq!(
            e.lane_join(&cli, &c, true).map(|_| ()),
            Err(Errno::EOPNOTSUPP)
        );

        // Another process polls a connection whose ends said arg 6.
        let (cli, acc) = connection(&e, &srv, &addr, &c);
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        assert!(!e.lane_polled(&cli, other));
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        println!("after another process's poll of the client, the accepter asks: {g:?}");
        assert_eq!(g, Err(Errno::EOPNOTSUPP));
    }

    /// Parks a read of `s` by thread `tid` (nothing queued: EAGAIN, its
    /// waiter on the socket's list).
    fn park_read(e: &Engine, s: &Arc<Socket>, tid: u32) -> Arc<Waiting> {
        let r = Arc::new(Waiting {
            reader: Some(tid),
            ..Default::default()
        });
        let w: crate::engine::Waiter = r.clone();
        let got = e.recvmsg(s, super::super::RecvFlags::new(100), Some(&w));
        assert_eq!(got.map(|_| ()), Err(Errno::EAGAIN));
        r
    }

    /// docs/LANE.md "A lane made under a parked reader": a plain read
    /// parked in the daemon by a thread of its end's asker (arg 6) no
    /// longer refuses the other end's ask. The lane is made and the read
    /// woken, answered EINTR (`lane_kicks`), which the asker's library
    /// restarts through the ring; one that parks after the grant's look is
    /// woken by its own after-check (`lane_after_read`). Another process's
    /// parked read still refuses the lane (it would not hear of the ring),
    /// and its after-check takes a lane made meanwhile down; the asker's
    /// wakes for no lane once its library stopped asking (arg 7).
    #[test]
    fn a_lane_is_made_under_a_parked_read_of_the_askers_and_wakes_it() {
        // root()'s process is pid 1 (its thread 1); this test's thread is
        // another process's for the rule.
        let (e, c, own, other, addr, srv) = two_processes_listening(b"lane-parked");
        let conn = || {
            let cli = e.socket(SockType::Stream, &c);
            e.connect(&cli, &addr, &c, None).unwrap();
            (cli.clone(), e.accept(&srv, None).unwrap())
        };

        let (cli, acc) = conn();
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        let r = park_read(&e, &cli, own);
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        let woken = r.woken();
        println!(
            "the accepter asks, the client's read parked: {g:?}, the read woken {woken} time(s)"
        );
        assert_eq!(g, Ok(()));
        assert_eq!(woken, 1);
        let (kicks, not) = (e.lane_kicks(&cli, own), e.lane_kicks(&cli, other));
        println!("the woken read answered EINTR: {kicks}; another process's: {not}");
        assert!(kicks && !not);
        // Its thread asks whether its EINTR was the lane's: once.
        let woke = |tid| Caller::again(tid, 0, 0, Some(c.status().clone()));
        let asks = [e.lane_woke(&cli, &woke(own)), e.lane_woke(&cli, &woke(own))];
        let theirs = e.lane_woke(&cli, &woke(other));
        println!("its thread asks whether it was the lane's: {asks:?}; another thread: {theirs:?}");
        assert_eq!(asks, [Ok(()), Err(Errno::ENOENT)]);
        assert_eq!(theirs, Err(Errno::ENOENT));
        e.lane_join(&cli, &c, true)
            .expect("the client claims its end");
        assert_eq!(e.lane_status(&cli), "direct");
        // A read of the asker's that parked after the grant's look.
        let r = park_read(&e, &acc, own);
        e.lane_after_read(&acc, own);
        let woken = r.woken();
        println!(
            "a read parked after the grant: woken {woken} time(s), lane={}",
            e.lane_status(&acc)
        );
        assert_eq!(woken, 1);
        assert_eq!(e.lane_status(&acc), "direct");
        // Another process's read that parked after it: down.
        let r = park_read(&e, &acc, other);
        e.lane_after_read(&acc, other);
        println!(
            "another process's read parked after the grant: lane={}",
            e.lane_status(&acc)
        );
        assert_eq!(e.lane_status(&acc), "none");
        assert_eq!(r.woken(), 0);

        let (cli, acc) = conn();
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        let r = park_read(&e, &cli, other);
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        println!("another process's read of the client parked, the accepter asks: {g:?}");
        assert_eq!(g, Err(Errno::EAGAIN));
        assert_eq!(r.woken(), 0);
        assert_eq!(e.lane_status(&cli), "none");

        // More reads of the asker's parked than a lane is made under.
        let (cli, acc) = conn();
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        let rs: Vec<_> = (0..=READS_UNDER_LANE)
            .map(|_| park_read(&e, &cli, own))
            .collect();
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        println!(
            "{} reads of the client's parked, the accepter asks: {g:?}",
            rs.len()
        );
        assert_eq!(g, Err(Errno::EAGAIN));
        assert!(rs.iter().all(|r| r.woken() == 0));

        // The client's library stopped asking (arg 7): its parked read
        // wakes for no lane.
        let (cli, acc) = conn();
        assert_eq!(e.lane_join(&cli, &c, true).map(|_| ()), Err(Errno::EAGAIN));
        e.lane_stop(&cli, &c);
        let r = park_read(&e, &cli, own);
        let g = e.lane_join(&acc, &c, true).map(|_| ());
        let woken = r.woken();
        println!(
            "the client stopped asking, its read parked, the accepter asks: {g:?}, woken {woken}"
        );
        assert_eq!(g, Err(Errno::EAGAIN));
        assert_eq!(woken, 0);
        assert_eq!(e.lane_status(&cli), "none");
    }

    /// An engine with lanes on and every per-user bound at half the mount's
    /// (`--user-share 500`), as the attack tests below need.
    fn shared_out() -> std::sync::Arc<Engine> {
        lanes_engine_with(500, crate::engine::Config::small().max_queued_bytes)
    }

    /// A listener of `c`'s at abstract `name` (backlog 16), and its name.
    fn listener(
        e: &Engine,
        name: &[u8],
        ty: SockType,
        c: &Caller,
    ) -> (Arc<Socket>, crate::engine::addr::Addr) {
        let addr = crate::engine::addr::Addr::Abstract(name.to_vec());
        let srv = e.socket(ty, c);
        e.bind(&srv, &addr, c).unwrap();
        e.listen(&srv, 16, c).unwrap();
        (srv, addr)
    }

    /// Whether a fresh socketpair of `c`'s gets a lane (arg 3).
    fn fresh_lane(e: &Engine, c: &Caller) -> Result<()> {
        let (x, _y) = e.try_socketpair(SockType::Stream, c).unwrap();
        e.lane_prepare(&x, c).map(|_| ())
    }

    /// User A, while B holds its share of lanes: a fresh pair of A's still
    /// gets one.
    fn a_still_gets_a_lane(e: &Engine, a: &Caller) {
        let got = fresh_lane(e, a);
        println!("A's fresh pair: {got:?}");
        assert_eq!(got, Ok(()));
    }

    /// A client of `c`'s connected to `srv`'s name `addr`, and its accepted end.
    fn connection(
        e: &Engine,
        srv: &Arc<Socket>,
        addr: &crate::engine::addr::Addr,
        c: &Caller,
    ) -> Ends {
        let cli = e.socket(SockType::Stream, c);
        e.connect(&cli, addr, c, None).unwrap();
        (cli, e.accept(srv, None).unwrap())
    }

    /// Laned pairs (or connections) made by `one` until it is refused, at
    /// most `most` (else no bound held): what was made, and the refusal.
    fn until_refused<T>(most: usize, mut one: impl FnMut() -> Result<T>) -> (Vec<T>, Errno) {
        let mut held = vec![];
        loop {
            match one() {
                Ok(x) => held.push(x),
                Err(err) => return (held, err),
            }
            assert!(held.len() <= most, "no bound");
        }
    }

    /// Both ends of a pair or a connection.
    type Ends = (Arc<Socket>, Arc<Socket>);

    /// `c`'s socketpairs, each with its lane (arg 3), until one is refused.
    fn pairs_until_refused(e: &Engine, c: &Caller, most: usize) -> (Vec<Ends>, Errno) {
        until_refused(most, || {
            let (x, y) = e.try_socketpair(SockType::Stream, c).unwrap();
            e.lane_prepare(&x, c).map(|_| (x, y))
        })
    }

    /// User B (65534) takes lane pairs until one is refused (at most
    /// `most`): users A (61021) and B, B's pairs and the refusal.
    fn b_fills_its_share(e: &Engine, most: usize) -> (Caller, Caller, Vec<Ends>, Errno) {
        use crate::engine::tests::user;
        let (a, b) = (user(61021), user(65534));
        let (held, refused) = pairs_until_refused(e, &b, most);
        (a, b, held, refused)
    }

    /// On a mount other users share, a lane's rings are on its payer's
    /// share of `--max-queued-bytes` until its way down (adversarial_lanes5.sh
    /// ring_bound), at most half of it (4 MiB: a 2 MiB share, two lanes of
    /// 512 KiB: two rings that hold what SO_SNDBUF's charges let in): B's
    /// pairs are refused lanes past it, A's still get theirs, and B's way
    /// down gives its rings' bytes back.
    #[test]
    fn a_lanes_rings_are_on_its_payers_queued_share() {
        use crate::engine::tests::user;
        let ring = u64::from(ring_cap(212992, Some(Framing::Stream)));
        assert_eq!(ring, 262144);
        let e = lanes_engine_with(500, 4 << 20);
        let (a, b) = (user(61021), user(65534));
        let (held, refused) = pairs_until_refused(&e, &b, 8);
        let used = e.queued.user_used(65534);
        println!(
            "B's laned pairs: {}, then {refused}; its queued bytes {used}",
            held.len()
        );
        assert_eq!((held.len(), refused), (2, Errno::EOPNOTSUPP));
        assert_eq!(used, 2 * 2 * ring);
        a_still_gets_a_lane(&e, &a);
        e.lane_down(&held[0].0, None).unwrap();
        assert_eq!(
            e.queued.user_used(65534),
            2 * ring,
            "given back at the way down"
        );
        assert_eq!(fresh_lane(&e, &b), Ok(()), "room for one more");
        // The other half stays B's for sends through the daemon: its
        // lanes, however many, never leave it ENOBUFS on its other pairs.
        let (more, _) = pairs_until_refused(&e, &b, 8);
        let mut sent = 0;
        let mut keep = vec![];
        for _ in 0..64 {
            if sent >= 384 * 1024 {
                break;
            }
            let (p, q) = e.try_socketpair(SockType::Stream, &b).unwrap();
            while let Ok(n) = e.sendmsg(&p, SendMsg::new(&[1u8; 16384]), &b, None) {
                sent += n;
            }
            keep.push((p, q));
        }
        println!(
            "B sent {sent} bytes through the daemon beside its lanes ({} more)",
            more.len()
        );
        assert!(sent >= 384 * 1024);
    }

    /// A ring's bytes were told sent: its way down queues every one of
    /// them, past `--max-queued-bytes` (counted), never a hole in the
    /// stream (adversarial_lanes5.sh drain_share: B's FIONREAD took down
    /// root's full lanes past the bound; the bytes past it were dropped
    /// with a log line). No shares here (a mount without --allow-other:
    /// the rings are on no bound), the queues filled first.
    #[test]
    fn a_way_down_past_the_writers_queued_share_loses_no_byte() {
        use crate::engine::tests::user;
        use udsfs_proto::lane::{Framing, Side};
        let e = lanes_engine_with(0, 1 << 20);
        let b = user(65534);
        let (x, y) = e.try_socketpair(SockType::Stream, &b).unwrap();
        e.lane_prepare(&x, &b).unwrap();
        // The queued bytes' bound filled through the daemon.
        let mut keep = vec![];
        'fill: loop {
            let (p, q) = e.try_socketpair(SockType::Stream, &b).unwrap();
            loop {
                match e.sendmsg(&p, SendMsg::new(&[1u8; 16384]), &b, None) {
                    Ok(_) => {}
                    Err(Errno::EAGAIN) => break,
                    Err(_) => break 'fill,
                }
            }
            keep.push((p, q));
        }
        let held = e.queued.user_used(65534);
        let lane = e.lanes.map.lock().get(&x.id).cloned().unwrap();
        let mut wrote = vec![];
        {
            let l = lane.lock();
            let (mut w, _) = l.region.end(Side::A, Framing::Stream);
            while let Ok(n) = w.write(&[(wrote.len() % 251) as u8; 1000]) {
                if n == 0 {
                    break;
                }
                wrote.extend(std::iter::repeat_n((wrote.len() % 251) as u8, n));
            }
        }
        e.lane_down(&x, None).expect("no busy word: down at once");
        let mut got = vec![];
        while let Ok(r) = e.recvmsg(&y, crate::engine::RecvFlags::new(65536), None) {
            if r.data.is_empty() {
                break;
            }
            got.extend(r.data);
        }
        println!(
            "B's queued bytes {held} (the bound filled), wrote {} into the ring, read {} \
             after the way down; queued now {}",
            wrote.len(),
            got.len(),
            e.queued.user_used(65534)
        );
        assert_eq!(got.len(), wrote.len());
        assert!(got == wrote, "the bytes in order");
        assert_eq!(e.queued.user_used(65534), held, "given back as read");
    }

    /// A connection's lane (arg 5) is on the share and the descriptor
    /// budget of the end whose ask made it, as a socketpair's is on its
    /// asker's: another user's pair still gets its lane; the end nobody
    /// claimed yet drains as that asker, never as the daemon.
    #[test]
    fn a_connections_lane_is_on_its_askers_share_and_drains_as_it() {
        use crate::engine::tests::user;
        use udsfs_proto::lane::{Framing, Side};
        let e = shared_out();
        e.lanes.quota.set_max(8);
        let (a, b) = (user(61021), user(65534));
        let (srv, addr) = listener(&e, b"lane-share-join", SockType::Stream, &b);
        let (held, refused) = until_refused(8, || {
            let (cli, acc) = connection(&e, &srv, &addr, &b);
            assert_eq!(e.lane_join(&cli, &b, false).map(|_| ()), Err(Errno::EAGAIN));
            e.lane_join(&acc, &b, false).map(|_| (cli, acc))
        });
        println!("B's connection lanes: {} of 8, then {refused}", held.len());
        assert_eq!((held.len(), refused), (4, Errno::EOPNOTSUPP));
        a_still_gets_a_lane(&e, &a);

        // The accepter's ask made the lane (side A, claimed); the client's
        // end (side B) is not claimed yet: its ring drains as B.
        let (cli, acc) = &held[0];
        let lane = e.lanes.map.lock().get(&acc.id).cloned().unwrap();
        {
            let l = lane.lock();
            let (mut w, _) = l.region.end(Side::B, Framing::Stream);
            assert_eq!(w.write(&[7u8; 1000]), Ok(1000));
        }
        let root_before = e.queued.user_used(0);
        e.lane_down(cli, None).expect("no busy word: down at once");
        let (mine, root_held) = (e.queued.user_used(65534), e.queued.user_used(0));
        println!("queued after the way down: uid 65534 {mine}, uid 0 {root_held}");
        assert!(mine >= 1000, "the unclaimed ring is charged to the asker");
        assert_eq!(root_held, root_before, "nothing is charged to the daemon");
        let again = {
            let (cli, acc) = connection(&e, &srv, &addr, &b);
            let _ = e.lane_join(&cli, &b, false);
            e.lane_join(&acc, &b, false).map(|_| ())
        };
        println!("B after one of its lanes went down: {again:?}");
        assert_eq!(again, Ok(()));
    }

    /// A connection's lane is on the user whose connect made it, whichever
    /// end asks last: B's client asking first made A's accepter the asker
    /// of every lane of B's connections to A, on A's share of the mount's
    /// lanes and of the daemon's descriptors.
    #[test]
    fn a_connections_lane_is_on_its_connectors_user_whoever_asks_last() {
        use crate::engine::tests::user;
        let e = shared_out();
        let (a, b) = (user(61021), user(65534));
        let (srv, addr) = listener(&e, b"lane-payer", SockType::Stream, &a);
        let used = |uid| (e.lanes.quota.user_used(uid), e.depot.quota.user_used(uid));
        let (a0, b0) = (used(61021), used(65534));
        let mut held = vec![];
        for _ in 0..4 {
            let (cli, acc) = connection(&e, &srv, &addr, &b);
            let first = e.lane_join(&cli, &b, false).map(|_| ());
            assert_eq!(first, Err(Errno::EAGAIN), "B's client asks first");
            e.lane_join(&acc, &a, false)
                .expect("A's accepter's ask makes the lane");
            held.push((cli, acc));
        }
        let (a1, b1) = (used(61021), used(65534));
        println!(
            "(lanes, descriptors) of A before {a0:?} after {a1:?}; of B before {b0:?} after {b1:?}"
        );
        assert_eq!(a1.0, a0.0, "A's share of the mount's lanes moved");
        // A's own deposits of the region (its claims, until its library
        // takes them over the fd channel) are its own: one per ask.
        assert!(a1.1 <= a0.1 + 4, "A's descriptors moved: {a0:?} -> {a1:?}");
        assert_eq!(b1.0, b0.0 + 4, "B's connections' lanes are B's");
        assert!(b1.1 >= b0.1 + 4 * LANE_FDS, "{b0:?} -> {b1:?}");
        for (cli, _) in &held {
            e.lane_down(cli, None).expect("no busy word: down at once");
        }
        println!(
            "B's lanes after the ways down: {}",
            e.lanes.quota.user_used(65534)
        );
        assert_eq!(e.lanes.quota.user_used(65534), b0.0);
    }

    /// The ring of an end nobody claimed drains as a send of the user who
    /// asked for the lane (its share bounds it), never as the daemon's:
    /// uid 0, which no share bounds.
    #[test]
    fn an_unclaimed_ring_drains_as_the_lanes_asker() {
        use crate::engine::tests::user;
        use udsfs_proto::lane::{Framing, Side};
        let e = shared_out();
        let b = user(65534);
        let (x, y) = e.try_socketpair(SockType::Stream, &b).unwrap();
        e.lane_prepare(&x, &b).expect("a fresh pair gets a lane");
        let lane = e.lanes.map.lock().get(&x.id).cloned().unwrap();
        {
            let l = lane.lock();
            let (mut w, _) = l.region.end(Side::A, Framing::Stream);
            assert_eq!(w.write(&[7u8; 1000]), Ok(1000));
        }
        e.lane_down(&y, None).expect("no busy word: down at once");
        let (mine, root_held) = (e.queued.user_used(65534), e.queued.user_used(0));
        println!("queued after the way down: uid 65534 {mine}, uid 0 {root_held}");
        assert!(mine >= 1000, "the asker's ring is charged to the asker");
        assert_eq!(root_held, 0, "nothing is charged to the daemon");
    }

    /// The mount's lanes are shared out per user: one that holds its share
    /// is refused, another still gets a lane, and a lane that went down is
    /// its asker's again.
    #[test]
    fn lanes_are_shared_out_per_user_and_come_back_at_the_way_down() {
        let e = shared_out();
        e.lanes.quota.set_max(8);
        let (a, b, held, refused) = b_fills_its_share(&e, 8);
        println!("B's lanes: {} of 8, then {refused}", held.len());
        assert_eq!((held.len(), refused), (4, Errno::EOPNOTSUPP));
        a_still_gets_a_lane(&e, &a);
        e.lane_down(&held[0].0, None)
            .expect("no busy word: down at once");
        let again = fresh_lane(&e, &b);
        println!("B after one of its lanes went down: {again:?}");
        assert_eq!(again, Ok(()));
    }

    /// A lane's descriptors in the daemon (its memfd and eventfds) are its
    /// asker's, on the descriptor budget deposits are charged to: a user
    /// whose share they fill gets no more lanes, others still do, and the
    /// charge comes back when the lane is gone.
    #[test]
    fn a_lanes_descriptors_are_charged_to_its_asker() {
        let e = shared_out();
        // 14 descriptors a user: two lanes (5 held, 1 deposited, and the
        // pair's own pin) and change.
        e.depot.quota.set_max(28);
        let (a, _, held, refused) = b_fills_its_share(&e, 10);
        let used = e.depot.quota.user_used(65534);
        println!(
            "B's lanes: {}, then {refused}; B's descriptors: {used}",
            held.len()
        );
        assert_eq!((held.len(), refused), (2, Errno::ETOOMANYREFS));
        a_still_gets_a_lane(&e, &a);
        for (x, y) in held {
            e.lane_down(&x, None).expect("no busy word: down at once");
            e.put(&x);
            e.put(&y);
        }
        // The closes run on the closer thread.
        let t = Instant::now();
        let lanes_gone = used - 2 * LANE_FDS;
        while e.depot.quota.user_used(65534) > lanes_gone && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = e.depot.quota.user_used(65534);
        println!("B's descriptors after its lanes went down: {after}");
        assert!(after <= lanes_gone, "{after}");
    }

    /// Arg 3 lanes only a socketpair its asker's process made: not an end
    /// of a connection to another user's listener (whose accepter never
    /// asked), nor another process's pair.
    #[test]
    fn only_a_pair_its_asker_made_gets_a_lane() {
        use crate::engine::tests::user;
        let e = lanes_engine();
        let (a, b) = (user(61021), user(65534));
        let (srv, addr) = listener(&e, b"peer-lane", SockType::Stream, &a);
        let (cli, acc) = connection(&e, &srv, &addr, &b);
        let got = e.lane_prepare(&cli, &b).map(|_| ());
        println!("B's lane on its end of a connection to A's listener: {got:?}");
        assert_eq!(got, Err(Errno::EOPNOTSUPP));
        assert_eq!(e.lane_status(&acc), "none");
        let (x, _y) = e.socketpair(SockType::Stream, &a);
        let st = ProcStatus {
            tgid: 2,
            ..a.status().clone()
        };
        let other = Caller::with_status(2, st);
        let got = e.lane_prepare(&x, &other).map(|_| ());
        println!("a lane asked by another process of the pair's user: {got:?}");
        assert_eq!(got, Err(Errno::EOPNOTSUPP));
        let got = e.lane_prepare(&x, &a).map(|_| ());
        println!("a lane asked by the pair's maker: {got:?}");
        assert_eq!(got, Ok(()));
    }

    /// A tap with one user's view (`viewer`), or everything's (None).
    struct Sees(Option<u32>);

    impl crate::engine::tap::Tap for Sees {
        fn viewer(&self) -> Option<u32> {
            self.0
        }
        fn queued(&self, _: &crate::engine::tap::Queued<'_>) {}
        fn delivered(&self, _: &crate::engine::tap::Delivered<'_>) {}
        fn event(&self, _: crate::engine::tap::Origin, _: &crate::engine::tap::Event) {}
    }

    /// Observers take down only the lanes of the connections they may see
    /// or select, and keep only those from being made: user B's capture
    /// (it sees nothing of A's) and fault rules that select nothing of
    /// A's leave A's lanes up and A's fresh pairs laned; A's own capture,
    /// root's, a rule naming A's socket, and a `uid` rule whose user claims
    /// an end take them down. When the observer goes, a fresh pair gets
    /// its lane again. (Before: any observer took every lane down.)
    #[test]
    fn observers_take_down_only_the_lanes_they_may_see() {
        use crate::engine::tests::user;
        use crate::fault::Rule;
        let e = lanes_engine();
        let (a, b) = (user(61021), user(65534));
        let laned = |c: &Caller| {
            let (x, y) = e.socketpair(SockType::Stream, c);
            let g = e.lane_prepare(&x, c).map(|_| ());
            (x, y, g)
        };
        let (x, _y, g) = laned(&a);
        assert_eq!(g, Ok(()));
        // B's capture.
        let tap_b: Arc<dyn crate::engine::tap::Tap> = Arc::new(Sees(Some(65534)));
        e.taps.attach(tap_b.clone());
        e.lanes_observed_down();
        println!("A's lane under B's capture: {}", e.lane_status(&x));
        assert_eq!(e.lane_status(&x), "direct");
        let (_x2, _y2, g) = laned(&a);
        println!("A's fresh pair under B's capture: {g:?}");
        assert_eq!(g, Ok(()));
        let (xb, _yb, g) = laned(&b);
        println!("B's fresh pair under B's capture: {g:?}");
        assert_eq!(g, Err(Errno::EOPNOTSUPP));
        assert_eq!(e.lane_status(&xb), "none");
        // A's own capture.
        let tap_a: Arc<dyn crate::engine::tap::Tap> = Arc::new(Sees(Some(61021)));
        e.taps.attach(tap_a.clone());
        e.lanes_observed_down();
        println!("A's lane under A's capture: {}", e.lane_status(&x));
        assert_eq!(e.lane_status(&x), "none");
        e.taps.detach(&tap_a);
        e.taps.detach(&tap_b);
        let (x, _y, g) = laned(&a);
        println!("A's fresh pair once the captures went: {g:?}");
        assert_eq!(g, Ok(()));
        // Root's capture sees everything.
        let tap_root: Arc<dyn crate::engine::tap::Tap> = Arc::new(Sees(None));
        e.taps.attach(tap_root.clone());
        e.lanes_observed_down();
        assert_eq!(e.lane_status(&x), "none");
        e.taps.detach(&tap_root);

        // Fault rules that select nothing of A's: root's for a socket that
        // does not exist, B's (a user's rules act on its own sockets only),
        // root's by a uid nobody uses, one of connect only.
        let (x, _y, g) = laned(&a);
        assert_eq!(g, Ok(()));
        let none = [
            ("socket 999999 latency latency=1", 0),
            ("name * latency latency=1", 65534),
            ("uid 4242 latency latency=1", 0),
            ("name * refuse", 0),
        ];
        for (text, owner) in none {
            e.faults.add(Rule::parse(text).unwrap(), owner);
            e.lanes_observed_down();
            println!(
                "A's lane after rule '{text}' of {owner}: {}",
                e.lane_status(&x)
            );
            assert_eq!(e.lane_status(&x), "direct", "{text}");
        }
        let (_x2, _y2, g) = laned(&a);
        println!("A's fresh pair under those rules: {g:?}");
        assert_eq!(g, Ok(()));
        // One naming A's socket.
        e.faults.add(
            Rule::parse(&format!("socket {} latency latency=1", x.id)).unwrap(),
            0,
        );
        e.lanes_observed_down();
        println!(
            "A's lane after a rule naming its socket: {}",
            e.lane_status(&x)
        );
        assert_eq!(e.lane_status(&x), "none");
        // A rule by A's uid: the pair is laned (nobody claimed an end
        // yet), A's claim takes the lane down.
        e.faults
            .add(Rule::parse("uid 61021 latency latency=1").unwrap(), 0);
        let (x, _y, g) = laned(&a);
        assert_eq!(g, Ok(()));
        let claim = e.lane_claim(&x, &a).map(|_| ());
        println!(
            "A's claim under a rule by A's uid: {claim:?}, {}",
            e.lane_status(&x)
        );
        assert_eq!(claim, Err(Errno::ENOENT));
        assert_eq!(e.lane_status(&x), "none");
    }

    /// A laned socket received by user B (an entry of B's: B may open it
    /// now) while B's capture stands: its lane goes down then, so that
    /// what it sends from then on passes B's capture, as it would on a
    /// mount without lanes.
    #[test]
    fn a_laned_socket_received_by_a_capturing_user_loses_its_lane() {
        use crate::engine::tests::user;
        let e = lanes_engine();
        let (a, b) = (user(61021), user(65534));
        let (x, _y) = e.socketpair(SockType::Stream, &a);
        assert_eq!(e.lane_prepare(&x, &a).map(|_| ()), Ok(()));
        let tap_b: Arc<dyn crate::engine::tap::Tap> = Arc::new(Sees(Some(65534)));
        e.taps.attach(tap_b);
        e.lanes_observed_down();
        assert_eq!(e.lane_status(&x), "direct", "B may not open it yet");
        let (r, _r2) = e.socketpair(SockType::Stream, &b);
        let ids = e.deliver_rights(&r, vec![x.clone()], 65534, 65534, 16);
        println!(
            "A's laned socket received by B as {ids:?}: lane={}",
            e.lane_status(&x)
        );
        assert_eq!(ids.len(), 1);
        assert_eq!(e.lane_status(&x), "none");
    }
}

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
//! until neither end is moving bytes (each end's busy word), and moves what
//! the rings hold into the engine's queues (as sends of the end that wrote
//! them: nothing lost or reordered), so the request then sees the
//! connection as if every byte had gone through the daemon. A lane that is
//! down stays down. Off unless the mount has `--lanes`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::Mutex;
use udsfs_proto::ioctl::{LaneEvents, LaneGrant};
use udsfs_proto::lane::State;
use udsfs_proto::lane::region::{OFF_HEAD, OFF_TAIL, Region, busy_word, cap_for_sndbuf, dir_word};

use super::cred::ProcStatus;
use super::fds::{ChargedFd, refused_errno};
use super::lane_ready::Evs;
use super::log_limit::limited;
use super::message::SendMsg;
use super::quota::{Charge, Quota};
use super::socket::{Conn, SockType, Socket};
use super::{Caller, Engine, Result};

/// How long the way down waits for an end to finish moving bytes (a copy
/// of at most a ring takes far less); an end that stays busy longer
/// (stopped, or hostile) has its ring's published bytes drained as they are.
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// Lanes up at once on a mount: each holds a memfd and a mapping in the
/// daemon (vm.max_map_count is 65530); past it a pair has no lane. On an
/// `--allow-other` mount each user but root may hold its `--user-share`
/// of them (`Lanes::quota`), so one user's lanes leave the others theirs.
const MAX_LANES: u64 = 4096;

struct Lane {
    region: Region,
    fd: std::os::fd::OwnedFd,
    /// End A's socket (ring 0's writer), end B's.
    socks: [Arc<Socket>; 2],
    /// Who claimed each end: the claiming thread and its status, the
    /// caller of the drain of that end's ring.
    claimed: [Option<(u32, ProcStatus)>; 2],
    /// Who asked for the lane (its thread and status): the caller of the
    /// drain of an end nobody claimed, whose ring only the asker's region
    /// could have filled (never the daemon, which no share bounds).
    maker: (u32, ProcStatus),
    /// One of the mount's lanes, held by the asker until the way down.
    count: Charge,
    up: bool,
    /// Each end's wake-up for poll and epoll (lane_ready.rs).
    evs: Evs,
    /// The daemon's descriptors above (the memfd, the two eventfds), on
    /// the asker's descriptor budget as a deposit's are (ChargedFd): given
    /// back when the lane is dropped and they close (last: after them).
    _fds: Charge,
}

/// Descriptors a lane holds in the daemon: its memfd and two eventfds.
const LANE_FDS: u64 = 3;

/// The mount's lanes, by socket number (both ends of each).
pub struct Lanes {
    up: AtomicUsize,
    map: Mutex<HashMap<u64, Arc<Mutex<Lane>>>>,
    /// Lanes up, per user (`MAX_LANES`, shared out by `--user-share`).
    pub(crate) quota: Arc<Quota>,
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
        }
    }
}

/// A ring's capacity for a sender's SO_SNDBUF: a power of two (the ends
/// publish only the low 32 bits of their positions, which then still name
/// the offset), at most the buffer.
fn ring_cap(sndbuf: usize) -> u32 {
    let c = cap_for_sndbuf(sndbuf.min(u32::MAX as usize) as u32);
    if c.is_power_of_two() {
        c
    } else {
        c.next_power_of_two() / 2
    }
}

/// Whether `s` may have a lane now, and its peer and SO_SNDBUF.
fn eligible(s: &Arc<Socket>) -> Option<(Arc<Socket>, usize)> {
    let st = s.lock();
    let peer = match &st.conn {
        Conn::Connected {
            peer,
            peer_gone: false,
            ..
        } => peer.clone(),
        _ => return None,
    };
    let quiet =
        st.queue.bytes() == 0 && st.queue.msgs().is_empty() && !s.polled.load(Ordering::Acquire);
    let ok = s.ty == SockType::Stream && !st.may_passcred() && st.shutdown == 0 && quiet;
    ok.then_some((peer, st.sndbuf))
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
            let l = Arc::new(Mutex::new(self.lane_make(s, c)?));
            let ids = l.lock().socks.each_ref().map(|s| s.id);
            for id in ids {
                map.insert(id, l.clone());
            }
            self.lanes.up.fetch_add(1, Ordering::Relaxed);
            l
        };
        let l = lane.lock();
        let fd = l.fd.try_clone().map_err(|_| Errno::EMFILE)?;
        let fd = ChargedFd::new(&self.depot.quota, c.fsuid, fd)?;
        let tag = self
            .depot
            .keep_received(s.id, c.fsuid, Arc::new(fd))
            .ok_or(Errno::ETOOMANYREFS)?;
        let [cap0, cap1] = l.region.caps();
        Ok(LaneGrant {
            tag,
            side: 0,
            cap0: cap0 as i32,
            cap1: cap1 as i32,
        })
    }

    /// `Op::LaneClaim` (arg 0): this end of `s`'s lane for the caller's
    /// process, which alone moves its bytes from now on. A second claim of
    /// an end (another process) takes the lane down: ENOENT.
    pub fn lane_claim(&self, s: &Arc<Socket>, c: &Caller) -> Result<LaneGrant> {
        let lane = self.lanes.map.lock().get(&s.id).cloned();
        let lane = lane.ok_or(Errno::EOPNOTSUPP)?;
        let mut l = lane.lock();
        if !l.up {
            return Err(Errno::ENOENT);
        }
        let side = usize::from(l.socks[0].id != s.id);
        if l.claimed[side].is_some() {
            // The ring is single-writer, single-reader.
            drop(l);
            self.lane_down(s);
            return Err(Errno::ENOENT);
        }
        l.claimed[side] = Some((c.tid, c.status().clone()));
        let [cap0, cap1] = l.region.caps();
        Ok(LaneGrant {
            tag: 0,
            side: side as i32,
            cap0: cap0 as i32,
            cap1: cap1 as i32,
        })
    }

    /// `Op::LaneClaim` arg 4, after arg 3 on the same socket: the lane's
    /// two eventfds for its maker (lane_ready.rs).
    pub fn lane_events(&self, s: &Arc<Socket>, c: &Caller) -> Result<LaneEvents> {
        let lane = self.lanes.map.lock().get(&s.id).cloned();
        let lane = lane.ok_or(Errno::EOPNOTSUPP)?;
        let l = lane.lock();
        if !l.up {
            return Err(Errno::ENOENT);
        }
        l.evs.deposit(&self.depot, s.id, c.fsuid)
    }

    fn lane_make(&self, s: &Arc<Socket>, c: &Caller) -> Result<Lane> {
        // An observer sees every message through the daemon (stage d).
        if self.taps.any() || self.faults.any() {
            return Err(Errno::EOPNOTSUPP);
        }
        let (peer, sndbuf_a) = eligible(s).ok_or(Errno::EOPNOTSUPP)?;
        let (back, sndbuf_b) = eligible(&peer).ok_or(Errno::EOPNOTSUPP)?;
        if back.id != s.id || !made_by(s, c) || !made_by(&peer, c) {
            return Err(Errno::EOPNOTSUPP);
        }
        // The asker's lane among the mount's: refused past the mount's
        // or the asker's share, before the connection spends its one lane.
        let mut count = Charge::new(self.lanes.quota.clone());
        count.set(c.fsuid, 1).map_err(|_| Errno::EOPNOTSUPP)?;
        let mut fds = Charge::new(self.depot.quota.clone());
        fds.set(c.fsuid, LANE_FDS).map_err(refused_errno)?;
        // One lane in a connection's life (the way down may wait BUSY_WAIT
        // for a peer's busy word: once per connection, not at will).
        if s.lane_made.swap(true, Ordering::AcqRel) | peer.lane_made.swap(true, Ordering::AcqRel) {
            return Err(Errno::EOPNOTSUPP);
        }
        let caps = [ring_cap(sndbuf_a), ring_cap(sndbuf_b)];
        let (fd, region) = Region::create(caps).map_err(Errno::from_raw)?;
        let evs = Evs::new()?;
        region.set_state(State::Direct);
        Ok(Lane {
            region,
            fd,
            socks: [s.clone(), peer],
            claimed: [None, None],
            maker: (c.tid, c.status().clone()),
            count,
            up: true,
            evs,
            _fds: fds,
        })
    }

    /// Takes `s`'s lane down if it has one (see the module's comment):
    /// called before any request on `s` other than the lane's own.
    pub fn lane_down(&self, s: &Socket) {
        if self.lanes.up.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(lane) = self.lanes.map.lock().get(&s.id).cloned() else {
            return;
        };
        self.lane_end(&lane, true);
    }

    /// As `lane_down`, for a request that only reads the socket's state:
    /// while neither end is claimed (the rings are empty) the lane stays.
    pub fn lane_down_if_claimed(&self, s: &Socket) {
        if self.lanes.up.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(lane) = self.lanes.map.lock().get(&s.id).cloned() else {
            return;
        };
        if lane.lock().claimed.iter().all(Option::is_none) {
            return;
        }
        self.lane_end(&lane, true);
    }

    /// A capture opened or a fault rule added: every lane goes down (its
    /// bytes through the taps and rules as they are drained), and none is
    /// made while an observer stands (stage d would keep them, `Through`).
    pub fn lanes_all_down(&self) {
        if self.lanes.up.load(Ordering::Relaxed) == 0 {
            return;
        }
        let all: Vec<_> = self.lanes.map.lock().values().cloned().collect();
        for l in all {
            self.lane_end(&l, true);
        }
    }

    /// A poll of `s` through the daemon (a FUSE POLL: poll, select,
    /// epoll_ctl, epoll_wait's look of a holder whose library does not
    /// answer it from the ring, lane_ready.rs): a kernel epoll set holding
    /// the data file would not hear of the ring's bytes, so the socket has
    /// no lane from now on.
    pub fn lane_polled(&self, s: &Socket) {
        if !self.cfg.lanes {
            return;
        }
        s.polled.store(true, Ordering::Release);
        self.lane_down(s);
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
        self.lane_end(&lane, false);
        let socks = lane.lock().socks.clone();
        for x in socks {
            x.lock().err = Some(Errno::ECONNRESET);
        }
    }

    fn lane_end(&self, lane: &Arc<Mutex<Lane>>, drain: bool) {
        let mut l = lane.lock();
        if !l.up {
            return;
        }
        l.up = false;
        {
            let mut map = self.lanes.map.lock();
            for x in &l.socks {
                map.remove(&x.id);
            }
        }
        self.lanes.up.fetch_sub(1, Ordering::Relaxed);
        // Back to its asker's share now: the way down below may wait.
        let _ = l.count.set(0, 0);
        l.region.set_state(State::Through);
        // Pollers and epoll sets asleep on the ring's eventfds.
        l.evs.signal();
        fence(Ordering::SeqCst);
        let since = Instant::now();
        // A corrupt region's busy words mean nothing: no wait.
        while drain && (0..2).any(|e| l.region.word(busy_word(e)).load(Ordering::SeqCst) != 0) {
            if since.elapsed() > BUSY_WAIT {
                limited!(
                    warn,
                    "socket {}: a lane end stayed busy {BUSY_WAIT:?}: its ring is drained as published",
                    l.socks[0].id
                );
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if drain {
            for d in 0..2 {
                self.lane_drain(&l, d);
            }
        }
    }

    /// Moves ring `d`'s unread bytes into the reader's queue, as sends of
    /// the end that wrote them.
    fn lane_drain(&self, l: &Lane, d: usize) {
        let r = &l.region;
        let head = r.word(dir_word(d, OFF_HEAD)).load(Ordering::Acquire);
        let tail = r.word(dir_word(d, OFF_TAIL)).load(Ordering::Acquire);
        let (off, cap) = r.data_area(d);
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
        // SAFETY: at + first <= cap and used - first <= cap: inside ring d.
        unsafe {
            std::ptr::copy_nonoverlapping(r.byte_ptr(off + at), bytes.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                r.byte_ptr(off),
                bytes.as_mut_ptr().add(first),
                used - first,
            );
        }
        let (tid, st) = l.claimed[d].as_ref().unwrap_or(&l.maker);
        let caller = Caller::with_status(*tid, st.clone());
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match self.sendmsg(&l.socks[d], SendMsg::new(rest), &caller, None) {
                Ok(n) if n > 0 => rest = &rest[n..],
                r => {
                    limited!(
                        warn,
                        "socket {}: {} bytes of its lane could not be queued: {r:?}",
                        l.socks[d].id,
                        rest.len()
                    );
                    return;
                }
            }
        }
    }

    /// The status files' `lane=` word.
    pub fn lane_status(&self, s: &Socket) -> &'static str {
        if self.lanes.up.load(Ordering::Relaxed) == 0 {
            return "none";
        }
        match self.lanes.map.lock().get(&s.id) {
            Some(_) => "direct",
            None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::root;

    fn lanes_engine() -> Arc<Engine> {
        Engine::new(crate::engine::Config {
            hash_buckets: 4,
            background_gc: false,
            lanes: true,
            ..crate::engine::Config::default()
        })
    }

    /// A peer that holds its busy word up delays the way down by at most
    /// BUSY_WAIT, once: a connection gets one lane in its life, so the
    /// peer cannot make a new one for each of the other side's calls.
    #[test]
    fn a_connection_gets_one_lane_and_a_held_busy_word_delays_its_way_down_once() {
        let (e, c) = (lanes_engine(), root());
        let (a, b) = e.socketpair(SockType::Stream, &c);
        let g = e.lane_prepare(&a, &c).expect("a fresh pair gets a lane");
        println!("prepared: {g:?}");
        let lane = e.lanes.map.lock().get(&a.id).cloned().unwrap();
        lane.lock()
            .region
            .word(busy_word(0))
            .store(1, Ordering::SeqCst);
        let t = Instant::now();
        e.lane_down(&b);
        let took = t.elapsed();
        println!("way down with a busy word held: {took:?}");
        assert!(took >= BUSY_WAIT && took < BUSY_WAIT * 10, "{took:?}");
        assert_eq!(e.lane_status(&a), "none");
        for s in [&a, &b] {
            let again = e.lane_prepare(s, &c);
            println!("a second lane on socket {}: {again:?}", s.id);
            assert_eq!(again.map(|_| ()), Err(Errno::EOPNOTSUPP));
        }
    }

    /// The ring of an end nobody claimed drains as a send of the user who
    /// asked for the lane (its share bounds it), never as the daemon's:
    /// uid 0, which no share bounds.
    #[test]
    fn an_unclaimed_ring_drains_as_the_lanes_asker() {
        use crate::engine::tests::user;
        use udsfs_proto::lane::{Framing, Side};
        let e = Engine::new(crate::engine::Config {
            hash_buckets: 4,
            background_gc: false,
            lanes: true,
            user_share_permille: 500,
            ..crate::engine::Config::default()
        });
        let b = user(65534);
        let (x, y) = e.try_socketpair(SockType::Stream, &b).unwrap();
        e.lane_prepare(&x, &b).expect("a fresh pair gets a lane");
        let lane = e.lanes.map.lock().get(&x.id).cloned().unwrap();
        {
            let l = lane.lock();
            let (mut w, _) = l.region.end(Side::A, Framing::Stream);
            assert_eq!(w.write(&[7u8; 1000]), Ok(1000));
        }
        e.lane_down(&y);
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
        use crate::engine::tests::user;
        let e = Engine::new(crate::engine::Config {
            hash_buckets: 4,
            background_gc: false,
            lanes: true,
            user_share_permille: 500,
            ..crate::engine::Config::default()
        });
        e.lanes.quota.set_max(8);
        let (a, b) = (user(61021), user(65534));
        let mut held = vec![];
        let refused = loop {
            let (x, _y) = e.try_socketpair(SockType::Stream, &b).unwrap();
            match e.lane_prepare(&x, &b) {
                Ok(_) => held.push((x, _y)),
                Err(err) => break err,
            }
            assert!(held.len() <= 8, "no bound");
        };
        println!("B's lanes: {} of 8, then {refused}", held.len());
        assert_eq!((held.len(), refused), (4, Errno::EOPNOTSUPP));
        let (x, _y) = e.try_socketpair(SockType::Stream, &a).unwrap();
        let got = e.lane_prepare(&x, &a).map(|_| ());
        println!("A's fresh pair: {got:?}");
        assert_eq!(got, Ok(()));
        e.lane_down(&held[0].0);
        let (x, _y) = e.try_socketpair(SockType::Stream, &b).unwrap();
        let again = e.lane_prepare(&x, &b).map(|_| ());
        println!("B after one of its lanes went down: {again:?}");
        assert_eq!(again, Ok(()));
    }

    /// A lane's descriptors in the daemon (its memfd and eventfds) are its
    /// asker's, on the descriptor budget deposits are charged to: a user
    /// whose share they fill gets no more lanes, others still do, and the
    /// charge comes back when the lane is gone.
    #[test]
    fn a_lanes_descriptors_are_charged_to_its_asker() {
        use crate::engine::tests::user;
        let e = Engine::new(crate::engine::Config {
            hash_buckets: 4,
            background_gc: false,
            lanes: true,
            user_share_permille: 500,
            ..crate::engine::Config::default()
        });
        // 10 descriptors a user: two lanes (3 held, 1 deposited, and the
        // pair's own pin) and change.
        e.depot.quota.set_max(20);
        let (a, b) = (user(61021), user(65534));
        let mut held = vec![];
        let refused = loop {
            let (x, y) = e.try_socketpair(SockType::Stream, &b).unwrap();
            match e.lane_prepare(&x, &b) {
                Ok(_) => held.push((x, y)),
                Err(err) => break err,
            }
            assert!(held.len() <= 10, "no bound");
        };
        let used = e.depot.quota.user_used(65534);
        println!(
            "B's lanes: {}, then {refused}; B's descriptors: {used}",
            held.len()
        );
        assert_eq!((held.len(), refused), (2, Errno::ETOOMANYREFS));
        let (x, _y) = e.try_socketpair(SockType::Stream, &a).unwrap();
        let got = e.lane_prepare(&x, &a).map(|_| ());
        println!("A's fresh pair: {got:?}");
        assert_eq!(got, Ok(()));
        for (x, y) in held {
            e.lane_down(&x);
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
        let addr = crate::engine::addr::Addr::Abstract(b"peer-lane".to_vec());
        let srv = e.socket(SockType::Stream, &a);
        e.bind(&srv, &addr, &a).unwrap();
        e.listen(&srv, 8, &a).unwrap();
        let cli = e.socket(SockType::Stream, &b);
        e.connect(&cli, &addr, &b, None).unwrap();
        let acc = e.accept(&srv, None).unwrap();
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
}

//! Observers of the message path: a tap sees every message once when it is
//! queued at its receiver and once when it is read, and every connection
//! event, with who sent it and what it carried. The capture
//! (`.udsfs/capture`) is one; with none attached, the cost on the message
//! path is one relaxed load of `Taps::any`.
//!
//! A tap sees everything (root's) or only what one user may see
//! (`Tap::viewer`): the taps are filed by that user, and a message or an
//! event goes only to the taps that see everything and those of the users
//! who may open one of its sockets (`Endpoint::openers`), so that one
//! user's taps, however many, cost another user's messages nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::RwLock;

use super::addr::Addr;
use super::cred::Ucred;
use super::socktype::SockType;

/// One socket as a tap reports it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub id: u64,
    pub ty: SockType,
    /// Its bound name, if any.
    pub name: Option<Addr>,
    /// The user that made (or accepted) it.
    pub owner_uid: u32,
    /// The users other than root who may open it when reported
    /// (`Engine::openers`, src/engine/access.rs; its close: who held it
    /// last): who may see what it does.
    pub openers: Vec<u32>,
    /// The payload protocol it asked captures to show (ctl `capture_proto`).
    pub proto: Option<Arc<str>>,
    /// Handed out by accept(): the server's end of its connection (a
    /// capture that joins a connection after its connect tells the client
    /// by it, not by who sends first).
    pub accepted: bool,
}

/// The process that made the call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin {
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A socket passed with a message (SCM_RIGHTS).
#[derive(Clone, Debug)]
pub struct PassedSocket {
    pub id: u64,
    pub ty: SockType,
    pub name: Option<Addr>,
}

/// A message (dgram, seqpacket) or a stream chunk, as queued at `to`.
pub struct Queued<'a> {
    /// Unique for the engine's life; `Delivered::msg_id` names it again.
    pub msg_id: u64,
    pub from: &'a Endpoint,
    pub to: &'a Endpoint,
    pub origin: Origin,
    /// SCM_CREDENTIALS as attached (explicit or the sender's own), if any.
    pub creds: Option<Ucred>,
    pub sockets: &'a [PassedSocket],
    /// One word per passed file that is not a udsfs socket ("pipe", "file", ...).
    pub files: &'a [&'static str],
    pub oob: bool,
    pub data: &'a [u8],
}

/// A read of (part of) a queued message by `reader`.
pub struct Delivered<'a> {
    pub msg_id: u64,
    pub reader: &'a Endpoint,
    pub origin: Origin,
    /// Bytes the reader got of it.
    pub len: usize,
    /// A dgram or seqpacket message cut to the reader's buffer (MSG_TRUNC).
    pub truncated: bool,
    /// Passed references dropped at the reader (MSG_CTRUNC).
    pub ctrunc: bool,
    pub peek: bool,
}

/// What happened to a socket without a payload.
#[derive(Clone, Debug)]
pub enum Event {
    /// `client` connected to `server` (the listener for stream/seqpacket, the
    /// default peer for dgram). `accepted`: the server's end of the new
    /// connection (stream, seqpacket), the socket accept will hand out, so
    /// that a tap can tell the connection's two ends before either speaks.
    Connected {
        client: Endpoint,
        server: Endpoint,
        accepted: Option<Endpoint>,
    },
    /// `listener` handed out the connection `sock`.
    Accepted { listener: Endpoint, sock: Endpoint },
    /// SHUT_RD = 1, SHUT_WR = 2, both = 3 (the engine's shutdown bits).
    Shutdown { sock: Endpoint, how: u8 },
    /// The last reference went.
    Closed { sock: Endpoint },
    /// `sock` got ECONNRESET: its peer went with unread data.
    Reset { sock: Endpoint },
    /// The garbage collector freed `sock` (an unreachable in-flight cycle).
    Collected { sock: Endpoint },
    /// Fault rule `rule` acted on what `sock` did (`what`: the fault and
    /// the message, as the daemon logs it).
    Fault {
        sock: Endpoint,
        rule: crate::fault::RuleId,
        what: String,
    },
}

pub trait Tap: Send + Sync {
    fn queued(&self, q: &Queued<'_>);
    fn delivered(&self, d: &Delivered<'_>);
    /// The user whose view this tap has: it hears only of messages and
    /// events with a socket that user may open (`Endpoint::openers`).
    /// None: it hears of everything (root's). Fixed while attached.
    fn viewer(&self) -> Option<u32> {
        None
    }
    /// Whether `delivered` would use a read that cut the message
    /// (`truncated`) or its passed references (`ctrunc`), or neither: the
    /// engine builds the report only when some tap wants it, so that a
    /// tap that ignores plain reads does not cost every read a lock.
    /// Asked once, at attach: the answer must not change.
    fn wants_delivery(&self, _truncated: bool, _ctrunc: bool) -> bool {
        true
    }
    /// Counts a `len`-byte message from socket `from` to `to` (type `ty`)
    /// lost if this tap would drop it whatever its details (a full buffer),
    /// so that the engine need not build its report; false: it needs one.
    fn lost_undescribed(&self, _ty: SockType, _from: u64, _to: u64, _len: usize) -> bool {
        false
    }
    fn event(&self, origin: Origin, e: &Event);
}

/// The taps attached to one engine, filed by whose view they have.
#[derive(Default)]
struct Index {
    /// Taps that hear of everything, by address (`key`).
    all: HashMap<usize, Arc<dyn Tap>>,
    /// Taps with one user's view, by user, then by address.
    by_user: HashMap<u32, HashMap<usize, Arc<dyn Tap>>>,
}

/// What an attached tap wants of reads, counted over the taps: plain
/// reads, cut ones (MSG_TRUNC), ctrunc ones.
fn read_interest(t: &dyn Tap) -> [bool; 3] {
    [
        t.wants_delivery(false, false),
        t.wants_delivery(true, false),
        t.wants_delivery(false, true),
    ]
}

fn key(t: &Arc<dyn Tap>) -> usize {
    Arc::as_ptr(t) as *const () as usize
}

impl Index {
    fn is_empty(&self) -> bool {
        self.all.is_empty() && self.by_user.is_empty()
    }

    /// Calls `f` for each tap that may hear of something done to sockets
    /// with `openers`: the taps that hear of everything and those of each
    /// user among the openers, once each.
    fn each<'a>(&'a self, openers: &[&[u32]], mut f: impl FnMut(&'a Arc<dyn Tap>)) {
        self.all.values().for_each(&mut f);
        if self.by_user.is_empty() {
            return;
        }
        // A handful of users at most: those met before are skipped.
        let all = || openers.iter().flat_map(|o| o.iter().copied());
        for (i, uid) in all().enumerate() {
            if all().take(i).any(|u| u == uid) {
                continue;
            }
            if let Some(m) = self.by_user.get(&uid) {
                m.values().for_each(&mut f);
            }
        }
    }
}

pub struct Taps {
    any: AtomicBool,
    list: RwLock<Index>,
    /// Taps wanting plain, cut and ctrunc reads (`read_interest`).
    reads: [AtomicUsize; 3],
    next_msg: AtomicU64,
}

impl Default for Taps {
    fn default() -> Taps {
        Taps {
            any: AtomicBool::new(false),
            list: RwLock::new(Index::default()),
            reads: Default::default(),
            next_msg: AtomicU64::new(0),
        }
    }
}

impl Taps {
    /// Whether any tap is attached: the only cost when none is.
    #[inline]
    pub fn any(&self) -> bool {
        !cfg!(feature = "bare-message-path") && self.any.load(Ordering::Relaxed)
    }

    /// Whether some tap with one user's view is attached: only then need
    /// the engine ask who may open a message's sockets.
    pub fn for_users(&self) -> bool {
        !self.list.read().by_user.is_empty()
    }

    pub fn attach(&self, tap: Arc<dyn Tap>) {
        for (n, on) in self.reads.iter().zip(read_interest(&*tap)) {
            if on {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut list = self.list.write();
        let k = key(&tap);
        match tap.viewer() {
            None => list.all.insert(k, tap),
            Some(uid) => list.by_user.entry(uid).or_default().insert(k, tap),
        };
        self.any.store(true, Ordering::Relaxed);
    }

    pub fn detach(&self, tap: &Arc<dyn Tap>) {
        let k = key(tap);
        let gone = {
            let mut list = self.list.write();
            let gone = match tap.viewer() {
                None => list.all.remove(&k),
                Some(uid) => {
                    let m = list.by_user.get_mut(&uid);
                    let gone = m.and_then(|m| m.remove(&k));
                    if list.by_user.get(&uid).is_some_and(|m| m.is_empty()) {
                        list.by_user.remove(&uid);
                    }
                    gone
                }
            };
            self.any.store(!list.is_empty(), Ordering::Relaxed);
            gone
        };
        if let Some(t) = gone {
            for (n, on) in self.reads.iter().zip(read_interest(&*t)) {
                if on {
                    n.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// A new message id (ids start at 1; 0 means "none given"): the
    /// engine's own, to tie a read to its message; a tap showing ids to a
    /// user numbers what that user sees itself.
    pub fn next_msg_id(&self) -> u64 {
        self.next_msg.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Reports a `len`-byte message from `from` to `to`: only to the taps
    /// that may see it (`openers` gives who may open each end, asked only
    /// when a user's tap is attached); each that counts it lost undescribed
    /// does so, and `describe` builds the report, given the openers, for
    /// the others (not at all when there are none), so that a capture that
    /// stopped reading costs the senders little.
    pub fn report_queued(
        &self,
        (ty, from, to, len): (SockType, u64, u64, usize),
        openers: impl FnOnce() -> [Vec<u32>; 2],
        describe: impl FnOnce([Vec<u32>; 2], &dyn Fn(&Queued<'_>)),
    ) {
        let list = self.list.read();
        let ends = if list.by_user.is_empty() {
            [Vec::new(), Vec::new()]
        } else {
            openers()
        };
        let mut wanting: Vec<&Arc<dyn Tap>> = Vec::new();
        list.each(&[&ends[0], &ends[1]], |t| {
            if !t.lost_undescribed(ty, from, to, len) {
                wanting.push(t);
            }
        });
        if wanting.is_empty() {
            return;
        }
        describe(ends, &|q| {
            for t in &wanting {
                t.queued(q);
            }
        });
    }

    /// Whether some tap may hear of a message between two sockets, by the
    /// rule `report_queued` follows (`Index::each`): one that hears of
    /// everything, or one of a user who may open either end (`openers`,
    /// asked only when a user's tap is attached). A fast lane asks whether
    /// its bytes may skip the taps (src/engine/lane.rs).
    pub fn may_see(&self, openers: impl FnOnce() -> [Vec<u32>; 2]) -> bool {
        if !self.any() {
            return false;
        }
        let list = self.list.read();
        if !list.all.is_empty() {
            return true;
        }
        if list.by_user.is_empty() {
            return false;
        }
        let ends = openers();
        let mut seen = false;
        list.each(&[&ends[0], &ends[1]], |_| seen = true);
        seen
    }

    /// Reports a queued message to the taps that may see it.
    pub fn queued(&self, q: &Queued<'_>) {
        self.list
            .read()
            .each(&[&q.from.openers, &q.to.openers], |t| t.queued(q));
    }

    /// Whether any tap wants to hear of a read (`Tap::wants_delivery`).
    pub fn wants_delivery(&self, truncated: bool, ctrunc: bool) -> bool {
        let n = |i: usize| self.reads[i].load(Ordering::Relaxed) > 0;
        n(0) || (truncated && n(1)) || (ctrunc && n(2))
    }

    pub fn delivered(&self, d: &Delivered<'_>) {
        self.list
            .read()
            .each(&[&d.reader.openers], |t| t.delivered(d));
    }

    pub fn event(&self, origin: Origin, e: &Event) {
        let ends = e.ends();
        let openers: Vec<&[u32]> = ends.iter().map(|e| &e.openers[..]).collect();
        self.list.read().each(&openers, |t| t.event(origin, e));
    }
}

impl Event {
    /// The sockets it concerns.
    pub fn ends(&self) -> Vec<&Endpoint> {
        match self {
            Event::Connected {
                client,
                server,
                accepted,
            } => {
                let mut v = vec![client, server];
                v.extend(accepted.as_ref());
                v
            }
            Event::Accepted { listener, sock } => vec![listener, sock],
            Event::Shutdown { sock, .. }
            | Event::Closed { sock }
            | Event::Reset { sock }
            | Event::Collected { sock }
            | Event::Fault { sock, .. } => vec![sock],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize, Option<u32>);
    impl Tap for Count {
        fn viewer(&self) -> Option<u32> {
            self.1
        }
        fn queued(&self, _: &Queued<'_>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn delivered(&self, _: &Delivered<'_>) {}
        fn event(&self, _: Origin, _: &Event) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn ep(openers: Vec<u32>) -> Endpoint {
        Endpoint {
            id: 1,
            ty: SockType::Dgram,
            name: None,
            owner_uid: 0,
            openers,
            proto: None,
            accepted: false,
        }
    }

    fn count(t: Option<u32>) -> Arc<Count> {
        Arc::new(Count(AtomicUsize::new(0), t))
    }

    /// A message goes to root's taps and to those of the users who may
    /// open one of its ends, each once; another user's taps are not called
    /// at all, and who may open the ends is not even asked while only
    /// root's taps are attached.
    #[test]
    fn a_message_visits_only_the_taps_that_may_see_it() {
        let taps = Taps::default();
        let root = count(None);
        taps.attach(root.clone());
        let mut asked = false;
        taps.report_queued(
            (SockType::Dgram, 1, 2, 1),
            || {
                asked = true;
                [vec![5], vec![]]
            },
            |_, report| report(&msg(&ep(vec![]), &ep(vec![]))),
        );
        assert!(!asked, "no user's tap: nobody asked who may open the ends");
        let (a, b) = (count(Some(5)), count(Some(6)));
        let many: Vec<Arc<Count>> = (0..1000).map(|_| count(Some(6))).collect();
        taps.attach(a.clone());
        taps.attach(b.clone());
        many.iter().for_each(|t| taps.attach(t.clone()));
        let (from, to) = (ep(vec![5]), ep(vec![5, 7]));
        taps.report_queued(
            (SockType::Dgram, 1, 2, 1),
            || [vec![5], vec![5, 7]],
            |ends, report| {
                assert_eq!(ends, [vec![5], vec![5, 7]]);
                report(&msg(&from, &to))
            },
        );
        taps.queued(&msg(&from, &to));
        taps.event(Origin::default(), &Event::Closed { sock: ep(vec![5]) });
        let n = |c: &Count| c.0.load(Ordering::Relaxed);
        assert_eq!((n(&root), n(&a), n(&b)), (4, 3, 0));
        assert!(many.iter().all(|t| n(t) == 0), "user 6's taps untouched");
        // Detaching is by address, whichever the order.
        for t in many.iter().rev() {
            let t: Arc<dyn Tap> = t.clone();
            taps.detach(&t);
        }
        assert_eq!(taps.list.read().by_user[&6].len(), 1);
        for t in [root as Arc<dyn Tap>, a, b] {
            taps.detach(&t);
        }
        assert!(!taps.any() && !taps.for_users());
    }

    fn msg<'a>(from: &'a Endpoint, to: &'a Endpoint) -> Queued<'a> {
        Queued {
            msg_id: 1,
            from,
            to,
            origin: Origin::default(),
            creds: None,
            sockets: &[],
            files: &[],
            oob: false,
            data: b"x",
        }
    }

    #[test]
    fn attach_and_detach_switch_any() {
        let taps = Taps::default();
        assert!(!taps.any());
        let c = count(None);
        let t: Arc<dyn Tap> = c.clone();
        taps.attach(t.clone());
        assert!(taps.any());
        let ep = Endpoint {
            id: 1,
            ty: SockType::Dgram,
            name: None,
            owner_uid: 0,
            openers: Vec::new(),
            proto: None,
            accepted: false,
        };
        taps.queued(&Queued {
            msg_id: taps.next_msg_id(),
            ..msg(&ep, &ep)
        });
        assert_eq!(c.0.load(Ordering::Relaxed), 1);
        taps.detach(&t);
        assert!(!taps.any());
    }
}

//! The rule set of a mount: rules added, deleted and listed with their
//! counters, and the check the message path makes. With no rule the check
//! costs one relaxed load (`any`); with rules it takes a read lock, and a
//! rule's own lock only when the rule matches.
//!
//! Each user numbers their own rules 1, 2, 3, ... (`RuleId`): what another
//! user adds shows in no number a user sees. Rules are indexed by the
//! socket they name and by the sockets whose connections they remember,
//! so a socket's release touches only those (`forget_socket`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use nix::errno::Errno;
use parking_lot::{Mutex, RwLock};

use super::decision::{Decision, Injection};
use super::effect::{ConnState, Retry};
use super::id::{RuleId, RuleRef};
use super::kind::Fault;
use super::message::{End, Kind, Message, Pid, SockType};
use super::prng::Prng;
use super::rule::{After, Direction, Rule, Selector};

/// A rule as listed to one viewer.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub id: RuleId,
    pub rule: Rule,
    /// Messages its selector matched, of those the viewer may see.
    pub matched: u64,
    /// Messages it acted on, of those the viewer may see.
    pub injected: u64,
}

struct Entry {
    id: RuleId,
    /// Its place in the order of addition, over all users.
    seq: u64,
    rule: Rule,
    state: Mutex<State>,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    matched: u64,
    injected: u64,
}

struct State {
    dice: Prng,
    matched: u64,
    injected: u64,
    bytes_matched: u64,
    /// A root rule's counts by the user whose message it was (`msg.uid`):
    /// what another user lists of it. A user's rule acts only between
    /// sockets of its owner, so its totals are its owner's.
    by_user: HashMap<u32, Counts>,
    /// Keyed by (sender socket, receiver socket).
    conns: HashMap<(u64, u64), ConnState>,
}

#[derive(Default)]
pub struct Rules {
    any: AtomicBool,
    /// Some rule needs the owners of the sockets (`Rules::needs_owners`).
    owners: AtomicBool,
    list: RwLock<Set>,
    /// The last `Entry::seq` given.
    seq: AtomicU64,
    /// The last number each user gave a rule.
    next_n: Mutex<HashMap<u32, u64>>,
    /// The index: by socket N, how many `socket N` rules stand, and the
    /// rules that remember a connection of N.
    by_socket: Mutex<HashMap<u64, Indexed>>,
}

/// The rules, oldest first, and the same by owner: a message is checked
/// against root's rules and its sockets' owner's only.
#[derive(Default)]
struct Set {
    all: Vec<Arc<Entry>>,
    by_owner: HashMap<u32, Vec<Arc<Entry>>>,
}

impl Set {
    /// The rules that may act on `msg`, oldest first: root's, and those
    /// of the user who owns both its sockets.
    fn acting<'a>(&'a self, msg: &Message<'_>) -> impl Iterator<Item = &'a Arc<Entry>> + 'a {
        let of = |owner| self.by_owner.get(&owner).map_or(&[][..], Vec::as_slice);
        let root = of(ROOT);
        let o = msg.from.owner_uid;
        let user = if o != ROOT && o == msg.to.owner_uid {
            of(o)
        } else {
            &[][..]
        };
        let (mut i, mut j) = (0, 0);
        std::iter::from_fn(move || {
            let next = match (root.get(i), user.get(j)) {
                (Some(a), Some(b)) if a.seq > b.seq => {
                    j += 1;
                    b
                }
                (Some(a), _) => {
                    i += 1;
                    a
                }
                (None, Some(b)) => {
                    j += 1;
                    b
                }
                (None, None) => return None,
            };
            Some(next)
        })
    }
}

#[derive(Default)]
struct Indexed {
    named: usize,
    remembering: Vec<Weak<Entry>>,
}

const ROOT: u32 = 0;
/// How many rules a user other than root may have at once.
pub const USER_RULES: usize = 1024;

impl Rules {
    /// Whether there is any rule: the message path asks this first.
    #[inline]
    pub fn any(&self) -> bool {
        !cfg!(feature = "bare-message-path") && self.any.load(Ordering::Relaxed)
    }

    /// Whether a message's `End::owner_uid` may matter: some rule is a
    /// user's (it acts only on that user's sockets) or selects by uid (a
    /// close is its socket owner's). Else the message path need not look
    /// the owners up.
    #[inline]
    pub fn needs_owners(&self) -> bool {
        self.owners.load(Ordering::Relaxed)
    }

    /// `any`, `needs_owners` and the rules by owner, once `set.all`
    /// changed, under its write lock; with no rule left the index by
    /// socket goes too.
    fn refresh(&self, set: &mut Set) {
        let list = &set.all;
        let owners = list
            .iter()
            .any(|e| e.id.owner != ROOT || matches!(e.rule.selector, Selector::Uid(_)));
        self.owners.store(owners, Ordering::Relaxed);
        self.any.store(!list.is_empty(), Ordering::Relaxed);
        set.by_owner.clear();
        for e in list {
            set.by_owner.entry(e.id.owner).or_default().push(e.clone());
        }
        if list.is_empty() {
            self.by_socket.lock().clear();
        }
    }

    /// `add` for a writer of the faults file or a ctl: ENOSPC once a user
    /// other than root has USER_RULES rules. Every message of the mount is
    /// checked against every rule, so one user's rules, unbounded, would
    /// slow all users' messages and grow the daemon without end.
    pub fn try_add(&self, rule: Rule, owner: u32) -> Result<RuleId, Errno> {
        if owner != ROOT {
            let n = self.list.read().by_owner.get(&owner).map_or(0, Vec::len);
            if n >= USER_RULES {
                return Err(Errno::ENOSPC);
            }
        }
        Ok(self.add(rule, owner))
    }

    /// Adds a rule for user `owner`, numbered after the owner's last one;
    /// it acts from the next message on.
    pub fn add(&self, rule: Rule, owner: u32) -> RuleId {
        let id = {
            let mut next = self.next_n.lock();
            let n = next.entry(owner).or_insert(0);
            *n += 1;
            RuleId { owner, n: *n }
        };
        let dice = rule.seed.map_or_else(Prng::unseeded, Prng::new);
        let entry = Arc::new(Entry {
            id,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            rule,
            state: Mutex::new(State {
                dice,
                matched: 0,
                injected: 0,
                bytes_matched: 0,
                by_user: HashMap::new(),
                conns: HashMap::new(),
            }),
        });
        let mut set = self.list.write();
        if let Selector::Socket(n) = entry.rule.selector {
            self.by_socket.lock().entry(n).or_default().named += 1;
        }
        set.all.push(entry);
        self.refresh(&mut set);
        id
    }

    /// Deletes the rule `r` names for `caller`: root may delete any, a
    /// user their own (EPERM for root's, ENOENT for what they cannot see).
    pub fn del(&self, r: impl Into<RuleRef>, caller: u32) -> Result<(), Errno> {
        let id = r.into().of(caller);
        let mut set = self.list.write();
        let at = set
            .all
            .iter()
            .position(|e| e.id == id && visible(e, caller))
            .ok_or(Errno::ENOENT)?;
        if caller != ROOT && id.owner != caller {
            return Err(Errno::EPERM);
        }
        let gone = set.all.remove(at);
        self.unindex(&gone);
        self.refresh(&mut set);
        Ok(())
    }

    /// Deletes every rule `caller` may delete.
    pub fn clear(&self, caller: u32) {
        let mut set = self.list.write();
        set.all.retain(|e| {
            let keep = caller != ROOT && e.id.owner != caller;
            if !keep {
                self.unindex(e);
            }
            keep
        });
        self.refresh(&mut set);
    }

    /// A deleted rule leaves the index (the list's write lock held).
    fn unindex(&self, e: &Entry) {
        if let Selector::Socket(n) = e.rule.selector {
            let mut idx = self.by_socket.lock();
            if let Some(i) = idx.get_mut(&n) {
                i.named = i.named.saturating_sub(1);
                if i.named == 0 && i.remembering.is_empty() {
                    idx.remove(&n);
                }
            }
        }
    }

    /// The rules `viewer` may see (root: all; a user: their own and
    /// root's, which act on their sockets too), oldest first, with the
    /// counts of what the viewer may see: of root's rules, a user sees
    /// only the messages that user made.
    pub fn list(&self, viewer: u32) -> Vec<Listed> {
        self.list
            .read()
            .all
            .iter()
            .filter(|e| visible(e, viewer))
            .map(|e| {
                let s = e.state.lock();
                let c = if viewer == ROOT || e.id.owner == viewer {
                    Counts {
                        matched: s.matched,
                        injected: s.injected,
                    }
                } else {
                    s.by_user.get(&viewer).copied().unwrap_or_default()
                };
                Listed {
                    id: e.id,
                    rule: e.rule.clone(),
                    matched: c.matched,
                    injected: c.injected,
                }
            })
            .collect()
    }

    /// Rule `id` as written, for the log.
    pub fn describe(&self, id: RuleId) -> Option<String> {
        let set = self.list.read();
        let of_owner = set.by_owner.get(&id.owner)?;
        of_owner
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.rule.to_string())
    }

    /// Socket `socket` is gone: its `socket N` rules go with it (the number
    /// may be given to a new socket), and what rules remember of its
    /// connections. Only the rules the index names for it are touched;
    /// the list's write lock is taken only when a rule names it.
    pub fn forget_socket(&self, socket: u64) {
        let Some(idx) = self.by_socket.lock().remove(&socket) else {
            return;
        };
        for e in idx.remembering.iter().filter_map(Weak::upgrade) {
            e.state
                .lock()
                .conns
                .retain(|&(from, to), _| from != socket && to != socket);
        }
        if idx.named > 0 {
            let mut set = self.list.write();
            set.all
                .retain(|e| e.rule.selector != Selector::Socket(socket));
            self.refresh(&mut set);
        }
    }

    /// Rule `e` now remembers a connection between `a` and `b`.
    fn remember(&self, e: &Arc<Entry>, (a, b): (u64, u64)) {
        let mut idx = self.by_socket.lock();
        for sock in [a, b] {
            let rem = &mut idx.entry(sock).or_default().remembering;
            if !rem.iter().any(|w| w.as_ptr() == Arc::as_ptr(e)) {
                // Rules deleted meanwhile go when the list would grow.
                if rem.len() == rem.capacity() {
                    rem.retain(|w| w.strong_count() > 0);
                }
                rem.push(Arc::downgrade(e));
            }
        }
    }

    /// Whether a send `msg` (Kind::Send) would meet a full queue now: a
    /// `full` rule holds the connection's message, or is sure to hit the
    /// next one (toxicity 1, past `after`, short of `times`; `socket` and
    /// `name` rules only, as poll does not know who will send). Changes
    /// nothing: poll asks it.
    pub fn holds_sends(&self, msg: &Message<'_>) -> bool {
        if !self.any() {
            return false;
        }
        let key = (msg.from.socket, msg.to.socket);
        self.list.read().acting(msg).any(|e| {
            let rule = &e.rule;
            if !matches!(rule.fault, Fault::Full { .. }) || !rule.fault.fits_type(msg.ty) {
                return false;
            }
            let mut s = e.state.lock();
            // Only a message the rule selected is held.
            if let Some(retry) = s.conns.get_mut(&key).and_then(|c| c.retry(msg.now, false)) {
                return retry == Retry::Held;
            }
            let named = matches!(rule.selector, Selector::Socket(_) | Selector::Name(_));
            if !named || !may_act(e.id.owner, msg) || !selects(rule, msg) {
                return false;
            }
            let due = match rule.after {
                Some(After::Messages(n)) => s.matched >= n,
                Some(After::Bytes(n)) => s.bytes_matched >= n,
                None => true,
            };
            due && rule.toxicity >= 1.0 && rule.times.is_none_or(|t| s.injected < t)
        })
    }

    /// Whether some rule may act on a send of the connection between
    /// `ends` (either way: `ends[d]` sending to the other), sent by
    /// `senders[d]` (its process id and user) where known: the rules
    /// `check` would ask about such a send, by the same tests (`acting`,
    /// `may_act`, `selects`), whatever their dice, `after` or `times` (a
    /// selected message is counted even when not hit). A `pid` or `uid`
    /// rule selects a direction only by its known sender; with none known
    /// it is asked again once one is. Changes nothing: a fast lane asks
    /// whether its bytes may skip the rules (src/engine/lane.rs).
    pub fn may_select(
        &self,
        ty: SockType,
        ends: [End<'_>; 2],
        senders: [Option<(u32, u32)>; 2],
    ) -> bool {
        if !self.any() {
            return false;
        }
        let list = self.list.read();
        (0..2).any(|d| {
            let (pid, uid) = senders[d].unwrap_or((0, u32::MAX));
            let msg = Message {
                kind: Kind::Send,
                from: ends[d],
                to: ends[1 - d],
                pid: Pid::Known(pid),
                uid,
                ty,
                len: 0,
                refs: 0,
                offset: 0,
                now: Instant::now(),
            };
            list.acting(&msg).any(|e| {
                let rule = &e.rule;
                let by_sender = matches!(rule.selector, Selector::Pid(_) | Selector::Uid(_));
                rule.fault.acts_on() == Kind::Send
                    && rule.fault.fits_type(ty)
                    && may_act(e.id.owner, &msg)
                    && (senders[d].is_some() || !by_sender)
                    && selects(rule, &msg)
            })
        })
    }

    /// What to do to `msg`: every rule that selects it, may act on its
    /// sockets, and hits it adds its part. Counts each injection; the
    /// engine logs them (`Decision::injected`), at a bounded rate.
    pub fn check(&self, msg: &Message<'_>) -> Decision {
        let mut out = Decision::default();
        if !self.any() {
            return out;
        }
        for e in self.list.read().acting(msg) {
            let rule = &e.rule;
            // Only root's rules and the sockets' owner's come here: one
            // user's rules (name globs up to glob::MAX_LEN) must cost
            // other users' messages nothing.
            if rule.fault.acts_on() != msg.kind
                || !rule.fault.fits_type(msg.ty)
                || !may_act(e.id.owner, msg)
                || !selects(rule, msg)
            {
                continue;
            }
            let mut s = e.state.lock();
            let s = &mut *s;
            let key = (msg.from.socket, msg.to.socket);
            // A message the rule holds (full, refuse errno=EAGAIN), sent
            // again after EAGAIN or by a sender woken: the same message,
            // neither counted nor thrown for again (so `times` counts
            // messages), held until its time is up.
            if rule.fault.holds()
                && let Some(conn) = s.conns.get_mut(&key)
                && let Some(retry) = conn.retry(msg.now, true)
            {
                if retry == Retry::Held {
                    out.merge(held_again(&rule.fault));
                }
                continue;
            }
            s.matched += 1;
            let mine = (e.id.owner == ROOT).then_some(msg.uid);
            if let Some(u) = mine {
                s.by_user.entry(u).or_default().matched += 1;
            }
            let bytes_before = s.bytes_matched;
            s.bytes_matched = s.bytes_matched.saturating_add(msg.len as u64);
            let waiting = match rule.after {
                Some(After::Messages(n)) => s.matched <= n,
                Some(After::Bytes(n)) => bytes_before < n,
                None => false,
            };
            if waiting || rule.times.is_some_and(|t| s.injected >= t) {
                continue;
            }
            // Only faults that remember a connection keep an entry for it.
            let mut scratch = ConnState::default();
            let conn = if rule.fault.remembers_connections() {
                if !s.conns.contains_key(&key) {
                    self.remember(e, key);
                }
                s.conns.entry(key).or_default()
            } else {
                &mut scratch
            };
            let Some(mut d) = rule.fault.apply(msg, rule.toxicity, &mut s.dice, conn) else {
                continue;
            };
            s.injected += 1;
            if let Some(u) = mine {
                s.by_user.entry(u).or_default().injected += 1;
            }
            d.injected.push(Injection {
                rule: e.id,
                fault: rule.fault.name(),
            });
            out.merge(d);
        }
        out.settle();
        out
    }
}

/// What a retry of a held message meets: the same full queue or backlog.
fn held_again(f: &Fault) -> Decision {
    match *f {
        Fault::Refuse { errno } => Decision {
            refuse: Some(errno),
            ..Decision::default()
        },
        _ => Decision {
            full: true,
            ..Decision::default()
        },
    }
}

fn visible(e: &Entry, viewer: u32) -> bool {
    viewer == ROOT || e.id.owner == viewer || e.id.owner == ROOT
}

/// Root's rules act on every message; a user's only on messages between
/// sockets that user owns.
fn may_act(owner: u32, msg: &Message<'_>) -> bool {
    owner == ROOT || (msg.from.owner_uid == owner && msg.to.owner_uid == owner)
}

fn selects(rule: &Rule, msg: &Message<'_>) -> bool {
    let names = |end: &End<'_>| match &rule.selector {
        Selector::Socket(n) => end.socket == *n,
        Selector::Name(g) => end.name.is_some_and(|name| g.matches(name)),
        Selector::Pid(_) | Selector::Uid(_) => false,
    };
    match rule.selector {
        Selector::Pid(p) => msg.pid.get() == p,
        Selector::Uid(u) => msg.uid == u,
        _ => match rule.direction {
            Some(Direction::Up) => names(&msg.to),
            Some(Direction::Down) => names(&msg.from),
            None => names(&msg.to) || names(&msg.from),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::fault::message::{Kind, Pid, SockType};

    fn send(from: u64) -> Message<'static> {
        let end = |socket| End {
            socket,
            name: None,
            owner_uid: 0,
        };
        Message {
            kind: Kind::Send,
            from: end(from),
            to: end(2),
            pid: Pid::Known(1),
            uid: 0,
            ty: SockType::Stream,
            len: 10,
            refs: 0,
            offset: 0,
            now: Instant::now(),
        }
    }

    fn remembered(rules: &Rules) -> usize {
        rules.list.read().all[0].state.lock().conns.len()
    }

    #[test]
    fn only_faults_with_a_memory_keep_connections() {
        let rules = Rules::default();
        rules.add(Rule::parse("socket 2 latency latency=1").unwrap(), 0);
        for from in 10..20 {
            rules.check(&send(from));
        }
        assert_eq!(remembered(&rules), 0);
        let rules = Rules::default();
        rules.add(Rule::parse("socket 2 die_after messages=5").unwrap(), 0);
        for from in 10..20 {
            rules.check(&send(from));
        }
        assert_eq!(remembered(&rules), 10);
        rules.forget_socket(10);
        assert_eq!(remembered(&rules), 9);
    }

    fn send_as(from: u64, owner: u32) -> Message<'static> {
        let mut m = send(from);
        m.uid = owner;
        m.from.owner_uid = owner;
        m.to.owner_uid = owner;
        m
    }

    #[test]
    fn each_user_numbers_their_own_rules() {
        let rules = Rules::default();
        let rule = || Rule::parse("socket 2 latency latency=1").unwrap();
        let (a, b) = (61001, 61002);
        let a_ids: Vec<u64> = (0..5).map(|_| rules.add(rule(), a).n).collect();
        let b_ids: Vec<u64> = (0..3).map(|_| rules.add(rule(), b).n).collect();
        assert_eq!((a_ids, b_ids), (vec![1, 2, 3, 4, 5], vec![1, 2, 3]));
        let root = rules.add(rule(), 0);
        assert_eq!(root, RuleId { owner: 0, n: 1 });
        // B's "1" is B's own; A's rules B cannot see, root's B may not delete.
        let ref1: RuleRef = "1".parse().unwrap();
        assert_eq!(rules.del(ref1, b), Ok(()));
        assert_eq!(
            rules.del("61001:1".parse::<RuleRef>().unwrap(), b),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            rules.del("0:1".parse::<RuleRef>().unwrap(), b),
            Err(Errno::EPERM)
        );
        let seen: Vec<String> = rules.list(b).iter().map(|l| l.id.to_string()).collect();
        assert_eq!(seen, ["61002:2", "61002:3", "0:1"]);
        assert_eq!(rules.list(0).len(), 8);
        // A rule deleted keeps its number taken.
        assert_eq!(rules.add(rule(), b).n, 4);
        // Root names a user's rule by its owner.
        assert_eq!(rules.del(RuleId { owner: a, n: 5 }, 0), Ok(()));
        assert_eq!(rules.list(a).len(), 5);
    }

    #[test]
    fn a_user_counts_only_their_own_messages_of_roots_rules() {
        let rules = Rules::default();
        rules.add(Rule::parse("socket 2 latency latency=1").unwrap(), 0);
        let (a, b) = (61001, 61002);
        for _ in 0..5 {
            rules.check(&send_as(10, a));
        }
        rules.check(&send_as(11, b));
        let count = |viewer| {
            let l = &rules.list(viewer)[0];
            (l.matched, l.injected)
        };
        assert_eq!((count(0), count(a), count(b)), ((6, 6), (5, 5), (1, 1)));
        assert_eq!(count(61003), (0, 0));
    }

    #[test]
    fn a_message_meets_roots_rules_and_its_owners_in_the_order_added() {
        let rules = Rules::default();
        let (a, b) = (61001, 61002);
        let rule = |ms: u32| Rule::parse(&format!("socket 2 latency latency={ms}")).unwrap();
        rules.add(rule(1), a);
        rules.add(rule(2), 0);
        rules.add(rule(3), b);
        rules.add(rule(4), a);
        let order = |m: &Message<'_>| -> Vec<String> {
            rules
                .check(m)
                .injected
                .iter()
                .map(|i| i.rule.to_string())
                .collect()
        };
        assert_eq!(order(&send_as(10, a)), ["61001:1", "0:1", "61001:2"]);
        assert_eq!(order(&send_as(10, b)), ["0:1", "61002:1"]);
        // Sockets of two users: root's rules only.
        let mut m = send_as(10, a);
        m.to.owner_uid = b;
        assert_eq!(order(&m), ["0:1"]);
    }

    #[test]
    fn a_release_touches_only_the_rules_that_name_the_socket() {
        let rules = Rules::default();
        rules.add(Rule::parse("socket 2 die_after messages=5").unwrap(), 0);
        for i in 0..100 {
            rules.add(
                Rule::parse(&format!("socket {} full", 1000 + i)).unwrap(),
                0,
            );
        }
        rules.check(&send(10));
        rules.check(&send(11));
        // Sockets 2, 10, 11 (remembered), 1000..1099 (named).
        assert_eq!(rules.by_socket.lock().len(), 103);
        // A socket no rule names or remembers: nothing to do, no write lock.
        {
            let _reading = rules.list.read();
            rules.forget_socket(5);
        }
        rules.forget_socket(10);
        assert_eq!(remembered(&rules), 1);
        rules.forget_socket(1000);
        assert_eq!(rules.list(0).len(), 100);
        assert_eq!(rules.by_socket.lock().len(), 101);
        // Deleted rules leave the index; with none left it is empty.
        rules.del(RuleId { owner: 0, n: 3 }, 0).unwrap();
        assert!(!rules.by_socket.lock().contains_key(&1001));
        rules.clear(0);
        assert!(rules.by_socket.lock().is_empty());
    }

    #[test]
    fn the_rule_set_is_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Rules>();
        let rules = Arc::new(Rules::default());
        rules.add(
            Rule::parse("socket 2 latency latency=1 toxicity=0.5 seed=1").unwrap(),
            0,
        );
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let rules = rules.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        rules.check(&send(10 + t));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(rules.list(0)[0].matched, 4000);
    }
}

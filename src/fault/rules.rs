//! The rule set of a mount: rules added, deleted and listed with their
//! counters, and the check the message path makes. With no rule the check
//! costs one relaxed load (`any`); with rules it takes a read lock, and a
//! rule's own lock only when the rule matches.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use parking_lot::{Mutex, RwLock};

use super::decision::{Decision, Injection};
use super::effect::{ConnState, Retry};
use super::kind::Fault;
use super::message::{End, Message};
use super::prng::Prng;
use super::rule::{After, Direction, Rule, Selector};

/// A rule as listed.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub id: u64,
    pub rule: Rule,
    /// The user who added it.
    pub owner: u32,
    /// Messages its selector matched.
    pub matched: u64,
    /// Messages it acted on.
    pub injected: u64,
}

struct Entry {
    id: u64,
    rule: Rule,
    owner: u32,
    state: Mutex<State>,
}

struct State {
    dice: Prng,
    matched: u64,
    injected: u64,
    bytes_matched: u64,
    /// Keyed by (sender socket, receiver socket).
    conns: HashMap<(u64, u64), ConnState>,
}

#[derive(Default)]
pub struct Rules {
    any: AtomicBool,
    /// Some rule needs the owners of the sockets (`Rules::needs_owners`).
    owners: AtomicBool,
    list: RwLock<Vec<Arc<Entry>>>,
    next_id: Mutex<u64>,
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

    /// `any` and `needs_owners` for `list`, under its write lock.
    fn refresh(&self, list: &[Arc<Entry>]) {
        let owners = list
            .iter()
            .any(|e| e.owner != ROOT || matches!(e.rule.selector, Selector::Uid(_)));
        self.owners.store(owners, Ordering::Relaxed);
        self.any.store(!list.is_empty(), Ordering::Relaxed);
    }

    /// `add` for a writer of the faults file or a ctl: ENOSPC once a user
    /// other than root has USER_RULES rules. Every message of the mount is
    /// checked against every rule, so one user's rules, unbounded, would
    /// slow all users' messages and grow the daemon without end.
    pub fn try_add(&self, rule: Rule, owner: u32) -> Result<u64, Errno> {
        if owner != ROOT {
            let n = self.list.read().iter().filter(|e| e.owner == owner).count();
            if n >= USER_RULES {
                return Err(Errno::ENOSPC);
            }
        }
        Ok(self.add(rule, owner))
    }

    /// Adds a rule for user `owner`; it acts from the next message on.
    pub fn add(&self, rule: Rule, owner: u32) -> u64 {
        let id = {
            let mut next = self.next_id.lock();
            *next += 1;
            *next
        };
        let dice = rule.seed.map_or_else(Prng::unseeded, Prng::new);
        let entry = Arc::new(Entry {
            id,
            rule,
            owner,
            state: Mutex::new(State {
                dice,
                matched: 0,
                injected: 0,
                bytes_matched: 0,
                conns: HashMap::new(),
            }),
        });
        let mut list = self.list.write();
        list.push(entry);
        self.refresh(&list);
        id
    }

    /// Deletes rule `id` for `caller`: root may delete any, a user their
    /// own (EPERM for root's, ENOENT for what they cannot see).
    pub fn del(&self, id: u64, caller: u32) -> Result<(), Errno> {
        let mut list = self.list.write();
        let at = list
            .iter()
            .position(|e| e.id == id && visible(e, caller))
            .ok_or(Errno::ENOENT)?;
        if caller != ROOT && list[at].owner != caller {
            return Err(Errno::EPERM);
        }
        list.remove(at);
        self.refresh(&list);
        Ok(())
    }

    /// Deletes every rule `caller` may delete.
    pub fn clear(&self, caller: u32) {
        let mut list = self.list.write();
        list.retain(|e| caller != ROOT && e.owner != caller);
        self.refresh(&list);
    }

    /// The rules `viewer` may see (root: all; a user: their own and
    /// root's, which act on their sockets too), oldest first.
    pub fn list(&self, viewer: u32) -> Vec<Listed> {
        self.list
            .read()
            .iter()
            .filter(|e| visible(e, viewer))
            .map(|e| {
                let s = e.state.lock();
                Listed {
                    id: e.id,
                    rule: e.rule.clone(),
                    owner: e.owner,
                    matched: s.matched,
                    injected: s.injected,
                }
            })
            .collect()
    }

    /// Socket `socket` is gone: its `socket N` rules go with it (the number
    /// may be given to a new socket), and what rules remember of its
    /// connections.
    pub fn forget_socket(&self, socket: u64) {
        let mut list = self.list.write();
        list.retain(|e| e.rule.selector != Selector::Socket(socket));
        for e in list.iter() {
            e.state
                .lock()
                .conns
                .retain(|&(from, to), _| from != socket && to != socket);
        }
        self.refresh(&list);
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
        self.list.read().iter().any(|e| {
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
            if !named || !may_act(e.owner, msg) || !selects(rule, msg) {
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

    /// What to do to `msg`: every rule that selects it, may act on its
    /// sockets, and hits it adds its part. Counts and logs each injection.
    pub fn check(&self, msg: &Message<'_>) -> Decision {
        let mut out = Decision::default();
        if !self.any() {
            return out;
        }
        for e in self.list.read().iter() {
            let rule = &e.rule;
            // Whose sockets first: one user's rules (name globs up to
            // glob::MAX_LEN) must cost other users' messages nothing.
            if rule.fault.acts_on() != msg.kind
                || !rule.fault.fits_type(msg.ty)
                || !may_act(e.owner, msg)
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
                s.conns.entry(key).or_default()
            } else {
                &mut scratch
            };
            let Some(mut d) = rule.fault.apply(msg, rule.toxicity, &mut s.dice, conn) else {
                continue;
            };
            s.injected += 1;
            log::info!("fault rule {} ({rule}): {msg}", e.id);
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
    viewer == ROOT || e.owner == viewer || e.owner == ROOT
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
        rules.list.read()[0].state.lock().conns.len()
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

//! Pinned processes: a pidfd the daemon makes while a process surely lives
//! (it is the caller of a send, a connect or a listen), as Linux pins the
//! caller's `struct pid` in an skb or in `sk_peer_pid`. A pidfd made later
//! from the number could name whoever reused it. One pidfd serves every
//! message and socket of the same live process held by one user, charged
//! to that user: as Linux charges a file to whoever holds it, a pin kept by
//! another user's socket (B's server keeping A's connections) is B's own
//! copy, so that B cannot hold A's share (integration/adversarial_pins.sh
//! payer). A flood of messages or connections costs one descriptor per
//! process and holding user.

use std::collections::HashMap;
use std::hash::Hash;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::fds::ChargedFd;
use super::pidns::{self, PidSeen};
use super::quota::Quota;
use crate::pidfd::alive;

/// A pidfd of one process, shared by what refers to it.
pub type Pin = Arc<ChargedFd>;

/// Descriptors held open while anything refers to them, one per key (a
/// process and its paying user here, a network namespace in netns_pin.rs),
/// each with what was read of it when it was opened (`T`).
pub struct PinTable<K, T = ()> {
    entries: Mutex<Entries<K, T>>,
}

struct Entries<K, T> {
    /// By key; an entry whose pin is gone is swept later or replaced.
    by_key: HashMap<K, (Weak<ChargedFd>, T)>,
    /// Entries at the last sweep of dead ones.
    swept: usize,
}

impl<K, T> Default for PinTable<K, T> {
    fn default() -> Self {
        PinTable {
            entries: Mutex::new(Entries {
                by_key: HashMap::new(),
                swept: 0,
            }),
        }
    }
}

impl<K: Eq + Hash, T: Clone> PinTable<K, T> {
    /// `key`'s entry, the table locked until it is dropped or filled: a
    /// second caller for the same key waits, then finds the first's pin.
    pub fn entry(&self, key: K) -> PinEntry<'_, K, T> {
        PinEntry {
            entries: self.entries.lock(),
            key,
        }
    }

    /// Keys with a pin held (tests).
    pub fn count_held(&self) -> usize {
        let entries = self.entries.lock();
        entries
            .by_key
            .values()
            .filter(|(w, _)| w.strong_count() > 0)
            .count()
    }
}

pub struct PinEntry<'a, K, T> {
    entries: MutexGuard<'a, Entries<K, T>>,
    key: K,
}

impl<K: Eq + Hash, T: Clone> PinEntry<'_, K, T> {
    /// The pin held under the key, if any still is, with what was read then.
    pub fn held(&self) -> Option<(Pin, T)> {
        let (pin, read) = self.entries.by_key.get(&self.key)?;
        Some((pin.upgrade()?, read.clone()))
    }

    /// A new pin under the key: the descriptor `open` makes (with what it
    /// read), charged to `uid`. The charge is asked first: a refused one
    /// opens nothing (ENFILE/ETOOMANYREFS).
    pub fn open(
        self,
        quota: &Arc<Quota>,
        uid: u32,
        open: impl FnOnce() -> Result<(OwnedFd, T), Errno>,
    ) -> Result<(Pin, T), Errno> {
        quota.take(uid, 1).map_err(super::fds::refused_errno)?;
        quota.give(uid, 1);
        let (fd, read) = open()?;
        let pin = Arc::new(ChargedFd::new(quota, uid, fd)?);
        self.fill(&pin, read.clone());
        Ok((pin, read))
    }

    /// Files `pin` under the key.
    pub fn fill(mut self, pin: &Pin, read: T) {
        let entries = &mut *self.entries;
        entries.by_key.insert(self.key, (Arc::downgrade(pin), read));
        if entries.by_key.len() > 2 * entries.swept + 64 {
            entries.by_key.retain(|_, (w, _)| w.strong_count() > 0);
            entries.swept = entries.by_key.len();
        }
    }
}

/// A copy of `pin`'s descriptor charged to `uid` (ENFILE/ETOOMANYREFS past
/// the quota, nothing opened then), within its share or past it (`within`).
pub fn dup_for(quota: &Arc<Quota>, pin: &Pin, uid: u32, within: bool) -> Result<Pin, Errno> {
    let refused = super::fds::refused_errno;
    match within {
        true => quota.take(uid, 1).map_err(refused)?,
        false => quota.take_past_share(uid, 1).map_err(refused)?,
    }
    quota.give(uid, 1);
    let fd = pin.as_fd().try_clone_to_owned().map_err(|e| {
        log::debug!("dup of a pin: {e}");
        Errno::ENFILE
    })?;
    let copy = match within {
        true => ChargedFd::new(quota, uid, fd),
        false => ChargedFd::past_share(quota, uid, fd),
    };
    Ok(Arc::new(copy?))
}

/// Pidfds by process (its pid then) and paying user.
#[derive(Default)]
pub struct Pins {
    by_pid: PinTable<(i32, u32), PidSeen>,
}

impl Pins {
    /// A pidfd of live process `pid` (the caller of the request being
    /// served) charged to `uid`, and where its pid lives (read once per pin,
    /// while the pidfd shows it alive). ESRCH: no such process;
    /// ENFILE/ETOOMANYREFS: past the descriptor quota.
    pub fn pin(&self, quota: &Arc<Quota>, pid: i32, uid: u32) -> Result<(Pin, PidSeen), Errno> {
        if pid <= 0 {
            return Err(Errno::ESRCH);
        }
        let entry = self.by_pid.entry((pid, uid));
        if let Some((p, seen)) = entry.held()
            && alive(&p)
        {
            return Ok((p, seen));
        }
        entry.open(quota, uid, || {
            let fd = crate::pidfd::open(pid, 0).map_err(|e| {
                log::debug!("pidfd_open({pid}): {e}");
                if e == Errno::EMFILE { Errno::ENFILE } else { e }
            })?;
            let seen = pidns::seen(pid);
            // Alive after the read: what was read is this process's.
            if !alive(&fd) {
                return Err(Errno::ESRCH);
            }
            Ok((fd, seen))
        })
    }

    /// `pin`, a pidfd of the process that had `pid`, charged to `holder`,
    /// the user whose socket or received file keeps it: itself when
    /// already theirs, else the holder's own pin of the same process, else
    /// a copy charged to the holder (filed for the holder's next one while
    /// the process lives, when where its pid lives is known: `seen`).
    /// ENFILE/ETOOMANYREFS: past the holder's share.
    pub fn for_holder(
        &self,
        quota: &Arc<Quota>,
        (pid, seen): (i32, Option<PidSeen>),
        pin: &Pin,
        holder: u32,
    ) -> Result<Pin, Errno> {
        if pin.uid() == holder {
            return Ok(pin.clone());
        }
        let entry = self.by_pid.entry((pid, holder));
        // Both alive, the held one first: the one process that has the number.
        let held = entry.held().filter(|(h, _)| alive(h));
        let live = alive(pin);
        if let Some((h, _)) = held.as_ref().filter(|_| live) {
            return Ok(h.clone());
        }
        let copy = dup_for(quota, pin, holder, true)?;
        if let Some(seen) = seen.filter(|_| live && held.is_none()) {
            entry.fill(&copy, seen);
        }
        Ok(copy)
    }

    /// Pins held (tests).
    pub fn len(&self) -> usize {
        self.by_pid.count_held()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pin_per_live_process_and_none_past_the_quota() {
        let q = Arc::new(Quota::new("descriptors"));
        q.set_max(1);
        let pins = Pins::default();
        let me = std::process::id() as i32;
        let (a, _) = pins.pin(&q, me, 1000).unwrap();
        let (b, _) = pins.pin(&q, me, 1000).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the same process shares one pidfd");
        assert_eq!(q.used(), 1);
        let mut child = crate::procfs::sleeping_child(5);
        let cpid = child.id() as i32;
        assert_eq!(pins.pin(&q, cpid, 1000).unwrap_err(), Errno::ENFILE);
        drop((a, b));
        assert_eq!(crate::engine::fds::settled(&q, 0), 0);
        let (c, _) = pins.pin(&q, cpid, 1000).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(&c), "a reaped process's pidfd is not alive");
        assert_eq!(pins.pin(&q, 0, 1000).unwrap_err(), Errno::ESRCH);
    }

    #[test]
    fn each_holding_user_pays_for_its_own_copy() {
        let q = Arc::new(Quota::new("descriptors"));
        q.set_max(100);
        q.set_user_share(30);
        let pins = Pins::default();
        let me = std::process::id() as i32;
        let (a, seen) = pins.pin(&q, me, 1000).unwrap();
        assert!(Arc::ptr_eq(
            &pins.for_holder(&q, (me, Some(seen)), &a, 1000).unwrap(),
            &a
        ));
        let b = pins.for_holder(&q, (me, Some(seen)), &a, 1001).unwrap();
        assert!(!Arc::ptr_eq(&a, &b), "another holder's is its own copy");
        assert_eq!((q.user_used(1000), q.user_used(1001)), (1, 1));
        let c = pins.for_holder(&q, (me, Some(seen)), &a, 1001).unwrap();
        let (d, _) = pins.pin(&q, me, 1001).unwrap();
        assert!(
            Arc::ptr_eq(&b, &c) && Arc::ptr_eq(&b, &d),
            "one per live process and holder"
        );
        // A reaped process: a copy each (its number may name another by now).
        let mut child = crate::procfs::sleeping_child(5);
        let cpid = child.id() as i32;
        let (x, seen) = pins.pin(&q, cpid, 1000).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let y = pins.for_holder(&q, (cpid, Some(seen)), &x, 1001).unwrap();
        let z = pins.for_holder(&q, (cpid, Some(seen)), &x, 1001).unwrap();
        assert!(!Arc::ptr_eq(&y, &z));
        assert_eq!((q.user_used(1000), q.user_used(1001)), (2, 3));
        // Past the holder's share: refused, nobody else charged.
        assert_eq!(
            pins.for_holder(&q, (cpid, Some(seen)), &x, 1001)
                .unwrap_err(),
            Errno::ETOOMANYREFS
        );
        assert_eq!((q.user_used(1000), q.user_used(1001)), (2, 3));
        drop((a, b, c, d, x, y, z));
        assert_eq!(crate::engine::fds::settled(&q, 0), 0);
    }
}

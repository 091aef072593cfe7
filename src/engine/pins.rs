//! Pinned processes: a pidfd the daemon makes while a process surely lives
//! (it is the caller of a send, a connect or a listen), as Linux pins the
//! caller's `struct pid` in an skb or in `sk_peer_pid`. A pidfd made later
//! from the number could name whoever reused it. One pidfd serves every
//! message and socket of the same live process, so a flood of messages costs
//! one descriptor per sending process, charged to that process's user.

use std::collections::HashMap;
use std::hash::Hash;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::fds::ChargedFd;
use super::quota::Quota;
use crate::pidfd::alive;

/// A pidfd of one process, shared by what refers to it.
pub type Pin = Arc<ChargedFd>;

/// Descriptors held open while anything refers to them, one per key (a
/// process here, a network namespace in netns_pin.rs), each charged to the
/// user whose request opened it.
pub struct PinTable<K> {
    entries: Mutex<Entries<K>>,
}

struct Entries<K> {
    /// By key; an entry whose pin is gone is swept later or replaced.
    by_key: HashMap<K, Weak<ChargedFd>>,
    /// Entries at the last sweep of dead ones.
    swept: usize,
}

impl<K> Default for PinTable<K> {
    fn default() -> Self {
        PinTable {
            entries: Mutex::new(Entries {
                by_key: HashMap::new(),
                swept: 0,
            }),
        }
    }
}

impl<K: Eq + Hash> PinTable<K> {
    /// `key`'s entry, the table locked until it is dropped or opened: a
    /// second caller for the same key waits, then finds the first's pin.
    pub fn entry(&self, key: K) -> PinEntry<'_, K> {
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
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

pub struct PinEntry<'a, K> {
    entries: MutexGuard<'a, Entries<K>>,
    key: K,
}

impl<K: Eq + Hash> PinEntry<'_, K> {
    /// The pin held under the key, if any still is.
    pub fn held(&self) -> Option<Pin> {
        self.entries.by_key.get(&self.key).and_then(Weak::upgrade)
    }

    /// A new pin under the key: the descriptor `open` makes, charged to
    /// `uid`. The charge is asked first: a refused one opens nothing
    /// (ENFILE/ETOOMANYREFS).
    pub fn open(
        mut self,
        quota: &Arc<Quota>,
        uid: u32,
        open: impl FnOnce() -> Result<OwnedFd, Errno>,
    ) -> Result<Pin, Errno> {
        quota.take(uid, 1).map_err(super::fds::refused_errno)?;
        quota.give(uid, 1);
        let pin = Arc::new(ChargedFd::new(quota, uid, open()?)?);
        let entries = &mut *self.entries;
        entries.by_key.insert(self.key, Arc::downgrade(&pin));
        if entries.by_key.len() > 2 * entries.swept + 64 {
            entries.by_key.retain(|_, w| w.strong_count() > 0);
            entries.swept = entries.by_key.len();
        }
        Ok(pin)
    }
}

#[derive(Default)]
pub struct Pins {
    by_pid: PinTable<i32>,
}

impl Pins {
    /// A pidfd of live process `pid` (the caller of the request being
    /// served), charged to `uid` when a new one is made. ESRCH: no such
    /// process; ENFILE/ETOOMANYREFS: past the descriptor quota.
    pub fn pin(&self, quota: &Arc<Quota>, pid: i32, uid: u32) -> Result<Pin, Errno> {
        if pid <= 0 {
            return Err(Errno::ESRCH);
        }
        let entry = self.by_pid.entry(pid);
        if let Some(p) = entry.held()
            && alive(&p)
        {
            return Ok(p);
        }
        entry.open(quota, uid, || {
            crate::pidfd::open(pid, 0).map_err(|e| {
                log::debug!("pidfd_open({pid}): {e}");
                if e == Errno::EMFILE { Errno::ENFILE } else { e }
            })
        })
    }

    /// Pids with a pin held (tests).
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
        let a = pins.pin(&q, me, 1000).unwrap();
        let b = pins.pin(&q, me, 1000).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the same process shares one pidfd");
        assert_eq!(q.used(), 1);
        let mut child = crate::procfs::sleeping_child(5);
        let cpid = child.id() as i32;
        assert_eq!(pins.pin(&q, cpid, 1000).unwrap_err(), Errno::ENFILE);
        drop((a, b));
        assert_eq!(crate::engine::fds::settled(&q, 0), 0);
        let c = pins.pin(&q, cpid, 1000).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(&c), "a reaped process's pidfd is not alive");
        assert_eq!(pins.pin(&q, 0, 1000).unwrap_err(), Errno::ESRCH);
    }
}

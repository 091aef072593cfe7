//! One lock-sharded container for every table that many threads touch at
//! once (sockets, generations, open files, parked requests, credentials):
//! a key picks a shard, each shard has its own lock, so unrelated keys never
//! meet on one lock.

use std::collections::HashMap;
use std::hash::Hash;

use parking_lot::{Mutex, MutexGuard};

/// Shards enough for a 2-core machine and for bursts of threads.
pub const DEFAULT_SHARDS: usize = 16;

/// `N` independently locked values of `T`, picked by a number.
pub struct Sharded<T> {
    shards: Vec<Mutex<T>>,
}

impl<T: Default> Sharded<T> {
    pub fn new(n: usize) -> Self {
        assert!(n > 0, "a sharded table needs a shard");
        Sharded {
            shards: (0..n).map(|_| Mutex::new(T::default())).collect(),
        }
    }
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Self::new(DEFAULT_SHARDS)
    }
}

impl<T> Sharded<T> {
    pub fn count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a number falls in.
    pub fn index(&self, n: u64) -> usize {
        (n % self.shards.len() as u64) as usize
    }

    /// Locks the shard for number `n`.
    pub fn lock(&self, n: u64) -> MutexGuard<'_, T> {
        self.shards[self.index(n)].lock()
    }

    /// Locks shard `i` itself (for tables that encode the shard in their ids).
    pub fn lock_shard(&self, i: usize) -> Option<MutexGuard<'_, T>> {
        self.shards.get(i).map(|m| m.lock())
    }

    /// Visits every shard in turn, one lock at a time.
    pub fn for_each(&self, mut f: impl FnMut(usize, &mut T)) {
        for (i, s) in self.shards.iter().enumerate() {
            f(i, &mut s.lock());
        }
    }
}

/// A key that can pick a shard.
pub trait ShardKey: Hash + Eq {
    fn shard_number(&self) -> u64;
}

impl ShardKey for u64 {
    fn shard_number(&self) -> u64 {
        *self
    }
}

impl ShardKey for u32 {
    fn shard_number(&self) -> u64 {
        *self as u64
    }
}

/// A hash map split over `Sharded` locks.
pub struct ShardedMap<K, V> {
    inner: Sharded<HashMap<K, V>>,
}

impl<K: ShardKey, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap {
            inner: Sharded::new(DEFAULT_SHARDS),
        }
    }
}

impl<K: ShardKey, V> ShardedMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Locks the shard that holds `k`, for several steps under one lock.
    pub fn shard(&self, k: &K) -> MutexGuard<'_, HashMap<K, V>> {
        self.inner.lock(k.shard_number())
    }

    pub fn insert(&self, k: K, v: V) -> Option<V> {
        self.shard(&k).insert(k, v)
    }

    pub fn remove(&self, k: &K) -> Option<V> {
        self.shard(k).remove(k)
    }

    pub fn contains(&self, k: &K) -> bool {
        self.shard(k).contains_key(k)
    }

    pub fn len(&self) -> usize {
        let mut n = 0;
        self.inner.for_each(|_, m| n += m.len());
        n
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: ShardKey, V: Clone> ShardedMap<K, V> {
    pub fn get(&self, k: &K) -> Option<V> {
        self.shard(k).get(k).cloned()
    }

    /// A copy of every value, taken one shard at a time (not a snapshot
    /// of one instant).
    pub fn values(&self) -> Vec<V> {
        let mut out = Vec::new();
        self.inner.for_each(|_, m| out.extend(m.values().cloned()));
        out
    }
}

impl<K: ShardKey + Clone, V: Clone> ShardedMap<K, V> {
    pub fn entries(&self) -> Vec<(K, V)> {
        let mut out = Vec::new();
        self.inner
            .for_each(|_, m| out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone()))));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_keys_apart_across_shards() {
        let m: ShardedMap<u64, u64> = ShardedMap::new();
        for k in 0..100 {
            assert_eq!(m.insert(k, k * 2), None);
        }
        assert_eq!(m.len(), 100);
        assert_eq!(m.get(&37), Some(74));
        assert_eq!(m.remove(&37), Some(74));
        assert!(!m.contains(&37));
        assert_eq!(m.len(), 99);
        let mut v = m.values();
        v.sort();
        assert_eq!(v.first(), Some(&0));
        assert_eq!(v.last(), Some(&198));
    }

    #[test]
    fn shard_index_is_the_number_modulo_count() {
        let s: Sharded<Vec<u8>> = Sharded::new(4);
        assert_eq!(s.index(9), 1);
        s.lock(9).push(1);
        assert_eq!(s.lock_shard(1).unwrap().len(), 1);
        assert!(s.lock_shard(4).is_none());
    }
}

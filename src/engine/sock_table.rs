//! The socket directories `.udsfs/sock/N`: sockets (and received aliases of
//! them) by number, in slabs spread over `Sharded` locks, and by generation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use slab::Slab;

use super::access::DirRefs;
use super::socket::Socket;
use crate::sharded::{Sharded, ShardedMap};

/// One `.udsfs/sock/N` directory: a socket and who may use it.
#[derive(Clone)]
pub struct SockDir {
    pub sock: Arc<Socket>,
    pub uid: u32,
    pub gid: u32,
    /// Whose quota it counts against: the owner's, except an embryo's,
    /// which the connecting client pays for until it is accepted.
    pub charged: u32,
    pub generation: u64,
    /// Who may open it now (src/engine/access.rs).
    pub refs: Arc<DirRefs>,
}

const SHARDS: usize = 16;

/// Directory numbers encode their shard (`(key * SHARDS + shard) + 1`), so
/// creating sockets on many threads does not meet on one lock.
pub(crate) struct SockTable {
    slabs: Sharded<Slab<SockDir>>,
    next: AtomicUsize,
    /// Directory numbers by generation. Numbers are reused, generations are
    /// not: file-system inode numbers are made from generations, so a file
    /// still open on a closed socket never meets a newer socket's inode.
    by_generation: ShardedMap<u64, u64>,
}

impl SockTable {
    pub fn new() -> SockTable {
        SockTable {
            slabs: Sharded::new(SHARDS),
            next: AtomicUsize::new(0),
            by_generation: ShardedMap::new(),
        }
    }

    fn id(shard: usize, key: usize) -> u64 {
        (key * SHARDS + shard) as u64 + 1
    }

    fn split(id: u64) -> Option<(usize, usize)> {
        let n = id.checked_sub(1)? as usize;
        Some((n % SHARDS, n / SHARDS))
    }

    /// Files a new directory made by `make` from its number; returns the
    /// number and the directory.
    pub fn insert(&self, make: impl FnOnce(u64) -> SockDir) -> (u64, SockDir) {
        let shard = self.next.fetch_add(1, Ordering::Relaxed) % self.slabs.count();
        let (id, dir) = {
            let mut slab = self.slabs.lock(shard as u64);
            let entry = slab.vacant_entry();
            let id = Self::id(shard, entry.key());
            let dir = make(id);
            entry.insert(dir.clone());
            (id, dir)
        };
        self.by_generation.insert(dir.generation, id);
        (id, dir)
    }

    pub fn get(&self, id: u64) -> Option<SockDir> {
        let (shard, key) = Self::split(id)?;
        self.slabs.lock_shard(shard)?.get(key).cloned()
    }

    /// Changes directory `id` in place, if it exists.
    pub fn update(&self, id: u64, f: impl FnOnce(&mut SockDir)) {
        if let Some((shard, key)) = Self::split(id)
            && let Some(mut slab) = self.slabs.lock_shard(shard)
            && let Some(d) = slab.get_mut(key)
        {
            f(d);
        }
    }

    pub fn remove(&self, id: u64) -> Option<SockDir> {
        let (shard, key) = Self::split(id)?;
        let removed = self
            .slabs
            .lock_shard(shard)
            .and_then(|mut slab| slab.try_remove(key));
        if let Some(d) = &removed {
            self.by_generation.remove(&d.generation);
        }
        removed
    }

    /// Every directory, by number.
    pub fn all(&self) -> Vec<(u64, SockDir)> {
        let mut out = Vec::new();
        self.slabs.for_each(|shard, slab| {
            out.extend(
                slab.iter()
                    .map(|(key, d)| (Self::id(shard, key), d.clone())),
            );
        });
        out.sort_by_key(|(id, _)| *id);
        out
    }

    /// What `f` makes of the lowest-numbered directories above `after`, by
    /// number: at most `most`, with none left out in between, and none only
    /// when no directory is left. A listing's chunk so costs about what it
    /// returns, not the whole table (every user lists every socket, and a
    /// chunk holds some 128 entries).
    pub fn after<T>(&self, after: u64, most: usize, f: impl Fn(&SockDir) -> T) -> Vec<(u64, T)> {
        // Numbers go round the shards, so each holds about 1/SHARDS of the
        // next `most`; a shard that has more than it was asked for cuts the
        // result at its last one, where what the others gave is complete.
        let per = most.div_ceil(SHARDS) + 4;
        let mut out = Vec::new();
        let mut cut = u64::MAX;
        self.slabs.for_each(|shard, slab| {
            // id(shard, key) > after  <=>  key * SHARDS > after - shard - 1
            let first = after
                .checked_sub(shard as u64 + 1)
                .map_or(0, |d| (d / SHARDS as u64 + 1) as usize);
            let before = out.len();
            out.extend(
                (first..slab.capacity())
                    .filter_map(|key| Some((Self::id(shard, key), f(slab.get(key)?))))
                    .take(per),
            );
            if out.len() - before == per
                && let Some(&(last, _)) = out.last()
            {
                cut = cut.min(last);
            }
        });
        out.retain(|(id, _)| *id <= cut);
        out.sort_unstable_by_key(|(id, _)| *id);
        out.truncate(most);
        out
    }

    /// The directory whose generation is `generation`, with its number.
    pub fn by_generation(&self, generation: u64) -> Option<(u64, SockDir)> {
        let id = self.by_generation.get(&generation)?;
        let d = self.get(id)?;
        (d.generation == generation).then_some((id, d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::socket::{SockDefaults, SockType};

    const DEFAULTS: SockDefaults = SockDefaults {
        sndbuf: 1,
        rcvbuf: 1,
        max_dgram_qlen: 1,
    };

    fn dir(id: u64, generation: u64) -> SockDir {
        SockDir {
            sock: Arc::new(Socket::new(id, generation, SockType::Stream, DEFAULTS)),
            uid: 0,
            gid: 0,
            charged: 0,
            generation,
            refs: Default::default(),
        }
    }

    #[test]
    fn numbers_are_reused_generations_are_not() {
        let t = SockTable::new();
        let ids: Vec<u64> = (0..40).map(|g| t.insert(|id| dir(id, g + 1)).0).collect();
        assert_eq!(ids.iter().min(), Some(&1));
        assert_eq!(t.all().len(), 40);
        let victim = ids[5];
        let old_gen = t.get(victim).unwrap().generation;
        t.remove(victim);
        assert!(t.get(victim).is_none());
        assert!(t.by_generation(old_gen).is_none());
        // The next insert in that shard takes the number again, with a new generation.
        let again: Vec<u64> = (0..SHARDS as u64)
            .map(|g| t.insert(|id| dir(id, 100 + g)).0)
            .collect();
        assert!(again.contains(&victim));
        let (id, d) = t.by_generation(t.get(victim).unwrap().generation).unwrap();
        assert_eq!(id, victim);
        assert_ne!(d.generation, old_gen);
        // Listed in chunks from any start, with gaps: every number once, in order.
        for gone in [3, 4, 20, 21, 22, 40] {
            t.remove(gone);
        }
        let all: Vec<u64> = t.all().into_iter().map(|(id, _)| id).collect();
        for (from, most) in [
            (0, 7),
            (1, 1),
            (5, 3),
            (16, 7),
            (17, 40),
            (33, 2),
            (victim, 5),
        ] {
            let (mut got, mut at) = (Vec::new(), from);
            loop {
                let chunk = t.after(at, most, |_| ());
                assert!(chunk.len() <= most);
                let Some(&(last, _)) = chunk.last() else {
                    break;
                };
                got.extend(chunk.into_iter().map(|(id, _)| id));
                at = last;
            }
            let want: Vec<u64> = all.iter().copied().filter(|&id| id > from).collect();
            assert_eq!(got, want, "after {from}, {most} at a time");
        }
        assert!(t.after(*all.last().unwrap(), 7, |_| ()).is_empty());
        t.update(victim, |d| d.uid = 7);
        assert_eq!(t.get(victim).unwrap().uid, 7);
        assert!(t.get(0).is_none());
    }
}

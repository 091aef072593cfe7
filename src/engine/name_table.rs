//! The name table: 2 x N buckets with a lock each. The lower half
//! holds unbound sockets (by id) and path-bound ones (by inode); the upper half
//! holds abstract names (by network namespace, name and type). Binding moves
//! a socket from one bucket to another with both locked in ascending order.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Arc;

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::name_key::NameKey;
use super::netns::NetNs;
use super::socket::{SockType, Socket};

type Bucket = HashMap<NameKey, Arc<Socket>>;

pub struct NameTable {
    buckets: Vec<Mutex<Bucket>>,
    half: usize,
    /// A random key per table: a client cannot choose abstract names that
    /// all land in one bucket without knowing it.
    hasher: RandomState,
    /// Which autobind-shaped names ("%05x") are taken, per namespace and
    /// type: lets an autobind skip taken runs a word at a time instead of
    /// probing each.
    autobind_taken: Mutex<HashMap<(NetNs, usize), TakenMap>>,
}

/// One bit per autobind name, and how many are set (the map goes with its
/// namespace's last autobind-shaped name).
struct TakenMap {
    set: usize,
    bits: Vec<u64>,
}

/// Autobind names: 5 lowercase hex digits, 2^20 of them per type.
pub const AUTOBIND_SPACE: u32 = 1 << 20;

fn autobind_number(name: &[u8]) -> Option<u32> {
    if name.len() != 5
        || !name
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(name).ok()?, 16).ok()
}

fn type_index(ty: SockType) -> usize {
    match ty {
        SockType::Stream => 0,
        SockType::Dgram => 1,
        SockType::Seqpacket => 2,
    }
}

impl NameTable {
    pub fn new(half: usize) -> NameTable {
        let half = half.max(1);
        NameTable {
            buckets: (0..2 * half).map(|_| Mutex::new(HashMap::new())).collect(),
            half,
            hasher: RandomState::new(),
            autobind_taken: Default::default(),
        }
    }

    fn mark_autobind(&self, key: &NameKey, taken: bool) {
        let NameKey::Abstract(ns, ty, name) = key else {
            return;
        };
        let Some(n) = autobind_number(name) else {
            return;
        };
        let mut maps = self.autobind_taken.lock();
        let (w, b) = (n as usize / 64, n % 64);
        if taken {
            let map = maps
                .entry((*ns, type_index(*ty)))
                .or_insert_with(|| TakenMap {
                    set: 0,
                    bits: vec![0; AUTOBIND_SPACE as usize / 64],
                });
            if map.bits[w] & (1 << b) == 0 {
                map.bits[w] |= 1 << b;
                map.set += 1;
            }
        } else if let Some(map) = maps.get_mut(&(*ns, type_index(*ty)))
            && map.bits[w] & (1 << b) != 0
        {
            map.bits[w] &= !(1 << b);
            map.set -= 1;
            if map.set == 0 {
                maps.remove(&(*ns, type_index(*ty)));
            }
        }
    }

    /// The first autobind number at or after `start` (cyclically, looking at
    /// most `limit` numbers) not known to be taken, and how many were looked
    /// at before it.
    pub fn next_free_autobind(
        &self,
        ns: NetNs,
        ty: SockType,
        start: u32,
        limit: u32,
    ) -> Option<(u32, u32)> {
        let maps = self.autobind_taken.lock();
        let Some(map) = maps.get(&(ns, type_index(ty))).map(|m| &m.bits) else {
            return (limit > 0).then_some((start, 0));
        };
        let mut looked = 0;
        let mut n = start;
        while looked < limit {
            let (w, b) = (n as usize / 64, n % 64);
            let free = !map[w] >> b;
            if free != 0 {
                let skip = free.trailing_zeros().min(limit - looked);
                if skip + looked < limit && b + skip < 64 {
                    return Some(((n + skip) % AUTOBIND_SPACE, looked + skip));
                }
            }
            // Rest of this word is taken: move to the next word.
            let step = 64 - b;
            looked += step;
            n = (n + step) % AUTOBIND_SPACE;
        }
        None
    }

    fn bucket_of(&self, key: &NameKey) -> usize {
        match key {
            NameKey::Unbound(id) => (*id % self.half as u64) as usize,
            NameKey::Path(ino) => (*ino % self.half as u64) as usize,
            NameKey::Abstract(ns, ty, name) => {
                let mut h = self.hasher.build_hasher();
                ns.hash(&mut h);
                ty.hash(&mut h);
                name.hash(&mut h);
                self.half + (h.finish() % self.half as u64) as usize
            }
        }
    }

    /// Locks the buckets of two keys in ascending order (one lock if they share it).
    fn lock2(
        &self,
        a: usize,
        b: usize,
    ) -> (MutexGuard<'_, Bucket>, Option<MutexGuard<'_, Bucket>>) {
        match a.cmp(&b) {
            std::cmp::Ordering::Equal => (self.buckets[a].lock(), None),
            std::cmp::Ordering::Less => {
                let ga = self.buckets[a].lock();
                (ga, Some(self.buckets[b].lock()))
            }
            std::cmp::Ordering::Greater => {
                let gb = self.buckets[b].lock();
                let ga = self.buckets[a].lock();
                (ga, Some(gb))
            }
        }
    }

    pub fn insert_unbound(&self, sock: &Arc<Socket>) {
        let key = NameKey::Unbound(sock.id);
        self.buckets[self.bucket_of(&key)]
            .lock()
            .insert(key, sock.clone());
    }

    /// Moves `sock` from `old` to `new`; EADDRINUSE if `new` is taken.
    pub fn rebind(&self, sock: &Arc<Socket>, old: &NameKey, new: NameKey) -> Result<(), Errno> {
        let (bo, bn) = (self.bucket_of(old), self.bucket_of(&new));
        let (mut g_old, g_new) = self.lock2(bo, bn);
        let target = match g_new {
            Some(g) => g,
            None => {
                if g_old.contains_key(&new) {
                    return Err(Errno::EADDRINUSE);
                }
                g_old.remove(old);
                self.mark_autobind(&new, true);
                g_old.insert(new, sock.clone());
                return Ok(());
            }
        };
        let mut g_new = target;
        if g_new.contains_key(&new) {
            return Err(Errno::EADDRINUSE);
        }
        g_old.remove(old);
        self.mark_autobind(&new, true);
        g_new.insert(new, sock.clone());
        Ok(())
    }

    pub fn lookup(&self, key: &NameKey) -> Option<Arc<Socket>> {
        self.buckets[self.bucket_of(key)].lock().get(key).cloned()
    }

    /// Removes `key` if it still names `sock`.
    pub fn remove(&self, key: &NameKey, sock: &Socket) {
        let mut b = self.buckets[self.bucket_of(key)].lock();
        if b.get(key).is_some_and(|s| s.id == sock.id) {
            b.remove(key);
            self.mark_autobind(key, false);
        }
    }

    /// Every bound abstract name of every type, in every namespace.
    pub fn abstract_names(&self) -> Vec<(NetNs, SockType, Vec<u8>, Arc<Socket>)> {
        let mut out = Vec::new();
        for b in &self.buckets[self.half..] {
            for (k, s) in b.lock().iter() {
                if let NameKey::Abstract(ns, ty, n) = k {
                    out.push((*ns, *ty, n.clone(), s.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: NetNs = 4026531840;

    #[test]
    fn autobind_map_skips_taken_runs_and_wraps() {
        let t = NameTable::new(2);
        assert_eq!(
            t.next_free_autobind(NS, SockType::Dgram, 7, 10),
            Some((7, 0))
        );
        for n in 5..200u32 {
            t.mark_autobind(
                &NameKey::Abstract(NS, SockType::Dgram, format!("{n:05x}").into_bytes()),
                true,
            );
        }
        assert_eq!(
            t.next_free_autobind(NS, SockType::Dgram, 5, AUTOBIND_SPACE),
            Some((200, 195))
        );
        assert_eq!(t.next_free_autobind(NS, SockType::Dgram, 5, 195), None);
        assert_eq!(
            t.next_free_autobind(NS, SockType::Stream, 5, 1),
            Some((5, 0))
        );
        // Wrap-around from the top of the space.
        let top = AUTOBIND_SPACE - 2;
        t.mark_autobind(
            &NameKey::Abstract(NS, SockType::Dgram, format!("{top:05x}").into_bytes()),
            true,
        );
        t.mark_autobind(
            &NameKey::Abstract(NS, SockType::Dgram, format!("{:05x}", top + 1).into_bytes()),
            true,
        );
        assert_eq!(
            t.next_free_autobind(NS, SockType::Dgram, top, 10),
            Some((0, 2))
        );
        assert_eq!(autobind_number(b"0000A"), None);
        assert_eq!(autobind_number(b"fffff"), Some(0xfffff));
    }

    #[test]
    fn autobind_maps_are_per_namespace_and_go_with_their_last_name() {
        let t = NameTable::new(2);
        let key =
            |ns, n: u32| NameKey::Abstract(ns, SockType::Dgram, format!("{n:05x}").into_bytes());
        t.mark_autobind(&key(NS, 7), true);
        assert_eq!(
            t.next_free_autobind(NS, SockType::Dgram, 7, 10),
            Some((8, 1))
        );
        // Another namespace has all of its space.
        assert_eq!(
            t.next_free_autobind(NS + 1, SockType::Dgram, 7, 10),
            Some((7, 0))
        );
        t.mark_autobind(&key(NS, 7), true);
        t.mark_autobind(&key(NS + 1, 7), false);
        assert_eq!(t.autobind_taken.lock().len(), 1);
        t.mark_autobind(&key(NS, 7), false);
        assert!(t.autobind_taken.lock().is_empty());
        assert_eq!(
            t.next_free_autobind(NS, SockType::Dgram, 7, 10),
            Some((7, 0))
        );
    }

    /// Names chosen to share one bucket under a fixed (all-zero) key spread
    /// over the buckets of a real table.
    #[test]
    fn names_chosen_for_a_fixed_key_do_not_share_a_bucket() {
        let half = 256;
        let fixed_bucket = |name: &[u8]| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            SockType::Stream.hash(&mut h);
            name.hash(&mut h);
            h.finish() % half as u64
        };
        let chosen: Vec<Vec<u8>> = (0u32..)
            .map(|i| format!("n{i}").into_bytes())
            .filter(|n| fixed_bucket(n) == 0)
            .take(64)
            .collect();
        let t = NameTable::new(half);
        let buckets: std::collections::HashSet<usize> = chosen
            .iter()
            .map(|n| t.bucket_of(&NameKey::Abstract(NS, SockType::Stream, n.clone())))
            .collect();
        // All 64 in one bucket by chance: 256^-63.
        assert!(
            buckets.len() > 1,
            "64 chosen names share bucket {buckets:?}"
        );
    }
}

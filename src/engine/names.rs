//! The name table (seed 003): 2 x N buckets with a lock each. The lower half
//! holds unbound sockets (by id) and path-bound ones (by inode); the upper half
//! holds abstract names (by name and type). Binding moves a socket from one
//! bucket to another with both locked in ascending order.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::socket::{SockType, Socket};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NameKey {
    Unbound(u64),
    Path(u64),
    Abstract(SockType, Vec<u8>),
}

type Bucket = HashMap<NameKey, Arc<Socket>>;

pub struct NameTable {
    buckets: Vec<Mutex<Bucket>>,
    half: usize,
}

impl NameTable {
    pub fn new(half: usize) -> NameTable {
        let half = half.max(1);
        NameTable {
            buckets: (0..2 * half).map(|_| Mutex::new(HashMap::new())).collect(),
            half,
        }
    }

    fn bucket_of(&self, key: &NameKey) -> usize {
        match key {
            NameKey::Unbound(id) => (*id % self.half as u64) as usize,
            NameKey::Path(ino) => (*ino % self.half as u64) as usize,
            NameKey::Abstract(ty, name) => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
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
                g_old.insert(new, sock.clone());
                return Ok(());
            }
        };
        let mut g_new = target;
        if g_new.contains_key(&new) {
            return Err(Errno::EADDRINUSE);
        }
        g_old.remove(old);
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
        }
    }

    /// Every bound abstract name of every type.
    pub fn abstract_names(&self) -> Vec<(SockType, Vec<u8>, Arc<Socket>)> {
        let mut out = Vec::new();
        for b in &self.buckets[self.half..] {
            for (k, s) in b.lock().iter() {
                if let NameKey::Abstract(ty, n) = k {
                    out.push((*ty, n.clone(), s.clone()));
                }
            }
        }
        out
    }
}

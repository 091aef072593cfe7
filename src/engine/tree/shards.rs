//! The tree's shards: inodes spread over locks, and the few-shards lock an
//! operation on several inodes takes (ascending order, so no deadlock).

use std::collections::HashMap;
use std::ops::DerefMut;

use nix::errno::Errno;
use parking_lot::MutexGuard;

use super::Tree;
use super::node::Node;
use crate::engine::quota::Quota;

pub(super) type Shard = HashMap<u64, Node>;

/// The shards of a few inodes, locked in ascending order.
pub(super) struct Locked<'a> {
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
    nshards: usize,
    nodes: &'a Quota,
}

impl Locked<'_> {
    pub(super) fn shard_mut(&mut self, ino: u64) -> &mut Shard {
        let s = (ino % self.nshards as u64) as usize;
        let g = self.guards.iter_mut().find(|(i, _)| *i == s);
        g.expect("shard locked").1.deref_mut()
    }

    pub(super) fn get(&self, ino: u64) -> Result<&Node, Errno> {
        let s = (ino % self.nshards as u64) as usize;
        let g = self.guards.iter().find(|(i, _)| *i == s);
        g.expect("shard locked").1.get(&ino).ok_or(Errno::ENOENT)
    }

    pub(super) fn get_mut(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        self.shard_mut(ino).get_mut(&ino).ok_or(Errno::ENOENT)
    }

    pub(super) fn remove(&mut self, ino: u64) {
        if let Some(node) = self.shard_mut(ino).remove(&ino) {
            self.nodes.give(node.uid, 1);
        }
    }
}

impl Tree {
    pub(super) fn shard(&self, ino: u64) -> MutexGuard<'_, Shard> {
        self.shards[(ino % self.shards.len() as u64) as usize].lock()
    }

    pub(super) fn lock(&self, inos: &[u64]) -> Locked<'_> {
        let n = self.shards.len();
        let mut idx: Vec<usize> = inos.iter().map(|i| (i % n as u64) as usize).collect();
        idx.sort_unstable();
        idx.dedup();
        Locked {
            guards: idx
                .into_iter()
                .map(|i| (i, self.shards[i].lock()))
                .collect(),
            nshards: n,
            nodes: &self.nodes,
        }
    }
}

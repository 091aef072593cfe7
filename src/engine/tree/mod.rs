//! The namespace tree: a small tmpfs that holds directories, socket nodes and
//! symlinks. Inodes live in shards with a lock each (`shards`); an operation
//! that touches several inodes locks their shards in ascending order. The
//! nodes are in `node`, directory changes in `dirops`, path walks in `walk`;
//! this file has the tree itself and its reads.

mod dirops;
mod mirror;
mod node;
mod routes;
mod shards;
mod walk;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::quota::Quota;
pub use mirror::Mirrored;
pub use node::{Attr, Kind, Maker};
use node::{Content, Node};
use shards::Shard;

pub const ROOT_INO: u64 = 1;
const MAX_SYMLINKS: usize = 40;
const NAME_MAX: usize = 255;
/// The root's own name for the control tree; nothing else may take it.
pub const CONTROL_NAME: &[u8] = b".udsfs";

/// One directory entry: inode, kind, name.
pub type DirEntry = (u64, Kind, Vec<u8>);

pub struct Tree {
    shards: Vec<Mutex<Shard>>,
    next_ino: AtomicU64,
    /// Nodes in the tree, and how many it may hold (ENOSPC beyond, like a
    /// tmpfs out of inodes): no client can grow the daemon without bound.
    /// (per user too on a shared mount: see `quota`)
    pub nodes: Quota,
    /// Serialises directory moves, so a move cannot make a loop (Linux's s_vfs_rename_mutex).
    rename_lock: Mutex<()>,
    /// The mount point: absolute paths and symlink targets under it name tree paths.
    prefix: Option<Vec<u8>>,
    /// The route roots declared (`routes`): where directories are copies.
    routes: routes::Routes,
}

fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

impl Tree {
    pub fn new(nshards: usize, root_uid: u32, root_gid: u32, prefix: Option<Vec<u8>>) -> Tree {
        let nshards = nshards.max(1);
        let shards: Vec<Mutex<Shard>> = (0..nshards).map(|_| Mutex::new(HashMap::new())).collect();
        let root = Node::new(
            Content::Dir {
                entries: BTreeMap::new(),
                parent: ROOT_INO,
            },
            0o1777,
            root_uid,
            root_gid,
        );
        shards[(ROOT_INO % nshards as u64) as usize]
            .lock()
            .insert(ROOT_INO, root);
        let tree = Tree {
            shards,
            next_ino: AtomicU64::new(ROOT_INO + 1),
            rename_lock: Mutex::new(()),
            nodes: Quota::new("tree nodes"),
            prefix,
            routes: routes::Routes::new(root_uid),
        };
        // The root counts, as in tmpfs's nr_inodes.
        tree.nodes.transfer_in(root_uid, 1);
        tree
    }

    /// Caps the number of nodes (directories, socket nodes, symlinks).
    pub fn set_max_nodes(&self, n: usize) {
        self.nodes.set_max(n as u64);
    }

    /// The mount point, when the tree is a mount's.
    pub fn mount_point(&self) -> Option<&[u8]> {
        self.prefix.as_deref()
    }

    /// A relative path as it is; an absolute one with the mount point taken
    /// off (None when it lies outside the mount).
    pub fn strip_mount_prefix<'a>(&self, path: &'a [u8]) -> Option<&'a [u8]> {
        if !path.starts_with(b"/") {
            return Some(path);
        }
        let Some(prefix) = &self.prefix else {
            return Some(path);
        };
        let rest = path.strip_prefix(prefix.as_slice())?;
        if rest.is_empty() || rest.starts_with(b"/") {
            Some(rest)
        } else {
            None
        }
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, Errno> {
        self.shard(ino)
            .get(&ino)
            .map(|n| n.attr(ino))
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: u64, name: &[u8]) -> Result<u64, Errno> {
        let shard = self.shard(parent);
        let dir = shard.get(&parent).ok_or(Errno::ENOENT)?;
        match name {
            b"." => Ok(parent),
            b".." => match &dir.content {
                Content::Dir { parent, .. } => Ok(*parent),
                _ => Err(Errno::ENOTDIR),
            },
            _ => dir.entries()?.get(name).copied().ok_or(Errno::ENOENT),
        }
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let ino = self.child(parent, name)?;
        self.getattr(ino)
    }

    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, Errno> {
        let (entries, parent) = {
            let shard = self.shard(ino);
            let node = shard.get(&ino).ok_or(Errno::ENOENT)?;
            let Content::Dir { entries, parent } = &node.content else {
                return Err(Errno::ENOTDIR);
            };
            (entries.clone(), *parent)
        };
        let mut out = vec![
            (ino, Kind::Dir, b".".to_vec()),
            (parent, Kind::Dir, b"..".to_vec()),
        ];
        for (name, child) in entries {
            if let Ok(a) = self.getattr(child) {
                out.push((child, a.kind, name));
            }
        }
        Ok(out)
    }

    /// Directory `ino`'s parent and at most `limit` of its entries whose
    /// names sort after `after` (all from the start without it): a listing
    /// read in chunks resumes by name, so entries added or removed between
    /// chunks never shift the others.
    pub fn readdir_after(
        &self,
        ino: u64,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(u64, Vec<DirEntry>), Errno> {
        use std::ops::Bound;
        let (chunk, parent) = {
            let shard = self.shard(ino);
            let node = shard.get(&ino).ok_or(Errno::ENOENT)?;
            let Content::Dir { entries, parent } = &node.content else {
                return Err(Errno::ENOTDIR);
            };
            let from = after.map_or(Bound::Unbounded, Bound::Excluded);
            let chunk: Vec<(Vec<u8>, u64)> = entries
                .range::<[u8], _>((from, Bound::Unbounded))
                .take(limit)
                .map(|(n, c)| (n.clone(), *c))
                .collect();
            (chunk, *parent)
        };
        let out = chunk
            .into_iter()
            .filter_map(|(name, child)| Some((child, self.getattr(child).ok()?.kind, name)))
            .collect();
        Ok((parent, out))
    }

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, Errno> {
        match &self.shard(ino).get(&ino).ok_or(Errno::ENOENT)?.content {
            Content::Symlink(t) => Ok(t.clone()),
            _ => Err(Errno::EINVAL),
        }
    }

    /// chmod / chown / utimes. Permission to do so is the kernel's to check
    /// (default_permissions).
    pub fn setattr(
        &self,
        ino: u64,
        perm: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<Attr, Errno> {
        let mut shard = self.shard(ino);
        let node = shard.get_mut(&ino).ok_or(Errno::ENOENT)?;
        if let Some(p) = perm {
            node.perm = p & 0o7777;
        }
        if let Some(u) = uid {
            self.nodes.transfer(node.uid, u, 1);
            node.uid = u;
        }
        if let Some(g) = gid {
            node.gid = g;
        }
        if let Some(t) = atime {
            node.atime = t;
        }
        if let Some(t) = mtime {
            node.mtime = t;
        }
        node.ctime = SystemTime::now();
        Ok(node.attr(ino))
    }
}

//! The namespace tree: a small tmpfs that holds directories, socket nodes and
//! symlinks. Inodes live in shards with a lock each; an operation that touches
//! several inodes locks their shards in ascending order.

use std::collections::{BTreeMap, HashMap};
use std::ops::DerefMut;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::SystemTime;

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::cred::Caller;

pub const ROOT_INO: u64 = 1;
const MAX_SYMLINKS: usize = 40;
const NAME_MAX: usize = 255;
/// The root's own name for the control tree; nothing else may take it.
pub const CONTROL_NAME: &[u8] = b".udsfs";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Socket,
    Symlink,
}

/// One directory entry: inode, kind, name.
pub type DirEntry = (u64, Kind, Vec<u8>);

#[derive(Clone, Debug)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    /// Permission bits, sticky included (no file-type bits).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

enum Content {
    Dir {
        entries: BTreeMap<Vec<u8>, u64>,
        parent: u64,
    },
    Socket,
    Symlink(Vec<u8>),
}

struct Node {
    content: Content,
    perm: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
}

impl Node {
    fn new(content: Content, perm: u32, uid: u32, gid: u32) -> Node {
        let now = SystemTime::now();
        let nlink = if matches!(content, Content::Dir { .. }) {
            2
        } else {
            1
        };
        Node {
            content,
            perm: perm & 0o7777,
            uid,
            gid,
            nlink,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    fn kind(&self) -> Kind {
        match self.content {
            Content::Dir { .. } => Kind::Dir,
            Content::Socket => Kind::Socket,
            Content::Symlink(_) => Kind::Symlink,
        }
    }

    fn attr(&self, ino: u64) -> Attr {
        let size = match &self.content {
            Content::Dir { entries, .. } => entries.len() as u64 * 32,
            Content::Socket => 0,
            Content::Symlink(t) => t.len() as u64,
        };
        Attr {
            ino,
            kind: self.kind(),
            perm: self.perm,
            uid: self.uid,
            gid: self.gid,
            nlink: self.nlink,
            size,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }

    fn entries(&self) -> Result<&BTreeMap<Vec<u8>, u64>, Errno> {
        match &self.content {
            Content::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn entries_mut(&mut self) -> Result<&mut BTreeMap<Vec<u8>, u64>, Errno> {
        match &mut self.content {
            Content::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }

    /// Unix permission check; root passes everything but exec on a non-dir
    /// without any x bit.
    fn permits(&self, caller: &Caller, mask: u32) -> bool {
        if caller.is_root() {
            return mask & 1 == 0 || self.kind() == Kind::Dir || self.perm & 0o111 != 0;
        }
        let bits = if self.uid == caller.fsuid {
            self.perm >> 6
        } else if (self.perm >> 3) & 7 != self.perm & 7 && caller.in_group(self.gid) {
            self.perm >> 3
        } else {
            self.perm
        };
        bits & mask == mask
    }
}

type Shard = HashMap<u64, Node>;

/// The shards of a few inodes, locked in ascending order.
struct Locked<'a> {
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
    nshards: usize,
    nodes: &'a AtomicUsize,
}

impl Locked<'_> {
    fn shard_mut(&mut self, ino: u64) -> &mut Shard {
        let s = (ino % self.nshards as u64) as usize;
        let g = self.guards.iter_mut().find(|(i, _)| *i == s);
        g.expect("shard locked").1.deref_mut()
    }

    fn get(&self, ino: u64) -> Result<&Node, Errno> {
        let s = (ino % self.nshards as u64) as usize;
        let g = self.guards.iter().find(|(i, _)| *i == s);
        g.expect("shard locked").1.get(&ino).ok_or(Errno::ENOENT)
    }

    fn get_mut(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        self.shard_mut(ino).get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn remove(&mut self, ino: u64) {
        if self.shard_mut(ino).remove(&ino).is_some() {
            self.nodes.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

pub struct Tree {
    shards: Vec<Mutex<Shard>>,
    next_ino: AtomicU64,
    /// Nodes in the tree, and how many it may hold (ENOSPC beyond, like a
    /// tmpfs out of inodes): no client can grow the daemon without bound.
    nodes: AtomicUsize,
    max_nodes: AtomicUsize,
    /// Serialises directory moves, so a move cannot make a loop (Linux's s_vfs_rename_mutex).
    rename_lock: Mutex<()>,
    /// The mount point: absolute paths and symlink targets under it name tree paths.
    prefix: Option<Vec<u8>>,
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
        Tree {
            shards,
            next_ino: AtomicU64::new(ROOT_INO + 1),
            rename_lock: Mutex::new(()),
            nodes: AtomicUsize::new(1),
            max_nodes: AtomicUsize::new(usize::MAX),
            prefix,
        }
    }

    /// Caps the number of nodes (directories, socket nodes, symlinks).
    pub fn set_max_nodes(&self, n: usize) {
        self.max_nodes.store(n, Ordering::Relaxed);
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

    fn shard(&self, ino: u64) -> MutexGuard<'_, Shard> {
        self.shards[(ino % self.shards.len() as u64) as usize].lock()
    }

    fn lock(&self, inos: &[u64]) -> Locked<'_> {
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

    pub fn readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, Vec<u8>)>, Errno> {
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

    /// Makes a new node `name` in `parent`; EEXIST when the name is taken.
    fn insert(&self, parent: u64, name: &[u8], node: Node) -> Result<Attr, Errno> {
        check_name(name)?;
        if parent == ROOT_INO && name == CONTROL_NAME {
            return Err(Errno::EEXIST);
        }
        let is_dir = matches!(node.content, Content::Dir { .. });
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        let attr = node.attr(ino);
        let mut l = self.lock(&[parent, ino]);
        let dir = l.get_mut(parent)?;
        if dir.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        let entries = dir.entries_mut()?;
        if entries.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        if self.nodes.fetch_add(1, Ordering::Relaxed) >= self.max_nodes.load(Ordering::Relaxed) {
            self.nodes.fetch_sub(1, Ordering::Relaxed);
            log::info!(
                "tree is full: {} nodes",
                self.max_nodes.load(Ordering::Relaxed)
            );
            return Err(Errno::ENOSPC);
        }
        entries.insert(name.to_vec(), ino);
        dir.touch();
        if is_dir {
            dir.nlink += 1;
        }
        l.shard_mut(ino).insert(ino, node);
        Ok(attr)
    }

    pub fn mkdir(
        &self,
        parent: u64,
        name: &[u8],
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        let content = Content::Dir {
            entries: BTreeMap::new(),
            parent,
        };
        self.insert(parent, name, Node::new(content, perm, uid, gid))
    }

    pub fn mknod_socket(
        &self,
        parent: u64,
        name: &[u8],
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        self.insert(parent, name, Node::new(Content::Socket, perm, uid, gid))
    }

    pub fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.insert(
            parent,
            name,
            Node::new(Content::Symlink(target.to_vec()), 0o777, uid, gid),
        )
    }

    pub fn link(&self, ino: u64, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        check_name(name)?;
        if parent == ROOT_INO && name == CONTROL_NAME {
            return Err(Errno::EEXIST);
        }
        let mut l = self.lock(&[ino, parent]);
        if l.get(ino)?.kind() == Kind::Dir {
            return Err(Errno::EPERM);
        }
        let entries = l.get_mut(parent)?.entries_mut()?;
        if entries.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        entries.insert(name.to_vec(), ino);
        let node = l.get_mut(ino)?;
        node.nlink += 1;
        node.ctime = SystemTime::now();
        Ok(node.attr(ino))
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        let ino = self.child(parent, name)?;
        let mut l = self.lock(&[parent, ino]);
        // Re-check under the locks: the entry may have changed meanwhile.
        if l.get(parent)?.entries()?.get(name) != Some(&ino) {
            return Err(Errno::ENOENT);
        }
        if l.get(ino)?.kind() == Kind::Dir {
            return Err(Errno::EISDIR);
        }
        let dir = l.get_mut(parent)?;
        dir.entries_mut()?.remove(name);
        dir.touch();
        let node = l.get_mut(ino)?;
        node.nlink -= 1;
        node.ctime = SystemTime::now();
        if node.nlink == 0 {
            l.remove(ino);
        }
        Ok(())
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        if name == b"." {
            return Err(Errno::EINVAL);
        }
        if name == b".." {
            return Err(Errno::ENOTEMPTY);
        }
        let ino = self.child(parent, name)?;
        let mut l = self.lock(&[parent, ino]);
        if l.get(parent)?.entries()?.get(name) != Some(&ino) {
            return Err(Errno::ENOENT);
        }
        if !l.get(ino)?.entries()?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let dir = l.get_mut(parent)?;
        dir.entries_mut()?.remove(name);
        dir.nlink -= 1;
        dir.touch();
        l.remove(ino);
        Ok(())
    }

    /// Whether `ino` is `ancestor` or lies below it.
    fn is_within(&self, mut ino: u64, ancestor: u64) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            if ino == ROOT_INO {
                return false;
            }
            match self.child(ino, b"..") {
                Ok(p) => ino = p,
                Err(_) => return false,
            }
        }
    }

    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        check_name(newname)?;
        if newparent == ROOT_INO && newname == CONTROL_NAME {
            return Err(Errno::EPERM);
        }
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 || (noreplace && exchange)
        {
            return Err(Errno::EINVAL);
        }
        let _moving = self.rename_lock.lock();
        let ino = self.child(parent, name)?;
        let target = self.child(newparent, newname).ok();
        if target == Some(ino) {
            return Ok(());
        }
        let src_is_dir = self.getattr(ino)?.kind == Kind::Dir;
        if src_is_dir && self.is_within(newparent, ino) {
            return Err(Errno::EINVAL);
        }
        if let Some(t) = target
            && self.getattr(t)?.kind == Kind::Dir
            && self.is_within(parent, t)
        {
            return Err(if exchange {
                Errno::EINVAL
            } else {
                Errno::ENOTEMPTY
            });
        }
        let mut inos = vec![parent, newparent, ino];
        inos.extend(target);
        let mut l = self.lock(&inos);
        if l.get(parent)?.entries()?.get(name) != Some(&ino)
            || l.get(newparent)?.entries()?.get(newname).copied() != target
        {
            return Err(Errno::ENOENT);
        }
        if exchange {
            let t = target.ok_or(Errno::ENOENT)?;
            let t_is_dir = l.get(t)?.kind() == Kind::Dir;
            l.get_mut(parent)?.entries_mut()?.insert(name.to_vec(), t);
            l.get_mut(newparent)?
                .entries_mut()?
                .insert(newname.to_vec(), ino);
            if src_is_dir != t_is_dir && parent != newparent {
                let (dir_from, dir_to) = if src_is_dir {
                    (parent, newparent)
                } else {
                    (newparent, parent)
                };
                l.get_mut(dir_from)?.nlink -= 1;
                l.get_mut(dir_to)?.nlink += 1;
            }
            self.set_parent(&mut l, ino, newparent)?;
            self.set_parent(&mut l, t, parent)?;
        } else {
            if let Some(t) = target {
                if noreplace {
                    return Err(Errno::EEXIST);
                }
                let tnode = l.get(t)?;
                match (src_is_dir, tnode.kind() == Kind::Dir) {
                    (true, false) => return Err(Errno::ENOTDIR),
                    (false, true) => return Err(Errno::EISDIR),
                    (true, true) if !tnode.entries()?.is_empty() => return Err(Errno::ENOTEMPTY),
                    _ => {}
                }
                let t_is_dir = tnode.kind() == Kind::Dir;
                let tn = l.get_mut(t)?;
                tn.nlink = tn.nlink.saturating_sub(if t_is_dir { 2 } else { 1 });
                if tn.nlink == 0 {
                    l.remove(t);
                }
                if t_is_dir {
                    l.get_mut(newparent)?.nlink -= 1;
                }
            }
            l.get_mut(parent)?.entries_mut()?.remove(name);
            l.get_mut(newparent)?
                .entries_mut()?
                .insert(newname.to_vec(), ino);
            if src_is_dir && parent != newparent {
                l.get_mut(parent)?.nlink -= 1;
                l.get_mut(newparent)?.nlink += 1;
            }
            self.set_parent(&mut l, ino, newparent)?;
        }
        l.get_mut(parent)?.touch();
        l.get_mut(newparent)?.touch();
        l.get_mut(ino)?.ctime = SystemTime::now();
        Ok(())
    }

    fn set_parent(&self, l: &mut Locked<'_>, ino: u64, new_parent: u64) -> Result<(), Errno> {
        if let Content::Dir { parent, .. } = &mut l.get_mut(ino)?.content {
            *parent = new_parent;
        }
        Ok(())
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

    fn permits(&self, ino: u64, caller: &Caller, mask: u32) -> Result<bool, Errno> {
        let shard = self.shard(ino);
        Ok(shard.get(&ino).ok_or(Errno::ENOENT)?.permits(caller, mask))
    }

    /// Walks `path` (relative to the root) as the VFS would for `caller`:
    /// search permission on every directory, symlinks followed (the last one
    /// only if `follow_last`). Returns the parent, the last name and the inode
    /// it names, if any.
    pub fn walk(
        &self,
        path: &[u8],
        caller: &Caller,
        follow_last: bool,
    ) -> Result<(u64, Vec<u8>, Option<u64>), Errno> {
        let mut pending: Vec<Vec<u8>> = split(path);
        pending.reverse();
        let mut dir = ROOT_INO;
        let mut links = 0;
        let trailing_slash = path.ends_with(b"/");
        loop {
            let Some(name) = pending.pop() else {
                // The path named the root (or only dots).
                return Ok((dir, b".".to_vec(), Some(dir)));
            };
            if name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            if self.getattr(dir)?.kind != Kind::Dir {
                return Err(Errno::ENOTDIR);
            }
            if !self.permits(dir, caller, 1)? {
                return Err(Errno::EACCES);
            }
            let last = pending.is_empty();
            let child = match self.child(dir, &name) {
                Ok(c) => c,
                Err(Errno::ENOENT) if last => return Ok((dir, name, None)),
                Err(e) => return Err(e),
            };
            let attr = self.getattr(child)?;
            if attr.kind == Kind::Symlink && (!last || follow_last || trailing_slash) {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Errno::ELOOP);
                }
                let link = self.readlink(child)?;
                let target = self.strip_mount_prefix(&link).ok_or(Errno::ENOENT)?;
                if target.starts_with(b"/") {
                    dir = ROOT_INO;
                }
                let mut more = split(target);
                more.reverse();
                pending.extend(more);
                continue;
            }
            if last {
                if trailing_slash && attr.kind != Kind::Dir {
                    return Err(Errno::ENOTDIR);
                }
                return Ok((dir, name, Some(child)));
            }
            dir = child;
        }
    }

    /// bind(): makes the socket node, or says why not as Linux would.
    pub fn bind_node(&self, path: &[u8], caller: &Caller, perm: u32) -> Result<u64, Errno> {
        if path.ends_with(b"/") {
            return Err(Errno::ENOENT);
        }
        let (dir, name, existing) = self.walk(path, caller, false)?;
        if existing.is_some() || name == b"." || name == b".." {
            return Err(Errno::EADDRINUSE);
        }
        if !self.permits(dir, caller, 3)? {
            return Err(Errno::EACCES);
        }
        match self.mknod_socket(dir, &name, perm, caller.fsuid, caller.fsgid) {
            Ok(a) => Ok(a.ino),
            Err(Errno::EEXIST) => Err(Errno::EADDRINUSE),
            Err(e) => Err(e),
        }
    }

    /// Takes back a node bind_node made (the socket turned out to be bound).
    pub fn unbind_node(&self, path: &[u8], ino: u64) {
        let root = Caller::new(0, 0, 0);
        if let Ok((dir, name, Some(found))) = self.walk(path, &root, false)
            && found == ino
        {
            let _ = self.unlink(dir, &name);
        }
    }

    /// connect()/sendto(): the socket node a path names, with write
    /// permission on it; ECONNREFUSED when it is not a socket node.
    pub fn connect_node(&self, path: &[u8], caller: &Caller) -> Result<u64, Errno> {
        let (_, _, ino) = self.walk(path, caller, true)?;
        let ino = ino.ok_or(Errno::ENOENT)?;
        self.check_connect_node(ino, caller)?;
        Ok(ino)
    }

    /// The checks connect makes on the node itself.
    pub fn check_connect_node(&self, ino: u64, caller: &Caller) -> Result<(), Errno> {
        if !self.permits(ino, caller, 2)? {
            return Err(Errno::EACCES);
        }
        if self.getattr(ino)?.kind != Kind::Socket {
            return Err(Errno::ECONNREFUSED);
        }
        Ok(())
    }
}

fn split(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(|c| c.to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cred::ProcStatus;

    fn user(uid: u32) -> Caller {
        Caller::with_status(
            1,
            ProcStatus {
                tgid: 1,
                uids: [uid; 4],
                gids: [uid; 4],
                umask: 0o022,
                groups: vec![],
            },
        )
    }

    #[test]
    fn bind_connect_and_names() {
        let t = Tree::new(4, 0, 0, None);
        let root = user(0);
        let run = t.mkdir(ROOT_INO, b"run", 0o755, 0, 0).unwrap();
        let ino = t.bind_node(b"run/a.sock", &root, 0o755).unwrap();
        assert_eq!(
            t.bind_node(b"run/a.sock", &root, 0o755),
            Err(Errno::EADDRINUSE)
        );
        assert_eq!(
            t.bind_node(b"nodir/a.sock", &root, 0o755),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            t.bind_node(b"run/a.sock/x", &root, 0o755),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(t.connect_node(b"/run/./a.sock", &root), Ok(ino));
        assert_eq!(t.connect_node(b"run", &root), Err(Errno::ECONNREFUSED));
        t.symlink(ROOT_INO, b"l", b"run/a.sock", 0, 0).unwrap();
        assert_eq!(t.connect_node(b"l", &root), Ok(ino));
        assert_eq!(t.bind_node(b"l", &root, 0o755), Err(Errno::EADDRINUSE));
        // Permissions: write on the node, search on the directories.
        let u = user(1000);
        assert_eq!(t.connect_node(b"run/a.sock", &u), Err(Errno::EACCES));
        t.setattr(ino, Some(0o777), None, None, None, None).unwrap();
        assert_eq!(t.connect_node(b"run/a.sock", &u), Ok(ino));
        t.setattr(run.ino, Some(0o700), None, None, None, None)
            .unwrap();
        assert_eq!(t.connect_node(b"run/a.sock", &u), Err(Errno::EACCES));
        // rename keeps the inode; unlink removes the name.
        t.rename(run.ino, b"a.sock", ROOT_INO, b"b.sock", 0)
            .unwrap();
        assert_eq!(t.connect_node(b"b.sock", &root), Ok(ino));
        assert_eq!(t.connect_node(b"run/a.sock", &root), Err(Errno::ENOENT));
        t.unlink(ROOT_INO, b"b.sock").unwrap();
        assert_eq!(t.connect_node(b"b.sock", &root), Err(Errno::ENOENT));
    }

    #[test]
    fn directory_rules() {
        let t = Tree::new(3, 0, 0, None);
        let a = t.mkdir(ROOT_INO, b"a", 0o755, 0, 0).unwrap();
        let b = t.mkdir(a.ino, b"b", 0o755, 0, 0).unwrap();
        assert_eq!(t.rename(ROOT_INO, b"a", b.ino, b"x", 0), Err(Errno::EINVAL));
        assert_eq!(t.rmdir(ROOT_INO, b"a"), Err(Errno::ENOTEMPTY));
        assert_eq!(
            t.mkdir(ROOT_INO, CONTROL_NAME, 0o755, 0, 0).unwrap_err(),
            Errno::EEXIST
        );
        assert_eq!(t.getattr(a.ino).unwrap().nlink, 3);
        t.rename(a.ino, b"b", ROOT_INO, b"b", 0).unwrap();
        assert_eq!(t.getattr(a.ino).unwrap().nlink, 2);
        t.rmdir(ROOT_INO, b"a").unwrap();
        assert_eq!(t.unlink(ROOT_INO, b"b"), Err(Errno::EISDIR));
        let mut links = 0;
        t.symlink(ROOT_INO, b"loop", b"loop", 0, 0).unwrap();
        if t.connect_node(b"loop", &user(0)) == Err(Errno::ELOOP) {
            links += 1;
        }
        assert_eq!(links, 1);
        // A full tree says ENOSPC, and room comes back with removals.
        t.set_max_nodes(t.nodes.load(Ordering::Relaxed));
        assert_eq!(
            t.mkdir(ROOT_INO, b"c", 0o755, 0, 0).unwrap_err(),
            Errno::ENOSPC
        );
        t.unlink(ROOT_INO, b"loop").unwrap();
        t.mkdir(ROOT_INO, b"c", 0o755, 0, 0).unwrap();
    }
}

//! Directory operations: making nodes (mkdir, socket nodes, symlinks),
//! link, unlink, rmdir and rename.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use nix::errno::Errno;

use super::node::{Attr, Content, Kind, Maker, Node};
use super::shards::Locked;
use super::{CONTROL_NAME, ROOT_INO, Tree, check_name};

impl Tree {
    /// Makes a new node `name` in `parent`; EEXIST when the name is taken.
    pub(super) fn insert(&self, parent: u64, name: &[u8], node: Node) -> Result<Attr, Errno> {
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
        self.nodes.take(node.uid, 1).map_err(|_| Errno::ENOSPC)?;
        entries.insert(name.to_vec(), ino);
        dir.touch();
        if is_dir {
            dir.nlink += 1;
        }
        l.shard_mut(ino).insert(ino, node);
        Ok(attr)
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], m: Maker) -> Result<Attr, Errno> {
        let content = Content::Dir {
            entries: BTreeMap::new(),
            parent,
        };
        self.insert(parent, name, Node::new(content, m.mode, m.uid, m.gid))
    }

    pub fn mknod_socket(&self, parent: u64, name: &[u8], m: Maker) -> Result<Attr, Errno> {
        self.insert(
            parent,
            name,
            Node::new(Content::Socket, m.mode, m.uid, m.gid),
        )
    }

    /// A symlink's mode is always 0777 (`m.mode` is not asked).
    pub fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        m: Maker,
    ) -> Result<Attr, Errno> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        let content = Content::Symlink(target.to_vec());
        self.insert(parent, name, Node::new(content, 0o777, m.uid, m.gid))
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
}

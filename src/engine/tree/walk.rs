//! Path walks as the VFS does them for a caller (search permission,
//! symlinks), and what bind and connect need of them.

use nix::errno::Errno;

use super::node::{Kind, Maker};
use super::{MAX_SYMLINKS, NAME_MAX, ROOT_INO, Tree};
use crate::engine::cred::Caller;

impl Tree {
    fn permits(&self, ino: u64, caller: &Caller, mask: u32) -> Result<bool, Errno> {
        let access = self.shard(ino).get(&ino).ok_or(Errno::ENOENT)?.access();
        Ok(access.permits(caller, mask))
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
        let m = Maker {
            uid: caller.fsuid,
            gid: caller.fsgid,
            mode: perm,
        };
        match self.mknod_socket(dir, &name, m) {
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

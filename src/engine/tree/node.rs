//! The tree's nodes: directories, socket nodes and symlinks, their
//! attributes, and the permission check on them.

use std::collections::BTreeMap;
use std::time::SystemTime;

use nix::errno::Errno;

use crate::engine::cred::Caller;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Socket,
    Symlink,
}

/// Who asks for a new node, with the mode it asks for.
#[derive(Clone, Copy, Debug)]
pub struct Maker {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

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

pub(super) enum Content {
    Dir {
        entries: BTreeMap<Vec<u8>, u64>,
        parent: u64,
    },
    Socket,
    Symlink(Vec<u8>),
}

pub(super) struct Node {
    pub(super) content: Content,
    pub(super) perm: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) nlink: u32,
    pub(super) atime: SystemTime,
    pub(super) mtime: SystemTime,
    pub(super) ctime: SystemTime,
}

impl Node {
    pub(super) fn new(content: Content, perm: u32, uid: u32, gid: u32) -> Node {
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

    pub(super) fn kind(&self) -> Kind {
        match self.content {
            Content::Dir { .. } => Kind::Dir,
            Content::Socket => Kind::Socket,
            Content::Symlink(_) => Kind::Symlink,
        }
    }

    pub(super) fn attr(&self, ino: u64) -> Attr {
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

    pub(super) fn entries(&self) -> Result<&BTreeMap<Vec<u8>, u64>, Errno> {
        match &self.content {
            Content::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn entries_mut(&mut self) -> Result<&mut BTreeMap<Vec<u8>, u64>, Errno> {
        match &mut self.content {
            Content::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }

    pub(super) fn access(&self) -> Access {
        Access {
            kind: self.kind(),
            perm: self.perm,
            uid: self.uid,
            gid: self.gid,
        }
    }
}

/// What a permission check needs of a node, copied out of its shard: the
/// check may read the caller's groups from /proc, which must not happen
/// with a shard locked.
#[derive(Clone, Copy)]
pub(super) struct Access {
    kind: Kind,
    perm: u32,
    uid: u32,
    gid: u32,
}

impl Access {
    /// Unix permission check; root passes everything but exec on a non-dir
    /// without any x bit.
    pub(super) fn permits(&self, caller: &Caller, mask: u32) -> bool {
        if caller.is_root() {
            return mask & 1 == 0 || self.kind == Kind::Dir || self.perm & 0o111 != 0;
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

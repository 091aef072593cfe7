//! File attributes: what `stat` shows for tree nodes, control files and
//! socket files, and `setattr` on them.

use std::time::SystemTime;

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};
use nix::errno::Errno;

use super::front::Inner;
use super::inode::{Ctrl, Node, SockFile};
use crate::engine::tree::Kind;
use crate::engine::{Caller, SockDir};
use udsfs_proto::mount::SOCKET_FILE_SIZE;

/// The times and sizes of a file made up by the daemon (control files);
/// the example `nullfs` answers with it too, so that its floor differs from
/// udsfs only in the work done.
pub fn synthetic(ino: u64, kind: FileType, perm: u32, uid: u32, gid: u32, size: u64) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm: perm as u16,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// What a lookup (or a request that makes a node) answers.
pub struct Entry {
    /// Its node's number (the kernel's node id), which `attr.ino` is
    /// too except for a socket's data file (`attr_of`).
    pub node: u64,
    pub attr: FileAttr,
    /// FUSE generation (see `Inner::generation`).
    pub generation: u64,
}

/// The changes a `setattr` asks for.
pub struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

impl Inner {
    pub(super) fn attr_of(&self, node: Node) -> Result<FileAttr, Errno> {
        Ok(match node {
            Node::Tree(ino) | Node::Connect(ino) => {
                let a = self.eng.tree.getattr(ino)?;
                let connect_view = matches!(node, Node::Connect(_));
                let (kind, size) = match a.kind {
                    Kind::Dir => (FileType::Directory, a.size),
                    Kind::Symlink => (FileType::Symlink, a.size),
                    Kind::Socket if connect_view => (FileType::RegularFile, SOCKET_FILE_SIZE),
                    Kind::Socket => (FileType::Socket, 0),
                };
                FileAttr {
                    ino: INodeNo(node.ino()),
                    size,
                    blocks: size.div_ceil(512),
                    atime: a.atime,
                    mtime: a.mtime,
                    ctime: a.ctime,
                    crtime: a.ctime,
                    kind,
                    perm: a.perm as u16,
                    nlink: a.nlink,
                    uid: a.uid,
                    gid: a.gid,
                    rdev: 0,
                    blksize: 4096,
                    flags: 0,
                }
            }
            Node::Ctrl(c) => {
                let (kind, perm) = match c {
                    Ctrl::Root | Ctrl::TypeDir(_) | Ctrl::SockDir | Ctrl::AbstractDir => {
                        (FileType::Directory, 0o555)
                    }
                    // Searched by anyone, listed by nobody: a ticket's name
                    // is its holder's secret.
                    Ctrl::AcceptDir => (FileType::Directory, 0o711),
                    Ctrl::Clone(_) | Ctrl::Pair(_) => (FileType::RegularFile, 0o666),
                    Ctrl::Unix | Ctrl::Graph | Ctrl::FdChannel => (FileType::RegularFile, 0o444),
                    Ctrl::Gc => (FileType::RegularFile, 0o644),
                    // Each reader sees what it may (src/capture/reader.rs);
                    // each writer's fault rules act on its own sockets only.
                    Ctrl::Capture | Ctrl::Faults => (FileType::RegularFile, 0o666),
                };
                // Clone and pair files are control handles once open.
                let size = match c {
                    Ctrl::Clone(_) | Ctrl::Pair(_) => SOCKET_FILE_SIZE,
                    _ => 0,
                };
                synthetic(node.ino(), kind, perm, self.uid, self.gid, size)
            }
            Node::Sock(generation, SockFile::Data) => {
                let (id, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                let (perm, uid, gid) = self.data_owner(id, &d);
                // The socket's inode number, as sockfs gives each socket one:
                // its own directory's, whichever entry (a passed copy's
                // .udsfs/sock/H) this is, so every descriptor of the socket
                // fstats one st_ino (Dovecot checks a passed connection by it).
                synthetic(
                    Node::Sock(d.sock.generation, SockFile::Data).ino(),
                    FileType::RegularFile,
                    perm,
                    uid,
                    gid,
                    SOCKET_FILE_SIZE,
                )
            }
            Node::Sock(generation, f) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                let (kind, perm, size) = match f {
                    SockFile::Dir => (FileType::Directory, 0o700, 0),
                    SockFile::Status => (FileType::RegularFile, 0o400, 0),
                    SockFile::Capture => (FileType::RegularFile, 0o600, 0),
                    SockFile::Ctl | SockFile::Accept => {
                        (FileType::RegularFile, 0o600, SOCKET_FILE_SIZE)
                    }
                    SockFile::Data | SockFile::Msg => {
                        (FileType::RegularFile, 0o600, SOCKET_FILE_SIZE)
                    }
                };
                synthetic(node.ino(), kind, perm, d.uid, d.gid, size)
            }
            // Open to any user as far as the kernel checks: the daemon
            // lets only the ticket's holder in (src/engine/tickets.rs).
            Node::Ticket(seq) => {
                let uid = self.eng.tickets.owner(seq).ok_or(Errno::ENOENT)?;
                synthetic(
                    node.ino(),
                    FileType::RegularFile,
                    0o666,
                    uid,
                    uid,
                    SOCKET_FILE_SIZE,
                )
            }
            Node::Abstract(generation) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                synthetic(
                    node.ino(),
                    FileType::RegularFile,
                    0o666,
                    d.uid,
                    d.gid,
                    SOCKET_FILE_SIZE,
                )
            }
        })
    }

    /// The mode and owner a socket's data file shows: its socket's inode
    /// (src/engine/sockinode.rs), which fstat of the descriptor reports
    /// (udsfs_proto::mount::socket_stat) and the kernel's
    /// default_permissions checks fchmod and fchown against. A received
    /// entry not opened yet shows read and write for all besides, so that
    /// the open that adopts it passes whatever mode the sender gave the
    /// socket (Linux hands the receiver the descriptor with no check); the
    /// directory's 0700 and src/engine/access.rs keep others out. Its owner
    /// is the socket's all along, so a chmod or chown of the path before
    /// that open is checked as one of the descriptor after it.
    fn data_owner(&self, id: u64, d: &SockDir) -> (u32, u32, u32) {
        let i = d.sock.inode.get();
        if id != d.sock.id && self.eng.unopened_entry(id) {
            return (i.perm | 0o666, i.uid, i.gid);
        }
        (i.perm, i.uid, i.gid)
    }

    /// `node`, unless it is a file of a socket directory `c` may not see
    /// (src/fuse/open.rs `visible`): ENOENT, as its lookup gives.
    pub(super) fn shown(&self, node: Node, c: &Caller) -> Result<Node, Errno> {
        if let Node::Sock(generation, _) = node
            && let Some((_, d)) = self.eng.dir_by_generation(generation)
            && !self.visible(&d, c)
        {
            return Err(Errno::ENOENT);
        }
        if let Node::Ticket(seq) = node {
            let h = crate::engine::tickets::Holder::of_thread(c);
            self.eng.tickets.shown_to(seq, h).ok_or(Errno::ENOENT)?;
        }
        Ok(node)
    }

    /// FUSE generation: inode numbers of socket files are made from
    /// generations already, so they are never reused.
    pub(super) fn generation(&self, node: Node) -> u64 {
        match node {
            Node::Sock(generation, _) | Node::Abstract(generation) => generation,
            _ => 0,
        }
    }

    pub(super) fn getattr(&self, ino: u64, c: &Caller) -> Result<FileAttr, Errno> {
        let node = Node::from_ino(ino).ok_or(Errno::ENOENT)?;
        self.attr_of(self.shown(node, c)?)
    }

    pub(super) fn setattr(&self, ino: u64, ch: AttrChange) -> Result<FileAttr, Errno> {
        let node = Node::from_ino(ino).ok_or(Errno::ENOENT)?;
        let t = |x: Option<TimeOrNow>| {
            x.map(|v| match v {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            })
        };
        match node {
            Node::Tree(ino) => {
                let a = self.eng.tree.getattr(ino);
                match (ch.size, a) {
                    (Some(_), Ok(a)) if a.kind == Kind::Dir => Err(Errno::EISDIR),
                    (Some(_), Ok(_)) => Err(Errno::EINVAL),
                    (_, Err(e)) => Err(e),
                    _ => self
                        .eng
                        .tree
                        .setattr(ino, ch.mode, ch.uid, ch.gid, t(ch.atime), t(ch.mtime))
                        .and_then(|_| self.attr_of(node)),
                }
            }
            // Truncating a socket file (shell `>`) is allowed and does nothing.
            _ if ch.mode.is_none() && ch.uid.is_none() && ch.gid.is_none() => self.attr_of(node),
            // fchmod and fchown of a socket descriptor (its data file) change
            // its socket's inode and nothing a path shows, as on Linux, where
            // they change the sockfs inode and not the bound name's (an event
            // library's pipe chmod starts with it). The kernel
            // (default_permissions) checked them against the data file's
            // attributes, the inode's (`data_owner`): the owner (or
            // CAP_FOWNER) for chmod, CAP_CHOWN over its ids for chown.
            Node::Sock(generation, SockFile::Data) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                d.sock.inode.change(ch.mode, ch.uid, ch.gid);
                self.attr_of(node)
            }
            _ => Err(Errno::EPERM),
        }
    }
}

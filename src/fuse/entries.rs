//! Directory listings of the tree and of the control tree.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::{FileType, INodeNo, ReplyDirectory};
use nix::errno::Errno;

use super::inode::{Ctrl, Node, SockFile, TYPE_NAMES};
use super::{Inner, ferr};
use crate::engine::addr;
use crate::engine::tree::{self, Kind, ROOT_INO};

impl Inner {
    fn entries(&self, node: Node) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        let dir = FileType::Directory;
        let reg = FileType::RegularFile;
        let mut out = Vec::new();
        match node {
            Node::Tree(ino) | Node::Connect(ino) => {
                let view = matches!(node, Node::Connect(_));
                for (child, kind, name) in self.eng.tree.readdir(ino)? {
                    let ft = match kind {
                        Kind::Dir => dir,
                        Kind::Symlink => FileType::Symlink,
                        Kind::Socket if view => reg,
                        Kind::Socket => FileType::Socket,
                    };
                    let ino = if view {
                        Node::Connect(child).ino()
                    } else {
                        child
                    };
                    out.push((ino, ft, name));
                }
                if ino == ROOT_INO && !view {
                    out.push((
                        Node::Ctrl(Ctrl::Root).ino(),
                        dir,
                        tree::CONTROL_NAME.to_vec(),
                    ));
                }
            }
            Node::Ctrl(Ctrl::Root) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((ROOT_INO, dir, b"..".to_vec()));
                for (t, n) in TYPE_NAMES {
                    out.push((
                        Node::Ctrl(Ctrl::TypeDir(t)).ino(),
                        dir,
                        n.as_bytes().to_vec(),
                    ));
                }
                out.push((Node::Ctrl(Ctrl::SockDir).ino(), dir, b"sock".to_vec()));
                out.push((
                    Node::Ctrl(Ctrl::AbstractDir).ino(),
                    dir,
                    b"abstract".to_vec(),
                ));
                out.push((Node::Connect(ROOT_INO).ino(), dir, b"connect".to_vec()));
                out.push((Node::Ctrl(Ctrl::Unix).ino(), reg, b"unix".to_vec()));
                out.push((Node::Ctrl(Ctrl::Gc).ino(), reg, b"gc".to_vec()));
            }
            Node::Ctrl(Ctrl::TypeDir(t)) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                out.push((Node::Ctrl(Ctrl::Clone(t)).ino(), reg, b"clone".to_vec()));
                out.push((Node::Ctrl(Ctrl::Pair(t)).ino(), reg, b"pair".to_vec()));
            }
            Node::Ctrl(Ctrl::SockDir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                for (id, d) in self.eng.dirs() {
                    out.push((
                        Node::Sock(d.generation, SockFile::Dir).ino(),
                        dir,
                        id.to_string().into_bytes(),
                    ));
                }
            }
            Node::Sock(generation, SockFile::Dir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::SockDir).ino(), dir, b"..".to_vec()));
                for (f, n) in SockFile::FILES {
                    out.push((Node::Sock(generation, f).ino(), reg, n.as_bytes().to_vec()));
                }
            }
            Node::Ctrl(Ctrl::AbstractDir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                let mut seen = std::collections::HashSet::new();
                for (_, name, s) in self.eng.abstract_names() {
                    let shown = addr::escape(&name).into_bytes();
                    if seen.insert(shown.clone()) {
                        out.push((Node::Abstract(s.generation).ino(), reg, shown));
                    }
                }
            }
            _ => return Err(Errno::ENOTDIR),
        }
        Ok(out)
    }

    pub(super) fn readdir(&self, ino: u64, offset: u64, mut reply: ReplyDirectory) {
        let res = Node::from_ino(ino)
            .ok_or(Errno::ENOENT)
            .and_then(|n| self.entries(n));
        match res {
            Ok(entries) => {
                for (idx, (ino, kind, name)) in
                    entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(
                        INodeNo(ino),
                        (idx + 1) as u64,
                        kind,
                        OsStr::from_bytes(&name),
                    ) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(ferr(e)),
        }
    }
}

//! Looking names up: the user's tree, the control tree `.udsfs/` and the
//! connect and abstract views; and where a symlink of the tree points.

use nix::errno::Errno;

use super::attr::Entry;
use super::front::Inner;
use super::inode::{Ctrl, Node, SockFile, TYPE_NAMES};
use crate::engine::Caller;
use crate::engine::tickets::Holder;
use crate::engine::tree::{self, ROOT_INO};
use udsfs_proto::{addr, mount};

impl Inner {
    pub(super) fn lookup_node(&self, parent: Node, name: &[u8], c: &Caller) -> Result<Node, Errno> {
        match parent {
            Node::Tree(ROOT_INO) if name == tree::CONTROL_NAME => Ok(Node::Ctrl(Ctrl::Root)),
            Node::Tree(p) => Ok(Node::Tree(self.eng.tree.lookup(p, name)?.ino)),
            Node::Connect(p) => Ok(Node::Connect(self.eng.tree.lookup(p, name)?.ino)),
            Node::Ctrl(Ctrl::Root) => match name {
                b"sock" => Ok(Node::Ctrl(Ctrl::SockDir)),
                b"abstract" => Ok(Node::Ctrl(Ctrl::AbstractDir)),
                b"connect" => Ok(Node::Connect(ROOT_INO)),
                b"unix" => Ok(Node::Ctrl(Ctrl::Unix)),
                b"graph" => Ok(Node::Ctrl(Ctrl::Graph)),
                b"capture" => Ok(Node::Ctrl(Ctrl::Capture)),
                b"gc" => Ok(Node::Ctrl(Ctrl::Gc)),
                b"faults" => Ok(Node::Ctrl(Ctrl::Faults)),
                b"fdchannel" => Ok(Node::Ctrl(Ctrl::FdChannel)),
                b"accept" => Ok(Node::Ctrl(Ctrl::AcceptDir)),
                _ => TYPE_NAMES
                    .iter()
                    .find(|(_, n)| n.as_bytes() == name)
                    .map(|(t, _)| Node::Ctrl(Ctrl::TypeDir(*t)))
                    .ok_or(Errno::ENOENT),
            },
            Node::Ctrl(Ctrl::TypeDir(t)) => match name {
                b"clone" => Ok(Node::Ctrl(Ctrl::Clone(t))),
                b"pair" => Ok(Node::Ctrl(Ctrl::Pair(t))),
                _ => Err(Errno::ENOENT),
            },
            Node::Ctrl(Ctrl::SockDir) => {
                // Only the number as it is listed: not "01", "+1" or " 1".
                let id: u64 = std::str::from_utf8(name)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|n: &u64| n.to_string().as_bytes() == name)
                    .ok_or(Errno::ENOENT)?;
                let d = self.eng.dir(id).filter(|d| self.visible(d, c));
                let d = d.ok_or(Errno::ENOENT)?;
                Ok(Node::Sock(d.generation, SockFile::Dir))
            }
            Node::Sock(generation, SockFile::Dir) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .filter(|(_, d)| self.visible(d, c))
                    .ok_or(Errno::ENOENT)?;
                let f = SockFile::from_name(name).ok_or(Errno::ENOENT)?;
                // The open that may follow is a path open (src/engine/access.rs).
                d.refs.note_lookup(c.tid, f.code() as u8);
                Ok(Node::Sock(generation, f))
            }
            // Only the thread the ticket was given to finds it: anyone
            // else (another user, a forked child) gets ENOENT, the ticket
            // left to its holder (src/engine/tickets.rs).
            Node::Ctrl(Ctrl::AcceptDir) => {
                let secret = mount::parse_ticket(name).ok_or(Errno::ENOENT)?;
                let h = Holder::of_thread(c);
                let seq = self.eng.tickets.find(secret, h).ok_or(Errno::ENOENT)?;
                Ok(Node::Ticket(seq))
            }
            Node::Ctrl(Ctrl::AbstractDir) => {
                let raw = addr::unescape(name).map_err(|_| Errno::ENOENT)?;
                let s = self.eng.find_abstract_any(&raw, c).ok_or(Errno::ENOENT)?;
                Ok(Node::Abstract(s.generation))
            }
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// A lookup for in-process callers (tests/park_model.rs): the inode
    /// number of `name` in `parent`, as the kernel looks it up before an open.
    pub fn lookup_ino(&self, parent: u64, name: &[u8], c: &Caller) -> Result<u64, Errno> {
        let p = Node::from_ino(parent).ok_or(Errno::ENOENT)?;
        Ok(self.lookup_node(p, name, c)?.ino())
    }

    /// readlink: the target of a symlink of the tree (or of its connect view).
    pub(super) fn readlink(&self, ino: u64) -> Result<Vec<u8>, Errno> {
        match Node::from_ino(ino) {
            Some(Node::Tree(i)) | Some(Node::Connect(i)) => self.eng.tree.readlink(i),
            _ => Err(Errno::EINVAL),
        }
    }

    /// lookup: the entry `name` of directory `parent`.
    pub(super) fn lookup(&self, parent: u64, name: &[u8], c: &Caller) -> Result<Entry, Errno> {
        let p = Node::from_ino(parent).ok_or(Errno::ENOENT)?;
        let n = self.lookup_node(p, name, c)?;
        Ok(Entry {
            node: n.ino(),
            attr: self.attr_of(n)?,
            generation: self.generation(n),
        })
    }
}

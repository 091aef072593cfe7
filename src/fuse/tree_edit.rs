//! Changes to the user's tree: directories, socket nodes, symlinks, links,
//! renames. The control tree refuses them (EPERM, EXDEV).

use nix::errno::Errno;

use super::attr::Entry;
use super::front::Inner;
use super::inode::Node;
use crate::engine::tree::{self, Maker};

/// The tree directory a request names, or EPERM for the control tree.
fn tree_dir(ino: u64) -> Result<u64, Errno> {
    match Node::from_ino(ino) {
        Some(Node::Tree(p)) => Ok(p),
        _ => Err(Errno::EPERM),
    }
}

impl Inner {
    /// The entry of a new tree node.
    fn entry(&self, a: tree::Attr) -> Result<Entry, Errno> {
        Ok(Entry {
            node: a.ino,
            attr: self.attr_of(Node::Tree(a.ino))?,
            generation: 0,
        })
    }

    pub(super) fn mknod(&self, parent: u64, name: &[u8], m: Maker) -> Result<Entry, Errno> {
        let p = tree_dir(parent)?;
        if m.mode & libc::S_IFMT != libc::S_IFSOCK {
            log::info!(
                "mknod of {:?}: only socket nodes may be made",
                String::from_utf8_lossy(name)
            );
            return Err(Errno::EPERM);
        }
        self.entry(self.eng.tree.mknod_socket(p, name, m)?)
    }

    /// mkdir by thread `tid`: the copy of a kernel directory takes its
    /// owner and mode (`Engine::mkdir`).
    pub(super) fn mkdir(
        &self,
        parent: u64,
        name: &[u8],
        m: Maker,
        tid: u32,
    ) -> Result<Entry, Errno> {
        let p = tree_dir(parent)?;
        let ino = self.eng.mkdir(p, name, m, tid)?;
        self.entry(self.eng.tree.getattr(ino)?)
    }

    pub(super) fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.eng.tree.unlink(tree_dir(parent)?, name)
    }

    pub(super) fn rmdir(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.eng.tree.rmdir(tree_dir(parent)?, name)
    }

    pub(super) fn symlink(
        &self,
        parent: u64,
        link_name: &[u8],
        target: &[u8],
        m: Maker,
    ) -> Result<Entry, Errno> {
        let p = tree_dir(parent)?;
        self.entry(self.eng.tree.symlink(p, link_name, target, m)?)
    }

    pub(super) fn rename(
        &self,
        (parent, name): (u64, &[u8]),
        (newparent, newname): (u64, &[u8]),
        flags: u32,
    ) -> Result<(), Errno> {
        let (Some(Node::Tree(p)), Some(Node::Tree(np))) =
            (Node::from_ino(parent), Node::from_ino(newparent))
        else {
            return Err(Errno::EXDEV);
        };
        self.eng.tree.rename(p, name, np, newname, flags)
    }

    pub(super) fn link(&self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Entry, Errno> {
        let (Some(Node::Tree(i)), Some(Node::Tree(np))) =
            (Node::from_ino(ino), Node::from_ino(newparent))
        else {
            return Err(Errno::EXDEV);
        };
        self.entry(self.eng.tree.link(i, np, newname)?)
    }
}

//! Changes to the user's tree: directories, socket nodes, symlinks, links,
//! renames. The control tree refuses them (EPERM, EXDEV).

use fuser::{Generation, ReplyData, ReplyEmpty, ReplyEntry};
use nix::errno::Errno;

use super::attr::TTL;
use super::inode::Node;
use super::{Inner, ferr};
use crate::engine::tree;

/// Who asks for a new node, with the mode it asks for.
pub struct Maker {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// The tree directory a request names, or EPERM for the control tree.
fn tree_dir(ino: u64) -> Result<u64, Errno> {
    match Node::from_ino(ino) {
        Some(Node::Tree(p)) => Ok(p),
        _ => Err(Errno::EPERM),
    }
}

fn reply_empty(res: Result<(), Errno>, reply: ReplyEmpty) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(ferr(e)),
    }
}

impl Inner {
    /// Answers a lookup-like request with the new tree node's attributes.
    fn reply_entry(&self, res: Result<tree::Attr, Errno>, reply: ReplyEntry) {
        match res.and_then(|a| self.attr_of(Node::Tree(a.ino))) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(ferr(e)),
        }
    }

    pub(super) fn readlink(&self, ino: u64, reply: ReplyData) {
        let res = match Node::from_ino(ino) {
            Some(Node::Tree(i)) | Some(Node::Connect(i)) => self.eng.tree.readlink(i),
            _ => Err(Errno::EINVAL),
        };
        match res {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(ferr(e)),
        }
    }

    pub(super) fn mknod(&self, parent: u64, name: &[u8], m: Maker, reply: ReplyEntry) {
        let p = match tree_dir(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(ferr(e)),
        };
        if m.mode & libc::S_IFMT != libc::S_IFSOCK {
            log::info!(
                "mknod of {:?}: only socket nodes may be made",
                String::from_utf8_lossy(name)
            );
            return reply.error(ferr(Errno::EPERM));
        }
        let res = self.eng.tree.mknod_socket(p, name, m.mode, m.uid, m.gid);
        self.reply_entry(res, reply);
    }

    pub(super) fn mkdir(&self, parent: u64, name: &[u8], m: Maker, reply: ReplyEntry) {
        let res = tree_dir(parent).and_then(|p| self.eng.tree.mkdir(p, name, m.mode, m.uid, m.gid));
        self.reply_entry(res, reply);
    }

    pub(super) fn unlink(&self, parent: u64, name: &[u8], reply: ReplyEmpty) {
        reply_empty(
            tree_dir(parent).and_then(|p| self.eng.tree.unlink(p, name)),
            reply,
        );
    }

    pub(super) fn rmdir(&self, parent: u64, name: &[u8], reply: ReplyEmpty) {
        reply_empty(
            tree_dir(parent).and_then(|p| self.eng.tree.rmdir(p, name)),
            reply,
        );
    }

    pub(super) fn symlink(
        &self,
        parent: u64,
        link_name: &[u8],
        target: &[u8],
        m: Maker,
        reply: ReplyEntry,
    ) {
        let res = tree_dir(parent)
            .and_then(|p| self.eng.tree.symlink(p, link_name, target, m.uid, m.gid));
        self.reply_entry(res, reply);
    }

    pub(super) fn rename(
        &self,
        (parent, name): (u64, &[u8]),
        (newparent, newname): (u64, &[u8]),
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let (Some(Node::Tree(p)), Some(Node::Tree(np))) =
            (Node::from_ino(parent), Node::from_ino(newparent))
        else {
            return reply.error(ferr(Errno::EXDEV));
        };
        reply_empty(self.eng.tree.rename(p, name, np, newname, flags), reply);
    }

    pub(super) fn link(&self, ino: u64, newparent: u64, newname: &[u8], reply: ReplyEntry) {
        let (Some(Node::Tree(i)), Some(Node::Tree(np))) =
            (Node::from_ino(ino), Node::from_ino(newparent))
        else {
            return reply.error(ferr(Errno::EXDEV));
        };
        let res = self.eng.tree.link(i, np, newname);
        self.reply_entry(res, reply);
    }
}

//! The mount's copies of kernel directories (src/engine/kernel_dirs.rs):
//! each directory on a tree path given the kernel directory's owner, group
//! and mode, made when a bind needs it, for a request a declaration governs
//! (`routes.rs`). Whose directory such a request may take: its own, any
//! when it is root's or the mount owner's, and another user's when the
//! requester owns the kernel's directory there or one below it on the path
//! (the kernel directory's owner, or one with a directory below it, has the
//! path: a copy squatted before the declaration is taken back, README
//! `route_squat`, `route_ancestor`). Another user's directory it may not
//! take is left as made, and the walk ends there (issue 29: B's declaration
//! of `/srv` or `/home/a/x` took A's plain directories there).

use nix::errno::Errno;

use super::node::{Kind, Maker};
use super::{ROOT_INO, Tree};

/// What `Tree::mirror` did.
#[derive(Debug, Default)]
pub struct Mirrored {
    /// The names dropped from copies whose owner changed.
    pub dropped: Vec<Vec<u8>>,
    /// The walk ended at another user's directory the request may not take.
    pub foreign: bool,
}

impl Tree {
    /// The tree path of directory `ino` ("" for the root), found through
    /// its parents; None when it was removed meanwhile (or lies deeper
    /// than 4096 levels).
    pub fn path_of(&self, mut ino: u64) -> Option<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = Vec::new();
        while ino != ROOT_INO {
            if names.len() > 4096 {
                return None;
            }
            let parent = self.child(ino, b"..").ok()?;
            let shard = self.shard(parent);
            let entries = shard.get(&parent)?.entries().ok()?;
            let (name, _) = entries.iter().find(|(_, c)| **c == ino)?;
            names.push(name.clone());
            drop(shard);
            ino = parent;
        }
        names.reverse();
        Some(names.join(&b'/'))
    }

    /// The directories of tree path `path` (as many of its components as
    /// `dirs` has: all but the last for a name's path) made to carry `dirs`,
    /// the kernel's at each of them in turn (as many as the kernel has), for
    /// a request of `uid`'s, when a declaration that governs it covers
    /// `path` (`Tree::declared_for`; else nothing changes): a copy whose
    /// owner, group or mode differ takes the kernel's (the daemon decides,
    /// whoever made the copy) when `uid` may take it (`may_take`), or when
    /// it has the kernel directory's owner already and that is root or the
    /// mount's owner, root's or the mount owner's declaration covers `path`
    /// (a chmod of the kernel's directory counts for everyone), or the
    /// kernel's mode grants nothing the copy's does not (`narrower`: a copy
    /// another user's directory went stale with is shut as the kernel's
    /// was; B's declaration opens no directory of A's that B may not take,
    /// even where the kernel's is A's and open), a missing one is made with
    /// them when `make` (a bind), and the walk stops at a missing one
    /// otherwise, at a name that is no directory, or at another user's
    /// directory `uid` may not take (`Mirrored::foreign`: the request is
    /// then refused, since that user could move names there or have bound
    /// its own at the request's name).
    /// A copy whose owner changes loses the socket nodes and links in it
    /// that their owners could not have made in the kernel's directory
    /// (`foreign`): made there while another user held the copy, they would
    /// answer at names only the kernel directory's owner may give.
    pub fn mirror(&self, path: &[u8], dirs: &[Maker], make: bool, uid: u32) -> Mirrored {
        let mut dropped = Vec::new();
        if !self.declared_for(path, uid) {
            return Mirrored {
                dropped,
                foreign: false,
            };
        }
        let open = self.declared_by_privileged(path);
        let mut dir = ROOT_INO;
        let parts = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".");
        for (i, (name, k)) in parts.zip(dirs).enumerate() {
            if name == b".." {
                break;
            }
            let ino = match self.child(dir, name) {
                Ok(ino) => ino,
                Err(Errno::ENOENT) if make => match self.mkdir(dir, name, *k) {
                    Ok(a) => a.ino,
                    Err(_) => break,
                },
                Err(_) => break,
            };
            let Ok(a) = self.getattr(ino) else { break };
            if a.kind != Kind::Dir {
                break;
            }
            let take = self.may_take(a.uid, &dirs[i..], uid);
            if a.uid != k.uid && !take {
                return Mirrored {
                    dropped,
                    foreign: true,
                };
            }
            if (a.uid, a.gid, a.perm) != (k.uid, k.gid, k.mode & 0o7777)
                && (take || open || self.privileged(a.uid) || narrower(k.mode, a.perm))
            {
                let _ = self.setattr(ino, Some(k.mode), Some(k.uid), Some(k.gid), None, None);
                if a.uid != k.uid {
                    dropped.extend(self.drop_foreign(ino, k));
                }
            }
            dir = ino;
        }
        Mirrored {
            dropped,
            foreign: false,
        }
    }

    /// Whether a request of `uid`'s may give a directory made by `maker`
    /// the kernel's owner, `below` being the kernel's directories from this
    /// one's place down the walked path: `uid` made it, is privileged
    /// (`Tree::privileged`), or owns one of those kernel directories, as
    /// the one who would have it on Linux. A user with no kernel directory
    /// there (B declaring A's `/home/a/x`, or root's `/srv`) takes no one's.
    fn may_take(&self, maker: u32, below: &[Maker], uid: u32) -> bool {
        maker == uid || self.privileged(uid) || below.iter().any(|k| k.uid == uid)
    }

    /// Removes from directory `dir`, now carrying `k`, the socket nodes and
    /// links whose owner could not have made them there: neither its owner
    /// nor root, with neither group nor others allowed to write. Their
    /// names.
    fn drop_foreign(&self, dir: u64, k: &Maker) -> Vec<Vec<u8>> {
        if k.mode & 0o022 != 0 {
            return Vec::new();
        }
        let entries = match self.shard(dir).get(&dir).map(|n| n.entries().cloned()) {
            Some(Ok(e)) => e,
            _ => return Vec::new(),
        };
        let mut dropped = Vec::new();
        for (name, ino) in entries {
            let Ok(a) = self.getattr(ino) else { continue };
            if a.kind != Kind::Dir
                && a.uid != k.uid
                && a.uid != 0
                && self.unlink(dir, &name).is_ok()
            {
                dropped.push(name);
            }
        }
        dropped
    }
}

/// Whether directory mode `new` grants nothing `old` does not: no
/// permission or set-id bit `old` lacks, and the sticky bit kept if `old`
/// has it (it takes a right away).
fn narrower(new: u32, old: u32) -> bool {
    let grants = |m: u32| m & 0o6777;
    grants(new) & !grants(old) == 0 && (old & 0o1000 == 0 || new & 0o1000 != 0)
}

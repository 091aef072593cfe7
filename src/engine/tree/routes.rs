//! The route roots declared to the daemon: the tree paths `P` a `udsfs run
//! --route /P` said are the places of kernel directories (README "What is
//! routed"). A directory of the mount at such a path, above one (on its way
//! from the root) or below one is a copy of the kernel's directory at the
//! same path, and takes its owner, group and mode (`mirror.rs`); every other
//! directory is its maker's, as any directory of a plain mount.
//!
//! Anyone may declare, but a declaration governs only its declarer's own
//! requests (its routed program's binds, connects and mkdirs); root's and
//! the mount owner's govern everyone's (a service manager's `udsfs run` that
//! starts several users' programs). So user B's declaration of `/srv` or
//! `/home/a/x` leaves user A's plain directories there as A made them
//! (issue 29: they became root's 0755 copies, A's sockets in them dropped),
//! and A's mkdir there after it is A's own. Which directories a governed
//! request may take from another user is `mirror.rs`'s rule.
//!
//! Keyed by path, not by node: a user who made an ancestor first and moves
//! it aside, with the route's copy in it, leaves the path declared, and the
//! directory put in its place is the copy from the next walk on. A user's
//! declarations are counted (`PER_USER`, one per root and declarer), so one
//! user cannot grow the daemon by declaring, and the daemon's are never
//! forgotten while the mount lives.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::{NAME_MAX, Tree};

/// Route roots one uid may declare (a `udsfs run` declares its `--route`s).
pub const PER_USER: usize = 256;
/// The longest route path taken (PATH_MAX).
const PATH_MAX: usize = 4096;
/// How long a datagram send's correction of a name's directories stands
/// for the next sends to names there (`Tree::dgram_corrected`).
pub const DGRAM_FRESH: Duration = Duration::from_secs(1);
/// Directories whose correction time is kept; past it the record starts
/// again (a send per directory corrects once more).
const FRESH_MAX: usize = 4096;

pub(super) struct Routes {
    inner: Mutex<Declared>,
    /// The mount's owner (its root directory's): its declarations, as
    /// root's, govern every user's requests.
    owner: u32,
}

impl Routes {
    pub(super) fn new(owner: u32) -> Routes {
        Routes {
            inner: Mutex::default(),
            owner,
        }
    }
}

#[derive(Default)]
struct Declared {
    /// The route roots, as tree paths (components joined by `/`), each with
    /// the uids that declared it.
    roots: HashMap<Vec<u8>, HashSet<u32>>,
    /// Every directory above a root (its proper prefixes), with the uids
    /// that declared a root below it.
    above: HashMap<Vec<u8>, HashSet<u32>>,
    /// Declarations made by each uid (one per root it declared).
    by_uid: HashMap<u32, usize>,
    /// The directory paths a datagram send corrected, and when.
    fresh: HashMap<Vec<u8>, Instant>,
}

/// The components of a tree path, `.` and `..` taken lexically (the fronts
/// route normalized paths: `udsfs_proto::route::normalize`).
fn components(path: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts
}

impl Tree {
    /// Declares tree path `path` (the route `/P`'s `P`, a leading slash
    /// allowed) a route root, for uid `uid`: EINVAL for the root itself,
    /// ENAMETOOLONG past PATH_MAX or NAME_MAX, ENOSPC past `PER_USER`
    /// declarations of one uid (a root another uid declared counts too: it
    /// is one more entry). Declaring one's own again is nothing.
    pub fn declare_route(&self, path: &[u8], uid: u32) -> Result<(), Errno> {
        if path.len() > PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let parts = components(path);
        if parts.is_empty() {
            return Err(Errno::EINVAL);
        }
        if parts.iter().any(|c| c.len() > NAME_MAX) {
            return Err(Errno::ENAMETOOLONG);
        }
        let key = parts.join(&b'/');
        let mut d = self.routes.inner.lock();
        if d.roots.get(&key).is_some_and(|by| by.contains(&uid)) {
            return Ok(());
        }
        let n = d.by_uid.entry(uid).or_default();
        if *n >= PER_USER {
            return Err(Errno::ENOSPC);
        }
        *n += 1;
        for i in 1..parts.len() {
            d.above
                .entry(parts[..i].join(&b'/'))
                .or_default()
                .insert(uid);
        }
        d.roots.entry(key).or_default().insert(uid);
        Ok(())
    }

    /// Whether any route root is declared (none: a plain mount, where no
    /// directory is a copy).
    pub fn any_route(&self) -> bool {
        !self.routes.inner.lock().roots.is_empty()
    }

    /// Whether the name at tree path `path` lies below a route root: its
    /// directories are then copies of the kernel's (all of them, those
    /// above the root too).
    pub fn under_route(&self, path: &[u8]) -> bool {
        let parts = components(path);
        let d = self.routes.inner.lock();
        if d.roots.is_empty() {
            return false;
        }
        (1..parts.len()).any(|i| d.roots.contains_key(&parts[..i].join(&b'/')))
    }

    /// Whether `uid` is root or the mount's owner, whose declarations
    /// govern every user's requests and who may take any copy.
    pub fn privileged(&self, uid: u32) -> bool {
        uid == 0 || uid == self.routes.owner
    }

    /// Whether a declaration that governs `uid`'s requests (its own, root's
    /// or the mount owner's) covers the walk of tree path `path`: a root at
    /// `path` or above it.
    pub fn declared_for(&self, path: &[u8], uid: u32) -> bool {
        self.covered(path, |by| self.governs(by, uid))
    }

    /// Whether root's or the mount owner's declaration covers the walk of
    /// tree path `path` (one that governs every user's requests).
    pub fn declared_by_privileged(&self, path: &[u8]) -> bool {
        self.covered(path, |by| {
            by.contains(&0) || by.contains(&self.routes.owner)
        })
    }

    /// Whether a root at tree path `path` or above it has declarers `by`
    /// for which `f` holds.
    fn covered(&self, path: &[u8], f: impl Fn(&HashSet<u32>) -> bool) -> bool {
        let parts = components(path);
        let d = self.routes.inner.lock();
        (1..=parts.len()).any(|i| d.roots.get(&parts[..i].join(&b'/')).is_some_and(&f))
    }

    /// Whether one of the declarers `by` governs `uid`'s requests.
    fn governs(&self, by: &HashSet<u32>, uid: u32) -> bool {
        by.contains(&uid) || by.contains(&0) || by.contains(&self.routes.owner)
    }

    /// For a datagram send to the name at tree path `path` below a route
    /// root: true when its directories were corrected for a send less than
    /// `DGRAM_FRESH` ago (nothing to do), else false, and the caller
    /// corrects them now (recorded as done). A send per message would walk
    /// the kernel's tree per message; a copy once corrected changes only as
    /// the kernel's directory lets its users, so the record only delays a
    /// change of the kernel's directory itself (a chmod counts for datagram
    /// sends up to `DGRAM_FRESH` later).
    pub fn dgram_corrected(&self, path: &[u8]) -> bool {
        let mut parts = components(path);
        parts.pop();
        let key = parts.join(&b'/');
        let now = Instant::now();
        let mut d = self.routes.inner.lock();
        if d.fresh
            .get(&key)
            .is_some_and(|t| now.duration_since(*t) < DGRAM_FRESH)
        {
            return true;
        }
        if d.fresh.len() >= FRESH_MAX {
            d.fresh.clear();
        }
        d.fresh.insert(key, now);
        false
    }

    /// Forgets the correction `dgram_corrected` recorded for the name at
    /// tree path `path` (its walk was refused: the next send walks again).
    pub fn dgram_forget(&self, path: &[u8]) {
        let mut parts = components(path);
        parts.pop();
        self.routes.inner.lock().fresh.remove(&parts.join(&b'/'));
    }

    /// Whether the directory at tree path `path`, made by `uid`, is a copy
    /// of the kernel's: a route root, above one, or below one, declared by
    /// a declaration that governs `uid`'s requests (`declared_for`).
    pub fn is_route_copy(&self, path: &[u8], uid: u32) -> bool {
        let parts = components(path);
        let key = parts.join(&b'/');
        {
            let d = self.routes.inner.lock();
            if d.roots.is_empty() {
                return false;
            }
            if d.above.get(&key).is_some_and(|by| self.governs(by, uid)) {
                return true;
            }
        }
        self.declared_for(path, uid)
    }
}

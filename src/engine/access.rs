//! Access to a socket directory by held reference. A `.udsfs/sock/N/`
//! directory (a socket's own or a received alias) opens only while its owner
//! holds a claim on it: a handle made through it (clone, pair, accept, the
//! connect view, or an open of its files by the owner), a socketpair half
//! not yet opened, or a received reference not yet opened. The last claim
//! going revokes the directory for good, as closing a Linux fd leaves no
//! way back to the socket. A new directory starts with no claim and is shut
//! until its first one (an embryo until it is accepted).
//!
//! Opening a socket's files also needs a lookup of that file by the same
//! thread just before: a path open always looks the name up (entry TTL 0,
//! src/fuse/attr.rs), a reopen of `/proc/PID/fd/N` never does, and Linux
//! answers that with ENXIO.
//!
//! Observers follow the same rule (`Engine::openers`): a capture of a user
//! other than root shows a message only if that user may open one of its
//! ends when it is sent (src/capture/reader.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::Engine;
use super::socket::Socket;

const REVOKED: u64 = 1 << 63;
/// Lookups remembered per directory: one per thread opening at once is all
/// a path open needs; only the owner (or root) can look names up in it.
const LOOKUPS: usize = 64;

#[derive(Default)]
pub struct DirRefs {
    /// Claims, with REVOKED once they ran out.
    state: AtomicU64,
    /// (thread id, file code) of lookups not yet followed by their open.
    lookups: Mutex<Vec<(u32, u8)>>,
}

/// One claim on directory `id`, given back with `Engine::release_claim`.
pub struct Claim {
    pub id: u64,
    pub refs: Arc<DirRefs>,
}

impl DirRefs {
    /// A claim that may be the first: for whoever makes the reference
    /// (a new socket's handle, an accept, a delivery).
    pub fn claim_first(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n & REVOKED == 0).then_some(n + 1)
            })
            .is_ok()
    }

    /// A claim on a directory already claimed: an open by its owner.
    pub fn claim_more(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n & REVOKED == 0 && n > 0).then_some(n + 1)
            })
            .is_ok()
    }

    /// Whether the owner holds a claim now.
    pub fn live(&self) -> bool {
        let n = self.state.load(Ordering::Acquire);
        n & REVOKED == 0 && n > 0
    }

    /// Whether the directory is its owner's: claimed now, or not yet
    /// claimed at all (a socket being made, an embryo its listener's owner
    /// is to accept), so never given up.
    pub fn owners(&self) -> bool {
        self.state.load(Ordering::Acquire) & REVOKED == 0
    }

    /// Gives one claim back; true when it was the last (revoked now).
    pub fn release(&self) -> bool {
        let r = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| match n {
                0 | REVOKED => None,
                1 => Some(REVOKED),
                n => Some(n - 1),
            });
        match r {
            Ok(before) => before == 1,
            Err(_) => {
                log::error!("socket directory: claim released without one, ignored");
                false
            }
        }
    }

    /// Remembers that thread `tid` looked up file `code` of the directory.
    /// Callers outside the daemon's pid namespace all arrive as tid 0, so
    /// their lookups are kept one per lookup: each stands for one open, and
    /// two of them opening at once do not take each other's.
    pub fn note_lookup(&self, tid: u32, code: u8) {
        let mut l = self.lookups.lock();
        if tid != 0 && l.contains(&(tid, code)) {
            return;
        }
        if l.len() >= LOOKUPS {
            l.remove(0);
        }
        l.push((tid, code));
    }

    /// Takes the lookup an open of file `code` by `tid` must follow.
    pub fn take_lookup(&self, tid: u32, code: u8) -> bool {
        let mut l = self.lookups.lock();
        match l.iter().position(|x| *x == (tid, code)) {
            Some(i) => {
                l.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

impl Engine {
    /// The users who may open socket `s` now through one of its
    /// directories (its own and the received aliases), root aside: the
    /// owner of each directory that is still its owner's (`DirRefs::owners`).
    /// The one decision every observer of other users' sockets follows.
    /// Takes no socket's state lock, so a caller may hold one.
    pub(crate) fn openers(&self, s: &Socket) -> Vec<u32> {
        let mut uids = Vec::with_capacity(1);
        let aliases = s.aliases.lock().clone();
        for id in std::iter::once(s.id).chain(aliases) {
            if let Some(d) = self.dir(id)
                && std::ptr::eq(Arc::as_ptr(&d.sock), s)
                && d.refs.owners()
                && !uids.contains(&d.uid)
            {
                uids.push(d.uid);
            }
        }
        uids
    }

    /// `openers`, or once nobody may open `s` (its close, its collection)
    /// the user who held it last.
    pub(crate) fn last_openers(&self, s: &Socket) -> Vec<u32> {
        let uids = self.openers(s);
        if !uids.is_empty() {
            return uids;
        }
        match s.last_opener.load(Ordering::Relaxed) {
            u32::MAX => uids,
            uid => vec![uid],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_revoke_for_good() {
        let d = DirRefs::default();
        assert!(!d.live());
        assert!(!d.claim_more(), "nobody holds a new directory");
        assert!(d.claim_first());
        assert!(d.claim_more());
        assert!(!d.release());
        assert!(d.live());
        assert!(d.release(), "the last claim revokes");
        assert!(!d.live());
        assert!(!d.claim_first() && !d.claim_more());
        assert!(!d.release(), "a release without a claim is refused");
        assert!(!d.live());
    }

    #[test]
    fn lookups_are_taken_once_per_thread_and_file() {
        let d = DirRefs::default();
        assert!(!d.take_lookup(7, 2));
        d.note_lookup(7, 2);
        d.note_lookup(7, 2);
        assert!(!d.take_lookup(8, 2));
        assert!(!d.take_lookup(7, 1));
        assert!(d.take_lookup(7, 2));
        assert!(!d.take_lookup(7, 2), "one lookup, one open");
        for t in 0..(LOOKUPS as u32 + 5) {
            d.note_lookup(t, 1);
        }
        assert!(!d.take_lookup(0, 1), "the oldest went");
        assert!(d.take_lookup(LOOKUPS as u32 + 4, 1));
    }

    #[test]
    fn tid_zero_lookups_count_one_each() {
        let d = DirRefs::default();
        d.note_lookup(0, 2);
        d.note_lookup(0, 2);
        assert!(
            d.take_lookup(0, 2) && d.take_lookup(0, 2),
            "two lookups, two opens"
        );
        assert!(!d.take_lookup(0, 2), "and no third");
    }
}

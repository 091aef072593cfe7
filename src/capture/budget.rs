//! What one user's captures may hold between them. Each reader's buffer
//! (`buffer BYTES`, filter.rs) is held against its user's share from its
//! open to its close: a user who opens many captures and never reads them
//! would otherwise make the daemon keep a copy of their traffic for each,
//! up to 256 MiB apiece (integration/adversarial_capture.sh). Root's
//! captures are not counted.

use std::collections::HashMap;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::filter::MAX_BUFFER;

/// The most a non-root user's open captures hold in all.
pub const USER_LIMIT: usize = MAX_BUFFER;

/// Bytes held, by user.
static HELD: Mutex<Option<HashMap<u32, usize>>> = Mutex::new(None);

/// One reader's part of its user's share.
pub struct Share {
    /// None: root's.
    uid: Option<u32>,
    held: usize,
}

impl Share {
    /// A share of user `uid`'s (None: root's, not counted).
    pub fn new(uid: Option<u32>) -> Share {
        Share { uid, held: 0 }
    }

    /// Holds `bytes` instead of what this share held; ENOBUFS (and what it
    /// held kept) when the user's captures would hold more than USER_LIMIT.
    pub fn hold(&mut self, bytes: usize) -> Result<(), Errno> {
        let Some(uid) = self.uid else {
            self.held = bytes;
            return Ok(());
        };
        let mut g = HELD.lock();
        let total = g.get_or_insert_with(HashMap::new).entry(uid).or_insert(0);
        let others = *total - self.held;
        if others + bytes > USER_LIMIT {
            log::info!(
                "capture: uid {uid}'s captures hold {others} bytes; {bytes} more would pass {USER_LIMIT}"
            );
            return Err(Errno::ENOBUFS);
        }
        *total = others + bytes;
        self.held = bytes;
        Ok(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let Some(uid) = self.uid else {
            return;
        };
        let mut g = HELD.lock();
        if let Some(m) = g.as_mut()
            && let Some(total) = m.get_mut(&uid)
        {
            *total -= self.held;
            if *total == 0 {
                m.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_captures_share_one_limit_and_root_has_none() {
        let user = Some(4_000_001);
        let mut a = Share::new(user);
        a.hold(USER_LIMIT - 10).unwrap();
        let mut b = Share::new(user);
        assert_eq!(b.hold(11), Err(Errno::ENOBUFS));
        b.hold(10).unwrap();
        // Shrinking makes room; a refused resize keeps what was held.
        assert_eq!(a.hold(USER_LIMIT), Err(Errno::ENOBUFS));
        a.hold(5).unwrap();
        b.hold(USER_LIMIT - 5).unwrap();
        drop(a);
        let mut c = Share::new(user);
        c.hold(5).unwrap();
        let mut r = Share::new(None);
        r.hold(USER_LIMIT * 4).unwrap();
        drop((b, c));
        assert!(
            HELD.lock()
                .as_ref()
                .is_none_or(|m| !m.contains_key(&4_000_001))
        );
    }
}

//! What one user's captures may hold between them. Each reader's buffer
//! (`buffer BYTES`, filter.rs) is held against its user's share from its
//! open to its close: a user who opens many captures and never reads them
//! would otherwise make the daemon keep a copy of their traffic for each,
//! up to 256 MiB apiece (integration/adversarial_capture.sh). A capture
//! costs the daemon more than its buffer (its reader, its place among the
//! taps, the ids it remembers), so it is charged at least FLOOR whatever
//! its `buffer`, and a user has at most USER_CAPTURES open
//! (integration/adversarial_observers.sh §3). Root's captures are not
//! counted.

use std::collections::HashMap;
use std::sync::LazyLock;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::filter::MAX_BUFFER;
use crate::engine::log_limit::LogLimit;

/// The most a non-root user's open captures hold in all.
pub const USER_LIMIT: usize = MAX_BUFFER;

/// What a capture is charged at least, however small its buffer.
pub const FLOOR: usize = 64 << 10;

/// The most captures a non-root user may have open at once.
pub const USER_CAPTURES: usize = 64;

/// One log line a second for the refusals: a user opening in a loop
/// cannot fill the daemon's log.
fn limit_log(uid: u32, line: impl FnOnce() -> String) {
    static LOG: LazyLock<LogLimit> = LazyLock::new(LogLimit::default);
    if let Some(skipped) = LOG.admit() {
        log::info!("{} (uid {uid}; {skipped} like it left out)", line());
    }
}

/// Bytes held and captures open, by user.
static HELD: Mutex<Option<HashMap<u32, (usize, usize)>>> = Mutex::new(None);

/// One reader's part of its user's share.
pub struct Share {
    /// None: root's.
    uid: Option<u32>,
    held: usize,
}

impl Share {
    /// A share of user `uid`'s (None: root's, not counted), holding
    /// nothing yet; ENOBUFS when the user has USER_CAPTURES open.
    pub fn new(uid: Option<u32>) -> Result<Share, Errno> {
        if let Some(uid) = uid {
            let mut g = HELD.lock();
            let e = g.get_or_insert_with(HashMap::new).entry(uid).or_default();
            if e.1 >= USER_CAPTURES {
                limit_log(uid, || {
                    format!("capture: uid {uid} has {USER_CAPTURES} captures open, the most")
                });
                return Err(Errno::ENOBUFS);
            }
            e.1 += 1;
        }
        Ok(Share { uid, held: 0 })
    }

    /// Holds `bytes` (at least FLOOR) instead of what this share held;
    /// ENOBUFS (and what it held kept) when the user's captures would hold
    /// more than USER_LIMIT.
    pub fn hold(&mut self, bytes: usize) -> Result<(), Errno> {
        let bytes = bytes.max(FLOOR);
        let Some(uid) = self.uid else {
            self.held = bytes;
            return Ok(());
        };
        let mut g = HELD.lock();
        let total = &mut g.get_or_insert_with(HashMap::new).entry(uid).or_default().0;
        let others = *total - self.held;
        if others + bytes > USER_LIMIT {
            limit_log(uid, || {
                format!(
                    "capture: uid {uid}'s captures hold {others} bytes; {bytes} more would pass {USER_LIMIT}"
                )
            });
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
            && let Some(e) = m.get_mut(&uid)
        {
            e.0 -= self.held;
            e.1 -= 1;
            if e.1 == 0 {
                m.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(uid: u32) -> bool {
        HELD.lock().as_ref().is_none_or(|m| !m.contains_key(&uid))
    }

    #[test]
    fn a_users_captures_share_one_limit_and_root_has_none() {
        let user = Some(4_000_001);
        let mut a = Share::new(user).unwrap();
        a.hold(USER_LIMIT - 2 * FLOOR).unwrap();
        let mut b = Share::new(user).unwrap();
        b.hold(FLOOR).unwrap();
        let mut c = Share::new(user).unwrap();
        c.hold(FLOOR).unwrap();
        assert_eq!(
            Share::new(user).unwrap().hold(1),
            Err(Errno::ENOBUFS),
            "a buffer of 1 is charged FLOOR"
        );
        // Shrinking makes room; a refused resize keeps what was held.
        assert_eq!(a.hold(USER_LIMIT), Err(Errno::ENOBUFS));
        a.hold(5).unwrap();
        c.hold(FLOOR * 3).unwrap();
        drop(a);
        let mut r = Share::new(None).unwrap();
        r.hold(USER_LIMIT * 4).unwrap();
        drop((b, c));
        assert!(gone(4_000_001));
    }

    #[test]
    fn a_buffer_of_one_byte_is_charged_the_floor() {
        let user = Some(4_000_002);
        let held: Vec<Share> = (0..USER_CAPTURES)
            .map(|_| {
                let mut s = Share::new(user).unwrap();
                s.hold(1).unwrap();
                s
            })
            .collect();
        let total = HELD.lock().as_ref().unwrap()[&4_000_002].0;
        assert_eq!(
            total,
            USER_CAPTURES * FLOOR,
            "each charged the floor, not 1 byte"
        );
        drop(held);
        assert!(gone(4_000_002));
    }

    #[test]
    fn a_user_has_a_bounded_number_of_captures_and_root_none() {
        let user = Some(4_000_003);
        let mut held: Vec<Share> = (0..USER_CAPTURES)
            .map(|_| Share::new(user).unwrap())
            .collect();
        assert_eq!(Share::new(user).err(), Some(Errno::ENOBUFS));
        assert!(
            Share::new(Some(4_000_004)).is_ok(),
            "another user has their own"
        );
        let root: Vec<Share> = (0..USER_CAPTURES * 2)
            .map(|_| Share::new(None).unwrap())
            .collect();
        held.pop();
        assert!(Share::new(user).is_ok(), "a close makes room");
        drop((held, root));
        assert!(gone(4_000_003) && gone(4_000_004));
    }
}

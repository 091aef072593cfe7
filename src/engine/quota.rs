//! A shared bound with per-user shares: how much of one resource (tree
//! nodes, parked requests, bytes held) the mount holds, what it may hold,
//! and, on a mount other users can reach, how much of it one user may take,
//! so that one user cannot take it all from the others (as RLIMITs and
//! memory cgroups keep one user from starving the kernel's sockets).
//!
//! Root is exempt from the share (it can take the rest of the total, as it
//! can use ext4's reserved blocks); everyone counts toward the total.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::log_limit::LogLimit;
use crate::sharded::ShardedMap;

/// Why a `take` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The mount holds its maximum.
    Full,
    /// This user holds its share of the maximum.
    UserShare,
}

pub struct Quota {
    /// What is counted, for log lines ("tree nodes").
    what: &'static str,
    max: AtomicU64,
    used: AtomicU64,
    /// A user's share of `max`, in thousandths; 0: no shares.
    share_permille: AtomicU64,
    by_user: ShardedMap<u32, u64>,
    /// Refusals come at a client's pace: their log lines are limited.
    log: LogLimit,
}

impl Quota {
    pub fn new(what: &'static str) -> Quota {
        Quota {
            what,
            max: AtomicU64::new(u64::MAX),
            used: AtomicU64::new(0),
            share_permille: AtomicU64::new(0),
            by_user: ShardedMap::new(),
            log: LogLimit::default(),
        }
    }

    pub fn set_max(&self, n: u64) {
        self.max.store(n, Ordering::Relaxed);
    }

    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Gives every user but root at most `permille`/1000 of the maximum
    /// (0 turns shares off).
    pub fn set_user_share(&self, permille: u64) {
        self.share_permille
            .store(permille.min(1000), Ordering::Relaxed);
    }

    /// What one user may hold.
    pub fn user_limit(&self) -> u64 {
        match self.share_permille.load(Ordering::Relaxed) {
            0 => u64::MAX,
            p => (self.max() as u128 * p as u128 / 1000) as u64,
        }
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn user_used(&self, uid: u32) -> u64 {
        self.by_user.get(&uid).unwrap_or(0)
    }

    /// Takes `n` for `uid`, or refuses and logs why.
    pub fn take(&self, uid: u32, n: u64) -> Result<(), Refused> {
        self.take_within(uid, n, true)
    }

    /// `take` whatever `uid`'s share (what follows a socket it took over, as
    /// the socket's own charge does at accept): refused only past the total.
    pub fn take_past_share(&self, uid: u32, n: u64) -> Result<(), Refused> {
        self.take_within(uid, n, false)
    }

    fn take_within(&self, uid: u32, n: u64, share: bool) -> Result<(), Refused> {
        if n == 0 {
            return Ok(());
        }
        let before = self.used.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > self.max() {
            self.used.fetch_sub(n, Ordering::Relaxed);
            return Err(self.refuse(uid, Refused::Full, before));
        }
        let mut users = self.by_user.shard(&uid);
        let mine = users.entry(uid).or_insert(0);
        if share && uid != 0 && mine.saturating_add(n) > self.user_limit() {
            let held = *mine;
            if held == 0 {
                users.remove(&uid);
            }
            drop(users);
            self.used.fetch_sub(n, Ordering::Relaxed);
            return Err(self.refuse(uid, Refused::UserShare, held));
        }
        *mine += n;
        Ok(())
    }

    /// The log line of a refusal.
    fn refuse(&self, uid: u32, why: Refused, held: u64) -> Refused {
        let (whose, limit) = match why {
            Refused::Full => ("the mount's", self.max()),
            Refused::UserShare => ("its share of", self.user_limit()),
        };
        if let Some(skipped) = self.log.admit() {
            let more = match skipped {
                0 => String::new(),
                n => format!("; {n} more refusals since the last line"),
            };
            log::warn!(
                "uid {uid}: {} would exceed {whose} {limit} ({held} held){more}",
                self.what
            );
        }
        why
    }

    /// Gives back what `take` took.
    pub fn give(&self, uid: u32, n: u64) {
        if n == 0 {
            return;
        }
        let mut users = self.by_user.shard(&uid);
        if let Some(mine) = users.get_mut(&uid) {
            *mine = mine.saturating_sub(n);
            if *mine == 0 {
                users.remove(&uid);
            }
        }
        drop(users);
        self.used.fetch_sub(n, Ordering::Relaxed);
    }

    /// Moves `n` from one user to another (chown); never refused.
    pub fn transfer(&self, from: u32, to: u32, n: u64) {
        if from != to {
            self.give(from, n);
            self.transfer_in(to, n);
        }
    }

    /// Counts `n` for `uid` without a check (what exists already, or what
    /// in-process callers make).
    pub fn transfer_in(&self, uid: u32, n: u64) {
        self.used.fetch_add(n, Ordering::Relaxed);
        *self.by_user.shard(&uid).entry(uid).or_insert(0) += n;
    }
}

/// An amount held on a quota for as long as this lives (a buffer that grows
/// and shrinks, and may change hands).
pub struct Charge {
    quota: Arc<Quota>,
    uid: u32,
    n: u64,
}

impl Charge {
    pub fn new(quota: Arc<Quota>) -> Charge {
        Charge {
            quota,
            uid: 0,
            n: 0,
        }
    }

    /// Makes the charge `n`, held by `uid`; on refusal nothing changes.
    pub fn set(&mut self, uid: u32, n: u64) -> Result<(), Refused> {
        if uid == self.uid && n <= self.n {
            self.quota.give(uid, self.n - n);
        } else if uid == self.uid {
            self.quota.take(uid, n - self.n)?;
        } else {
            self.quota.take(uid, n)?;
            self.quota.give(self.uid, self.n);
            self.uid = uid;
        }
        self.n = n;
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.quota.give(self.uid, self.n);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::user;
    use super::*;
    use crate::engine::{RecvFlags, SendMsg};

    /// A quota of `max` with each user's share `permille`/1000 of it.
    fn quota(what: &'static str, max: u64, permille: u64) -> Quota {
        let q = Quota::new(what);
        q.set_max(max);
        q.set_user_share(permille);
        q
    }

    #[test]
    fn total_then_shares() {
        let q = Quota::new("things");
        q.set_max(10);
        assert_eq!(q.take(1000, 10), Ok(()));
        assert_eq!(q.take(1001, 1), Err(Refused::Full));
        q.give(1000, 10);
        q.set_user_share(500);
        assert_eq!(q.take(1000, 5), Ok(()));
        assert_eq!(q.take(1000, 1), Err(Refused::UserShare));
        assert_eq!(
            q.take(1001, 5),
            Ok(()),
            "the other user still gets its half"
        );
        assert_eq!(q.used(), 10);
        q.give(1001, 5);
        assert_eq!(q.take(0, 5), Ok(()), "root is exempt from the share");
        assert_eq!(q.take(0, 1), Err(Refused::Full), "but not from the total");
        assert_eq!((q.user_used(1000), q.user_used(0)), (5, 5));
    }

    #[test]
    fn charge_grows_shrinks_moves_and_goes() {
        let q = Arc::new(quota("bytes", 100, 500));
        let mut c = Charge::new(q.clone());
        c.set(7, 40).unwrap();
        assert_eq!(c.set(7, 60), Err(Refused::UserShare));
        assert_eq!(q.user_used(7), 40, "a refused set changes nothing");
        c.set(7, 10).unwrap();
        c.set(8, 30).unwrap();
        assert_eq!((q.user_used(7), q.user_used(8), q.used()), (0, 30, 30));
        drop(c);
        assert_eq!((q.user_used(8), q.used()), (0, 0));
    }

    #[test]
    fn transfer_moves_without_refusal() {
        let q = quota("nodes", 10, 500);
        q.take(1, 5).unwrap();
        q.take(2, 5).unwrap();
        q.transfer(1, 2, 5);
        assert_eq!((q.user_used(1), q.user_used(2), q.used()), (0, 10, 10));
    }

    #[test]
    fn past_the_share_only_the_total_refuses() {
        let q = quota("descriptors", 4, 250);
        q.take(1, 1).unwrap();
        assert_eq!(q.take(1, 1), Err(Refused::UserShare));
        q.take_past_share(1, 3).unwrap();
        assert_eq!(q.take_past_share(2, 1), Err(Refused::Full));
        assert_eq!((q.user_used(1), q.used()), (4, 4));
    }

    #[test]
    fn queued_bytes_are_bounded_per_user_and_come_back_when_read_or_dropped() {
        use crate::engine::{Config, Engine, SockType};
        use nix::errno::Errno;
        // A one-byte datagram is charged 768 bytes (src/engine/skb.rs):
        // room for six, three per user.
        let e = Engine::new(Config {
            background_gc: false,
            max_queued_bytes: 6 * 768,
            user_share_permille: 500,
            ..Config::default()
        });
        let (u1, u2) = (user(1000), user(1001));
        let send = |s, c| e.sendmsg(s, SendMsg::new(b"x"), c, None);
        let (a, b) = e.try_socketpair(SockType::Dgram, &u1).unwrap();
        for _ in 0..3 {
            assert_eq!(send(&a, &u1), Ok(1));
        }
        assert_eq!(
            send(&a, &u1),
            Err(Errno::ENOBUFS),
            "user 1000's share is queued"
        );
        let (s1, s2) = e.try_socketpair(SockType::Stream, &u1).unwrap();
        assert_eq!(send(&s1, &u1), Err(Errno::ENOBUFS), "streams count too");
        let (c, d) = e.try_socketpair(SockType::Dgram, &u2).unwrap();
        assert_eq!(send(&c, &u2), Ok(1), "user 1001 has a share of its own");
        assert_eq!(
            (e.queued.user_used(1000), e.queued.used()),
            (3 * 768, 4 * 768)
        );
        e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        assert_eq!(send(&s1, &u1), Ok(1), "a read gives room back");
        // Dropping sockets with messages queued gives theirs back.
        for s in [&a, &b, &s1, &s2, &c, &d] {
            e.put(s);
        }
        assert_eq!(e.queued.used(), 0);
    }

    #[test]
    fn sockets_have_user_shares_and_received_aliases_do_not_count() {
        use crate::engine::{Config, Engine, SockType};
        use nix::errno::Errno;
        let e = Engine::new(Config {
            background_gc: false,
            max_sockets: 4,
            user_share_permille: 500,
            ..Config::default()
        });
        let (u1, u2) = (user(1000), user(1001));
        let (a, b) = e.try_socketpair(SockType::Dgram, &u1).unwrap();
        assert_eq!(
            e.try_socket(SockType::Dgram, &u1).err(),
            Some(Errno::ENFILE),
            "user 1000 holds its half"
        );
        let x = e.try_socket(SockType::Stream, &u2).unwrap();
        // Passing x makes a received alias directory; it is not a socket.
        e.hold(&x);
        let mut rights = vec![x.clone()];
        e.sendmsg(&a, SendMsg::new(b"x").rights(&mut rights), &u1, None)
            .unwrap();
        let got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        let ids = e.deliver_rights(&b, got.rights, 1000, 1000, 16);
        assert_eq!(ids.len(), 1);
        assert_eq!(
            (e.sockets.user_used(1000), e.sockets.user_used(1001)),
            (2, 1)
        );
        e.put(&x);
        e.put(&a);
        e.put(&b);
        assert_eq!(e.sockets.used(), 0, "every socket and alias gave back");
        assert!(e.try_socket(SockType::Dgram, &u1).is_ok());
    }
}

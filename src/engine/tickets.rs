//! Accept tickets (`Op::AcceptTicket`, issue 29): on Linux accept needs
//! only the listening descriptor, whatever the caller's uid is now; here a
//! listener's own `accept` file is its creator's (0600 below a 0700
//! directory), so a server that listens as root and accepts as www-data
//! (php-fpm's pool, nginx's workers) would get EACCES from the kernel's
//! permission check before the daemon saw the open. The descriptor is what
//! authorises: an ioctl on it (the caller holds it, whatever its uid) gives
//! a ticket, and the open of `.udsfs/accept/TICKET` (0666) is the accept
//! itself, parked as the `accept` file's open parks.
//!
//! A ticket is good once, for `TICKET_TTL_MS`, and only for its holder:
//! the thread that asked (its id and start time, so a reused thread id is
//! another holder) and its filesystem uid. Its number is random, so it
//! cannot be guessed; a wrong holder's lookup or open answers ENOENT and
//! leaves the ticket to its holder (nobody can spend another's ticket).
//! Callers outside the daemon's pid namespace arrive as thread 0: theirs
//! are bound to the uid and the number only.
//!
//! Bounds, charged to the asker: a thread holds one ticket at a time (its
//! next request replaces it), a user at most `PER_USER` (past it, that
//! user's oldest goes: the fronts ask again when their open finds its
//! ticket gone), all users together `MAX` (past it, expired ones go, then
//! ENOBUFS with a log line).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::cred::Caller;
use super::socket::Socket;
use super::socktype::SockType;
use udsfs_proto::mount::TICKET_TTL_MS;

/// Tickets one user may hold at once: a thread holds one only between its
/// ioctl and its open, so this is how many of its threads may be between
/// the two at the same moment.
pub const PER_USER: usize = 1024;
/// Tickets all users hold together.
pub const MAX: usize = 65536;

const TTL: Duration = Duration::from_millis(TICKET_TTL_MS);

/// Who asks for a ticket, and who may take it: the thread, its start time
/// (None: thread 0, or not to be read) and its filesystem uid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub tid: u32,
    pub started: Option<u64>,
    pub uid: u32,
}

impl Holder {
    /// The caller of a request (one read of `/proc/TID/stat`).
    pub fn of(c: &Caller) -> Holder {
        let started = (c.tid != 0)
            .then(|| crate::procfs::start_time(c.tid as i32))
            .flatten();
        Holder {
            tid: c.tid,
            started,
            uid: c.fsuid,
        }
    }

    /// The caller's thread and user, its start time unread: what a lookup
    /// compares (`same_thread`).
    pub fn of_thread(c: &Caller) -> Holder {
        Holder {
            tid: c.tid,
            started: None,
            uid: c.fsuid,
        }
    }

    /// The same thread and user, leaving the start time unread (a lookup
    /// only names the node; the open checks the start time).
    fn same_thread(&self, other: &Holder) -> bool {
        self.tid == other.tid && self.uid == other.uid
    }
}

struct Ticket {
    secret: u64,
    listener: Weak<Socket>,
    holder: Holder,
    issued: Instant,
}

#[derive(Default)]
struct Table {
    /// By sequence number, the inode of `.udsfs/accept/SECRET`.
    by_seq: HashMap<u64, Ticket>,
    by_secret: HashMap<u64, u64>,
    /// A thread's ticket (thread 0 aside), by (thread, uid).
    by_thread: HashMap<(u32, u32), u64>,
    /// Each user's tickets, oldest first.
    by_user: BTreeSet<(u32, u64)>,
    next_seq: u64,
    /// The last sweep of expired tickets (once the table is full, at most
    /// one a `SWEEP_EVERY`, so that requests past `MAX` cost no walk each).
    swept: Option<Instant>,
}

const SWEEP_EVERY: Duration = Duration::from_millis(100);

#[derive(Default)]
pub struct Tickets {
    t: Mutex<Table>,
}

/// A random number from getrandom (retried when a signal cut it short).
/// Were there none to be had, a mix of the clock and a counter: the number
/// is a second guard only, the daemon letting in no thread but the holder.
fn random_u64() -> u64 {
    for _ in 0..4 {
        let mut r = 0u64;
        // SAFETY: getrandom writes at most 8 bytes into r.
        let n = unsafe { libc::getrandom((&mut r as *mut u64).cast(), 8, 0) };
        if n == 8 {
            return r;
        }
    }
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let c = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (t ^ c.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Table {
    fn remove(&mut self, seq: u64) -> Option<Ticket> {
        let t = self.by_seq.remove(&seq)?;
        self.by_secret.remove(&t.secret);
        let key = (t.holder.tid, t.holder.uid);
        if self.by_thread.get(&key) == Some(&seq) {
            self.by_thread.remove(&key);
        }
        self.by_user.remove(&(t.holder.uid, seq));
        Some(t)
    }

    fn held_by(&self, uid: u32) -> usize {
        self.by_user.range((uid, 0)..=(uid, u64::MAX)).count()
    }

    fn oldest_of(&self, uid: u32) -> Option<u64> {
        self.by_user
            .range((uid, 0)..=(uid, u64::MAX))
            .next()
            .map(|(_, s)| *s)
    }

    /// Drops the tickets `gone` picks; how many.
    fn drop_where(&mut self, gone: impl Fn(&Ticket) -> bool) -> usize {
        let seqs: Vec<u64> = self
            .by_seq
            .iter()
            .filter(|(_, t)| gone(t))
            .map(|(s, _)| *s)
            .collect();
        for s in &seqs {
            self.remove(*s);
        }
        seqs.len()
    }
}

impl Tickets {
    /// A ticket for one accept on `listener` by `h`: its random number.
    /// EOPNOTSUPP for a dgram socket, EINVAL for one not listening (as
    /// accept answers), ENOBUFS past `MAX`.
    pub fn issue(&self, listener: &Arc<Socket>, h: Holder, now: Instant) -> Result<u64, Errno> {
        if listener.ty == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        if !listener.lock().conn.is_listening() {
            return Err(Errno::EINVAL);
        }
        let mut t = self.t.lock();
        // One per thread: its earlier ticket was never taken.
        if h.tid != 0
            && let Some(&old) = t.by_thread.get(&(h.tid, h.uid))
        {
            t.remove(old);
        }
        if t.held_by(h.uid) >= PER_USER {
            if let Some(s) = t.oldest_of(h.uid) {
                t.remove(s);
            }
            crate::engine::log_limit::limited!(
                info,
                "accept tickets: uid {} holds {PER_USER}: its oldest dropped",
                h.uid
            );
        }
        if t.by_seq.len() >= MAX && t.swept.is_none_or(|w| now.duration_since(w) > SWEEP_EVERY) {
            t.swept = Some(now);
            t.drop_where(|x| now.duration_since(x.issued) > TTL);
        }
        if t.by_seq.len() >= MAX {
            crate::engine::log_limit::limited!(
                warn,
                "accept tickets: {MAX} held by all users: uid {}'s request refused (ENOBUFS)",
                h.uid
            );
            return Err(Errno::ENOBUFS);
        }
        let secret = loop {
            let r = random_u64();
            if r != 0 && !t.by_secret.contains_key(&r) {
                break r;
            }
        };
        t.next_seq += 1;
        let seq = t.next_seq;
        t.by_secret.insert(secret, seq);
        t.by_user.insert((h.uid, seq));
        if h.tid != 0 {
            t.by_thread.insert((h.tid, h.uid), seq);
        }
        t.by_seq.insert(
            seq,
            Ticket {
                secret,
                listener: Arc::downgrade(listener),
                holder: h,
                issued: now,
            },
        );
        Ok(secret)
    }

    /// The lookup of `.udsfs/accept/SECRET` by `h`: the ticket's sequence
    /// number (its inode) when `h` is the thread and user it was given to.
    pub fn find(&self, secret: u64, h: Holder) -> Option<u64> {
        let t = self.t.lock();
        let seq = *t.by_secret.get(&secret)?;
        t.by_seq
            .get(&seq)
            .filter(|x| x.holder.same_thread(&h))
            .map(|_| seq)
    }

    /// The owner a ticket's node shows (to its holder's thread only).
    pub fn shown_to(&self, seq: u64, h: Holder) -> Option<u32> {
        let t = self.t.lock();
        t.by_seq
            .get(&seq)
            .filter(|x| x.holder.same_thread(&h))
            .map(|x| x.holder.uid)
    }

    /// The owner of ticket `seq`'s node, if it is still held.
    pub fn owner(&self, seq: u64) -> Option<u32> {
        self.t.lock().by_seq.get(&seq).map(|x| x.holder.uid)
    }

    /// The open of ticket `seq` by `h`: the listener, once. ENOENT for
    /// another holder (the ticket stays its holder's), an expired ticket
    /// (dropped) or none; EINVAL when the listener is gone.
    pub fn take(&self, seq: u64, h: Holder, now: Instant) -> Result<Arc<Socket>, Errno> {
        let mut t = self.t.lock();
        let Some(x) = t.by_seq.get(&seq) else {
            return Err(Errno::ENOENT);
        };
        if x.holder != h {
            crate::engine::log_limit::limited!(
                info,
                "accept ticket {seq}: open by thread {} uid {} refused: given to thread {} uid {}",
                h.tid,
                h.uid,
                x.holder.tid,
                x.holder.uid
            );
            return Err(Errno::ENOENT);
        }
        let expired = now.duration_since(x.issued) > TTL;
        let x = t.remove(seq).expect("found above");
        if expired {
            return Err(Errno::ENOENT);
        }
        x.listener.upgrade().ok_or(Errno::EINVAL)
    }

    /// Tickets held now (all users).
    pub fn len(&self) -> usize {
        self.t.lock().by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tickets user `uid` holds now.
    pub fn held_by(&self, uid: u32) -> usize {
        self.t.lock().held_by(uid)
    }
}

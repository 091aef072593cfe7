//! Files that are not udsfs sockets (regular files, pipes, eventfds, kernel
//! sockets, pidfds) passed with SCM_RIGHTS: the daemon holds a descriptor of
//! each while it is in flight, as the kernel holds a `struct file`.
//!
//! Between the sender's deposit and its sendmsg, and between a receive and
//! the receiver's claim, a file waits in the depot under a random tag (bit
//! 63 set, so a tag never equals a socket number). Deposits die with the
//! channel connection that made them; pickups die with the socket that
//! received them, so a process that crashes half-way leaks nothing. A
//! sender's pinned pidfd (src/engine/pins.rs), for a reader with
//! SO_PASSPIDFD or asking SO_PEERPIDFD, travels the same way. Every
//! descriptor here is charged to a user (src/engine/fds.rs): a deposit to
//! its sender, a received file to its receiver, a pin to the pinned user.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::fds::ChargedFd;
use super::quota::Quota;

/// Unclaimed sender pidfds one socket keeps for its reader: the library
/// claims each right after its receive, so a reader that never claims only
/// loses the oldest (as if it had closed them).
const PIDFD_TAGS_KEPT: usize = 16;

/// Marks a tag in a list of passed things (socket numbers otherwise).
pub use udsfs_proto::passed::FILE_TAG;

/// A file in flight, at position `slot` of the SCM_RIGHTS array it was sent in.
#[derive(Debug)]
pub struct HeldFile {
    pub slot: usize,
    pub fd: Arc<ChargedFd>,
    /// The deposit it came from, to go back to if the send does not happen.
    deposit: Option<(u64, Owner)>,
}

/// Who may take a file out of the depot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Deposited over channel connection `conn` by user `uid`; that user's sendmsg takes it.
    Sender { conn: u64, uid: u32 },
    /// Received by socket `sock` for user `uid`; that user's claim takes it.
    Receiver { sock: u64, uid: u32 },
}

pub struct Depot {
    files: Mutex<HashMap<u64, (Owner, Arc<ChargedFd>)>>,
    /// Channel connections still open: only theirs may be put back.
    open_conns: Mutex<std::collections::HashSet<u64>>,
    /// Every descriptor held is charged here (src/engine/fds.rs).
    pub quota: Arc<Quota>,
    /// Each socket's unclaimed pidfd tags, oldest first.
    pidfd_tags: Mutex<HashMap<u64, VecDeque<u64>>>,
}

impl Default for Depot {
    fn default() -> Depot {
        Depot::new(Arc::new(Quota::new("descriptors held for clients")))
    }
}

pub fn is_file_tag(id: u64) -> bool {
    id & FILE_TAG != 0
}

fn new_tag() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        // Unguessable tags matter little here: every take checks the owner.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        return FILE_TAG | NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    FILE_TAG | u64::from_ne_bytes(b)
}

impl Depot {
    pub fn new(quota: Arc<Quota>) -> Depot {
        Depot {
            files: Mutex::default(),
            open_conns: Mutex::default(),
            quota,
            pidfd_tags: Mutex::default(),
        }
    }

    fn put(&self, owner: Owner, fd: Arc<ChargedFd>) -> u64 {
        let mut files = self.files.lock();
        loop {
            let tag = new_tag();
            if let std::collections::hash_map::Entry::Vacant(e) = files.entry(tag) {
                e.insert((owner, fd));
                return tag;
            }
        }
    }

    /// A sender's file, waiting for the sendmsg that names its tag;
    /// charged to `uid` (refused: it closes, ENFILE or ETOOMANYREFS).
    pub fn deposit(&self, conn: u64, uid: u32, fd: OwnedFd) -> Result<u64, Errno> {
        let fd = Arc::new(ChargedFd::new(&self.quota, uid, fd)?);
        self.open_conns.lock().insert(conn);
        Ok(self.put(Owner::Sender { conn, uid }, fd))
    }

    /// Files a send did not queue (EAGAIN, an error) go back under their
    /// tags, so that the sender's retry finds them; those of a connection
    /// that has closed meanwhile are closed.
    pub fn put_back(&self, files: Vec<HeldFile>) {
        let open = self.open_conns.lock();
        let mut map = self.files.lock();
        for f in files {
            if let Some((tag, owner @ Owner::Sender { conn, .. })) = f.deposit
                && open.contains(&conn)
            {
                map.insert(tag, (owner, f.fd));
            }
        }
    }

    /// A received file, waiting for the receiver to claim it, charged to
    /// the receiver from now on (as an installed fd is the reader's); None:
    /// past the receiver's share, it closes.
    pub fn hold_received(&self, sock: u64, uid: u32, mut fd: Arc<ChargedFd>) -> Option<u64> {
        if let Some(f) = Arc::get_mut(&mut fd)
            && f.recharge(uid).is_err()
        {
            return None;
        }
        Some(self.put(Owner::Receiver { sock, uid }, fd))
    }

    /// A sender's pinned pidfd, waiting for the receiver to claim it. It
    /// stays charged to the sender (one pin serves all its messages); the
    /// socket keeps the last `PIDFD_TAGS_KEPT`, older unclaimed ones go.
    pub fn hold_received_pidfd(&self, sock: u64, uid: u32, pin: Arc<ChargedFd>) -> u64 {
        let tag = self.put(Owner::Receiver { sock, uid }, pin);
        let old = {
            let mut rings = self.pidfd_tags.lock();
            let ring = rings.entry(sock).or_default();
            ring.push_back(tag);
            (ring.len() > PIDFD_TAGS_KEPT)
                .then(|| ring.pop_front())
                .flatten()
        };
        if let Some(old) = old {
            self.files.lock().remove(&old);
        }
        tag
    }

    fn take(
        &self,
        tags: &[u64],
        ok: impl Fn(&Owner) -> bool,
    ) -> Result<Vec<(u64, Owner, Arc<ChargedFd>)>, Errno> {
        let mut files = self.files.lock();
        if !tags
            .iter()
            .all(|t| files.get(t).is_some_and(|(o, _)| ok(o)))
        {
            return Err(Errno::EBADF);
        }
        Ok(tags
            .iter()
            .filter_map(|t| files.remove(t).map(|(o, fd)| (*t, o, fd)))
            .collect())
    }

    /// The deposits `tags` of user `uid` (root may send anyone's), all or
    /// none, as files at the given places of the passed list.
    pub fn take_deposits(&self, tags: &[(usize, u64)], uid: u32) -> Result<Vec<HeldFile>, Errno> {
        let only: Vec<u64> = tags.iter().map(|(_, t)| *t).collect();
        let got = self.take(
            &only,
            |o| matches!(o, Owner::Sender { uid: u, .. } if *u == uid || uid == 0),
        )?;
        Ok(tags
            .iter()
            .zip(got)
            .map(|((slot, _), (tag, owner, fd))| HeldFile {
                slot: *slot,
                fd,
                deposit: Some((tag, owner)),
            })
            .collect())
    }

    /// Received files `tags` claimed by user `uid`, all or none.
    pub fn claim(&self, tags: &[u64], uid: u32) -> Result<Vec<Arc<ChargedFd>>, Errno> {
        let got = self.take(
            tags,
            |o| matches!(o, Owner::Receiver { uid: u, .. } if *u == uid || uid == 0),
        )?;
        Ok(got.into_iter().map(|(_, _, fd)| fd).collect())
    }

    fn drop_where(&self, gone: impl Fn(&Owner) -> bool) -> usize {
        let mut files = self.files.lock();
        let before = files.len();
        files.retain(|_, (o, _)| !gone(o));
        before - files.len()
    }

    /// The channel connection ended: its unsent deposits are closed.
    pub fn connection_closed(&self, conn: u64) -> usize {
        // Under the same lock order as put_back: open_conns, then files.
        let mut open = self.open_conns.lock();
        open.remove(&conn);
        self.drop_where(|o| matches!(o, Owner::Sender { conn: c, .. } if *c == conn))
    }

    /// Socket `sock` closed: files it received and nobody claimed are closed.
    pub fn socket_closed(&self, sock: u64) -> usize {
        self.pidfd_tags.lock().remove(&sock);
        self.drop_where(|o| matches!(o, Owner::Receiver { sock: s, .. } if *s == sock))
    }

    fn count_where(&self, which: impl Fn(&Owner) -> bool) -> usize {
        self.files.lock().values().filter(|(o, _)| which(o)).count()
    }

    /// Received files socket `sock` holds for its reader, not claimed yet.
    pub fn pickups_of(&self, sock: u64) -> usize {
        self.count_where(|o| matches!(o, Owner::Receiver { sock: s, .. } if *s == sock))
    }

    /// Deposits of channel connection `conn` not sent yet.
    pub fn deposits_of(&self, conn: u64) -> usize {
        self.count_where(|o| matches!(o, Owner::Sender { conn: c, .. } if *c == conn))
    }

    /// Files waiting in the depot (for `.udsfs/gc` and tests).
    pub fn len(&self) -> usize {
        self.files.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl super::Engine {
    /// A pidfd of the sender (`creds.pid`) for a receiver with SO_PASSPIDFD,
    /// pinned now while the sender surely lives (src/engine/pins.rs): Linux
    /// keeps the sender's `struct pid` with the message and gives a pidfd
    /// even after it exited. Past the descriptor quota the send fails
    /// (ENOBUFS, as an skb that cannot be allocated) rather than carry a pid
    /// the reader would have to trust.
    pub(crate) fn sender_pidfd(
        &self,
        creds: Option<super::Ucred>,
        receiver: &super::Socket,
    ) -> Result<Option<Arc<ChargedFd>>, Errno> {
        let Some(cr) = creds else { return Ok(None) };
        if cr.pid <= 0 || !receiver.lock().passpidfd {
            return Ok(None);
        }
        match self.pins.pin(&self.depot.quota, cr.pid, cr.uid) {
            Ok(p) => Ok(Some(p)),
            Err(Errno::ENFILE | Errno::ETOOMANYREFS) => Err(Errno::ENOBUFS),
            // Gone already (forged credentials of an exited pid): no pidfd.
            Err(_) => Ok(None),
        }
    }

    /// What a sendmsg names, held for passing: sockets by number (see
    /// `hold_for_passing`) and the caller's deposited files by tag, each
    /// file with its place in the list.
    pub fn hold_passed(
        &self,
        ids: &[u64],
        caller: &super::Caller,
    ) -> Result<(Vec<std::sync::Arc<super::Socket>>, Vec<HeldFile>), Errno> {
        let socks: Vec<u64> = ids.iter().copied().filter(|i| !is_file_tag(*i)).collect();
        let tags: Vec<(usize, u64)> = ids
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, i)| is_file_tag(*i))
            .collect();
        let files = if tags.is_empty() {
            Vec::new()
        } else {
            let uid = if caller.is_root() { 0 } else { caller.fsuid };
            self.depot.take_deposits(&tags, uid)?
        };
        match self.hold_for_passing(&socks, caller) {
            Ok(held) => Ok((held, files)),
            Err(e) => {
                self.depot.put_back(files);
                Err(e)
            }
        }
    }

    /// Hands received sockets and files to the reading user: sockets as new
    /// `.udsfs/sock/H/` entries (`deliver_rights`), files as depot tags to
    /// claim over the fd channel, all in the order they were sent. A pidfd
    /// of the sender made at send time becomes a tag too (`got.pidfd_tag`).
    pub fn deliver_passed(
        &self,
        receiver: &std::sync::Arc<super::Socket>,
        got: &mut super::Received,
        caller: &super::Caller,
    ) -> Vec<u64> {
        let rights = std::mem::take(&mut got.rights);
        let limit = if rights.is_empty() {
            0
        } else {
            caller.nofile_limit()
        };
        let ids = self.deliver_rights(receiver, rights, caller.fsuid, caller.fsgid, limit);
        // As installing descriptors stops at the reader's RLIMIT_NOFILE
        // (MSG_CTRUNC), a reader that never claims cannot make the daemon
        // hold files without bound: past it they close here.
        let mut room = if got.files.is_empty() {
            0
        } else {
            caller
                .nofile_limit()
                .saturating_sub(self.depot.pickups_of(receiver.id))
        };
        let files: Vec<(usize, u64)> = std::mem::take(&mut got.files)
            .into_iter()
            .filter_map(|f| {
                if room == 0 {
                    log::info!("socket {}: a received file closed: unclaimed ones fill the reader's RLIMIT_NOFILE", receiver.id);
                    return None;
                }
                room -= 1;
                let tag = self.depot.hold_received(receiver.id, caller.fsuid, f.fd)?;
                Some((f.slot, tag))
            })
            .collect();
        got.pidfd_tag = got.pidfd_file.take().map(|fd| {
            self.depot
                .hold_received_pidfd(receiver.id, caller.fsuid, fd)
        });
        if (!files.is_empty() || got.pidfd_tag.is_some()) && receiver.lock().dead {
            // Closed meanwhile: nobody can claim them.
            self.depot.socket_closed(receiver.id);
        }
        merge_in_order(&ids, &files)
    }
}

/// Puts received sockets (numbers) and files (tags) back in the order they
/// were sent: each file knows its slot, sockets fill the others.
pub fn merge_in_order(socks: &[u64], files: &[(usize, u64)]) -> Vec<u64> {
    let mut out = Vec::with_capacity(socks.len() + files.len());
    let mut s = socks.iter();
    let mut f = files.iter().peekable();
    while out.len() < socks.len() + files.len() {
        match f.peek() {
            Some((slot, tag)) if *slot <= out.len() => {
                out.push(*tag);
                f.next();
            }
            _ => match s.next() {
                Some(id) => out.push(*id),
                None => out.extend(f.by_ref().map(|(_, t)| *t)),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe_end() -> OwnedFd {
        std::os::unix::net::UnixStream::pair().unwrap().0.into()
    }

    #[test]
    fn deposits_go_to_their_user_and_die_with_their_connection() {
        let d = Depot::default();
        let a = d.deposit(1, 1000, pipe_end()).unwrap();
        let b = d.deposit(2, 1000, pipe_end()).unwrap();
        assert!(is_file_tag(a) && a != b);
        assert_eq!(d.take_deposits(&[(0, a)], 1001).unwrap_err(), Errno::EBADF);
        let bad = [(0, a), (1, FILE_TAG | 12)];
        assert_eq!(d.take_deposits(&bad, 1000).unwrap_err(), Errno::EBADF);
        let got = d.take_deposits(&[(3, a)], 1000).unwrap();
        assert_eq!(got[0].slot, 3);
        assert_eq!(d.take_deposits(&[(0, a)], 1000).unwrap_err(), Errno::EBADF);
        // An unsent file goes back for the retry, while its connection is open.
        d.put_back(got);
        let got = d.take_deposits(&[(0, a)], 1000).unwrap();
        assert_eq!(d.connection_closed(1), 0);
        d.put_back(got);
        assert_eq!(d.take_deposits(&[(0, a)], 1000).unwrap_err(), Errno::EBADF);
        assert_eq!(d.claim(&[b], 1000).unwrap_err(), Errno::EBADF);
        assert_eq!(d.connection_closed(2), 1);
        assert!(d.is_empty());
        let c = d
            .hold_received(
                7,
                0,
                Arc::new(ChargedFd::new(&d.quota, 0, pipe_end()).unwrap()),
            )
            .unwrap();
        assert_eq!(d.socket_closed(8), 0);
        assert_eq!(d.socket_closed(7), 1);
        assert_eq!(d.claim(&[c], 0).unwrap_err(), Errno::EBADF);
    }

    #[test]
    fn unclaimed_pidfds_of_a_socket_are_bounded_and_received_files_recharged() {
        let d = Depot::default();
        let pin = Arc::new(ChargedFd::new(&d.quota, 1000, pipe_end()).unwrap());
        let tags: Vec<u64> = (0..100)
            .map(|_| d.hold_received_pidfd(7, 1001, pin.clone()))
            .collect();
        assert_eq!(
            d.pickups_of(7),
            PIDFD_TAGS_KEPT,
            "older unclaimed pidfds go"
        );
        assert_eq!(d.claim(&tags[..1], 1001).unwrap_err(), Errno::EBADF);
        assert_eq!(d.claim(&tags[99..], 1001).unwrap().len(), 1);
        assert_eq!(d.quota.used(), 1, "one pin, however many messages");
        d.quota.set_max(4);
        d.quota.set_user_share(250);
        let _mine = ChargedFd::new(&d.quota, 1001, pipe_end()).unwrap();
        let f = Arc::new(ChargedFd::new(&d.quota, 0, pipe_end()).unwrap());
        assert_eq!(
            d.hold_received(8, 1001, f),
            None,
            "past the receiver's share a received file closes"
        );
        assert_eq!(crate::engine::fds::settled(&d.quota, 2), 2);
        assert_eq!(d.quota.user_used(0), 0);
    }

    #[test]
    fn order_is_restored() {
        let t = |n| FILE_TAG | n;
        assert_eq!(
            merge_in_order(&[3, 4], &[(0, t(1)), (2, t(2))]),
            vec![t(1), 3, t(2), 4]
        );
        assert_eq!(merge_in_order(&[], &[(5, t(1))]), vec![t(1)]);
        assert_eq!(merge_in_order(&[3], &[]), vec![3]);
    }
}

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

use crate::engine::fds::ChargedFd;
use crate::engine::quota::Quota;

/// Unclaimed sender pidfds one socket keeps for its reader: the library
/// claims each right after its receive, so a reader that never claims only
/// loses the oldest (as if it had closed them).
const PIDFD_TAGS_KEPT: usize = 16;

/// Marks a tag in a list of passed things (socket numbers otherwise).
pub use udsfs_proto::passed::FILE_TAG;

/// A file in flight, at position `slot` of the SCM_RIGHTS array it was sent in.
#[derive(Debug)]
pub struct PassedFile {
    pub slot: usize,
    pub fd: Arc<ChargedFd>,
    /// The deposit it came from, to go back to if the send does not happen.
    deposit: Option<(u64, Owner)>,
}

impl PassedFile {
    /// One word for what it is, for the taps: "pipe", "socket", "file", ...
    pub fn kind(&self) -> &'static str {
        let Ok(st) = nix::sys::stat::fstat(&*self.fd) else {
            return "file";
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFIFO => "pipe",
            libc::S_IFSOCK => "socket",
            libc::S_IFDIR => "directory",
            libc::S_IFCHR => "chardev",
            libc::S_IFBLK => "blockdev",
            libc::S_IFREG => "file",
            // eventfds, pidfds, timerfds: anonymous inodes.
            _ => "anon_inode",
        }
    }
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
    pub fn put_back(&self, files: Vec<PassedFile>) {
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
    pub fn keep_received(&self, sock: u64, uid: u32, mut fd: Arc<ChargedFd>) -> Option<u64> {
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
    pub fn keep_received_pidfd(&self, sock: u64, uid: u32, pin: Arc<ChargedFd>) -> u64 {
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
    pub fn take_deposits(&self, tags: &[(usize, u64)], uid: u32) -> Result<Vec<PassedFile>, Errno> {
        let only: Vec<u64> = tags.iter().map(|(_, t)| *t).collect();
        let got = self.take(
            &only,
            |o| matches!(o, Owner::Sender { uid: u, .. } if *u == uid || uid == 0),
        )?;
        Ok(tags
            .iter()
            .zip(got)
            .map(|((slot, _), (tag, owner, fd))| PassedFile {
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

#[cfg(test)]
mod tests {
    use super::super::tests::pipe_end;
    use super::*;

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
            .keep_received(
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
            .map(|_| d.keep_received_pidfd(7, 1001, pin.clone()))
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
            d.keep_received(8, 1001, f),
            None,
            "past the receiver's share a received file closes"
        );
        assert_eq!(crate::engine::fds::settled(&d.quota, 2), 2);
        assert_eq!(d.quota.user_used(0), 0);
    }
}

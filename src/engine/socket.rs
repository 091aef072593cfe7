//! One socket: its type, its connection state as an enum, its receive queue
//! and the waiters on it. The operations that change sockets are in `ops`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::addr::Addr;
use super::cred::Ucred;
use super::names::NameKey;
use super::wait::WaitList;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SockType {
    Stream,
    Dgram,
    Seqpacket,
}

impl SockType {
    pub fn name(self) -> &'static str {
        match self {
            SockType::Stream => "stream",
            SockType::Dgram => "dgram",
            SockType::Seqpacket => "seqpacket",
        }
    }

    pub fn from_name(s: &str) -> Option<SockType> {
        match s {
            "stream" => Some(SockType::Stream),
            "dgram" => Some(SockType::Dgram),
            "seqpacket" => Some(SockType::Seqpacket),
            _ => None,
        }
    }

    /// The SOCK_* number /proc/net/unix shows.
    pub fn number(self) -> u32 {
        match self {
            SockType::Stream => 1,
            SockType::Dgram => 2,
            SockType::Seqpacket => 5,
        }
    }

    pub fn connection_oriented(self) -> bool {
        self != SockType::Dgram
    }
}

pub const RCV_SHUTDOWN: u8 = 1;
pub const SEND_SHUTDOWN: u8 = 2;
pub const SHUTDOWN_MASK: u8 = 3;

/// A bound name: the address in the mount's terms, the table key it is filed
/// under, and the sun_path as the program gave it, when that differs (a
/// relative path through the preload library): Linux reports that one.
#[derive(Debug)]
pub struct BoundName {
    pub addr: Addr,
    pub key: NameKey,
    pub given: Option<Vec<u8>>,
}

/// One queued message (dgram, seqpacket) or one chunk of a stream.
pub struct Msg {
    pub data: Vec<u8>,
    /// Bytes of `data` already read (stream chunks only).
    pub off: usize,
    pub from: Option<Arc<BoundName>>,
    pub creds: Option<Ucred>,
    /// The socket charged for this message, and how much.
    pub sender: Arc<Socket>,
    pub charge: usize,
    /// Sockets passed with it (SCM_RIGHTS), in flight while queued.
    pub rights: Vec<Arc<Socket>>,
    /// The user charged for those in-flight copies.
    pub rights_uid: u32,
    /// This one-byte chunk is the socket's pending out-of-band byte (Linux's
    /// oob_skb); at most one message of a queue has it.
    pub oob: bool,
    /// Other files passed with it, held by the daemon (charged to `rights_uid`).
    pub files: Vec<super::held::HeldFile>,
    /// The sender's pin (src/engine/pins.rs), made at send time for a
    /// reader with SO_PASSPIDFD and shared by its messages, so that
    /// SCM_PIDFD names it even once it has exited.
    pub pidfd: Option<super::pins::Pin>,
}

impl Msg {
    pub fn remaining(&self) -> usize {
        self.data.len() - self.off
    }
}

impl SockState {
    /// unix_may_passcred: SO_PASSCRED or SO_PASSPIDFD, either makes
    /// credentials travel, autobinds and keeps reads from spanning senders.
    pub fn may_passcred(&self) -> bool {
        self.passcred || self.passpidfd
    }
}

/// What the socket is connected to, if anything.
pub enum Conn {
    Unconnected,
    Listening {
        backlog: usize,
        /// Connections not yet accepted (embryos); each holds one reference.
        pending: VecDeque<Arc<Socket>>,
    },
    /// Connected (stream, seqpacket) or with a default peer (dgram). The peer
    /// may be dead: stream peers then see EOF, dgram senders ECONNREFUSED once.
    Connected(Arc<Socket>),
}

pub struct SockState {
    pub conn: Conn,
    pub name: Option<Arc<BoundName>>,
    pub rcvq: VecDeque<Msg>,
    pub rcvq_bytes: usize,
    pub shutdown: u8,
    /// Pending socket error (sk_err), reported once.
    pub err: Option<Errno>,
    pub passcred: bool,
    /// SO_PASSPIDFD: the reader gets a pidfd of each message's sender.
    pub passpidfd: bool,
    pub peercred: Option<Ucred>,
    /// The process `peercred` names, pinned when it was set (SO_PEERPIDFD;
    /// src/engine/pins.rs); None when it could not be pinned.
    pub peer_pin: Option<super::pins::Pin>,
    pub sndbuf: usize,
    /// SO_RCVBUF: read back only (AF_UNIX limits nothing by it).
    pub rcvbuf: usize,
    pub max_dgram_qlen: usize,
    /// Not yet accepted: the listener it waits in.
    pub embryo: bool,
    pub dead: bool,
    /// Waiting to read (data, connections, EOF, errors).
    pub readers: WaitList,
    /// Waiting for room in this socket's queue, or in its sender budget.
    pub writers: WaitList,
    /// Extra `.udsfs/sock/H` entries that refer to this socket.
    pub aliases: Vec<u64>,
    /// Entries this socket received and nobody opened yet.
    pub received: Vec<u64>,
    /// For an embryo: the listener whose queue it waits in.
    pub listener_id: Option<u64>,
    /// The stream/seqpacket peer closed (set by the peer's release, so that
    /// reading the state never needs the peer's lock).
    pub peer_gone: bool,
    /// A message with `oob` may be queued: spares poll a queue scan.
    pub oob_queued: bool,
    /// SO_OOBINLINE: the OOB byte is read in line, MSG_OOB is refused.
    pub oob_inline: bool,
    /// SO_PEEK_OFF: where the next MSG_PEEK starts; negative means off.
    pub peek_off: i32,
    /// Who gets SIGURG when an OOB byte arrives (F_SETOWN, FIOSETOWN).
    pub urg_owner: Option<super::oob::UrgOwner>,
}

impl SockState {
    /// An OOB byte waits to be read with MSG_OOB (Linux's oob_skb is set).
    pub fn oob_pending(&self) -> bool {
        self.oob_queued && self.rcvq.iter().any(|m| m.oob)
    }
}

pub struct Socket {
    pub id: u64,
    pub ty: SockType,
    /// FUSE generation of its directory: ids are reused, generations are not.
    pub generation: u64,
    pub(crate) st: Mutex<SockState>,
    /// Serialises bind/autobind of this socket (Linux's bindlock).
    pub(crate) bind_lock: Mutex<()>,
    /// References that keep it alive: open handles, queues that hold it,
    /// received-but-unopened entries.
    pub(crate) refs: AtomicUsize,
    /// Bytes this socket has queued at receivers (sk_wmem_alloc).
    pub(crate) wmem: AtomicUsize,
    /// Copies of this socket in queues (in flight).
    pub(crate) inflight: AtomicUsize,
    /// Claimed by the collector: no new reference may be taken.
    pub(crate) gc_dead: AtomicBool,
    /// SO_RCVTIMEO and SO_SNDTIMEO (not inherited by accepted sockets).
    pub timeouts: super::timeo::Timeouts,
    /// The options AF_UNIX only keeps to read back (not inherited either).
    pub options: super::sockflags::Options,
}

impl Socket {
    pub fn new(
        id: u64,
        generation: u64,
        ty: SockType,
        sndbuf: usize,
        max_dgram_qlen: usize,
    ) -> Socket {
        Socket {
            id,
            ty,
            generation,
            st: Mutex::new(SockState {
                conn: Conn::Unconnected,
                name: None,
                rcvq: VecDeque::new(),
                rcvq_bytes: 0,
                shutdown: 0,
                err: None,
                passcred: false,
                passpidfd: false,
                peercred: None,
                peer_pin: None,
                sndbuf,
                rcvbuf: super::bufsize::rcvbuf_default(),
                max_dgram_qlen,
                embryo: false,
                dead: false,
                readers: WaitList::default(),
                writers: WaitList::default(),
                aliases: Vec::new(),
                received: Vec::new(),
                listener_id: None,
                peer_gone: false,
                oob_queued: false,
                oob_inline: false,
                peek_off: -1,
                urg_owner: None,
            }),
            bind_lock: Mutex::new(()),
            refs: AtomicUsize::new(0),
            wmem: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            gc_dead: AtomicBool::new(false),
            timeouts: Default::default(),
            options: Default::default(),
        }
    }

    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Acquire)
    }

    pub fn lock(&self) -> MutexGuard<'_, SockState> {
        self.st.lock()
    }

    pub fn refs(&self) -> usize {
        self.refs.load(Ordering::Acquire)
    }

    pub fn wmem(&self) -> usize {
        self.wmem.load(Ordering::Acquire)
    }

    /// unix_writable(): the sender budget is at most a quarter used.
    pub fn writable(&self, st: &SockState) -> bool {
        !matches!(st.conn, Conn::Listening { .. }) && self.wmem() * 4 <= st.sndbuf
    }

    pub fn peer(st: &SockState) -> Option<&Arc<Socket>> {
        match &st.conn {
            Conn::Connected(p) => Some(p),
            _ => None,
        }
    }

    /// The state word status files and /proc/net/unix use.
    pub fn state_name(&self, st: &SockState) -> &'static str {
        match &st.conn {
            Conn::Unconnected => "unconnected",
            Conn::Listening { .. } => "listening",
            Conn::Connected(_) if st.peer_gone => "disconnected",
            Conn::Connected(_) => "connected",
        }
    }
}

/// Both guards of `lock2`, in the order the sockets were given.
pub type Locked2<'a> = (MutexGuard<'a, SockState>, MutexGuard<'a, SockState>);

/// Locks two distinct sockets in ascending id order (gVisor's rule). The
/// same socket twice would deadlock on its own lock: that is logged and
/// refused with EINVAL (callers handle a socket meeting itself first).
pub fn lock2<'a>(a: &'a Socket, b: &'a Socket) -> Result<Locked2<'a>, Errno> {
    if a.id == b.id {
        log::error!("socket {}: locking it twice refused", a.id);
        return Err(Errno::EINVAL);
    }
    Ok(if a.id < b.id {
        let ga = a.lock();
        (ga, b.lock())
    } else {
        let gb = b.lock();
        (a.lock(), gb)
    })
}

/// Poll bits as Linux's unix_poll / unix_dgram_poll report them.
pub mod pollbits {
    pub const PRI: u32 = libc::POLLPRI as u32;
    pub const IN: u32 = libc::POLLIN as u32 | libc::POLLRDNORM as u32;
    pub const OUT: u32 = libc::POLLOUT as u32 | libc::POLLWRNORM as u32 | libc::POLLWRBAND as u32;
    pub const ERR: u32 = libc::POLLERR as u32;
    pub const HUP: u32 = libc::POLLHUP as u32;
    pub const RDHUP: u32 = libc::POLLRDHUP as u32;
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Socket({} {})", self.id, self.ty.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock2_refuses_the_same_socket_twice() {
        let a = Socket::new(1, 1, SockType::Stream, 1000, 10);
        let b = Socket::new(2, 2, SockType::Stream, 1000, 10);
        assert_eq!(lock2(&a, &a).err(), Some(Errno::EINVAL));
        let (ga, gb) = lock2(&b, &a).expect("two sockets");
        drop((ga, gb));
        // Neither lock stayed held.
        assert!(a.st.try_lock().is_some() && b.st.try_lock().is_some());
    }
}

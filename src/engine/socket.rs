//! One socket: its type, its connection state as an enum, its receive queue
//! and the waiters on it. The operations on sockets are `Engine` methods in
//! the modules named after them (msgpath/ for messages, bind.rs,
//! connect.rs, release.rs).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;

use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};

use super::addr::Addr;
use super::cred::Ucred;
use super::fault::held::{HeldQueue, Until};
use super::name_key::NameKey;
use super::wait::WaitList;

pub use super::socktype::SockType;

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
    /// The socket charged for this message, and how much; the same charge
    /// counts for `charged_uid` in `Engine::queued`.
    pub sender: Arc<Socket>,
    pub charge: usize,
    pub charged_uid: u32,
    /// Sockets passed with it (SCM_RIGHTS), in flight while queued, each
    /// with whether it was passed from an O_NONBLOCK descriptor (in one
    /// vector: a `Msg` is charged by its size, skb.rs SLICE_PIECE_CHARGE).
    pub rights: Vec<(Arc<Socket>, bool)>,
    /// The user charged for those in-flight copies.
    pub rights_uid: u32,
    /// This one-byte chunk is the socket's pending out-of-band byte (Linux's
    /// oob_skb); at most one message of a queue has it.
    pub oob: bool,
    /// Other files passed with it, held by the daemon (charged to `rights_uid`).
    pub files: Vec<super::depot::PassedFile>,
    /// The sender's pin (src/engine/pins.rs), made at send time for a
    /// reader with SO_PASSPIDFD and shared by its messages, so that
    /// SCM_PIDFD names it even once it has exited.
    pub pidfd: Option<super::pins::Pin>,
    /// Its number for the taps (0: queued while none was attached).
    pub msg_id: u64,
    /// Who sent it, as the taps see it (default while none is attached).
    pub origin: super::tap::Origin,
    /// A fault dropped the sockets and files it passed: its reader gets
    /// MSG_CTRUNC.
    pub ctrunc: bool,
    /// The end of a piece a fault (slicer) cut a stream send into: a read
    /// stops there, as one arriving segment would end it.
    pub piece_end: bool,
    /// Its receive timestamp, ns since the epoch (0: none yet): taken when
    /// it was queued for a receiver with SO_TIMESTAMP, else when first read
    /// with it on (`msgpath::stamp`).
    pub stamp: u64,
}

impl super::fault::held::Sent for Msg {
    fn sender_id(&self) -> u64 {
        self.sender.id
    }
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

/// SO_PEERCRED as connect, listen or socketpair set it, and the process it
/// names pinned when it was set (SO_PEERPIDFD; src/engine/pins.rs); `pin`
/// is None when it could not be pinned.
#[derive(Clone, Debug)]
pub struct PeerCred {
    pub cred: Ucred,
    /// Where `cred.pid` lives, read when it was pinned: what a reader in
    /// another pid namespace is shown (src/engine/pidns.rs `shown`).
    pub seen: super::pidns::PidSeen,
    /// Charged to the user charged for the socket (`Engine::pin_to_holder`).
    pub pin: Option<super::pins::Pin>,
    /// The process's supplementary groups then (SO_PEERGROUPS).
    pub groups: std::sync::Arc<[u32]>,
}

impl PeerCred {
    /// SO_PEERCRED as task `viewer` sees it (its pid and user namespaces),
    /// translated as Linux translates the peer's own pid: from where it
    /// lived when pinned, not from whatever has its number now.
    pub fn shown_to(&self, viewer: u32) -> super::Ucred {
        let c = self.cred;
        let (uid, gid) = super::userns::shown_to(viewer, c.uid, c.gid);
        super::Ucred {
            pid: super::pidns::shown(c.pid, || self.seen, viewer),
            uid,
            gid,
        }
    }
}

/// What the socket is connected to, with what each state owns: a state
/// change is one assignment of a new variant.
pub enum Conn {
    /// `cred`: a dgram socket keeps the SO_PEERCRED socketpair gave it
    /// through connects and disconnects, as Linux does; None otherwise.
    Unconnected { cred: Option<PeerCred> },
    Listening {
        backlog: usize,
        /// Connections not yet accepted (embryos); each holds one reference.
        pending: VecDeque<Arc<Socket>>,
        /// The listening process's credentials, which its clients get as
        /// SO_PEERCRED (and it gets itself).
        cred: PeerCred,
    },
    /// Connected (stream, seqpacket) or with a default peer (dgram). The peer
    /// may be dead: stream peers then see EOF, dgram senders ECONNREFUSED once.
    Connected {
        peer: Arc<Socket>,
        cred: Option<PeerCred>,
        /// The stream/seqpacket peer closed (set by the peer's release, so
        /// that reading the state never needs the peer's lock).
        peer_gone: bool,
        /// An embryo: the server end of a connection not yet accepted, and
        /// the listener whose queue it waits in.
        listener: Option<u64>,
    },
    /// Its last reference went (unix_release_sock ran): whoever still
    /// reaches it (a peer, a sender holding it) sees it gone.
    Closed,
}

impl Conn {
    pub const UNCONNECTED: Conn = Conn::Unconnected { cred: None };

    /// A fresh connection to `peer`.
    pub fn connected(peer: Arc<Socket>, cred: Option<PeerCred>) -> Conn {
        Conn::Connected {
            peer,
            cred,
            peer_gone: false,
            listener: None,
        }
    }

    /// SO_PEERCRED, whatever the state.
    pub fn cred(&self) -> Option<&PeerCred> {
        match self {
            Conn::Unconnected { cred } | Conn::Connected { cred, .. } => cred.as_ref(),
            Conn::Listening { cred, .. } => Some(cred),
            Conn::Closed => None,
        }
    }

    /// What SO_PEERCRED a dgram socket keeps when its peer changes.
    pub fn kept_cred(&self) -> Option<PeerCred> {
        self.cred().cloned()
    }

    pub fn is_connected(&self) -> bool {
        matches!(self, Conn::Connected { .. })
    }

    pub fn is_listening(&self) -> bool {
        matches!(self, Conn::Listening { .. })
    }

    pub fn is_closed(&self) -> bool {
        matches!(self, Conn::Closed)
    }

    pub fn is_unconnected(&self) -> bool {
        matches!(self, Conn::Unconnected { .. })
    }

    /// For an embryo, the listener it waits in.
    pub fn embryo_of(&self) -> Option<u64> {
        match self {
            Conn::Connected { listener, .. } => *listener,
            _ => None,
        }
    }

    pub fn is_embryo(&self) -> bool {
        self.embryo_of().is_some()
    }
}

pub struct SockState {
    pub conn: Conn,
    pub queue: RecvQueue,
    pub name: Option<Arc<BoundName>>,
    pub shutdown: u8,
    /// Pending socket error (sk_err), reported once.
    pub err: Option<Errno>,
    pub passcred: bool,
    /// SO_PASSPIDFD: the reader gets a pidfd of each message's sender.
    pub passpidfd: bool,
    pub sndbuf: usize,
    /// SO_RCVBUF: read back only (AF_UNIX limits nothing by it).
    pub rcvbuf: usize,
    /// Entries this socket received and nobody opened yet.
    pub received: Vec<u64>,
    /// SO_OOBINLINE: the OOB byte is read in line, MSG_OOB is refused.
    pub oob_inline: bool,
    /// Who gets SIGURG when an OOB byte arrives (F_SETOWN, FIOSETOWN).
    pub urg_owner: Option<super::urg::UrgOwner>,
    /// O_ASYNC as the program set it (F_SETFL, FIOASYNC): the kernel keeps
    /// it only on files with `fasync`, which FUSE files lack, so F_GETFL
    /// reads it here; the daemon sends SIGIO (src/engine/sigio.rs).
    pub fasync: bool,
    /// SOCKWQ_ASYNC_NOSPACE: a send found no room in this socket's budget;
    /// the room that comes back sends SIGIO once (`Wakeups::run`).
    pub nospace: bool,
    /// Threads whose read parked here was answered EINTR because the
    /// connection's lane came up under it (`Engine::lane_kicks`), until
    /// each asks whether that was the daemon's (`Engine::lane_woke`); at
    /// most `lane::WOKEN_KEPT`, the oldest dropped.
    pub lane_woken: Vec<u32>,
}

/// A socket's receive queue: the messages (or stream chunks), the bytes
/// they hold, who waits to read them and who waits for room in them. Its
/// fields are its own: the byte count moves only with the messages, here.
pub struct RecvQueue {
    msgs: VecDeque<Msg>,
    /// Unread bytes (SIOCINQ of a stream).
    bytes: usize,
    /// Waiting to read (data, connections, EOF, errors).
    readers: WaitList,
    /// Waiting for room in this queue, or in this socket's sender budget.
    writers: WaitList,
    /// net.unix.max_dgram_qlen: a dgram sender waits past it.
    max_dgram_qlen: usize,
    /// A message with `oob` may be queued: spares poll a queue scan.
    oob_queued: bool,
    /// SO_PEEK_OFF: where the next MSG_PEEK starts; negative means off.
    peek_off: i32,
    /// Messages queued but held back by a fault, not yet readable
    /// (src/engine/fault/timer.rs).
    held: HeldQueue<Msg>,
    /// The socket closed but its peer is not told yet (slow_close): what
    /// the peer sends meanwhile is queued here, and dropped when it is.
    closing_late: bool,
}

impl RecvQueue {
    pub fn new(max_dgram_qlen: usize) -> RecvQueue {
        RecvQueue {
            msgs: VecDeque::new(),
            bytes: 0,
            readers: WaitList::default(),
            writers: WaitList::default(),
            max_dgram_qlen,
            oob_queued: false,
            peek_off: -1,
            held: HeldQueue::default(),
            closing_late: false,
        }
    }

    /// The readable messages, oldest first (their bytes change only
    /// through `consume`, `pop`, `remove` and `drain`).
    pub fn msgs(&self) -> &VecDeque<Msg> {
        &self.msgs
    }

    /// Message `i`, to take what it passes (rights, files, a pidfd, its
    /// MSG_CTRUNC); its bytes are read with `consume`.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Msg> {
        self.msgs.get_mut(i)
    }

    /// Unread bytes (SIOCINQ of a stream).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn readers(&mut self) -> &mut WaitList {
        &mut self.readers
    }

    pub fn writers(&mut self) -> &mut WaitList {
        &mut self.writers
    }

    /// SO_PEEK_OFF; negative means off.
    pub fn peek_off(&self) -> i32 {
        self.peek_off
    }

    pub fn set_peek_off(&mut self, off: i32) {
        self.peek_off = off;
    }

    /// The socket closed but its peer is not told yet (slow_close).
    pub fn closing_late(&self) -> bool {
        self.closing_late
    }

    pub fn set_closing_late(&mut self, late: bool) {
        self.closing_late = late;
    }

    /// The messages a fault holds back (src/engine/fault/).
    pub(crate) fn held(&self) -> &HeldQueue<Msg> {
        &self.held
    }

    /// Holds `m` back (src/engine/fault/timer.rs): queued, not readable.
    pub(crate) fn hold(&mut self, m: Msg, until: Until) {
        self.held.push(m, until);
    }

    /// The held messages whose rules went are due `now`.
    pub(crate) fn release_held(&mut self, now: Instant) {
        self.held.release_all(now);
    }

    /// Makes what is due `now` of the held messages readable, in order;
    /// the readers to wake.
    pub(crate) fn show_due(&mut self, now: Instant, wake_all: bool) -> Vec<super::wait::Waiter> {
        let mut readers = Vec::new();
        for m in self.held.take_due(now) {
            readers.extend(self.push(m, wake_all));
        }
        readers
    }

    /// Takes every held message (a connection a fault ended).
    pub(crate) fn drain_held(&mut self) -> Vec<Msg> {
        self.held.drain().collect()
    }

    /// Queues `m` with its accounting; the readers to wake: every one for
    /// a stream chunk, one for a message (no thundering herd).
    pub fn push(&mut self, m: Msg, wake_all: bool) -> Vec<super::wait::Waiter> {
        if m.oob {
            // The older OOB byte, if any, becomes ordinary data.
            for old in self.msgs.iter_mut() {
                old.oob = false;
            }
            self.oob_queued = true;
        }
        self.bytes += m.data.len();
        self.msgs.push_back(m);
        if wake_all {
            self.readers.take()
        } else {
            self.readers.take_for_one()
        }
    }

    /// Takes the first message whole, with its accounting (SO_PEEK_OFF
    /// moves back past it, sk_peek_offset_bwd).
    pub fn pop(&mut self) -> Option<Msg> {
        let m = self.msgs.pop_front()?;
        self.bytes -= m.data.len();
        self.peek_off_back(m.data.len());
        Some(m)
    }

    /// Reads `n` bytes of message `i` (SO_PEEK_OFF moves back past them);
    /// the message, for what it passes.
    pub fn consume(&mut self, i: usize, n: usize) -> &mut Msg {
        self.msgs[i].off += n;
        self.bytes -= n;
        self.peek_off_back(n);
        &mut self.msgs[i]
    }

    /// Takes message `i` with what is left of its bytes.
    pub fn remove(&mut self, i: usize) -> Option<Msg> {
        let m = self.msgs.remove(i)?;
        self.bytes -= m.remaining();
        Some(m)
    }

    /// Where the OOB byte is, if one may be queued.
    pub fn oob_position(&self) -> Option<usize> {
        if !self.oob_queued {
            return None;
        }
        self.msgs.iter().position(|m| m.oob)
    }

    /// Message `i`'s OOB mark goes: its byte is read in line, or dropped.
    pub fn clear_oob(&mut self, i: usize) {
        self.msgs[i].oob = false;
        self.oob_queued = false;
    }

    /// Reads the OOB byte, message `i`'s only byte (MSG_OOB).
    pub fn take_oob(&mut self, i: usize) {
        let m = &mut self.msgs[i];
        m.off += 1;
        m.oob = false;
        self.oob_queued = false;
        self.bytes -= 1;
    }

    /// Takes every message (a purge), the bytes with them, held ones too.
    pub fn drain(&mut self) -> VecDeque<Msg> {
        self.bytes = 0;
        let mut all = std::mem::take(&mut self.msgs);
        all.extend(self.held.drain());
        all
    }

    /// Whether a fault holds messages of this queue back (the message
    /// path's one question about them: none held, nothing to wait behind).
    pub fn holds_back(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether a message of `sender` is held back: what it sends later
    /// (its shutdown too) waits behind it.
    pub fn holds_back_from(&self, sender: u64) -> bool {
        self.holds_back() && self.held.holds_from(sender)
    }

    /// A dgram receiver's queue is full past max_dgram_qlen messages
    /// (unix_recvq_full_lockless: more than the limit, not equal); held
    /// messages count, as skbs in the queue.
    pub fn full(&self) -> bool {
        self.msgs.len() + self.held.len() > self.max_dgram_qlen
    }

    /// An OOB byte waits to be read with MSG_OOB (Linux's oob_skb is set).
    pub fn oob_pending(&self) -> bool {
        self.oob_queued && self.msgs.iter().any(|m| m.oob)
    }

    /// SO_PEEK_OFF after a read of `n` bytes (sk_peek_offset_bwd).
    pub fn peek_off_back(&mut self, n: usize) {
        if self.peek_off >= 0 {
            self.peek_off = (self.peek_off as i64 - n as i64).max(0) as i32;
        }
    }

    /// SO_PEEK_OFF after a peek of `n` bytes (sk_peek_offset_fwd).
    pub fn peek_off_forward(&mut self, n: usize) {
        if self.peek_off >= 0 {
            self.peek_off = self.peek_off.saturating_add(n as i32);
        }
    }
}

pub struct Socket {
    pub id: u64,
    pub ty: SockType,
    /// FUSE generation of its directory: ids are reused, generations are not.
    pub generation: u64,
    /// Its sockfs inode's mode and owner (fstat, fchmod, fchown).
    pub inode: super::sockinode::SockInode,
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
    /// Made by socketpair() (both ends): the only sockets a lane is made
    /// for at its maker's ask (`Op::LaneClaim` arg 3, src/engine/lane.rs).
    pub(crate) paired: AtomicBool,
    /// SO_RCVTIMEO and SO_SNDTIMEO (not inherited by accepted sockets).
    pub timeouts: super::timeo::Timeouts,
    /// The options AF_UNIX only keeps to read back (not inherited either).
    pub options: super::sockflags::Options,
    /// The payload protocol captures name for its conversations (ctl
    /// `capture_proto`; an accepted socket takes its listener's).
    pub(crate) capture_proto: Mutex<Option<Arc<str>>>,
    /// The network namespace the socket was made in (Linux's sock_net):
    /// its abstract name is filed there, and the abstract names it connects
    /// or sends to are looked up there, whichever namespace the thread that
    /// binds, connects or sends is in by then.
    pub netns: super::netns::NetNs,
    /// `netns` held open while the socket lives, so that its number goes
    /// to no other namespace (src/engine/netns_pin.rs); None: the daemon's
    /// namespace, an unknown one, or a number given alone (tests). Charged
    /// to the socket's user (replaced at accept: `Engine::set_owner`).
    netns_pin: Mutex<Option<super::netns_pin::Pin>>,
    /// Extra `.udsfs/sock/H` entries that refer to this socket: a lock of
    /// their own (taken with no other inside it), so that who may open the
    /// socket can be asked while another socket's state is locked
    /// (src/engine/access.rs).
    pub(crate) aliases: Mutex<Vec<u64>>,
    /// The owner of the directory whose last claim went last (u32::MAX:
    /// none yet): who held the socket last, for the taps' view of its
    /// close once nobody may open it.
    pub(crate) last_opener: AtomicU32,
    /// Polled once (poll, select, an epoll registration): readiness is the
    /// daemon's, so the socket never gets a lane (src/engine/lane.rs).
    pub(crate) polled: AtomicBool,
    /// Lanes made for it so far: at most `lane::LANES_PER_CONN` (a peer
    /// that held its busy word up could otherwise delay each way down
    /// again and again).
    pub(crate) lanes_made: AtomicU32,
    /// Its library asked for the connection's lane (`Engine::lane_join`):
    /// the region is made when the other end asks too.
    pub(crate) lane_asked: AtomicBool,
    /// Made by accept(): its SO_PEERCRED is the connecting process's, on
    /// whose user the connection's lane is charged (src/engine/lane.rs).
    pub(crate) accepted: AtomicBool,
    /// The process (its thread group, as the daemon sees it) whose library
    /// said, asking for the lane (`Op::LaneClaim` arg 6), that it answers
    /// every poll of this end itself and moves its epoll registrations onto
    /// the lane's eventfd: its FUSE POLLs before its claim do not forbid
    /// the lane (`Engine::lane_polled`). 0: none.
    pub(crate) polls_mine: AtomicI32,
}

/// What a new socket starts with (from `Config`: the engine reads no
/// sysctl for each socket).
#[derive(Clone, Copy, Debug)]
pub struct SockDefaults {
    pub sndbuf: usize,
    /// SO_RCVBUF: net.core.rmem_default.
    pub rcvbuf: usize,
    pub max_dgram_qlen: usize,
}

impl Socket {
    /// The socket, made in network namespace `ns`, which `pin` holds open.
    pub fn in_netns(self, ns: super::netns::NetNs, pin: Option<super::netns_pin::Pin>) -> Socket {
        Socket {
            netns: ns,
            netns_pin: Mutex::new(pin),
            ..self
        }
    }

    /// Its network namespace, and that namespace held open once more (for
    /// a socket made in the same namespace: an accept's embryo).
    pub(crate) fn netns_held(&self) -> (super::netns::NetNs, Option<super::netns_pin::Pin>) {
        (self.netns, self.netns_pin.lock().clone())
    }

    /// Its namespace no longer held for it (released).
    pub(crate) fn unpin_netns(&self) {
        self.netns_pin.lock().take();
    }

    /// Its namespace's pin made `f`'s (the same namespace, another payer).
    pub(crate) fn repin_netns(
        &self,
        f: impl FnOnce(&super::netns_pin::Pin) -> Option<super::netns_pin::Pin>,
    ) {
        let mut pin = self.netns_pin.lock();
        if let Some(new) = pin.as_ref().and_then(f) {
            *pin = Some(new);
        }
    }

    /// Its inode owned by (`uid`, `gid`), the creator's.
    pub fn owned_by(self, uid: u32, gid: u32) -> Socket {
        self.inode.renew(uid, gid);
        self
    }

    pub fn new(id: u64, generation: u64, ty: SockType, defaults: SockDefaults) -> Socket {
        let SockDefaults {
            sndbuf,
            rcvbuf,
            max_dgram_qlen,
        } = defaults;
        Socket {
            id,
            ty,
            generation,
            st: Mutex::new(SockState {
                conn: Conn::UNCONNECTED,
                queue: RecvQueue::new(max_dgram_qlen),
                name: None,
                shutdown: 0,
                err: None,
                passcred: false,
                passpidfd: false,
                sndbuf,
                rcvbuf,
                received: Vec::new(),
                oob_inline: false,
                urg_owner: None,
                fasync: false,
                nospace: false,
                lane_woken: Vec::new(),
            }),
            bind_lock: Mutex::new(()),
            refs: AtomicUsize::new(0),
            wmem: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            gc_dead: AtomicBool::new(false),
            paired: AtomicBool::new(false),
            timeouts: Default::default(),
            options: Default::default(),
            capture_proto: Mutex::new(None),
            netns: 0,
            netns_pin: Mutex::new(None),
            aliases: Mutex::new(Vec::new()),
            last_opener: AtomicU32::new(u32::MAX),
            polled: AtomicBool::new(false),
            lanes_made: AtomicU32::new(0),
            lane_asked: AtomicBool::new(false),
            accepted: AtomicBool::new(false),
            polls_mine: AtomicI32::new(0),
            inode: super::sockinode::SockInode::new(0, 0),
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
        !st.conn.is_listening() && self.wmem() * 4 <= st.sndbuf
    }

    pub fn peer(st: &SockState) -> Option<&Arc<Socket>> {
        match &st.conn {
            Conn::Connected { peer, .. } => Some(peer),
            _ => None,
        }
    }

    /// The state word status files and /proc/net/unix use.
    pub fn state_name(&self, st: &SockState) -> &'static str {
        match &st.conn {
            Conn::Unconnected { .. } => "unconnected",
            Conn::Listening { .. } => "listening",
            Conn::Connected {
                peer_gone: true, ..
            } => "disconnected",
            Conn::Connected { .. } => "connected",
            Conn::Closed => "closed",
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
        let d = SockDefaults {
            sndbuf: 1000,
            rcvbuf: 1000,
            max_dgram_qlen: 10,
        };
        let a = Socket::new(1, 1, SockType::Stream, d);
        let b = Socket::new(2, 2, SockType::Stream, d);
        assert_eq!(lock2(&a, &a).err(), Some(Errno::EINVAL));
        let (ga, gb) = lock2(&b, &a).expect("two sockets");
        drop((ga, gb));
        // Neither lock stayed held.
        assert!(a.st.try_lock().is_some() && b.st.try_lock().is_some());
    }
}

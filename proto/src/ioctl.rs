//! The ioctls of a socket's `data` file. FUSE passes ioctls on regular
//! files "restricted": the kernel copies in and out exactly _IOC_SIZE(cmd)
//! bytes, so each command is a fixed-size `#[repr(C)]` struct, and the
//! typed views here (`Op`, one value struct per op) encode into and decode
//! from those structs without changing them. Fields are native-endian; the
//! clients and the daemon run on one machine.
//!
//! `control` and `message` issue the ioctls by system call, not through
//! the C library: the preload library defines `ioctl` itself.

use crate::{Cred, Res, SCM_MAX_FD, cmsg};

/// `ioctl(fd, UDSFS_IOC_CTL, &mut Ctl)`: control operations (`Ctl::op`).
/// The number holds the struct's size, so a client and a daemon built with
/// different `Ctl` layouts refuse each other (ENOTTY) rather than misread.
pub const UDSFS_IOC_CTL: u32 = iowr(1, core::mem::size_of::<Ctl>());
/// `ioctl(fd, UDSFS_IOC_MSG, buf)`: one sendmsg or recvmsg; `buf` holds a
/// `MsgHead`, then the payload, `MSG_BUF` bytes in all. Its size never
/// changes, so its number says the layout of `MsgHead`: 2 with a 112-byte
/// `addr`, 3 since it is `WIRE_MAX` bytes (an older peer gets ENOTTY).
pub const UDSFS_IOC_MSG: u32 = iowr(3, MSG_BUF);

/// _IOC_SIZE has 14 bits.
pub const MSG_BUF: usize = 16 * 1024 - 8;
/// Payload room of one UDSFS_IOC_MSG; larger messages go through `msg`.
pub const MSG_ROOM: usize = MSG_BUF - core::mem::size_of::<MsgHead>();

const IOC_TYPE: u32 = b'U' as u32;

const fn iowr(nr: u32, size: usize) -> u32 {
    // _IOC(_IOC_READ | _IOC_WRITE, type, nr, size)
    (3 << 30) | ((size as u32) << 16) | (IOC_TYPE << 8) | nr
}

/// Room for `sun_path` (108 bytes) and alignment: `Ctl::given`, the
/// sun_path a bind was given.
pub const ADDR_MAX: usize = 112;
/// Room for an address on the wire (`Ctl::addr`, `MsgHead::addr`): a tree
/// path in the mount, which for a routed name is the route's prefix and
/// then the name, a relative sun_path of up to 108 bytes made absolute from
/// the working directory (`udsfs_proto::addr::MAX_WIRE_PATH`).
pub const WIRE_MAX: usize = 256;
/// Passed things one message carries.
pub const MAX_RIGHTS: usize = SCM_MAX_FD;

/// How many passed fds a recvmsg control buffer of `controllen` bytes takes
/// after the credentials, which come first and take CMSG_SPACE(12) (or the
/// rest, cut short), as scm_recv fills it.
pub const fn rights_room(controllen: usize, creds: bool) -> usize {
    let mut used = 0;
    if creds && controllen >= cmsg::HDR {
        let space = cmsg::align(cmsg::HDR + 12);
        used = if space < controllen {
            space
        } else {
            controllen
        };
    }
    (controllen - used).saturating_sub(cmsg::HDR) / 4
}

/// Number of result values in `Ctl::v`.
pub const NV: usize = 13;

/// Addresses in `addr`/`addr_len`: the wire form of `crate::addr::Addr`
/// (length 0: none, unnamed, or autobind for `Op::Bind`). With
/// `ADDR_AS_GIVEN` in `addr_flags` an address read back is the sun_path the
/// program gave bind, verbatim.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Ctl {
    pub op: u32,
    pub arg: i32,
    pub addr_len: u32,
    /// Out (`Op::GetName`): `ADDR_AS_GIVEN` or 0.
    pub addr_flags: u32,
    /// Values in and out, as the op's value struct (`CtlValues`) lays them.
    pub v: [i64; NV],
    pub addr: [u8; WIRE_MAX],
    /// In (`Op::Bind` of a path): the sun_path as the program gave it (Linux
    /// reports it so: `./x.sock` stays `./x.sock`); 0 bytes: none.
    pub given_len: u32,
    pub _pad: u32,
    pub given: [u8; ADDR_MAX],
}

/// `addr` is the sun_path as given to bind, not a tree path.
pub const ADDR_AS_GIVEN: u32 = 1;

numbered! {
/// The control operations (`Ctl::op`).
pub enum Op {
    /// `addr`: the name (none: autobind); `given`: the sun_path given.
    Bind = 1,
    /// `arg`: the backlog.
    Listen = 2,
    /// Never parks: a full backlog gives EAGAIN; a blocking caller then
    /// writes `connect` to the socket's ctl file, which parks.
    Connect = 3,
    /// `arg`: SHUT_RD, SHUT_WR or SHUT_RDWR.
    Shutdown = 4,
    /// `arg` 0: the local address, 1: the peer's (ENOTCONN without a peer).
    GetName = 5,
    /// Out: `Info`.
    Info = 6,
    /// Out: `TakenError`.
    TakeError = 7,
    SetPasscred = 8,
    SetSndbuf = 9,
    /// connect(AF_UNSPEC): dissolve a dgram socket's default peer.
    Disconnect = 10,
    /// SO_OOBINLINE (`arg` 0 or 1).
    SetOobInline = 11,
    /// SO_PEEK_OFF (`arg`; negative: off).
    SetPeekOff = 12,
    /// F_SETOWN and friends: `arg` a pid (> 0), a process group (< 0) or 0;
    /// SIGURG goes there when OOB data arrives.
    SetOwner = 13,
    /// SIOCATMARK. Out: `AtMark`.
    AtMark = 14,
    /// Out: `OobOpts`.
    OobOpts = 15,
    /// SO_RCVBUF (`arg`), as `SetSndbuf` for the send buffer.
    SetRcvbuf = 16,
    /// SO_SNDBUFFORCE and SO_RCVBUFFORCE: EPERM without CAP_NET_ADMIN.
    SetSndbufForce = 17,
    SetRcvbufForce = 18,
    /// SO_RCVTIMEO (`arg` 0) or SO_SNDTIMEO (`arg` 1). In: `Timeo`: EDOM
    /// for a usec outside 0..1000000; 0, 0: none.
    SetTimeo = 19,
    /// Reads them back (`arg` as for `SetTimeo`). Out: `Timeo`.
    GetTimeo = 20,
    /// SO_PASSPIDFD (`arg` 0 or 1).
    SetPasspidfd = 32,
    /// The SOL_SOCKET option `arg` that AF_UNIX only keeps
    /// (`crate::sockopt::KEPT`). In: `Sockopt`; ENOPROTOOPT for others.
    SetSockopt = 33,
    /// Reads option `arg` back. Out: `Sockopt`.
    GetSockopt = 34,
    /// On a listener: socket `Accepted::id`, just accepted, becomes a
    /// received entry of it (out: the entry's number), so that its control
    /// handle may close before its data file opens (accept with one
    /// descriptor slot left).
    KeepAccepted = 35,
    /// SO_PEERPIDFD. Out: `PeerPidfd`, a depot tag of the peer's pidfd,
    /// pinned when the peer connected, to claim over the fd channel.
    PeerPidfd = 36,
    /// The pending error (sk_err, what SO_ERROR and the next call report),
    /// errno `arg`, as recvmmsg leaves one that came after datagrams: a
    /// number Linux names (1..=133), else EINVAL.
    SetError = 37,
    /// SO_PEERGROUPS, from group `arg` on. Out: v[0] the number of groups
    /// (ENODATA: no peer credential), v[1..] up to `GROUPS_PER_CTL` of them.
    PeerGroups = 38,
    /// O_ASYNC (`arg` 0 or 1), which F_GETFL reads back from `OobOpts`.
    SetAsync = 39,
    /// The fast lane (docs/LANE.md, stage b). `arg` 3, on a new stream
    /// socketpair's first socket: its region is made; out: `LaneGrant`
    /// (the region's depot tag, to claim over the fd channel; side 0 is this
    /// socket). `arg` 0: this end is claimed for the calling process (out:
    /// its side); a second claim takes the lane down (ENOENT). `arg` 1: the
    /// end found the region corrupt: the connection is reset. `arg` 4,
    /// after 3 or 5: the lane's eventfds (out: `LaneEvents`, their depot
    /// tags). `arg` 5, on a socket connect() or accept() gave the library:
    /// this end is claimed, the connection's region made first if it has
    /// none (out: `LaneGrant` with the region's depot tag and this end's
    /// side); EAGAIN: not now (not accepted yet, bytes queued, a call
    /// blocked in the daemon), ask again later. `arg` 6: as 5, and the
    /// library answers the end's polls and restarts a read of its own that
    /// the daemon answers EINTR when the lane is made under it. `arg` 7:
    /// this end's library stops asking (it goes without a lane): no lane
    /// waits for its ask, nor wakes its reads. `arg` 8, after an EINTR no
    /// signal handler explains: Ok if it was the daemon's, a read of the
    /// calling thread answered so when the lane came up under it (the
    /// library makes the call again), else ENOENT. `arg` 9: a registration
    /// of this end stays on its data file in a kernel poll or epoll set
    /// (one the library could not move to the lane): the lane goes down and
    /// the socket gets none again, as at a poll the library does not answer.
    /// ENOPROTOOPT: the mount has
    /// no lanes; EOPNOTSUPP: this socket has none. A grant's `side` has
    /// `LANE_RECORD` set for a seqpacket connection (records on the rings).
    LaneClaim = 40,
    /// On a listener: a one-time ticket for one accept (out:
    /// `AcceptTicket`), for the caller's thread only, taken by its open of
    /// `.udsfs/accept/TICKET` (`crate::mount::ticket_name`) within
    /// `crate::mount::TICKET_TTL_MS`: the descriptor authorises the accept,
    /// as on Linux, whatever the caller's uid is now (the listener's own
    /// `accept` file is its creator's). EINVAL on a socket not listening,
    /// EOPNOTSUPP on a dgram socket, as accept.
    AcceptTicket = 41,
}
}

/// `LaneGrant::side`'s bit for a record (seqpacket) lane; the side is bit 0.
pub const LANE_RECORD: i32 = 2;

/// The groups one `Op::PeerGroups` reply carries.
pub const GROUPS_PER_CTL: usize = NV - 1;

impl Ctl {
    /// A request for `op` with `arg`, everything else zero.
    pub fn new(op: Op, arg: i32) -> Ctl {
        Ctl {
            op: op as u32,
            arg,
            addr_len: 0,
            addr_flags: 0,
            v: [0; NV],
            addr: [0; WIRE_MAX],
            given_len: 0,
            _pad: 0,
            given: [0; ADDR_MAX],
        }
    }

    /// Sets `addr` (wire form), cut to its field.
    pub fn with_addr(mut self, wire: &[u8]) -> Ctl {
        self.addr_len = copy_in(&mut self.addr, wire);
        self
    }

    /// Sets `given`, cut to its field.
    pub fn with_given(mut self, sun_path: &[u8]) -> Ctl {
        self.given_len = copy_in(&mut self.given, sun_path);
        self
    }

    /// Sets the values of `vals`.
    pub fn with<T: CtlValues>(mut self, vals: T) -> Ctl {
        vals.encode(&mut self.v);
        self
    }

    /// The values, read as the op's struct.
    pub fn values<T: CtlValues>(&self) -> T {
        T::decode(&self.v)
    }

    /// `addr`, or None when its length is past the field.
    pub fn addr(&self) -> Option<&[u8]> {
        self.addr.get(..self.addr_len as usize)
    }

    /// `given`, or None when its length is past the field.
    pub fn given(&self) -> Option<&[u8]> {
        self.given.get(..self.given_len as usize)
    }

    /// Writes a name read back (`Op::GetName`): the wire form, or with
    /// `as_given` a sun_path as the program gave it.
    pub fn set_name(&mut self, wire: &[u8], as_given: bool) {
        self.addr = [0; WIRE_MAX];
        self.addr_len = copy_in(&mut self.addr, wire);
        self.addr_flags = if as_given { ADDR_AS_GIVEN } else { 0 };
    }

    /// The bytes the kernel copies.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: Ctl is repr(C) integers and byte arrays with no padding
        // (its size is the sum of its fields, checked in the tests).
        unsafe { core::slice::from_raw_parts((self as *const Ctl).cast::<u8>(), size_of::<Ctl>()) }
    }

    /// A request as the kernel copied it in; EINVAL when too short.
    pub fn from_bytes(bytes: &[u8]) -> Res<Ctl> {
        if bytes.len() < size_of::<Ctl>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: any bytes are a valid Ctl; the length was checked.
        Ok(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<Ctl>()) })
    }
}

fn copy_in<const N: usize>(field: &mut [u8; N], bytes: &[u8]) -> u32 {
    let n = bytes.len().min(N);
    field[..n].copy_from_slice(&bytes[..n]);
    n as u32
}

/// A typed view of `Ctl::v` for one op.
pub trait CtlValues: Sized {
    fn encode(&self, v: &mut [i64; NV]);
    fn decode(v: &[i64; NV]) -> Self;
}

/// `Op::Info`'s arg when the caller reads none of the queue figures (`inq`,
/// `outq`): the type, settings, peer and number, which a lane does not
/// change, so the daemon leaves the socket's lane up (getsockopt SO_TYPE or
/// SO_PEERCRED of a connection in use; 0, the queue ioctls', takes a claimed
/// lane down first: its bytes are in the rings).
pub const INFO_SETTINGS: i32 = 1;

/// `Op::Info`: what getsockopt and the queue ioctls report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET.
    pub ty: i32,
    pub listening: bool,
    pub passcred: bool,
    /// SO_PEERCRED, when the socket has a peer's credentials.
    pub peer: Option<Cred>,
    pub sndbuf: i64,
    pub rcvbuf: i64,
    /// Bytes queued to read; None on a listener.
    pub inq: Option<i64>,
    pub outq: i64,
    /// The socket's number N (`.udsfs/sock/N`).
    pub id: u64,
    pub passpidfd: bool,
}

impl Info {
    /// What SO_PEERCRED reads without a peer's credentials.
    pub const NO_PEER: Cred = Cred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
}

impl CtlValues for Info {
    fn encode(&self, v: &mut [i64; NV]) {
        let peer = self.peer.unwrap_or(Info::NO_PEER);
        *v = [
            self.ty as i64,
            self.listening as i64,
            self.passcred as i64,
            self.peer.is_some() as i64,
            peer.pid as i64,
            peer.uid as i64,
            peer.gid as i64,
            self.sndbuf,
            self.inq.unwrap_or(-1),
            self.outq,
            self.id as i64,
            self.passpidfd as i64,
            self.rcvbuf,
        ];
    }

    fn decode(v: &[i64; NV]) -> Info {
        Info {
            ty: v[0] as i32,
            listening: v[1] != 0,
            passcred: v[2] != 0,
            peer: (v[3] != 0).then_some(Cred {
                pid: v[4] as i32,
                uid: v[5] as u32,
                gid: v[6] as u32,
            }),
            sndbuf: v[7],
            inq: (v[8] >= 0).then_some(v[8]),
            outq: v[9],
            id: v[10] as u64,
            passpidfd: v[11] != 0,
            rcvbuf: v[12],
        }
    }
}

/// Value structs of one to three plain fields, laid out from v[0].
macro_rules! values {
    ($($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* })*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name { $(pub $field: $ty),* }

        impl CtlValues for $name {
            #[allow(unused_assignments)]
            fn encode(&self, v: &mut [i64; NV]) {
                let mut i = 0;
                $( v[i] = Word::to_word(self.$field); i += 1; )*
            }

            #[allow(unused_assignments)]
            fn decode(v: &[i64; NV]) -> $name {
                let mut i = 0;
                $( let $field = Word::from_word(v[i]); i += 1; )*
                $name { $($field),* }
            }
        }
    )*};
}

/// A field's conversion to and from one i64 of `Ctl::v`.
trait Word {
    fn to_word(self) -> i64;
    fn from_word(w: i64) -> Self;
}

impl Word for bool {
    fn to_word(self) -> i64 {
        self as i64
    }
    fn from_word(w: i64) -> bool {
        w != 0
    }
}

impl Word for i32 {
    fn to_word(self) -> i64 {
        self as i64
    }
    fn from_word(w: i64) -> i32 {
        w as i32
    }
}

impl Word for i64 {
    fn to_word(self) -> i64 {
        self
    }
    fn from_word(w: i64) -> i64 {
        w
    }
}

impl Word for u64 {
    fn to_word(self) -> i64 {
        self as i64
    }
    fn from_word(w: i64) -> u64 {
        w as u64
    }
}

values! {
    /// `Op::TakeError`: the pending error (SO_ERROR), 0 for none.
    TakenError { errno: i32 }
    /// `Op::PeerPidfd`: the depot tag of the peer's pidfd.
    PeerPidfd { tag: u64 }
    /// `Op::SetTimeo` (in) and `Op::GetTimeo` (out): a struct timeval;
    /// out, `zero` is a zero timeout (a negative tv_sec: no waiting, reads 0).
    Timeo { sec: i64, usec: i64, zero: bool }
    /// `Op::SetSockopt` (in) and `Op::GetSockopt` (out): the int (SO_LINGER:
    /// l_onoff) and SO_LINGER's l_linger.
    Sockopt { a: i32, b: i32 }
    /// `Op::KeepAccepted`: in, the accepted socket; out, its entry.
    Accepted { id: u64 }
    /// `Op::AcceptTicket`: the ticket, a random number (never 0).
    AcceptTicket { ticket: u64 }
    /// `Op::LaneClaim`: the region's depot tag, this end's side (0: A,
    /// which writes ring 0), the two rings' capacities and their writers'
    /// SO_SNDBUF, which each ring's writes are charged against (0: none,
    /// the ring bounds them; region.rs `with_budgets`).
    LaneGrant { tag: u64, side: i32, cap0: i32, cap1: i32, sndbuf0: i64, sndbuf1: i64 }
    /// `Op::LaneClaim` arg 4: the depot tags of the lane's two eventfds
    /// (end A's, end B's), each the end's wake-up for poll and epoll, which
    /// its peer writes; then of the two ends' daemon-only eventfds (written
    /// at the way down, never by a peer), each given only to a library that
    /// holds that end (0: not this asker's: a connection's asker gets its
    /// own end's, a socketpair's maker both).
    LaneEvents { tag0: u64, tag1: u64, hup0: u64, hup1: u64 }
    /// `Op::AtMark`: SIOCATMARK.
    AtMark { at: bool }
    /// `Op::OobOpts`: SO_OOBINLINE, SO_PEEK_OFF, the SIGURG owner and O_ASYNC.
    OobOpts { inline: bool, peek_off: i32, owner: i32, fasync: bool }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct MsgHead {
    pub op: u32,
    pub flags: u32,
    /// In: payload bytes (send) or wanted (recv). Out: bytes sent/received.
    pub len: u32,
    /// Out (recv): the message's whole length (MSG_TRUNC).
    pub full_len: u32,
    pub addr_len: u32,
    /// Out (recv): STATUS_*. In (send): the thread the send is made for
    /// (`act_for`), 0 for the caller itself: a supervisor's thread names the
    /// program thread whose trapped call it carries, and the daemon takes
    /// the send as that thread's only when this supervisor thread holds a
    /// checked grant for exactly it (src/fuse/actfor.rs `caller_named`),
    /// else EPERM (the supervisor then sets the grant by setxattr).
    pub status: u32,
    /// Out (recv): HAS_CREDS (SCM_CREDENTIALS in `creds`) and HAS_PIDFD
    /// (SCM_PIDFD of the sender, whose pid is `creds[0]`).
    pub has_creds: u32,
    pub nrights: u32,
    /// pid, uid, gid.
    pub creds: [u32; 3],
    /// Out (recv): `ADDR_AS_GIVEN` or 0, for `addr`.
    pub addr_flags: u32,
    /// In (recv with MSGF_PEEK): start this far into what a peek returns,
    /// so that a peek larger than MSG_ROOM comes in pieces. In (send): the
    /// bytes of the same call earlier ioctls sent, as a stream call's skbs
    /// (up to 36544 bytes) are cut from its start: a piece within one an
    /// earlier piece began fills it instead of waiting for room.
    pub skip: u32,
    /// In (recv with MSGF_LIMIT): how many of `len` bytes the caller's
    /// buffers can take.
    pub writable: u32,
    /// What is left of the call's SO_RCVTIMEO or SO_SNDTIMEO in ns
    /// (TIMEO_NONE: none). Out: after this ioctl. In, with MSGF_CONT: the
    /// most a later ioctl of the same call may wait, so that a call carried
    /// by several ioctls is timed once, by the daemon.
    pub timeo_left: u64,
    /// Out (recv): the receive timestamp in ns since the epoch (0: none),
    /// and in `tstamp` the reader's timestamp state when it read
    /// (`crate::tstamp::Tstamp`), which says what control messages it gets.
    pub stamp: u64,
    pub tstamp: u32,
    pub pad: u32,
    /// Send: `to`; recv: `from`.
    pub addr: [u8; WIRE_MAX],
    /// Socket numbers and file tags (`crate::passed`): passed (send) or
    /// received, each a new `.udsfs/sock/H/` to open (recv).
    pub rights: [u64; MAX_RIGHTS],
}

pub const HAS_CREDS: u32 = 1;
pub const HAS_PIDFD: u32 = 2;
/// With HAS_PIDFD: the daemon holds a pidfd of the sender, made when it
/// sent; its file tag follows the received ones, at `rights[nrights]`.
pub const HAS_PIDFD_FILE: u32 = 4;

pub const MSGOP_SEND: u32 = 1;
pub const MSGOP_RECV: u32 = 2;

/// recv: leave the message queued.
pub const MSGF_PEEK: u32 = 1;
/// send: the last byte is out-of-band (MSG_OOB); recv: read the OOB byte,
/// and (out) the byte returned is it.
pub const MSGF_OOB: u32 = 2;
/// recv (out): passed sockets were dropped, past the reader's RLIMIT_NOFILE
/// unopened ones (MSG_CTRUNC).
pub const MSGF_CTRUNC: u32 = 4;
/// recv (in): `nrights` is the caller's control buffer length; passed
/// sockets beyond its room are closed, as Linux closes the files it does not
/// install (MSG_CTRUNC).
pub const MSGF_ROOM: u32 = 8;
/// In: the caller blocks (no O_NONBLOCK, no MSG_DONTWAIT): a call that
/// cannot complete parks in the daemon, under the socket's SO_RCVTIMEO or
/// SO_SNDTIMEO, until it can or a signal comes. Without it: EAGAIN at once.
pub const MSGF_WAIT: u32 = 16;
/// recv (in): MSG_WAITALL on a stream: wait until `len` bytes (at most
/// MSG_ROOM), EOF, an error, a signal or the timeout; then what came.
pub const MSGF_WAITALL: u32 = 32;
/// In: a later ioctl of one call (a MSG_WAITALL receive larger than
/// MSG_ROOM, timed once as unix_stream_read_generic does): it waits at most
/// `timeo_left`.
pub const MSGF_CONT: u32 = 64;
/// recv (in): the caller's buffers can take only `writable` bytes: a stream
/// receive stops before a chunk (a sender's write) that does not fit them
/// whole, EFAULT when the first does not, leaving it queued, as Linux copies
/// a stream an skb at a time.
pub const MSGF_LIMIT: u32 = 128;
/// send (in): the rest of a blocking stream send that already queued bytes
/// or waited for room (a lane's write the way down woke, preload lane.rs
/// `resumed`): Linux's sender is then inside its loop, where
/// sock_alloc_send_pskb reports a pending error (a reader that closed with
/// bytes unread: ECONNRESET) before the shutdown's EPIPE.
pub const MSGF_RESUMED: u32 = 256;
/// `timeo_left` of a socket without a timeout.
pub const TIMEO_NONE: u64 = u64::MAX;

/// `timeo_left` for what is left of a timeout (None: no timeout): ns, held
/// below TIMEO_NONE.
pub fn timeo_left_ns(left: Option<std::time::Duration>) -> u64 {
    left.map_or(TIMEO_NONE, |l| {
        l.as_nanos().min(u128::from(TIMEO_NONE - 1)) as u64
    })
}

/// What `timeo_left` says is left (None: no timeout).
pub fn timeo_left_of(ns: u64) -> Option<std::time::Duration> {
    (ns != TIMEO_NONE).then(|| std::time::Duration::from_nanos(ns))
}
/// recv: the message does not fit MSG_ROOM; nothing was taken.
pub const STATUS_TOO_BIG: u32 = 1;

/// Size of the head at the start of a UDSFS_IOC_MSG buffer.
pub const HEAD_SIZE: usize = size_of::<MsgHead>();

impl MsgHead {
    /// A head for `op` (MSGOP_SEND or MSGOP_RECV), everything else zero.
    pub fn new(op: u32) -> MsgHead {
        MsgHead {
            op,
            flags: 0,
            len: 0,
            full_len: 0,
            addr_len: 0,
            status: 0,
            has_creds: 0,
            nrights: 0,
            creds: [0; 3],
            addr_flags: 0,
            skip: 0,
            writable: 0,
            timeo_left: 0,
            stamp: 0,
            tstamp: 0,
            pad: 0,
            addr: [0; WIRE_MAX],
            rights: [0; MAX_RIGHTS],
        }
    }

    /// Sets `addr` (wire form), cut to its field.
    pub fn set_addr(&mut self, wire: &[u8]) {
        self.addr_len = copy_in(&mut self.addr, wire);
    }

    /// `addr` up to its length (cut to the field).
    pub fn addr(&self) -> &[u8] {
        &self.addr[..(self.addr_len as usize).min(WIRE_MAX)]
    }

    /// Sets the passed things, at most MAX_RIGHTS.
    pub fn set_rights(&mut self, ids: &[u64]) {
        let n = ids.len().min(MAX_RIGHTS);
        self.rights[..n].copy_from_slice(&ids[..n]);
        self.nrights = n as u32;
    }

    /// The passed things received (cut to the field).
    pub fn rights(&self) -> &[u64] {
        &self.rights[..(self.nrights as usize).min(MAX_RIGHTS)]
    }

    /// A send made for thread `tid` (see `status`).
    pub fn set_act_for(&mut self, tid: u32) {
        if self.op == MSGOP_SEND {
            self.status = tid;
        }
    }

    /// The thread a send names (see `status`); None: the caller's own.
    pub fn act_for(&self) -> Option<u32> {
        (self.op == MSGOP_SEND && self.status != 0).then_some(self.status)
    }

    /// The sender's credentials (HAS_CREDS).
    pub fn creds(&self) -> Option<Cred> {
        (self.has_creds & HAS_CREDS != 0).then(|| Cred::from_words(self.creds))
    }

    /// The sender's pid for SCM_PIDFD (HAS_PIDFD).
    pub fn pidfd_pid(&self) -> Option<i32> {
        (self.has_creds & HAS_PIDFD != 0).then_some(self.creds[0] as i32)
    }

    /// The receive timestamp and the reader's timestamp state (SO_TIMESTAMP).
    pub fn stamp(&self) -> Option<(u64, crate::tstamp::Tstamp)> {
        (self.stamp != 0).then_some((self.stamp, crate::tstamp::Tstamp(self.tstamp)))
    }

    /// The tag of the daemon's pidfd of the sender (HAS_PIDFD_FILE).
    pub fn pidfd_tag(&self) -> Option<u64> {
        if self.has_creds & HAS_PIDFD_FILE == 0 {
            return None;
        }
        self.rights.get(self.nrights as usize).copied()
    }

    /// The bytes the kernel copies.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: MsgHead is repr(C) integers with no padding (its size is
        // the sum of its fields, checked in the tests).
        unsafe { core::slice::from_raw_parts((self as *const MsgHead).cast::<u8>(), HEAD_SIZE) }
    }

    /// The head at the start of `buf`; EINVAL when too short.
    pub fn read_from(buf: &[u8]) -> Res<MsgHead> {
        if buf.len() < HEAD_SIZE {
            return Err(libc::EINVAL);
        }
        // SAFETY: any bytes are a valid MsgHead; the length was checked.
        Ok(unsafe { core::ptr::read_unaligned(buf.as_ptr().cast::<MsgHead>()) })
    }

    /// Writes the head at the start of `buf` (which must hold it).
    pub fn write_to(&self, buf: &mut [u8]) {
        buf[..HEAD_SIZE].copy_from_slice(self.as_bytes());
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One UDSFS_IOC_CTL on data file `fd`: `ctl` goes in and comes back with
/// the results.
pub fn control(fd: i32, ctl: &mut Ctl) -> Res<()> {
    // SAFETY: the kernel copies size_of::<Ctl>() bytes in and out of ctl.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            fd,
            UDSFS_IOC_CTL as libc::c_ulong,
            ctl as *mut Ctl,
        )
    };
    if r < 0 { Err(last_errno()) } else { Ok(()) }
}

/// `control` of a new request, returning what came back.
pub fn request(fd: i32, mut ctl: Ctl) -> Res<Ctl> {
    control(fd, &mut ctl)?;
    Ok(ctl)
}

/// One UDSFS_IOC_MSG on data file `fd` with `buf` (a head, then a send's
/// payload; at least MSG_BUF bytes, else EINVAL): the head that came back.
pub fn message(fd: i32, buf: &mut [u8]) -> Res<MsgHead> {
    if buf.len() < MSG_BUF {
        return Err(libc::EINVAL);
    }
    // SAFETY: the kernel copies MSG_BUF bytes in and out of buf.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            fd,
            UDSFS_IOC_MSG as libc::c_ulong,
            buf.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(last_errno());
    }
    MsgHead::read_from(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes README documents, which the daemon (src/fuse/ioctl.rs) and
    /// both fronts take from here.
    #[test]
    fn wire_sizes_stay_what_the_kernel_copies() {
        assert_eq!(size_of::<Ctl>(), 496);
        assert_eq!(
            size_of::<Ctl>(),
            4 * 4 + 8 * NV + WIRE_MAX + 4 * 2 + ADDR_MAX
        );
        assert_eq!(
            HEAD_SIZE,
            4 * 8 + 4 * 3 + 4 * 3 + 8 + 16 + WIRE_MAX + 8 * MAX_RIGHTS
        );
        assert_eq!(MSG_BUF, 16376);
        assert_eq!(MSG_ROOM, 14016);
        assert_eq!(UDSFS_IOC_CTL, 0xc1f0_5501);
        assert_eq!(UDSFS_IOC_MSG, 0xfff8_5503);
    }

    #[test]
    fn rights_room_follows_scm_recv() {
        // CMSG_SPACE(4) holds two fds; CMSG_LEN(0) none; credentials first.
        assert_eq!(rights_room(24, false), 2);
        assert_eq!(rights_room(16, false), 0);
        assert_eq!(rights_room(0, false), 0);
        assert_eq!(rights_room(32 + 24, true), 2);
        assert_eq!(
            rights_room(20, true),
            0,
            "credentials cut short take it all"
        );
    }

    #[test]
    fn ops_come_from_their_numbers_only() {
        for n in 0..64 {
            if let Ok(op) = Op::try_from(n) {
                assert_eq!(op as u32, n);
            }
        }
        assert_eq!(Op::try_from(6), Ok(Op::Info));
        assert_eq!(Op::try_from(36), Ok(Op::PeerPidfd));
        assert_eq!(Op::try_from(0), Err(0));
        assert_eq!(Op::try_from(21), Err(21));
        assert_eq!(Op::try_from(u32::MAX), Err(u32::MAX));
    }

    #[test]
    fn info_round_trips_and_keeps_its_layout() {
        let i = Info {
            ty: libc::SOCK_SEQPACKET,
            listening: false,
            passcred: true,
            peer: Some(Cred {
                pid: 42,
                uid: 1000,
                gid: 100,
            }),
            sndbuf: 212992,
            rcvbuf: 4608,
            inq: Some(7),
            outq: 3,
            id: 99,
            passpidfd: true,
        };
        let c = Ctl::new(Op::Info, 0).with(i);
        assert_eq!(c.values::<Info>(), i);
        assert_eq!(c.v, [5, 0, 1, 1, 42, 1000, 100, 212992, 7, 3, 99, 1, 4608]);
        let none = Info {
            peer: None,
            inq: None,
            ..i
        };
        let c = Ctl::new(Op::Info, 0).with(none);
        assert_eq!(c.values::<Info>(), none);
        assert_eq!(&c.v[3..7], &[0, 0, u32::MAX as i64, u32::MAX as i64]);
        assert_eq!(c.v[8], -1);
    }

    #[test]
    fn small_values_round_trip() {
        let t = Timeo {
            sec: -1,
            usec: 999_999,
            zero: true,
        };
        assert_eq!(Ctl::new(Op::GetTimeo, 1).with(t).values::<Timeo>(), t);
        let o = OobOpts {
            inline: true,
            peek_off: -1,
            owner: -77,
            fasync: true,
        };
        let c = Ctl::new(Op::OobOpts, 0).with(o);
        assert_eq!((c.v[0], c.v[1], c.v[2], c.v[3]), (1, -1, -77, 1));
        assert_eq!(c.values::<OobOpts>(), o);
        let s = Sockopt { a: 1, b: -1 };
        assert_eq!(Ctl::new(Op::GetSockopt, 0).with(s).values::<Sockopt>(), s);
        let a = Accepted { id: 1 << 40 };
        assert_eq!(
            Ctl::new(Op::KeepAccepted, 0).with(a).values::<Accepted>(),
            a
        );
        let p = PeerPidfd { tag: 1 << 63 | 5 };
        assert_eq!(Ctl::new(Op::PeerPidfd, 0).with(p).values::<PeerPidfd>(), p);
        let e = TakenError { errno: libc::EPIPE };
        assert_eq!(Ctl::new(Op::TakeError, 0).with(e).values::<TakenError>(), e);
        assert!(
            Ctl::new(Op::AtMark, 0)
                .with(AtMark { at: true })
                .values::<AtMark>()
                .at
        );
    }

    #[test]
    fn ctl_bytes_round_trip_and_short_input_is_einval() {
        let c = Ctl::new(Op::Bind, 3)
            .with_addr(b"run/x.sock")
            .with_given(b"./x.sock");
        let back = Ctl::from_bytes(c.as_bytes()).unwrap();
        assert_eq!(Op::try_from(back.op), Ok(Op::Bind));
        assert_eq!(back.arg, 3);
        assert_eq!(back.addr(), Some(&b"run/x.sock"[..]));
        assert_eq!(back.given(), Some(&b"./x.sock"[..]));
        assert_eq!(
            Ctl::from_bytes(&c.as_bytes()[..495]).err(),
            Some(libc::EINVAL)
        );
        let mut bad = back;
        bad.addr_len = WIRE_MAX as u32 + 1;
        assert_eq!(bad.addr(), None);
        let long = [b'a'; 300];
        assert_eq!(
            Ctl::new(Op::Connect, 0).with_addr(&long).addr_len,
            WIRE_MAX as u32
        );
        assert_eq!(
            Ctl::new(Op::Bind, 0).with_given(&long).given_len,
            ADDR_MAX as u32
        );
        let mut n = Ctl::new(Op::GetName, 0);
        n.set_name(b"./x", true);
        assert_eq!((n.addr(), n.addr_flags), (Some(&b"./x"[..]), ADDR_AS_GIVEN));
    }

    #[test]
    fn msg_heads_round_trip() {
        let mut h = MsgHead::new(MSGOP_RECV);
        h.set_addr(b"\0peer");
        h.set_rights(&[3, 1 << 63 | 4]);
        h.rights[2] = 1 << 63 | 9;
        h.has_creds = HAS_CREDS | HAS_PIDFD | HAS_PIDFD_FILE;
        h.creds = [(-5i32) as u32, 1, 2];
        let mut buf = [0u8; MSG_BUF];
        h.write_to(&mut buf);
        let back = MsgHead::read_from(&buf).unwrap();
        assert_eq!(back.addr(), b"\0peer");
        assert_eq!(back.rights(), &[3, 1 << 63 | 4]);
        assert_eq!(back.creds().map(|c| c.pid), Some(-5));
        assert_eq!(back.pidfd_pid(), Some(-5));
        assert_eq!(back.pidfd_tag(), Some(1 << 63 | 9));
        let mut cut = back;
        cut.nrights = 9999;
        cut.addr_len = 9999;
        assert_eq!(
            (cut.rights().len(), cut.addr().len()),
            (MAX_RIGHTS, WIRE_MAX)
        );
        assert_eq!(cut.pidfd_tag(), None);
        assert_eq!(MsgHead::read_from(&buf[..10]).err(), Some(libc::EINVAL));
    }

    #[test]
    fn ioctls_on_other_files_fail_with_the_kernels_errno() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        use std::os::fd::AsRawFd;
        let mut c = Ctl::new(Op::Info, 0);
        assert_eq!(control(f.as_raw_fd(), &mut c), Err(libc::ENOTTY));
        assert_eq!(control(-1, &mut c), Err(libc::EBADF));
    }
}

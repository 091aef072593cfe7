//! What one sendmsg gives the engine (`SendMsg`) and what one recvmsg asks
//! (`RecvFlags`) and gets back (`Received`): the one message type of every
//! front end.

use std::sync::Arc;

use super::addr::Addr;
use super::cred::Ucred;
use super::depot::PassedFile;
use super::socket::{BoundName, Socket};
use super::tap::Origin;

/// One sendmsg(). Sockets and files in `rights` and `files` (references
/// the sender holds) move into the queue with the message that carries
/// them; whatever was not queued stays there for the caller to retry with
/// or put back (`Engine::put_back`).
#[derive(Default)]
pub struct SendMsg<'a> {
    pub data: &'a [u8],
    /// sendto()'s address.
    pub to: Option<&'a Addr>,
    /// SCM_CREDENTIALS as given (already checked: `Engine::prepare_send`).
    pub creds: Option<Ucred>,
    pub rights: Option<&'a mut Vec<Arc<Socket>>>,
    /// Beside `rights`, one each: passed from an O_NONBLOCK descriptor
    /// (udsfs_proto::passed::NONBLOCK_TAG); the receiver opens it so.
    pub nonblock: Option<&'a mut Vec<bool>>,
    pub files: Option<&'a mut Vec<PassedFile>>,
    /// MSG_OOB: the last byte becomes the receiver's out-of-band byte
    /// (stream only; such a send never waits).
    pub oob: bool,
    /// Stream: the bytes of the same call that earlier sends took (a front
    /// carries a large call in several ioctls). Linux cuts a call into skbs
    /// of up to 36544 bytes, so where the call stands decides whether these
    /// bytes begin an skb (and wait for room) or fill the one begun before.
    pub call_off: usize,
    /// Bytes the capture taps saw already (a lane `Through` the daemon
    /// moved them, src/engine/lane/through.rs): queued without a report.
    pub untapped: bool,
    /// Bytes a lane's ring took already, its writer told they were sent
    /// (the way down, src/engine/lane.rs `ring_drain`): queued past
    /// `--max-queued-bytes` and the user's share of it, and counted, as
    /// they are queued past SO_SNDBUF; refused, they would be lost.
    pub past_bound: bool,
    /// The rest of a call that already waited for room or queued part
    /// (MSGF_RESUMED): as a waiter, it reports a pending error first.
    pub resumed: bool,
}

impl<'a> SendMsg<'a> {
    pub fn new(data: &'a [u8]) -> SendMsg<'a> {
        SendMsg {
            data,
            ..Default::default()
        }
    }

    pub fn to(self, to: &'a Addr) -> SendMsg<'a> {
        self.to_opt(Some(to))
    }

    pub fn to_opt(self, to: Option<&'a Addr>) -> SendMsg<'a> {
        SendMsg { to, ..self }
    }

    pub fn creds(self, creds: Option<Ucred>) -> SendMsg<'a> {
        SendMsg { creds, ..self }
    }

    pub fn rights(self, rights: &'a mut Vec<Arc<Socket>>) -> SendMsg<'a> {
        SendMsg {
            rights: Some(rights),
            ..self
        }
    }

    pub fn nonblock(self, nonblock: &'a mut Vec<bool>) -> SendMsg<'a> {
        SendMsg {
            nonblock: Some(nonblock),
            ..self
        }
    }

    pub fn files(self, files: &'a mut Vec<PassedFile>) -> SendMsg<'a> {
        SendMsg {
            files: Some(files),
            ..self
        }
    }

    pub fn oob(self) -> SendMsg<'a> {
        SendMsg { oob: true, ..self }
    }

    pub fn call_off(self, call_off: usize) -> SendMsg<'a> {
        SendMsg { call_off, ..self }
    }

    pub fn resumed(self, resumed: bool) -> SendMsg<'a> {
        SendMsg { resumed, ..self }
    }
}

/// What one sendmsg did: the bytes sent, and whether a fault rule cut the
/// send short (short_write, limit_data; src/engine/fault/immediate.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub len: usize,
    pub cut: bool,
}

/// How many passed references fit the reader's control buffer: it differs
/// with SCM_CREDENTIALS in front of them, known only once the message is.
#[derive(Clone, Copy, Debug)]
pub struct RightsRoom {
    pub without_creds: usize,
    pub with_creds: usize,
    /// The control buffer's length, for a message with a timestamp, whose
    /// control messages come first.
    pub controllen: usize,
}

impl RightsRoom {
    /// No room at all: a read(), or recvmsg without a control buffer.
    pub const NONE: RightsRoom = RightsRoom {
        without_creds: 0,
        with_creds: 0,
        controllen: 0,
    };
}

/// One recvmsg().
#[derive(Clone, Copy, Default)]
pub struct RecvFlags<'a> {
    /// The reader's buffer: at most this many bytes (a longer dgram or
    /// seqpacket message is truncated).
    pub len: usize,
    /// MSG_PEEK: leave it queued (only SO_PEEK_OFF moves).
    pub peek: bool,
    /// With `peek`: skip this many bytes first (a long peek read in pieces).
    pub skip: usize,
    /// MSG_OOB: the out-of-band byte (stream only).
    pub oob: bool,
    /// The control buffer's room for passed references; what does not fit
    /// closes now, as Linux closes fds it cannot install (MSG_CTRUNC).
    /// None: no limit.
    pub room: Option<RightsRoom>,
    /// Hand passed sockets and files to this caller as received entries
    /// and depot tags (`Received::passed`); without it they come as
    /// references (`rights`, `files`) for in-process users.
    pub deliver_to: Option<&'a super::Caller>,
    /// With `deliver_to`: the sender's pidfd is not handed over, only its
    /// pid (the `msg` file's records carry `pidfd=` as a number).
    pub pid_only: bool,
    /// A stream read that goes on with a receive begun earlier (a
    /// MSG_WAITALL's rest, after a wait): the sender credentials of its
    /// first chunk (`Received::sender`). With SO_PASSCRED or SO_PASSPIDFD
    /// on a chunk of another sender ends it before its first byte, as
    /// unix_stream_read_generic never glues two senders' bytes; the first
    /// chunk's name and pidfd are not taken again.
    pub after: Option<Option<Ucred>>,
    /// A stream reader whose buffers can take only `writable` of the
    /// `asked` bytes of its call: the read stops before a chunk it cannot
    /// copy whole, EFAULT when that is the first, as unix_stream_read_generic
    /// copies an skb at a time and leaves the one that fails queued.
    pub limit: Option<Limit>,
    /// Called with the length of the dgram or seqpacket message about to
    /// leave the queue (at most `len`): false leaves it queued and the
    /// receive fails with ENOMEM. The `msg` file charges a record to its
    /// reader so before it takes it (a record may be 4 MiB).
    pub reserve: Option<&'a dyn Fn(usize) -> bool>,
}

/// See `RecvFlags::limit`.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub writable: usize,
    pub asked: usize,
}

impl RecvFlags<'_> {
    pub fn new(len: usize) -> RecvFlags<'static> {
        RecvFlags {
            len,
            ..Default::default()
        }
    }

    pub fn peek(len: usize) -> RecvFlags<'static> {
        RecvFlags {
            len,
            peek: true,
            ..Default::default()
        }
    }
}

/// What one recvmsg returns.
#[derive(Debug, Default)]
pub struct Received {
    pub data: Vec<u8>,
    /// The message's whole length (dgram, seqpacket): more than `data` when truncated.
    pub full_len: usize,
    pub from: Option<Arc<BoundName>>,
    /// Credentials, present iff the receiver has passcred on.
    pub creds: Option<Ucred>,
    /// The sender's pid for SCM_PIDFD, present iff the receiver has passpidfd on.
    pub pidfd: Option<i32>,
    /// The sender's pinned pidfd, when it was pinned at send time (see pins.rs).
    pub pidfd_file: Option<super::pins::Pin>,
    /// That pidfd's depot tag, once delivered (`deliver_passed`).
    pub pidfd_tag: Option<u64>,
    /// Sockets received with it, each holding one reference (not delivered).
    pub rights: Vec<Arc<Socket>>,
    /// Beside `rights`: each passed from an O_NONBLOCK descriptor (a
    /// missing one: not).
    pub nonblock: Vec<bool>,
    /// Other files received with it (see depot.rs; not delivered).
    pub files: Vec<PassedFile>,
    /// With `RecvFlags::deliver_to`: the received entries and file tags, in
    /// the order they were sent.
    pub passed: Vec<u64>,
    /// Passed references dropped at the reader (MSG_CTRUNC).
    pub ctrunc: bool,
    /// A stream read: its first chunk's sender credentials as queued (not
    /// translated for the reader), which its rest goes on from
    /// (`RecvFlags::after`). None: nothing was read.
    pub sender: Option<Option<Ucred>>,
    /// The receive timestamp (ns since the epoch) and the reader's
    /// timestamp state when it read, which say what control messages it
    /// gets (dgram and seqpacket with SO_TIMESTAMP on).
    pub stamp: Option<(u64, udsfs_proto::sockopt::Tstamp)>,
    /// The queued messages this read took bytes of, for the taps.
    pub(crate) pieces: Vec<Piece>,
}

/// Part of one tapped message a read returned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub msg_id: u64,
    pub origin: Origin,
    pub len: usize,
}

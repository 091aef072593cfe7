//! What the message path tells the rule set about one message (or connect,
//! or close): enough to match selectors and compute effects, nothing of
//! the engine's own types, so that this module stays below the engine.

use std::fmt;
use std::time::Instant;

/// The socket type: the protocol crate's, shared with the engine.
pub use udsfs_proto::socktype::SockType;

/// A socket name: a path (relative to the mount root) or an abstract name
/// (the bytes after the leading NUL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name<'a> {
    Path(&'a [u8]),
    Abstract(&'a [u8]),
}

/// One end of a message.
#[derive(Clone, Copy, Debug)]
pub struct End<'a> {
    /// The socket number (`.udsfs/sock/N`).
    pub socket: u64,
    /// The name this end answers to: its bound name, or for a socket
    /// accepted from a listener the listener's name (the name the
    /// connection was made to).
    pub name: Option<Name<'a>>,
    /// The user that owns the socket (who may open `.udsfs/sock/N`).
    pub owner_uid: u32,
}

/// What happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `from` sends `len` bytes to `to` (a datagram, a seqpacket record, or
    /// one stream write).
    Send,
    /// `from` connects to `to` (a listener, or a dgram socket to be its
    /// default peer).
    Connect,
    /// `from` closes while connected to `to`.
    Close,
}

/// The process making a call. Finding its thread-group id costs the
/// engine a cache lookup (src/engine/cred.rs), so a message carries a way
/// to ask, taken only by a `pid` rule or an injection's log line.
#[derive(Clone, Copy)]
pub enum Pid<'a> {
    Known(u32),
    Ask(&'a dyn Fn() -> u32),
}

impl Pid<'_> {
    pub fn get(&self) -> u32 {
        match self {
            Pid::Known(p) => *p,
            Pid::Ask(ask) => ask(),
        }
    }
}

impl fmt::Debug for Pid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pid::Known(p) => write!(f, "{p}"),
            Pid::Ask(_) => f.write_str("(not asked)"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub kind: Kind,
    pub from: End<'a>,
    pub to: End<'a>,
    /// The process making the call, and its user.
    pub pid: Pid<'a>,
    pub uid: u32,
    pub ty: SockType,
    /// Payload bytes (0 for connect and close).
    pub len: usize,
    /// Sockets and files passed with it (SCM_RIGHTS).
    pub refs: usize,
    /// Bytes of the same send queued before this piece (a stream send is
    /// queued in pieces of at most half the send buffer).
    pub offset: usize,
    /// When the call is made; bandwidth paces against it.
    pub now: Instant,
}

impl fmt::Display for Message<'_> {
    /// For the log line of an injection.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Kind::Send => "send",
            Kind::Connect => "connect",
            Kind::Close => "close",
        };
        write!(
            f,
            "{what} {} {} -> {} pid={} uid={}",
            self.ty.name(),
            self.from.socket,
            self.to.socket,
            self.pid.get(),
            self.uid
        )?;
        if self.kind == Kind::Send {
            write!(f, " len={}", self.len)?;
            if self.refs > 0 {
                write!(f, " refs={}", self.refs)?;
            }
        }
        Ok(())
    }
}

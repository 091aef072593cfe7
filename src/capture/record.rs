//! What a capture buffers between the message path and its reader: records
//! owned outright (the sender's call has returned by the time they are
//! read), each tied to the conversation it belongs to.

use std::sync::Arc;

use crate::engine::tap::{Endpoint, Origin};
use crate::engine::{SockType, Ucred};

/// One socket as the capture shows it.
#[derive(Clone, Debug)]
pub struct Side {
    pub id: u64,
    pub name: Option<String>,
    /// The payload protocol the socket names for itself (ctl `capture_proto`).
    pub proto: Option<Arc<str>>,
}

impl From<&Endpoint> for Side {
    fn from(e: &Endpoint) -> Side {
        Side {
            id: e.id,
            name: e.name.as_ref().map(|a| a.display()),
            proto: e.proto.clone(),
        }
    }
}

impl Side {
    /// "socket 5" or "socket 5 (run/a.sock)".
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("socket {} ({n})", self.id),
            None => format!("socket {}", self.id),
        }
    }
}

/// A conversation: one pcapng interface. A connection (stream, seqpacket)
/// has a client (the end that connected, or sent first) and a server; the
/// conversation of a dgram socket is everything it receives.
#[derive(Debug)]
pub struct Conv {
    /// Unique within one capture.
    pub number: u64,
    pub ty: SockType,
    pub client: Option<Side>,
    pub server: Side,
    /// The process first seen in it (the one that connected, or sent).
    pub first_pid: u32,
}

impl Conv {
    pub fn has(&self, id: u64) -> bool {
        self.server.id == id || self.client.as_ref().is_some_and(|c| c.id == id)
    }

    /// Whether a message from `from` goes client to server.
    pub fn outbound(&self, from: u64) -> bool {
        self.client.as_ref().is_some_and(|c| c.id == from)
    }
}

/// A socket passed with a message.
#[derive(Clone, Debug)]
pub struct Passed {
    pub id: u64,
    pub ty: SockType,
    pub name: Option<String>,
}

/// Who sent a message and what came with it.
#[derive(Debug)]
pub struct Meta {
    pub from: u64,
    pub to: u64,
    pub origin: Origin,
    pub creds: Option<Ucred>,
    pub sockets: Vec<Passed>,
    pub files: Vec<&'static str>,
    pub oob: bool,
}

/// What a note without payload stands for (the `tcp` encoding makes
/// SYN, FIN and RST of some).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    Connect,
    Accept,
    /// The engine's shutdown bits: 1 read, 2 write.
    Shutdown(u8),
    Close,
    Reset,
    Collect,
    /// A read that cut the message or its passed references.
    Delivery,
    /// A fault rule acted (a comment only: no payload, no control bits).
    Fault,
}

#[derive(Debug)]
pub enum Body {
    Message {
        /// The captured bytes (at most the snap length).
        data: Vec<u8>,
        /// The message's whole length.
        len: usize,
        meta: Box<Meta>,
    },
    Note {
        kind: NoteKind,
        /// The socket it happened to.
        sock: u64,
        text: String,
    },
    /// Only the drop count: records of the conversation were lost and
    /// none followed yet.
    Drops,
}

#[derive(Debug)]
pub struct Record {
    /// Nanoseconds since the epoch.
    pub ts_ns: u64,
    pub conv: Arc<Conv>,
    pub msg_id: u64,
    /// Records of this conversation lost just before this one.
    pub drops: u64,
    pub body: Body,
}

/// A record's own size in the buffer, beside its payload, roughly.
const OVERHEAD: usize = 160;

impl Record {
    /// What the record holds in the reader's buffer, roughly.
    pub fn cost(&self) -> usize {
        match &self.body {
            Body::Message { data, meta, .. } => {
                Self::message_cost(data.len(), meta.sockets.len(), meta.files.len())
            }
            Body::Note { text, .. } => OVERHEAD + text.len(),
            Body::Drops => OVERHEAD,
        }
    }

    /// `cost` of a message record with `data` bytes kept, before it is made.
    pub fn message_cost(data: usize, sockets: usize, files: usize) -> usize {
        OVERHEAD + data + sockets * 48 + files * 16
    }
}

pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

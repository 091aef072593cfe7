//! Observers of the message path: a tap sees every message once when it is
//! queued at its receiver and once when it is read, and every connection
//! event, with who sent it and what it carried. The capture
//! (`.udsfs/capture`) is one; with none attached, the cost on the message
//! path is one relaxed load of `Taps::any`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::RwLock;

use super::addr::Addr;
use super::cred::Ucred;
use super::socktype::SockType;

/// One socket as a tap reports it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub id: u64,
    pub ty: SockType,
    /// Its bound name, if any.
    pub name: Option<Addr>,
    /// The user that made (or accepted) it: who may open it.
    pub owner_uid: u32,
    /// The payload protocol it asked captures to show (ctl `capture_proto`).
    pub proto: Option<Arc<str>>,
}

/// The process that made the call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin {
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A socket passed with a message (SCM_RIGHTS).
#[derive(Clone, Debug)]
pub struct PassedSocket {
    pub id: u64,
    pub ty: SockType,
    pub name: Option<Addr>,
}

/// A message (dgram, seqpacket) or a stream chunk, as queued at `to`.
pub struct Queued<'a> {
    /// Unique for the engine's life; `Delivered::msg_id` names it again.
    pub msg_id: u64,
    pub from: &'a Endpoint,
    pub to: &'a Endpoint,
    pub origin: Origin,
    /// SCM_CREDENTIALS as attached (explicit or the sender's own), if any.
    pub creds: Option<Ucred>,
    pub sockets: &'a [PassedSocket],
    /// One word per passed file that is not a udsfs socket ("pipe", "file", ...).
    pub files: &'a [&'static str],
    pub oob: bool,
    pub data: &'a [u8],
}

/// A read of (part of) a queued message by `reader`.
pub struct Delivered<'a> {
    pub msg_id: u64,
    pub reader: &'a Endpoint,
    pub origin: Origin,
    /// Bytes the reader got of it.
    pub len: usize,
    /// A dgram or seqpacket message cut to the reader's buffer (MSG_TRUNC).
    pub truncated: bool,
    /// Passed references dropped at the reader (MSG_CTRUNC).
    pub ctrunc: bool,
    pub peek: bool,
}

/// What happened to a socket without a payload.
#[derive(Clone, Debug)]
pub enum Event {
    /// `client` connected to `server` (the listener for stream/seqpacket, the
    /// default peer for dgram). `accepted`: the server's end of the new
    /// connection (stream, seqpacket), the socket accept will hand out, so
    /// that a tap can tell the connection's two ends before either speaks.
    Connected {
        client: Endpoint,
        server: Endpoint,
        accepted: Option<Endpoint>,
    },
    /// `listener` handed out the connection `sock`.
    Accepted { listener: Endpoint, sock: Endpoint },
    /// SHUT_RD = 1, SHUT_WR = 2, both = 3 (the engine's shutdown bits).
    Shutdown { sock: Endpoint, how: u8 },
    /// The last reference went.
    Closed { sock: Endpoint },
    /// `sock` got ECONNRESET: its peer went with unread data.
    Reset { sock: Endpoint },
    /// The garbage collector freed `sock` (an unreachable in-flight cycle).
    Collected { sock: Endpoint },
    /// Fault rule `rule` acted on what `sock` did (`what`: the fault and
    /// the message, as the daemon logs it).
    Fault {
        sock: Endpoint,
        rule: crate::fault::RuleId,
        what: String,
    },
}

pub trait Tap: Send + Sync {
    fn queued(&self, q: &Queued<'_>);
    fn delivered(&self, d: &Delivered<'_>);
    /// Whether `delivered` would use a read that cut the message
    /// (`truncated`) or its passed references (`ctrunc`), or neither: the
    /// engine builds the report only when some tap wants it, so that a
    /// tap that ignores plain reads does not cost every read a lock.
    fn wants_delivery(&self, _truncated: bool, _ctrunc: bool) -> bool {
        true
    }
    /// Counts a `len`-byte message from socket `from` to `to` (type `ty`)
    /// lost if this tap would drop it whatever its details (a full buffer),
    /// so that the engine need not build its report; false: it needs one.
    fn lost_undescribed(&self, _ty: SockType, _from: u64, _to: u64, _len: usize) -> bool {
        false
    }
    fn event(&self, origin: Origin, e: &Event);
}

/// The taps attached to one engine.
#[derive(Default)]
pub struct Taps {
    any: AtomicBool,
    list: RwLock<Vec<Arc<dyn Tap>>>,
    next_msg: AtomicU64,
}

impl Taps {
    /// Whether any tap is attached: the only cost when none is.
    #[inline]
    pub fn any(&self) -> bool {
        !cfg!(feature = "bare-message-path") && self.any.load(Ordering::Relaxed)
    }

    pub fn attach(&self, tap: Arc<dyn Tap>) {
        let mut list = self.list.write();
        list.push(tap);
        self.any.store(true, Ordering::Relaxed);
    }

    pub fn detach(&self, tap: &Arc<dyn Tap>) {
        let mut list = self.list.write();
        list.retain(|t| !Arc::ptr_eq(t, tap));
        self.any.store(!list.is_empty(), Ordering::Relaxed);
    }

    /// A new message id (ids start at 1; 0 means "none given").
    pub fn next_msg_id(&self) -> u64 {
        self.next_msg.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Reports a `len`-byte message from `from` to `to`: each tap that
    /// counts it lost undescribed does so, and `describe` builds the report
    /// for the others (not at all when there are none), so that a capture
    /// that stopped reading costs the senders little.
    pub fn report_queued(
        &self,
        (ty, from, to, len): (SockType, u64, u64, usize),
        describe: impl FnOnce(&dyn Fn(&Queued<'_>)),
    ) {
        let list = self.list.read();
        // Bit i: tap i wants the report; taps past 62 always get it.
        let mut wanting = 0u64;
        for (i, t) in list.iter().enumerate() {
            if i >= 63 || !t.lost_undescribed(ty, from, to, len) {
                wanting |= 1 << i.min(63);
            }
        }
        if wanting == 0 {
            return;
        }
        describe(&|q| {
            for (i, t) in list.iter().enumerate() {
                if wanting & (1 << i.min(63)) != 0 {
                    t.queued(q);
                }
            }
        });
    }

    pub fn queued(&self, q: &Queued<'_>) {
        for t in self.list.read().iter() {
            t.queued(q);
        }
    }

    /// Whether any tap wants to hear of a read (`Tap::wants_delivery`).
    pub fn wants_delivery(&self, truncated: bool, ctrunc: bool) -> bool {
        self.list
            .read()
            .iter()
            .any(|t| t.wants_delivery(truncated, ctrunc))
    }

    pub fn delivered(&self, d: &Delivered<'_>) {
        for t in self.list.read().iter() {
            t.delivered(d);
        }
    }

    pub fn event(&self, origin: Origin, e: &Event) {
        for t in self.list.read().iter() {
            t.event(origin, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);
    impl Tap for Count {
        fn queued(&self, _: &Queued<'_>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn delivered(&self, _: &Delivered<'_>) {}
        fn event(&self, _: Origin, _: &Event) {}
    }

    #[test]
    fn attach_and_detach_switch_any() {
        let taps = Taps::default();
        assert!(!taps.any());
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let t: Arc<dyn Tap> = c.clone();
        taps.attach(t.clone());
        assert!(taps.any());
        let ep = Endpoint {
            id: 1,
            ty: SockType::Dgram,
            name: None,
            owner_uid: 0,
            proto: None,
        };
        taps.queued(&Queued {
            msg_id: taps.next_msg_id(),
            from: &ep,
            to: &ep,
            origin: Origin::default(),
            creds: None,
            sockets: &[],
            files: &[],
            oob: false,
            data: b"x",
        });
        assert_eq!(c.0.load(Ordering::Relaxed), 1);
        taps.detach(&t);
        assert!(!taps.any());
    }
}

//! The one way in for messages: `Engine::sendmsg` and `Engine::recvmsg`,
//! each dispatched to its socket type's operations (stream.rs, dgram.rs,
//! seqpacket.rs) as Linux dispatches through its proto_ops tables
//! (unix_stream_ops, unix_dgram_ops, unix_seqpacket_ops). Every message is
//! queued in one place (enqueue.rs) and every receive is reported to the
//! taps in one place (`recvmsg`).

mod dgram;
pub(crate) mod enqueue;
mod seqpacket;
mod stream;

use std::cell::Cell;
use std::sync::Arc;

use nix::errno::Errno;

use super::message::{Limit, Received, RecvFlags, SendMsg, Sent};
use super::socket::{SockState, SockType, Socket};
use super::tap::Delivered;
use super::{Caller, Engine, Result, Ucred, Waiter, Wakeups};
use enqueue::{Pass, Sending};
use udsfs_proto::record::MAX_DGRAM;

/// A receive timestamp: CLOCK_REALTIME in ns since the epoch, as
/// __net_timestamp takes it (never 0, which means "none yet"). Read only
/// for a receiver with SO_TIMESTAMP on.
pub(crate) fn stamp_now() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_nanos() as u64).max(1)
}

/// The stamp a read of `m` by a receiver with timestamp state `t` reports
/// (None without SO_TIMESTAMP): the one taken at send, else one taken now
/// and kept, so that a peek and the read after it report the same, as
/// __sock_recv_timestamp stamps a message that came before the option.
pub(crate) fn read_stamp(t: udsfs_proto::sockopt::Tstamp, stamp: &mut u64) -> Option<u64> {
    if !t.wanted() {
        return None;
    }
    if *stamp == 0 {
        *stamp = stamp_now();
    }
    Some(*stamp)
}

/// One socket type's send and receive.
trait ProtoOps: Sync {
    /// sendmsg() on `op.tx.sock`: the bytes sent; EAGAIN means nothing was
    /// and `op.tx.w` waits for room.
    fn sendmsg(&self, op: SendOp<'_>) -> Result<usize>;

    /// recvmsg() on `op.s`, locked as `op.st`. `op.blocking`: the caller
    /// would wait (a dgram reader sees a shutdown only then). EAGAIN:
    /// nothing to read.
    fn recvmsg(&self, op: RecvOp<'_>) -> Result<Received>;
}

/// What a socket type's sendmsg works with.
struct SendOp<'a> {
    eng: &'a Engine,
    tx: Sending<'a>,
    msg: &'a SendMsg<'a>,
    caller: &'a Caller,
}

/// What a socket type's recvmsg works with: the socket, locked, and what
/// was asked.
struct RecvOp<'a> {
    eng: &'a Engine,
    s: &'a Socket,
    st: &'a mut SockState,
    f: &'a RecvFlags<'a>,
    blocking: bool,
    wake: &'a mut Wakeups,
}

fn ops(ty: SockType) -> &'static dyn ProtoOps {
    match ty {
        SockType::Stream => &stream::Stream,
        SockType::Dgram => &dgram::Dgram,
        SockType::Seqpacket => &seqpacket::Seqpacket,
    }
}

impl Engine {
    /// sendmsg(). Stream sends may be partial; EAGAIN means nothing was
    /// sent and `w` waits for room. Passed references move into the queue
    /// with the message; otherwise they stay in `msg.rights`/`msg.files`.
    pub fn sendmsg(
        &self,
        s: &Arc<Socket>,
        msg: SendMsg<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        self.send(s, msg, caller, w).map(|sent| sent.len)
    }

    /// `sendmsg`, also telling whether a fault rule cut a stream send
    /// short (`Sent::cut`): a front end that sends the rest of a blocking
    /// write itself stops there, as the program is to see the short count.
    pub fn send(
        &self,
        s: &Arc<Socket>,
        mut msg: SendMsg<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<Sent> {
        let cut = Cell::new(false);
        let pass = Pass::new(
            self,
            msg.rights.take(),
            msg.nonblock.take(),
            msg.files.take(),
            caller,
        )?;
        let mut tx = Sending::new(self, s, pass, caller, w, Some(&cut));
        if msg.untapped {
            tx.untapped();
        }
        tx.past_bound = msg.past_bound;
        // Only a stream has an out-of-band byte.
        if msg.oob && s.ty != SockType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let op = SendOp {
            eng: self,
            tx,
            msg: &msg,
            caller,
        };
        let len = ops(s.ty).sendmsg(op)?;
        Ok(Sent {
            len,
            cut: cut.get(),
        })
    }

    /// recvmsg(): one message (dgram, seqpacket; truncated to `f.len`) or
    /// up to `f.len` stream bytes. EAGAIN means nothing is there and `w`
    /// waits. A peek gives passed sockets as new references (left in flight
    /// in the queue, as scm_fp_dup gives the reader new descriptors).
    pub fn recvmsg(
        &self,
        s: &Arc<Socket>,
        f: RecvFlags<'_>,
        w: Option<&Waiter>,
    ) -> Result<Received> {
        let mut asked = f;
        if f.peek {
            asked.len = f.len.saturating_add(f.skip);
            // The skipped bytes are read too, and dropped: they count.
            asked.limit = f.limit.map(|l| Limit {
                writable: l.writable.saturating_add(f.skip),
                asked: l.asked.saturating_add(f.skip),
            });
        }
        let mut wake = Wakeups::new();
        let res = {
            let mut st = s.lock();
            let op = RecvOp {
                eng: self,
                s,
                st: &mut st,
                f: &asked,
                blocking: w.is_some(),
                wake: &mut wake,
            };
            let r = ops(s.ty).recvmsg(op);
            if let (Err(Errno::EAGAIN), Some(w)) = (&r, w) {
                st.queue.readers().add(w.clone());
            }
            if let (Ok(got), true) = (&r, f.peek) {
                got.rights.iter().for_each(|r| self.hold(r));
            }
            r
        };
        self.finish(wake);
        let mut got = res?;
        if f.peek && f.skip > 0 {
            got.data.drain(..f.skip.min(got.data.len()));
        }
        let passed = got.rights.len() + got.files.len();
        if let Some(room) = f.room {
            let mut room = match got.stamp {
                // SCM_TIMESTAMP* first, as __sock_recv_timestamp before scm_recv.
                Some((_, t)) => udsfs_proto::ioctl::rights_room(
                    room.controllen.saturating_sub(t.space()),
                    got.creds.is_some(),
                ),
                None if got.creds.is_some() => room.with_creds,
                None => room.without_creds,
            };
            let keep = room.min(got.rights.len());
            for r in got.rights.drain(keep..) {
                self.put(&r);
            }
            room -= keep;
            got.files.truncate(room);
        }
        // A fault may have dropped what the message passed (ctrunc).
        got.ctrunc |= match f.deliver_to {
            Some(c) => {
                if f.pid_only {
                    got.pidfd_file = None;
                }
                got.passed = self.deliver_passed(s, &mut got, c);
                got.passed.len() < passed
            }
            None => got.rights.len() + got.files.len() < passed,
        };
        let truncated = got.full_len > got.data.len() && s.ty != SockType::Stream;
        if self.taps.any()
            && !got.pieces.is_empty()
            && self.taps.wants_delivery(truncated, got.ctrunc)
        {
            let reader = self.endpoint(s, s.lock().name.as_deref());
            for p in &got.pieces {
                self.taps.delivered(&Delivered {
                    msg_id: p.msg_id,
                    reader: &reader,
                    origin: p.origin,
                    len: p.len.min(got.data.len()),
                    truncated,
                    ctrunc: got.ctrunc,
                    peek: f.peek,
                });
            }
        }
        Ok(got)
    }

    /// A parked reader of `s` was answered another way (a signal): if it
    /// was the one woken for a message still queued, wake the next one.
    pub fn pass_wakeup(&self, s: &Arc<Socket>) {
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            if !st.queue.msgs().is_empty() {
                wake.extend(st.queue.readers().take_for_one());
            }
        }
        self.finish(wake);
    }

    /// Credentials travel only if someone asked for them: explicit ones,
    /// or the sender's own when either end has SO_PASSCRED or SO_PASSPIDFD
    /// or the receiver is not yet accepted.
    fn creds_for(
        &self,
        explicit: Option<Ucred>,
        sender_passcred: bool,
        other: &Socket,
        caller: &Caller,
    ) -> Option<Ucred> {
        if explicit.is_some() {
            return explicit;
        }
        let wanted = sender_passcred || {
            let ot = other.lock();
            ot.may_passcred() || ot.conn.is_embryo()
        };
        wanted.then(|| caller.scm_creds())
    }

    /// Whether a dgram or seqpacket message of `len` bytes may be sent with
    /// send buffer `sndbuf`, as unix_dgram_sendmsg decides: over sndbuf - 32
    /// is EMSGSIZE; past the largest skb Linux allocates
    /// (`udsfs_proto::record::MAX_DGRAM`) it is ENOBUFS. Nothing is queued
    /// either way.
    fn message_fits(&self, sndbuf: usize, len: usize) -> Result<()> {
        if len > udsfs_proto::skb::message_max(sndbuf) {
            return Err(Errno::EMSGSIZE);
        }
        if len > MAX_DGRAM {
            return Err(Errno::ENOBUFS);
        }
        Ok(())
    }

    /// `message_fits` for a `msg` record of `len` payload bytes to socket
    /// `s`, asked before its payload is all there; a stream takes any.
    pub(crate) fn record_fits(&self, s: &Socket, len: usize) -> Result<()> {
        if s.ty == SockType::Stream {
            return Ok(());
        }
        let sndbuf = s.lock().sndbuf;
        self.message_fits(sndbuf, len)
    }
}

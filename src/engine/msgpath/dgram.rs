//! SOCK_DGRAM (unix_dgram_ops): whole messages to a named or connected
//! peer, the receiver's max_dgram_qlen, and the message send and receive
//! that SOCK_SEQPACKET shares (unix_dgram_sendmsg, unix_dgram_recvmsg).

use std::sync::Arc;

use nix::errno::Errno;

use super::enqueue::Sending;
use super::{ProtoOps, RecvOp, SendOp};
use crate::engine::message::{Piece, Received, SendMsg};
use crate::engine::socket::{Conn, RCV_SHUTDOWN, SEND_SHUTDOWN, SockState, SockType, Socket};
use crate::engine::{Caller, Engine, Result, Ucred, Wakeups};

pub(super) struct Dgram;

impl ProtoOps for Dgram {
    fn sendmsg(&self, op: SendOp<'_>) -> Result<usize> {
        let (eng, tx, msg, caller) = (op.eng, op.tx, op.msg, op.caller);
        let s = tx.sock;
        eng.autobind_if_passcred(s, caller)?;
        let sndbuf = s.lock().sndbuf;
        eng.message_fits(sndbuf, msg.data.len())?;
        let other = match msg.to {
            Some(a) => Some(eng.find(a, SockType::Dgram, s.netns, caller)?),
            None => None,
        };
        message_send(eng, tx, msg, other, caller)
    }

    fn recvmsg(&self, op: RecvOp<'_>) -> Result<Received> {
        message_recv(op)
    }
}

/// The dgram/seqpacket send (unix_dgram_sendmsg). `other` is the target;
/// None means the connected peer.
pub(super) fn message_send(
    eng: &Engine,
    mut tx: Sending<'_>,
    msg: &SendMsg<'_>,
    other: Option<Arc<Socket>>,
    caller: &Caller,
) -> Result<usize> {
    let s = tx.sock;
    let data = msg.data;
    let (other, from, sender_passcred) = {
        let mut st = s.lock();
        eng.message_fits(st.sndbuf, data.len())?;
        if let Some(e) = st.err.take() {
            return Err(e);
        }
        if st.shutdown & SEND_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        if s.wmem() >= st.sndbuf {
            // SOCKWQ_ASYNC_NOSPACE: the room that comes back sends SIGIO.
            st.nospace = true;
            if let Some(w) = tx.w {
                st.queue.writers().add(w.clone());
            }
            return Err(Errno::EAGAIN);
        }
        let other = match other {
            Some(o) => o,
            None => Socket::peer(&st).cloned().ok_or(Errno::ENOTCONN)?,
        };
        (other, st.name.clone(), st.may_passcred())
    };
    tx.creds = eng.creds_for(msg.creds, sender_passcred, &other, caller);
    tx.pidfd = eng.sender_pidfd(tx.creds, &other)?;
    tx.from = from;
    let mut wake = Wakeups::new();
    let sent = {
        let mut ot = if other.id == s.id {
            None
        } else {
            Some(other.lock())
        };
        let dead = ot
            .as_ref()
            .is_some_and(|o| o.conn.is_closed() && !o.queue.closing_late());
        if dead {
            drop(ot);
            return Err(peer_died(eng, s, &other));
        }
        let mut own = None;
        let ot_ref: &mut SockState = match &mut ot {
            Some(g) => g,
            None => &mut *own.insert(s.lock()),
        };
        let other_peer_is_us = Socket::peer(ot_ref).map(|p| p.id == s.id);
        if other_peer_is_us == Some(false) {
            return Err(Errno::EPERM);
        }
        if ot_ref.shutdown & RCV_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        if s.ty == SockType::Dgram && other_peer_is_us != Some(true) && ot_ref.queue.full() {
            if let Some(w) = tx.w {
                ot_ref.queue.writers().add(w.clone());
            }
            return Err(Errno::EAGAIN);
        }
        eng.enqueue(&mut tx, &other, ot_ref, data, false, &mut wake)?
    };
    eng.finish(wake);
    Ok(sent)
}

/// A send found its target dead: a dgram socket connected to it is
/// disconnected (ECONNREFUSED, later sends ENOTCONN); seqpacket sees EPIPE.
fn peer_died(eng: &Engine, s: &Arc<Socket>, other: &Arc<Socket>) -> Errno {
    if s.ty == SockType::Seqpacket {
        return Errno::EPIPE;
    }
    let mut wake = Wakeups::new();
    {
        let mut st = s.lock();
        if Socket::peer(&st).is_some_and(|p| p.id == other.id) {
            st.conn = Conn::Unconnected {
                cred: st.conn.kept_cred(),
            };
            eng.dgram_disconnected(s.id, &mut st, &mut wake);
        }
    }
    eng.finish(wake);
    Errno::ECONNREFUSED
}

/// The dgram/seqpacket receive (unix_dgram_recvmsg), peek or not.
pub(super) fn message_recv(op: RecvOp<'_>) -> Result<Received> {
    let (eng, s, st, f) = (op.eng, op.s, op.st, op.f);
    let (blocking, wake) = (op.blocking, op.wake);
    if f.oob {
        return Err(Errno::EOPNOTSUPP);
    }
    if s.ty == SockType::Seqpacket && !st.conn.is_connected() {
        return Err(Errno::ENOTCONN);
    }
    if let Some(e) = st.err.take() {
        return Err(e);
    }
    if f.peek {
        return message_peek(s, st, f.len);
    }
    if let (Some(reserve), Some(m)) = (f.reserve, st.queue.msgs().front())
        && !reserve(m.data.len().min(f.len))
    {
        return Err(Errno::ENOMEM);
    }
    let Some(mut m) = st.queue.pop() else {
        // A shut-down seqpacket reads EOF; a dgram reader only once it
        // would wait (__skb_wait_for_more_packets), never when non-blocking.
        if st.shutdown & RCV_SHUTDOWN != 0 && (s.ty == SockType::Seqpacket || blocking) {
            return Ok(Received::default());
        }
        return Err(Errno::EAGAIN);
    };
    wake.extend(st.queue.writers().take());
    eng.uncharge(&m, wake);
    let (rights, nonblock) = eng.take_rights(s.id, &mut m);
    let files = eng.take_files(&mut m);
    let full_len = m.data.len();
    let t = s.options.tstamp();
    let stamp = super::read_stamp(t, &mut m.stamp).map(|ns| (ns, t));
    let mut data = m.data;
    data.truncate(f.len);
    let mut pieces = Vec::new();
    if m.msg_id != 0 {
        pieces.push(Piece {
            msg_id: m.msg_id,
            origin: m.origin,
            len: data.len(),
        });
    }
    Ok(Received {
        data,
        full_len,
        from: m.from,
        creds: st.passcred.then(|| m.creds.unwrap_or(Ucred::NONE)),
        pidfd: st.passpidfd.then(|| m.creds.unwrap_or(Ucred::NONE).pid),
        pidfd_file: m.pidfd.take().filter(|_| st.passpidfd),
        rights,
        nonblock,
        files,
        pieces,
        ctrunc: m.ctrunc,
        stamp,
        ..Default::default()
    })
}

/// A dgram or seqpacket peek (unix_dgram_recvmsg with MSG_PEEK): the peek
/// offset skips whole messages, then starts inside the one it reaches.
/// Passed sockets come with it (`recvmsg` takes references for them);
/// other passed files do not.
fn message_peek(s: &Socket, st: &mut SockState, maxlen: usize) -> Result<Received> {
    let ty = s.ty;
    let mut skip = st.queue.peek_off().max(0) as usize;
    let Some(at) = st.queue.msgs().iter().position(|m| {
        if skip > 0 && skip >= m.data.len() {
            skip -= m.data.len();
            return false;
        }
        true
    }) else {
        if st.queue.msgs().is_empty()
            && ty == SockType::Seqpacket
            && st.shutdown & RCV_SHUTDOWN != 0
        {
            return Ok(Received::default());
        }
        return Err(Errno::EAGAIN);
    };
    let t = s.options.tstamp();
    let stamp = st
        .queue
        .get_mut(at)
        .and_then(|m| super::read_stamp(t, &mut m.stamp))
        .map(|ns| (ns, t));
    let m = &st.queue.msgs()[at];
    let full_len = m.data.len() - skip;
    let data = m.data[skip..skip + full_len.min(maxlen)].to_vec();
    let creds = m.creds.unwrap_or(Ucred::NONE);
    let mut got = Received {
        full_len,
        from: m.from.clone(),
        creds: st.passcred.then_some(creds),
        pidfd: st.passpidfd.then_some(creds.pid),
        // The pin, shared: the message keeps its own.
        pidfd_file: m.pidfd.clone().filter(|_| st.passpidfd),
        rights: m.rights.iter().map(|(r, _)| r.clone()).collect(),
        nonblock: m.rights.iter().map(|(_, nb)| *nb).collect(),
        stamp,
        ..Default::default()
    };
    if m.msg_id != 0 {
        got.pieces.push(Piece {
            msg_id: m.msg_id,
            origin: m.origin,
            len: data.len(),
        });
    }
    got.data = data;
    st.queue.peek_off_forward(got.data.len());
    Ok(got)
}

//! SOCK_STREAM (unix_stream_ops): sends cut into chunks at the peer, the
//! out-of-band byte, reads as unix_stream_read_generic (stream_read.rs).

use nix::errno::Errno;

use super::enqueue::Sending;
use super::{ProtoOps, RecvOp, SendOp};
use crate::engine::message::{Piece, Received};
use crate::engine::skb::{stream_chunk_max, stream_truesize};
use crate::engine::socket::{Conn, RCV_SHUTDOWN, SEND_SHUTDOWN, SockState, Socket};
use crate::engine::{Engine, Result, Wakeups};

pub(super) struct Stream;

impl ProtoOps for Stream {
    /// unix_stream_sendmsg; with `oob` the last byte goes in a chunk of its
    /// own, the receiver's OOB byte (queue_oob), and the send never waits.
    fn sendmsg(&self, op: SendOp<'_>) -> Result<usize> {
        let (eng, mut tx, msg, caller) = (op.eng, op.tx, op.msg, op.caller);
        let s = tx.sock;
        if msg.oob {
            tx.w = None;
        }
        let w = tx.w;
        let (peer, sndbuf, from, sender_passcred) = {
            let mut st = s.lock();
            if msg.to.is_some() {
                return Err(match st.conn {
                    Conn::Connected { .. } => Errno::EISCONN,
                    _ => Errno::EOPNOTSUPP,
                });
            }
            let peer = Socket::peer(&st).cloned().ok_or(Errno::ENOTCONN)?;
            // A writer that already waited for room (here, or in a lane's
            // ring: `resumed`) is inside sock_alloc_send_pskb, which reports
            // a pending error (a reader that closed with data unread:
            // ECONNRESET) before the shutdown.
            if (w.is_some() || msg.resumed)
                && let Some(e) = st.err.take()
            {
                return Err(e);
            }
            if st.shutdown & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            (peer, st.sndbuf, st.name.clone(), st.may_passcred())
        };
        let (data, oob_byte) = match msg.data.split_last() {
            Some((last, body)) if msg.oob => (body, Some(*last)),
            _ if msg.oob => return Err(Errno::EOPNOTSUPP),
            _ => (msg.data, None),
        };
        if data.is_empty() && oob_byte.is_none() {
            return Ok(0);
        }
        tx.creds = eng.creds_for(msg.creds, sender_passcred, &peer, caller);
        tx.pidfd = eng.sender_pidfd(tx.creds, &peer)?;
        tx.from = from;
        // unix_stream_sendmsg: at most half the send buffer per skb, and at
        // most one page of head plus 32 KiB of fragments. The call's skbs
        // are cut from its start (`call_off`), whatever ioctls carry it.
        let max_chunk = stream_chunk_max(sndbuf);
        let mut sent = 0;
        let mut wake = Wakeups::new();
        while sent < data.len() {
            let at = (msg.call_off + sent) % max_chunk;
            {
                let mut st = s.lock();
                // A new skb waits for room (sock_alloc_send_pskb); the rest
                // of one an earlier ioctl began was allocated then, so only
                // a claim past what one skb can hold is refused.
                let full = match at {
                    0 => s.wmem() >= st.sndbuf,
                    _ => s.wmem() >= st.sndbuf + stream_truesize(max_chunk),
                };
                if full {
                    // SOCKWQ_ASYNC_NOSPACE: the room that comes back sends SIGIO.
                    st.nospace = true;
                    if sent == 0 {
                        if let Some(w) = w {
                            st.queue.writers().add(w.clone());
                        }
                        drop(st);
                        eng.finish(wake);
                        return Err(Errno::EAGAIN);
                    }
                    break;
                }
            }
            let n = (data.len() - sent).min(max_chunk - at);
            tx.chunk_at = at;
            let mut pt = peer.lock();
            let queued = if gone(&pt) || pt.shutdown & RCV_SHUTDOWN != 0 {
                Err(Errno::EPIPE)
            } else {
                // Passed sockets travel with the first chunk.
                tx.sent = sent;
                eng.enqueue(
                    &mut tx,
                    &peer,
                    &mut pt,
                    &data[sent..sent + n],
                    false,
                    &mut wake,
                )
            };
            drop(pt);
            match queued {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        break;
                    }
                }
                Err(e) => {
                    eng.finish(wake);
                    return if sent > 0 { Ok(sent) } else { Err(e) };
                }
            }
        }
        if let Some(b) = oob_byte.filter(|_| sent == data.len()) {
            match queue_oob(eng, &mut tx, &peer, b, &mut wake) {
                Ok(()) => sent += 1,
                Err(e) if sent == 0 => {
                    eng.finish(wake);
                    return Err(e);
                }
                Err(_) => {}
            }
        }
        eng.finish(wake);
        Ok(sent)
    }

    fn recvmsg(&self, op: RecvOp<'_>) -> Result<Received> {
        if op.f.oob {
            return recv_oob(op.st, op.f.peek);
        }
        op.eng.stream_read(op.s.id, op.st, op.f, op.wake)
    }
}

/// queue_oob: the byte is queued as a chunk of its own and becomes the
/// peer's OOB byte; its owner gets SIGURG before the send returns.
fn queue_oob(
    eng: &Engine,
    tx: &mut Sending<'_>,
    peer: &std::sync::Arc<Socket>,
    byte: u8,
    wake: &mut Wakeups,
) -> Result<()> {
    let owner = {
        let mut pt = peer.lock();
        if gone(&pt) || pt.shutdown & RCV_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        tx.chunk_at = 0;
        eng.enqueue(tx, peer, &mut pt, &[byte], true, wake)?;
        pt.urg_owner
    };
    if let Some(o) = owner {
        o.signal();
    }
    Ok(())
}

/// recv(MSG_OOB): the OOB byte; EINVAL when there is none or SO_OOBINLINE
/// is on. Taking it leaves an empty chunk at its place, which keeps the
/// mark (SIOCATMARK) and stops the next read there.
fn recv_oob(st: &mut SockState, peek: bool) -> Result<Received> {
    if !st.conn.is_connected() || st.oob_inline {
        return Err(Errno::EINVAL);
    }
    let i = st.queue.oob_position().ok_or(Errno::EINVAL)?;
    let m = &st.queue.msgs()[i];
    let byte = m.data[m.off];
    let mut got = Received {
        data: vec![byte],
        full_len: 1,
        ..Default::default()
    };
    if m.msg_id != 0 {
        got.pieces.push(Piece {
            msg_id: m.msg_id,
            origin: m.origin,
            len: 1,
        });
    }
    if !peek {
        st.queue.take_oob(i);
    }
    Ok(got)
}

/// The peer closed, and its close is not coming late (slow_close).
fn gone(pt: &SockState) -> bool {
    pt.conn.is_closed() && !pt.queue.closing_late()
}

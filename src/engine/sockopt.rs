//! What getsockname, getpeername, getsockopt and the queue ioctls read from a
//! socket, and the few options setsockopt may change.

use std::sync::Arc;

use nix::errno::Errno;

use super::socket::{Conn, Socket};
use super::{Addr, Engine, Received, Result, SockType, Ucred};

/// One socket's options and queue figures, read under one lock.
#[derive(Clone, Copy, Debug)]
pub struct SockInfo {
    pub ty: SockType,
    pub listening: bool,
    pub passcred: bool,
    pub passpidfd: bool,
    pub peercred: Option<Ucred>,
    pub sndbuf: usize,
    /// SIOCINQ: unread bytes (stream, seqpacket) or the next message's size
    /// (dgram); None on a listener (EINVAL, as unix_inq_len).
    pub inq: Option<usize>,
    /// SIOCOUTQ: bytes this socket has queued at receivers (sk_wmem_alloc).
    pub outq: usize,
}

/// net.core.wmem_max, which caps SO_SNDBUF for unprivileged callers.
fn wmem_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(212992)
}

/// SOCK_MIN_SNDBUF: 2 * (2048 + sizeof(struct sk_buff) rounded), as Linux.
const MIN_SNDBUF: usize = 4608;

impl Engine {
    /// getsockname(): the bound address, None when unnamed.
    pub fn local_addr(&self, s: &Arc<Socket>) -> Option<Addr> {
        s.lock().name.as_ref().map(|n| n.addr.clone())
    }

    /// getpeername(): the peer's current address (None when it is unnamed);
    /// ENOTCONN without a peer.
    pub fn peer_addr(&self, s: &Arc<Socket>) -> Result<Option<Addr>> {
        let peer = Socket::peer(&s.lock()).cloned().ok_or(Errno::ENOTCONN)?;
        let addr = peer.lock().name.as_ref().map(|n| n.addr.clone());
        Ok(addr)
    }

    pub fn info(&self, s: &Arc<Socket>) -> SockInfo {
        let st = s.lock();
        let listening = matches!(st.conn, Conn::Listening { .. });
        let inq = if listening {
            None
        } else if s.ty == SockType::Dgram {
            Some(st.rcvq.front().map_or(0, |m| m.remaining()))
        } else {
            Some(st.rcvq_bytes)
        };
        SockInfo {
            ty: s.ty,
            listening,
            passcred: st.passcred,
            passpidfd: st.passpidfd,
            peercred: st.peercred,
            sndbuf: st.sndbuf,
            inq,
            outq: s.wmem(),
        }
    }

    /// SO_ERROR: the pending error, cleared by reading it.
    pub fn take_error(&self, s: &Arc<Socket>) -> Option<Errno> {
        s.lock().err.take()
    }

    /// SO_SNDBUF: Linux doubles the value (room for its bookkeeping) and
    /// clamps it to [SOCK_MIN_SNDBUF, 2 * wmem_max] (root may pass wmem_max
    /// with SO_SNDBUFFORCE only, which is not offered here).
    pub fn set_sndbuf(&self, s: &Arc<Socket>, val: i64) {
        let cap = wmem_max() as i64;
        let v = (val.clamp(0, cap) as usize * 2).max(MIN_SNDBUF);
        s.lock().sndbuf = v;
    }

    /// The length of the next whole message, for a receiver that must know
    /// whether it fits before taking it (dgram, seqpacket).
    pub fn next_message_len(&self, s: &Arc<Socket>) -> Option<usize> {
        if s.ty == SockType::Stream {
            return None;
        }
        s.lock().rcvq.front().map(|m| m.data.len())
    }

    /// MSG_PEEK: what a receive would return, left in the queue (no passed
    /// sockets: Linux gives them with a peek too, but udsfs would have to
    /// duplicate in-flight references; see README).
    pub fn peek(&self, s: &Arc<Socket>, maxlen: usize) -> Result<Received> {
        let mut st = s.lock();
        if let Some(e) = st.err
            && (s.ty != SockType::Stream || st.rcvq.is_empty())
        {
            st.err = None;
            return Err(e);
        }
        let Some(first) = st.rcvq.front() else {
            let eof = st.shutdown & super::socket::RCV_SHUTDOWN != 0;
            return match s.ty {
                SockType::Stream if !matches!(st.conn, Conn::Connected(_)) => Err(Errno::EINVAL),
                SockType::Dgram => Err(Errno::EAGAIN),
                _ if eof => Ok(Received::default()),
                _ => Err(Errno::EAGAIN),
            };
        };
        let creds = st.passcred.then(|| first.creds.unwrap_or(Ucred::NONE));
        let pidfd = st.passpidfd.then(|| first.creds.unwrap_or(Ucred::NONE).pid);
        let from = first.from.clone();
        let mut data = Vec::new();
        let full_len;
        if s.ty == SockType::Stream {
            for m in st.rcvq.iter() {
                if data.len() >= maxlen || (st.may_passcred() && m.creds != first.creds) {
                    break;
                }
                let n = (maxlen - data.len()).min(m.remaining());
                data.extend_from_slice(&m.data[m.off..m.off + n]);
                if !m.rights.is_empty() || !m.files.is_empty() {
                    break;
                }
            }
            full_len = data.len();
        } else {
            full_len = first.data.len();
            data.extend_from_slice(&first.data[..full_len.min(maxlen)]);
        }
        Ok(Received {
            data,
            full_len,
            from,
            creds,
            pidfd,
            ..Default::default()
        })
    }
}

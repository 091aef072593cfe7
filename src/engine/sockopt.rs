//! What getsockname, getpeername, getsockopt and the queue ioctls read from a
//! socket, and the few options setsockopt may change.

use std::sync::Arc;

use nix::errno::Errno;

#[cfg(test)]
use super::Buf;
use super::socket::{BoundName, Conn, Socket};
use udsfs_proto::ioctl::Info;

use super::{Engine, Result, SockType};

impl Engine {
    /// getsockname(): the bound address, None when unnamed.
    pub fn local_name(&self, s: &Arc<Socket>) -> Option<Arc<BoundName>> {
        s.lock().name.clone()
    }

    /// getpeername(): the peer's current address (None when it is unnamed);
    /// ENOTCONN without a peer.
    pub fn peer_name(&self, s: &Arc<Socket>) -> Result<Option<Arc<BoundName>>> {
        let peer = Socket::peer(&s.lock()).cloned().ok_or(Errno::ENOTCONN)?;
        let name = peer.lock().name.clone();
        Ok(name)
    }

    /// What getsockopt and the queue ioctls report (`Op::Info`), read under
    /// one lock. SIOCINQ (`inq`): unread bytes (stream, seqpacket) or the
    /// next message's size (dgram), None on a listener (EINVAL, as
    /// unix_inq_len); SIOCOUTQ (`outq`): bytes this socket has queued at
    /// receivers (sk_wmem_alloc). `peer` is as the daemon sees it: the
    /// reader's view of it is src/fuse/ioctl.rs's to make.
    pub fn info(&self, s: &Arc<Socket>) -> Info {
        let st = s.lock();
        let listening = matches!(st.conn, Conn::Listening { .. });
        let inq = if listening {
            None
        } else if s.ty == SockType::Dgram {
            Some(st.queue.msgs().front().map_or(0, |m| m.remaining()))
        } else {
            Some(st.queue.bytes())
        };
        Info {
            ty: s.ty.number() as i32,
            listening,
            passcred: st.passcred,
            passpidfd: st.passpidfd,
            peer: st.conn.cred().map(|c| c.cred),
            sndbuf: st.sndbuf as i64,
            rcvbuf: st.rcvbuf as i64,
            inq: inq.map(|n| n as i64),
            outq: s.wmem() as i64,
            id: s.id,
        }
    }

    pub fn set_passpidfd(&self, s: &Arc<Socket>, on: bool) {
        s.lock().passpidfd = on;
    }

    pub fn set_passcred(&self, s: &Arc<Socket>, on: bool) {
        s.lock().passcred = on;
    }

    /// SO_PEEK_OFF: any negative value turns it off (and reads back as given).
    pub fn set_peek_off(&self, s: &Arc<Socket>, off: i32) {
        s.lock().queue.set_peek_off(off);
    }

    /// SO_ERROR: the pending error, cleared by reading it.
    pub fn take_error(&self, s: &Arc<Socket>) -> Option<Errno> {
        s.lock().err.take()
    }

    /// Leaves error `errno` pending, as recvmmsg does with one that came
    /// after datagrams (it returns their count). EINVAL for a number that
    /// names no errno (0 included).
    pub fn set_error(&self, s: &Arc<Socket>, errno: i32) -> Result<()> {
        let e = Errno::from_raw(errno);
        if errno <= 0 || e == Errno::UnknownErrno {
            return Err(Errno::EINVAL);
        }
        s.lock().err = Some(e);
        Ok(())
    }

    /// The length of the next whole message, for a receiver that must know
    /// whether it fits before taking it (dgram, seqpacket).
    pub fn next_message_len(&self, s: &Arc<Socket>) -> Option<usize> {
        if s.ty == SockType::Stream {
            return None;
        }
        s.lock().queue.msgs().front().map(|m| m.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{engine, root, root_pair};
    use super::*;
    use crate::engine::Addr;
    use crate::engine::{RecvFlags, SendMsg};

    #[test]
    fn queue_figures_follow_unix_inq_len() {
        let (e, c, a, b) = root_pair(SockType::Dgram);
        e.sendmsg(&a, SendMsg::new(b"12345"), &c, None).unwrap();
        e.sendmsg(&a, SendMsg::new(b"123"), &c, None).unwrap();
        // dgram: the next message only; the sender's queued bytes are charged.
        assert_eq!(e.info(&b).inq, Some(5));
        assert!(e.info(&a).outq > 0);
        assert_eq!(e.next_message_len(&b), Some(5));
        let (s, t) = e.socketpair(SockType::Stream, &c);
        e.sendmsg(&s, SendMsg::new(b"12345"), &c, None).unwrap();
        e.sendmsg(&s, SendMsg::new(b"123"), &c, None).unwrap();
        // stream: every unread byte.
        assert_eq!(e.info(&t).inq, Some(8));
        assert_eq!(e.next_message_len(&t), None);
        let l = e.socket(SockType::Stream, &c);
        e.bind(&l, &Addr::Abstract(b"inq-listener".to_vec()), &c)
            .unwrap();
        e.listen(&l, 1, &c).unwrap();
        let i = e.info(&l);
        assert!(i.listening);
        assert_eq!(i.inq, None, "a listener has no SIOCINQ (EINVAL)");
    }

    #[test]
    fn peek_leaves_the_queue_alone() {
        let (e, c, a, b) = root_pair(SockType::Stream);
        assert_eq!(
            e.recvmsg(&b, RecvFlags::peek(10), None).unwrap_err(),
            Errno::EAGAIN
        );
        e.sendmsg(&a, SendMsg::new(b"abc"), &c, None).unwrap();
        e.sendmsg(&a, SendMsg::new(b"def"), &c, None).unwrap();
        assert_eq!(
            e.recvmsg(&b, RecvFlags::peek(4), None).unwrap().data,
            b"abcd"
        );
        assert_eq!(
            e.recvmsg(&b, RecvFlags::peek(10), None).unwrap().data,
            b"abcdef"
        );
        assert_eq!(
            e.recvmsg(&b, RecvFlags::new(10), None).unwrap().data,
            b"abcdef"
        );
        let (d, f) = e.socketpair(SockType::Dgram, &c);
        e.sendmsg(&d, SendMsg::new(b"0123456789"), &c, None)
            .unwrap();
        let p = e.recvmsg(&f, RecvFlags::peek(4), None).unwrap();
        assert_eq!((p.data.as_slice(), p.full_len), (&b"0123"[..], 10));
        assert_eq!(
            e.recvmsg(&f, RecvFlags::new(100), None).unwrap().data,
            b"0123456789"
        );
    }

    #[test]
    fn messages_are_stamped_at_send_or_first_read_as_linux() {
        use udsfs_proto::sockopt::SO_TIMESTAMP_OLD;
        for ty in [SockType::Dgram, SockType::Seqpacket, SockType::Stream] {
            let (e, c, a, b) = root_pair(ty);
            e.sendmsg(&a, SendMsg::new(b"early"), &c, None).unwrap();
            let queued = crate::engine::msgpath::stamp_now();
            b.options.set(SO_TIMESTAMP_OLD, 1, 0).unwrap();
            let before = crate::engine::msgpath::stamp_now();
            e.sendmsg(&a, SendMsg::new(b"late"), &c, None).unwrap();
            let after = crate::engine::msgpath::stamp_now();
            let peek = e.recvmsg(&b, RecvFlags::peek(10), None).unwrap().stamp;
            let first = e.recvmsg(&b, RecvFlags::new(5), None).unwrap().stamp;
            let second = e.recvmsg(&b, RecvFlags::new(10), None).unwrap().stamp;
            println!("{ty:?}: queued at {queued}, peek {peek:?}, read {first:?}, then {second:?}");
            if ty == SockType::Stream {
                assert!(peek.is_none() && first.is_none() && second.is_none());
                continue;
            }
            let (p, f, s) = (peek.unwrap().0, first.unwrap().0, second.unwrap().0);
            assert_eq!(p, f, "the peek stamped it, the read reports the same");
            assert!(
                f > queued,
                "queued before the option: stamped when first read"
            );
            assert!((before..=after).contains(&s), "stamped at send");
            b.options.set(SO_TIMESTAMP_OLD, 0, 0).unwrap();
            e.sendmsg(&a, SendMsg::new(b"off"), &c, None).unwrap();
            assert!(
                e.recvmsg(&b, RecvFlags::new(10), None)
                    .unwrap()
                    .stamp
                    .is_none()
            );
        }
    }

    #[test]
    fn a_pending_error_comes_before_the_queue_once() {
        let (e, c, a, b) = root_pair(SockType::Dgram);
        e.sendmsg(&a, SendMsg::new(b"q"), &c, None).unwrap();
        for bad in [0, -14, 512, 4096] {
            assert_eq!(e.set_error(&b, bad), Err(Errno::EINVAL), "{bad}");
        }
        e.set_error(&b, libc::EFAULT).unwrap();
        // As __skb_try_recv_datagram: the error first, then the datagram.
        assert_eq!(
            e.recvmsg(&b, RecvFlags::new(10), None).unwrap_err(),
            Errno::EFAULT
        );
        assert_eq!(e.recvmsg(&b, RecvFlags::new(10), None).unwrap().data, b"q");
        e.set_error(&b, libc::EINTR).unwrap();
        assert_eq!(e.take_error(&b), Some(Errno::EINTR));
        assert_eq!(e.take_error(&b), None);
    }

    #[test]
    fn names_options_and_errors() {
        let e = engine();
        let c = root();
        let s = e.socket(SockType::Dgram, &c);
        assert!(e.local_name(&s).is_none());
        assert_eq!(e.peer_name(&s).unwrap_err(), Errno::ENOTCONN);
        e.bind(&s, &Addr::Abstract(b"opt".to_vec()), &c).unwrap();
        assert_eq!(
            e.local_name(&s).map(|n| n.addr.clone()),
            Some(Addr::Abstract(b"opt".to_vec()))
        );
        let (a, b) = e.socketpair(SockType::Stream, &c);
        assert!(e.peer_name(&a).unwrap().is_none(), "an unnamed peer");
        assert_eq!(e.info(&b).peer.map(|p| p.pid), Some(1));
        e.set_buffer(&a, Buf::Send, 65536, false, &c).unwrap();
        assert_eq!(e.info(&a).sndbuf, 131072);
        e.set_buffer(&a, Buf::Recv, 1, false, &c).unwrap();
        assert_eq!(e.info(&a).rcvbuf, 2304);
        assert_eq!(e.take_error(&a), None);
    }
}

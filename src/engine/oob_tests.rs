//! In-process tests of MSG_OOB, SIOCATMARK, SO_OOBINLINE and SO_PEEK_OFF:
//! the kernel's answers (measured on 6.18, and the msg_oob selftest's
//! expectations) without FUSE.

use std::sync::Arc;

use nix::errno::Errno;

use super::socket::pollbits;
use super::tests::root_pair;
use super::*;

fn oob(e: &Engine, c: &Caller, s: &Arc<Socket>, data: &[u8]) -> Result<usize> {
    e.sendmsg(s, SendMsg::new(data).oob(), c, None)
}

fn read(e: &Engine, s: &Arc<Socket>, n: usize) -> Result<Vec<u8>> {
    e.recvmsg(s, RecvFlags::new(n), None).map(|r| r.data)
}

fn peek(e: &Engine, s: &Arc<Socket>, n: usize) -> Result<Vec<u8>> {
    e.recvmsg(s, RecvFlags::peek(n), None).map(|r| r.data)
}

fn recv_oob(e: &Engine, s: &Arc<Socket>, peek: bool) -> Result<u8> {
    let f = RecvFlags {
        oob: true,
        peek,
        ..RecvFlags::new(1)
    };
    e.recvmsg(s, f, None).map(|r| r.data[0])
}

fn pri(e: &Engine, s: &Arc<Socket>) -> bool {
    e.poll(s, None) & pollbits::PRI != 0
}

#[test]
fn a_read_stops_before_the_oob_byte_and_the_mark_follows() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    assert_eq!(oob(&e, &c, &a, b"hello"), Ok(5));
    e.sendmsg(&a, SendMsg::new(b"world"), &c, None).unwrap();
    assert!(pri(&e, &b));
    assert_eq!(e.at_oob_mark(&b), Ok(false));
    assert_eq!(peek(&e, &b, 10).unwrap(), b"hell");
    assert_eq!(read(&e, &b, 10).unwrap(), b"hell");
    assert_eq!(e.at_oob_mark(&b), Ok(true));
    assert_eq!(recv_oob(&e, &b, true), Ok(b'o'));
    assert_eq!(recv_oob(&e, &b, false), Ok(b'o'));
    assert!(!pri(&e, &b));
    assert_eq!(recv_oob(&e, &b, false), Err(Errno::EINVAL));
    // The taken OOB byte still marks its place.
    assert_eq!(e.at_oob_mark(&b), Ok(true));
    assert_eq!(read(&e, &b, 10).unwrap(), b"world");
    assert_eq!(e.info(&b).inq, Some(0));
}

#[test]
fn an_unread_oob_byte_is_dropped_by_a_read_unless_inline() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    oob(&e, &c, &a, b"x").unwrap();
    assert_eq!(read(&e, &b, 1), Err(Errno::EAGAIN));
    assert_eq!(recv_oob(&e, &b, false), Err(Errno::EINVAL));
    assert_eq!(e.info(&b).inq, Some(0));
    e.set_oob_inline(&b, true);
    oob(&e, &c, &a, b"y").unwrap();
    assert_eq!(recv_oob(&e, &b, false), Err(Errno::EINVAL));
    assert!(pri(&e, &b));
    assert_eq!(read(&e, &b, 5).unwrap(), b"y");
    assert!(!pri(&e, &b));
}

#[test]
fn a_second_oob_byte_makes_the_first_ordinary_data() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    oob(&e, &c, &a, b"hello").unwrap();
    oob(&e, &c, &a, b"wor").unwrap();
    e.sendmsg(&a, SendMsg::new(b"ld"), &c, None).unwrap();
    assert_eq!(read(&e, &b, 10).unwrap(), b"hellowo");
    assert_eq!(e.at_oob_mark(&b), Ok(true));
    assert_eq!(recv_oob(&e, &b, false), Ok(b'r'));
    assert_eq!(read(&e, &b, 10).unwrap(), b"ld");
}

#[test]
fn oob_is_refused_where_linux_refuses_it() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    assert_eq!(oob(&e, &c, &a, b""), Err(Errno::EOPNOTSUPP));
    assert_eq!(recv_oob(&e, &b, false), Err(Errno::EINVAL));
    for ty in [SockType::Dgram, SockType::Seqpacket] {
        let (e, c, a, b) = root_pair(ty);
        assert_eq!(oob(&e, &c, &a, b"ab"), Err(Errno::EOPNOTSUPP));
        assert_eq!(recv_oob(&e, &b, false), Err(Errno::EOPNOTSUPP));
        assert_eq!(e.at_oob_mark(&b), Err(Errno::EOPNOTSUPP));
    }
}

/// The reader of a `ty` pair, with peek offset `off` and "abc" and "defg"
/// queued.
fn abc_defg_queued(ty: SockType, off: i32) -> (Arc<Engine>, Arc<Socket>) {
    let (e, c, a, b) = root_pair(ty);
    e.set_peek_off(&b, off);
    e.sendmsg(&a, SendMsg::new(b"abc"), &c, None).unwrap();
    e.sendmsg(&a, SendMsg::new(b"defg"), &c, None).unwrap();
    (e, b)
}

#[test]
fn the_peek_offset_moves_with_peeks_and_reads() {
    let (e, b) = abc_defg_queued(SockType::Stream, 0);
    assert_eq!(peek(&e, &b, 2).unwrap(), b"ab");
    assert_eq!(peek(&e, &b, 2).unwrap(), b"cd");
    assert_eq!(read(&e, &b, 3).unwrap(), b"abc");
    assert_eq!(e.oob_options(&b).1, 1);
    assert_eq!(peek(&e, &b, 10).unwrap(), b"efg");
    assert_eq!(peek(&e, &b, 10), Err(Errno::EAGAIN));
    assert_eq!(read(&e, &b, 10).unwrap(), b"defg");
    assert_eq!(e.oob_options(&b).1, 0);
}

#[test]
fn a_dgram_peek_offset_skips_whole_messages() {
    let (e, b) = abc_defg_queued(SockType::Dgram, 2);
    let r = e.recvmsg(&b, RecvFlags::peek(10), None).unwrap();
    assert_eq!((r.data.as_slice(), r.full_len), (&b"c"[..], 1));
    assert_eq!(peek(&e, &b, 10).unwrap(), b"defg");
    assert_eq!(read(&e, &b, 10).unwrap(), b"abc");
    assert_eq!(e.oob_options(&b).1, 4);
    e.set_peek_off(&b, -5);
    assert_eq!(peek(&e, &b, 10).unwrap(), b"defg");
    assert_eq!(e.oob_options(&b).1, -5);
}

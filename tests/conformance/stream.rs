//! SOCK_STREAM and SOCK_SEQPACKET scenarios: listen/accept and the
//! backlog, connect errors, the stream data path (coalescing, partial reads, EOF,
//! EPIPE, ECONNRESET, shutdown mirroring, backpressure), seqpacket records, poll
//! masks and socketpairs.
//!
//! udsfs raises SIGPIPE in the writing thread on a stream EPIPE, as the kernel does
//! without MSG_NOSIGNAL; every scenario that can hit EPIPE first makes sure SIGPIPE
//! is ignored in this process (the kernel side sends with MSG_NOSIGNAL).

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// Set SIGPIPE to SIG_IGN process-wide (the Rust runtime normally does this already).
pub fn ignore_sigpipe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: installs SIG_IGN; no handler code runs.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    });
}

/// A listener `l.sock`, a client connected to it and the accepted end:
/// (listener, client, server).
fn conn(b: &mut dyn Backend, ty: Ty) -> (Sock, Sock, Sock) {
    ignore_sigpipe();
    b.connection(ty, p("l.sock"))
}

/// Non-blocking sends of `chunk` bytes until the first error (at most `cap` sends),
/// recorded as one line: the number of sends that succeeded, the bytes they took,
/// and the error that stopped them.
fn send_until_error(b: &mut dyn Backend, s: Sock, chunk: usize, cap: usize) {
    let (took, stop) = b.sends_until_error(s, &pattern(chunk), cap);
    let n = took.len();
    let bytes: usize = took.iter().sum();
    let short = took.iter().filter(|&&k| k != chunk).count();
    let end = match stop {
        Stop::Cap => format!("no error after {cap} sends"),
        stop => format!("then {stop}"),
    };
    b.trace().push(
        format!("send(s{s}, {chunk} bytes) repeatedly"),
        format!("ok {n} sends, {bytes} bytes, {short} short, {end}"),
    );
}

/// Non-blocking receives of up to `bufsize` bytes until the first error or EOF,
/// recorded as one line: how many receives returned data, the bytes, and what
/// stopped them.
fn recv_until_empty(b: &mut dyn Backend, s: Sock, bufsize: usize, cap: usize) {
    let (got, stop) = b.recvs_until_empty(s, bufsize, cap);
    let data: Vec<usize> = got.iter().map(Vec::len).filter(|&n| n > 0).collect();
    let bytes: usize = data.iter().sum();
    let end = match stop {
        Stop::Cap => format!("no end after {cap} receives"),
        stop => format!("then {stop}"),
    };
    b.trace().push(
        format!("recv(s{s}, {bufsize}) repeatedly"),
        format!("ok {} receives, {bytes} bytes, {end}", data.len()),
    );
}

// ---------------------------------------------------------------- listen / accept

/// accept returns a new connected socket; names on both ends; data both ways.
pub fn listen_accept_basic(b: &mut dyn Backend) {
    let (l, c, s) = conn(b, Stream);
    b.getsockname(s);
    b.getpeername(s);
    b.getpeername(c);
    b.getsockname(c);
    b.send(c, b"hello");
    b.recv(s, 100);
    b.send(s, b"world");
    b.recv(c, 100);
    // A bound client: the accepted end's peer name is the client's name.
    let c2 = b.bound(Stream, p("c.sock"));
    b.connect(c2, p("l.sock"));
    let s2 = b.accept(l);
    b.getpeername(s2);
    b.getsockname(s2);
    b.accept(l);
    b.close(c);
    b.recv(s, 100);
}

/// The same for SOCK_SEQPACKET.
pub fn seqpacket_listen_accept(b: &mut dyn Backend) {
    let (l, c, s) = conn(b, Seqpacket);
    b.getsockname(s);
    b.getpeername(c);
    b.send(c, b"one");
    b.send(c, b"two");
    b.recv_times(s, 100, 2);
    b.send(s, b"back");
    b.recv(c, 100);
    b.accept(l);
    b.recv(s, 100);
}

/// listen on DGRAM is EOPNOTSUPP; on an unbound stream or seqpacket socket EINVAL.
pub fn listen_errors(b: &mut dyn Backend) {
    before_and_after_bind(b, Dgram, "d.sock", |b, d| b.listen(d, 5));
    let s = b.socket(Stream);
    b.listen(s, 5);
    let q = b.socket(Seqpacket);
    b.listen(q, 5);
    b.autobind(s);
    b.listen(s, 5);
}

/// listen on a connected socket (client, accepted end, socketpair) is EINVAL.
pub fn listen_on_connected(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.listen(c, 5);
    b.listen(s, 5);
    let (x, y) = b.pair(Stream);
    b.listen(x, 5);
    b.listen(y, 5);
    b.send(c, b"still");
    b.recv(s, 100);
}

/// listen twice is fine; a larger backlog takes effect at once.
pub fn listen_twice(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 0);
    b.listen(l, 0);
    let c: Vec<Sock> = (0..4).map(|_| b.socket(Stream)).collect();
    b.connect(c[0], p("l.sock"));
    b.connect(c[1], p("l.sock"));
    b.listen(l, 2);
    b.connect(c[1], p("l.sock"));
    b.connect(c[2], p("l.sock"));
    b.connect(c[3], p("l.sock"));
    b.accept_times(l, 4);
}

fn backlog_n(b: &mut dyn Backend, ty: Ty, n: i32) {
    let path = format!("l{n}.sock");
    let l = b.listening(ty, p(&path), n);
    for _ in 0..(n + 2) {
        let _c = b.connected(ty, p(&path));
    }
    for _ in 0..(n + 2) {
        b.accept(l);
    }
}

/// backlog N admits N+1 non-blocking connects, then EAGAIN (N = 0, 1, 5).
pub fn backlog_stream(b: &mut dyn Backend) {
    backlog_n(b, Stream, 0);
    backlog_n(b, Stream, 1);
    backlog_n(b, Stream, 5);
}

/// The same for SOCK_SEQPACKET.
pub fn backlog_seqpacket(b: &mut dyn Backend) {
    backlog_n(b, Seqpacket, 0);
    backlog_n(b, Seqpacket, 3);
}

/// With the backlog full, one accept frees exactly one slot.
pub fn accept_frees_slot(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 1);
    let c: Vec<Sock> = (0..5).map(|_| b.socket(Stream)).collect();
    b.connect(c[0], p("l.sock"));
    b.connect(c[1], p("l.sock"));
    b.connect(c[2], p("l.sock"));
    let a0 = b.accept(l);
    b.connect(c[2], p("l.sock"));
    b.connect(c[3], p("l.sock"));
    b.send(c[0], b"first");
    b.recv(a0, 100);
    let a1 = b.accept(l);
    let a2 = b.accept(l);
    b.connect(c[3], p("l.sock"));
    b.connect(c[4], p("l.sock"));
    b.send(c[2], b"third");
    b.recv(a2, 100);
    b.recv(a1, 100);
}

/// Non-blocking accept with nothing queued is EAGAIN, and stays so.
pub fn accept_nonblocking_eagain(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    b.accept_times(l, 2);
    let _c = b.connected(Stream, p("l.sock"));
    b.accept_times(l, 2);
    let q = b.listening(Seqpacket, p("q.sock"), 5);
    b.accept(q);
}

/// accept on DGRAM is EOPNOTSUPP; on a stream socket that is not listening EINVAL.
pub fn accept_errors(b: &mut dyn Backend) {
    before_and_after_bind(b, Dgram, "d.sock", |b, d| b.accept(d));
    before_and_after_bind(b, Stream, "s.sock", |b, s| b.accept(s));
    let (_l, c, a) = conn(b, Stream);
    b.accept(c);
    b.accept(a);
    let (x, _y) = b.pair(Seqpacket);
    b.accept(x);
    let q = b.socket(Seqpacket);
    b.accept(q);
}

// ---------------------------------------------------------------- connect

/// Connecting to a bound stream or seqpacket socket that is not listening.
pub fn connect_not_listening(b: &mut dyn Backend) {
    let s = b.bound(Stream, p("s.sock"));
    let c = b.connected(Stream, p("s.sock"));
    b.connect(c, p("s.sock"));
    let _q = b.bound(Seqpacket, p("q.sock"));
    let _cq = b.connected(Seqpacket, p("q.sock"));
    b.listen(s, 1);
    b.connect(c, p("s.sock"));
    b.accept(s);
}

/// Connect again: same target or another listener EISCONN, a missing target ENOENT
/// (looked up first), a wrong-type target EPROTOTYPE.
pub fn connect_again(b: &mut dyn Backend) {
    let (_l, c, _s) = conn(b, Stream);
    b.connect(c, p("l.sock"));
    b.connect(c, p("missing.sock"));
    let other = b.listening(Stream, p("other.sock"), 5);
    b.connect(c, p("other.sock"));
    let _d = b.bound(Dgram, p("d.sock"));
    b.connect(c, p("d.sock"));
    b.accept(other);
    b.getpeername(c);
}

/// Connect again to a bound stream socket that is not listening: the target's
/// state is checked before the caller's, so ECONNREFUSED, not EISCONN (stream and
/// seqpacket).
pub fn connect_again_not_listening(b: &mut dyn Backend) {
    let (_l, c, _s) = conn(b, Stream);
    let _nl = b.bound(Stream, p("nl.sock"));
    b.connect(c, p("nl.sock"));
    b.connect(c, p("l.sock"));
    let (_lq, cq, _sq) = b.connection(Seqpacket, p("lq.sock"));
    let _nq = b.bound(Seqpacket, p("nq.sock"));
    b.connect(cq, p("nq.sock"));
    b.getpeername(c);
    b.getpeername(cq);
}

/// connect on a listener is EINVAL, whatever the target (itself included).
pub fn connect_on_listener(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let l2 = b.listening(Stream, p("l2.sock"), 5);
    b.connect(l, p("l.sock"));
    b.connect(l, p("l2.sock"));
    b.connect(l, p("missing.sock"));
    b.accept(l);
    b.accept(l2);
    let q = b.listening(Seqpacket, p("q.sock"), 5);
    b.connect(q, p("q.sock"));
}

// ---------------------------------------------------------------- stream data path

/// Several writes are read back by one read.
pub fn coalescing_reads(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"abc");
    b.send(c, b"def");
    b.send(c, b"ghi");
    b.recv_times(s, 100, 2);
    b.send(c, &pattern(3000));
    b.send(c, &pattern(5000));
    b.recv(s, 10000);
    b.send(s, b"x");
    b.send(s, b"y");
    b.recv_times(c, 1, 3);
}

/// A short read takes part of the stream and leaves the rest.
pub fn partial_reads(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"0123456789");
    b.recv(s, 3);
    b.recv(s, 4);
    b.send(c, b"abc");
    b.recv(s, 5);
    b.recv_times(s, 100, 2);
    b.send(c, &pattern(10000));
    b.recv(s, 1);
    b.recv(s, 4095);
    b.recv(s, 7000);
    b.recv(s, 100);
}

/// send on an unconnected socket or a listener is ENOTCONN; sendto with an address
/// is EOPNOTSUPP unconnected and EISCONN connected.
pub fn send_errors(b: &mut dyn Backend) {
    ignore_sigpipe();
    let l = b.listening(Stream, p("l.sock"), 5);
    let u = before_and_after_bind(b, Stream, "u.sock", |b, u| b.send(u, b"x"));
    b.sendto(u, b"x", p("l.sock"));
    b.send(l, b"x");
    b.sendto(l, b"x", p("l.sock"));
    let c = b.connected(Stream, p("l.sock"));
    b.sendto(c, b"x", p("l.sock"));
    b.sendto(c, b"x", p("u.sock"));
    b.sendto(c, b"x", p("missing.sock"));
    let s = b.accept(l);
    b.recv(s, 100);
}

/// recv on an unconnected socket or on a listener is EINVAL.
pub fn recv_errors(b: &mut dyn Backend) {
    before_and_after_bind(b, Stream, "u.sock", |b, u| b.recv(u, 100));
    let l = b.listening(Stream, p("l.sock"), 5);
    b.recv(l, 100);
    let c = b.connected(Stream, p("l.sock"));
    b.recv(l, 100);
    b.recv(c, 100);
}

/// After the peer closes, the rest of the stream is read, then EOF, repeatedly.
pub fn eof_after_peer_close(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(s, b"last words");
    b.close(s);
    b.recv(c, 4);
    b.recv_times(c, 100, 3);
}

/// After the peer closes, send is EPIPE (no data was left unread).
pub fn epipe_after_peer_close(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"read me");
    b.recv(s, 100);
    b.close(s);
    b.send(c, b"x");
    b.send(c, b"y");
    b.recv(c, 100);
    b.send(c, b"z");
}

/// The peer closed with unread data: recv gives ECONNRESET once, then EOF; send
/// gives EPIPE.
pub fn econnreset_unread_recv_first(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"never read");
    b.close(s);
    b.recv_times(c, 100, 2);
    b.send(c, b"x");
    b.recv(c, 100);
}

/// The same, but send first after the reset.
pub fn econnreset_unread_send_first(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"never read");
    b.send(s, b"for c");
    b.close(s);
    b.send(c, b"x");
    b.send(c, b"y");
    b.recv_times(c, 100, 3);
}

/// shutdown(SHUT_WR): the peer drains, then EOF; own send EPIPE; the other
/// direction still works.
pub fn shutdown_wr(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"abc");
    b.shutdown(c, How::Wr);
    b.send(c, b"x");
    b.recv_times(s, 100, 3);
    b.send(s, b"reply");
    b.recv_times(c, 100, 2);
    b.shutdown(c, How::Wr);
}

/// shutdown(SHUT_RD): own recv returns what is queued, then EOF; the peer's send
/// is EPIPE; own send still works.
pub fn shutdown_rd(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(s, b"queued");
    b.shutdown(c, How::Rd);
    b.recv(c, 3);
    b.recv_times(c, 100, 2);
    b.send(s, b"more");
    b.send(c, b"up");
    b.recv_times(s, 100, 2);
}

/// shutdown(SHUT_RDWR) on one end: both directions close, mirrored on the peer.
pub fn shutdown_rdwr(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(s, b"to c");
    b.send(c, b"to s");
    b.shutdown(c, How::RdWr);
    b.recv_times(c, 100, 2);
    b.send(c, b"x");
    b.recv_times(s, 100, 2);
    b.send(s, b"y");
    b.poll(c);
    b.poll(s);
    b.shutdown(s, How::RdWr);
    b.poll(s);
}

/// shutdown on an unconnected socket or on a listener is OK (unlike TCP).
pub fn shutdown_unconnected_and_listener(b: &mut dyn Backend) {
    let u = b.socket(Stream);
    b.shutdown(u, How::Rd);
    b.shutdown(u, How::Wr);
    b.shutdown(u, How::RdWr);
    let q = b.socket(Seqpacket);
    b.shutdown(q, How::RdWr);
    let l = b.listening(Stream, p("l.sock"), 5);
    b.shutdown(l, How::Wr);
    let c = b.connected(Stream, p("l.sock"));
    let a = b.accept(l);
    b.send(c, b"ok");
    b.recv(a, 100);
}

/// shutdown(SHUT_RD) on a listener: new connects are refused, already queued ones
/// can still be accepted, then accept is EAGAIN.
pub fn listener_shutdown_rd(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c1 = b.connected(Stream, p("l.sock"));
    b.shutdown(l, How::Rd);
    let _c2 = b.connected(Stream, p("l.sock"));
    let a = b.accept(l);
    b.accept(l);
    b.send(c1, b"hi");
    b.recv(a, 100);
}

/// The listener closes with a connection pending: the client's recv gives
/// ECONNRESET once, then EOF; its send gives EPIPE.
pub fn listener_closed_pending_client(b: &mut dyn Backend) {
    ignore_sigpipe();
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.connected(Stream, p("l.sock"));
    let c2 = b.connected(Stream, p("l.sock"));
    b.send(c2, b"unread");
    b.close(l);
    b.recv_times(c, 100, 2);
    b.send(c, b"x");
    b.send(c2, b"x");
    b.recv_times(c2, 100, 2);
    b.getpeername(c);
    let _c3 = b.connected(Stream, p("l.sock"));
}

/// A client that closed before accept: accept still returns its connection, the
/// queued data can be read, then EOF, and a send is EPIPE.
pub fn client_closed_before_accept(b: &mut dyn Backend) {
    ignore_sigpipe();
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.connected(Stream, p("l.sock"));
    b.send(c, b"bye");
    b.close(c);
    let c2 = b.connected(Stream, p("l.sock"));
    b.close(c2);
    let a = b.accept(l);
    b.recv_times(a, 100, 2);
    b.send(a, b"x");
    let a2 = b.accept(l);
    b.recv(a2, 100);
    b.accept(l);
}

/// Data sent before accept is queued at the embryo and coalesces.
pub fn send_before_accept(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.connected(Stream, p("l.sock"));
    b.send(c, b"ab");
    b.send(c, b"cd");
    b.send(c, &pattern(1000));
    b.recv(c, 100);
    let a = b.accept(l);
    b.recv(a, 4);
    b.recv(a, 2000);
    b.recv(a, 100);
    b.send(a, b"reply");
    b.recv(c, 100);
}

/// 4 KiB non-blocking sends: 180224 bytes fit, then EAGAIN (and no POLLOUT);
/// one read takes the lot back.
pub fn backpressure_4k(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    send_until_error(b, c, 4096, 200);
    b.poll(c);
    b.send(c, b"x");
    b.recv(s, 65536);
    b.poll(c);
    recv_until_empty(b, s, 65536, 100);
    b.poll(c);
    send_until_error(b, c, 4096, 200);
}

/// 278 one-byte sends fit (the limit is the sender's truesize), then EAGAIN.
pub fn backpressure_1byte(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    send_until_error(b, c, 1, 1000);
    b.poll(c);
    b.recv(s, 100);
    b.recv(s, 1000);
    b.poll(c);
    send_until_error(b, c, 1, 1000);
}

/// One 4 MiB non-blocking send is partial: 219264 bytes.
pub fn big_send_partial(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, &pattern(4 << 20));
    b.send(c, &pattern(4 << 20));
    b.send(c, b"x");
    recv_until_empty(b, s, 1 << 20, 100);
    b.send(c, &pattern(100_000));
    recv_until_empty(b, s, 1 << 20, 100);
}

/// A zero-length stream send returns 0 and queues nothing (sent as an empty `msg`
/// record through udsfs: a zero-length write() never reaches a FUSE file system).
pub fn zero_length_send(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(c, b"");
    b.recv(s, 100);
    b.send(c, b"a");
    b.send(c, b"");
    b.send(c, b"b");
    b.recv_times(s, 100, 2);
}

// ---------------------------------------------------------------- seqpacket

/// Record boundaries are kept.
pub fn seqpacket_boundaries(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, b"ab");
    b.send(c, b"cde");
    b.send(c, &pattern(1000));
    b.send(c, b"f");
    b.recv_times(s, 100, 2);
    b.recv_times(s, 4096, 3);
}

/// A short buffer truncates a record; the rest is discarded.
pub fn seqpacket_truncation(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, b"0123456789");
    b.send(c, b"next");
    b.recv(s, 3);
    b.recv_times(s, 100, 2);
    b.send(c, &pattern(5000));
    b.recv(s, 1);
    b.recv(s, 100);
}

/// A zero-length record is read as b"" (the same as EOF).
pub fn seqpacket_zero_length(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, b"");
    b.send(c, b"x");
    b.send(c, b"");
    b.recv_times(s, 100, 4);
}

/// send or recv on an unconnected (or listening) seqpacket socket is ENOTCONN;
/// so is sendto with an address.
pub fn seqpacket_unconnected(b: &mut dyn Backend) {
    let u = b.socket(Seqpacket);
    b.send(u, b"x");
    b.recv(u, 100);
    let l = b.listening(Seqpacket, p("l.sock"), 5);
    b.send(l, b"x");
    b.recv(l, 100);
    b.sendto(u, b"x", p("l.sock"));
    b.bind(u, p("u.sock"));
    b.send(u, b"x");
    b.recv(u, 100);
}

/// sendto with an address on a connected seqpacket socket ignores the address and
/// delivers to the peer.
pub fn seqpacket_sendto_connected(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    let o = b.listening(Seqpacket, p("other.sock"), 5);
    b.sendto(c, b"to other?", p("other.sock"));
    b.sendto(c, b"to self?", p("l.sock"));
    b.sendto(c, b"to nowhere?", p("missing.sock"));
    b.recv_times(s, 100, 3);
    b.accept(o);
    b.sendto(s, b"back", p("other.sock"));
    b.recvfrom(c, 100);
}

/// The peer closed (nothing unread): recv EOF; send EPIPE without SIGPIPE; poll.
pub fn seqpacket_peer_closed(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(s, b"last");
    b.close(s);
    b.poll(c);
    b.recv_times(c, 100, 2);
    b.send(c, b"x");
    b.send(c, b"y");
    b.poll(c);
}

/// The peer closed with unread data: send ECONNRESET once, then EPIPE.
pub fn seqpacket_peer_closed_unread_send(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, b"never read");
    b.close(s);
    b.send(c, b"x");
    b.send(c, b"y");
    b.recv(c, 100);
}

/// The peer closed with unread data: recv ECONNRESET once, then EOF.
pub fn seqpacket_peer_closed_unread_recv(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, b"never read");
    b.close(s);
    b.poll(c);
    b.recv_times(c, 100, 2);
    b.send(c, b"x");
    b.poll(c);
}

/// 278 small messages fit (sender sndbuf, no qlen), then EAGAIN.
pub fn seqpacket_backpressure(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    send_until_error(b, c, 1, 1000);
    b.poll(c);
    b.recv_times(s, 100, 2);
    b.poll(c);
    recv_until_empty(b, s, 100, 1000);
    b.poll(c);
    send_until_error(b, c, 1, 1000);
}

/// How many messages fill the send buffer depends on the kernel's skb truesize,
/// which grows in kmalloc buckets with the payload (<= 192 bytes: 278 messages,
/// 193..704: 167, 1000: 93, 2000: 49): stream and seqpacket socketpairs.
pub fn backpressure_by_size(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        for size in [100, 192, 193, 700, 1000, 2000] {
            let (x, y) = b.pair(ty);
            send_until_error(b, x, size, 1000);
            b.close(x);
            b.close(y);
        }
    }
}

/// The largest seqpacket message is sndbuf - 32 = 212960 bytes; one more is
/// EMSGSIZE.
pub fn seqpacket_emsgsize(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Seqpacket);
    b.send(c, &pattern(212_961));
    b.send(c, &pattern(212_960));
    b.recv_times(s, 300_000, 2);
    b.send(c, &pattern(1 << 20));
    b.recv(s, 100);
}

// ---------------------------------------------------------------- poll

/// An idle connected socket is writable only; queued data adds IN.
pub fn poll_idle_connected(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.poll(c);
    b.poll(s);
    b.send(c, b"x");
    b.poll(s);
    b.poll(c);
    b.recv(s, 100);
    b.poll(s);
}

/// The peer shut down writing: IN|OUT|RDHUP.
pub fn poll_peer_shut_wr(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.shutdown(c, How::Wr);
    b.poll(s);
    b.poll(c);
    b.shutdown(s, How::Rd);
    b.poll(s);
    b.poll(c);
}

/// The peer closed: IN|OUT|HUP|RDHUP.
pub fn poll_peer_closed(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.close(c);
    b.poll(s);
    b.recv(s, 100);
    b.poll(s);
}

/// The peer closed with data left unread (ECONNRESET pending).
pub fn poll_peer_closed_unread(b: &mut dyn Backend) {
    let (_l, c, s) = conn(b, Stream);
    b.send(s, b"unread");
    b.close(c);
    b.poll(s);
    b.recv(s, 100);
    b.poll(s);
}

/// An unconnected stream or seqpacket socket: OUT|HUP.
pub fn poll_unconnected(b: &mut dyn Backend) {
    before_and_after_bind(b, Stream, "u.sock", |b, u| b.poll(u));
    let q = b.socket(Seqpacket);
    b.poll(q);
}

/// A listener: nothing when idle, IN with a connection pending.
pub fn poll_listener(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    b.poll(l);
    let c = b.connected(Stream, p("l.sock"));
    b.poll(l);
    b.poll(c);
    b.accept(l);
    b.poll(l);
}

// ---------------------------------------------------------------- socketpair

/// A stream socketpair: unnamed both ways, data both ways, EOF after close.
pub fn socketpair_stream(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (x, y) = b.pair(Stream);
    b.getsockname(x);
    b.getpeername(x);
    b.getpeername(y);
    b.poll(x);
    b.send(x, b"ab");
    b.send(x, b"cd");
    b.recv(y, 100);
    b.send(y, b"back");
    b.recv(x, 2);
    b.recv(x, 100);
    b.connect(x, p("missing.sock"));
    b.sendto(x, b"q", p("missing.sock"));
    b.shutdown(x, How::Wr);
    b.recv(y, 100);
    b.close(y);
    b.recv(x, 100);
    b.send(x, b"z");
    b.poll(x);
}

/// A seqpacket socketpair: records both ways, EOF and EPIPE after close.
pub fn socketpair_seqpacket(b: &mut dyn Backend) {
    let (x, y) = b.pair(Seqpacket);
    b.getpeername(x);
    b.poll(x);
    b.send(x, b"ab");
    b.send(x, b"cd");
    b.recv(y, 100);
    b.recv(y, 1);
    b.recv(y, 100);
    b.send(y, b"");
    b.recv(x, 100);
    send_until_error(b, y, 1, 1000);
    b.close(x);
    b.recv(y, 100);
    b.send(y, b"z");
    b.send(y, b"z");
}

// ---------------------------------------------------------------- SIGPIPE

/// A stream send that fails with EPIPE raises SIGPIPE in the sender (without
/// MSG_NOSIGNAL): peer closed, own SHUT_WR, peer SHUT_RD, listener gone; other
/// errors and successful sends raise nothing.
pub fn sigpipe_stream(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (l, c, s) = conn(b, Stream);
    b.send_sig(c, b"fine");
    b.recv(s, 100);
    b.shutdown(s, How::Rd);
    b.send_sig(c, b"x");
    b.shutdown(c, How::Wr);
    b.send_sig(c, b"x");
    b.send_sig(s, b"back");
    b.recv(c, 100);
    b.close(s);
    b.send_sig(c, b"x");
    let u = b.socket(Stream);
    b.send_sig(u, b"x");
    b.send_sig(l, b"x");
    let c2 = b.connected(Stream, p("l.sock"));
    b.close(l);
    b.send_sig(c2, b"x");
    let (x, y) = b.pair(Stream);
    b.send_sig(y, b"unread");
    b.close(x);
    b.send_sig(y, b"x");
    b.recv(y, 100);
}

/// Seqpacket sends never raise SIGPIPE: EPIPE after close or shutdown, and the
/// ECONNRESET from a peer that closed with unread data.
pub fn sigpipe_seqpacket(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (_l, c, s) = conn(b, Seqpacket);
    b.send_sig(c, b"fine");
    b.recv(s, 100);
    b.shutdown(c, How::Wr);
    b.send_sig(c, b"x");
    b.shutdown(c, How::Rd);
    b.send_sig(s, b"x");
    b.close(s);
    b.send_sig(c, b"x");
    let (x, y) = b.pair(Seqpacket);
    b.send_sig(y, b"unread");
    b.close(x);
    b.send_sig(y, b"x");
    b.send_sig(y, b"x");
    let u = b.socket(Seqpacket);
    b.send_sig(u, b"x");
}

// ---------------------------------------------------------------- connect check order

/// The kernel checks the target (listening? backlog full?) before the caller's own
/// state: a connected socket or a listener connecting to a non-listening target
/// gets ECONNREFUSED, to a listener with a full backlog EAGAIN; EISCONN / EINVAL
/// come only when the target would accept.
pub fn connect_check_order(b: &mut dyn Backend) {
    let (_l, c, _s) = conn(b, Stream);
    let full = b.listening(Stream, p("full.sock"), 0);
    let _f1 = b.connected(Stream, p("full.sock"));
    b.connect(c, p("full.sock"));
    let _nl = b.bound(Stream, p("nl.sock"));
    let l2 = b.listening(Stream, p("l2.sock"), 0);
    b.connect(l2, p("nl.sock"));
    b.connect(l2, p("full.sock"));
    b.connect(l2, p("l2.sock"));
    let _f2 = b.connected(Stream, p("l2.sock"));
    b.connect(l2, p("l2.sock"));
    b.connect(c, p("l2.sock"));
    b.connect(c, p("l.sock"));
    b.accept(full);
    b.connect(c, p("full.sock"));
    b.connect(l2, p("full.sock"));
}

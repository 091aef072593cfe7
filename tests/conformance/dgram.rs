//! SOCK_DGRAM data-path scenarios: boundaries, truncation, sizes, queue limits,
//! connection states, shutdown and sender names.

use super::backend::Ty::Dgram;
use super::backend::*;

/// The largest datagram with the default send buffer: sk_sndbuf - 32.
const MAX_DGRAM: usize = 212_960;

/// A bound receiver `a.sock` (s0) and a sender one-way connected to it (s1).
fn bound_and_connected(b: &mut dyn Backend) -> (Sock, Sock) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.connected(Dgram, p("a.sock"));
    (s0, s1)
}

/// One send is one message; one recv returns one message.
pub fn message_boundaries(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.sendto(s1, b"ab", p("a.sock"));
    b.sendto(s1, b"cde", p("a.sock"));
    b.sendto(s1, b"fghij", p("a.sock"));
    b.recv_times(s0, 100, 4);
    b.connect(s1, p("a.sock"));
    b.send(s1, b"one");
    b.send(s1, b"two");
    b.send(s1, &pattern(1000));
    b.recv(s0, 100);
    b.recv_times(s0, 4096, 3);
}

/// A short buffer truncates the message and the rest is dropped.
pub fn truncation(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.send(s1, b"0123456789");
    b.recv(s0, 3);
    b.recv(s0, 100);
    b.send(s1, b"abcdefghij");
    b.send(s1, b"xyz");
    b.recv(s0, 4);
    b.recv_times(s0, 100, 2);
    b.send(s1, b"0123456789");
    b.recvfrom(s0, 5);
    b.recv(s0, 100);
    b.send(s1, &pattern(5000));
    b.recv(s0, 1);
    b.recv(s0, 100);
}

/// A zero-length datagram is a message of its own.
pub fn zero_length(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.sendto(s1, b"", p("a.sock"));
    b.recv_times(s0, 100, 2);
    b.connect(s1, p("a.sock"));
    b.send(s1, b"");
    b.send(s1, b"x");
    b.send(s1, b"");
    b.recv_times(s0, 100, 2);
    b.recvfrom(s0, 100);
    b.recv(s0, 100);
}

/// The size limit is sndbuf - 32 = 212960 bytes; one more is EMSGSIZE.
pub fn emsgsize(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.send(s1, &pattern(MAX_DGRAM + 1));
    b.send(s1, &pattern(MAX_DGRAM));
    b.recv_times(s0, 300_000, 2);
    let s2 = b.socket(Dgram);
    b.sendto(s2, &pattern(MAX_DGRAM + 1), p("a.sock"));
    b.sendto(s2, &pattern(MAX_DGRAM), p("a.sock"));
    b.recvfrom(s0, 300_000);
    b.send(s1, &pattern(1 << 20));
    b.recv(s0, 100);
}

/// A receiver takes max_dgram_qlen + 1 = 11 datagrams from a one-way-connected
/// sender, then EAGAIN; one recv makes room for exactly one more.
pub fn qlen_limit(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    for i in 0..12 {
        b.send(s1, format!("m{i}").as_bytes());
    }
    b.recv(s0, 100);
    b.send(s1, b"m12");
    b.send(s1, b"m13");
    b.recv_times(s0, 100, 12);
}

/// The queue limit is shared by all senders, connected or not.
pub fn qlen_shared_by_senders(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.socket(Dgram);
    let s2 = b.bound(Dgram, p("two.sock"));
    let s3 = b.connected(Dgram, p("a.sock"));
    for i in 0..4 {
        b.sendto(s1, format!("one{i}").as_bytes(), p("a.sock"));
        b.sendto(s2, format!("two{i}").as_bytes(), p("a.sock"));
        b.send(s3, format!("three{i}").as_bytes());
    }
    b.recvfrom(s0, 100);
    b.send(s3, b"three4");
    b.sendto(s2, b"two4", p("a.sock"));
    for _ in 0..12 {
        b.recvfrom(s0, 100);
    }
}

/// A mutually connected pair has no queue-length limit.
pub fn mutual_pair_no_qlen(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("b.sock"));
    b.connect(s0, p("b.sock"));
    b.connect(s1, p("a.sock"));
    for i in 0..40 {
        b.send(s1, format!("m{i}").as_bytes());
    }
    b.recv_times(s0, 100, 41);
}

/// The same for a socketpair.
pub fn socketpair_no_qlen(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    for i in 0..40 {
        b.send(s0, format!("m{i}").as_bytes());
    }
    for _ in 0..41 {
        b.recv(s1, 100);
    }
}

/// send without a peer: ENOTCONN; recv on an empty unconnected socket: EAGAIN.
pub fn enotconn_unconnected(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.send(s0, b"x");
    b.send(s0, b"");
    b.recv(s0, 100);
    b.recvfrom(s0, 100);
    b.getpeername(s0);
    b.bind(s0, p("a.sock"));
    b.send(s0, b"x");
    b.recv(s0, 100);
}

/// An oversized datagram is EMSGSIZE even when there is no peer.
pub fn emsgsize_before_enotconn(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.send(s0, &pattern(MAX_DGRAM + 1));
    b.send(s0, &pattern(MAX_DGRAM));
    b.send(s0, b"small");
}

/// The connected peer closed: the first send is ECONNREFUSED (and disconnects),
/// later sends ENOTCONN; recv stays EAGAIN (no EOF for dgram).
pub fn peer_closed(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.send(s1, b"before");
    b.close(s0);
    b.send(s1, b"first");
    b.send(s1, b"second");
    b.recv(s1, 100);
    b.getpeername(s1);
    b.send(s1, b"third");
}

/// The same for a socketpair.
pub fn socketpair_peer_closed(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    b.send(s0, b"queued for s1");
    b.close(s0);
    b.recv(s1, 100);
    b.send(s1, b"first");
    b.send(s1, b"second");
    b.recv(s1, 100);
    b.getpeername(s1);
}

/// The peer is a socket, not a name: a new socket bound to the peer's old path does
/// not receive until the sender connects again.
pub fn peer_name_rebound(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.close(s0);
    b.rm("a.sock");
    let s2 = b.bound(Dgram, p("a.sock"));
    b.send(s1, b"first");
    b.send(s1, b"second");
    b.recv(s2, 100);
    b.connect(s1, p("a.sock"));
    b.send(s1, b"again");
    b.recv(s2, 100);
}

/// getpeername after the peer closed, before and after the send that notices it.
pub fn getpeername_dead_peer(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.getpeername(s1);
    b.close(s0);
    b.getpeername(s1);
    b.send(s1, b"x");
    b.getpeername(s1);
}

/// A socket whose peer is someone else refuses third parties: EPERM for sendto and
/// connect; its own peer may still send.
pub fn eperm_connected_elsewhere(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("b.sock"));
    b.connect(s0, p("b.sock"));
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"x", p("a.sock"));
    b.connect(s2, p("a.sock"));
    b.getpeername(s2);
    b.sendto(s1, b"from peer", p("a.sock"));
    b.recvfrom(s0, 100);
    b.bind(s2, p("c.sock"));
    b.sendto(s2, b"y", p("a.sock"));
    b.sendto(s0, b"to c", p("c.sock"));
    b.recvfrom(s2, 100);
    b.recv(s0, 100);
}

/// A socket can send to its own address.
pub fn sendto_own_address(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    b.sendto(s0, b"me", p("a.sock"));
    b.recvfrom(s0, 100);
    let s1 = b.bound(Dgram, ab(b"self"));
    b.sendto(s1, b"me too", ab(b"self"));
    b.recvfrom(s1, 100);
    b.connect(s1, ab(b"self"));
    b.send(s1, b"connected to myself");
    b.recvfrom(s1, 100);
    b.getpeername(s1);
}

/// recvfrom reports the sender's name: path, abstract, autobound, none.
pub fn recvfrom_sender_names(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("srv.sock"));
    let s1 = b.bound(Dgram, p("cli.sock"));
    b.sendto(s1, b"from path", p("srv.sock"));
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"from unbound", p("srv.sock"));
    let s3 = b.bound(Dgram, ab(b"abs"));
    b.sendto(s3, b"from abstract", p("srv.sock"));
    let s4 = b.socket(Dgram);
    b.autobind(s4);
    b.sendto_then_name(s4, b"from autobound", p("srv.sock"));
    for _ in 0..5 {
        b.recvfrom(s0, 100);
    }
}

/// A dgram socketpair sends both ways and has no names.
pub fn socketpair_both_ways(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    b.send(s0, b"ping");
    b.recv(s1, 100);
    b.send(s1, b"pong");
    b.recvfrom(s0, 100);
    b.recv(s0, 100);
    b.recv(s1, 100);
    b.getsockname(s0);
    b.getpeername(s0);
    b.getpeername(s1);
    let s2 = b.bound(Dgram, p("x.sock"));
    b.sendto(s0, b"pair to x", p("x.sock"));
    b.recvfrom(s2, 100);
}

/// shutdown(SHUT_WR): own sends EPIPE (also sendto elsewhere), the other direction
/// still works and the peer sees no EOF.
pub fn shutdown_wr(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    b.shutdown(s0, How::Wr);
    b.send(s0, b"x");
    b.send(s1, b"y");
    b.recv(s0, 100);
    b.recv(s1, 100);
    let s2 = b.bound(Dgram, p("a.sock"));
    b.sendto(s0, b"elsewhere", p("a.sock"));
    b.send(s0, &pattern(MAX_DGRAM + 1));
    b.recv(s2, 100);
    let s3 = b.socket(Dgram);
    b.shutdown(s3, How::Wr);
    b.send(s3, b"unconnected");
}

/// shutdown(SHUT_RD): senders get EPIPE, queued messages are still readable, then
/// EAGAIN (no EOF for dgram); the socket can still send.
pub fn shutdown_rd(b: &mut dyn Backend) {
    let (s0, s1) = bound_and_connected(b);
    b.send(s1, b"before");
    b.shutdown(s0, How::Rd);
    b.send(s1, b"after");
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"third party", p("a.sock"));
    b.recv_times(s0, 100, 2);
    b.bind(s1, p("b.sock"));
    b.sendto(s0, b"s0 still sends", p("b.sock"));
    b.recv(s1, 100);
    b.shutdown(s0, How::RdWr);
    b.sendto(s0, b"no more", p("b.sock"));
}

/// connect again moves the default peer.
pub fn reconnect(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("b.sock"));
    let s2 = b.connected(Dgram, p("a.sock"));
    b.send(s2, b"1");
    b.connect(s2, p("b.sock"));
    b.send(s2, b"2");
    b.connect(s2, p("b.sock"));
    b.send(s2, b"3");
    b.connect(s2, p("missing.sock"));
    b.send(s2, b"4");
    b.getpeername(s2);
    b.recv_times(s0, 100, 2);
    b.recv_times(s1, 100, 4);
}

/// A connected dgram socket may still sendto another address.
pub fn sendto_while_connected(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("b.sock"));
    let s2 = b.connected(Dgram, p("a.sock"));
    b.sendto(s2, b"x to b", p("b.sock"));
    b.send(s2, b"y to a");
    b.sendto(s2, b"z to a", p("a.sock"));
    b.recv(s1, 100);
    b.recv_times(s0, 100, 2);
    b.getpeername(s2);
}

/// Connects the socket bound at `x.1` to `y.1`, then the other way.
fn connect_each_other(b: &mut dyn Backend, x: (Sock, &str), y: (Sock, &str)) {
    b.connect(x.0, p(y.1));
    b.connect(y.0, p(x.1));
}

/// Re-connecting a socket that has queued messages from a peer pointing back at it
/// purges its queue and reports ECONNRESET to that peer once.
pub fn reconnect_resets_old_peer(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("b.sock"));
    let s2 = b.bound(Dgram, p("c.sock"));
    connect_each_other(b, (s0, "a.sock"), (s1, "b.sock"));
    b.send(s1, b"queued at s0");
    b.connect(s0, p("c.sock"));
    b.recv(s0, 100);
    b.send(s1, b"after reconnect");
    b.send(s1, b"again");
    b.recv(s1, 100);
    b.send(s0, b"to c");
    b.recv(s2, 100);
    // The same, but the error is noticed by a recv first.
    let s3 = b.bound(Dgram, p("d.sock"));
    let s4 = b.bound(Dgram, p("e.sock"));
    connect_each_other(b, (s3, "d.sock"), (s4, "e.sock"));
    b.send(s4, b"queued at s3");
    b.connect(s3, p("c.sock"));
    b.recv_times(s4, 100, 2);
    b.send(s4, b"after");
}

/// listen on a dgram socket: EOPNOTSUPP, bound or not.
pub fn listen_eopnotsupp(b: &mut dyn Backend) {
    let s0 = before_and_after_bind(b, Dgram, "a.sock", |b, s| b.listen(s, 5));
    b.listen(s0, 0);
    let s1 = b.socket(Dgram);
    b.sendto(s1, b"still a dgram socket", p("a.sock"));
    b.recv(s0, 100);
}

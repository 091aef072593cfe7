//! Autobind: the name's format, explicit and implicit autobind on every type
//! (connect, send, socketpair with SO_PASSCRED), and one name space for all types.

use super::abstract_names::abs_sun;
use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// Autobind: "@" + 5 lowercase hex digits; a second autobind, or an autobind on a
/// bound socket, succeeds and changes nothing; the name is reachable.
pub fn autobind_format_and_idempotence(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.autobind(s0);
    let n0 = b.getsockname(s0).ok();
    b.autobind(s0);
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.autobind(s1);
    b.getsockname(s1);
    let s2 = b.bound(Dgram, p("p.sock"));
    b.autobind(s2);
    b.getsockname(s2);
    let s3 = b.bound(Dgram, ab(b"named"));
    b.autobind(s3);
    b.getsockname(s3);
    let s4 = b.socket(Dgram);
    if let Some(a) = n0.and_then(|n| n.addr()) {
        b.sendto(s4, b"to auto", a.clone());
        b.recvfrom(s0, 100);
        b.sendto(s1, b"from auto", a);
        b.recvfrom(s0, 100);
    }
}

/// An explicit bind after autobind: EINVAL, nothing created.
pub fn bind_after_autobind(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.autobind(s0);
    b.bind(s0, p("a.sock"));
    b.stat("a.sock");
    b.bind(s0, ab(b"x"));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, p("a.sock"));
    b.bind(s1, ab(b"x"));
    b.getsockname(s1);
}

/// Autobind on stream and seqpacket sockets: the same format, idempotent, listen
/// works on the name, clients reach it, accepted sockets carry it.
pub fn autobind_stream_seqpacket(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        let l = b.socket(ty);
        b.autobind(l);
        let n = b.getsockname(l).ok();
        b.autobind(l);
        b.getsockname(l);
        b.listen(l, 5);
        b.autobind(l);
        b.getsockname(l);
        let c = b.socket(ty);
        if let Some(a) = n.and_then(|n| n.addr()) {
            b.connect(c, a);
        }
        b.getpeername(c);
        b.getsockname(c);
        let a = b.accept(l);
        b.getsockname(a);
        b.getpeername(a);
        b.autobind(a);
        b.getsockname(a);
        b.autobind(c);
        b.getsockname(c);
        b.getpeername(a);
    }
}

/// Autobind on a socket that already has a name (path or abstract), of every type,
/// listening or not, and an implicit autobind (SO_PASSCRED) on a bound socket: all
/// succeed and change nothing.
pub fn autobind_idempotent_when_named(b: &mut dyn Backend) {
    let st = b.bound(Stream, p("st.sock"));
    b.autobind(st);
    b.getsockname(st);
    b.listen(st, 5);
    b.autobind(st);
    b.getsockname(st);
    b.stat("st.sock");
    let sq = b.bound(Seqpacket, ab(b"sq"));
    b.autobind(sq);
    b.getsockname(sq);
    let c = b.bound(Stream, p("c.sock"));
    b.passcred(c, true);
    b.connect_then_name(c, p("st.sock"));
    let a = b.accept(st);
    b.getpeername(a);
    let d = b.bound(Dgram, ab(b"d"));
    b.passcred(d, true);
    b.sendto(d, b"named", ab(b"d"));
    b.recvfrom(d, 100);
    b.getsockname(d);
}

/// An explicit bind after an implicit autobind (SO_PASSCRED connect / send) or an
/// explicit one on stream and seqpacket: EINVAL, and nothing is created.
pub fn bind_after_any_autobind(b: &mut dyn Backend) {
    let _r = b.bound(Dgram, p("r.sock"));
    let d = b.passcred_socket(Dgram);
    b.sendto_then_name(d, b"x", p("r.sock"));
    b.bind(d, p("d.sock"));
    b.bind(d, ab(b"d"));
    b.stat("d.sock");
    b.getsockname(d);
    let _l = b.listening(Stream, p("l.sock"), 5);
    let c = b.passcred_socket(Stream);
    b.connect(c, p("l.sock"));
    b.bind(c, p("c.sock"));
    b.stat("c.sock");
    b.getsockname(c);
    for ty in [Stream, Seqpacket] {
        let s = b.socket(ty);
        b.autobind(s);
        b.bind(s, p("e.sock"));
        b.bind(s, ab(b"e"));
        b.stat("e.sock");
        b.getsockname(s);
    }
}

/// SO_PASSCRED autobinds a stream client at connect, before the target is looked up
/// (so even a failing connect leaves it named); a listener's SO_PASSCRED does not
/// name its clients; passcred off again names nothing.
pub fn implicit_autobind_stream_connect(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c1 = b.passcred_socket(Stream);
    b.getsockname(c1);
    b.connect_then_name(c1, p("l.sock"));
    let a1 = b.accept(l);
    b.getpeername(a1);
    b.getsockname(a1);
    let c2 = b.connected(Stream, p("l.sock"));
    b.getsockname(c2);
    let a2 = b.accept(l);
    b.getpeername(a2);
    let c3 = b.passcred_socket(Stream);
    b.connect_then_name(c3, p("missing.sock"));
    let c4 = b.passcred_socket(Stream);
    b.connect_then_name(c4, ab(b"missing"));
    let l2 = b.bound(Stream, ab(b"l2"));
    b.passcred(l2, true);
    b.listen(l2, 5);
    let c5 = b.connected(Stream, ab(b"l2"));
    b.getsockname(c5);
    let c6 = b.passcred_socket(Stream);
    b.passcred(c6, false);
    b.connect_then_name(c6, ab(b"l2"));
    let _dg = b.bound(Dgram, p("dg.sock"));
    let c7 = b.passcred_socket(Stream);
    b.connect_then_name(c7, p("dg.sock"));
}

/// SO_PASSCRED on `x` of a socketpair, still unnamed, which its first send
/// ("x to y") autobinds; then `y`'s getpeername and `receive`.
fn passcred_first_send(
    b: &mut dyn Backend,
    x: Sock,
    y: Sock,
    receive: impl FnOnce(&mut dyn Backend),
) {
    b.passcred(x, true);
    b.getsockname(x);
    b.send_then_name(x, b"x to y");
    b.getpeername(y);
    receive(b);
}

/// The client `c` of listener `l`, connected without SO_PASSCRED, turns it on
/// and sends `data`; the accepted end's getpeername and the receive follow.
fn passcred_after_connect(b: &mut dyn Backend, l: Sock, c: Sock, data: &[u8]) {
    b.passcred(c, true);
    b.send_then_name(c, data);
    let a = b.accept(l);
    b.getpeername(a);
    b.recv(a, 100);
}

/// Seqpacket: SO_PASSCRED autobinds at connect and at send over a socketpair (its
/// send is the dgram send), unlike stream.
pub fn implicit_autobind_seqpacket(b: &mut dyn Backend) {
    let l = b.listening(Seqpacket, ab(b"sq"), 5);
    let c = b.passcred_socket(Seqpacket);
    b.connect_then_name(c, ab(b"sq"));
    let a = b.accept(l);
    b.getpeername(a);
    let (x, y) = b.pair(Seqpacket);
    passcred_first_send(b, x, y, |b| {
        b.recv(y, 100);
    });
    b.send_then_name(y, b"y to x");
    b.recv(x, 100);
    let u = b.passcred_socket(Seqpacket);
    b.send_then_name(u, b"unconnected");
    let c2 = b.connected(Seqpacket, ab(b"sq"));
    b.getsockname(c2);
    passcred_after_connect(b, l, c2, b"passcred after connect");
}

/// Dgram connect with SO_PASSCRED autobinds, also when the connect fails (ENOENT,
/// ECONNREFUSED), but not when the address itself is invalid (108-byte name).
pub fn implicit_autobind_dgram_connect(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let d1 = b.passcred_socket(Dgram);
    b.connect_then_name(d1, p("r.sock"));
    b.send(d1, b"from d1");
    b.recvfrom(r, 100);
    let d2 = b.passcred_socket(Dgram);
    b.connect_then_name(d2, p("missing.sock"));
    let d3 = b.passcred_socket(Dgram);
    b.connect_then_name(d3, ab(b"missing"));
    let d4 = b.passcred_socket(Dgram);
    b.connect_sun(d4, &abs_sun(&[b'n'; 108]));
    b.getsockname(d4);
    let d5 = b.connected(Dgram, p("r.sock"));
    b.getsockname(d5);
    b.send(d5, b"from d5");
    b.recvfrom(r, 100);
}

/// Dgram send with SO_PASSCRED autobinds the sender (the receiver sees the name),
/// also when the send fails with ENOTCONN, ECONNREFUSED or EMSGSIZE, but not for an
/// invalid address; a receiver's SO_PASSCRED does not name the sender.
pub fn implicit_autobind_dgram_send(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let d1 = b.passcred_socket(Dgram);
    b.sendto_then_name(d1, b"passcred", p("r.sock"));
    b.recvfrom(r, 100);
    b.sendto(d1, b"again", p("r.sock"));
    b.recvfrom(r, 100);
    let d2 = b.socket(Dgram);
    b.sendto(d2, b"plain", p("r.sock"));
    b.recvfrom(r, 100);
    b.getsockname(d2);
    let r2 = b.bound(Dgram, ab(b"r2"));
    b.passcred(r2, true);
    let d3 = b.socket(Dgram);
    b.sendto_then_name(d3, b"to passcred receiver", ab(b"r2"));
    b.recvfrom(r2, 100);
    let d4 = b.passcred_socket(Dgram);
    b.send_then_name(d4, b"unconnected");
    let d5 = b.passcred_socket(Dgram);
    b.sendto_then_name(d5, b"x", ab(b"missing"));
    let d6 = b.passcred_socket(Dgram);
    b.sendto_sun(d6, b"x", &abs_sun(&[b'n'; 108]));
    b.getsockname(d6);
    let d7 = b.passcred_socket(Dgram);
    b.sendto_then_name(d7, &pattern(212_961), p("r.sock"));
    b.recv(r, 100);
}

/// A dgram socketpair: SO_PASSCRED on one end autobinds it at its first send; the
/// other end's getpeername and recvfrom show the name; the other end stays unnamed.
pub fn implicit_autobind_dgram_socketpair(b: &mut dyn Backend) {
    let (x, y) = b.pair(Dgram);
    b.getpeername(x);
    passcred_first_send(b, x, y, |b| {
        b.recvfrom(y, 100);
    });
    b.send(y, b"y to x");
    b.recvfrom(x, 100);
    b.getsockname(y);
    b.getpeername(x);
}

/// listen never autobinds (EINVAL unbound, with SO_PASSCRED too) and stream send
/// never does either; after an explicit autobind listen works.
pub fn no_autobind_listen_or_stream_send(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        let s = b.passcred_socket(ty);
        b.listen(s, 5);
        b.getsockname(s);
        b.autobind(s);
        b.listen(s, 5);
        b.getsockname(s);
    }
    let (x, y) = b.pair(Stream);
    b.passcred(x, true);
    b.passcred(y, true);
    b.send(x, b"x to y");
    b.send(y, b"y to x");
    b.getsockname(x);
    b.getsockname(y);
    b.getpeername(x);
    b.recv(y, 100);
    b.recv(x, 100);
    let l = b.listening(Stream, ab(b"l"), 5);
    let c = b.connected(Stream, ab(b"l"));
    passcred_after_connect(b, l, c, b"after connect");
}

/// One autobound name held by a dgram, a stream and a seqpacket socket at once (each
/// type has its own abstract namespace); each client type reaches its own.
pub fn autobind_name_shared_by_types(b: &mut dyn Backend) {
    let d = b.socket(Dgram);
    b.autobind(d);
    let Some(Name::Abstract(n)) = b.getsockname(d).ok() else {
        return;
    };
    let st = b.bound(Stream, ab(&n));
    b.getsockname(st);
    let _sq = b.bound(Seqpacket, ab(&n));
    let d2 = b.bound(Dgram, ab(&n));
    b.listen(st, 5);
    let cs = b.connected(Stream, ab(&n));
    b.getpeername(cs);
    let a = b.accept(st);
    b.getsockname(a);
    let _cq = b.connected(Seqpacket, ab(&n));
    let cd = b.socket(Dgram);
    b.sendto(cd, b"to the dgram one", ab(&n));
    b.recvfrom(d, 100);
    b.close(d);
    b.sendto(cd, b"gone", ab(&n));
    b.bind(d2, ab(&n));
    b.getsockname(d2);
    b.sendto(cd, b"to the new dgram one", ab(&n));
    b.recv(d2, 100);
    let _cs2 = b.connected(Stream, ab(&n));
}

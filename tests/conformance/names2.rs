//! More naming scenarios (helper C, issue 4): abstract names with NUL bytes and
//! non-printables, the 107/108-byte limits, path names up to 108 bytes, autobind on
//! every type and implicit autobind (SO_PASSCRED), names shared across socket types,
//! names held by a second handle, hard links, rename, bind after connect, the names of
//! accepted sockets, mknod'ed socket nodes, directories, and permissions as an
//! unprivileged user (uid/gid 65534 on an `--allow-other` mount), umask included.
//!
//! Also two checks that compare no traces (ordinary tests, see the end of the file):
//! `.udsfs/unix` against `/proc/net/unix` with one parser, and the connect view /
//! abstract directory one-liners.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// The unprivileged user the permission scenarios act as.
const NOBODY: u32 = 65534;

fn sock_name(s: Sock) -> String {
    if s == BAD_SOCK {
        "s?".to_string()
    } else {
        format!("s{s}")
    }
}

/// The kernel side binds raw sun_path names relative to its cwd, so it reports them
/// without the scenario root, which its name decoding marks "!outside-root:"; a
/// relative name is what udsfs reports too.
fn rel(n: Name) -> Name {
    match &n {
        Name::Path(p) => match p.strip_prefix(b"!outside-root:".as_slice()) {
            Some(r) if !r.starts_with(b"/") => Name::Path(r.to_vec()),
            _ => n,
        },
        _ => n,
    }
}

fn show_name(b: &mut dyn Backend, r: &Res<Name>) -> String {
    match r {
        Ok(n) => format!("ok {}", b.trace().name(n)),
        Err(e) => format!("ERR {e}"),
    }
}

/// getsockname of a socket that may have a relative raw sun_path name.
fn getsockname_rel(b: &mut dyn Backend, s: Sock) -> Option<Name> {
    let r = b.raw_getsockname(s).map(rel);
    let res = show_name(b, &r);
    b.trace()
        .push(format!("getsockname({})", sock_name(s)), res);
    r.ok()
}

/// getpeername, peer possibly named by a relative raw sun_path.
fn getpeername_rel(b: &mut dyn Backend, s: Sock) -> Option<Name> {
    let r = b.raw_getpeername(s).map(rel);
    let res = show_name(b, &r);
    b.trace()
        .push(format!("getpeername({})", sock_name(s)), res);
    r.ok()
}

/// recvfrom, sender possibly named by a relative raw sun_path.
fn recvfrom_rel(b: &mut dyn Backend, s: Sock, bufsize: usize) {
    let r = b.raw_recvfrom(s, bufsize);
    let res = match r {
        Ok(m) => {
            let from = rel(m.from);
            format!("ok {} from={}", show_bytes(&m.data), b.trace().name(&from))
        }
        Err(e) => format!("ERR {e}"),
    };
    b.trace()
        .push(format!("recvfrom({}, {bufsize})", sock_name(s)), res);
}

/// Abstract sun_path bytes: NUL + name.
fn abs_sun(name: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(name);
    v
}

/// A path of exactly `n` bytes: `prefix` then 'p's, ending in ".sock".
fn long_path(prefix: &str, n: usize) -> String {
    let fill = n - prefix.len() - ".sock".len();
    format!("{prefix}{}.sock", "p".repeat(fill))
}

// ---------------------------------------------------------------------------
// Abstract names: bytes and lengths

/// Names made of NULs and names starting or ending with NUL are all distinct names
/// of their own; '@' is not NUL.
pub fn abstract_nul_names(b: &mut dyn Backend) {
    let names: [&[u8]; 6] = [b"\0", b"\0\0\0", b"\0a", b"a\0", b"@a", b"a\0b\0"];
    let mut socks = Vec::new();
    for n in names {
        let s = b.socket(Dgram);
        b.bind(s, ab(n));
        socks.push(s);
    }
    let dup = b.socket(Dgram);
    b.bind(dup, ab(b"\0a"));
    b.bind(dup, ab(b"\0\0"));
    b.getsockname(dup);
    for &s in &socks {
        b.getsockname(s);
    }
    let tx = b.socket(Dgram);
    b.bind(tx, ab(b"\0\0\0\0"));
    for (i, n) in names.iter().enumerate() {
        b.sendto(tx, format!("to {i}").as_bytes(), ab(n));
    }
    b.sendto(tx, b"nobody", ab(b"a"));
    b.sendto(tx, b"nobody", ab(b"a\0b"));
    for &s in &socks {
        b.recvfrom(s, 100);
        b.recv(s, 100);
    }
    b.connect(tx, ab(b"a\0"));
    b.getpeername(tx);
    b.send(tx, b"connected");
    b.recvfrom(socks[3], 100);
}

/// Control characters, DEL, high bytes, spaces, and a literal backslash-x sequence
/// (which must not be taken for an escape) are name bytes like any other.
pub fn abstract_nonprintable_names(b: &mut dyn Backend) {
    let lit: &[u8] = b"\\x41";
    let names: [&[u8]; 6] = [b"A", lit, b"\n\t \r", b"\x7f\x80\xfe\xff", b"\x1b[0m", b" "];
    let mut socks = Vec::new();
    for n in names {
        let s = b.socket(Dgram);
        b.bind(s, ab(n));
        b.getsockname(s);
        socks.push(s);
    }
    let tx = b.socket(Dgram);
    b.bind(tx, ab(b"\x01\x02 x\\"));
    for (i, n) in names.iter().enumerate() {
        b.sendto(tx, format!("to {i}").as_bytes(), ab(n));
    }
    for &s in &socks {
        b.recvfrom(s, 100);
    }
    let l = b.socket(Stream);
    b.bind(l, ab(b"\n\t \r"));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.bind(c, ab(b"\xff\x00\x01"));
    b.connect(c, ab(b"\n\t \r"));
    b.getpeername(c);
    let a = b.accept(l);
    b.getsockname(a);
    b.getpeername(a);
}

/// A 107-byte name holding every byte value 0..=106, and one of the bytes 149..=255.
pub fn abstract_all_byte_values(b: &mut dyn Backend) {
    let low: Vec<u8> = (0u8..=106).collect();
    let high: Vec<u8> = (149u8..=255).collect();
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(&low));
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(&high));
    b.getsockname(s1);
    b.sendto(s1, b"high to low", ab(&low));
    b.recvfrom(s0, 100);
    b.sendto(s0, b"low to high", ab(&high));
    b.recvfrom(s1, 100);
    let s2 = b.socket(Dgram);
    b.bind(s2, ab(&low));
    b.bind(s2, ab(&low[..106]));
    b.getsockname(s2);
    b.sendto(s1, b"to 106", ab(&low[..106]));
    b.recv(s2, 100);
    b.recv(s0, 100);
}

/// 107 bytes is the longest abstract name; 108 (addrlen 111) is EINVAL for bind,
/// connect and sendto, and leaves the socket unbound.
pub fn abstract_107_and_108(b: &mut dyn Backend) {
    let n107 = vec![b'n'; 107];
    let mut n108 = n107.clone();
    n108.push(b'n');
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(&n107));
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(&n107));
    b.bind_sun(s1, &abs_sun(&n108));
    b.getsockname(s1);
    b.connect_sun(s1, &abs_sun(&n108));
    b.sendto_sun(s1, b"x", &abs_sun(&n108));
    b.getpeername(s1);
    b.connect(s1, ab(&n107));
    b.getpeername(s1);
    b.send(s1, b"to 107");
    b.recvfrom(s0, 100);
    let l = b.socket(Stream);
    b.bind_sun(l, &abs_sun(&n108));
    b.bind(l, ab(&n107));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.connect_sun(c, &abs_sun(&n108));
    b.connect(c, ab(&n107));
    let a = b.accept(l);
    b.getsockname(a);
    let sq = b.socket(Seqpacket);
    b.bind_sun(sq, &abs_sun(&n108));
    b.getsockname(sq);
}

// ---------------------------------------------------------------------------
// Path names up to 108 bytes

/// Path names of 107 and 108 bytes (no room for the NUL) bind, show in getsockname
/// and recvfrom, and connect; 109 bytes (addrlen 111) is EINVAL.
pub fn path_names_up_to_108(b: &mut dyn Backend) {
    let p107 = long_path("", 107);
    let p108 = long_path("", 108);
    let p109 = long_path("", 109);
    let d108 = long_path("d/", 108);
    let s0 = b.socket(Dgram);
    b.bind_sun(s0, p107.as_bytes());
    getsockname_rel(b, s0);
    b.stat(&p107);
    let s1 = b.socket(Dgram);
    b.bind_sun(s1, p108.as_bytes());
    getsockname_rel(b, s1);
    b.stat(&p108);
    let s2 = b.socket(Dgram);
    b.bind_sun(s2, p109.as_bytes());
    getsockname_rel(b, s2);
    b.stat(&p109);
    b.connect_sun(s2, p109.as_bytes());
    b.sendto_sun(s2, b"x", p109.as_bytes());
    b.sendto_sun(s1, b"108 to 107", p107.as_bytes());
    recvfrom_rel(b, s0, 100);
    b.sendto_sun(s0, b"107 to 108", p108.as_bytes());
    recvfrom_rel(b, s1, 100);
    b.connect_sun(s2, p108.as_bytes());
    getpeername_rel(b, s2);
    b.send(s2, b"connected to 108");
    recvfrom_rel(b, s1, 100);
    b.mkdir("d");
    let l = b.socket(Stream);
    b.bind_sun(l, d108.as_bytes());
    getsockname_rel(b, l);
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.bind_sun(c, p109.as_bytes());
    b.connect_sun(c, d108.as_bytes());
    getpeername_rel(b, c);
    let a = b.accept(l);
    getsockname_rel(b, a);
    getpeername_rel(b, a);
    b.bind_sun(s2, d108.as_bytes());
    getsockname_rel(b, s2);
}

// ---------------------------------------------------------------------------
// Autobind

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
    let st = b.socket(Stream);
    b.bind(st, p("st.sock"));
    b.autobind(st);
    b.getsockname(st);
    b.listen(st, 5);
    b.autobind(st);
    b.getsockname(st);
    b.stat("st.sock");
    let sq = b.socket(Seqpacket);
    b.bind(sq, ab(b"sq"));
    b.autobind(sq);
    b.getsockname(sq);
    let c = b.socket(Stream);
    b.bind(c, p("c.sock"));
    b.passcred(c, true);
    b.connect(c, p("st.sock"));
    b.getsockname(c);
    let a = b.accept(st);
    b.getpeername(a);
    let d = b.socket(Dgram);
    b.bind(d, ab(b"d"));
    b.passcred(d, true);
    b.sendto(d, b"named", ab(b"d"));
    b.recvfrom(d, 100);
    b.getsockname(d);
}

/// An explicit bind after an implicit autobind (SO_PASSCRED connect / send) or an
/// explicit one on stream and seqpacket: EINVAL, and nothing is created.
pub fn bind_after_any_autobind(b: &mut dyn Backend) {
    let r = b.socket(Dgram);
    b.bind(r, p("r.sock"));
    let d = b.socket(Dgram);
    b.passcred(d, true);
    b.sendto(d, b"x", p("r.sock"));
    b.getsockname(d);
    b.bind(d, p("d.sock"));
    b.bind(d, ab(b"d"));
    b.stat("d.sock");
    b.getsockname(d);
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.passcred(c, true);
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
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    let c1 = b.socket(Stream);
    b.passcred(c1, true);
    b.getsockname(c1);
    b.connect(c1, p("l.sock"));
    b.getsockname(c1);
    let a1 = b.accept(l);
    b.getpeername(a1);
    b.getsockname(a1);
    let c2 = b.socket(Stream);
    b.connect(c2, p("l.sock"));
    b.getsockname(c2);
    let a2 = b.accept(l);
    b.getpeername(a2);
    let c3 = b.socket(Stream);
    b.passcred(c3, true);
    b.connect(c3, p("missing.sock"));
    b.getsockname(c3);
    let c4 = b.socket(Stream);
    b.passcred(c4, true);
    b.connect(c4, ab(b"missing"));
    b.getsockname(c4);
    let l2 = b.socket(Stream);
    b.bind(l2, ab(b"l2"));
    b.passcred(l2, true);
    b.listen(l2, 5);
    let c5 = b.socket(Stream);
    b.connect(c5, ab(b"l2"));
    b.getsockname(c5);
    let c6 = b.socket(Stream);
    b.passcred(c6, true);
    b.passcred(c6, false);
    b.connect(c6, ab(b"l2"));
    b.getsockname(c6);
    let dg = b.socket(Dgram);
    b.bind(dg, p("dg.sock"));
    let c7 = b.socket(Stream);
    b.passcred(c7, true);
    b.connect(c7, p("dg.sock"));
    b.getsockname(c7);
}

/// Seqpacket: SO_PASSCRED autobinds at connect and at send over a socketpair (its
/// send is the dgram send), unlike stream.
pub fn implicit_autobind_seqpacket(b: &mut dyn Backend) {
    let l = b.socket(Seqpacket);
    b.bind(l, ab(b"sq"));
    b.listen(l, 5);
    let c = b.socket(Seqpacket);
    b.passcred(c, true);
    b.connect(c, ab(b"sq"));
    b.getsockname(c);
    let a = b.accept(l);
    b.getpeername(a);
    let (x, y) = b.pair(Seqpacket);
    b.passcred(x, true);
    b.getsockname(x);
    b.send(x, b"x to y");
    b.getsockname(x);
    b.getpeername(y);
    b.recv(y, 100);
    b.send(y, b"y to x");
    b.getsockname(y);
    b.recv(x, 100);
    let u = b.socket(Seqpacket);
    b.passcred(u, true);
    b.send(u, b"unconnected");
    b.getsockname(u);
    let c2 = b.socket(Seqpacket);
    b.connect(c2, ab(b"sq"));
    b.getsockname(c2);
    b.passcred(c2, true);
    b.send(c2, b"passcred after connect");
    b.getsockname(c2);
    let a2 = b.accept(l);
    b.getpeername(a2);
    b.recv(a2, 100);
}

/// Dgram connect with SO_PASSCRED autobinds, also when the connect fails (ENOENT,
/// ECONNREFUSED), but not when the address itself is invalid (108-byte name).
pub fn implicit_autobind_dgram_connect(b: &mut dyn Backend) {
    let r = b.socket(Dgram);
    b.bind(r, p("r.sock"));
    let d1 = b.socket(Dgram);
    b.passcred(d1, true);
    b.connect(d1, p("r.sock"));
    b.getsockname(d1);
    b.send(d1, b"from d1");
    b.recvfrom(r, 100);
    let d2 = b.socket(Dgram);
    b.passcred(d2, true);
    b.connect(d2, p("missing.sock"));
    b.getsockname(d2);
    let d3 = b.socket(Dgram);
    b.passcred(d3, true);
    b.connect(d3, ab(b"missing"));
    b.getsockname(d3);
    let d4 = b.socket(Dgram);
    b.passcred(d4, true);
    b.connect_sun(d4, &abs_sun(&[b'n'; 108]));
    b.getsockname(d4);
    let d5 = b.socket(Dgram);
    b.connect(d5, p("r.sock"));
    b.getsockname(d5);
    b.send(d5, b"from d5");
    b.recvfrom(r, 100);
}

/// Dgram send with SO_PASSCRED autobinds the sender (the receiver sees the name),
/// also when the send fails with ENOTCONN, ECONNREFUSED or EMSGSIZE, but not for an
/// invalid address; a receiver's SO_PASSCRED does not name the sender.
pub fn implicit_autobind_dgram_send(b: &mut dyn Backend) {
    let r = b.socket(Dgram);
    b.bind(r, p("r.sock"));
    let d1 = b.socket(Dgram);
    b.passcred(d1, true);
    b.sendto(d1, b"passcred", p("r.sock"));
    b.getsockname(d1);
    b.recvfrom(r, 100);
    b.sendto(d1, b"again", p("r.sock"));
    b.recvfrom(r, 100);
    let d2 = b.socket(Dgram);
    b.sendto(d2, b"plain", p("r.sock"));
    b.recvfrom(r, 100);
    b.getsockname(d2);
    let r2 = b.socket(Dgram);
    b.bind(r2, ab(b"r2"));
    b.passcred(r2, true);
    let d3 = b.socket(Dgram);
    b.sendto(d3, b"to passcred receiver", ab(b"r2"));
    b.getsockname(d3);
    b.recvfrom(r2, 100);
    let d4 = b.socket(Dgram);
    b.passcred(d4, true);
    b.send(d4, b"unconnected");
    b.getsockname(d4);
    let d5 = b.socket(Dgram);
    b.passcred(d5, true);
    b.sendto(d5, b"x", ab(b"missing"));
    b.getsockname(d5);
    let d6 = b.socket(Dgram);
    b.passcred(d6, true);
    b.sendto_sun(d6, b"x", &abs_sun(&[b'n'; 108]));
    b.getsockname(d6);
    let d7 = b.socket(Dgram);
    b.passcred(d7, true);
    b.sendto(d7, &pattern(212_961), p("r.sock"));
    b.getsockname(d7);
    b.recv(r, 100);
}

/// A dgram socketpair: SO_PASSCRED on one end autobinds it at its first send; the
/// other end's getpeername and recvfrom show the name; the other end stays unnamed.
pub fn implicit_autobind_dgram_socketpair(b: &mut dyn Backend) {
    let (x, y) = b.pair(Dgram);
    b.getpeername(x);
    b.passcred(x, true);
    b.getsockname(x);
    b.send(x, b"x to y");
    b.getsockname(x);
    b.getpeername(y);
    b.recvfrom(y, 100);
    b.send(y, b"y to x");
    b.recvfrom(x, 100);
    b.getsockname(y);
    b.getpeername(x);
}

/// listen never autobinds (EINVAL unbound, with SO_PASSCRED too) and stream send
/// never does either; after an explicit autobind listen works.
pub fn no_autobind_listen_or_stream_send(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        let s = b.socket(ty);
        b.passcred(s, true);
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
    let l = b.socket(Stream);
    b.bind(l, ab(b"l"));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.connect(c, ab(b"l"));
    b.passcred(c, true);
    b.send(c, b"after connect");
    b.getsockname(c);
    let a = b.accept(l);
    b.getpeername(a);
    b.recv(a, 100);
}

/// One autobound name held by a dgram, a stream and a seqpacket socket at once (each
/// type has its own abstract namespace); each client type reaches its own.
pub fn autobind_name_shared_by_types(b: &mut dyn Backend) {
    let d = b.socket(Dgram);
    b.autobind(d);
    let Some(Name::Abstract(n)) = b.getsockname(d).ok() else {
        return;
    };
    let st = b.socket(Stream);
    b.bind(st, ab(&n));
    b.getsockname(st);
    let sq = b.socket(Seqpacket);
    b.bind(sq, ab(&n));
    let d2 = b.socket(Dgram);
    b.bind(d2, ab(&n));
    b.listen(st, 5);
    let cs = b.socket(Stream);
    b.connect(cs, ab(&n));
    b.getpeername(cs);
    let a = b.accept(st);
    b.getsockname(a);
    let cq = b.socket(Seqpacket);
    b.connect(cq, ab(&n));
    let cd = b.socket(Dgram);
    b.sendto(cd, b"to the dgram one", ab(&n));
    b.recvfrom(d, 100);
    b.close(d);
    b.sendto(cd, b"gone", ab(&n));
    b.bind(d2, ab(&n));
    b.getsockname(d2);
    b.sendto(cd, b"to the new dgram one", ab(&n));
    b.recv(d2, 100);
    let cs2 = b.socket(Stream);
    b.connect(cs2, ab(&n));
}

// ---------------------------------------------------------------------------
// Names held and freed

/// An abstract name stays in use while any handle of its socket is open, and is
/// freed when the last one closes (dgram and stream listener).
pub fn abstract_name_held_by_any_handle(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(b"x"));
    let h = b.dup(s0);
    b.drop_handle(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(b"x"));
    b.sendto(s1, b"still there", ab(b"x"));
    b.recvfrom(h, 100);
    b.getsockname(h);
    b.close(h);
    b.sendto(s1, b"gone", ab(b"x"));
    b.bind(s1, ab(b"x"));
    b.getsockname(s1);
    let l = b.socket(Stream);
    b.bind(l, ab(b"srv"));
    b.listen(l, 5);
    let lh = b.dup(l);
    b.drop_handle(l);
    let l2 = b.socket(Stream);
    b.bind(l2, ab(b"srv"));
    let c = b.socket(Stream);
    b.connect(c, ab(b"srv"));
    let a = b.accept(lh);
    b.getsockname(a);
    b.close(lh);
    let c2 = b.socket(Stream);
    b.connect(c2, ab(b"srv"));
    b.bind(l2, ab(b"srv"));
    b.getsockname(a);
}

/// A stream or seqpacket listener's abstract name is freed when it closes, even
/// while accepted connections (which show the name) live on; the name can then be
/// bound again.
pub fn abstract_freed_with_live_connections(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        let l = b.socket(ty);
        b.bind(l, ab(b"srv"));
        b.listen(l, 5);
        let c = b.socket(ty);
        b.connect(c, ab(b"srv"));
        let a = b.accept(l);
        let pending = b.socket(ty);
        b.connect(pending, ab(b"srv"));
        b.close(l);
        let c2 = b.socket(ty);
        b.connect(c2, ab(b"srv"));
        b.getsockname(a);
        b.getpeername(c);
        b.send(c, b"still connected");
        b.recv(a, 100);
        let l2 = b.socket(ty);
        b.bind(l2, ab(b"srv"));
        b.listen(l2, 5);
        b.connect(c2, ab(b"srv"));
        b.getpeername(c2);
        b.close(a);
        b.close(c);
        b.close(pending);
        b.close(l2);
        b.close(c2);
    }
}

// ---------------------------------------------------------------------------
// Path nodes: hard links, rename, mknod, directories

/// A hard link reaches the socket (lookup is by inode); the peer name is the bound
/// one; the link survives the removal of the original name.
pub fn connect_via_hard_link(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    b.link("a.sock", "b.sock");
    b.stat("b.sock");
    let s1 = b.socket(Dgram);
    b.connect(s1, p("b.sock"));
    b.getpeername(s1);
    b.send(s1, b"via hard link");
    b.recvfrom(s0, 100);
    b.rm("a.sock");
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"via link only", p("b.sock"));
    b.recv(s0, 100);
    b.connect(s2, p("a.sock"));
    let s3 = b.socket(Dgram);
    b.bind(s3, p("b.sock"));
    b.bind(s3, p("a.sock"));
    b.getsockname(s0);
    b.mkdir("d");
    let l = b.socket(Stream);
    b.bind(l, p("d/l.sock"));
    b.listen(l, 5);
    b.link("d/l.sock", "l2.sock");
    b.link("d", "d2");
    let c = b.socket(Stream);
    b.connect(c, p("l2.sock"));
    b.getpeername(c);
    let a = b.accept(l);
    b.getsockname(a);
    b.close(l);
    let c2 = b.socket(Stream);
    b.connect(c2, p("l2.sock"));
    b.connect(c2, p("d/l.sock"));
}

/// Renaming a listener's node, its directory, or over another socket's node: the
/// new path reaches it, getsockname (and the accepted sockets' names and clients'
/// peer names) keep the bound path.
pub fn rename_keeps_getsockname(b: &mut dyn Backend) {
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    b.rename("l.sock", "m.sock");
    b.getsockname(l);
    let c = b.socket(Stream);
    b.connect(c, p("l.sock"));
    b.connect(c, p("m.sock"));
    b.getpeername(c);
    let a = b.accept(l);
    b.getsockname(a);
    b.mkdir("d");
    let s0 = b.socket(Dgram);
    b.bind(s0, p("d/x.sock"));
    b.rename("d", "e");
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.sendto(s1, b"via e", p("e/x.sock"));
    b.recvfrom(s0, 100);
    b.sendto(s1, b"via d", p("d/x.sock"));
    let s2 = b.socket(Dgram);
    b.bind(s2, p("y.sock"));
    b.rename("e/x.sock", "y.sock");
    b.sendto(s1, b"to y", p("y.sock"));
    b.recv(s0, 100);
    b.recv(s2, 100);
    b.getsockname(s2);
    b.getsockname(s0);
    b.connect(s1, p("y.sock"));
    b.getpeername(s1);
}

/// bind after connect is allowed, and the peer's getpeername shows the new name
/// (it reads the peer's current address): dgram and seqpacket pairs, and a stream
/// client seen from the accepted socket.
pub fn bind_after_connect_changes_peername(b: &mut dyn Backend) {
    let (x, y) = b.pair(Dgram);
    b.getpeername(x);
    b.bind(y, p("y.sock"));
    b.getpeername(x);
    b.send(y, b"from y");
    b.recvfrom(x, 100);
    let (u, v) = b.pair(Seqpacket);
    b.bind(v, ab(b"v"));
    b.getpeername(u);
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.connect(c, p("l.sock"));
    let a = b.accept(l);
    b.getpeername(a);
    b.bind(c, p("c.sock"));
    b.getpeername(a);
    b.getsockname(c);
    b.stat("c.sock");
    let c2 = b.socket(Stream);
    b.connect(c2, p("l.sock"));
    b.autobind(c2);
    let a2 = b.accept(l);
    b.getpeername(a2);
    let d = b.socket(Dgram);
    b.connect(d, p("y.sock"));
    b.bind(d, ab(b"late"));
    b.send(d, b"from late");
    b.recvfrom(y, 100);
}

/// Accepted sockets: getsockname is the listener's name, getpeername the client's
/// (path, abstract, autobound, or unnamed), for path and abstract listeners, also
/// after the listener's node is removed.
pub fn accepted_socket_names(b: &mut dyn Backend) {
    for (ty, laddr) in [(Stream, p("l.sock")), (Seqpacket, ab(b"lq"))] {
        let l = b.socket(ty);
        b.bind(l, laddr.clone());
        b.listen(l, 10);
        let c1 = b.socket(ty);
        b.connect(c1, laddr.clone());
        let c2 = b.socket(ty);
        b.bind(c2, p(&format!("c2-{}.sock", ty.name())));
        b.connect(c2, laddr.clone());
        let c3 = b.socket(ty);
        b.bind(c3, ab(b"c3"));
        b.connect(c3, laddr.clone());
        let c4 = b.socket(ty);
        b.autobind(c4);
        b.connect(c4, laddr.clone());
        for c in [c1, c2, c3, c4] {
            let a = b.accept(l);
            b.getsockname(a);
            b.getpeername(a);
            b.getpeername(c);
        }
    }
    b.rm("l.sock");
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    let c = b.socket(Stream);
    b.connect(c, p("l.sock"));
    b.rm("l.sock");
    let a = b.accept(l);
    b.getsockname(a);
    b.getsockname(l);
}

/// A socket node made by mknod has no socket behind it: connect and sendto give
/// ECONNREFUSED for every type, bind over it EADDRINUSE; its mode is 0666 & ~umask.
pub fn mknod_socket_node(b: &mut dyn Backend) {
    b.mknod_sock("n.sock");
    b.stat("n.sock");
    b.owner("n.sock");
    b.mknod_sock("n.sock");
    b.mknod_sock("nodir/n.sock");
    let d = b.socket(Dgram);
    b.connect(d, p("n.sock"));
    b.sendto(d, b"x", p("n.sock"));
    let st = b.socket(Stream);
    b.connect(st, p("n.sock"));
    let sq = b.socket(Seqpacket);
    b.connect(sq, p("n.sock"));
    b.symlink("n.sock", "ln.sock");
    b.connect(st, p("ln.sock"));
    b.link("n.sock", "hard.sock");
    b.connect(st, p("hard.sock"));
    let s = b.socket(Dgram);
    b.bind(s, p("n.sock"));
    b.getsockname(s);
    b.rm("n.sock");
    b.bind(s, p("n.sock"));
    b.connect(d, p("n.sock"));
    b.send(d, b"now bound");
    b.recv(s, 100);
    b.connect(d, p("hard.sock"));
}

/// Directories are not sockets: ECONNREFUSED for every type, by name, ".", a
/// trailing slash or a symlink; bind over "." or ".." is EADDRINUSE.
pub fn connect_directory_cases(b: &mut dyn Backend) {
    b.mkdir("d");
    b.symlink("d", "dl");
    for ty in [Seqpacket, Stream] {
        let s = b.socket(ty);
        b.connect(s, p("d"));
        b.connect(s, p("d/"));
        b.connect(s, p("."));
        b.connect(s, p("dl"));
        b.connect(s, p("d/.."));
    }
    let s = b.socket(Dgram);
    b.connect(s, p("."));
    b.sendto(s, b"x", p("d/"));
    b.sendto(s, b"x", p("dl"));
    b.bind(s, p("."));
    b.bind(s, p("d/.."));
    b.bind(s, p("d/."));
    b.getsockname(s);
    b.bind(s, p("dl/a.sock"));
    b.getsockname(s);
    b.stat("d/a.sock");
}

// ---------------------------------------------------------------------------
// Permissions (uid/gid 65534 on an --allow-other mount)

/// Connecting needs write permission on the node: 755 → EACCES for stream connect,
/// dgram connect and dgram sendto; mode 002 (write for others only) → OK. Root
/// connects whatever the mode.
pub fn perm_connect_needs_write(b: &mut dyn Backend) {
    b.multiuser();
    let l = b.socket(Stream);
    b.bind(l, p("l.sock"));
    b.listen(l, 5);
    let r = b.socket(Dgram);
    b.bind(r, p("r.sock"));
    let q = b.socket(Seqpacket);
    b.bind(q, p("q.sock"));
    b.listen(q, 5);
    b.stat("l.sock");
    b.as_user(NOBODY, NOBODY);
    let c = b.socket(Stream);
    b.connect(c, p("l.sock"));
    let cq = b.socket(Seqpacket);
    b.connect(cq, p("q.sock"));
    let d = b.socket(Dgram);
    b.connect(d, p("r.sock"));
    b.sendto(d, b"x", p("r.sock"));
    b.chmod("r.sock", 0o777);
    b.as_root();
    b.chmod("l.sock", 0o002);
    b.chmod("r.sock", 0o002);
    b.chmod("q.sock", 0o757);
    b.as_user(NOBODY, NOBODY);
    b.connect(c, p("l.sock"));
    b.connect(cq, p("q.sock"));
    b.sendto(d, b"mode 002", p("r.sock"));
    b.connect(d, p("r.sock"));
    b.send(d, b"connected");
    b.as_root();
    let a = b.accept(l);
    b.getpeername(a);
    b.recv(r, 100);
    b.recv(r, 100);
    b.chmod("l.sock", 0o000);
    b.chmod("r.sock", 0o000);
    let rc = b.socket(Stream);
    b.connect(rc, p("l.sock"));
    let rd = b.socket(Dgram);
    b.sendto(rd, b"root", p("r.sock"));
    b.recv(r, 100);
    b.stat("r.sock");
}

/// The permission class decides: the owner's bits for the owner (even if others may
/// write), the group's bits for a member of the group, else the others' bits.
pub fn perm_owner_group_other_classes(b: &mut dyn Backend) {
    b.multiuser();
    let r = b.socket(Dgram);
    b.bind(r, p("r.sock"));
    let cases: [(u32, u32, u32); 6] = [
        (NOBODY, 0, 0o577),
        (NOBODY, 0, 0o200),
        (0, NOBODY, 0o757),
        (0, NOBODY, 0o020),
        (0, 0, 0o775),
        (0, 0, 0o002),
    ];
    for (uid, gid, mode) in cases {
        b.chown("r.sock", uid, gid);
        b.chmod("r.sock", mode);
        b.as_user(NOBODY, NOBODY);
        let d = b.socket(Dgram);
        b.connect(d, p("r.sock"));
        b.sendto(d, b"x", p("r.sock"));
        b.close(d);
        b.as_root();
        b.recv(r, 100);
        b.recv(r, 100);
    }
}

/// Search permission on every directory of the path: without it connect, sendto,
/// bind and stat are EACCES (also through a symlink); search alone lets connect
/// through but not bind; bind needs write and search.
pub fn perm_directory_search_and_write(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    let r = b.socket(Dgram);
    b.bind(r, p("d/r.sock"));
    b.chmod("d/r.sock", 0o777);
    b.symlink("d/r.sock", "link.sock");
    b.chmod("d", 0o700);
    b.as_user(NOBODY, NOBODY);
    let c = b.socket(Dgram);
    b.connect(c, p("d/r.sock"));
    b.sendto(c, b"x", p("d/r.sock"));
    b.sendto(c, b"x", p("link.sock"));
    b.stat("d/r.sock");
    let s = b.socket(Dgram);
    b.bind(s, p("d/s.sock"));
    b.as_root();
    b.chmod("d", 0o711);
    b.as_user(NOBODY, NOBODY);
    b.sendto(c, b"search only", p("d/r.sock"));
    b.stat("d/r.sock");
    b.bind(s, p("d/s.sock"));
    b.as_root();
    b.chmod("d", 0o733);
    b.as_user(NOBODY, NOBODY);
    b.bind(s, p("d/s.sock"));
    b.stat("d/s.sock");
    b.owner("d/s.sock");
    b.as_root();
    b.recv(r, 100);
    b.recv(r, 100);
    b.mkdir("d/e");
    b.chmod("d/e", 0o777);
    b.chmod("d", 0o600);
    b.as_user(NOBODY, NOBODY);
    let t = b.socket(Dgram);
    b.bind(t, p("d/e/t.sock"));
    b.as_root();
    b.chmod("d", 0o755);
}

/// bind needs write permission on the directory: a root-owned 755 directory is
/// EACCES; the sticky mount root accepts the bind and the node belongs to the
/// binder; nobody cannot remove root's node from the sticky root (EPERM).
pub fn perm_bind_needs_dir_write(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    let rs = b.socket(Dgram);
    b.bind(rs, p("root.sock"));
    b.as_user(NOBODY, NOBODY);
    let s = b.socket(Dgram);
    b.bind(s, p("d/x.sock"));
    b.stat("d/x.sock");
    b.getsockname(s);
    b.bind(s, p("x.sock"));
    b.getsockname(s);
    b.stat("x.sock");
    b.owner("x.sock");
    b.rm("root.sock");
    b.mkdir("mine");
    b.owner("mine");
    let t = b.socket(Stream);
    b.bind(t, p("mine/t.sock"));
    b.owner("mine/t.sock");
    b.as_root();
    b.rm("mine/t.sock");
    b.chmod("d", 0o777);
    b.as_user(NOBODY, NOBODY);
    let u = b.socket(Dgram);
    b.bind(u, p("d/x.sock"));
    b.owner("d/x.sock");
    b.as_root();
}

/// Root bypasses permissions: binds in a mode-000 directory, connects to a mode-000
/// node in it; an unprivileged user cannot.
pub fn perm_root_bypasses(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    b.chmod("d", 0o000);
    let l = b.socket(Stream);
    b.bind(l, p("d/l.sock"));
    b.listen(l, 5);
    b.chmod("d/l.sock", 0o000);
    b.stat("d/l.sock");
    let c = b.socket(Stream);
    b.connect(c, p("d/l.sock"));
    let r = b.socket(Dgram);
    b.bind(r, p("d/r.sock"));
    b.chmod("d/r.sock", 0o000);
    let s = b.socket(Dgram);
    b.sendto(s, b"root", p("d/r.sock"));
    b.recv(r, 100);
    b.as_user(NOBODY, NOBODY);
    let c2 = b.socket(Stream);
    b.connect(c2, p("d/l.sock"));
    b.stat("d/l.sock");
    b.as_root();
    b.chmod("d", 0o777);
    b.as_user(NOBODY, NOBODY);
    b.connect(c2, p("d/l.sock"));
    b.as_root();
    b.accept(l);
    b.chmod("d", 0o755);
}

/// Abstract names have no permissions: an unprivileged user connects and sends to
/// root's abstract sockets, and root to the user's.
pub fn perm_abstract_no_permissions(b: &mut dyn Backend) {
    b.multiuser();
    let l = b.socket(Stream);
    b.bind(l, ab(b"root-srv"));
    b.listen(l, 5);
    let r = b.socket(Dgram);
    b.bind(r, ab(b"root-dg"));
    b.as_user(NOBODY, NOBODY);
    let c = b.socket(Stream);
    b.connect(c, ab(b"root-srv"));
    b.getpeername(c);
    let d = b.socket(Dgram);
    b.bind(d, ab(b"user-dg"));
    b.sendto(d, b"from nobody", ab(b"root-dg"));
    b.connect(d, ab(b"root-dg"));
    b.send(d, b"connected");
    let ul = b.socket(Seqpacket);
    b.bind(ul, ab(b"user-sq"));
    b.listen(ul, 5);
    let ud = b.socket(Dgram);
    b.bind(ud, ab(b"user-rx"));
    b.as_root();
    let a = b.accept(l);
    b.getpeername(a);
    b.recvfrom(r, 100);
    b.recvfrom(r, 100);
    let rd = b.socket(Dgram);
    b.sendto(rd, b"from root", ab(b"user-rx"));
    let rq = b.socket(Seqpacket);
    b.connect(rq, ab(b"user-sq"));
    b.getpeername(rq);
    b.as_user(NOBODY, NOBODY);
    b.recvfrom(ud, 100);
    b.as_root();
}

/// A node's mode is 0777 & ~umask of the binding thread (022 → 755, 077 → 700, 0 →
/// 777, 027 → 750), its owner the binder; a node made with umask 777 has mode 000
/// and only root connects.
pub fn umask_node_modes(b: &mut dyn Backend) {
    b.multiuser();
    let old = b.umask(0o022).ok();
    let mut keep = Vec::new();
    for (i, mask) in [0o022u32, 0o077, 0o000, 0o027, 0o777]
        .into_iter()
        .enumerate()
    {
        b.umask(mask);
        let s = b.socket(Dgram);
        let path = format!("u{i}.sock");
        b.bind(s, p(&path));
        b.stat(&path);
        keep.push(s);
    }
    b.umask(0o077);
    b.mkdir("d077");
    b.stat("d077");
    b.mknod_sock("m077.sock");
    b.stat("m077.sock");
    b.umask(0o022);
    let d = b.socket(Dgram);
    b.sendto(d, b"root to 000", p("u4.sock"));
    b.recv(keep[4], 100);
    b.as_user(NOBODY, NOBODY);
    b.umask(0o002);
    let us = b.socket(Stream);
    b.bind(us, p("user.sock"));
    b.stat("user.sock");
    b.owner("user.sock");
    b.umask(0o000);
    let ud = b.socket(Dgram);
    b.sendto(ud, b"nobody to 000", p("u4.sock"));
    b.sendto(ud, b"nobody to 777", p("u2.sock"));
    b.bind(ud, p("user0.sock"));
    b.stat("user0.sock");
    b.as_root();
    b.recv(keep[2], 100);
    if let Some(o) = old {
        b.umask(o);
    }
}

/// Connecting to a directory checks write permission first: a directory the user
/// may not write is EACCES, a writable one ECONNREFUSED.
pub fn perm_connect_directory(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("ro");
    b.mkdir("rw");
    b.chmod("rw", 0o777);
    b.as_user(NOBODY, NOBODY);
    for ty in [Stream, Dgram, Seqpacket] {
        let s = b.socket(ty);
        b.connect(s, p("ro"));
        b.connect(s, p("rw"));
        b.connect(s, p("."));
    }
    let d = b.socket(Dgram);
    b.sendto(d, b"x", p("ro"));
    b.sendto(d, b"x", p("rw"));
    b.as_root();
}

// ---------------------------------------------------------------------------
// Checks that compare no traces (issue 4): `.udsfs/unix` against /proc/net/unix,
// and the connect view / abstract directory one-liners.

/// One row of /proc/net/unix (or `.udsfs/unix`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnixRow {
    pub flags: u32,
    pub ty: u16,
    pub st: u8,
    pub path: Option<String>,
    pub refcount: u32,
    pub inode: u64,
}

/// The header line of /proc/net/unix.
const UNIX_HEADER: &str = "Num       RefCount Protocol Flags    Type St Inode Path";

/// Parses the /proc/net/unix format strictly (the kernel's `unix_seq_show`):
/// `%pK: %08X %08X %08X %04X %02X %5lu` and, for a named socket, a space and the
/// path (abstract names as `@name`).
pub fn parse_unix_table(text: &str) -> Result<Vec<UnixRow>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim_end() == UNIX_HEADER => {}
        other => return Err(format!("header {other:?}, expected {UNIX_HEADER:?}")),
    }
    let hex = |s: &str, width: usize, what: &str, line: &str| -> Result<u64, String> {
        if s.len() != width || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{what} {s:?} is not {width} hex digits in {line:?}"
            ));
        }
        u64::from_str_radix(s, 16).map_err(|e| format!("{what} {s:?}: {e}"))
    };
    let mut rows = Vec::new();
    for line in lines {
        let (num, rest) = line
            .split_once(": ")
            .ok_or_else(|| format!("no \"Num: \" in {line:?}"))?;
        if num.is_empty() || !num.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("Num {num:?} is not hex in {line:?}"));
        }
        let field = |a: usize, b: usize| rest.get(a..b).unwrap_or("");
        let refcount = hex(field(0, 8), 8, "RefCount", line)? as u32;
        let protocol = hex(field(9, 17), 8, "Protocol", line)?;
        let flags = hex(field(18, 26), 8, "Flags", line)? as u32;
        let ty = hex(field(27, 31), 4, "Type", line)? as u16;
        let st = hex(field(32, 34), 2, "St", line)? as u8;
        for i in [8, 17, 26, 31, 34] {
            if rest.as_bytes().get(i) != Some(&b' ') {
                return Err(format!(
                    "no space at column {i} after \"Num: \" in {line:?}"
                ));
            }
        }
        if protocol != 0 {
            return Err(format!("Protocol {protocol} in {line:?}"));
        }
        let tail = rest.get(35..).unwrap_or("");
        // %5lu: at least 5 characters, right-aligned.
        let digits_end = tail
            .find(|c: char| c != ' ' && !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let inode_field = match tail[..digits_end].rfind(|c: char| c.is_ascii_digit()) {
            Some(end) => &tail[..=end],
            None => return Err(format!("no Inode in {line:?}")),
        };
        if inode_field.len() < 5 || inode_field.trim_start().contains(' ') {
            return Err(format!("Inode {inode_field:?} is not %5lu in {line:?}"));
        }
        let inode: u64 = inode_field
            .trim_start()
            .parse()
            .map_err(|e| format!("Inode {inode_field:?}: {e}"))?;
        let after = &tail[inode_field.len()..];
        let path = if after.is_empty() {
            None
        } else if let Some(p) = after.strip_prefix(' ') {
            Some(p.to_string())
        } else {
            return Err(format!("no space before Path in {line:?}"));
        };
        rows.push(UnixRow {
            flags,
            ty,
            st,
            path,
            refcount,
            inode,
        });
    }
    Ok(rows)
}

/// The sockets both tables are made of: a stream listener on an abstract name with
/// a NUL inside, one client accepted and one not (an embryo), a dgram socket on a
/// path, a seqpacket listener, an unbound dgram socket. Returns nothing: the table
/// is read afterwards, while `b` still holds the sockets.
fn unix_table_setup(b: &mut dyn Backend) {
    let l = b.socket(Stream);
    b.bind(l, ab(b"lis\0x"));
    b.listen(l, 5);
    let c1 = b.socket(Stream);
    b.connect(c1, ab(b"lis\0x"));
    let c2 = b.socket(Stream);
    b.connect(c2, ab(b"lis\0x"));
    b.accept(l);
    let d = b.socket(Dgram);
    b.bind(d, p("d.sock"));
    let q = b.socket(Seqpacket);
    b.bind(q, ab(b"sq"));
    b.listen(q, 1);
    b.socket(Dgram);
    assert!(
        !b.trace()
            .entries
            .iter()
            .any(|(_, r)| r.starts_with("ERR") || r.contains("HARNESS")),
        "setup failed: {:?}",
        b.trace().entries
    );
}

/// (flags, type, state, path) of every row, sorted, with absolute paths cut to
/// their last component (the kernel shows the full path, udsfs the mount-relative
/// one).
fn unix_table_summary(rows: &[UnixRow]) -> Vec<(u32, u16, u8, Option<String>)> {
    let mut v: Vec<_> = rows
        .iter()
        .map(|r| {
            let path = r.path.as_ref().map(|p| {
                if p.starts_with('/') {
                    p.rsplit('/').next().unwrap_or(p).to_string()
                } else {
                    p.clone()
                }
            });
            (r.flags, r.ty, r.st, path)
        })
        .collect();
    v.sort();
    v
}

fn check_unix_rows(side: &str, rows: &[UnixRow]) {
    let s = unix_table_summary(rows);
    let lis = Some("@lis@x".to_string());
    let count = |want: (u32, u16, u8, Option<String>)| s.iter().filter(|r| **r == want).count();
    // The listener.
    assert_eq!(
        count((0x10000, 1, 1, lis.clone())),
        1,
        "{side}: listener row in {s:?}"
    );
    // The embryo (connected, not accepted), listed under the listener's name.
    assert_eq!(
        count((0, 1, 2, lis.clone())),
        1,
        "{side}: embryo row in {s:?}"
    );
    // The accepted socket shows the listener's name.
    assert_eq!(count((0, 1, 3, lis)), 1, "{side}: accepted row in {s:?}");
    // The two clients: connected, unnamed.
    assert_eq!(count((0, 1, 3, None)), 2, "{side}: client rows in {s:?}");
    assert_eq!(
        count((0, 2, 1, Some("d.sock".to_string()))),
        1,
        "{side}: dgram row in {s:?}"
    );
    assert_eq!(
        count((0x10000, 5, 1, Some("@sq".to_string()))),
        1,
        "{side}: seqpacket listener row in {s:?}"
    );
    assert_eq!(
        count((0, 2, 1, None)),
        1,
        "{side}: unbound dgram row in {s:?}"
    );
    assert_eq!(s.len(), 8, "{side}: rows {s:?}");
}

/// `.udsfs/unix` parses with the same parser as /proc/net/unix and, for the same
/// sockets, gives the same rows (flags, type, state, path).
#[test]
fn unix_table_matches_proc_net_unix() {
    super::require_root();
    let kernel_text = std::thread::spawn(|| {
        // SAFETY: plain syscall; this thread only.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let mut k = super::kernel::Kernel::new();
        unix_table_setup(&mut k);
        // /proc/net is the thread-group leader's namespace; thread-self is ours.
        std::fs::read_to_string("/proc/thread-self/net/unix").expect("read /proc/net/unix")
    })
    .join()
    .expect("kernel side");
    let mount = super::mount::Mount::new();
    let table = mount.path().join(".udsfs/unix");
    let mut u = super::udsfs::Udsfs::new(mount);
    unix_table_setup(&mut u);
    let udsfs_text = std::fs::read_to_string(&table).expect("read .udsfs/unix");
    let k = parse_unix_table(&kernel_text)
        .unwrap_or_else(|e| panic!("/proc/net/unix: {e}\n{kernel_text}"));
    let uu =
        parse_unix_table(&udsfs_text).unwrap_or_else(|e| panic!(".udsfs/unix: {e}\n{udsfs_text}"));
    check_unix_rows("kernel", &k);
    check_unix_rows("udsfs", &uu);
    assert_eq!(
        unix_table_summary(&k),
        unix_table_summary(&uu),
        "kernel:\n{kernel_text}\nudsfs:\n{udsfs_text}"
    );
    // Inodes: distinct for live sockets, 0 only for the embryo (as the kernel).
    for (side, rows) in [("kernel", &k), ("udsfs", &uu)] {
        let zero: Vec<_> = rows.iter().filter(|r| r.inode == 0).collect();
        assert!(
            zero.len() <= 1 && zero.iter().all(|r| r.st == 2),
            "{side}: inode 0 rows {zero:?}"
        );
        for r in rows {
            assert!(r.refcount >= 1, "{side}: refcount of {r:?}");
        }
    }
    drop(u);
}

fn sh(cmd: &str) -> std::process::Output {
    let _spawning = crate::backend::spawn_guard();
    std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("run sh")
}

/// Non-blocking accept, retried for up to 5 s.
fn accept_within(b: &mut dyn Backend, l: Sock) -> Sock {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match b.raw_accept(l) {
            Ok(a) => return a,
            Err(e) if e == "EAGAIN" && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Receive on a stream socket until EOF (non-blocking reads, retried for 5 s).
fn recv_to_eof(b: &mut dyn Backend, s: Sock) -> Vec<u8> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        match b.raw_recv(s, 4096) {
            Ok(d) if d.is_empty() => return out,
            Ok(d) => out.extend_from_slice(&d),
            Err(e) if e == "EAGAIN" && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => panic!("recv: {e} after {out:?}"),
        }
    }
}

/// The short way (SPEC §4): `echo` into a connect-view node sends a datagram or
/// a stream connection's bytes, `cat` prints what a stream server sends until EOF,
/// an `.udsfs/abstract/NAME` entry opened O_RDWR is a two-way connection; many
/// openers of one name at once all get through quickly, also while another opener
/// is blocked on a full backlog.
#[test]
fn connect_view_one_liners() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    super::require_root();
    let mount = super::mount::Mount::new();
    let mnt = mount.path().to_path_buf();
    let cv = |rel: &str| mnt.join(".udsfs/connect").join(rel);
    let mut u = super::udsfs::Udsfs::new(mount);
    let b: &mut dyn Backend = &mut u;

    // echo > dgram node: one datagram.
    b.mkdir("run");
    let log = b.socket(Dgram);
    b.bind(log, p("run/log.sock"));
    let out = sh(&format!("echo hi > '{}'", cv("run/log.sock").display()));
    assert!(out.status.success(), "echo to dgram: {out:?}");
    assert_eq!(b.recv(log, 100).ok(), Some(b"hi\n".to_vec()));
    assert_eq!(b.recv(log, 100).0, Err("EAGAIN".to_string()));

    // echo > stream node: a connection carrying "hi\n", then EOF.
    let x = b.socket(Stream);
    b.bind(x, p("x"));
    b.listen(x, 5);
    let out = sh(&format!("echo hi > '{}'", cv("x").display()));
    assert!(out.status.success(), "echo to stream: {out:?}");
    let a = accept_within(b, x);
    assert_eq!(recv_to_eof(b, a), b"hi\n");
    b.close(a);

    // cat < stream node: what the server sends, until EOF.
    let child = {
        let _spawning = crate::backend::spawn_guard();
        std::process::Command::new("cat")
            .arg(cv("x"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn cat")
    };
    let a = accept_within(b, x);
    assert_eq!(b.send(a, b"hello from x\n").ok(), Some(13));
    b.close(a);
    let out = child.wait_with_output().expect("cat");
    assert!(out.status.success(), "cat: {out:?}");
    assert_eq!(out.stdout, b"hello from x\n");

    // .udsfs/abstract/echo opened O_RDWR: a two-way connection.
    let e = b.socket(Stream);
    b.bind(e, ab(b"echo"));
    b.listen(e, 5);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join(".udsfs/abstract/echo"))
        .expect("open .udsfs/abstract/echo");
    let a = accept_within(b, e);
    f.write_all(b"ping").expect("write ping");
    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        match b.raw_recv(a, 100) {
            Ok(d) => break d,
            Err(err) if err == "EAGAIN" && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(err) => panic!("server recv: {err}"),
        }
    };
    assert_eq!(got, b"ping");
    assert_eq!(b.send(a, b"pong").ok(), Some(4));
    let mut buf = [0u8; 16];
    let n = f.read(&mut buf).expect("read pong");
    assert_eq!(&buf[..n], b"pong");
    drop(f);
    assert_eq!(recv_to_eof(b, a), b"");
    b.close(a);

    // A blocked opener (backlog 0, already one connection queued) ...
    let full = b.socket(Stream);
    b.bind(full, p("full.sock"));
    b.listen(full, 0);
    let first = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(cv("full.sock"))
        .expect("first open of full.sock");
    let blocked_path = cv("full.sock");
    let blocked = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(blocked_path)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !blocked.is_finished(),
        "open of a full listener did not block"
    );

    // ... does not hold up 50 concurrent openers of another name (backlog 64).
    let many = b.socket(Stream);
    b.bind(many, p("many.sock"));
    b.listen(many, 64);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(50));
    let t0 = Instant::now();
    let openers: Vec<_> = (0..50)
        .map(|_| {
            let path = cv("many.sock");
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let t = Instant::now();
                let r = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path);
                (r.map_err(|e| e.to_string()), t.elapsed())
            })
        })
        .collect();
    let mut files = Vec::new();
    for h in openers {
        let (r, took) = h.join().expect("opener thread");
        files.push(r.expect("concurrent open of many.sock"));
        assert!(took < Duration::from_secs(2), "one open took {took:?}");
    }
    let all = t0.elapsed();
    assert!(
        all < Duration::from_secs(3),
        "50 concurrent opens took {all:?}"
    );
    let mut accepted = 0;
    while b.raw_accept(many).is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 50);
    assert!(
        !blocked.is_finished(),
        "the blocked opener finished by itself"
    );

    // Accepting on the full listener lets the blocked opener through.
    accept_within(b, full);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !blocked.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        blocked.is_finished(),
        "accept did not release the blocked opener"
    );
    assert_eq!(blocked.join().expect("blocked opener"), Ok(()));
    drop(first);
    drop(files);
    drop(u);
}

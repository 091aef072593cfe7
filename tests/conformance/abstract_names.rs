//! Abstract names: one name space per type, any bytes (NUL, control characters, high
//! bytes), full-length comparison, the 107/108-byte limits, and when a name is freed.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// Each socket type has its own abstract namespace: the same name binds once per
/// type, and connecting from another type finds nothing (ECONNREFUSED).
pub fn abstract_per_type(b: &mut dyn Backend) {
    let st = b.bound(Stream, ab(b"srv"));
    let dg = b.bound(Dgram, ab(b"srv"));
    let sq = b.bound(Seqpacket, ab(b"srv"));
    let _dg2 = b.bound(Dgram, ab(b"srv"));
    let _st2 = b.bound(Stream, ab(b"srv"));
    b.getsockname(st);
    b.getsockname(dg);
    b.getsockname(sq);
    let donly = b.bound(Dgram, ab(b"donly"));
    let _cst = b.connected(Stream, ab(b"donly"));
    let _csq = b.connected(Seqpacket, ab(b"donly"));
    let cdg = b.socket(Dgram);
    b.sendto(cdg, b"same type", ab(b"donly"));
    b.recv(donly, 100);
    b.connect(cdg, ab(b"srv"));
    b.send(cdg, b"to dgram srv");
    b.recv(dg, 100);
    b.getpeername(cdg);
}

/// A missing abstract name: ECONNREFUSED (not ENOENT).
pub fn abstract_missing(b: &mut dyn Backend) {
    let s0 = b.connected(Dgram, ab(b"nope"));
    b.sendto(s0, b"x", ab(b"nope"));
    b.getpeername(s0);
    let _s1 = b.connected(Stream, ab(b"nope"));
    let _s2 = b.connected(Seqpacket, ab(b"nope"));
}

/// An abstract name is freed when its socket closes.
pub fn abstract_freed_on_close(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, ab(b"x"));
    let s1 = b.bound(Dgram, ab(b"x"));
    b.close(s0);
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"nobody", ab(b"x"));
    b.bind(s1, ab(b"x"));
    b.getsockname(s1);
    b.sendto(s2, b"to new x", ab(b"x"));
    b.recv(s1, 100);
}

/// "\0" alone is a valid, empty abstract name.
pub fn abstract_empty_name(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, ab(b""));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, ab(b""));
    b.connect(s1, ab(b""));
    b.getpeername(s1);
    b.send(s1, b"to empty");
    b.recvfrom(s0, 100);
    b.bind(s1, ab(b"e"));
    b.send(s1, b"named now");
    b.recvfrom(s0, 100);
}

/// Abstract names compare over their full length: "x", "x\0" and "xy" are distinct.
pub fn abstract_prefix_does_not_match(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, ab(b"x"));
    let s1 = b.connected(Dgram, ab(b"x\0"));
    b.connect(s1, ab(b""));
    b.connect(s1, ab(b"xy"));
    let s2 = b.bound(Dgram, ab(b"x\0"));
    b.getsockname(s2);
    b.sendto(s1, b"to x", ab(b"x"));
    b.sendto(s1, b"to x nul", ab(b"x\0"));
    b.recv(s0, 100);
    b.recv(s2, 100);
    b.recv(s0, 100);
    b.recv(s2, 100);
}

/// Abstract names are arbitrary bytes: NUL, control characters, spaces, backslash,
/// '@', high bytes all round-trip.
pub fn abstract_binary_name(b: &mut dyn Backend) {
    let name: &[u8] = b"\x01a b\\c@\xff\n\0";
    let s0 = b.bound(Dgram, ab(name));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, ab(b"\0\0"));
    b.getsockname(s1);
    b.sendto(s1, b"binary", ab(name));
    b.recvfrom(s0, 100);
    b.sendto(s0, b"back", ab(b"\0\0"));
    b.recvfrom(s1, 100);
    b.connect(s1, ab(b"\0"));
}

/// Abstract sun_path bytes: NUL + name.
pub fn abs_sun(name: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(name);
    v
}

/// Names made of NULs and names starting or ending with NUL are all distinct names
/// of their own; '@' is not NUL.
pub fn abstract_nul_names(b: &mut dyn Backend) {
    let names: [&[u8]; 6] = [b"\0", b"\0\0\0", b"\0a", b"a\0", b"@a", b"a\0b\0"];
    let mut socks = Vec::new();
    for n in names {
        let s = b.bound(Dgram, ab(n));
        socks.push(s);
    }
    let dup = b.bound(Dgram, ab(b"\0a"));
    b.bind(dup, ab(b"\0\0"));
    b.getsockname(dup);
    for &s in &socks {
        b.getsockname(s);
    }
    let tx = b.bound(Dgram, ab(b"\0\0\0\0"));
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
        let s = b.bound(Dgram, ab(n));
        b.getsockname(s);
        socks.push(s);
    }
    let tx = b.bound(Dgram, ab(b"\x01\x02 x\\"));
    for (i, n) in names.iter().enumerate() {
        b.sendto(tx, format!("to {i}").as_bytes(), ab(n));
    }
    for &s in &socks {
        b.recvfrom(s, 100);
    }
    let l = b.listening(Stream, ab(b"\n\t \r"), 5);
    let c = b.bound(Stream, ab(b"\xff\x00\x01"));
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
    let s0 = b.bound(Dgram, ab(&low));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, ab(&high));
    b.getsockname(s1);
    b.sendto(s1, b"high to low", ab(&low));
    b.recvfrom(s0, 100);
    b.sendto(s0, b"low to high", ab(&high));
    b.recvfrom(s1, 100);
    let s2 = b.bound(Dgram, ab(&low));
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
    let s0 = b.bound(Dgram, ab(&n107));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, ab(&n107));
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

/// An abstract name stays in use while any handle of its socket is open, and is
/// freed when the last one closes (dgram and stream listener).
pub fn abstract_name_held_by_any_handle(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, ab(b"x"));
    let h = b.dup(s0);
    b.drop_handle(s0);
    let s1 = b.bound(Dgram, ab(b"x"));
    b.sendto(s1, b"still there", ab(b"x"));
    b.recvfrom(h, 100);
    b.getsockname(h);
    b.close(h);
    b.sendto(s1, b"gone", ab(b"x"));
    b.bind(s1, ab(b"x"));
    b.getsockname(s1);
    let l = b.listening(Stream, ab(b"srv"), 5);
    let lh = b.dup(l);
    b.drop_handle(l);
    let l2 = b.bound(Stream, ab(b"srv"));
    let _c = b.connected(Stream, ab(b"srv"));
    let a = b.accept(lh);
    b.getsockname(a);
    b.close(lh);
    let _c2 = b.connected(Stream, ab(b"srv"));
    b.bind(l2, ab(b"srv"));
    b.getsockname(a);
}

/// A stream or seqpacket listener's abstract name is freed when it closes, even
/// while accepted connections (which show the name) live on; the name can then be
/// bound again.
pub fn abstract_freed_with_live_connections(b: &mut dyn Backend) {
    for ty in [Stream, Seqpacket] {
        let (l, c, a) = b.connection(ty, ab(b"srv"));
        let pending = b.connected(ty, ab(b"srv"));
        b.close(l);
        let c2 = b.connected(ty, ab(b"srv"));
        b.getsockname(a);
        b.getpeername(c);
        b.send(c, b"still connected");
        b.recv(a, 100);
        let l2 = b.listening(ty, ab(b"srv"), 5);
        b.connect(c2, ab(b"srv"));
        b.getpeername(c2);
        b.close(a);
        b.close(c);
        b.close(pending);
        b.close(l2);
        b.close(c2);
    }
}

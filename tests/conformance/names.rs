//! Naming scenarios: path names (bind, stale nodes, rename, unlink, symlinks),
//! autobind and abstract names. Path names are relative to the scenario root.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// A path in use by a live socket of either type: EADDRINUSE; a failed bind leaves
/// the socket unbound.
pub fn bind_same_path_twice(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.bind(s1, p("a.sock"));
    let s2 = b.socket(Stream);
    b.bind(s2, p("a.sock"));
    let s3 = b.socket(Seqpacket);
    b.bind(s3, p("a.sock"));
    b.getsockname(s1);
    b.bind(s1, p("b.sock"));
    b.getsockname(s1);
    b.stat("a.sock");
    b.stat("b.sock");
}

/// The node outlives its socket: connect ECONNREFUSED, rebind EADDRINUSE, and after
/// `rm` the path binds again.
pub fn bind_stale_node_after_close(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    b.close(s0);
    b.stat("a.sock");
    let s1 = b.socket(Dgram);
    b.connect(s1, p("a.sock"));
    b.sendto(s1, b"x", p("a.sock"));
    let s2 = b.socket(Dgram);
    b.bind(s2, p("a.sock"));
    b.getsockname(s2);
    b.rm("a.sock");
    b.stat("a.sock");
    b.bind(s2, p("a.sock"));
    b.stat("a.sock");
    b.connect(s1, p("a.sock"));
    b.send(s1, b"hi");
    b.recv(s2, 100);
}

/// Missing directory: ENOENT, and nothing is created.
pub fn bind_missing_dir(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("nodir/a.sock"));
    b.bind(s0, p("nodir/sub/a.sock"));
    b.stat("nodir");
    b.getsockname(s0);
    b.mkdir("nodir");
    b.bind(s0, p("nodir/a.sock"));
    b.getsockname(s0);
    b.stat("nodir/a.sock");
    b.rmdir("nodir");
    let s1 = b.socket(Dgram);
    b.connect(s1, p("nodir/a.sock"));
    b.send(s1, b"in a dir");
    b.recv(s0, 100);
}

/// A path component that is a socket node: ENOTDIR; a trailing slash: ENOENT.
pub fn bind_parent_not_dir(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.bind(s1, p("a.sock/b.sock"));
    b.connect(s1, p("a.sock/b.sock"));
    b.sendto(s1, b"x", p("a.sock/b.sock"));
    b.bind(s1, p("t.sock/"));
    b.stat("t.sock");
    b.getsockname(s1);
    b.bind(s1, p("c.sock"));
    b.getsockname(s1);
}

/// A bound socket cannot be bound again (EINVAL), with path or abstract names, and
/// the refused path is not left behind.
pub fn bind_twice_one_socket(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    b.bind(s0, p("b.sock"));
    b.stat("b.sock");
    b.bind(s0, ab(b"x"));
    b.bind(s0, p("a.sock"));
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(b"y"));
    b.bind(s1, p("c.sock"));
    b.stat("c.sock");
    b.bind(s1, ab(b"z"));
    b.getsockname(s1);
    let s2 = b.socket(Dgram);
    b.bind(s2, ab(b"x"));
    b.bind(s2, p("b.sock"));
    b.getsockname(s2);
}

/// A dangling symlink, a symlink to a socket node, a directory: EADDRINUSE; the
/// symlink is not followed.
pub fn bind_over_existing_nodes(b: &mut dyn Backend) {
    b.symlink("target.sock", "dangling.sock");
    let s0 = b.socket(Dgram);
    b.bind(s0, p("dangling.sock"));
    b.stat("target.sock");
    b.stat("dangling.sock");
    b.mkdir("d");
    b.bind(s0, p("d"));
    b.stat("d");
    let s1 = b.socket(Dgram);
    b.bind(s1, p("real.sock"));
    b.symlink("real.sock", "link.sock");
    b.bind(s0, p("link.sock"));
    b.getsockname(s0);
    b.bind(s0, p("free.sock"));
    b.getsockname(s0);
}

/// getsockname returns the path exactly as given to bind, whatever it resolves to.
pub fn getsockname_relative_as_given(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.getsockname(s0);
    b.getpeername(s0);
    b.mkdir("d");
    let s1 = b.socket(Dgram);
    b.bind(s1, p("./a.sock"));
    b.getsockname(s1);
    b.stat("a.sock");
    let s2 = b.socket(Dgram);
    b.bind(s2, p("d/../b.sock"));
    b.getsockname(s2);
    b.stat("b.sock");
    let s3 = b.socket(Dgram);
    b.bind(s3, p("d//c.sock"));
    b.getsockname(s3);
    b.stat("d/c.sock");
    b.connect(s0, p("a.sock"));
    b.getpeername(s0);
    b.sendto(s1, b"from ./a", p("b.sock"));
    b.recvfrom(s2, 100);
    b.sendto(s3, b"from d//c", p("./d/../b.sock"));
    b.recvfrom(s2, 100);
}

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
    let s2 = b.socket(Dgram);
    b.bind(s2, p("p.sock"));
    b.autobind(s2);
    b.getsockname(s2);
    let s3 = b.socket(Dgram);
    b.bind(s3, ab(b"named"));
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
    let s1 = b.socket(Dgram);
    b.bind(s1, p("a.sock"));
    b.bind(s1, ab(b"x"));
    b.getsockname(s1);
}

/// Connect or sendto to a missing path: ENOENT, for every type.
pub fn connect_missing_path(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.connect(s0, p("nope.sock"));
    b.sendto(s0, b"x", p("nope.sock"));
    b.connect(s0, p("d/nope.sock"));
    b.getpeername(s0);
    let s1 = b.socket(Stream);
    b.connect(s1, p("nope.sock"));
    let s2 = b.socket(Seqpacket);
    b.connect(s2, p("nope.sock"));
}

/// A stale node and a directory: ECONNREFUSED; a dangling symlink: ENOENT; a
/// symlink loop: ELOOP.
pub fn connect_stale_and_non_socket(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("stale.sock"));
    b.close(s0);
    let s1 = b.socket(Dgram);
    b.connect(s1, p("stale.sock"));
    b.sendto(s1, b"x", p("stale.sock"));
    b.mkdir("dir");
    b.connect(s1, p("dir"));
    b.sendto(s1, b"x", p("dir"));
    b.symlink("nowhere.sock", "dangling.sock");
    b.connect(s1, p("dangling.sock"));
    b.sendto(s1, b"x", p("dangling.sock"));
    b.symlink("loop2", "loop1");
    b.symlink("loop1", "loop2");
    b.connect(s1, p("loop1"));
    let s2 = b.socket(Stream);
    b.connect(s2, p("stale.sock"));
    b.connect(s2, p("dir"));
}

/// Connecting by path to a socket of another type: EPROTOTYPE.
pub fn connect_type_mismatch_path(b: &mut dyn Backend) {
    let st = b.socket(Stream);
    b.bind(st, p("stream.sock"));
    let d = b.socket(Dgram);
    b.connect(d, p("stream.sock"));
    b.sendto(d, b"x", p("stream.sock"));
    let sq = b.socket(Seqpacket);
    b.connect(sq, p("stream.sock"));
    b.listen(st, 5);
    b.connect(sq, p("stream.sock"));
    b.connect(d, p("stream.sock"));
    let dg = b.socket(Dgram);
    b.bind(dg, p("dgram.sock"));
    let st2 = b.socket(Stream);
    b.connect(st2, p("dgram.sock"));
    b.connect(sq, p("dgram.sock"));
    b.getpeername(d);
    b.connect(d, p("dgram.sock"));
    b.send(d, b"same type");
    b.recv(dg, 100);
}

/// Symlinks are followed by connect and sendto (also through directories and
/// chains); the peer name is the name the socket was bound with.
pub fn connect_through_symlink(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("real.sock"));
    b.symlink("real.sock", "link.sock");
    let s1 = b.socket(Dgram);
    b.connect(s1, p("link.sock"));
    b.getpeername(s1);
    b.send(s1, b"via link");
    b.recvfrom(s0, 100);
    b.mkdir("d");
    let s2 = b.socket(Dgram);
    b.bind(s2, p("d/inner.sock"));
    b.symlink("d", "dl");
    let s3 = b.socket(Dgram);
    b.sendto(s3, b"via dir link", p("dl/inner.sock"));
    b.recv(s2, 100);
    b.symlink("link.sock", "link2.sock");
    let s4 = b.socket(Dgram);
    b.connect(s4, p("link2.sock"));
    b.send(s4, b"via chain");
    b.recv(s0, 100);
    b.symlink("../real.sock", "d/up.sock");
    b.sendto(s4, b"via ../", p("d/up.sock"));
    b.recv(s0, 100);
}

/// `mv` of a node: the new name connects, the old one is ENOENT, getsockname still
/// shows the name given to bind, and existing connections are untouched.
pub fn rename_keeps_connectable(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.connect(s1, p("a.sock"));
    b.rename("a.sock", "b.sock");
    b.stat("a.sock");
    b.stat("b.sock");
    let s2 = b.socket(Dgram);
    b.connect(s2, p("a.sock"));
    b.connect(s2, p("b.sock"));
    b.send(s2, b"to b");
    b.recv(s0, 100);
    b.getsockname(s0);
    b.getpeername(s2);
    b.mkdir("d");
    b.rename("b.sock", "d/c.sock");
    let s3 = b.socket(Dgram);
    b.sendto(s3, b"to d/c", p("d/c.sock"));
    b.recv(s0, 100);
    b.send(s1, b"old connection");
    b.recv(s0, 100);
    let s4 = b.socket(Dgram);
    b.bind(s4, p("a.sock"));
    b.getsockname(s4);
}

/// `rm` of a bound node: connect ENOENT, existing connections keep working, the path
/// can be bound again and new connections go to the new socket.
pub fn unlink_while_bound(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, p("a.sock"));
    let s1 = b.socket(Dgram);
    b.connect(s1, p("a.sock"));
    b.rm("a.sock");
    b.stat("a.sock");
    let s2 = b.socket(Dgram);
    b.connect(s2, p("a.sock"));
    b.sendto(s2, b"x", p("a.sock"));
    b.send(s1, b"after rm");
    b.recv(s0, 100);
    b.getsockname(s0);
    b.getpeername(s1);
    let s3 = b.socket(Dgram);
    b.bind(s3, p("a.sock"));
    b.connect(s2, p("a.sock"));
    b.send(s2, b"new");
    b.recv(s3, 100);
    b.recv(s0, 100);
    b.send(s1, b"still old");
    b.recv(s0, 100);
    b.recv(s3, 100);
}

/// Each socket type has its own abstract namespace: the same name binds once per
/// type, and connecting from another type finds nothing (ECONNREFUSED).
pub fn abstract_per_type(b: &mut dyn Backend) {
    let st = b.socket(Stream);
    b.bind(st, ab(b"srv"));
    let dg = b.socket(Dgram);
    b.bind(dg, ab(b"srv"));
    let sq = b.socket(Seqpacket);
    b.bind(sq, ab(b"srv"));
    let dg2 = b.socket(Dgram);
    b.bind(dg2, ab(b"srv"));
    let st2 = b.socket(Stream);
    b.bind(st2, ab(b"srv"));
    b.getsockname(st);
    b.getsockname(dg);
    b.getsockname(sq);
    let donly = b.socket(Dgram);
    b.bind(donly, ab(b"donly"));
    let cst = b.socket(Stream);
    b.connect(cst, ab(b"donly"));
    let csq = b.socket(Seqpacket);
    b.connect(csq, ab(b"donly"));
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
    let s0 = b.socket(Dgram);
    b.connect(s0, ab(b"nope"));
    b.sendto(s0, b"x", ab(b"nope"));
    b.getpeername(s0);
    let s1 = b.socket(Stream);
    b.connect(s1, ab(b"nope"));
    let s2 = b.socket(Seqpacket);
    b.connect(s2, ab(b"nope"));
}

/// An abstract name is freed when its socket closes.
pub fn abstract_freed_on_close(b: &mut dyn Backend) {
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(b"x"));
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(b"x"));
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
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(b""));
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(b""));
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
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(b"x"));
    let s1 = b.socket(Dgram);
    b.connect(s1, ab(b"x\0"));
    b.connect(s1, ab(b""));
    b.connect(s1, ab(b"xy"));
    let s2 = b.socket(Dgram);
    b.bind(s2, ab(b"x\0"));
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
    let s0 = b.socket(Dgram);
    b.bind(s0, ab(name));
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.bind(s1, ab(b"\0\0"));
    b.getsockname(s1);
    b.sendto(s1, b"binary", ab(name));
    b.recvfrom(s0, 100);
    b.sendto(s0, b"back", ab(b"\0\0"));
    b.recvfrom(s1, 100);
    b.connect(s1, ab(b"\0"));
}

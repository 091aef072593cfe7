//! Path names: bind (stale nodes, missing directories, names up to 108 bytes),
//! connect by path (symlinks, hard links, directories, type mismatch), rename, unlink
//! and mknod of socket nodes, the names of connected and accepted sockets. Path names
//! are relative to the scenario root.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

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

/// getsockname of a socket that may have a relative raw sun_path name.
fn getsockname_rel(b: &mut dyn Backend, s: Sock) -> Option<Name> {
    let r = b.raw_getsockname(s).map(rel);
    b.record_name(format!("getsockname({})", sock_s(s)), &r);
    r.ok()
}

/// getpeername, peer possibly named by a relative raw sun_path.
fn getpeername_rel(b: &mut dyn Backend, s: Sock) -> Option<Name> {
    let r = b.raw_getpeername(s).map(rel);
    b.record_name(format!("getpeername({})", sock_s(s)), &r);
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
        .push(format!("recvfrom({}, {bufsize})", sock_s(s)), res);
}

/// A path in use by a live socket of either type: EADDRINUSE; a failed bind leaves
/// the socket unbound.
pub fn bind_same_path_twice(b: &mut dyn Backend) {
    let _s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("a.sock"));
    let _s2 = b.bound(Stream, p("a.sock"));
    let _s3 = b.bound(Seqpacket, p("a.sock"));
    b.getsockname(s1);
    b.bind(s1, p("b.sock"));
    b.getsockname(s1);
    b.stat("a.sock");
    b.stat("b.sock");
}

/// The node outlives its socket: connect ECONNREFUSED, rebind EADDRINUSE, and after
/// `rm` the path binds again.
pub fn bind_stale_node_after_close(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    b.close(s0);
    b.stat("a.sock");
    let s1 = b.connected(Dgram, p("a.sock"));
    b.sendto(s1, b"x", p("a.sock"));
    let s2 = b.bound(Dgram, p("a.sock"));
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
    let s0 = b.bound(Dgram, p("nodir/a.sock"));
    b.bind(s0, p("nodir/sub/a.sock"));
    b.stat("nodir");
    b.getsockname(s0);
    b.mkdir("nodir");
    b.bind(s0, p("nodir/a.sock"));
    b.getsockname(s0);
    b.stat("nodir/a.sock");
    b.rmdir("nodir");
    let s1 = b.connected(Dgram, p("nodir/a.sock"));
    b.send(s1, b"in a dir");
    b.recv(s0, 100);
}

/// A path component that is a socket node: ENOTDIR; a trailing slash: ENOENT.
pub fn bind_parent_not_dir(b: &mut dyn Backend) {
    let _s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.bound(Dgram, p("a.sock/b.sock"));
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
    let s0 = b.bound(Dgram, p("a.sock"));
    b.bind(s0, p("b.sock"));
    b.stat("b.sock");
    b.bind(s0, ab(b"x"));
    b.bind(s0, p("a.sock"));
    b.getsockname(s0);
    let s1 = b.bound(Dgram, ab(b"y"));
    b.bind(s1, p("c.sock"));
    b.stat("c.sock");
    b.bind(s1, ab(b"z"));
    b.getsockname(s1);
    let s2 = b.bound(Dgram, ab(b"x"));
    b.bind(s2, p("b.sock"));
    b.getsockname(s2);
}

/// A dangling symlink, a symlink to a socket node, a directory: EADDRINUSE; the
/// symlink is not followed.
pub fn bind_over_existing_nodes(b: &mut dyn Backend) {
    b.symlink("target.sock", "dangling.sock");
    let s0 = b.bound(Dgram, p("dangling.sock"));
    b.stat("target.sock");
    b.stat("dangling.sock");
    b.mkdir("d");
    b.bind(s0, p("d"));
    b.stat("d");
    let _s1 = b.bound(Dgram, p("real.sock"));
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
    let s1 = b.bound(Dgram, p("./a.sock"));
    b.getsockname(s1);
    b.stat("a.sock");
    let s2 = b.bound(Dgram, p("d/../b.sock"));
    b.getsockname(s2);
    b.stat("b.sock");
    let s3 = b.bound(Dgram, p("d//c.sock"));
    b.getsockname(s3);
    b.stat("d/c.sock");
    b.connect(s0, p("a.sock"));
    b.getpeername(s0);
    b.sendto(s1, b"from ./a", p("b.sock"));
    b.recvfrom(s2, 100);
    b.sendto(s3, b"from d//c", p("./d/../b.sock"));
    b.recvfrom(s2, 100);
}

/// A path of exactly `n` bytes: `prefix` then 'p's, ending in ".sock".
fn long_path(prefix: &str, n: usize) -> String {
    let fill = n - prefix.len() - ".sock".len();
    format!("{prefix}{}.sock", "p".repeat(fill))
}

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

/// Connect or sendto to a missing path: ENOENT, for every type.
pub fn connect_missing_path(b: &mut dyn Backend) {
    let s0 = b.connected(Dgram, p("nope.sock"));
    b.sendto(s0, b"x", p("nope.sock"));
    b.connect(s0, p("d/nope.sock"));
    b.getpeername(s0);
    let _s1 = b.connected(Stream, p("nope.sock"));
    let _s2 = b.connected(Seqpacket, p("nope.sock"));
}

/// A stale node and a directory: ECONNREFUSED; a dangling symlink: ENOENT; a
/// symlink loop: ELOOP.
pub fn connect_stale_and_non_socket(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("stale.sock"));
    b.close(s0);
    let s1 = b.connected(Dgram, p("stale.sock"));
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
    let s2 = b.connected(Stream, p("stale.sock"));
    b.connect(s2, p("dir"));
}

/// Connecting by path to a socket of another type: EPROTOTYPE.
pub fn connect_type_mismatch_path(b: &mut dyn Backend) {
    let st = b.bound(Stream, p("stream.sock"));
    let d = b.connected(Dgram, p("stream.sock"));
    b.sendto(d, b"x", p("stream.sock"));
    let sq = b.connected(Seqpacket, p("stream.sock"));
    b.listen(st, 5);
    b.connect(sq, p("stream.sock"));
    b.connect(d, p("stream.sock"));
    let dg = b.bound(Dgram, p("dgram.sock"));
    let _st2 = b.connected(Stream, p("dgram.sock"));
    b.connect(sq, p("dgram.sock"));
    b.getpeername(d);
    b.connect(d, p("dgram.sock"));
    b.send(d, b"same type");
    b.recv(dg, 100);
}

/// Symlinks are followed by connect and sendto (also through directories and
/// chains); the peer name is the name the socket was bound with.
pub fn connect_through_symlink(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("real.sock"));
    b.symlink("real.sock", "link.sock");
    let s1 = b.connected(Dgram, p("link.sock"));
    b.getpeername(s1);
    b.send(s1, b"via link");
    b.recvfrom(s0, 100);
    b.mkdir("d");
    let s2 = b.bound(Dgram, p("d/inner.sock"));
    b.symlink("d", "dl");
    let s3 = b.socket(Dgram);
    b.sendto(s3, b"via dir link", p("dl/inner.sock"));
    b.recv(s2, 100);
    b.symlink("link.sock", "link2.sock");
    let s4 = b.connected(Dgram, p("link2.sock"));
    b.send(s4, b"via chain");
    b.recv(s0, 100);
    b.symlink("../real.sock", "d/up.sock");
    b.sendto(s4, b"via ../", p("d/up.sock"));
    b.recv(s0, 100);
}

/// A hard link reaches the socket (lookup is by inode); the peer name is the bound
/// one; the link survives the removal of the original name.
pub fn connect_via_hard_link(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    b.link("a.sock", "b.sock");
    b.stat("b.sock");
    let s1 = b.connected(Dgram, p("b.sock"));
    b.getpeername(s1);
    b.send(s1, b"via hard link");
    b.recvfrom(s0, 100);
    b.rm("a.sock");
    let s2 = b.socket(Dgram);
    b.sendto(s2, b"via link only", p("b.sock"));
    b.recv(s0, 100);
    b.connect(s2, p("a.sock"));
    let s3 = b.bound(Dgram, p("b.sock"));
    b.bind(s3, p("a.sock"));
    b.getsockname(s0);
    b.mkdir("d");
    let l = b.listening(Stream, p("d/l.sock"), 5);
    b.link("d/l.sock", "l2.sock");
    b.link("d", "d2");
    let c = b.connected(Stream, p("l2.sock"));
    b.getpeername(c);
    let a = b.accept(l);
    b.getsockname(a);
    b.close(l);
    let c2 = b.connected(Stream, p("l2.sock"));
    b.connect(c2, p("d/l.sock"));
}

/// Directories are not sockets: ECONNREFUSED for every type, by name, ".", a
/// trailing slash or a symlink; bind over "." or ".." is EADDRINUSE.
pub fn connect_directory_cases(b: &mut dyn Backend) {
    b.mkdir("d");
    b.symlink("d", "dl");
    for ty in [Seqpacket, Stream] {
        let s = b.connected(ty, p("d"));
        b.connect(s, p("d/"));
        b.connect(s, p("."));
        b.connect(s, p("dl"));
        b.connect(s, p("d/.."));
    }
    let s = b.connected(Dgram, p("."));
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

/// `mv` of a node: the new name connects, the old one is ENOENT, getsockname still
/// shows the name given to bind, and existing connections are untouched.
pub fn rename_keeps_connectable(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.connected(Dgram, p("a.sock"));
    b.rename("a.sock", "b.sock");
    b.stat("a.sock");
    b.stat("b.sock");
    let s2 = b.connected(Dgram, p("a.sock"));
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
    let s4 = b.bound(Dgram, p("a.sock"));
    b.getsockname(s4);
}

/// Renaming a listener's node, its directory, or over another socket's node: the
/// new path reaches it, getsockname (and the accepted sockets' names and clients'
/// peer names) keep the bound path.
pub fn rename_keeps_getsockname(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    b.rename("l.sock", "m.sock");
    b.getsockname(l);
    let c = b.connected(Stream, p("l.sock"));
    b.connect(c, p("m.sock"));
    b.getpeername(c);
    let a = b.accept(l);
    b.getsockname(a);
    b.mkdir("d");
    let s0 = b.bound(Dgram, p("d/x.sock"));
    b.rename("d", "e");
    b.getsockname(s0);
    let s1 = b.socket(Dgram);
    b.sendto(s1, b"via e", p("e/x.sock"));
    b.recvfrom(s0, 100);
    b.sendto(s1, b"via d", p("d/x.sock"));
    let s2 = b.bound(Dgram, p("y.sock"));
    b.rename("e/x.sock", "y.sock");
    b.sendto(s1, b"to y", p("y.sock"));
    b.recv(s0, 100);
    b.recv(s2, 100);
    b.getsockname(s2);
    b.getsockname(s0);
    b.connect(s1, p("y.sock"));
    b.getpeername(s1);
}

/// `rm` of a bound node: connect ENOENT, existing connections keep working, the path
/// can be bound again and new connections go to the new socket.
pub fn unlink_while_bound(b: &mut dyn Backend) {
    let s0 = b.bound(Dgram, p("a.sock"));
    let s1 = b.connected(Dgram, p("a.sock"));
    b.rm("a.sock");
    b.stat("a.sock");
    let s2 = b.connected(Dgram, p("a.sock"));
    b.sendto(s2, b"x", p("a.sock"));
    b.send(s1, b"after rm");
    b.recv(s0, 100);
    b.getsockname(s0);
    b.getpeername(s1);
    let s3 = b.bound(Dgram, p("a.sock"));
    b.connect(s2, p("a.sock"));
    b.send(s2, b"new");
    b.recv(s3, 100);
    b.recv(s0, 100);
    b.send(s1, b"still old");
    b.recv(s0, 100);
    b.recv(s3, 100);
}

/// A socket node made by mknod has no socket behind it: connect and sendto give
/// ECONNREFUSED for every type, bind over it EADDRINUSE; its mode is 0666 & ~umask.
pub fn mknod_socket_node(b: &mut dyn Backend) {
    b.mknod_sock("n.sock");
    b.stat("n.sock");
    b.owner("n.sock");
    b.mknod_sock("n.sock");
    b.mknod_sock("nodir/n.sock");
    let d = b.connected(Dgram, p("n.sock"));
    b.sendto(d, b"x", p("n.sock"));
    let st = b.connected(Stream, p("n.sock"));
    let _sq = b.connected(Seqpacket, p("n.sock"));
    b.symlink("n.sock", "ln.sock");
    b.connect(st, p("ln.sock"));
    b.link("n.sock", "hard.sock");
    b.connect(st, p("hard.sock"));
    let s = b.bound(Dgram, p("n.sock"));
    b.getsockname(s);
    b.rm("n.sock");
    b.bind(s, p("n.sock"));
    b.connect(d, p("n.sock"));
    b.send(d, b"now bound");
    b.recv(s, 100);
    b.connect(d, p("hard.sock"));
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
    let (l, c, a) = b.connection(Stream, p("l.sock"));
    b.getpeername(a);
    b.bind(c, p("c.sock"));
    b.getpeername(a);
    b.getsockname(c);
    b.stat("c.sock");
    let c2 = b.connected(Stream, p("l.sock"));
    b.autobind(c2);
    let a2 = b.accept(l);
    b.getpeername(a2);
    let d = b.connected(Dgram, p("y.sock"));
    b.bind(d, ab(b"late"));
    b.send(d, b"from late");
    b.recvfrom(y, 100);
}

/// Accepted sockets: getsockname is the listener's name, getpeername the client's
/// (path, abstract, autobound, or unnamed), for path and abstract listeners, also
/// after the listener's node is removed.
pub fn accepted_socket_names(b: &mut dyn Backend) {
    for (ty, laddr) in [(Stream, p("l.sock")), (Seqpacket, ab(b"lq"))] {
        let l = b.listening(ty, laddr.clone(), 10);
        let c1 = b.connected(ty, laddr.clone());
        let c2 = b.bound(ty, p(&format!("c2-{}.sock", ty.name())));
        b.connect(c2, laddr.clone());
        let c3 = b.bound(ty, ab(b"c3"));
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
    let l = b.listening(Stream, p("l.sock"), 5);
    let _c = b.connected(Stream, p("l.sock"));
    b.rm("l.sock");
    let a = b.accept(l);
    b.getsockname(a);
    b.getsockname(l);
}

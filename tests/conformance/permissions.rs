//! Permissions as an unprivileged user (uid/gid 65534 on an `--allow-other` mount):
//! connect needs write on the node, bind needs write on the directory, search on every
//! directory on the way, root bypasses, abstract names have none; umask and node modes.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// The unprivileged user the permission scenarios act as.
const NOBODY: u32 = 65534;

/// Connecting needs write permission on the node: 755 → EACCES for stream connect,
/// dgram connect and dgram sendto; mode 002 (write for others only) → OK. Root
/// connects whatever the mode.
pub fn perm_connect_needs_write(b: &mut dyn Backend) {
    b.multiuser();
    let l = b.listening(Stream, p("l.sock"), 5);
    let r = b.bound(Dgram, p("r.sock"));
    let _q = b.listening(Seqpacket, p("q.sock"), 5);
    b.stat("l.sock");
    b.as_user(NOBODY, NOBODY);
    let c = b.connected(Stream, p("l.sock"));
    let cq = b.connected(Seqpacket, p("q.sock"));
    let d = b.connected(Dgram, p("r.sock"));
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
    b.recv_times(r, 100, 2);
    b.chmod("l.sock", 0o000);
    b.chmod("r.sock", 0o000);
    let _rc = b.connected(Stream, p("l.sock"));
    let rd = b.socket(Dgram);
    b.sendto(rd, b"root", p("r.sock"));
    b.recv(r, 100);
    b.stat("r.sock");
}

/// The permission class decides: the owner's bits for the owner (even if others may
/// write), the group's bits for a member of the group, else the others' bits.
pub fn perm_owner_group_other_classes(b: &mut dyn Backend) {
    b.multiuser();
    let r = b.bound(Dgram, p("r.sock"));
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
        let d = b.connected(Dgram, p("r.sock"));
        b.sendto(d, b"x", p("r.sock"));
        b.close(d);
        b.as_root();
        b.recv_times(r, 100, 2);
    }
}

/// Search permission on every directory of the path: without it connect, sendto,
/// bind and stat are EACCES (also through a symlink); search alone lets connect
/// through but not bind; bind needs write and search.
pub fn perm_directory_search_and_write(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    let r = b.bound(Dgram, p("d/r.sock"));
    b.chmod("d/r.sock", 0o777);
    b.symlink("d/r.sock", "link.sock");
    b.chmod("d", 0o700);
    b.as_user(NOBODY, NOBODY);
    let c = b.connected(Dgram, p("d/r.sock"));
    b.sendto(c, b"x", p("d/r.sock"));
    b.sendto(c, b"x", p("link.sock"));
    b.stat("d/r.sock");
    let s = b.bound(Dgram, p("d/s.sock"));
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
    b.recv_times(r, 100, 2);
    b.mkdir("d/e");
    b.chmod("d/e", 0o777);
    b.chmod("d", 0o600);
    b.as_user(NOBODY, NOBODY);
    let _t = b.bound(Dgram, p("d/e/t.sock"));
    b.as_root();
    b.chmod("d", 0o755);
}

/// bind needs write permission on the directory: a root-owned 755 directory is
/// EACCES; the sticky mount root accepts the bind and the node belongs to the
/// binder; nobody cannot remove root's node from the sticky root (EPERM).
pub fn perm_bind_needs_dir_write(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    let _rs = b.bound(Dgram, p("root.sock"));
    b.as_user(NOBODY, NOBODY);
    let s = b.bound(Dgram, p("d/x.sock"));
    b.stat("d/x.sock");
    b.getsockname(s);
    b.bind(s, p("x.sock"));
    b.getsockname(s);
    b.stat("x.sock");
    b.owner("x.sock");
    b.rm("root.sock");
    b.mkdir("mine");
    b.owner("mine");
    let _t = b.bound(Stream, p("mine/t.sock"));
    b.owner("mine/t.sock");
    b.as_root();
    b.rm("mine/t.sock");
    b.chmod("d", 0o777);
    b.as_user(NOBODY, NOBODY);
    let _u = b.bound(Dgram, p("d/x.sock"));
    b.owner("d/x.sock");
    b.as_root();
}

/// Root bypasses permissions: binds in a mode-000 directory, connects to a mode-000
/// node in it; an unprivileged user cannot.
pub fn perm_root_bypasses(b: &mut dyn Backend) {
    b.multiuser();
    b.mkdir("d");
    b.chmod("d", 0o000);
    let l = b.listening(Stream, p("d/l.sock"), 5);
    b.chmod("d/l.sock", 0o000);
    b.stat("d/l.sock");
    let _c = b.connected(Stream, p("d/l.sock"));
    let r = b.bound(Dgram, p("d/r.sock"));
    b.chmod("d/r.sock", 0o000);
    let s = b.socket(Dgram);
    b.sendto(s, b"root", p("d/r.sock"));
    b.recv(r, 100);
    b.as_user(NOBODY, NOBODY);
    let c2 = b.connected(Stream, p("d/l.sock"));
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
    let l = b.listening(Stream, ab(b"root-srv"), 5);
    let r = b.bound(Dgram, ab(b"root-dg"));
    b.as_user(NOBODY, NOBODY);
    let c = b.connected(Stream, ab(b"root-srv"));
    b.getpeername(c);
    let d = b.bound(Dgram, ab(b"user-dg"));
    b.sendto(d, b"from nobody", ab(b"root-dg"));
    b.connect(d, ab(b"root-dg"));
    b.send(d, b"connected");
    let _ul = b.listening(Seqpacket, ab(b"user-sq"), 5);
    let ud = b.bound(Dgram, ab(b"user-rx"));
    b.as_root();
    let a = b.accept(l);
    b.getpeername(a);
    b.recvfrom(r, 100);
    b.recvfrom(r, 100);
    let rd = b.socket(Dgram);
    b.sendto(rd, b"from root", ab(b"user-rx"));
    let rq = b.connected(Seqpacket, ab(b"user-sq"));
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
    let _us = b.bound(Stream, p("user.sock"));
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
        let s = b.connected(ty, p("ro"));
        b.connect(s, p("rw"));
        b.connect(s, p("."));
    }
    let d = b.socket(Dgram);
    b.sendto(d, b"x", p("ro"));
    b.sendto(d, b"x", p("rw"));
    b.as_root();
}

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

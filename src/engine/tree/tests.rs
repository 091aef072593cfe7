//! Unit tests of the namespace tree.

use super::*;
use crate::engine::cred::{Caller, ProcStatus};

fn user(uid: u32) -> Caller {
    Caller::with_status(
        1,
        ProcStatus {
            tgid: 1,
            uids: [uid; 4],
            gids: [uid; 4],
            umask: 0o022,
            groups: vec![],
            ..Default::default()
        },
    )
}

/// A node made by `uid`:`gid` with `mode`.
fn by(uid: u32, gid: u32, mode: u32) -> Maker {
    Maker { uid, gid, mode }
}

#[test]
fn bind_connect_and_names() {
    let t = Tree::new(4, 0, 0, None);
    let root = user(0);
    let run = t.mkdir(ROOT_INO, b"run", by(0, 0, 0o755)).unwrap();
    let ino = t.bind_node(b"run/a.sock", &root, 0o755).unwrap();
    assert_eq!(
        t.bind_node(b"run/a.sock", &root, 0o755),
        Err(Errno::EADDRINUSE)
    );
    assert_eq!(
        t.bind_node(b"nodir/a.sock", &root, 0o755),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        t.bind_node(b"run/a.sock/x", &root, 0o755),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(t.connect_node(b"/run/./a.sock", &root), Ok(ino));
    assert_eq!(t.connect_node(b"run", &root), Err(Errno::ECONNREFUSED));
    t.symlink(ROOT_INO, b"l", b"run/a.sock", by(0, 0, 0o777))
        .unwrap();
    assert_eq!(t.connect_node(b"l", &root), Ok(ino));
    assert_eq!(t.bind_node(b"l", &root, 0o755), Err(Errno::EADDRINUSE));
    // Permissions: write on the node, search on the directories.
    let u = user(1000);
    assert_eq!(t.connect_node(b"run/a.sock", &u), Err(Errno::EACCES));
    t.setattr(ino, Some(0o777), None, None, None, None).unwrap();
    assert_eq!(t.connect_node(b"run/a.sock", &u), Ok(ino));
    t.setattr(run.ino, Some(0o700), None, None, None, None)
        .unwrap();
    assert_eq!(t.connect_node(b"run/a.sock", &u), Err(Errno::EACCES));
    // rename keeps the inode; unlink removes the name.
    t.rename(run.ino, b"a.sock", ROOT_INO, b"b.sock", 0)
        .unwrap();
    assert_eq!(t.connect_node(b"b.sock", &root), Ok(ino));
    assert_eq!(t.connect_node(b"run/a.sock", &root), Err(Errno::ENOENT));
    t.unlink(ROOT_INO, b"b.sock").unwrap();
    assert_eq!(t.connect_node(b"b.sock", &root), Err(Errno::ENOENT));
}

/// Supplementary groups grant the group bits (checked on a copy of the
/// node, with no shard locked).
#[test]
fn group_bits_follow_supplementary_groups() {
    let t = Tree::new(2, 0, 0, None);
    let d = t.mkdir(ROOT_INO, b"grp", by(0, 50, 0o710)).unwrap();
    t.mknod_socket(d.ino, b"s", by(0, 0, 0o777)).unwrap();
    let member = Caller::with_status(
        1,
        ProcStatus {
            tgid: 1,
            uids: [1000; 4],
            gids: [1000; 4],
            umask: 0o022,
            groups: vec![50],
            ..Default::default()
        },
    );
    assert!(t.connect_node(b"grp/s", &member).is_ok());
    assert_eq!(t.connect_node(b"grp/s", &user(1000)), Err(Errno::EACCES));
}

#[test]
fn directory_rules() {
    let t = Tree::new(3, 0, 0, None);
    let a = t.mkdir(ROOT_INO, b"a", by(0, 0, 0o755)).unwrap();
    let b = t.mkdir(a.ino, b"b", by(0, 0, 0o755)).unwrap();
    assert_eq!(t.rename(ROOT_INO, b"a", b.ino, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.rmdir(ROOT_INO, b"a"), Err(Errno::ENOTEMPTY));
    assert_eq!(
        t.mkdir(ROOT_INO, CONTROL_NAME, by(0, 0, 0o755))
            .unwrap_err(),
        Errno::EEXIST
    );
    assert_eq!(t.getattr(a.ino).unwrap().nlink, 3);
    t.rename(a.ino, b"b", ROOT_INO, b"b", 0).unwrap();
    assert_eq!(t.getattr(a.ino).unwrap().nlink, 2);
    t.rmdir(ROOT_INO, b"a").unwrap();
    assert_eq!(t.unlink(ROOT_INO, b"b"), Err(Errno::EISDIR));
    let mut links = 0;
    t.symlink(ROOT_INO, b"loop", b"loop", by(0, 0, 0o777))
        .unwrap();
    if t.connect_node(b"loop", &user(0)) == Err(Errno::ELOOP) {
        links += 1;
    }
    assert_eq!(links, 1);
    // A full tree says ENOSPC, and room comes back with removals.
    t.set_max_nodes(t.nodes.used() as usize);
    assert_eq!(
        t.mkdir(ROOT_INO, b"c", by(0, 0, 0o755)).unwrap_err(),
        Errno::ENOSPC
    );
    t.unlink(ROOT_INO, b"loop").unwrap();
    t.mkdir(ROOT_INO, b"c", by(0, 0, 0o755)).unwrap();
}

#[test]
fn copies_of_kernel_directories_take_the_kernels_owner_and_mode() {
    let t = Tree::new(2, 0, 0, None);
    let (a, b) = (user(61051), user(61052));
    // B made the copies first, open to all, and bound and linked names in them.
    let r = t.mkdir(ROOT_INO, b"r", by(61052, 61052, 0o777)).unwrap();
    let d = t.mkdir(r.ino, b"adir", by(61052, 61052, 0o777)).unwrap();
    t.bind_node(b"r/adir/a.sock", &b, 0o777).unwrap();
    t.symlink(d.ino, b"l", b"/x", by(61052, 61052, 0)).unwrap();
    t.mkdir(d.ino, b"sub", by(61052, 61052, 0o777)).unwrap();
    t.bind_node(b"r/b.sock", &b, 0o777).unwrap();
    // The kernel's: /r root's 0755, /r/adir A's 0700.
    let kernel = [by(0, 0, 0o755), by(61051, 61051, 0o700)];
    // No route declared for A: nothing changes.
    assert!(
        t.mirror(b"r/adir/a.sock", &kernel, false, 61051)
            .dropped
            .is_empty()
    );
    assert_eq!(t.getattr(r.ino).unwrap().uid, 61052);
    t.declare_route(b"/r", 61051).unwrap();
    let dropped = t.mirror(b"r/adir/a.sock", &kernel, false, 61051).dropped;
    let shown: Vec<String> = dropped
        .iter()
        .map(|n| String::from_utf8_lossy(n).into())
        .collect();
    let (ra, da) = (t.getattr(r.ino).unwrap(), t.getattr(d.ino).unwrap());
    println!(
        "copies after: r {:o} {}, adir {:o} {}; removed: {shown:?}",
        ra.perm, ra.uid, da.perm, da.uid
    );
    assert_eq!((ra.perm, ra.uid, ra.gid), (0o755, 0, 0));
    assert_eq!((da.perm, da.uid, da.gid), (0o700, 61051, 61051));
    // B's socket nodes and link are gone from both copies (neither root's
    // 0755 /r nor A's 0700 /r/adir lets B make names), its directory stays
    // (its own copy is judged when a walk reaches it).
    assert_eq!(shown, ["b.sock", "a.sock", "l"]);
    assert!(t.lookup(d.ino, b"sub").is_ok());
    assert_eq!(t.lookup(r.ino, b"b.sock").err(), Some(Errno::ENOENT));
    assert_eq!(t.bind_node(b"r/adir/a.sock", &b, 0o777), Err(Errno::EACCES));
    assert!(t.bind_node(b"r/adir/a.sock", &a, 0o777).is_ok());
    // A bind makes missing copies, with the kernel's attributes; a connect
    // does not; a name that is no directory ends the walk.
    t.mirror(
        b"r/new/deeper/s",
        &[kernel[0], by(7, 8, 0o1733), by(7, 8, 0o711)],
        false,
        61051,
    );
    assert_eq!(t.lookup(r.ino, b"new").err(), Some(Errno::ENOENT));
    t.mirror(
        b"r/new/deeper/s",
        &[kernel[0], by(7, 8, 0o1733), by(7, 8, 0o711)],
        true,
        61051,
    );
    let new = t.lookup(r.ino, b"new").unwrap();
    let deeper = t.lookup(new.ino, b"deeper").unwrap();
    assert_eq!((new.perm, new.uid, new.gid), (0o1733, 7, 8));
    assert_eq!((deeper.perm, deeper.uid), (0o711, 7));
    t.mirror(
        b"r/adir/a.sock/x",
        &[kernel[0], kernel[1], by(9, 9, 0o777)],
        true,
        61051,
    );
    assert_eq!(t.lookup(d.ino, b"a.sock").unwrap().kind, Kind::Socket);
}

#[test]
fn another_users_declaration_takes_no_ones_plain_directories() {
    let t = Tree::new(2, 0, 0, None);
    let (a, b) = (61051, 61052);
    // A's plain directories, where the kernel has root's /srv and A's
    // /srv/a; A's socket in the first.
    let srv = t.mkdir(ROOT_INO, b"srv", by(a, a, 0o700)).unwrap();
    let sa = t.mkdir(srv.ino, b"a", by(a, a, 0o755)).unwrap();
    t.bind_node(b"srv/s.sock", &user(a), 0o777).unwrap();
    let kernel = [by(0, 0, 0o755), by(a, a, 0o711)];
    // B declares /srv/a and walks it: B owns no kernel directory there, so
    // A's directories stay as A made them (the walk ends at A's /srv).
    t.declare_route(b"/srv/a", b).unwrap();
    let done = t.mirror(b"srv/a", &kernel, true, b);
    assert!(done.foreign);
    let dropped = done.dropped;
    let shown = |ino| {
        let x = t.getattr(ino).unwrap();
        (x.perm, x.uid)
    };
    println!(
        "after B's walk: srv {:?}, srv/a {:?}, dropped {dropped:?}",
        shown(srv.ino),
        shown(sa.ino)
    );
    assert!(dropped.is_empty());
    assert_eq!((shown(srv.ino), shown(sa.ino)), ((0o700, a), (0o755, a)));
    // A's own requests are not governed by B's declaration: a walk of A's
    // changes nothing, and A's mkdir is A's.
    assert!(!t.declared_for(b"srv/a/s", a));
    assert!(!t.is_route_copy(b"srv/x", a));
    assert!(t.is_route_copy(b"srv", b));
    t.mirror(b"srv/a/s", &kernel, false, a);
    assert_eq!(shown(srv.ino), (0o700, a));
    // Nor does B's walk open A's /c, A's in the kernel too (0777 there,
    // 0700 as A made it in the mount); a narrower kernel mode is taken
    // (a copy another user's directory went stale with).
    let c = t.mkdir(ROOT_INO, b"c", by(a, a, 0o700)).unwrap();
    t.declare_route(b"/c", b).unwrap();
    t.mirror(b"c/s", &[by(a, a, 0o777)], false, b);
    assert_eq!(shown(c.ino), (0o700, a));
    t.mirror(b"c/s", &[by(a, a, 0o1700)], false, b);
    assert_eq!(shown(c.ino), (0o1700, a));
    t.mirror(b"c/s", &[by(a, a, 0o700)], false, b);
    assert_eq!(shown(c.ino), (0o1700, a));
    // Root's declaration governs everyone's: A's walk (A owns /srv/a below
    // /srv) takes /srv as root's; B's may not take a third user's /srv/a
    // where the kernel's is a fourth's.
    t.declare_route(b"/srv/a", 0).unwrap();
    let dropped = t.mirror(b"srv/a/s", &kernel, false, a).dropped;
    println!(
        "after A's walk under root's declaration: srv {:?}, dropped {dropped:?}",
        shown(srv.ino)
    );
    assert_eq!(shown(srv.ino), (0o755, 0));
    assert_eq!(dropped, [b"s.sock".to_vec()]);
    t.setattr(sa.ino, Some(0o777), Some(9), Some(9), None, None)
        .unwrap();
    t.mirror(b"srv/a/s", &[kernel[0], by(7, 7, 0o700)], false, b);
    assert_eq!(shown(sa.ino), (0o777, 9));
}

#[test]
fn route_roots_decide_which_directories_are_copies() {
    let t = Tree::new(2, 0, 0, None);
    // Nothing declared: a plain mount, no directory is a copy.
    assert!(!t.under_route(b"run/app/s"));
    assert!(!t.is_route_copy(b"run", 61051));
    t.declare_route(b"/home/a", 61051).unwrap();
    let shown = |p: &[u8]| {
        let (u, c) = (t.under_route(p), t.is_route_copy(p, 61051));
        println!(
            "{}: under a route {u}, a copy {c}",
            String::from_utf8_lossy(p)
        );
        (u, c)
    };
    // Names below the root; directories above, at and below it.
    assert_eq!(shown(b"home/a/s"), (true, true));
    assert_eq!(shown(b"/home/a/x/s"), (true, true));
    assert_eq!(shown(b"home/x/../a/s"), (true, true));
    assert_eq!(shown(b"home/a"), (false, true));
    assert_eq!(shown(b"home"), (false, true));
    // Beside it: plain.
    assert_eq!(shown(b"home/s"), (false, false));
    assert_eq!(shown(b"home/ab/s"), (false, false));
    assert_eq!(shown(b"run"), (false, false));
    // Bad declarations; one user's declarations are counted, again is free.
    assert_eq!(t.declare_route(b"/", 7), Err(Errno::EINVAL));
    assert_eq!(t.declare_route(b"/./..", 7), Err(Errno::EINVAL));
    let long = [b"/".as_slice(), &[b'x'; 256]].concat();
    assert_eq!(t.declare_route(&long, 7), Err(Errno::ENAMETOOLONG));
    for i in 0..super::routes::PER_USER {
        t.declare_route(format!("/r/{i}").as_bytes(), 7).unwrap();
    }
    assert_eq!(t.declare_route(b"/r/more", 7), Err(Errno::ENOSPC));
    assert!(t.declare_route(b"/r/0", 7).is_ok());
    // Another's root is one more declaration of 7's (it then governs 7's
    // requests too).
    assert_eq!(t.declare_route(b"/home/a", 7), Err(Errno::ENOSPC));
    assert!(!t.is_route_copy(b"home", 7));
    assert!(t.declare_route(b"/r/more", 8).is_ok());
}

#[test]
fn a_datagram_sends_correction_stands_a_while_per_directory() {
    let t = Tree::new(2, 0, 0, None);
    let first = t.dgram_corrected(b"run/app/log");
    let again = t.dgram_corrected(b"run/app/other");
    let elsewhere = t.dgram_corrected(b"run/app/sub/log");
    println!("first send: {first}, another name there: {again}, below it: {elsewhere}");
    assert_eq!((first, again, elsewhere), (false, true, false));
}

//! In-process tests of the engine: Linux semantics without FUSE.

use std::sync::Arc;

use nix::errno::Errno;

use super::cred::ProcStatus;
use super::*;

pub(super) fn engine() -> Arc<Engine> {
    Engine::new(Config {
        max_dgram_qlen: 10,
        ..Config::small()
    })
}

/// Puts back the references a test took, in order.
pub(super) fn put_all(e: &Engine, socks: &[&Arc<Socket>]) {
    for s in socks {
        e.put(s);
    }
}

pub(super) fn root() -> Caller {
    // This process's thread: its namespaces are the daemon's (pid 1's may
    // not be readable), so that its capabilities count.
    Caller::with_status(
        nix::unistd::gettid().as_raw() as u32,
        ProcStatus {
            tgid: 1,
            uids: [0; 4],
            gids: [0; 4],
            umask: 0o022,
            groups: vec![],
            // All capabilities, as root has.
            cap_eff: !0,
            ..Default::default()
        },
    )
}

/// An engine, root, and a socket pair of type `ty` root made.
pub(super) fn root_pair(ty: SockType) -> (Arc<Engine>, Caller, Arc<Socket>, Arc<Socket>) {
    let (e, c) = (engine(), root());
    let (a, b) = e.socketpair(ty, &c);
    (e, c, a, b)
}

/// An unprivileged caller whose ids are all `uid`.
pub(super) fn user(uid: u32) -> Caller {
    user_in(1, 1, uid)
}

/// A descriptor to pass: one end of a kernel socket pair.
pub(super) fn pipe_end() -> std::os::fd::OwnedFd {
    std::os::unix::net::UnixStream::pair().unwrap().0.into()
}

/// An unprivileged caller whose ids are all `uid`, thread `tid` of process
/// `tgid`.
pub(super) fn user_in(tid: u32, tgid: i32, uid: u32) -> Caller {
    let st = ProcStatus {
        tgid,
        uids: [uid; 4],
        gids: [uid; 4],
        umask: 0o022,
        groups: vec![],
        cap_eff: 0,
        ..Default::default()
    };
    Caller::with_status(tid, st)
}

fn abs(n: &str) -> Addr {
    Addr::Abstract(n.as_bytes().to_vec())
}

fn path(p: &str) -> Addr {
    Addr::Path(p.as_bytes().to_vec())
}

/// A dgram socket bound to `addr` and a client connected to it.
fn dgram_client(e: &Engine, c: &Caller, addr: &Addr) -> (Arc<Socket>, Arc<Socket>) {
    let srv = e.socket(SockType::Dgram, c);
    e.bind(&srv, addr, c).unwrap();
    let cli = e.socket(SockType::Dgram, c);
    e.connect(&cli, addr, c, None).unwrap();
    (srv, cli)
}

/// A plain send of `data` that does not wait.
fn send(e: &Engine, s: &Arc<Socket>, c: &Caller, data: &[u8]) -> Result<usize> {
    e.sendmsg(s, SendMsg::new(data), c, None)
}

/// Sends `data` passing the sockets and deposited files `ids` name.
fn send_passing(e: &Engine, s: &Arc<Socket>, c: &Caller, data: &[u8], ids: &[u64]) {
    let (mut socks, mut files) = e.hold_passed(ids, c).unwrap();
    let msg = SendMsg::new(data).rights(&mut socks).files(&mut files);
    e.sendmsg(s, msg, c, None).unwrap();
}

fn recv(e: &Engine, s: &Arc<Socket>, n: usize) -> Result<Vec<u8>> {
    e.recvmsg(s, RecvFlags::new(n), None).map(|r| r.data)
}

#[test]
fn dgram_boundaries_truncation_and_empty_messages() {
    let (e, c) = (engine(), root());
    let (srv, cli) = dgram_client(&e, &c, &path("log.sock"));
    for m in [&b"one"[..], b"", b"0123456789"] {
        send(&e, &cli, &c, m).unwrap();
    }
    assert_eq!(recv(&e, &srv, 100).unwrap(), b"one");
    assert_eq!(recv(&e, &srv, 100).unwrap(), b"");
    let r = e.recvmsg(&srv, RecvFlags::new(3), None).unwrap();
    assert_eq!((r.data.as_slice(), r.full_len), (&b"012"[..], 10));
    assert_eq!(recv(&e, &srv, 100), Err(Errno::EAGAIN));
}

#[test]
fn dgram_size_limit_comes_before_enotconn() {
    let (e, c) = (engine(), root());
    let s = e.socket(SockType::Dgram, &c);
    let big = vec![0u8; 212961];
    assert_eq!(send(&e, &s, &c, &big), Err(Errno::EMSGSIZE));
    assert_eq!(send(&e, &s, &c, &big[..212960]), Err(Errno::ENOTCONN));
}

#[test]
fn dgram_queue_limit_and_mutual_exception() {
    let (e, c) = (engine(), root());
    let (srv, cli) = dgram_client(&e, &c, &abs("q"));
    for _ in 0..11 {
        send(&e, &cli, &c, b"x").unwrap();
    }
    assert_eq!(send(&e, &cli, &c, b"x"), Err(Errno::EAGAIN));
    // A blocked sender is woken by the receiver.
    let w = ThreadWaiter::new();
    let waiter: Waiter = w.clone();
    assert_eq!(
        e.sendmsg(&cli, SendMsg::new(b"x"), &c, Some(&waiter)),
        Err(Errno::EAGAIN)
    );
    recv(&e, &srv, 10).unwrap();
    w.wait();
    send(&e, &cli, &c, b"x").unwrap();
    // Mutually connected: bounded by the sender budget only.
    let (a, b) = e.socketpair(SockType::Dgram, &c);
    let mut n = 0;
    while send(&e, &a, &c, b"x").is_ok() {
        n += 1;
    }
    assert_eq!(n, 278);
    assert_eq!(b.lock().queue.msgs().len(), 278);
}

#[test]
fn dgram_peer_close_refuses_once_then_enotconn() {
    let (e, c) = (engine(), root());
    let (srv, cli) = dgram_client(&e, &c, &abs("gone"));
    e.put(&srv);
    assert_eq!(send(&e, &cli, &c, b"x"), Err(Errno::ECONNREFUSED));
    assert_eq!(send(&e, &cli, &c, b"x"), Err(Errno::ENOTCONN));
    assert_eq!(recv(&e, &cli, 10), Err(Errno::EAGAIN));
    // The abstract name was freed with the socket.
    let again = e.socket(SockType::Dgram, &c);
    e.bind(&again, &abs("gone"), &c).unwrap();
}

#[test]
fn dgram_target_connected_elsewhere_is_eperm() {
    let (e, c) = (engine(), root());
    let a = e.socket(SockType::Dgram, &c);
    e.bind(&a, &abs("a"), &c).unwrap();
    let b = e.socket(SockType::Dgram, &c);
    e.bind(&b, &abs("b"), &c).unwrap();
    e.connect(&a, &abs("b"), &c, None).unwrap();
    let third = e.socket(SockType::Dgram, &c);
    assert_eq!(
        e.sendmsg(&third, SendMsg::new(b"x").to(&abs("a")), &c, None),
        Err(Errno::EPERM)
    );
    assert_eq!(e.connect(&third, &abs("a"), &c, None), Err(Errno::EPERM));
    // b, a's peer, may send to a.
    e.sendmsg(&b, SendMsg::new(b"x").to(&abs("a")), &c, None)
        .unwrap();
    // sendto own address is delivered to itself.
    e.sendmsg(&b, SendMsg::new(b"me").to(&abs("b")), &c, None)
        .unwrap();
    let r = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
    assert_eq!(r.data, b"me");
    assert_eq!(r.from.unwrap().addr, abs("b"));
}

#[test]
fn names_follow_linux() {
    let (e, c) = (engine(), root());
    let s = e.socket(SockType::Stream, &c);
    e.bind(&s, &abs("n"), &c).unwrap();
    assert_eq!(e.bind(&s, &abs("other"), &c), Err(Errno::EINVAL));
    // One abstract namespace per type.
    let d = e.socket(SockType::Dgram, &c);
    e.bind(&d, &abs("n"), &c).unwrap();
    let s2 = e.socket(SockType::Stream, &c);
    assert_eq!(e.bind(&s2, &abs("n"), &c), Err(Errno::EADDRINUSE));
    let q = e.socket(SockType::Seqpacket, &c);
    assert_eq!(e.connect(&q, &abs("n"), &c, None), Err(Errno::ECONNREFUSED));
    // Autobind: 5 hex digits, idempotent, explicit bind afterwards EINVAL.
    let a = e.socket(SockType::Dgram, &c);
    e.autobind(&a, &c).unwrap();
    let name = a.lock().name.clone().unwrap();
    let Addr::Abstract(n) = &name.addr else {
        panic!("not abstract")
    };
    assert!(
        n.len() == 5
            && n.iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    e.autobind(&a, &c).unwrap();
    assert!(Arc::ptr_eq(&name, a.lock().name.as_ref().unwrap()));
    assert_eq!(e.bind(&a, &abs("late"), &c), Err(Errno::EINVAL));
    // Path names: stale node refuses, rebind needs rm.
    let p = e.socket(SockType::Dgram, &c);
    e.bind(&p, &path("p.sock"), &c).unwrap();
    e.put(&p);
    let p2 = e.socket(SockType::Dgram, &c);
    assert_eq!(
        e.connect(&p2, &path("p.sock"), &c, None),
        Err(Errno::ECONNREFUSED)
    );
    assert_eq!(e.bind(&p2, &path("p.sock"), &c), Err(Errno::EADDRINUSE));
    e.tree.unlink(tree::ROOT_INO, b"p.sock").unwrap();
    e.bind(&p2, &path("p.sock"), &c).unwrap();
    let st = e.socket(SockType::Stream, &c);
    assert_eq!(
        e.connect(&st, &path("p.sock"), &c, None),
        Err(Errno::EPROTOTYPE)
    );
    assert_eq!(
        e.connect(&st, &path("missing"), &c, None),
        Err(Errno::ENOENT)
    );
}

#[test]
fn stream_connect_accept_and_close() {
    let (e, c) = (engine(), root());
    let l = e.socket(SockType::Stream, &c);
    assert_eq!(e.listen(&l, 1, &c), Err(Errno::EINVAL));
    e.bind(&l, &abs("srv"), &c).unwrap();
    e.listen(&l, 1, &c).unwrap();
    let c1 = e.socket(SockType::Stream, &c);
    let c2 = e.socket(SockType::Stream, &c);
    let c3 = e.socket(SockType::Stream, &c);
    e.connect(&c1, &abs("srv"), &c, None).unwrap();
    e.connect(&c2, &abs("srv"), &c, None).unwrap();
    assert_eq!(e.connect(&c3, &abs("srv"), &c, None), Err(Errno::EAGAIN));
    // The target is checked first: a full backlog says EAGAIN even to a
    // connected socket.
    assert_eq!(e.connect(&c1, &abs("srv"), &c, None), Err(Errno::EAGAIN));
    // Sends before accept queue at the embryo and coalesce.
    send(&e, &c1, &c, b"abc").unwrap();
    send(&e, &c1, &c, b"def").unwrap();
    let a1 = e.accept(&l, None).unwrap();
    assert_eq!(e.connect(&c1, &abs("srv"), &c, None), Err(Errno::EISCONN));
    assert_eq!(recv(&e, &a1, 100).unwrap(), b"abcdef");
    e.connect(&c3, &abs("srv"), &c, None).unwrap();
    // Close with unread data: the peer sees ECONNRESET once, then EOF.
    send(&e, &a1, &c, b"unread").unwrap();
    send(&e, &c1, &c, b"x").unwrap();
    e.put(&a1);
    assert_eq!(recv(&e, &c1, 100).unwrap(), b"unread");
    assert_eq!(recv(&e, &c1, 100), Err(Errno::ECONNRESET));
    assert_eq!(recv(&e, &c1, 100).unwrap(), b"");
    assert_eq!(send(&e, &c1, &c, b"x"), Err(Errno::EPIPE));
    // The listener closing resets its pending clients.
    e.put(&l);
    assert_eq!(recv(&e, &c2, 100), Err(Errno::ECONNRESET));
    assert_eq!(recv(&e, &c2, 100).unwrap(), b"");
}

#[test]
fn an_accepted_socket_kept_by_its_listener_outlives_its_handle() {
    let (e, c) = (engine(), root());
    let nobody = Caller::with_status(
        2,
        ProcStatus {
            uids: [65534; 4],
            gids: [65534; 4],
            ..Default::default()
        },
    );
    let l = e.socket(SockType::Stream, &c);
    e.bind(&l, &abs("keep"), &c).unwrap();
    e.listen(&l, 4, &c).unwrap();
    let (c1, c2) = (
        e.socket(SockType::Stream, &c),
        e.socket(SockType::Stream, &c),
    );
    e.connect(&c1, &abs("keep"), &c, None).unwrap();
    e.connect(&c2, &abs("keep"), &c, None).unwrap();
    send(&e, &c1, &c, b"hi").unwrap();
    let a = e.accept(&l, None).unwrap();
    assert_eq!(
        e.keep_accepted(&l, a.id, &nobody),
        Err(Errno::ENOENT),
        "not nobody's"
    );
    let kept = e.keep_accepted(&l, a.id, &c).unwrap();
    // The accept handle closes; the entry holds the socket until opened.
    e.put(&a);
    let d = e.dir(kept).unwrap();
    assert!(e.try_hold(&d.sock));
    e.adopt(kept);
    assert_eq!(recv(&e, &d.sock, 10).unwrap(), b"hi");
    e.put(&d.sock);
    // One nobody opens goes with the listener: its client reads EOF.
    let b = e.accept(&l, None).unwrap();
    e.keep_accepted(&l, b.id, &c).unwrap();
    put_all(&e, &[&b, &l]);
    assert_eq!(recv(&e, &c2, 10).unwrap(), b"");
    put_all(&e, &[&c1, &c2]);
}

#[test]
fn sockets_are_freed_when_the_last_reference_goes() {
    let (e, c) = (engine(), root());
    let before = e.live_sockets();
    let (a, b) = e.socketpair(SockType::Stream, &c);
    let l = e.socket(SockType::Seqpacket, &c);
    e.bind(&l, &abs("l"), &c).unwrap();
    e.listen(&l, 5, &c).unwrap();
    let cl = e.socket(SockType::Seqpacket, &c);
    e.connect(&cl, &abs("l"), &c, None).unwrap();
    for s in [&a, &b, &l, &cl] {
        e.put(s);
    }
    assert_eq!(e.live_sockets(), before);
    assert!(e.dirs().is_empty());
}

/// Passes `what` over `via` (the message lands at via's peer).
fn pass(e: &Engine, via: &Arc<Socket>, what: &Arc<Socket>) {
    let c = root();
    e.hold(what);
    let mut r = vec![what.clone()];
    e.sendmsg(via, SendMsg::new(b"x").rights(&mut r), &c, None)
        .unwrap();
    assert!(r.is_empty(), "rights were queued");
}

/// Runs collections until nothing more is freed.
fn collect_all(e: &Engine) {
    while e.collect() > 0 {}
}

#[test]
fn gc_frees_a_socket_sent_over_itself() {
    let (e, c) = (engine(), root());
    let base = e.live_sockets();
    let (a, b) = e.socketpair(SockType::Dgram, &c);
    pass(&e, &b, &a);
    assert_eq!(a.inflight(), 1);
    put_all(&e, &[&a, &b]);
    assert_eq!(e.live_sockets(), base + 1, "a lives in its own queue");
    collect_all(&e);
    assert_eq!(e.live_sockets(), base);
    assert_eq!(e.gc.total(), 0);
}

#[test]
fn gc_frees_cross_cycles_and_keeps_reachable_ones() {
    for ty in [SockType::Stream, SockType::Dgram, SockType::Seqpacket] {
        let (e, c) = (engine(), root());
        let base = e.live_sockets();
        let (a0, a1) = e.socketpair(ty, &c);
        let (b0, b1) = e.socketpair(ty, &c);
        pass(&e, &b1, &a0); // a0 waits in b0's queue
        pass(&e, &a1, &b0); // b0 waits in a0's queue
        for s in [&a0, &a1, &b1] {
            e.put(s);
        }
        // b0 is still open: everything is reachable through it.
        collect_all(&e);
        assert_eq!(e.live_sockets(), base + 2, "{ty:?}: a0 and b0 live");
        // Take a0 back out of b0's queue: it works.
        let got = e.recvmsg(&b0, RecvFlags::new(10), None).unwrap();
        assert_eq!(got.rights.len(), 1);
        let a0 = got.rights[0].clone();
        assert_eq!(a0.inflight(), 0);
        // And a0's own queue still holds b0's copy.
        let back = e.recvmsg(&a0, RecvFlags::new(10), None).unwrap();
        assert_eq!(back.rights.len(), 1);
        assert_eq!(back.rights[0].id, b0.id);
        e.put(&back.rights[0]);
        put_all(&e, &[&a0, &b0]);
        collect_all(&e);
        assert_eq!(e.live_sockets(), base, "{ty:?}: all freed");
        assert_eq!(e.gc.total(), 0);
    }
}

#[test]
fn gc_frees_a_listener_held_by_its_own_embryo() {
    let (e, c) = (engine(), root());
    let base = e.live_sockets();
    let l = e.socket(SockType::Stream, &c);
    e.bind(&l, &abs("gc-listener"), &c).unwrap();
    e.listen(&l, 5, &c).unwrap();
    let cl = e.socket(SockType::Stream, &c);
    e.connect(&cl, &abs("gc-listener"), &c, None).unwrap();
    pass(&e, &cl, &l); // queued at the embryo, which counts as the listener
    e.put(&l);
    assert!(e.live_sockets() > base + 1);
    collect_all(&e);
    assert_eq!(recv(&e, &cl, 10), Err(Errno::ECONNRESET));
    e.put(&cl);
    assert_eq!(e.live_sockets(), base);
}

#[test]
fn gc_runs_in_the_background_when_the_last_handle_closes() {
    let e = Engine::new(Config::default());
    let c = root();
    let base = e.live_sockets();
    let (a, b) = e.socketpair(SockType::Stream, &c);
    pass(&e, &b, &a);
    put_all(&e, &[&b, &a]);
    let start = std::time::Instant::now();
    while e.live_sockets() != base && start.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(e.live_sockets(), base);
    assert!(
        start.elapsed() < std::time::Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn in_flight_sockets_cannot_be_reopened_by_number() {
    let (e, c, a, b) = root_pair(SockType::Dgram);
    let x = e.socket(SockType::Dgram, &c);
    pass(&e, &a, &x);
    e.put(&x);
    assert!(!e.try_hold(&x), "x lives only in flight");
    let got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
    let ids = e.deliver_rights(&b, got.rights, 0, 0, 16);
    assert_eq!(ids.len(), 1);
    // The entry holds it until opened; opening adopts it.
    let d = e.dir(ids[0]).unwrap();
    assert!(e.try_hold(&d.sock));
    e.adopt(ids[0]);
    assert_eq!(d.sock.refs(), 1);
    put_all(&e, &[&d.sock, &a, &b]);
}

#[test]
fn stream_backpressure_matches_linux_figures() {
    let (e, c) = (engine(), root());
    // 4 KiB sends: 180224 bytes fit, then EAGAIN.
    let (a, _b) = e.socketpair(SockType::Stream, &c);
    let mut total = 0;
    while let Ok(n) = send(&e, &a, &c, &[0u8; 4096]) {
        total += n;
    }
    assert_eq!(total, 180224);
    // One large non-blocking send is partial: 219264 bytes.
    let (x, _y) = e.socketpair(SockType::Stream, &c);
    assert_eq!(send(&e, &x, &c, &vec![0u8; 4 << 20]), Ok(219264));
    assert_eq!(send(&e, &x, &c, b"more"), Err(Errno::EAGAIN));
    // One-byte sends: 278.
    let (p, _q) = e.socketpair(SockType::Stream, &c);
    let mut n = 0;
    while send(&e, &p, &c, b"x").is_ok() {
        n += 1;
    }
    assert_eq!(n, 278);
}

/// Sends `data` as bytes `off..` of one call (a later ioctl of it).
fn send_at(e: &Engine, s: &Arc<Socket>, c: &Caller, data: &[u8], off: usize) -> Result<usize> {
    e.sendmsg(s, SendMsg::new(data).call_off(off), c, None)
}

#[test]
fn a_stream_call_in_ioctl_pieces_queues_what_one_send_does() {
    let (e, c) = (engine(), root());
    // A front carries a 4 MiB non-blocking send in MSG_ROOM (14176-byte)
    // pieces, each saying where in the call it stands: the pieces fill the
    // call's 36544-byte skbs, so 219264 bytes go, as in one send (they were
    // 13 skbs of their own: 184288).
    let (x, _y) = e.socketpair(SockType::Stream, &c);
    let mut off = 0;
    while let Ok(n) = send_at(&e, &x, &c, &[0u8; 14176], off) {
        off += n;
        if n < 14176 {
            break;
        }
    }
    println!("4 MiB in 14176-byte pieces: {off} queued");
    assert_eq!(off, 219264);
    // A piece that claims to go on an skb never begun is refused once
    // more than one skb past the send buffer is queued: a client's claims
    // cannot queue without bound.
    let (p, _q) = e.socketpair(SockType::Stream, &c);
    let mut claimed = 0;
    while send_at(&e, &p, &c, &[0u8; 100], 1).is_ok() {
        claimed += 100;
        assert!(claimed < 1 << 20, "claims queued {claimed} bytes");
    }
    println!("100-byte pieces each claiming offset 1: {claimed} queued, then EAGAIN");
    assert!(p.wmem() <= 212992 + crate::engine::skb::stream_truesize(36544) + 512);
}

#[test]
fn message_charges_follow_kmalloc_size_classes() {
    // Sends until EAGAIN on a socketpair, per size, as measured on Linux 6.18.
    let measured = [
        (100, 278),
        (192, 278),
        (193, 167),
        (700, 167),
        (1000, 93),
        (2000, 49),
    ];
    for ty in [SockType::Stream, SockType::Seqpacket] {
        for (size, want) in measured {
            let (e, c, a, _b) = root_pair(ty);
            let msg = vec![7u8; size];
            let mut n = 0;
            while send(&e, &a, &c, &msg).is_ok() {
                n += 1;
            }
            assert_eq!(n, want, "{ty:?} {size}-byte messages");
        }
    }
    // 4000 bytes: 26 dgram/seqpacket messages, 44 stream chunks.
    let (e, c, a, _b) = root_pair(SockType::Dgram);
    let mut n = 0;
    while send(&e, &a, &c, &[0u8; 4000]).is_ok() {
        n += 1;
    }
    assert_eq!(n, 26);
    let (s, _t) = e.socketpair(SockType::Stream, &c);
    let mut n = 0;
    while send(&e, &s, &c, &[0u8; 4000]).is_ok() {
        n += 1;
    }
    assert_eq!(n, 44);
}

#[test]
fn unopened_received_sockets_are_bounded() {
    let (e, c) = (engine(), root());
    let base = e.live_sockets();
    let (a, b) = e.socketpair(SockType::Dgram, &c);
    for _ in 0..3 {
        let x = e.socket(SockType::Dgram, &c);
        pass(&e, &a, &x);
        e.put(&x);
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        got.extend(e.deliver_rights(&b, r.rights, 0, 0, 2));
    }
    assert_eq!(got.len(), 2, "the third is closed, as past RLIMIT_NOFILE");
    assert_eq!(e.live_sockets(), base + 4);
    // Opening one makes room again.
    let d = e.dir(got[0]).unwrap();
    assert!(e.try_hold(&d.sock));
    e.adopt(got[0]);
    put_all(&e, &[&d.sock, &a, &b]);
    assert_eq!(e.live_sockets(), base);
}

/// A second put of the same reference is refused: the count stays at zero
/// instead of wrapping, and the socket is released once.
#[test]
fn double_put_is_refused() {
    let (e, c) = (engine(), root());
    let s = e.socket(SockType::Stream, &c);
    assert_eq!(e.live_sockets(), 1);
    put_all(&e, &[&s, &s]);
    assert_eq!(s.refs(), 0);
    assert_eq!(e.live_sockets(), 0);
    // A later reference by number is still refused.
    assert!(!e.try_hold(&s));
}

/// A close does not wait for a collection's walk. Another thread walks a
/// large in-flight graph over and over (live cycles, so every collection
/// walks it again); a close of a socket whose queue holds a socket in
/// flight (so it takes the graph lock) counts when the walk phase is the
/// same odd number before and after it, i.e. it completed inside one walk.
/// With the graph lock held for the whole walk no such close could.
#[test]
fn closes_complete_during_a_collection_walk() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const PAIRS: usize = 10_000;
    let (e, c) = (engine(), root());
    let mut held = Vec::with_capacity(PAIRS);
    for _ in 0..PAIRS {
        // b passed over a waits in b's own queue: a cycle the handle keeps alive.
        let (a, b) = e.socketpair(SockType::Stream, &c);
        e.hold(&b);
        let mut rights = vec![b.clone()];
        e.sendmsg(&a, SendMsg::new(b"x").rights(&mut rights), &c, None)
            .unwrap();
        assert!(rights.is_empty());
        held.push((a, b));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let walker = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                e.collect();
            }
        })
    };
    let (mut inside, mut closes) = (0, 0);
    while inside < 3 && e.gc.stats().walks < 200 {
        // A close that must take the graph lock: its queue holds a socket
        // in flight, which leaves the graph with it.
        let (x, y) = e.socketpair(SockType::Dgram, &c);
        let z = e.socket(SockType::Dgram, &c);
        let mut rights = vec![z];
        e.sendmsg(&x, SendMsg::new(b"z").rights(&mut rights), &c, None)
            .unwrap();
        e.put(&x);
        let before = e.gc.walk_phase.load(Ordering::SeqCst);
        e.put(&y);
        let after = e.gc.walk_phase.load(Ordering::SeqCst);
        closes += 1;
        if before % 2 == 1 && before == after {
            inside += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    walker.join().unwrap();
    let walks = e.gc.stats().walks;
    println!("{closes} closes, {inside} inside one of {walks} walks");
    assert!(
        inside >= 3,
        "no close completed inside any of {walks} walks"
    );
    for (a, b) in held {
        put_all(&e, &[&a, &b]);
    }
    while e.collect() > 0 {}
    // The collector's purge drops 10,000 references: most on the release thread.
    e.settle_releases();
    assert_eq!(e.live_sockets(), 0);
}

#[test]
fn graph_marks_dead_what_the_collector_frees_and_nothing_else() {
    let (e, c, a0, a1) = root_pair(SockType::Stream);
    let (b0, b1) = e.socketpair(SockType::Stream, &c);
    pass(&e, &b1, &a0); // a0 waits in b0's queue
    pass(&e, &a1, &b0); // b0 waits in a0's queue
    for s in [&a0, &a1, &b1] {
        e.put(s);
    }
    // b0 is still open: nothing is dead yet, and the view claims nothing.
    assert!(e.gc.view().dead.is_empty());
    let dot = e.graph_dot();
    assert!(!dot.contains("DEAD"), "{dot}");
    assert!(dot.contains(&format!(
        "s{} -> s{} [label=\"in queue of\", color=blue",
        a0.id, b0.id
    )));
    e.put(&b0);
    let view = e.gc.view();
    let mut dead: Vec<u64> = view.dead.iter().copied().collect();
    dead.sort();
    assert_eq!(dead, vec![a0.id, b0.id]);
    let dot = e.graph_dot();
    for s in [&a0, &b0] {
        assert!(
            dot.contains(&format!("s{} [label=\"{} stream", s.id, s.id)),
            "{dot}"
        );
    }
    assert_eq!(dot.matches("DEAD (collector)").count(), 2, "{dot}");
    assert_eq!(
        dot.matches("color=red, fontcolor=red, style=bold").count(),
        2,
        "{dot}"
    );
    // Looking claimed nothing: the collector frees exactly those two.
    assert_eq!(e.collect(), 2);
    assert!(e.gc.view().dead.is_empty());
    assert!(!e.graph_dot().contains("DEAD"));
}

/// A socket passed from an O_NONBLOCK descriptor (its item's NONBLOCK_TAG)
/// reaches the reader's entry number with the tag, for the front to open it
/// nonblocking; the others without it, in order, on a stream and a dgram
/// socket, and a peek gives the same.
#[test]
fn nonblock_passed_sockets_keep_their_tag() {
    use udsfs_proto::passed::{NONBLOCK_TAG, socket_of};
    for ty in [SockType::Stream, SockType::Dgram] {
        let (e, c, a, b) = root_pair(ty);
        let (p, q) = (
            e.socket(SockType::Stream, &c),
            e.socket(SockType::Stream, &c),
        );
        let ids = [p.id | NONBLOCK_TAG, q.id, p.id];
        let mut out = e.prepare_send(None, &ids, &c, false).unwrap();
        e.sendmsg(&a, out.msg(b"x", None, false), &c, None).unwrap();
        let mut peeked = e.recvmsg(&b, RecvFlags::peek(10), None).unwrap();
        let mut got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        for g in [&mut peeked, &mut got] {
            let got_ids = e.deliver_passed(&b, g, &c);
            let nb: Vec<bool> = got_ids.iter().map(|&i| socket_of(i).1).collect();
            println!("{ty:?}: sent {ids:x?}, received {got_ids:x?}");
            assert_eq!(nb, [true, false, false], "{ty:?}");
            assert!(got_ids.iter().all(|&i| e.unopened_entry(socket_of(i).0)));
        }
        e.put_back(out);
    }
}

// ---- files other than udsfs sockets in flight (depot.rs), SO_PASSPIDFD

/// Files ride in order among sockets, count toward the user's in-flight
/// figure but not the collector's total, and close with an unread queue.
#[test]
fn files_in_flight_among_sockets() {
    let (e, c, a, b) = root_pair(SockType::Dgram);
    let passed = e.socket(SockType::Stream, &c);
    let t1 = e.depot.deposit(1, 0, pipe_end()).unwrap();
    let t2 = e.depot.deposit(1, 0, pipe_end()).unwrap();
    let (mut socks, mut files) = e.hold_passed(&[t1, passed.id, t2], &c).unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&files[1].fd);
    e.sendmsg(
        &a,
        SendMsg::new(b"x").rights(&mut socks).files(&mut files),
        &c,
        None,
    )
    .unwrap();
    assert!(socks.is_empty() && files.is_empty());
    assert_eq!(e.gc.user_inflight(0), 3);
    assert_eq!(e.gc.total(), 1);
    let mut got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
    assert_eq!(e.gc.user_inflight(0), 0);
    let ids = e.deliver_passed(&b, &mut got, &c);
    assert_eq!(ids.len(), 3);
    assert!(
        rights::is_file_tag(ids[0]) && !rights::is_file_tag(ids[1]) && rights::is_file_tag(ids[2])
    );
    let claimed = e.depot.claim(&[ids[2]], 0).unwrap();
    assert_eq!(std::os::fd::AsRawFd::as_raw_fd(&claimed[0]), raw);
    // Unclaimed received files go with the receiver.
    assert_eq!(e.depot.len(), 1);
    e.put(&b);
    assert!(e.depot.is_empty());
    // Queued files go with an unread queue.
    let (a, b) = e.socketpair(SockType::Stream, &c);
    let t = e.depot.deposit(1, 0, pipe_end()).unwrap();
    send_passing(&e, &a, &c, b"y", &[t]);
    assert_eq!(e.gc.user_inflight(0), 1);
    e.put(&b);
    assert_eq!(e.gc.user_inflight(0), 0);
    put_all(&e, &[&a, &passed]);
}

#[test]
fn passpidfd_carries_the_sender_pid() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    send(&e, &a, &c, b"1").unwrap();
    e.set_passpidfd(&b, true);
    send(&e, &a, &c, b"2").unwrap();
    // One read never spans a message without credentials and one with.
    let first = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
    assert_eq!((first.data.as_slice(), first.pidfd), (&b"1"[..], Some(0)));
    let second = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
    assert_eq!((second.data.as_slice(), second.pidfd), (&b"2"[..], Some(1)));
    assert_eq!(second.creds, None);
    put_all(&e, &[&a, &b]);
}

/// A dead cycle that also carries a file: the collector frees the sockets and
/// the file closes with them (its other end sees EOF).
#[test]
fn collector_closes_files_carried_by_garbage() {
    use std::io::Read;
    let (e, c, a, b) = root_pair(SockType::Stream);
    let (mut near, far) = std::os::unix::net::UnixStream::pair().unwrap();
    let tag = e.depot.deposit(1, 0, far.into()).unwrap();
    // Each end travels in the other's queue (one with the file): once both
    // are closed, only the queues hold them.
    send_passing(&e, &b, &c, b"x", &[b.id, tag]);
    send_passing(&e, &a, &c, b"y", &[a.id]);
    put_all(&e, &[&b, &a]);
    let mut buf = [0u8; 1];
    near.set_nonblocking(true).unwrap();
    assert!(near.read(&mut buf).is_err(), "held while the cycle waits");
    assert_eq!(e.collect(), 2);
    near.set_nonblocking(false).unwrap();
    assert_eq!(near.read(&mut buf).unwrap(), 0, "the held file was closed");
    assert_eq!(e.gc.user_inflight(0), 0);
}

/// Abstract names and autobinds follow the caller's network namespace: two
/// namespaces hold the same name apart and never find each other's.
#[test]
fn abstract_names_are_per_network_namespace() {
    let e = engine();
    let (ns1, ns2) = (1_000_001, 1_000_002);
    let c1 = root().in_netns(ns1);
    let c2 = root().in_netns(ns2);
    let a = e.socket(SockType::Dgram, &c1);
    e.bind(&a, &abs("shared"), &c1).unwrap();
    let b = e.socket(SockType::Dgram, &c2);
    e.bind(&b, &abs("shared"), &c2).unwrap();
    assert_eq!(
        e.find(&abs("shared"), SockType::Dgram, ns1, &c1)
            .unwrap()
            .id,
        a.id
    );
    assert_eq!(
        e.find(&abs("shared"), SockType::Dgram, ns2, &c2)
            .unwrap()
            .id,
        b.id
    );
    let only1 = e.socket(SockType::Stream, &c1);
    e.bind(&only1, &abs("only1"), &c1).unwrap();
    let q = e.socket(SockType::Stream, &c2);
    assert_eq!(
        e.connect(&q, &abs("only1"), &c2, None),
        Err(Errno::ECONNREFUSED)
    );
    assert!(e.find_abstract_any(b"only1", &c2).is_none());
    assert_eq!(e.find_abstract_any(b"only1", &c1).unwrap().id, only1.id);
    // An autobound name is found from its own namespace only.
    let auto = e.socket(SockType::Dgram, &c1);
    e.autobind(&auto, &c1).unwrap();
    let Addr::Abstract(n) = auto.lock().name.clone().unwrap().addr.clone() else {
        panic!("not abstract")
    };
    assert!(
        e.find(&Addr::Abstract(n.clone()), SockType::Dgram, ns2, &c2)
            .is_err()
    );
    assert_eq!(
        e.find(&Addr::Abstract(n), SockType::Dgram, ns1, &c1)
            .unwrap()
            .id,
        auto.id
    );
    // Each namespace lists its own (as /proc/net/unix).
    let shared = |ns| -> Vec<u64> {
        let names = e.abstract_names(ns).into_iter();
        names
            .filter(|(_, n, _)| n == b"shared")
            .map(|(_, _, s)| s.id)
            .collect()
    };
    assert_eq!(shared(ns1), vec![a.id]);
    assert_eq!(shared(ns2), vec![b.id]);
    // A socket keeps the namespace it was made in (sock_net): made in ns1,
    // bound and used by a caller that has moved to ns2, it files and finds
    // names in ns1.
    let early = e.socket(SockType::Dgram, &c1);
    e.bind(&early, &abs("early"), &c2).unwrap();
    assert_eq!(e.find_abstract_any(b"early", &c1).unwrap().id, early.id);
    assert!(e.find_abstract_any(b"early", &c2).is_none());
    let early_auto = e.socket(SockType::Dgram, &c1);
    e.autobind(&early_auto, &c2).unwrap();
    assert_eq!(listed_ns(&e, &early_auto, &[ns1, ns2]), Some(ns1));
    // Connected by a caller in ns2, it reaches ns1's "shared".
    let sender = e.socket(SockType::Dgram, &c1);
    e.connect(&sender, &abs("shared"), &c2, None).unwrap();
    e.sendmsg(&sender, SendMsg::new(b"to ns1"), &c2, None)
        .unwrap();
    assert_eq!(e.info(&a).inq, Some(6), "ns1's socket got it");
    assert_eq!(e.info(&b).inq, Some(0), "not ns2's");
}

/// Which of namespaces `of` lists socket `s`'s abstract name.
fn listed_ns(e: &Engine, s: &Arc<Socket>, of: &[u64]) -> Option<u64> {
    let lists = |ns| e.abstract_names(ns).iter().any(|(_, _, x)| x.id == s.id);
    of.iter().copied().find(|&ns| lists(ns))
}

/// A cycle through a received reference nobody opened yet is live, not
/// garbage: the alias directory is a name its owner can still open (like a
/// descriptor in a process's table), so the collector leaves it, and opening
/// the alias gets the socket in flight back. What bounds such references is
/// the per-socket limit of `deliver_rights` and the user's share.
#[test]
fn a_cycle_through_an_unopened_reference_is_live() {
    let (e, c) = (engine(), root());
    let base = e.live_sockets();
    let (x1, x2) = e.socketpair(SockType::Stream, &c);
    let (y1, y2) = e.socketpair(SockType::Stream, &c);
    // y1 reaches x2, which keeps it unopened as alias `h`.
    pass(&e, &x1, &y1);
    e.put(&y1);
    let r = e.recvmsg(&x2, RecvFlags::new(10), None).unwrap();
    let h = e.deliver_rights(&x2, r.rights, 0, 0, 16);
    assert_eq!(h.len(), 1);
    // x2 goes into y1's queue; every handle closes.
    pass(&e, &y2, &x2);
    for s in [&x1, &x2, &y2] {
        e.put(s);
    }
    collect_all(&e);
    // x1 and y2 are closed; x2 (in flight) and y1 (unopened) stay.
    assert_eq!(
        e.live_sockets(),
        base + 2,
        "the collector freed a socket its owner can open"
    );
    // Opening the alias adopts y1; its queue gives x2 back.
    let d = e.dir(h[0]).expect("the alias is still there");
    assert!(e.try_hold(&d.sock));
    e.adopt(h[0]);
    let back = e.recvmsg(&d.sock, RecvFlags::new(10), None).unwrap();
    assert_eq!(back.rights.len(), 1);
    for s in back.rights {
        e.put(&s);
    }
    e.put(&d.sock);
    collect_all(&e);
    assert_eq!(
        e.live_sockets(),
        base,
        "everything closes once the cycle is opened and let go"
    );
}

#[test]
fn a_stream_read_stops_before_a_chunk_its_buffers_cannot_take_whole() {
    let (e, c, a, b) = root_pair(SockType::Stream);
    let limited = |writable: usize| RecvFlags {
        limit: Some(Limit {
            writable,
            asked: 64,
        }),
        ..RecvFlags::new(64)
    };
    // Empty: the wait comes first, as Linux's copy comes after it.
    assert_eq!(
        e.recvmsg(&b, limited(0), None).map(|r| r.data),
        Err(Errno::EAGAIN)
    );
    for m in [&b"hello"[..], b"world", b"abcde"] {
        send(&e, &a, &c, m).unwrap();
    }
    // The first write does not fit: EFAULT, nothing taken.
    assert_eq!(
        e.recvmsg(&b, limited(3), None).map(|r| r.data),
        Err(Errno::EFAULT)
    );
    // Two whole writes fit, the third stays queued whole.
    let r = e.recvmsg(&b, limited(12), None).unwrap();
    assert_eq!(r.data, b"helloworld");
    assert_eq!(recv(&e, &b, 64).unwrap(), b"abcde");
    put_all(&e, &[&a, &b]);
}

/// SO_PEERGROUPS: the groups each side had when SO_PEERCRED was taken
/// (listen, connect, socketpair), kept after they change; ENODATA without.
#[test]
fn peer_groups_are_taken_with_the_peer_credentials() {
    let (e, c) = (engine(), root());
    let with_groups = |tid: u32, groups: Vec<u32>| {
        Caller::with_status(
            tid,
            ProcStatus {
                tgid: tid as i32,
                uids: [0; 4],
                gids: [0; 4],
                umask: 0o022,
                groups,
                cap_eff: !0,
                ..Default::default()
            },
        )
    };
    let server = with_groups(2, vec![10, 11]);
    let client = with_groups(3, vec![4, 24, 27]);
    let l = e.socket(SockType::Stream, &server);
    assert_eq!(e.peer_groups(&l).unwrap_err(), Errno::ENODATA);
    e.bind(&l, &abs("groups"), &server).unwrap();
    e.listen(&l, 1, &server).unwrap();
    assert_eq!(&*e.peer_groups(&l).unwrap(), &[10, 11]);
    let s = e.socket(SockType::Stream, &client);
    e.connect(&s, &abs("groups"), &client, None).unwrap();
    let a = e.accept(&l, None).unwrap();
    assert_eq!(&*e.peer_groups(&a).unwrap(), &[4, 24, 27]);
    assert_eq!(&*e.peer_groups(&s).unwrap(), &[10, 11]);
    let (p, _q) = e.socketpair(SockType::Dgram, &client);
    assert_eq!(&*e.peer_groups(&p).unwrap(), &[4, 24, 27]);
    let (p, _q) = e.socketpair(SockType::Stream, &c);
    assert!(e.peer_groups(&p).unwrap().is_empty());
}

/// A received SCM_PIDFD is the reader's to pay for (src/engine/pins.rs
/// `for_holder`): its own copy of the sender's pin, one per process; past
/// its share no pidfd and MSG_CTRUNC (Linux's scm_pidfd_recv), neither the
/// sender's pin left on the sender nor a pid for the library to open.
#[test]
fn a_received_pidfd_is_the_readers_and_past_its_share_is_cut() {
    let as_ =
        |uid: u32, tgid: u32| user_in(nix::unistd::gettid().as_raw() as u32, tgid as i32, uid);
    let mut child = crate::procfs::sleeping_child(5);
    let e = engine();
    let q = e.depot.quota.clone();
    let reader = as_(1001, std::process::id());
    let round = |sender: &Caller, cut: bool| {
        let (a, b) = e.socketpair(SockType::Dgram, sender);
        e.set_passpidfd(&b, true);
        send(&e, &a, sender, b"1").unwrap();
        if cut {
            // Room for 10 more, no share for a user but root.
            q.set_max(q.used() + 10);
            q.set_user_share(1);
        }
        let mut got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        e.deliver_passed(&b, &mut got, &reader);
        (got, a, b)
    };
    let (got, a, b) = round(&as_(1000, std::process::id()), false);
    assert!(got.pidfd_tag.is_some() && !got.ctrunc);
    assert_eq!((q.user_used(1000), q.user_used(1001)), (1, 1));
    // Another process's, with no room left for uid 1001: cut.
    let (got, c, d) = round(&as_(1000, child.id()), true);
    assert_eq!((q.user_used(1000), q.user_used(1001)), (2, 1));
    assert_eq!((got.pidfd, got.pidfd_tag, got.ctrunc), (None, None, true));
    put_all(&e, &[&a, &b, &c, &d]);
    child.kill().unwrap();
    child.wait().unwrap();
}

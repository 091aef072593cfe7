//! Credentials: SO_PASSCRED, SCM_CREDENTIALS (attached, delivered, explicit,
//! validated), SO_PEERCRED, and the implicit autobind of SO_PASSCRED sockets.
//!
//! Pids are shown as "self" (the test process), "own" (a child's own pid in an
//! explicit credential it sends), 0, 1, or "other" (a child, or a pid that does not
//! exist).

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// Unprivileged ids for child processes.
const NOBODY: u32 = 65534;

/// A pid that cannot exist (pid_max is at most 2^22).
const NO_SUCH_PID: i32 = 0x3fff_fff0;

/// The delivery matrix on a connected pair: s0 sends, s1
/// receives; passcred on the sender, on the receiver at send time and at receive
/// time, and explicit credentials sent while nobody asked for any.
fn matrix(b: &mut dyn Backend, s0: Sock, s1: Sock) {
    // S=0, R@send=0, R@recv=0: none.
    b.send(s0, b"r1");
    b.recvmsg(s1, 100);
    // S=0, R@send=1, R@recv=1: real.
    b.passcred(s1, true);
    b.send(s0, b"r2");
    b.recvmsg(s1, 100);
    // S=0, R@send=1, R@recv=0: none.
    b.send(s0, b"r3");
    b.passcred(s1, false);
    b.recvmsg(s1, 100);
    // S=0, R@send=0, R@recv=1: the placeholder 0:65534:65534.
    b.send(s0, b"r4");
    b.passcred(s1, true);
    b.recvmsg(s1, 100);
    b.passcred(s1, false);
    // S=1, R@send=0, R@recv=1: real.
    b.passcred(s0, true);
    b.send(s0, b"r5");
    b.passcred(s1, true);
    b.recvmsg(s1, 100);
    // S=1, R@send=0, R@recv=0: none.
    b.passcred(s1, false);
    b.send(s0, b"r6");
    b.recvmsg(s1, 100);
    b.getsockname(s0);
    b.get_passcred(s0);
    b.get_passcred(s1);
    // Explicit credentials while nobody asks: none, then the explicit values once
    // the receiver asks.
    b.passcred(s0, false);
    b.sendmsg(s0, SendMsg::new(b"r7").creds(Ucred::new(1, 1234, 5678)));
    b.recvmsg(s1, 100);
    b.sendmsg(s0, SendMsg::new(b"r8").creds(Ucred::new(1, 1234, 5678)));
    b.passcred(s1, true);
    b.recvmsg_times(s1, 100, 2);
}

/// §3.2 on a dgram socketpair (the passcred sender autobinds on send).
pub fn matrix_dgram(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    matrix(b, s0, s1);
}

/// §3.2 on a stream socketpair.
pub fn matrix_stream(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Stream);
    matrix(b, s0, s1);
}

/// §3.2 on a seqpacket socketpair.
pub fn matrix_seqpacket(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Seqpacket);
    matrix(b, s0, s1);
}

/// §3.2 on sockets connected by name, in both directions.
pub fn matrix_connected(b: &mut dyn Backend) {
    let (_l, c, a) = b.connection(Stream, p("l.sock"));
    matrix(b, c, a);
    matrix(b, a, c);
}

/// A message sent to a connection not yet accepted carries real credentials even
/// though nobody asked (the embryo rule).
fn embryo(b: &mut dyn Backend, ty: Ty) {
    let l = b.listening(ty, p("l.sock"), 5);
    let c1 = b.connected(ty, p("l.sock"));
    b.send(c1, b"early1");
    let c2 = b.connected(ty, p("l.sock"));
    b.send(c2, b"early2");
    let a1 = b.accept(l);
    let a2 = b.accept(l);
    b.passcred(a1, true);
    b.recvmsg(a1, 100);
    // Read without passcred: no credentials shown.
    b.recvmsg(a2, 100);
    // After accept the embryo rule is over: nobody asks, then the receiver asks.
    b.send(c2, b"late");
    b.passcred(a2, true);
    b.recvmsg(a2, 100);
    b.send(c1, b"late1");
    b.recvmsg(a1, 100);
    b.getsockname(c1);
    b.getsockname(c2);
}

pub fn embryo_stream(b: &mut dyn Backend) {
    embryo(b, Stream);
}

pub fn embryo_seqpacket(b: &mut dyn Backend) {
    embryo(b, Seqpacket);
}

/// Explicit credentials as root: own values, a nonexistent pid (ESRCH), pid 0,
/// forged values (delivered verbatim), invalid uid or gid (EINVAL).
pub fn explicit_root(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    b.passcred(s1, true);
    b.sendmsg(s0, SendMsg::new(b"own").creds(Ucred::own()));
    b.recvmsg(s1, 100);
    b.sendmsg(
        s0,
        SendMsg::new(b"nopid").creds(Ucred::new(NO_SUCH_PID, 0, 0)),
    );
    b.sendmsg(s0, SendMsg::new(b"pid0").creds(Ucred::new(0, 0, 0)));
    b.sendmsg(s0, SendMsg::new(b"forged").creds(Ucred::new(1, 1234, 5678)));
    b.recvmsg(s1, 100);
    b.sendmsg(
        s0,
        SendMsg::new(b"baduid").creds(Ucred::new(1, u32::MAX, 0)),
    );
    b.sendmsg(
        s0,
        SendMsg::new(b"badgid").creds(Ucred::new(1, 0, u32::MAX)),
    );
    b.recvmsg(s1, 100);
    // Explicit credentials win over the sender's passcred.
    b.passcred(s0, true);
    b.sendmsg(s0, SendMsg::new(b"both").creds(Ucred::new(1, 42, 43)));
    b.recvmsg(s1, 100);
    // On a stream, explicit values keep their chunk apart from the next one.
    let (t0, t1) = b.pair(Stream);
    b.passcred(t1, true);
    b.sendmsg(t0, SendMsg::new(b"FFF").creds(Ucred::new(1, 1234, 5678)));
    b.send(t0, b"PPP");
    b.sendmsg(t0, SendMsg::new(b"GGG").creds(Ucred::new(1, 1234, 5678)));
    b.sendmsg(t0, SendMsg::new(b"HHH").creds(Ucred::new(1, 1234, 5678)));
    b.recvmsg_times(t1, 100, 4);
}

/// Explicit credentials from an unprivileged process (real, effective and saved ids
/// 65534): its own pid and ids pass, anything else is EPERM (scm_check_creds).
pub fn explicit_unprivileged(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Dgram);
    b.passcred(s1, true);
    let nobody = Child {
        ids: Some((NOBODY, NOBODY)),
        nofile: None,
    };
    let m = |tag: &[u8], pid: i32, uid: u32, gid: u32| {
        ChildOp::SendMsg(s0, SendMsg::new(tag).creds(Ucred::new(pid, uid, gid)))
    };
    b.child(
        nobody,
        &[
            m(b"own", OWN_PID, NOBODY, NOBODY),
            m(b"pid1", 1, NOBODY, NOBODY),
            m(b"pid0", 0, NOBODY, NOBODY),
            m(b"parent", std::process::id() as i32, NOBODY, NOBODY),
            m(b"nopid", NO_SUCH_PID, NOBODY, NOBODY),
            m(b"uid0", OWN_PID, 0, NOBODY),
            m(b"uid1234", OWN_PID, 1234, NOBODY),
            m(b"gid0", OWN_PID, NOBODY, 0),
            ChildOp::Send(s0, b"plain".to_vec()),
        ],
    );
    b.recvmsg_times(s1, 100, 3);
}

/// With passcred on the receiver, one stream read never spans chunks whose
/// credentials differ (another process wrote the middle one); without it they merge.
pub fn stream_no_merge(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Stream);
    b.passcred(s1, true);
    b.send(s0, b"PPP");
    b.child(Child::default(), &[ChildOp::Send(s0, b"CCC".to_vec())]);
    b.send(s0, b"QQQ");
    b.recv_times(s1, 100, 4);
    b.send(s0, b"PPP");
    b.child(Child::default(), &[ChildOp::Send(s0, b"CCC".to_vec())]);
    b.send(s0, b"QQQ");
    b.recvmsg_times(s1, 100, 3);
    // Sent while the receiver asked, read after it stopped: they merge.
    b.send(s0, b"PPP");
    b.child(Child::default(), &[ChildOp::Send(s0, b"CCC".to_vec())]);
    b.passcred(s1, false);
    b.recv(s1, 100);
    // Nobody asks: nothing attached, they merge.
    b.send(s0, b"PPP");
    b.child(Child::default(), &[ChildOp::Send(s0, b"CCC".to_vec())]);
    b.recvmsg(s1, 100);
    // Nobody asked at send time, the receiver asks at read time: all placeholders,
    // equal, so they merge.
    b.send(s0, b"PPP");
    b.child(Child::default(), &[ChildOp::Send(s0, b"CCC".to_vec())]);
    b.passcred(s1, true);
    b.recvmsg(s1, 100);
}

/// SO_PEERCRED: socketpairs, listeners, connections (a listener set up by another
/// process, a client that is another process), unconnected and dgram sockets.
pub fn peercred(b: &mut dyn Backend) {
    for ty in [Stream, Dgram, Seqpacket] {
        let (x, y) = b.pair(ty);
        b.peercred(x);
        b.peercred(y);
    }
    let u = b.socket(Stream);
    b.peercred(u);
    // Our own listener.
    let l = b.bound(Stream, ab(b"pc"));
    b.peercred(l);
    b.listen(l, 5);
    b.peercred(l);
    let c = b.socket(Stream);
    b.peercred(c);
    b.connect(c, ab(b"pc"));
    b.peercred(c);
    let a = b.accept(l);
    b.peercred(a);
    // A client in another process, then one with other ids (an abstract name:
    // no permission checks).
    let c2 = b.socket(Stream);
    b.child(Child::default(), &[ChildOp::Connect(c2, ab(b"pc"))]);
    b.peercred(c2);
    let a2 = b.accept(l);
    b.peercred(a2);
    let c3 = b.socket(Stream);
    b.child(
        Child {
            ids: Some((NOBODY, NOBODY)),
            nofile: None,
        },
        &[ChildOp::Connect(c3, ab(b"pc"))],
    );
    let a3 = b.accept(l);
    b.peercred(a3);
    // A listener set up by another process with other ids: its clients see those.
    let l2 = b.bound(Seqpacket, p("l2.sock"));
    b.child(
        Child {
            ids: Some((NOBODY, NOBODY)),
            nofile: None,
        },
        &[ChildOp::Listen(l2, 5)],
    );
    b.peercred(l2);
    let c4 = b.connected(Seqpacket, p("l2.sock"));
    b.peercred(c4);
    let a4 = b.accept(l2);
    b.peercred(a4);
    // Listening again takes the caller's credentials again.
    b.listen(l2, 10);
    b.peercred(l2);
    // dgram connect sets nothing.
    let d0 = b.bound(Dgram, p("d0.sock"));
    let d1 = b.bound(Dgram, p("d1.sock"));
    b.connect(d1, p("d0.sock"));
    b.connect(d0, p("d1.sock"));
    b.peercred(d0);
    b.peercred(d1);
}

/// An accepted socket has the listener's passcred as it was when the client
/// connected, not as it is at accept time.
pub fn accept_inherits_passcred(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    b.passcred(l, true);
    let c1 = b.connected(Stream, p("l.sock"));
    b.passcred(l, false);
    let c2 = b.connected(Stream, p("l.sock"));
    b.passcred(l, true);
    let a1 = b.accept(l);
    let a2 = b.accept(l);
    b.get_passcred(a1);
    b.get_passcred(a2);
    b.get_passcred(l);
    b.get_passcred(c1);
    // What the accepted sockets then receive.
    b.send(c1, b"one");
    b.send(c2, b"two");
    b.recvmsg(a1, 100);
    b.recvmsg(a2, 100);
    // The client's passcred is its own.
    b.passcred(c2, true);
    b.send(a2, b"back");
    b.recvmsg(c2, 100);
}

/// A socketpair (x, y) of `ty`, x with SO_PASSCRED: the names of x before and after
/// it sends, and the name y sees for its peer and the message.
fn pair_send_names(b: &mut dyn Backend, ty: Ty) -> (Sock, Sock) {
    let (x, y) = b.pair(ty);
    b.passcred(x, true);
    b.getsockname(x);
    b.send_then_name(x, b"p");
    b.getpeername(y);
    b.recvmsg(y, 100);
    (x, y)
}

/// SO_PASSCRED autobinds an unbound socket on connect (stream, dgram, seqpacket)
/// and on dgram/seqpacket send, never on listen or stream send.
pub fn autobind(b: &mut dyn Backend) {
    let srv = b.bound(Dgram, p("srv.sock"));
    let d = b.passcred_socket(Dgram);
    b.getsockname(d);
    b.connect_then_name(d, p("srv.sock"));
    b.send(d, b"hi");
    b.recvfrom(srv, 100);
    let d2 = b.passcred_socket(Dgram);
    b.sendto_then_name(d2, b"to", p("srv.sock"));
    b.recvfrom(srv, 100);
    // Already bound: nothing changes.
    let d4 = b.bound(Dgram, p("d4.sock"));
    b.passcred(d4, true);
    b.sendto_then_name(d4, b"named", p("srv.sock"));
    b.recvfrom(srv, 100);
    // Stream: connect autobinds, the server sees the name.
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.passcred_socket(Stream);
    b.connect_then_name(c, p("l.sock"));
    let a = b.accept(l);
    b.getpeername(a);
    b.send(c, b"x");
    b.recvmsg(a, 100);
    // Seqpacket connect.
    let _ql = b.listening(Seqpacket, p("q.sock"), 5);
    let qc = b.passcred_socket(Seqpacket);
    b.connect_then_name(qc, p("q.sock"));
    // listen does not autobind.
    let u = b.passcred_socket(Stream);
    b.listen(u, 5);
    b.getsockname(u);
    // Socketpairs: dgram sends autobind, stream sends do not.
    for ty in [Dgram, Stream] {
        pair_send_names(b, ty);
    }
}

/// The implicit autobind comes before the target is looked up: a connect or
/// sendto that fails still leaves the socket autobound.
pub fn autobind_before_lookup(b: &mut dyn Backend) {
    let d = b.passcred_socket(Dgram);
    b.sendto_then_name(d, b"nowhere", p("missing.sock"));
    let d2 = b.passcred_socket(Dgram);
    b.connect_then_name(d2, p("missing.sock"));
    for ty in [Stream, Seqpacket] {
        let c = b.passcred_socket(ty);
        b.connect_then_name(c, p("missing.sock"));
    }
    // A type mismatch is found after the autobind too.
    let _srv = b.bound(Dgram, p("srv.sock"));
    let c = b.passcred_socket(Stream);
    b.connect_then_name(c, p("srv.sock"));
}

/// seqpacket sends go through the dgram send path, which autobinds a passcred
/// socket (a socketpair has no name otherwise); the receiver sees the name.
pub fn autobind_seqpacket_send(b: &mut dyn Backend) {
    let (x, y) = pair_send_names(b, Seqpacket);
    b.sendmsg(x, SendMsg::new(b"q"));
    b.recvmsg(y, 100);
}

/// SO_PEERCRED records effective ids, SCM_CREDENTIALS real ones: a client whose
/// thread has effective ids 65534 (real ids still 0) connects and sends.
pub fn peercred_effective_ids(b: &mut dyn Backend) {
    let l = b.listening(Stream, ab(b"peff"), 5);
    let c = b.socket(Stream);
    // Use the socket once as root (udsfs: the files it needs are opened now; the
    // mount is not --allow-other, but an open file is usable by any thread).
    b.poll(c);
    b.recvmsg(c, 100);
    b.as_user(NOBODY, NOBODY);
    b.connect(c, ab(b"peff"));
    b.send(c, b"early");
    b.as_root();
    b.peercred(c);
    let a = b.accept(l);
    b.peercred(a);
    b.passcred(a, true);
    b.recvmsg(a, 100);
    b.as_user(NOBODY, NOBODY);
    b.send(c, b"late");
    b.sendmsg(c, SendMsg::new(b"forged").creds(Ucred::new(1, 0, 0)));
    b.sendmsg(
        c,
        SendMsg::new(b"own").creds(Ucred::new(std::process::id() as i32, NOBODY, 0)),
    );
    b.as_root();
    b.recvmsg_times(a, 100, 3);
}

//! Passing sockets (SCM_RIGHTS) and the in-flight garbage collector (the
//! shapes of the kernel selftest tools/testing/selftests/net/af_unix/scm_rights.c).
//!
//! "Collected" is observed from outside: the peer of a cycle member sees the member
//! go (EOF, ECONNRESET, HUP), and `alive` says whether the socket still exists
//! (kernel: listed in /proc/net/unix; udsfs: `.udsfs/sock/N` exists). Every check
//! comes after `gc`, since the kernel (6.18) collects only when some AF_UNIX
//! socket is released after the cycle became dead.

use std::sync::Mutex;

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// How a peer sees its partner: a receive and a poll.
fn look(b: &mut dyn Backend, s: Sock) {
    b.recv(s, 100);
    b.poll(s);
}

/// A recvmsg on `s`: the first socket the message passed (BAD_SOCK for none).
pub fn recv_right(b: &mut dyn Backend, s: Sock) -> Sock {
    b.recvmsg(s, 100)
        .ok()
        .and_then(|m| m.rights.first().copied())
        .unwrap_or(BAD_SOCK)
}

/// Two stream pairs (A0, B0), (A1, B1) with A0 queued at A1 and A1 at A0 (sent
/// over B1 and B0): (A0, B0, A1, B1).
fn two_cycle(b: &mut dyn Backend) -> (Sock, Sock, Sock, Sock) {
    let (a0, b0) = b.pair(Stream);
    let (a1, b1) = b.pair(Stream);
    b.sendmsg(b1, SendMsg::new(b"0").rights(&[a0]));
    b.sendmsg(b0, SendMsg::new(b"1").rights(&[a1]));
    (a0, b0, a1, b1)
}

/// `s` sent with `data` over `via` and its handle here closed, so that only
/// the message holds it; what names it in `alive`.
fn send_away(b: &mut dyn Backend, s: Sock, via: Sock, data: &[u8]) -> Ident {
    let id = b.ident(s);
    b.sendmsg(via, SendMsg::new(data).rights(&[s]));
    b.close_ref(s);
    id
}

/// The received listener handle `h` accepts `client`, whose `data` arrives; then
/// the accepted socket and `h` close and the client looks.
fn accept_through(b: &mut dyn Backend, h: Sock, client: Sock, data: &[u8]) {
    let a = b.accept(h);
    b.send(client, data);
    b.recv(a, 100);
    b.close_refs(&[a, h]);
    look(b, client);
}

/// Pairs (A_i, B_i) and, for each edge (inflight, receiver), A_inflight sent twice
/// in one message over B_receiver, which queues it at A_receiver (the selftest's
/// `send_fd`). Then every A is closed, the collector runs, and each B and A is
/// looked at.
fn shape(b: &mut dyn Backend, ty: Ty, n: usize, edges: &[(usize, usize)]) {
    let (a, bb): (Vec<Sock>, Vec<Sock>) = (0..n).map(|_| b.pair(ty)).unzip();
    collect_graph(b, &a, &bb, edges, |_, _| {});
}

/// The same with listeners: L_i bound and listening, C_i connected to it (not
/// accepted); L_inflight sent over C_receiver lands in L_receiver's embryo. Once
/// a listener goes, its pending clients see ECONNRESET.
fn shape_listeners(b: &mut dyn Backend, ty: Ty, n: usize, edges: &[(usize, usize)]) {
    let (l, c): (Vec<Sock>, Vec<Sock>) = (0..n)
        .map(|i| {
            let x = b.listening(ty, p(&format!("l{i}.sock")), 5);
            let y = b.connected(ty, p(&format!("l{i}.sock")));
            (x, y)
        })
        .unzip();
    collect_graph(b, &l, &c, edges, |b, s| {
        b.send(s, b"y");
    });
}

/// For each edge (inflight, receiver), `passed[inflight]` sent twice in one
/// message over `via[receiver]`; then every passed socket is closed, the
/// collector runs, each of `via` is looked at (and `then` done with it), each
/// passed socket's existence checked, and `via` closed.
fn collect_graph(
    b: &mut dyn Backend,
    passed: &[Sock],
    via: &[Sock],
    edges: &[(usize, usize)],
    then: impl Fn(&mut dyn Backend, Sock),
) {
    for &(f, r) in edges {
        b.sendmsg(via[r], SendMsg::new(b"x").rights(&[passed[f], passed[f]]));
    }
    let ids: Vec<Ident> = passed.iter().map(|&s| b.ident(s)).collect();
    for &s in passed {
        b.close_ref(s);
    }
    b.gc();
    for &s in via {
        look(b, s);
        then(b, s);
    }
    for i in ids {
        b.alive(i);
    }
    for &s in via {
        b.close_ref(s);
    }
}

/// Scenarios that are each one graph: `name: how(type, sockets, edges)`, `how`
/// being `shape` or `shape_listeners`.
macro_rules! graphs {
    ($($(#[$doc:meta])* $name:ident: $how:ident($ty:expr, $n:expr, $edges:expr);)*) => {
        $(
            $(#[$doc])*
            pub fn $name(b: &mut dyn Backend) {
                $how(b, $ty, $n, $edges);
            }
        )*
    };
}

const SELF_REF: &[(usize, usize)] = &[(0, 0), (1, 1)];
const CROSS: &[(usize, usize)] = &[(0, 1), (1, 0)];
const TRIANGLES: &[(usize, usize)] = &[(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)];

graphs! {
    /// A socket sent over its own peer, so that its own queue holds it (selftest
    /// self_ref).
    self_ref_stream: shape(Stream, 2, SELF_REF);
    self_ref_dgram: shape(Dgram, 2, SELF_REF);
    self_ref_seqpacket: shape(Seqpacket, 2, SELF_REF);

    /// Two sockets each in the other's queue.
    cross_stream: shape(Stream, 2, CROSS);
    cross_dgram: shape(Dgram, 2, CROSS);
    cross_seqpacket: shape(Seqpacket, 2, CROSS);

    /// Selftest triangle: two 3-cycles.
    triangle_stream: shape(Stream, 6, TRIANGLES);
    triangle_dgram: shape(Dgram, 6, TRIANGLES);

    /// Selftest cross_edge: a 3-cycle with a chord through a fourth socket.
    cross_edge: shape(Stream, 8, &[
        (0, 1), (1, 2), (2, 0), (1, 3), (3, 2),
        (4, 5), (5, 6), (6, 4), (5, 7), (7, 6),
    ]);

    /// Selftest backtrack_from_scc: a socket outside a cycle that only the cycle and
    /// an ordinary socket hold.
    backtrack_from_scc: shape(Stream, 10, &[
        (0, 1), (0, 4), (1, 2), (2, 3), (3, 1),
        (5, 6), (5, 9), (6, 7), (7, 8), (8, 6),
    ]);

    /// The graph of selftest mixed_lowpoint (a 2-cycle and a 3-cycle sharing a
    /// vertex). The edges are sent in another order than the selftest's: in the
    /// selftest's order (0,1),(1,2),(2,1),(1,0) this kernel (6.18.44) never collects
    /// the component, not after any number of collector runs (measured), while any
    /// order whose first edge leaves vertex 1 is collected.
    mixed_lowpoint: shape(Dgram, 6, &[
        (1, 2), (2, 1), (1, 0), (0, 1),
        (4, 5), (5, 4), (4, 3), (3, 4),
    ]);

    /// A listener sent into its own embryo (the embryo's queue counts as the
    /// listener's): collected, and the pending client gets ECONNRESET.
    listener_self_stream: shape_listeners(Stream, 1, &[(0, 0)]);
    listener_self_seqpacket: shape_listeners(Seqpacket, 1, &[(0, 0)]);

    /// Selftest triangle and cross_edge with listeners.
    listener_triangle: shape_listeners(Stream, 3, &[(0, 1), (1, 2), (2, 0)]);
    listener_cross_edge: shape_listeners(Stream, 4, &[(0, 1), (1, 2), (2, 0), (1, 3), (3, 2)]);
}

/// A passed connected socket still reaches its peer, also after the sender closed
/// its own handle while the socket was in flight; the receiver's handle works both
/// ways, and closing it is the end of the socket.
pub fn passed_socket_works(b: &mut dyn Backend) {
    let (a, a2) = b.pair(Stream);
    let (c, d) = b.pair(Dgram);
    let id = send_away(b, a, c, b"take");
    b.alive(id);
    // The peer writes to it while it is in flight.
    b.send(a2, b"early");
    let h = recv_right(b, d);
    b.recv(h, 100);
    b.send(a2, b"hello");
    b.recv(h, 100);
    b.send(h, b"back");
    b.recv(a2, 100);
    b.getpeername(h);
    b.close_ref(h);
    b.gc();
    look(b, a2);
    b.alive(id);
    b.close_refs(&[a2, c, d]);
}

/// A listener passed to another socket keeps listening: the received handle
/// accepts.
pub fn passed_listener_accepts(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let (c, d) = b.pair(Seqpacket);
    b.sendmsg(c, SendMsg::new(b"l").rights(&[l]));
    b.close_ref(l);
    let k = b.connected(Stream, p("l.sock"));
    let h = recv_right(b, d);
    accept_through(b, h, k, b"hi");
    b.close_refs(&[k, c, d]);
}

/// A cycle with one member still open is alive: the sockets come back out of the
/// queues and work.
pub fn cycle_one_open(b: &mut dyn Backend) {
    let (a0, b0, a1, b1) = two_cycle(b);
    let i1 = b.ident(a1);
    b.close_ref(a1);
    b.gc();
    b.alive(i1);
    look(b, b1);
    // a0 holds a1: take it out, and a0 out of it.
    let h1 = recv_right(b, a0);
    let h0 = recv_right(b, h1);
    b.send(b1, b"ping");
    b.recv(h1, 100);
    b.send(h1, b"pong");
    b.recv(b1, 100);
    b.send(b0, b"via");
    b.recv(h0, 100);
    b.recv(a0, 100);
    // Closing every handle now is an ordinary close: nothing is in flight.
    b.close_refs(&[h0, a0, h1]);
    look(b, b0);
    look(b, b1);
    b.alive(i1);
    b.close_refs(&[b0, b1]);
}

/// An in-flight socket held only by a live socket's queue is not garbage: after the
/// collector it is still there and can be received and used. When the holder
/// closes instead, it goes with the holder's queue.
pub fn reachable_not_collected(b: &mut dyn Backend) {
    let (a0, b0) = b.pair(Stream);
    let (r, w) = b.pair(Dgram);
    let i0 = send_away(b, a0, w, b"hold");
    b.gc();
    b.alive(i0);
    look(b, b0);
    let h = recv_right(b, r);
    b.send(b0, b"hi");
    b.recv(h, 100);
    // Back in flight, then the holder closes: its queue takes the socket along.
    b.sendmsg(w, SendMsg::new(b"again").rights(&[h]));
    b.close_refs(&[h, r]);
    b.gc();
    b.alive(i0);
    look(b, b0);
    b.close_refs(&[b0, w]);
}

/// A cycle whose member is also queued at a live socket is not collected; once that
/// copy was received and closed, the cycle is dead and collected.
pub fn cycle_also_held_outside(b: &mut dyn Backend) {
    let (a0, b0) = b.pair(Stream);
    let (a1, b1) = b.pair(Stream);
    let (r, w) = b.pair(Dgram);
    b.sendmsg(b1, SendMsg::new(b"0").rights(&[a0]));
    b.sendmsg(b0, SendMsg::new(b"1").rights(&[a1]));
    b.sendmsg(w, SendMsg::new(b"out").rights(&[a0]));
    let (i0, i1) = (b.ident(a0), b.ident(a1));
    b.close_refs(&[a0, a1]);
    b.gc();
    b.alive_all(&[i0, i1]);
    look(b, b0);
    look(b, b1);
    let h = recv_right(b, r);
    b.close_ref(h);
    b.gc();
    b.alive_all(&[i0, i1]);
    look(b, b0);
    look(b, b1);
    b.close_refs(&[b0, b1, r, w]);
}

/// A listener sent into its own embryo, then the embryo is accepted: the accepted
/// socket holds the listener, which is alive; closing the accepted socket drops it.
pub fn embryo_accepted(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.connected(Stream, p("l.sock"));
    b.sendmsg(c, SendMsg::new(b"x").rights(&[l]));
    let a = b.accept(l);
    let il = b.ident(l);
    b.close_ref(l);
    b.gc();
    b.alive(il);
    let c2 = b.connected(Stream, p("l.sock"));
    b.close_ref(a);
    b.gc();
    b.alive(il);
    look(b, c);
    look(b, c2);
    b.close_refs(&[c, c2]);
}

/// SCM_MAX_FD: 253 sockets in one message pass, 254 are EINVAL; the receiver gets
/// 253 new handles.
fn max_fd(b: &mut dyn Backend, ty: Ty) {
    let (s0, s1) = b.pair(ty);
    let (x, y) = b.pair(Stream);
    b.sendmsg(s0, SendMsg::new(b"many").rights(&vec![x; 254]));
    b.sendmsg(s0, SendMsg::new(b"max").rights(&vec![x; 253]));
    let got = b
        .recvmsg(s1, 100)
        .ok()
        .map(|m| m.rights)
        .unwrap_or_default();
    // Every received handle is the same socket.
    b.send(y, b"one");
    if let Some(&h) = got.last() {
        b.recv(h, 100);
    }
    for h in got {
        b.close_ref(h);
    }
    b.close_ref(x);
    look(b, y);
    b.close_refs(&[y, s0, s1]);
}

pub fn max_fd_dgram(b: &mut dyn Backend) {
    max_fd(b, Dgram);
}

pub fn max_fd_stream(b: &mut dyn Backend) {
    max_fd(b, Stream);
}

/// Zero-length data with sockets: a stream drops the sockets (send returns 0, the
/// peer gets nothing, the passed socket is closed); dgram and seqpacket deliver
/// an empty message with them.
pub fn zero_length_with_rights(b: &mut dyn Backend) {
    for ty in [Stream, Dgram, Seqpacket] {
        let (s0, s1) = b.pair(ty);
        let (v, vp) = b.pair(Stream);
        let iv = send_away(b, v, s0, b"");
        b.alive(iv);
        look(b, vp);
        if let Some(m) = b.recvmsg(s1, 100).ok() {
            for h in m.rights {
                b.close_ref(h);
            }
        }
        b.alive(iv);
        look(b, vp);
        b.close_refs(&[vp, s0, s1]);
    }
}

/// A plain receive (no room for control data) closes the sockets a message carries.
pub fn recv_without_control(b: &mut dyn Backend) {
    for ty in [Dgram, Stream] {
        let (s0, s1) = b.pair(ty);
        let (v, vp) = b.pair(Stream);
        let iv = send_away(b, v, s0, b"m");
        b.alive(iv);
        b.recv(s1, 100);
        b.alive(iv);
        look(b, vp);
        b.close_refs(&[vp, s0, s1]);
    }
}

/// On a stream, a read stops after a chunk that carried sockets: "aaaa", "b" with
/// a socket, "cccc" read as "aaaab" (with the socket) and "cccc"; two chunks with
/// sockets are never read together.
pub fn stream_barrier(b: &mut dyn Backend) {
    let (s0, s1) = b.pair(Stream);
    let (x, y) = b.pair(Stream);
    b.send(s0, b"aaaa");
    b.sendmsg(s0, SendMsg::new(b"b").rights(&[x]));
    b.send(s0, b"cccc");
    b.sendmsg(s0, SendMsg::new(b"d").rights(&[x]));
    b.sendmsg(s0, SendMsg::new(b"e").rights(&[y]));
    b.send(s0, b"ffff");
    let mut got = Vec::new();
    for _ in 0..5 {
        if let Some(m) = b.recvmsg(s1, 100).ok() {
            got.extend(m.rights);
        }
    }
    for h in got {
        b.close_ref(h);
    }
    b.close_refs(&[x, y, s0, s1]);
}

/// Only one run of `etoomanyrefs` at a time in this process: the kernel counts
/// in-flight files per user system-wide.
static TOOMANY: Mutex<()> = Mutex::new(());

/// Users with no privileges: each run takes the next uid, because the kernel
/// drops a user's in-flight count only when its sockets are freed, which may
/// lag behind the end of the previous run.
static NEXT_USER: std::sync::atomic::AtomicU32 =
    std::sync::atomic::AtomicU32::new(super::backend::SCRATCH_UID);

/// ETOOMANYREFS: a user whose in-flight count is over its RLIMIT_NOFILE (checked
/// before adding, so one message may overshoot) cannot pass more; receiving makes
/// room again; root is exempt.
pub fn etoomanyrefs(b: &mut dyn Backend) {
    let _one = TOOMANY.lock().unwrap_or_else(|e| e.into_inner());
    #[allow(non_snake_case)]
    let USER = NEXT_USER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    b.multiuser();
    // The socket to pass belongs to the user (udsfs lets only the owner pass it).
    b.as_user(USER, USER);
    let (x, x2) = b.pair(Dgram);
    b.as_root();
    let (s, q) = b.pair(Dgram);
    let user = Child {
        ids: Some((USER, USER)),
        nofile: Some(32),
    };
    let one = ChildOp::SendMsg(s, SendMsg::new(b"1").rights(&[x]));
    b.child(user, &vec![one.clone(); 36]);
    // Receiving one (and closing it) makes room for one more message.
    if let Some(m) = b.recvmsg(q, 100).ok() {
        for h in m.rights {
            b.close_ref(h);
        }
    }
    b.child(user, &vec![one.clone(); 2]);
    // Ten at a time: 0, 10, 20, 30 in flight pass, 40 does not.
    let (s2, q2) = b.pair(Dgram);
    b.close_ref(q);
    let ten = ChildOp::SendMsg(s2, SendMsg::new(b"10").rights(&[x; 10]));
    b.child(user, &vec![ten; 6]);
    b.close_ref(q2);
    // Root is exempt, whatever its RLIMIT_NOFILE.
    let (s3, q3) = b.pair(Dgram);
    let root = Child {
        ids: None,
        nofile: Some(32),
    };
    let r = ChildOp::SendMsg(s3, SendMsg::new(b"r").rights(&[x]));
    b.child(root, &vec![r; 60]);
    b.close_refs(&[q3, s3, s2, s, x, x2]);
}

/// sendto() with sockets and credentials from an unconnected dgram socket.
pub fn sendto_with_rights(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    b.passcred(r, true);
    let u = b.socket(Dgram);
    let (v, vp) = b.pair(Stream);
    b.sendmsg(
        u,
        SendMsg::new(b"x")
            .to(p("r.sock"))
            .creds(Ucred::new(1, 2, 3))
            .rights(&[v, v]),
    );
    b.sendmsg(u, SendMsg::new(b"y").to(p("missing.sock")).rights(&[v]));
    b.close_ref(v);
    let got = b.recvmsg(r, 100).ok().map(|m| m.rights).unwrap_or_default();
    b.recvmsg(r, 100);
    b.send(vp, b"hi");
    for h in got {
        b.recv(h, 100);
        b.close_ref(h);
    }
    look(b, vp);
    b.close_refs(&[vp, u, r]);
}

/// A listener sent into its own embryo is received by the accepted socket, and the
/// received handle accepts the next connection.
pub fn embryo_accepted_receive(b: &mut dyn Backend) {
    let l = b.listening(Seqpacket, p("l.sock"), 5);
    let c = b.connected(Seqpacket, p("l.sock"));
    b.sendmsg(c, SendMsg::new(b"x").rights(&[l]));
    let a = b.accept(l);
    b.close_ref(l);
    let h = recv_right(b, a);
    let c2 = b.connected(Seqpacket, p("l.sock"));
    accept_through(b, h, c2, b"second");
    b.close_refs(&[c2, a, c]);
}

/// A cycle with a second handle (dup) still open on a member is alive; once the
/// dup is closed, the next collection frees it.
pub fn cycle_dup_open(b: &mut dyn Backend) {
    let (a0, b0, a1, b1) = two_cycle(b);
    let d = b.dup(a0);
    let (i0, i1) = (b.ident(a0), b.ident(a1));
    b.close_refs(&[a0, a1]);
    b.gc();
    b.alive_all(&[i0, i1]);
    look(b, b0);
    b.close_ref(d);
    b.gc();
    b.alive_all(&[i0, i1]);
    look(b, b0);
    look(b, b1);
    b.close_refs(&[b0, b1]);
}

//! Blocking scenarios: one call blocks on a thread of its own (read on an empty
//! queue, write on a full one, accept, connect on a full backlog, a send that
//! passes a socket), then another operation, a close, a shutdown or a signal ends
//! the wait; the completed results and what the other side then sees are compared.
//!
//! A scenario waits for a woken call by joining it; where the kernel leaves a call
//! blocked, `still_blocked` records that and a signal ends it. Reads that race with
//! a woken writer are summed up (`received`) rather than recorded one by one.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;
use super::rights::recv_right;
use super::stream::ignore_sigpipe;

/// Bytes of a stream write larger than the sender's budget (212992), so that it
/// queues part and then blocks; one FUSE request (< 1 MiB - 4 KiB).
const BIG: usize = 300_000;

/// Non-blocking receives until the first error or EOF; what they returned, not
/// recorded.
fn drain_raw(b: &mut dyn Backend, s: Sock, bufsize: usize) -> (Vec<Vec<u8>>, String) {
    let (got, stop) = b.recvs_until_empty(s, bufsize, 100_000);
    (got, stop.to_string())
}

/// Drains a stream and records the bytes as one payload (length and hash), and
/// what ended the draining.
fn drain_bytes(b: &mut dyn Backend, s: Sock) -> Vec<u8> {
    let (got, end) = drain_raw(b, s, 1 << 16);
    let all = got.concat();
    b.trace().push(
        format!("recv(s{s}) until empty"),
        format!("ok {}, then {end}", show_bytes(&all)),
    );
    all
}

/// Drains a dgram or seqpacket socket and records the messages in order.
fn drain_msgs(b: &mut dyn Backend, s: Sock) {
    let (got, end) = drain_raw(b, s, 1 << 16);
    let v: Vec<String> = got.iter().map(|d| show_bytes(d)).collect();
    b.trace().push(
        format!("recv(s{s}) until empty"),
        format!("ok [{}], then {end}", show_runs(v)),
    );
}

/// Non-blocking sends of `chunk` bytes until EAGAIN; records how many fit.
fn fill(b: &mut dyn Backend, s: Sock, chunk: usize) -> Vec<u8> {
    let data = pattern(chunk);
    let (took, stop) = b.sends_until_error(s, &data, 100_001);
    let n = took.len();
    let sent: Vec<u8> = took.iter().flat_map(|&k| &data[..k]).copied().collect();
    let end = match stop {
        Stop::Err(e) => e,
        _ => "no EAGAIN".to_string(),
    };
    b.trace().push(
        format!("send(s{s}, {chunk} bytes) until full"),
        format!("ok {n} sends, {} bytes, then ERR {end}", sent.len()),
    );
    sent
}

/// Drains a dgram or seqpacket socket and records the messages sorted (for
/// messages whose order depends on which of several woken senders won).
fn drain_msgs_sorted(b: &mut dyn Backend, s: Sock) {
    let (got, end) = drain_raw(b, s, 1 << 16);
    let mut v: Vec<String> = got.iter().map(|d| show_bytes(d)).collect();
    v.sort();
    b.trace().push(
        format!("recv(s{s}) until empty (sorted)"),
        format!("ok [{}], then {end}", show_runs(v)),
    );
}

/// Records the total a stream reader got across several drains, against what the
/// writer was told was sent.
fn received(b: &mut dyn Backend, what: &str, got: &[u8]) {
    b.trace()
        .push(format!("received in total ({what})"), show_bytes(got));
}

/// A dgram receiver bound at `r.sock` and a sender connected to it, whose queue
/// is then full (max_dgram_qlen + 1 one-byte messages).
fn full_dgram_receiver(b: &mut dyn Backend) -> (Sock, Sock) {
    let r = b.bound(Dgram, p("r.sock"));
    let c = b.connected(Dgram, p("r.sock"));
    fill(b, c, 1);
    (r, c)
}

// ------------------------------------------------------------ read on empty

/// A socketpair of `ty` whose second end is blocked in a read.
fn blocked_read(b: &mut dyn Backend, ty: Ty) -> (Sock, Sock, Job) {
    let (x, y) = b.pair(ty);
    let j = b.start(Blocking::Recv(y, 100));
    (x, y, j)
}

/// Joins a read its peer ended; a dgram reader is not told and stays blocked until
/// a signal.
fn join_ended_by_peer(b: &mut dyn Backend, ty: Ty, j: Job) {
    if ty == Dgram {
        b.still_blocked(j);
        b.signal(j);
    }
    b.join(j);
}

/// A read blocked on `y` that `wake` (given both ends) ends, then a message
/// `later` from `x` read after it.
fn read_woken(
    b: &mut dyn Backend,
    ty: Ty,
    wake: impl FnOnce(&mut dyn Backend, Sock, Sock),
    later: &[u8],
) {
    let (x, y, j) = blocked_read(b, ty);
    wake(b, x, y);
    b.join(j);
    b.recv(y, 100);
    b.send(x, later);
    b.recv(y, 100);
}

fn read_woken_by_write(b: &mut dyn Backend, ty: Ty) {
    let wake = |b: &mut dyn Backend, x, _| {
        b.send(x, b"hello");
    };
    read_woken(b, ty, wake, b"again");
}

/// Stream and seqpacket readers see EOF; a dgram reader is not told (no
/// mirroring for dgram) and stays blocked until a signal.
fn read_ended_by_peer_close(b: &mut dyn Backend, ty: Ty) {
    ignore_sigpipe();
    let (x, y, j) = blocked_read(b, ty);
    b.close(x);
    join_ended_by_peer(b, ty, j);
    b.recv(y, 100);
    b.send(y, b"x");
}

fn read_ended_by_peer_shut_wr(b: &mut dyn Backend, ty: Ty) {
    ignore_sigpipe();
    let (x, y, j) = blocked_read(b, ty);
    b.shutdown(x, How::Wr);
    join_ended_by_peer(b, ty, j);
    b.recv(y, 100);
    b.send(y, b"back");
    b.recv(x, 100);
}

/// Every type wakes the reader with an empty read, dgram too (although a later
/// non-blocking dgram read gives EAGAIN, not EOF).
fn read_ended_by_own_shut_rd(b: &mut dyn Backend, ty: Ty) {
    ignore_sigpipe();
    let wake = |b: &mut dyn Backend, _, y| {
        b.shutdown(y, How::Rd);
    };
    read_woken(b, ty, wake, b"late");
}

/// A blocking read that starts after the reader's own shutdown(SHUT_RD) does not
/// block on any type.
fn read_after_own_shut_rd(b: &mut dyn Backend, ty: Ty) {
    let (x, y) = b.pair(ty);
    b.shutdown(y, How::Rd);
    let j = b.start(Blocking::Recv(y, 100));
    b.join(j);
    b.send(x, b"late");
}

fn read_ended_by_signal(b: &mut dyn Backend, ty: Ty) {
    let (x, y, j) = blocked_read(b, ty);
    b.signal(j);
    b.join(j);
    // The interrupted read took nothing: the next message is whole.
    b.send(x, b"after");
    b.recv(y, 100);
}

pub fn stream_read_woken_by_write(b: &mut dyn Backend) {
    read_woken_by_write(b, Stream);
}
pub fn dgram_read_woken_by_write(b: &mut dyn Backend) {
    read_woken_by_write(b, Dgram);
}
pub fn seqpacket_read_woken_by_write(b: &mut dyn Backend) {
    read_woken_by_write(b, Seqpacket);
}
pub fn stream_read_peer_close(b: &mut dyn Backend) {
    read_ended_by_peer_close(b, Stream);
}
pub fn dgram_read_peer_close(b: &mut dyn Backend) {
    read_ended_by_peer_close(b, Dgram);
}
pub fn seqpacket_read_peer_close(b: &mut dyn Backend) {
    read_ended_by_peer_close(b, Seqpacket);
}
pub fn stream_read_peer_shut_wr(b: &mut dyn Backend) {
    read_ended_by_peer_shut_wr(b, Stream);
}
pub fn dgram_read_peer_shut_wr(b: &mut dyn Backend) {
    read_ended_by_peer_shut_wr(b, Dgram);
}
pub fn seqpacket_read_peer_shut_wr(b: &mut dyn Backend) {
    read_ended_by_peer_shut_wr(b, Seqpacket);
}
pub fn stream_read_own_shut_rd(b: &mut dyn Backend) {
    read_ended_by_own_shut_rd(b, Stream);
}
pub fn dgram_read_own_shut_rd(b: &mut dyn Backend) {
    read_ended_by_own_shut_rd(b, Dgram);
}
pub fn seqpacket_read_own_shut_rd(b: &mut dyn Backend) {
    read_ended_by_own_shut_rd(b, Seqpacket);
}
pub fn stream_read_after_own_shut_rd(b: &mut dyn Backend) {
    read_after_own_shut_rd(b, Stream);
}
pub fn dgram_read_after_own_shut_rd(b: &mut dyn Backend) {
    read_after_own_shut_rd(b, Dgram);
}
pub fn seqpacket_read_after_own_shut_rd(b: &mut dyn Backend) {
    read_after_own_shut_rd(b, Seqpacket);
}
pub fn stream_read_signal(b: &mut dyn Backend) {
    read_ended_by_signal(b, Stream);
}
pub fn dgram_read_signal(b: &mut dyn Backend) {
    read_ended_by_signal(b, Dgram);
}
pub fn seqpacket_read_signal(b: &mut dyn Backend) {
    read_ended_by_signal(b, Seqpacket);
}

// ------------------------------------------------------------ write on full

/// A socketpair of `ty` whose first end's queue is full (`fill`) and a write
/// of `data` started on it: blocked.
fn blocked_write_on_full(b: &mut dyn Backend, ty: Ty, data: Vec<u8>) -> (Sock, Sock, Job) {
    let (x, y) = b.pair(ty);
    fill(b, x, 4096);
    let j = b.start(Blocking::Send(x, data));
    (x, y, j)
}

/// The reader `y` closes under the write `j` on `x`; then `x` writes again and
/// reads twice.
fn reader_closes_under_write(b: &mut dyn Backend, (x, y, j): (Sock, Sock, Job)) {
    b.close(y);
    b.join(j);
    b.send(x, b"more");
    b.recv_times(x, 100, 2);
}

/// A big write queues what the budget takes and blocks; a small read does not
/// free enough to wake it (the writer wakes at 3/4 free); a signal ends it with
/// the count of what it queued.
pub fn stream_write_drain_little_then_signal(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let data = pattern(BIG);
    let j = b.start(Blocking::Send(x, data));
    b.recv(y, 4096);
    b.still_blocked(j);
    b.signal(j);
    b.join(j);
    drain_bytes(b, y);
}

/// Draining everything wakes the writer, which then completes.
pub fn stream_write_drain_all(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let data = pattern(BIG);
    let j = b.start(Blocking::Send(x, data));
    let mut got = drain_raw(b, y, 1 << 16).0.concat();
    b.join(j);
    got.extend(drain_raw(b, y, 1 << 16).0.concat());
    received(b, "both drains", &got);
}

/// The reader closes while the writer has queued part: the write reports the
/// part (a count, not EPIPE); the next write gets EPIPE. The reader left bytes
/// unread: the close's ECONNRESET went to the blocked write, which took it
/// (sock_alloc_send_pskb) and returned its count: a read sees EOF.
pub fn stream_write_partial_reader_closes(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (x, y) = b.pair(Stream);
    let j = b.start(Blocking::Send(x, pattern(BIG)));
    reader_closes_under_write(b, (x, y, j));
}

/// The queue is full before the write starts and the reader closes with all
/// that unread: the kernel ends the blocked write with ECONNRESET (the close sets
/// the writer's sk_err, which the waiting allocation reports and so consumes),
/// the next write gets EPIPE and a read sees EOF, no second ECONNRESET.
pub fn stream_write_full_reader_closes(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (x, y, j) = blocked_write_on_full(b, Stream, pattern(4096));
    reader_closes_under_write(b, (x, y, j));
}

/// The reader shuts its reading side: the blocked writer gets EPIPE.
pub fn stream_write_full_reader_shut_rd(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (_, y, j) = blocked_write_on_full(b, Stream, pattern(4096));
    b.shutdown(y, How::Rd);
    b.join(j);
    drain_bytes(b, y);
}

/// SO_SNDTIMEO of a write asleep for room (the `*_timeout_finds_room` scenarios):
/// longer than the 2 s in which the harness under `udsfs run` takes a call asleep
/// in a lane (not parked in the daemon) for blocked.
const TIMEO_MS: u32 = 3000;

/// A write asleep on a full stream; the reader takes 64 KiB, room for the write's
/// two skbs but too little to wake it (unix_writable: a quarter of the budget).
/// When SO_SNDTIMEO runs out the writer looks once more (sock_alloc_send_pskb) and
/// goes: its count, not EAGAIN. udsfs gave EAGAIN there through every front, with
/// lanes and without, until the daemon's watchdog and the lane's writer gave the
/// timed-out wait that last look.
pub fn stream_write_timeout_finds_room(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    b.sndtimeo(x, TIMEO_MS);
    let mut sent = fill(b, x, 4096);
    let late = pattern(60_000);
    let j = b.start(Blocking::Send(x, late.clone()));
    let first = b.recv(y, 1 << 16).ok().unwrap_or_default();
    if let Some(Done::Count(n)) = b.join(j).ok() {
        sent.extend_from_slice(&late[..n.min(late.len())]);
    }
    let got = [first, drain_bytes(b, y)].concat();
    b.trace()
        .push("received == sent".to_string(), (got == sent).to_string());
}

/// The same with records: a record asleep on a full seqpacket socket goes at its
/// SO_SNDTIMEO into the room one record read left (too little to wake it).
pub fn seqpacket_write_timeout_finds_room(b: &mut dyn Backend) {
    let (x, y) = b.pair(Seqpacket);
    b.sndtimeo(x, TIMEO_MS);
    fill(b, x, 4096);
    let j = b.start(Blocking::Send(x, b"late".to_vec()));
    b.recv(y, 4096);
    b.join(j);
    drain_msgs(b, y);
}

/// A signal to a write that queued nothing: EINTR, and nothing of it arrives.
pub fn stream_write_full_signal(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let mut sent = fill(b, x, 4096);
    let j = b.start(Blocking::Send(x, b"never".to_vec()));
    b.signal(j);
    b.join(j);
    b.send(x, b"after");
    sent.extend_from_slice(b"after");
    let got = drain_bytes(b, y);
    b.trace()
        .push("received == sent".to_string(), (got == sent).to_string());
}

/// One read frees a slot of the full dgram queue: the blocked send goes in.
pub fn dgram_write_full_receiver_reads(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let j = b.start(Blocking::Send(c, b"late".to_vec()));
    b.recv(r, 100);
    b.join(j);
    drain_msgs(b, r);
}

/// The receiver closes: the blocked sender learns that its peer is gone.
pub fn dgram_write_full_receiver_closes(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let j = b.start(Blocking::Send(c, b"late".to_vec()));
    b.close(r);
    b.join(j);
    b.send(c, b"again");
}

pub fn dgram_write_full_signal(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let j = b.start(Blocking::Send(c, b"never".to_vec()));
    b.signal(j);
    b.join(j);
    drain_msgs(b, r);
}

/// Seqpacket is bounded by the sender's budget: one read does not wake the
/// writer, draining all does.
pub fn seqpacket_write_full_drain(b: &mut dyn Backend) {
    let (_, y, j) = blocked_write_on_full(b, Seqpacket, b"late".to_vec());
    b.recv(y, 8192);
    b.still_blocked(j);
    let (mut got, _) = drain_raw(b, y, 8192);
    b.join(j);
    got.extend(drain_raw(b, y, 8192).0);
    let v: Vec<String> = got.iter().map(|d| show_bytes(d)).collect();
    b.trace()
        .push("received in total".to_string(), show_runs(v));
}

pub fn seqpacket_write_full_peer_closes(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (x, y, j) = blocked_write_on_full(b, Seqpacket, b"late".to_vec());
    b.close(y);
    b.join(j);
    b.send(x, b"again");
}

pub fn seqpacket_write_full_signal(b: &mut dyn Backend) {
    let (_, y, j) = blocked_write_on_full(b, Seqpacket, b"never".to_vec());
    b.signal(j);
    b.join(j);
    drain_msgs(b, y);
}

/// Two senders blocked on one full dgram receiver: each read lets exactly one
/// more message in.
pub fn dgram_writers_one_slot_each(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let c2 = b.socket(Dgram);
    let jobs = [
        b.start(Blocking::Send(c, b"late1".to_vec())),
        b.start(Blocking::SendMsg(
            c2,
            SendMsg::new(b"late2").to(p("r.sock")),
        )),
    ];
    b.recv(r, 100);
    b.count_ended(&jobs, 1);
    b.recv(r, 100);
    b.join_sorted(&jobs);
    drain_msgs_sorted(b, r);
}

// ------------------------------------------------------------ accept

pub fn accept_woken_by_connect(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let j = b.start(Blocking::Accept(l));
    let c = b.connected(Stream, p("l.sock"));
    let s = b.join(j).ok().and_then(|d| match d {
        Done::Sock(s) => Some(s),
        _ => None,
    });
    let s = s.unwrap_or(BAD_SOCK);
    b.send(c, b"hi");
    b.recv(s, 100);
    b.getsockname(s);
    b.accept(l);
}

pub fn accept_seqpacket_woken_by_connect(b: &mut dyn Backend) {
    let l = b.listening(Seqpacket, p("l.sock"), 5);
    let j = b.start(Blocking::Accept(l));
    let c = b.connected(Seqpacket, p("l.sock"));
    if let Some(Done::Sock(s)) = b.join(j).ok() {
        b.send(s, b"hello");
        b.recv(c, 100);
    }
}

pub fn accept_signal(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let j = b.start(Blocking::Accept(l));
    b.signal(j);
    b.join(j);
    // Nothing was taken from the listener by the interrupted accept.
    let _c = b.connected(Stream, p("l.sock"));
    b.accept_times(l, 2);
}

/// shutdown(SHUT_RD) of the listener ends a blocked accept with EINVAL.
pub fn accept_listener_shutdown(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let j = b.start(Blocking::Accept(l));
    b.shutdown(l, How::Rd);
    b.join(j);
    let _c = b.connected(Stream, p("l.sock"));
}

// ------------------------------------------------------------ connect on a full backlog

/// A listener with backlog 0 (one pending connection fits) and one client
/// pending; a second client's connect blocks.
fn full_backlog(b: &mut dyn Backend) -> (Sock, Sock, Sock, Job) {
    full_backlog_for(b, |b| b.socket(Stream))
}

/// `full_backlog` with the second client made by `client`.
fn full_backlog_for(
    b: &mut dyn Backend,
    client: impl FnOnce(&mut dyn Backend) -> Sock,
) -> (Sock, Sock, Sock, Job) {
    let l = b.listening(Stream, p("l.sock"), 0);
    let c1 = b.connected(Stream, p("l.sock"));
    let c2 = client(b);
    let j = b.start(Blocking::Connect(c2, p("l.sock")));
    (l, c1, c2, j)
}

/// An accept lets the waiting connect in; both clients talk to their own
/// accepted socket.
fn let_in(b: &mut dyn Backend, (l, c1, c2, j): (Sock, Sock, Sock, Job)) {
    let s1 = b.accept(l);
    b.join(j);
    let s2 = b.accept(l);
    b.send(c1, b"one");
    b.send(c2, b"two");
    b.recv(s1, 100);
    b.recv(s2, 100);
    b.getpeername(c2);
}

pub fn connect_backlog_ended_by_accept(b: &mut dyn Backend) {
    let waiting = full_backlog(b);
    let_in(b, waiting);
}

/// A socket received over SCM_RIGHTS (its first descriptor closed) blocks in
/// connect on a full backlog and is let in by an accept: a front reaches the
/// waiting connect through the directory it received the socket by, not the
/// first one (revoked with the first descriptor).
pub fn connect_backlog_received_socket(b: &mut dyn Backend) {
    let waiting = full_backlog_for(b, |b| {
        let x = b.socket(Stream);
        b.bind(x, p("x.sock"));
        let (r, w) = b.pair(Dgram);
        b.sendmsg(w, SendMsg::new(b"x").rights(&[x]));
        b.close_ref(x);
        recv_right(b, r)
    });
    let_in(b, waiting);
    b.getsockname(waiting.2);
}

pub fn connect_backlog_listener_close(b: &mut dyn Backend) {
    ignore_sigpipe();
    let (l, c1, c2, j) = full_backlog(b);
    b.close(l);
    b.join(j);
    b.getpeername(c2);
    b.send(c2, b"x");
    b.recv_times(c1, 100, 2);
}

pub fn connect_backlog_signal(b: &mut dyn Backend) {
    let (l, _c1, c2, j) = full_backlog(b);
    b.signal(j);
    b.join(j);
    b.getpeername(c2);
    // The interrupted connect left nothing queued: one accept, then a free slot.
    b.accept_times(l, 2);
    b.connect(c2, p("l.sock"));
    b.accept(l);
}

/// The same on seqpacket: the blocked connect completes once a slot is free,
/// and the accepted connection carries records both ways.
pub fn connect_backlog_seqpacket(b: &mut dyn Backend) {
    let l = b.listening(Seqpacket, p("l.sock"), 0);
    let _c1 = b.connected(Seqpacket, p("l.sock"));
    let c2 = b.socket(Seqpacket);
    let j = b.start(Blocking::Connect(c2, p("l.sock")));
    b.accept(l);
    b.join(j);
    let s2 = b.accept(l);
    b.send(c2, b"rec");
    b.recv(s2, 100);
    b.send(s2, b"back");
    b.recv(c2, 100);
}

/// Two connects blocked on one full backlog: one accept lets exactly one in.
pub fn connect_backlog_two_waiters(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 0);
    let _c1 = b.connected(Stream, p("l.sock"));
    let c2 = b.socket(Stream);
    let c3 = b.socket(Stream);
    let jobs = [
        b.start(Blocking::Connect(c2, p("l.sock"))),
        b.start(Blocking::Connect(c3, p("l.sock"))),
    ];
    b.accept(l);
    b.count_ended(&jobs, 1);
    b.accept(l);
    b.join_sorted(&jobs);
    b.accept_times(l, 2);
}

// ------------------------------------------------------------ passing sockets

/// Issue 11 defect 1: a send that passes a socket parks on a full dgram
/// receiver; once the receiver drains, the socket must arrive and work.
pub fn rights_parked_send(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let (x, y) = b.pair(Stream);
    let j = b.start(Blocking::SendMsg(c, SendMsg::new(b"abc").rights(&[x])));
    b.recv(r, 100);
    b.join(j);
    b.recv_times(r, 100, 10);
    if let Some(m) = b.recvmsg(r, 100).ok()
        && let Some(&got) = m.rights.first()
    {
        b.send(got, b"ping");
        b.recv(y, 100);
        b.send(y, b"pong");
        b.recv(got, 100);
    }
    b.recv(r, 100);
}

/// A blocked recvmsg is woken by a message that passes a socket; the socket
/// arrives with it and works.
pub fn dgram_recvmsg_woken_by_rights(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let c = b.socket(Dgram);
    let (x, y) = b.pair(Stream);
    let j = b.start(Blocking::RecvMsg(r, 100));
    b.sendmsg(c, SendMsg::new(b"take").to(p("r.sock")).rights(&[x]));
    if let Some(Done::Msg(m)) = b.join(j).ok()
        && let Some(&got) = m.rights.first()
    {
        b.send(y, b"hello");
        b.recv(got, 100);
    }
}

/// A parked send that passes a socket is interrupted: nothing is queued, and the
/// socket stays the sender's, alive and working.
pub fn rights_parked_send_signal(b: &mut dyn Backend) {
    let (r, c) = full_dgram_receiver(b);
    let (x, y) = b.pair(Stream);
    let j = b.start(Blocking::SendMsg(c, SendMsg::new(b"abc").rights(&[x])));
    b.signal(j);
    b.join(j);
    drain_msgs(b, r);
    b.send(x, b"still");
    b.recv(y, 100);
}

// ------------------------------------------------------------ partly sent stream records

/// Issue 11 defect 2: a non-blocking sendmsg of a 65536-byte record on a nearly
/// full stream queues part and reports that part; the writer sends the rest as
/// the count told it, and the reader gets every byte exactly once.
pub fn stream_msg_partial_eagain(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let mut sent = fill(b, x, 4096);
    let first = b.recv(y, 8192).ok().map_or(0, |d| d.len());
    let rec = pattern(65536);
    let n = b.sendmsg(x, SendMsg::new(&rec)).ok();
    let mut got = drain_raw(b, y, 1 << 16).0.concat();
    let n = n.unwrap_or(0);
    b.sendmsg(x, SendMsg::new(&rec[n..]));
    got.extend(drain_raw(b, y, 1 << 16).0.concat());
    sent.extend_from_slice(&rec);
    received(b, "fill and record", &got);
    b.trace().push(
        "received == sent".to_string(),
        (got == sent[first.min(sent.len())..]).to_string(),
    );
}

/// Issue 11 defect 2, blocking: a sendmsg larger than the budget queues part and
/// blocks; a signal ends it with the count of what it queued; the rest is sent
/// again as the count says, and every byte arrives once.
pub fn stream_msg_partial_signal(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let rec = pattern(BIG);
    let j = b.start(Blocking::SendMsg(x, SendMsg::new(&rec)));
    b.signal(j);
    let n = match b.join(j).ok() {
        Some(Done::Count(n)) => n,
        _ => 0,
    };
    let mut got = drain_raw(b, y, 1 << 16).0.concat();
    b.sendmsg(x, SendMsg::new(&rec[n..]));
    got.extend(drain_raw(b, y, 1 << 16).0.concat());
    received(b, "record", &got);
}

// ------------------------------------------------------------ several readers

/// Three readers blocked on one dgram socket, three messages: each message goes
/// to exactly one reader.
pub fn dgram_readers_one_message_each(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let c = b.socket(Dgram);
    let jobs: Vec<Job> = (0..3).map(|_| b.start(Blocking::Recv(r, 100))).collect();
    for i in 0..3 {
        b.sendto(c, format!("m{i}").as_bytes(), p("r.sock"));
    }
    b.join_sorted(&jobs);
    b.recv(r, 100);
}

/// Four readers, two messages: exactly two readers end, the others stay blocked
/// until two more messages come.
pub fn dgram_more_readers_than_messages(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let c = b.socket(Dgram);
    let jobs: Vec<Job> = (0..4).map(|_| b.start(Blocking::Recv(r, 100))).collect();
    b.sendto(c, b"m0", p("r.sock"));
    b.sendto(c, b"m1", p("r.sock"));
    b.count_ended(&jobs, 2);
    b.sendto(c, b"m2", p("r.sock"));
    b.sendto(c, b"m3", p("r.sock"));
    b.join_sorted(&jobs);
    b.recv(r, 100);
}

/// A stream reader blocked on an empty queue is woken by a write that passes a
/// socket; the socket comes with the data.
pub fn stream_recvmsg_woken_by_rights(b: &mut dyn Backend) {
    let (x, y) = b.pair(Stream);
    let (u, v) = b.pair(Dgram);
    let j = b.start(Blocking::RecvMsg(y, 100));
    b.sendmsg(x, SendMsg::new(b"fd").rights(&[u]));
    if let Some(Done::Msg(m)) = b.join(j).ok()
        && let Some(&got) = m.rights.first()
    {
        b.send(got, b"via");
        b.recv(v, 100);
    }
}

/// Two readers on a seqpacket socket, two records: one each, whole.
pub fn seqpacket_readers_one_record_each(b: &mut dyn Backend) {
    let (x, y) = b.pair(Seqpacket);
    let jobs: Vec<Job> = (0..2).map(|_| b.start(Blocking::Recv(y, 100))).collect();
    b.send(x, b"first");
    b.send(x, b"second");
    b.join_sorted(&jobs);
    b.recv(y, 100);
}

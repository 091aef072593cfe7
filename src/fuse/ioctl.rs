//! ioctls on a socket's files: the control operations and the
//! sendmsg/recvmsg that the preload library needs in one round trip each
//! (wire format in `udsfs_proto::ioctl`). A message call of a caller that blocks
//! (MSGF_WAIT) parks like a read or write (`park.rs`); control operations
//! never park (a blocking connect falls back to the ctl file, which does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::park::deferring_wakeups;
use super::reply::IoctlReply;
use crate::engine::socket::BoundName;
use crate::engine::sockflags::Options;
use crate::engine::timeo::Direction;
use crate::engine::{
    Addr, Buf, Caller, Engine, Limit, RecvFlags, RightsRoom, SockType, Socket, Ucred, Waiter,
};
use udsfs_proto::addr::MAX_PATH_NAME;
use udsfs_proto::ioctl::*;

/// A message call that must wait, with the reply it owes: the caller parks
/// it (`Inner::ioctl`, io.rs) and retries it with `retry_message`.
pub(super) type Blocked = (MsgCall, IoctlReply);

/// Answers one ioctl on a file of `sock`, or hands back the message call
/// that must wait; commands that are not udsfs's (shells probe terminals
/// with TCGETS) get ENOTTY.
pub(super) fn ioctl(
    eng: &Arc<Engine>,
    sock: Option<&Arc<Socket>>,
    cmd: u32,
    input: &[u8],
    c: &Caller,
    reply: IoctlReply,
) -> Result<(), Blocked> {
    let Some(sock) = sock.filter(|_| cmd == UDSFS_IOC_CTL || cmd == UDSFS_IOC_MSG) else {
        reply.error(Errno::ENOTTY);
        return Ok(());
    };
    if cmd == UDSFS_IOC_MSG {
        return match MsgCall::new(input) {
            Ok(call) => deferring_wakeups(|| start_message(eng, sock, call, c, reply)),
            Err(e) => {
                reply.error(e);
                Ok(())
            }
        };
    }
    let res = read_struct::<Ctl>(input).and_then(|mut ctl| {
        control(eng, sock, &mut ctl, c)?;
        Ok(as_bytes(&ctl).to_vec())
    });
    match res {
        Ok(out) => reply.ioctl(out),
        Err(e) => reply.error(e),
    }
    Ok(())
}

/// What ioctl `cmd` with `input` needs of its socket's lane (one decision,
/// for `lane_down` before the call and `lane_down_after` after it).
#[derive(PartialEq)]
enum LaneNeed {
    /// The lane's own calls: it stays up.
    Keeps,
    /// What only reads, or sets what the lane reads at a claim (the
    /// timeouts) or nothing uses (kept options): the lane's too while no end
    /// is claimed (its rings are empty then): a program's look at and set-up
    /// of a new pair.
    DownIfClaimed,
    /// Any other: a message call, shutdown, connect, ...
    Down,
}

fn lane_need(cmd: u32, input: &[u8]) -> LaneNeed {
    if cmd == UDSFS_IOC_MSG {
        return LaneNeed::Down;
    }
    let Ok((ctl, arg)) = read_struct::<Ctl>(input).map(|c| (c.op, c.arg)) else {
        return LaneNeed::Keeps;
    };
    if ctl == Op::Info as u32 && arg == udsfs_proto::ioctl::INFO_SETTINGS {
        return LaneNeed::Keeps;
    }
    // SO_ERROR too: a connection's pending error is set only with its lane
    // down (a close, a reset), so a laned end's is none (uwsgi's router asks
    // it after each connect: it took the new lane down, and the lane made
    // again was lost to the epoll set's move back to the data file).
    let lane_own = [
        Op::LaneClaim,
        Op::GetTimeo,
        Op::GetName,
        Op::PeerGroups,
        Op::PeerPidfd,
        Op::TakeError,
    ]
    .map(|o| o as u32);
    let reads = [
        Op::SetTimeo,
        Op::SetSockopt,
        Op::Info,
        Op::GetSockopt,
        Op::OobOpts,
    ]
    .map(|o| o as u32);
    if reads.contains(&ctl) {
        LaneNeed::DownIfClaimed
    } else if lane_own.contains(&ctl) {
        LaneNeed::Keeps
    } else {
        LaneNeed::Down
    }
}

/// Takes `sock`'s lane down as ioctl `cmd` with `input` needs before it
/// runs (`ioctl`): EAGAIN while the way down waits for an end's busy word,
/// `w` woken when it is done (src/engine/lane.rs). A message call always;
/// of the control operations, the lane's own calls leave it up and any
/// other takes it down first (a timeout set takes it down: the ends read
/// theirs at the claim). Names, the peer's groups and its pidfd (fixed at
/// connect: dbus and systemd ask SO_PEERPIDFD of each new connection) never
/// depend on the queues: the lane's too once an end is claimed (asyncio reads both ends'
/// names after its selector registered, and so claimed, the first).
pub(super) fn lane_down(
    eng: &Engine,
    sock: &Socket,
    cmd: u32,
    input: &[u8],
    w: Option<&Waiter>,
) -> Result<(), Errno> {
    match lane_need(cmd, input) {
        LaneNeed::Down => eng.lane_down(sock, w),
        LaneNeed::DownIfClaimed => eng.lane_down_if_claimed(sock, w),
        LaneNeed::Keeps => Ok(()),
    }
}

/// After ioctl `cmd` with `input` ran: a lane the other end's ask made
/// between `lane_down` and the call goes down again where the call needed
/// none (`LaneNeed::Down`), as a read's or write's after-check does
/// (src/fuse/io.rs). A shutdown(SHUT_WR) whose way down let the peer's
/// read, woken by it, ask for a new lane before the shutdown was done left
/// that lane up without the EOF: the peer slept on its ring for ever
/// (lanes_connect shutdown_race). Its bytes, if any, are queued ahead of
/// nothing: the call changed no queue the lane could carry.
pub(super) fn lane_down_after(eng: &Engine, sock: &Socket, cmd: u32, input: &[u8]) {
    if lane_need(cmd, input) == LaneNeed::Down {
        let _ = eng.lane_down(sock, None);
    }
}

fn read_struct<T: Copy>(input: &[u8]) -> Result<T, Errno> {
    if input.len() < std::mem::size_of::<T>() {
        log::info!("udsfs ioctl: {} bytes of input, too short", input.len());
        return Err(Errno::EINVAL);
    }
    // SAFETY: T is a plain repr(C) struct of integers; any bytes are valid
    // and the length was checked.
    Ok(unsafe { std::ptr::read_unaligned(input.as_ptr().cast::<T>()) })
}

fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a plain repr(C) struct of integers without padding holes
    // that matter (they are zeroed or copied from the caller's bytes).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// The address in `buf[..len]`: a tree path, or NUL + an abstract name.
fn decode_addr(buf: &[u8; WIRE_MAX], len: u32) -> Result<Option<Addr>, Errno> {
    let len = len as usize;
    if len == 0 {
        return Ok(None);
    }
    let wire = buf.get(..len).ok_or(libc::EINVAL);
    match wire.and_then(udsfs_proto::addr::Addr::from_wire) {
        Ok(a) => Ok(a.map(Addr::from)),
        Err(e) => {
            log::info!("udsfs ioctl: address of {len} bytes refused: too long or with a NUL");
            Err(Errno::from_raw(e))
        }
    }
}

/// A bound name on the wire: the sun_path the program gave bind when there
/// is one (`ADDR_AS_GIVEN`), else the tree path or abstract name. Returns
/// the length and the flags.
fn encode_name(name: Option<&BoundName>, buf: &mut [u8; WIRE_MAX]) -> (u32, u32) {
    let mut c = Ctl::new(Op::GetName, 0);
    match name {
        None => {}
        Some(BoundName { given: Some(g), .. }) => c.set_name(g, true),
        Some(n) => c.set_name(&n.addr.to_wire(), false),
    }
    *buf = c.addr;
    (c.addr_len, c.addr_flags)
}

/// `Op::Bind`'s `given`: a path as sun_path holds it (no NUL, at most 108 bytes).
fn decode_given(ctl: &Ctl) -> Result<Option<&[u8]>, Errno> {
    let len = ctl.given_len as usize;
    if len == 0 {
        return Ok(None);
    }
    match ctl.given() {
        Some(g) if len <= MAX_PATH_NAME && !g.contains(&0) => Ok(Some(g)),
        _ => {
            log::info!("udsfs ioctl: bind's given path of {len} bytes refused");
            Err(Errno::EINVAL)
        }
    }
}

fn control(eng: &Arc<Engine>, s: &Arc<Socket>, ctl: &mut Ctl, c: &Caller) -> Result<(), Errno> {
    let addr = decode_addr(&ctl.addr, ctl.addr_len);
    let Ok(op) = Op::try_from(ctl.op) else {
        log::info!("socket {}: unknown udsfs control ioctl op {}", s.id, ctl.op);
        return Err(Errno::EINVAL);
    };
    let res = match op {
        Op::Bind => match addr? {
            Some(a @ Addr::Path(_)) => eng.bind_as(s, &a, decode_given(ctl)?, c),
            Some(a) => eng.bind(s, &a, c),
            None => eng.autobind(s, c),
        },
        Op::Listen => eng.listen(s, ctl.arg as i64, c),
        Op::Connect => match addr? {
            Some(a) => eng.connect(s, &a, c, None),
            None => Err(Errno::EINVAL),
        },
        Op::Disconnect => eng.disconnect(s),
        Op::Shutdown => match ctl.arg {
            libc::SHUT_RD => eng.shutdown(s, 1),
            libc::SHUT_WR => eng.shutdown(s, 2),
            libc::SHUT_RDWR => eng.shutdown(s, 3),
            _ => Err(Errno::EINVAL),
        },
        Op::GetName => {
            let name = if ctl.arg == 0 {
                eng.local_name(s)
            } else {
                eng.peer_name(s)?
            };
            (ctl.addr_len, ctl.addr_flags) = encode_name(name.as_deref(), &mut ctl.addr);
            Ok(())
        }
        Op::Info => {
            let mut info = eng.info(s);
            info.peer = eng.peer_cred_shown(s, c.tid);
            ctl.v = [0; NV];
            info.encode(&mut ctl.v);
            Ok(())
        }
        Op::TakeError => {
            let errno = eng.take_error(s).map_or(0, |e| e as i32);
            TakenError { errno }.encode(&mut ctl.v);
            Ok(())
        }
        Op::SetPasscred => {
            eng.set_passcred(s, ctl.arg != 0);
            Ok(())
        }
        Op::SetPasspidfd => {
            eng.set_passpidfd(s, ctl.arg != 0);
            Ok(())
        }
        Op::SetSndbuf => eng.set_buffer(s, Buf::Send, ctl.arg, false, c),
        Op::SetRcvbuf => eng.set_buffer(s, Buf::Recv, ctl.arg, false, c),
        Op::SetSndbufForce => eng.set_buffer(s, Buf::Send, ctl.arg, true, c),
        Op::SetRcvbufForce => eng.set_buffer(s, Buf::Recv, ctl.arg, true, c),
        Op::SetOobInline => {
            eng.set_oob_inline(s, ctl.arg != 0);
            Ok(())
        }
        Op::SetPeekOff => {
            eng.set_peek_off(s, ctl.arg);
            Ok(())
        }
        Op::SetError => eng.set_error(s, ctl.arg),
        Op::SetAsync => {
            eng.set_fasync(s, ctl.arg != 0);
            Ok(())
        }
        Op::SetOwner => {
            eng.set_urg_owner(s, ctl.arg, c);
            Ok(())
        }
        Op::SetTimeo => {
            let t: Timeo = ctl.values();
            s.timeouts.set(timeo_direction(ctl.arg)?, t.sec, t.usec)
        }
        Op::PeerGroups => eng.peer_groups(s).map(|g| {
            let from = (ctl.arg.max(0) as usize).min(g.len());
            ctl.v = [0; NV];
            ctl.v[0] = g.len() as i64;
            for (v, &gid) in ctl.v[1..].iter_mut().zip(&g[from..]) {
                *v = i64::from(gid);
            }
        }),
        Op::LaneClaim if ctl.arg == 1 => {
            eng.lane_corrupt(s);
            Ok(())
        }
        Op::LaneClaim if ctl.arg == 3 => eng.lane_prepare(s, c).map(|g| g.encode(&mut ctl.v)),
        Op::LaneClaim if ctl.arg == 4 => eng.lane_events(s, c).map(|g| g.encode(&mut ctl.v)),
        Op::LaneClaim if ctl.arg == 7 => {
            eng.lane_stop(s, c);
            Ok(())
        }
        Op::LaneClaim if ctl.arg == 8 => eng.lane_woke(s, c),
        Op::LaneClaim if ctl.arg == 9 => {
            eng.lane_left_polled(s, c.tid);
            Ok(())
        }
        Op::LaneClaim if ctl.arg == 5 || ctl.arg == 6 => eng
            .lane_join(s, c, ctl.arg == 6)
            .map(|g| g.encode(&mut ctl.v)),
        Op::LaneClaim => eng.lane_claim(s, c).map(|g| g.encode(&mut ctl.v)),
        Op::PeerPidfd => eng
            .peer_pidfd(s, c)
            .map(|tag| PeerPidfd { tag }.encode(&mut ctl.v)),
        Op::GetTimeo => {
            let d = timeo_direction(ctl.arg)?;
            let (sec, usec) = s.timeouts.get(d);
            let zero = s.timeouts.limit(d) == Some(std::time::Duration::ZERO);
            Timeo { sec, usec, zero }.encode(&mut ctl.v);
            Ok(())
        }
        Op::SetSockopt => {
            let o: Sockopt = ctl.values();
            if Options::needs_net_cap(ctl.arg, o.a) && !c.has_cap_net_raw_or_admin() {
                return Err(Errno::EPERM);
            }
            s.options.set(ctl.arg, o.a, o.b)
        }
        Op::GetSockopt => s
            .options
            .get(ctl.arg)
            .map(|(a, b)| Sockopt { a, b }.encode(&mut ctl.v)),
        Op::KeepAccepted => eng
            .keep_accepted(s, ctl.values::<Accepted>().id, c)
            .map(|id| Accepted { id }.encode(&mut ctl.v)),
        // The descriptor authorises the accept (src/engine/tickets.rs).
        Op::AcceptTicket => {
            let h = crate::engine::tickets::Holder::of(c);
            eng.tickets
                .issue(s, h, Instant::now())
                .map(|ticket| AcceptTicket { ticket }.encode(&mut ctl.v))
        }
        Op::AtMark => eng
            .at_oob_mark(s)
            .map(|at| AtMark { at }.encode(&mut ctl.v)),
        Op::OobOpts => {
            let (inline, peek_off, owner, fasync) = eng.oob_options(s);
            let owner = crate::engine::pidns::to_viewer(owner, c.tid);
            OobOpts {
                inline,
                peek_off,
                owner,
                fasync,
            }
            .encode(&mut ctl.v);
            Ok(())
        }
    };
    res.inspect_err(|e| {
        if *e != Errno::EAGAIN {
            log::debug!("socket {}: ioctl op {} failed: {}", s.id, ctl.op, e.desc());
        }
    })
}

/// `arg` of the timeout ops: 0 SO_RCVTIMEO, 1 SO_SNDTIMEO.
fn timeo_direction(arg: i32) -> Result<Direction, Errno> {
    match arg {
        0 => Ok(Direction::Recv),
        1 => Ok(Direction::Send),
        _ => Err(Errno::EINVAL),
    }
}

const HSIZE: usize = std::mem::size_of::<MsgHead>();

/// A MSG_WAITALL receive's answer so far (head, then the data), and its
/// first chunk's sender as queued (what its rest goes on from:
/// `RecvFlags::after`).
struct SoFar {
    out: Vec<u8>,
    sender: Option<Ucred>,
}

/// One UDSFS_IOC_MSG call in progress: what the caller gave, and what a
/// blocking call got done before it parked (it is retried from there).
pub struct MsgCall {
    /// The head, then a send's payload.
    input: Vec<u8>,
    /// Credentials are checked at the first attempt only.
    checked: bool,
    /// A stream send: bytes queued so far (passed sockets go with the first).
    sent: usize,
    /// A MSG_WAITALL receive: what it got before it parked.
    got: Option<Box<SoFar>>,
    /// The most it waits: the socket's timeout, or what an earlier ioctl of
    /// the same call left of it (MSGF_CONT).
    limit: Option<Duration>,
    started: Instant,
}

impl MsgCall {
    fn new(input: &[u8]) -> Result<MsgCall, Errno> {
        let head = read_struct::<MsgHead>(input)?;
        // A receive needs only its head; a send keeps its payload too.
        let keep = if head.op == MSGOP_SEND {
            (HSIZE + head.len as usize).min(input.len())
        } else {
            HSIZE
        };
        Ok(MsgCall {
            input: input[..keep].to_vec(),
            checked: false,
            sent: 0,
            got: None,
            limit: None,
            started: Instant::now(),
        })
    }

    /// The most this call may wait (see `Inner::park`).
    pub(super) fn limit(&self) -> Option<Duration> {
        self.limit
    }

    /// The answer `out` (a head, then data) with what is left of the
    /// timeout, for the next ioctl of the call.
    fn answer(&self, reply: IoctlReply, mut out: Vec<u8>) {
        if let Ok(mut h) = read_struct::<MsgHead>(&out) {
            h.timeo_left =
                timeo_left_ns(self.limit.map(|l| l.saturating_sub(self.started.elapsed())));
            out[..HSIZE].copy_from_slice(as_bytes(&h));
        }
        reply.ioctl(out)
    }

    fn head(&self) -> MsgHead {
        read_struct(&self.input).expect("checked at MsgCall::new")
    }

    /// The caller blocks, and the call is one that may wait (a receive of
    /// the OOB byte never does, as on Linux).
    fn blocks(&self) -> bool {
        let h = self.head();
        h.flags & MSGF_WAIT != 0 && !(h.op == MSGOP_RECV && h.flags & MSGF_OOB != 0)
    }

    pub(super) fn is_recv(&self) -> bool {
        self.head().op == MSGOP_RECV
    }

    /// The timeout it waits under.
    pub(super) fn direction(&self) -> Direction {
        if self.is_recv() {
            Direction::Recv
        } else {
            Direction::Send
        }
    }

    /// The payload bytes a parked send holds.
    pub fn held_bytes(&self) -> u64 {
        let h = self.head();
        if h.op == MSGOP_SEND {
            (h.len as usize).saturating_sub(self.sent) as u64
        } else {
            0
        }
    }

    /// Answers a call that stops with `err`: what it got done, if anything
    /// (bytes a stream send queued, data a MSG_WAITALL receive got), as
    /// Linux returns a partial count; else the error.
    pub(super) fn end(mut self, err: Errno, reply: IoctlReply) {
        let mut h = self.head();
        if let Some(got) = self.got.take() {
            return self.answer(reply, got.out);
        }
        if h.op == MSGOP_SEND && self.sent > 0 {
            h.len = self.sent as u32;
            return self.answer(reply, as_bytes(&h).to_vec());
        }
        reply.error(err)
    }
}

/// A message ioctl's first attempt; one that would block is handed back.
fn start_message(
    eng: &Arc<Engine>,
    s: &Arc<Socket>,
    mut call: MsgCall,
    c: &Caller,
    reply: IoctlReply,
) -> Result<(), Blocked> {
    let h = call.head();
    call.limit = if h.flags & MSGF_CONT != 0 {
        timeo_left_of(h.timeo_left)
    } else {
        s.timeouts.limit(call.direction())
    };
    match message(MsgCtx { eng, s, c, w: None }, &mut call) {
        Ok(out) => call.answer(reply, out),
        Err(Errno::EAGAIN) if call.blocks() => return Err((call, reply)),
        Err(e) => call.end(e, reply),
    }
    Ok(())
}

/// Retries a parked message ioctl (see `park`); one still blocked is
/// handed back.
pub(super) fn retry_message(
    eng: &Arc<Engine>,
    s: &Arc<Socket>,
    mut call: MsgCall,
    reply: IoctlReply,
    c: &Caller,
    w: Option<&Waiter>,
) -> Result<(), Blocked> {
    match message(MsgCtx { eng, s, c, w }, &mut call) {
        Ok(out) => call.answer(reply, out),
        Err(Errno::EAGAIN) => return Err((call, reply)),
        Err(e) => call.end(e, reply),
    }
    // Woken for a message it may not have taken (a peek): the next
    // reader gets it.
    eng.pass_wakeup(s);
    Ok(())
}

/// Where one message call runs: the engine, the socket, who asks, and the
/// waiter to leave if it would block.
#[derive(Clone, Copy)]
struct MsgCtx<'a> {
    eng: &'a Arc<Engine>,
    s: &'a Arc<Socket>,
    c: &'a Caller,
    w: Option<&'a Waiter>,
}

/// One sendmsg or recvmsg: the head, then the payload. EAGAIN: it would
/// block, and `at.w` (if any) waits on the socket for the change.
fn message(at: MsgCtx<'_>, call: &mut MsgCall) -> Result<Vec<u8>, Errno> {
    match call.head().op {
        MSGOP_SEND => send(at, call),
        MSGOP_RECV => recv(at, call),
        op => {
            log::info!("socket {}: unknown udsfs message ioctl op {op}", at.s.id);
            Err(Errno::EINVAL)
        }
    }
}

fn send(at: MsgCtx<'_>, call: &mut MsgCall) -> Result<Vec<u8>, Errno> {
    let MsgCtx { eng, s, c, w } = at;
    let mut head = call.head();
    let len = head.len as usize;
    if call.input.len() < HSIZE + len {
        log::info!(
            "socket {}: udsfs send ioctl: len {len} exceeds the buffer",
            s.id
        );
        return Err(Errno::EINVAL);
    }
    let to = decode_addr(&head.addr, head.addr_len)?;
    let creds = (head.has_creds != 0).then(|| Ucred {
        pid: head.creds[0] as i32,
        uid: head.creds[1],
        gid: head.creds[2],
    });
    let oob = head.flags & MSGF_OOB != 0;
    // A blocking stream send waits until all of it is queued, as
    // unix_stream_sendmsg does; a non-blocking one returns what went.
    let whole = head.flags & MSGF_WAIT != 0 && s.ty == SockType::Stream && !oob;
    let n = (head.nrights as usize).min(MAX_RIGHTS);
    loop {
        let data = &call.input[HSIZE + call.sent..HSIZE + len];
        let ids = if call.sent == 0 {
            &head.rights[..n]
        } else {
            &[][..]
        };
        let mut out = eng
            .prepare_send(creds, ids, c, !call.checked)
            .inspect_err(|e| {
                log::info!("socket {}: sending {ids:?} refused: {}", s.id, e.desc())
            })?;
        call.checked = true;
        let off = head.skip as usize + call.sent;
        let resumed = head.flags & MSGF_RESUMED != 0;
        let msg = out
            .msg(data, to.as_ref(), oob)
            .call_off(off)
            .resumed(resumed);
        let res = eng.send(s, msg, c, w);
        eng.put_back(out);
        match res {
            Ok(sent) => {
                call.sent += sent.len;
                // A fault's short count is the caller's (short_write).
                if !whole || sent.len == 0 || sent.cut || call.sent >= len {
                    break;
                }
            }
            // Part went out: Linux returns the count (EPIPE included, with
            // no SIGPIPE); a blocked rest parks and keeps the count.
            Err(e) if call.sent > 0 && e != Errno::EAGAIN => break,
            Err(e) => return Err(e),
        }
    }
    head.len = call.sent as u32;
    Ok(as_bytes(&head).to_vec())
}

fn recv(at: MsgCtx<'_>, call: &mut MsgCall) -> Result<Vec<u8>, Errno> {
    let MsgCtx { eng, s, c, w } = at;
    let head = call.head();
    let waitall = head.flags & MSGF_WAITALL != 0
        && head.flags & (MSGF_PEEK | MSGF_OOB) == 0
        && s.ty == SockType::Stream;
    if !waitall {
        return recv_once(eng, s, head, c, w, None).map(|(out, _)| out);
    }
    let want = (head.len as usize).min(MSG_ROOM);
    let (mut acc, mut first) = match call.got.take() {
        Some(g) => (Some(g.out), g.sender),
        None => (None, None),
    };
    loop {
        let have = acc.as_ref().map_or(0, |a| a.len() - HSIZE);
        if acc.is_some() && have >= want {
            break;
        }
        let mut h = head;
        h.len = (want - have) as u32;
        let after = acc.is_some().then_some(first);
        match recv_once(eng, s, h, c, w, after) {
            Ok((piece, sender)) => {
                let ph: MsgHead = read_struct(&piece)?;
                let eof = piece.len() == HSIZE;
                // The chunk that passes files ends the receive short of its
                // size (unix_stream_read_generic: `if (scm.fp) break`).
                let passed = ph.nrights > 0 || ph.flags & MSGF_CTRUNC != 0;
                match &mut acc {
                    None => {
                        acc = Some(piece);
                        first = sender.flatten();
                    }
                    Some(a) => {
                        a.extend_from_slice(&piece[HSIZE..]);
                        let mut ah: MsgHead = read_struct(a)?;
                        ah.len = (a.len() - HSIZE) as u32;
                        ah.full_len = ah.len;
                        if passed {
                            with_later_rights(&mut ah, &ph);
                        }
                        a[..HSIZE].copy_from_slice(as_bytes(&ah));
                    }
                }
                if eof || passed {
                    break;
                }
            }
            Err(Errno::EAGAIN)
                if call.blocks()
                    && let Some(out) = acc =>
            {
                call.got = Some(Box::new(SoFar { out, sender: first }));
                return Err(Errno::EAGAIN);
            }
            Err(_) if acc.is_some() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(acc.expect("the loop ends with a piece"))
}

/// The head `ah` of a MSG_WAITALL receive whose later piece `ph` passed
/// files (the first passed none, or the receive had ended there): the
/// piece's entries and tags, its MSG_CTRUNC, and the first piece's pidfd
/// tag after them (with no room left, the library falls back to the pid).
fn with_later_rights(ah: &mut MsgHead, ph: &MsgHead) {
    let pidfd_tag = (ah.has_creds & HAS_PIDFD_FILE != 0)
        .then(|| ah.rights.get(ah.nrights as usize).copied())
        .flatten();
    let n = (ph.nrights as usize).min(MAX_RIGHTS);
    ah.nrights = n as u32;
    ah.rights = [0; MAX_RIGHTS];
    ah.rights[..n].copy_from_slice(&ph.rights[..n]);
    ah.flags |= ph.flags & MSGF_CTRUNC;
    ah.has_creds &= !HAS_PIDFD_FILE;
    if let Some(tag) = pidfd_tag
        && n < MAX_RIGHTS
    {
        ah.rights[n] = tag;
        ah.has_creds |= HAS_PIDFD_FILE;
    }
}

/// One receive: at most MSG_ROOM bytes of one message or of the stream;
/// `after`: it goes on with a stream receive whose first chunk came from
/// that sender (`RecvFlags::after`). With the stream's first chunk's sender.
fn recv_once(
    eng: &Arc<Engine>,
    s: &Arc<Socket>,
    mut head: MsgHead,
    c: &Caller,
    w: Option<&Waiter>,
    after: Option<Option<Ucred>>,
) -> Result<(Vec<u8>, Option<Option<Ucred>>), Errno> {
    let asked = head.len as usize;
    let want = asked.min(MSG_ROOM);
    let peek = head.flags & MSGF_PEEK != 0;
    let oob = head.flags & MSGF_OOB != 0;
    // A peek comes in pieces (`skip`); a receive that does not fit takes
    // the `msg` file, so that nothing is taken here.
    if !peek && !oob && asked > MSG_ROOM && eng.next_message_len(s).is_some_and(|n| n > MSG_ROOM) {
        head.status = STATUS_TOO_BIG;
        return Ok((as_bytes(&head).to_vec(), None));
    }
    let room = (head.flags & MSGF_ROOM != 0).then(|| RightsRoom {
        without_creds: rights_room(head.nrights as usize, false),
        with_creds: rights_room(head.nrights as usize, true),
        controllen: head.nrights as usize,
    });
    let flags = RecvFlags {
        len: if oob { 1 } else { want },
        peek,
        skip: if peek { head.skip as usize } else { 0 },
        oob,
        room,
        deliver_to: Some(c),
        limit: (head.flags & MSGF_LIMIT != 0).then_some(Limit {
            writable: head.writable as usize,
            asked,
        }),
        after,
        ..RecvFlags::default()
    };
    let mut got = eng.recvmsg(s, flags, w)?;
    let ids = std::mem::take(&mut got.passed);
    got.for_viewer(c.tid);
    if got.ctrunc {
        head.flags |= MSGF_CTRUNC;
    }
    head.status = 0;
    head.len = got.data.len() as u32;
    head.full_len = got.full_len as u32;
    (head.addr_len, head.addr_flags) = encode_name(got.from.as_deref(), &mut head.addr);
    (head.stamp, head.tstamp) = got.stamp.map_or((0, 0), |(ns, t)| (ns, t.0));
    head.has_creds = 0;
    if let Some(pid) = got.pidfd {
        head.has_creds |= HAS_PIDFD;
        head.creds[0] = pid as u32;
    }
    if let Some(cr) = got.creds {
        head.has_creds |= HAS_CREDS;
        head.creds = [cr.pid as u32, cr.uid, cr.gid];
    }
    head.nrights = ids.len().min(MAX_RIGHTS) as u32;
    head.rights = [0; MAX_RIGHTS];
    for (slot, id) in head.rights.iter_mut().zip(&ids) {
        *slot = *id;
    }
    // (With no room after the rights, the library falls back to the pid.)
    if let Some(tag) = got.pidfd_tag
        && ids.len() < MAX_RIGHTS
    {
        head.rights[ids.len()] = tag;
        head.has_creds |= HAS_PIDFD_FILE;
    }
    let mut out = as_bytes(&head).to_vec();
    out.extend_from_slice(&got.data);
    Ok((out, got.sender))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_bad_ones_are_refused() {
        let mut buf = [0u8; WIRE_MAX];
        for a in [
            Addr::Path(b"run/x.sock".to_vec()),
            Addr::Abstract(b"\0n".to_vec()),
        ] {
            let name = BoundName {
                addr: a.clone(),
                key: crate::engine::NameKey::Unbound(0),
                given: None,
            };
            let (n, flags) = encode_name(Some(&name), &mut buf);
            assert_eq!((decode_addr(&buf, n).unwrap(), flags), (Some(a), 0));
        }
        // A name bound through the library goes back as the program gave it.
        let given = BoundName {
            addr: Addr::Path(b"run/x.sock".to_vec()),
            key: crate::engine::NameKey::Unbound(0),
            given: Some(b"./x.sock".to_vec()),
        };
        let (n, flags) = encode_name(Some(&given), &mut buf);
        assert_eq!(
            (&buf[..n as usize], flags),
            (&b"./x.sock"[..], ADDR_AS_GIVEN)
        );
        assert_eq!(encode_name(None, &mut buf), (0, 0));
        // SAFETY: Ctl is plain integers.
        let mut ctl: Ctl = unsafe { std::mem::zeroed() };
        assert_eq!(decode_given(&ctl), Ok(None));
        ctl.given[..3].copy_from_slice(b"a\0b");
        ctl.given_len = 3;
        assert_eq!(decode_given(&ctl), Err(Errno::EINVAL));
        ctl.given_len = 109;
        assert_eq!(decode_given(&ctl), Err(Errno::EINVAL));
        ctl.given[..3].copy_from_slice(b"a/b");
        ctl.given_len = 3;
        assert_eq!(decode_given(&ctl), Ok(Some(&b"a/b"[..])));
        assert_eq!(decode_addr(&buf, 0).unwrap(), None);
        assert_eq!(decode_addr(&buf, 200).unwrap_err(), Errno::EINVAL);
        buf[..3].copy_from_slice(b"a\0b");
        assert_eq!(decode_addr(&buf, 3).unwrap_err(), Errno::EINVAL);
    }
}

//! The daemon client: the control and message ioctls of a socket's data file
//! (`udsfs_proto::ioctl`), built and decoded here for both fronts. The front
//! gives the descriptor (the program's own, or the supervisor's pidfd_getfd
//! copy) and says whether the call may wait in the daemon (MSGF_WAIT); a
//! send's payload is copied into the caller's buffer by the front, a
//! receive's payload is left in it for the front to place.

use udsfs_proto::Res;
use udsfs_proto::ioctl::{self, *};

/// One control operation with `c`'s inputs; what came back.
pub fn ctl(fd: i32, c: Ctl) -> Res<Ctl> {
    ioctl::request(fd, c)
}

/// One control operation that takes `arg` only.
pub fn op(fd: i32, op: Op, arg: i32) -> Res<Ctl> {
    ctl(fd, Ctl::new(op, arg))
}

/// `op`'s values, read as the op's struct: the control block (560 bytes)
/// stays in this frame, not one copy in the caller's per temporary (the
/// debug build's frames: a thread of a 16 KiB stack claims a lane too,
/// hackbench -T's).
pub fn op_values<T: CtlValues>(fd: i32, op: Op, arg: i32) -> Res<T> {
    let c = ctl(fd, Ctl::new(op, arg))?;
    Ok(c.values())
}

/// bind() of `wire`, which the program gave as sun_path `given` (empty for
/// an abstract name or autobind): the daemon reports `given` back, as Linux.
pub fn bind(fd: i32, wire: &[u8], given: &[u8]) -> Res<()> {
    ctl(fd, Ctl::new(Op::Bind, 0).with_addr(wire).with_given(given)).map(|_| ())
}

/// The socket's type, settings, peer and number (its lane stays up).
pub fn info(fd: i32) -> Res<Info> {
    op(fd, Op::Info, udsfs_proto::ioctl::INFO_SETTINGS).map(|c| c.values())
}

/// The socket is a stream (its type costs a round trip: ask it only when it
/// decides something).
pub fn stream(fd: i32) -> Res<bool> {
    info(fd).map(|i| i.ty == libc::SOCK_STREAM)
}

/// `stream`, with a socket that cannot be asked taken for no stream.
pub fn is_stream(fd: i32) -> bool {
    stream(fd).unwrap_or(false)
}

/// One UDSFS_IOC_MSG buffer, the caller's (on the library's stack: a send or
/// receive must not allocate, signal handlers call them).
#[repr(C, align(8))]
pub struct MsgBuf(pub [u8; MSG_BUF]);

impl MsgBuf {
    pub fn new() -> MsgBuf {
        MsgBuf([0; MSG_BUF])
    }

    /// Where a send's payload of `len` bytes goes.
    pub fn payload_mut(&mut self, len: usize) -> &mut [u8] {
        &mut self.0[HEAD_SIZE..HEAD_SIZE + len.min(MSG_ROOM)]
    }

    /// A receive's payload of `len` bytes.
    pub fn payload(&self, len: usize) -> &[u8] {
        &self.0[HEAD_SIZE..HEAD_SIZE + len.min(MSG_ROOM)]
    }
}

impl Default for MsgBuf {
    fn default() -> MsgBuf {
        MsgBuf::new()
    }
}

/// What a send carries besides its payload, with its first piece only.
#[derive(Clone, Copy, Default)]
pub struct Extras<'a> {
    /// The destination (wire form).
    pub to: Option<&'a [u8]>,
    /// SCM_CREDENTIALS: pid, uid, gid.
    pub creds: Option<[u32; 3]>,
    /// Sockets by number and files by tag (`udsfs_proto::passed`).
    pub rights: &'a [u64],
}

/// How a message ioctl waits in the daemon (MSGF_WAIT, under the socket's
/// timeout), for a caller that blocks.
#[derive(Clone, Copy, Default)]
pub struct Wait {
    /// MSG_WAITALL on a stream (MSGF_WAITALL).
    pub waitall: bool,
    /// A later ioctl of the same call: the timeout left (MSGF_CONT).
    pub cont: Option<u64>,
    /// A send that already waited or queued part (MSGF_RESUMED).
    pub resumed: bool,
}

fn wait_flags(h: &mut MsgHead, wait: Option<Wait>) {
    if let Some(w) = wait {
        h.flags |= MSGF_WAIT;
        if w.waitall {
            h.flags |= MSGF_WAITALL;
        }
        if let Some(left) = w.cont {
            h.flags |= MSGF_CONT;
            h.timeo_left = left;
        }
        if w.resumed {
            h.flags |= MSGF_RESUMED;
        }
    }
}

/// One send piece (`p`: at most MSG_ROOM bytes), whose payload `fill`
/// writes into the buffer. Without `wait` EAGAIN when full; with it a short
/// count when the daemon stopped (timeout, signal, peer). The daemon hears
/// where in the call the piece stands (`MsgHead::skip`), as a stream call's
/// skbs are cut from its start. The bytes the daemon took.
pub fn send(
    fd: i32,
    buf: &mut MsgBuf,
    p: &Piece,
    wait: Option<Wait>,
    fill: impl FnOnce(&mut [u8]) -> Res<()>,
) -> Res<usize> {
    send_for(fd, buf, p, wait, 0, fill)
}

/// `send`, made for thread `act_for` (0: the caller itself): the
/// supervisor's, naming the program thread whose call it carries
/// (`MsgHead::set_act_for`); EPERM when the daemon holds no checked grant
/// of this thread for it.
pub fn send_for(
    fd: i32,
    buf: &mut MsgBuf,
    p: &Piece,
    wait: Option<Wait>,
    act_for: u32,
    fill: impl FnOnce(&mut [u8]) -> Res<()>,
) -> Res<usize> {
    let len = p.len.min(MSG_ROOM);
    let mut h = MsgHead::new(MSGOP_SEND);
    h.set_act_for(act_for);
    h.len = len as u32;
    h.skip = p.at.min(u32::MAX as usize) as u32;
    wait_flags(&mut h, wait);
    if p.oob {
        h.flags |= MSGF_OOB;
    }
    if let Some(x) = p.x {
        if let Some(to) = x.to {
            h.set_addr(to);
        }
        if let Some(c) = x.creds {
            h.has_creds = HAS_CREDS;
            h.creds = c;
        }
        h.set_rights(x.rights);
    }
    h.write_to(&mut buf.0);
    fill(buf.payload_mut(len))?;
    ioctl::message(fd, &mut buf.0).map(|r| r.len as usize)
}

/// One receive ioctl's question.
#[derive(Clone, Copy, Default)]
pub struct Ask {
    /// What the reader wants, not what fits: a larger datagram is "too big"
    /// (read from the `msg` file), not cut to the ioctl's room.
    pub want: usize,
    pub peek: bool,
    /// A peek goes on this far in (a peek larger than MSG_ROOM, in pieces).
    pub skip: usize,
    pub oob: bool,
    /// MSGF_WAITALL without a wait (the daemon looks at it only on a
    /// stream, and not for a peek or OOB).
    pub waitall: bool,
    /// The room of the reader's control buffer: the daemon closes passed
    /// sockets beyond it, as Linux closes the files it does not install.
    pub room: usize,
    pub wait: Option<Wait>,
    /// How many of `want` bytes the reader's buffers can take, when fewer:
    /// a stream's chunk that the buffers cannot take whole stays queued
    /// (MSGF_LIMIT), as unix_stream_read_generic copies an skb at a time.
    pub writable: Option<usize>,
}

/// One received message's parts; its payload (`len` bytes) is in the
/// buffer (`MsgBuf::payload`) or, once the front placed it, in the
/// program's buffers.
pub struct Got {
    /// Payload bytes.
    pub len: usize,
    pub full_len: usize,
    /// The message is larger than one ioctl: read it from the `msg` file.
    pub too_big: bool,
    /// The sender (wire form).
    pub from: Vec<u8>,
    /// `from` is a sun_path as its program gave it.
    pub from_as_given: bool,
    /// SCM_CREDENTIALS: pid, uid, gid.
    pub creds: Option<[u32; 3]>,
    /// SCM_PIDFD (the receiver has SO_PASSPIDFD): the sender's pid.
    pub pidfd: Option<i32>,
    /// The daemon's pidfd of the sender (src/engine/pins.rs), a tag to claim
    /// over the fd channel; without one a pidfd is made from `pidfd`.
    pub pidfd_tag: Option<u64>,
    /// Passed sockets (numbers) and files (bit 63: a tag for the fd channel).
    pub rights: Vec<u64>,
    /// The byte is the OOB byte (MSG_OOB in msg_flags).
    pub oob: bool,
    /// The daemon dropped passed sockets (MSG_CTRUNC).
    pub ctrunc: bool,
    /// What the daemon left of SO_RCVTIMEO (see MsgHead::timeo_left).
    pub timeo_left: u64,
    /// SCM_TIMESTAMP and its kin: the stamp (ns since the epoch) and the
    /// reader's timestamp state, which says which messages.
    pub stamp: Option<(u64, udsfs_proto::sockopt::Tstamp)>,
}

impl Default for Got {
    fn default() -> Got {
        Got {
            len: 0,
            full_len: 0,
            too_big: false,
            from: Vec::new(),
            from_as_given: false,
            creds: None,
            pidfd: None,
            pidfd_tag: None,
            rights: Vec::new(),
            oob: false,
            ctrunc: false,
            timeo_left: TIMEO_NONE,
            stamp: None,
        }
    }
}

impl Got {
    /// Whether it brings any control message (else a front has none to
    /// write and needs no room for them).
    pub fn has_control(&self) -> bool {
        self.creds.is_some()
            || !self.rights.is_empty()
            || self.pidfd.is_some()
            || self.stamp.is_some()
    }
}

/// One receive ioctl. A message with no name and nothing passed allocates
/// nothing.
pub fn recv(fd: i32, buf: &mut MsgBuf, a: &Ask) -> Res<Got> {
    let mut h = MsgHead::new(MSGOP_RECV);
    h.len = a.want.min(u32::MAX as usize) as u32;
    h.flags = MSGF_ROOM;
    h.nrights = a.room.min(u32::MAX as usize) as u32;
    if a.peek {
        h.flags |= MSGF_PEEK;
        h.skip = a.skip.min(u32::MAX as usize) as u32;
    }
    if a.oob {
        h.flags |= MSGF_OOB;
    }
    if a.waitall {
        h.flags |= MSGF_WAITALL;
    }
    if let Some(w) = a.writable {
        h.flags |= MSGF_LIMIT;
        h.writable = w.min(u32::MAX as usize) as u32;
    }
    wait_flags(&mut h, a.wait);
    h.write_to(&mut buf.0);
    let r = ioctl::message(fd, &mut buf.0)?;
    Ok(Got {
        len: (r.len as usize).min(MSG_ROOM),
        full_len: r.full_len as usize,
        too_big: r.status == STATUS_TOO_BIG,
        from: r.addr().to_vec(),
        from_as_given: r.addr_flags & ADDR_AS_GIVEN != 0,
        creds: r.creds().map(|c| c.to_words()),
        pidfd: r.pidfd_pid(),
        pidfd_tag: r.pidfd_tag(),
        rights: r.rights().to_vec(),
        oob: r.flags & MSGF_OOB != 0,
        ctrunc: r.flags & MSGF_CTRUNC != 0,
        timeo_left: r.timeo_left,
        stamp: r.stamp(),
    })
}

/// One piece of a send: `len` bytes at `at` of the payload, with `x` (the
/// first piece only) and `oob` (its last byte is the OOB byte).
pub struct Piece<'a> {
    pub at: usize,
    pub len: usize,
    pub x: Option<&'a Extras<'a>>,
    pub oob: bool,
}

/// How a front sends the pieces of one send (`send_pieces`).
pub trait Pieces {
    /// One piece through `buf`: the library waits in the daemon (MSGF_WAIT)
    /// unless non-blocking, the supervisor parks a thread or tries on its
    /// loop.
    fn piece(&self, buf: &mut MsgBuf, p: Piece) -> Res<usize>;
    /// A short piece ends the call (the daemon stopped: non-blocking, the
    /// timeout, a signal, the peer gone, and says how far it got). False
    /// where a short piece is followed by one that says EAGAIN and the
    /// call is handed on (the supervisor's loop).
    fn short_ends(&self) -> bool {
        true
    }
    /// An error that is not the call's to answer, to pass up whatever went
    /// before (the supervisor's hand-over of a call to a thread).
    fn passes(&self, _e: i32) -> bool {
        false
    }
    /// SIGPIPE to the sending thread, as unix_stream_sendmsg raises it.
    fn sigpipe(&self);
}

/// Raises SIGPIPE in thread `tid` of thread group `tgid` alone, as
/// unix_stream_sendmsg's send_sig(SIGPIPE, current): the fronts' sends
/// (`Pieces::sigpipe`) and the daemon's write of a stream's data file.
pub fn sigpipe(tgid: i32, tid: i32) {
    // SAFETY: tgkill only sends a signal.
    unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, libc::SIGPIPE) };
}

/// A send of `len` bytes cut into MSG_ROOM pieces, from `start` (what an
/// earlier attempt of the call sent): each piece waits SO_SNDTIMEO afresh,
/// as unix_stream_sendmsg waits per skb (sock_alloc_send_pskb takes the
/// timeout anew: a 1 MiB send under SO_SNDTIMEO 1 s to a reader taking
/// 64 KiB every 300 ms ends whole after 4.5 s on Linux 6.x). Part sent
/// and then an error: the count, as Linux (no SIGPIPE then); EPIPE with
/// nothing sent raises SIGPIPE on a stream unless MSG_NOSIGNAL. `stream`
/// is asked only then (its type costs a round trip).
pub fn send_pieces(
    p: &impl Pieces,
    len: usize,
    start: usize,
    x: &Extras,
    flags: i32,
    stream: impl FnOnce() -> bool,
) -> Res<usize> {
    let oob = flags & libc::MSG_OOB != 0;
    let mut buf = MsgBuf::new();
    let mut sent = start.min(len);
    loop {
        let chunk = (len - sent).min(MSG_ROOM);
        let piece = Piece {
            at: sent,
            len: chunk,
            x: (sent == 0).then_some(x),
            oob: oob && sent + chunk == len,
        };
        match p.piece(&mut buf, piece) {
            Ok(n) => {
                sent += n;
                if sent >= len || (n < chunk && p.short_ends()) {
                    return Ok(sent);
                }
            }
            Err(e) if p.passes(e) => return Err(e),
            Err(_) if sent > 0 => return Ok(sent),
            Err(e) => {
                if e == libc::EPIPE && flags & libc::MSG_NOSIGNAL == 0 && stream() {
                    p.sigpipe();
                }
                return Err(e);
            }
        }
    }
}

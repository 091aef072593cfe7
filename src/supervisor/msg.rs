//! The message calls on a udsfs socket (sendto, sendmsg, sendmmsg,
//! recvfrom, recvmsg, recvmmsg), with the library's message ioctl
//! (preload/src/msg.rs): payload, address, SCM_CREDENTIALS and passed udsfs
//! sockets; datagrams larger than one ioctl go through the `msg` file
//! (`record`). Other passed files go through the daemon's fd channel
//! (`fdpass`), as the library passes them.

use std::os::fd::OwnedFd;

use super::call::{
    Call, MSGHDR, WOULD_WAIT, classify, put_sized, read_addr, say, stop_errno, u32_at, u64_at,
};
use super::daemon::{self, Ask, Extras, Res};
use super::fdpass;
use super::listener::ERESTARTSYS;
use super::mem;
use super::record;
use std::os::fd::AsRawFd;
use udsfs_calls::control::{self, Passed};
use udsfs_calls::{self as calls, client, mmsg, recv};
use udsfs_proto::ioctl::*;
use udsfs_proto::{passed, route};

/// sizeof(struct mmsghdr): a msghdr, msg_len, padding.
const MMSGHDR: u64 = 64;
/// Most control bytes taken from or given to a program.
const MAX_CONTROL: usize = 64 * 1024;

/// The parts of a struct msghdr the supervisor uses.
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: Vec<(u64, usize)>,
    control: u64,
    controllen: usize,
}

fn msghdr(tid: i32, at: u64) -> Res<MsgHdr> {
    let h = mem::read(tid, at, MSGHDR)?;
    let iovlen = u64_at(&h, 24);
    if iovlen > mmsg::UIO_MAXIOV as u64 {
        return Err(libc::EMSGSIZE);
    }
    Ok(MsgHdr {
        name: u64_at(&h, 0),
        namelen: u32_at(&h, 8),
        iov: mem::read_iovecs(tid, u64_at(&h, 16), iovlen as usize)?,
        control: u64_at(&h, 32),
        controllen: (u64_at(&h, 40) as usize).min(MAX_CONTROL),
    })
}

fn is_stream(s: &OwnedFd) -> Res<bool> {
    Ok(daemon::info(s)?.ty == libc::SOCK_STREAM)
}

/// sendto, sendmsg or sendmmsg (`nr`) with arguments `a`.
pub fn send(c: &Call, s: &OwnedFd, nr: i64, a: [u64; 6]) -> Res<i64> {
    let tid = c.task.tid;
    match nr {
        libc::SYS_sendto => {
            let data = mem::read(tid, a[1], (a[2] as usize).min(mem::MAX_COPY))?;
            let name = if route::send_names(a[4], a[5]) {
                Some(read_addr(tid, a[4], a[5])?)
            } else {
                None
            };
            let to = target(c, name)?;
            reach(c, to.as_deref(), |to| {
                send_data(c, s, &data, to, None, &[], a[3] as i32)
            })
        }
        libc::SYS_sendmsg => send_msg(c, s, a[1], a[2] as i32),
        _ => {
            let vlen = a[2].min(mmsg::UIO_MAXIOV as u64) as usize;
            let sent = mmsg::send(vlen, |i| {
                let at = a[1] + i as u64 * MMSGHDR;
                let n = send_msg(c, s, at, a[3] as i32)?;
                mem::write_u32(tid, at + MSGHDR as u64, n as u32)
            });
            sent.map(|n| n as i64)
        }
    }
}

/// Where a send with address bytes `name` goes (None: no address), as
/// udsfs_calls::connect::send_to decides.
fn target(c: &Call, name: Option<Vec<u8>>) -> Res<Option<Vec<u8>>> {
    let Some(n) = name else { return Ok(None) };
    let route = classify(c.ctx, c.task.tid, &n);
    let say = |why: &str| say(&format!("sendto on a udsfs socket: {why}"));
    calls::connect::send_to(&n, route, say).map(Some)
}

fn send_msg(c: &Call, s: &OwnedFd, at: u64, flags: i32) -> Res<i64> {
    let tid = c.task.tid;
    let h = msghdr(tid, at)?;
    let control = mem::read(tid, h.control, h.controllen)?;
    // The channel holds the deposited files until the send took them.
    let (creds, rights, _channel) = parse_control(c, &control)?;
    let name = if route::send_names(h.name, h.namelen.into()) {
        Some(read_addr(tid, h.name, h.namelen.into())?)
    } else {
        None
    };
    let to = target(c, name)?;
    let data = mem::gather(tid, &h.iov, mem::MAX_COPY)?;
    reach(c, to.as_deref(), |to| {
        send_data(c, s, &data, to, creds, &rights, flags)
    })
}

/// A send to `to` (None: no address); a routed name the daemon does not
/// know is reached through the target's links, or answered, as
/// udsfs_calls::connect::reach says.
fn reach(c: &Call, to: Option<&[u8]>, mut send: impl FnMut(Option<&[u8]>) -> Res<i64>) -> Res<i64> {
    let tree = super::tree::Tree(c.task.tid);
    match to {
        None => send(None),
        Some(w) => calls::connect::reach(&tree, &c.ctx.routes, w, |w| send(Some(w))),
    }
}

/// A sendmsg's control messages (udsfs_calls::control::parse): the
/// channel holds the deposited files until the send took them.
type Control = (Option<[u32; 3]>, Vec<u64>, Option<fdpass::Channel>);

fn parse_control(c: &Call, b: &[u8]) -> Res<Control> {
    let asked = control::parse(&Target(c), b)?;
    Ok((asked.creds, asked.rights, asked.channel))
}

/// The target's descriptors (pidfd_getfd copies, SECCOMP_IOCTL_NOTIF_ADDFD),
/// for udsfs_calls::control.
struct Target<'a, 'b>(&'a Call<'b>);

impl control::Passer for Target<'_, '_> {
    type File = OwnedFd;

    /// A udsfs socket passes by the directory it was opened through
    /// (`daemon::dir_number`): passing on a received socket by its first
    /// one was EBADF.
    fn passed(&self, fd: i32) -> Res<Passed<OwnedFd>> {
        let f = self.0.task.get_fd(fd)?;
        if !self.0.ctx.dev.is_data(&f) {
            return Ok(Passed::File(f));
        }
        daemon::dir_number(&f).map(|n| Passed::Socket(passed::socket_item(n, f.as_raw_fd())))
    }

    fn channel(&self) -> Res<fdpass::Channel> {
        fdpass::connect_as(&self.0.ctx.daemon.mount, self.0.task.tid)
    }

    fn say(&self, what: &str) {
        say(what);
    }
}

impl control::Installer for Target<'_, '_> {
    fn socket(&self, id: u64, cloexec: bool) -> Res<i32> {
        let (number, nonblock) = passed::socket_of(id);
        let sock = self.0.ctx.daemon.open_sock(number, nonblock)?;
        self.0.install(&sock, None, cloexec)
    }

    fn release(&self, id: u64) {
        // Opening an entry adopts it; dropping it lets it go.
        let _ = self.0.ctx.daemon.open_sock(passed::socket_of(id).0, false);
    }

    fn claim(&self, tags: &[u64], _cloexec: bool) -> Res<Vec<OwnedFd>> {
        // Ours until installed: close-on-exec here, the target's flag at
        // the install.
        fdpass::connect(&self.0.ctx.daemon.mount)?.claim(tags, true)
    }

    fn install(&self, f: OwnedFd, cloexec: bool) -> Res<i32> {
        self.0.install(&f, None, cloexec)
    }

    fn pidfd(&self, pid: i32) -> Res<OwnedFd> {
        super::pidfd::open(pid, self.0.task.tid)
    }

    fn say(&self, what: &str) {
        say(what);
    }
}

fn send_data(
    c: &Call,
    s: &OwnedFd,
    data: &[u8],
    to: Option<&[u8]>,
    creds: Option<[u32; 3]>,
    rights: &[u64],
    flags: i32,
) -> Res<i64> {
    let oob = flags & libc::MSG_OOB != 0;
    // The type costs a round trip: asked only when it decides something.
    let big = data.len() > MSG_ROOM;
    let stream = if oob || big {
        Some(is_stream(s)?)
    } else {
        None
    };
    if oob && stream == Some(false) {
        return Err(libc::EOPNOTSUPP);
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || c.nonblocking(s);
    if big && stream == Some(false) {
        let id = daemon::info(s)?.id;
        let meta = Extras { to, creds, rights };
        let d = &c.ctx.daemon;
        // Blocking, it parks in the daemon until the record fits, on a
        // thread of its own (on the loop the attempt ends at the wait).
        let r = if nonblock {
            record::send(d, id, data, &meta, false)
        } else if !c.may_park() {
            match record::send(d, id, data, &meta, false) {
                Err(libc::EAGAIN) => return Err(WOULD_WAIT),
                r => r,
            }
        } else {
            c.parked(|_| record::send(d, id, data, &meta, true))
                .map_err(|stop| stop_errno(stop, s, 1))?
        };
        return r.map(|n| n as i64);
    }
    // A blocking send on its own thread parks in the daemon (park.rs); on
    // the loop a send that sent a part goes on from there (`resume`).
    let p = Pieces {
        c,
        s,
        data,
        park: !nonblock && c.may_park(),
        nonblock,
    };
    let extras = Extras { to, creds, rights };
    let stream = || stream.unwrap_or_else(|| is_stream(s).unwrap_or(false));
    let sent = client::send_pieces(&p, data.len(), c.resume, &extras, flags, stream)?;
    Ok(sent as i64)
}

/// The supervisor's pieces of a send (udsfs_calls::client::send_pieces),
/// from the bytes gathered from the target.
struct Pieces<'a, 'b> {
    c: &'a Call<'b>,
    s: &'a OwnedFd,
    data: &'a [u8],
    park: bool,
    nonblock: bool,
}

impl client::Pieces for Pieces<'_, '_> {
    fn piece(&self, buf: &mut client::MsgBuf, p: client::Piece) -> Res<usize> {
        let at = p.at;
        if self.park {
            let wait = Some(daemon::Wait::default());
            return self
                .c
                .parked(|_| send_piece(self.s, buf, &p, self.data, wait))
                .map_err(|stop| stop_errno(stop, self.s, 1))?;
        }
        match send_piece(self.s, buf, &p, self.data, None) {
            Err(libc::EAGAIN) if !self.nonblock => {
                // On the loop: a thread goes on from `at`.
                self.c.sent.set(at);
                Err(WOULD_WAIT)
            }
            r => r,
        }
    }

    /// On the loop a short piece is followed by the EAGAIN that hands the
    /// call to a thread.
    fn short_ends(&self) -> bool {
        self.nonblock || self.park
    }

    fn passes(&self, e: i32) -> bool {
        e == WOULD_WAIT
    }

    fn sigpipe(&self) {
        sigpipe(self.c.task.tid);
    }
}

/// SIGPIPE to the sending thread (udsfs_calls::client::sigpipe).
fn sigpipe(tid: i32) {
    if let Some(tgid) = super::target::tgid_of(tid) {
        client::sigpipe(tgid, tid);
    }
}

/// Where a receive puts what it got.
enum Dest {
    /// recvfrom: buffer, length, address, address length pointer.
    Buf(u64, usize, u64, u64),
    /// recvmsg: the msghdr's address.
    Msg(u64),
}

/// recvfrom, recvmsg or recvmmsg (`nr`) with arguments `a`.
pub fn recv(c: &Call, s: &OwnedFd, nr: i64, a: [u64; 6]) -> Res<i64> {
    match nr {
        libc::SYS_recvfrom => recv_one(
            c,
            s,
            Dest::Buf(a[1], a[2] as usize, a[4], a[5]),
            a[3] as i32,
        ),
        libc::SYS_recvmsg => recv_one(c, s, Dest::Msg(a[1]), a[2] as i32),
        _ => recv_mmsg(c, s, a),
    }
}

/// recvmmsg (udsfs_calls::mmsg::recv); what is left of the timeout is
/// written back once a datagram came.
fn recv_mmsg(c: &Call, s: &OwnedFd, a: [u64; 6]) -> Res<i64> {
    let tid = c.task.tid;
    let timeout = match a[4] {
        0 => None,
        at => {
            let t = mem::read(tid, at, 16)?;
            Some(mmsg::timeout(u64_at(&t, 0) as i64, u64_at(&t, 8) as i64)?)
        }
    };
    let vlen = a[2].min(mmsg::UIO_MAXIOV as u64) as usize;
    let got = mmsg::recv(&Mmsg, s.as_raw_fd(), vlen, a[3] as i32, timeout, |i, fl| {
        let at = a[1] + i as u64 * MMSGHDR;
        let n = recv_one(c, s, Dest::Msg(at), fl)?;
        mem::write_u32(tid, at + MSGHDR as u64, n as u32)
    })?;
    if let Some(left) = got.left {
        let mut t = left.as_secs().to_ne_bytes().to_vec();
        t.extend_from_slice(&(left.subsec_nanos() as u64).to_ne_bytes());
        mem::write(tid, a[4], &t)?;
    }
    Ok(got.done as i64)
}

/// recvmmsg's front: a signal without SO_RCVTIMEO is ERESTARTSYS here.
struct Mmsg;

impl mmsg::Front for Mmsg {
    fn now(&self) -> std::time::Duration {
        START.get_or_init(std::time::Instant::now).elapsed()
    }

    fn restarting(&self, e: i32) -> bool {
        e == ERESTARTSYS
    }

    fn say(&self, what: &str) {
        say(what);
    }
}

/// The supervisor's origin of recvmmsg's clock.
static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

fn recv_one(c: &Call, s: &OwnedFd, dest: Dest, flags: i32) -> Res<i64> {
    let tid = c.task.tid;
    let (want, hdr) = match dest {
        Dest::Buf(_, len, _, _) => (len, None),
        Dest::Msg(at) => {
            let h = msghdr(tid, at)?;
            let want = h
                .iov
                .iter()
                .map(|v| v.1)
                .fold(0usize, usize::saturating_add);
            (want, Some(h))
        }
    };
    let room = hdr.as_ref().map_or(0, |h| h.controllen);
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || c.nonblocking(s);
    let (peek, oob) = (flags & libc::MSG_PEEK != 0, flags & libc::MSG_OOB != 0);
    let limit = if peek {
        None
    } else {
        writable_limit(tid, s, &dest, hdr.as_ref(), want)?
    };
    let waitall = flags & libc::MSG_WAITALL != 0 && !peek && !oob && !nonblock;
    // A blocking receive on its own thread parks in the daemon (park.rs),
    // which times it; on the loop a wait ends the attempt.
    let park = !nonblock && c.may_park();
    let ask = Ask {
        want,
        peek,
        oob,
        room,
        writable: limit,
        ..Ask::default()
    };
    let got = if park {
        let start = std::time::Instant::now();
        c.parked(|round| {
            // Made again after an interruption: what is left of the timeout.
            let cont = match round {
                0 => None,
                _ => Some(left_of(s, start)?),
            };
            let wait = Some(daemon::Wait {
                waitall,
                cont,
                ..daemon::Wait::default()
            });
            daemon::recv(s, &Ask { wait, ..ask })
        })
        .map_err(|stop| stop_errno(stop, s, 0))??
    } else {
        match daemon::recv(s, &ask) {
            // On the loop: the call goes on on a thread of its own.
            Err(libc::EAGAIN) if !nonblock => return Err(WOULD_WAIT),
            r => r?,
        }
    };
    let mut got = if got.too_big {
        record::recv(&c.ctx.daemon, daemon::info(s)?.id, want)?
    } else {
        got
    };
    // More than one ioctl holds (udsfs_calls::recv::rest): a stream takes
    // what else is queued (MSG_WAITALL: waits for it, parked, under the
    // timeout left), a peek goes on into its datagram; only as far as the
    // buffers can take.
    let want = limit.map_or(want, |l| l.min(want));
    got.m.len = got.data.len();
    let daemon::Got { data, m } = &mut got;
    let stream = recv::rest(
        m,
        want,
        flags,
        nonblock,
        || is_stream(s).unwrap_or(false),
        |_, ask, _| {
            let ask = Ask { room, ..ask };
            let r = match ask.wait {
                Some(_) if park => c.parked(|_| daemon::recv(s, &ask)).ok()?,
                // On the loop nothing waits: what is queued.
                _ => daemon::recv(s, &Ask { wait: None, ..ask }),
            };
            Some(r.map(|g| {
                data.extend_from_slice(&g.data);
                g.m
            }))
        },
    );
    let from = if got.from.is_empty() {
        Vec::new()
    } else {
        route::sockaddr(&c.ctx.routes, &got.from, got.from_as_given)
    };
    let (ret, msg_flags) = recv::report(&got, flags, stream, || is_stream(s))?;
    match (dest, hdr) {
        (Dest::Msg(at), Some(h)) => {
            mem::scatter(tid, &h.iov, &got.data)?;
            let mut namelen = 0u32;
            if h.name != 0 {
                let n = (h.namelen as usize).min(from.len());
                mem::write(tid, h.name, &from[..n])?;
                namelen = from.len() as u32;
            }
            let cloexec = flags & libc::MSG_CMSG_CLOEXEC != 0;
            // A control buffer that cannot be written gets no message and
            // the call goes on, as put_cmsg's failures are not the call's;
            // passed sockets are then not installed (MSG_CTRUNC), as
            // scm_detach_fds leaves them. Known before they are installed.
            let writable = room == 0
                || h.control == 0
                || mem::writable_prefix(tid, &[(h.control, room)], room) == room;
            let (control, cut) = if writable {
                control(c, &got, room, cloexec)
            } else {
                let (_, _) = control(c, &got, 0, cloexec);
                (Vec::new(), got.ctrunc || !got.rights.is_empty())
            };
            mem::write(tid, h.control, &control)?;
            mem::write_u32(tid, at + 8, namelen)?;
            mem::write(tid, at + 40, &(control.len() as u64).to_ne_bytes())?;
            let mf = msg_flags | if cut { libc::MSG_CTRUNC } else { 0 };
            mem::write_u32(tid, at + 48, mf as u32)?;
        }
        (Dest::Buf(buf, _, addr, alen), _) => {
            mem::write(tid, buf, &got.data)?;
            if addr != 0 && alen != 0 {
                put_sized(tid, addr, alen, &from)?;
            }
        }
        _ => return Err(libc::EFAULT),
    }
    Ok(ret as i64)
}

/// How much of a receive into `dest` its buffers can take, when that is
/// less than it asks of a stream: a stream's bytes that cannot be copied
/// stay queued on Linux (unix_stream_read_generic copies an skb at a time
/// before it consumes it), so the daemon stops before the chunk the buffers
/// cannot hold whole, EFAULT when that is the first (MSGF_LIMIT); a datagram
/// is taken and lost with EFAULT, as on Linux, whatever its buffers.
fn writable_limit(
    tid: i32,
    s: &OwnedFd,
    dest: &Dest,
    hdr: Option<&MsgHdr>,
    want: usize,
) -> Res<Option<usize>> {
    let probed = want.min(mem::MAX_COPY);
    let ok = match (dest, hdr) {
        (Dest::Buf(buf, len, _, _), _) => mem::writable_prefix(tid, &[(*buf, *len)], probed),
        (Dest::Msg(_), Some(h)) => mem::writable_prefix(tid, &h.iov, probed),
        _ => probed,
    };
    if ok == probed || !is_stream(s)? {
        return Ok(None);
    }
    Ok(Some(ok))
}

/// The receive timeout left of a call started at `start`, for MSGF_CONT
/// (TIMEO_NONE: none); EAGAIN once it ran out, as Linux answers then.
fn left_of(s: &OwnedFd, start: std::time::Instant) -> Res<u64> {
    match super::opts::timeout(s, 0) {
        None => Ok(TIMEO_NONE),
        Some(d) => {
            let left = d.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(libc::EAGAIN);
            }
            Ok(timeo_left_ns(Some(left)))
        }
    }
}

/// The control messages of a received message (udsfs_calls::control::put),
/// in `room` bytes.
fn control(c: &Call, got: &daemon::Got, room: usize, cloexec: bool) -> (Vec<u8>, bool) {
    let mut out = vec![0u8; room];
    let (used, cut) = control::put(&Target(c), &mut out, got, cloexec);
    out.truncate(used);
    (out, cut)
}

/// One send piece (`client::send`) of the call's `data` through `buf`,
/// named for the trapped thread (here, not in daemon.rs: actfor.rs makes
/// its anchor socket through daemon.rs).
fn send_piece(
    fd: &OwnedFd,
    buf: &mut client::MsgBuf,
    p: &client::Piece,
    data: &[u8],
    wait: Option<client::Wait>,
) -> Res<usize> {
    let fill = |b: &mut [u8]| {
        b.copy_from_slice(&data[p.at..p.at + b.len()]);
        Ok(())
    };
    // Named for the trapped thread (actfor.rs `Named`); refused, once more
    // after the grant by setxattr.
    let named = super::actfor::named();
    match client::send_for(fd.as_raw_fd(), buf, p, wait, named, fill) {
        Err(libc::EPERM) if named != 0 => match super::actfor::refused() {
            Some(_) => client::send_for(fd.as_raw_fd(), buf, p, wait, super::actfor::named(), fill),
            None => Err(libc::EPERM),
        },
        r => r,
    }
}

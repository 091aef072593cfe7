//! send and receive on udsfs sockets. A plain send, recv or recvfrom
//! without a name is one read() or write() of the data file, as the file
//! dialect costs; a call with an address, passed sockets, credentials,
//! per-call flags, or that reports msg_flags (recvmsg) is one UDSFS_IOC_MSG
//! ioctl; a message too large for the ioctl goes through the `msg` file
//! (`record`). A blocking call blocks in the daemon (MSGF_WAIT), which
//! times it and answers signals as for reads and writes: nothing here polls
//! or retries. Nothing here allocates or locks on the paths a signal
//! handler takes (a send or receive of a small message on a socketpair):
//! buffers are on the stack and what is found once is found in the
//! library's constructor.

use std::time::Duration;

use libc::{c_int, msghdr};
use udsfs_proto::ioctl::*;
use udsfs_proto::record::MAX_IO;

use crate::control::put_control;
use crate::errno::{errno, Res};
use crate::files::nonblocking;
use crate::ioctl::{self, Ask, MsgBuf, Wait};
use crate::iovs::{IovCopy, Iovs};
use crate::message::{Got, Meta};
use crate::mount::Mount;
use crate::route::put_addr;
use crate::{record, socket};

const PLAIN_SEND: c_int = libc::MSG_EOR | libc::MSG_MORE;

/// How much of a send of several pieces is found readable before the first
/// goes (the supervisor's `mem::MAX_COPY`).
const SEND_PROBE: usize = 1 << 20;

/// sendmsg() on a udsfs socket: the payload is the caller's `data`. A
/// blocking call waits in the daemon (MSGF_WAIT), under its SO_SNDTIMEO.
pub fn send(m: &Mount, fd: c_int, data: Iovs, meta: Meta, flags: c_int) -> Res<usize> {
    let len = data.len();
    // One write of the data file. Not writev of several buffers: FUSE cuts
    // a write into requests by pages, and each request is a message.
    if meta.is_empty() && flags & !PLAIN_SEND == 0 && len > 0 && (data.n == 1 || len > MSG_ROOM) {
        let one = if data.n == 1 {
            None
        } else {
            Some(data.gathered()?)
        };
        let (p, n) = match &one {
            Some(v) => (v.as_ptr(), v.len()),
            None => data
                .each()
                .next()
                .map(|(p, n)| (p as *const u8, n))
                .expect("one"),
        };
        // SAFETY: writes the caller's bytes; the daemon raises SIGPIPE.
        let n = unsafe { libc::write(fd, p.cast(), n) };
        // A datagram past one FUSE request cannot be one write of the data
        // file (EMSGSIZE, nothing queued): it goes as a `msg` record.
        if n < 0 && errno() == libc::EMSGSIZE && len > MSG_ROOM {
            let nonblock = flags & libc::MSG_DONTWAIT != 0 || nonblocking(fd);
            return record::send(m, fd, &data.gathered()?, &meta, nonblock);
        }
        return if n < 0 { Err(errno()) } else { Ok(n as usize) };
    }
    let oob = flags & libc::MSG_OOB != 0;
    if oob && !ioctl::is_stream(fd) {
        return Err(libc::EOPNOTSUPP);
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || nonblocking(fd);
    if len > MSG_ROOM && !ioctl::is_stream(fd) {
        return record::send(m, fd, &data.gathered()?, &meta, nonblock);
    }
    // A send of several pieces: bytes that cannot be read are EFAULT before
    // any piece goes, as the supervisor gathers them first (Linux copies
    // each skb, some 32 KiB, whole before it queues it). A byte a page.
    let probed = len.min(SEND_PROBE);
    if len > MSG_ROOM && data.readable(probed) < probed {
        return Err(libc::EFAULT);
    }
    let p = Pieces {
        fd,
        data,
        wait: (!nonblock).then_some(Wait::default()),
        first_cont: None,
    };
    ioctl::send_pieces(&p, len, 0, &meta.extras(), flags, || ioctl::is_stream(fd))
}

/// The rest of a blocking stream send a lane began (lane.rs `resumed`),
/// which already queued bytes or waited for room: MSG ioctls that wait in
/// the daemon and say so (MSGF_RESUMED), a MSG_ROOM piece each. The first
/// goes on with the wait for room the ring began, at most `left` (what
/// that sleep left of SO_SNDTIMEO: MSGF_CONT); the later ones wait afresh,
/// as Linux's sender per skb.
pub fn send_resumed(fd: c_int, data: Iovs, flags: c_int, left: Option<Duration>) -> Res<usize> {
    send_waited(fd, data, flags, left, true)
}

/// A record (at most MSG_ROOM bytes) a lane's writer slept in the full
/// ring for under SO_SNDTIMEO when the lane went down under the sleep
/// (lane.rs `resumed`): one MSG ioctl that waits at most `left`, what that
/// sleep left of the timeout (MSGF_CONT). Nothing of it went: no resumed
/// send (MSGF_RESUMED is a stream's), no SIGPIPE (a record's EPIPE raises
/// none, as the daemon's write of the data file).
pub fn send_record_waited(fd: c_int, data: &[u8], flags: c_int, left: Duration) -> Res<usize> {
    let iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    send_waited(fd, Iovs::new(&iov, 1), flags, Some(left), false)
}

/// A blocking send the lane slept for: MSG ioctls whose first waits at
/// most `left` (MSGF_CONT), said to be a stream send's rest when `resumed`.
fn send_waited(
    fd: c_int,
    data: Iovs,
    flags: c_int,
    left: Option<Duration>,
    resumed: bool,
) -> Res<usize> {
    let len = data.len();
    let wait = Wait {
        resumed,
        ..Wait::default()
    };
    let p = Pieces {
        fd,
        data,
        wait: Some(wait),
        first_cont: left.map(|l| timeo_left_ns(Some(l))),
    };
    let x = ioctl::Extras::default();
    ioctl::send_pieces(&p, len, 0, &x, flags, || resumed)
}

/// The library's pieces of a send (udsfs_calls::client::send_pieces): the
/// program's bytes copied into the buffer on the stack; bytes that cannot
/// be read are EFAULT, or what went before (a stream's earlier pieces), as
/// unix_stream_sendmsg copies an skb at a time.
struct Pieces {
    fd: c_int,
    data: Iovs,
    wait: Option<Wait>,
    /// The timeout left for the first piece's wait (ns, MSGF_CONT).
    first_cont: Option<u64>,
}

impl ioctl::Pieces for Pieces {
    fn piece(&self, buf: &mut MsgBuf, p: ioctl::Piece) -> Res<usize> {
        let wait = match self.wait {
            Some(w) if p.at == 0 && self.first_cont.is_some() => Some(Wait {
                cont: self.first_cont,
                ..w
            }),
            w => w,
        };
        ioctl::send(self.fd, buf, &p, wait, |b| {
            self.data.read_at(p.at, b).map(|_| ())
        })
    }

    fn sigpipe(&self) {
        socket::sigpipe();
    }
}

/// One receive ioctl (`ask`, which `flags` completes) into the caller's
/// buffers at `at`. The library itself never waits: with `ask.wait` the
/// daemon parks it until it can be answered (under SO_RCVTIMEO).
fn recv_once(m: &Mount, fd: c_int, dst: Iovs, flags: c_int, at: usize, ask: Ask) -> Res<Got> {
    let mut buf = MsgBuf::new();
    let peek = flags & libc::MSG_PEEK != 0;
    let ask = Ask {
        peek,
        skip: if peek { ask.skip } else { 0 },
        oob: flags & libc::MSG_OOB != 0,
        waitall: flags & libc::MSG_WAITALL != 0,
        ..ask
    };
    let mut got = ioctl::recv(fd, &mut buf, &ask)?;
    if got.too_big {
        return record::recv(m, fd, ask.want, ask.wait.is_none(), dst, at);
    }
    got.len = dst.write_at(at, buf.payload(got.len))?;
    Ok(got)
}

/// recvmsg() on a udsfs socket. `report`: the caller reads msg_flags
/// (recvmsg, recvmmsg), so even a plain receive goes through the ioctl,
/// which tells MSG_TRUNC and MSG_CTRUNC; recv and recvfrom read the file.
pub fn recv(m: &Mount, fd: c_int, msg: &mut msghdr, flags: c_int, report: bool) -> Res<usize> {
    recv_from(m, fd, msg, flags, report, None)
}

/// A laned receive handed to its caller (lane.rs `Rest::Caller`): `done`
/// bytes already in the buffers, `left` what its sleeps left of
/// SO_RCVTIMEO (None: no timeout).
#[derive(Clone, Copy, Debug)]
pub struct Handed {
    pub done: usize,
    pub left: Option<Duration>,
}

/// `recv`, going on from where a laned receive left it (`handed`: the
/// lane went down under it, lane.rs `Rest::Caller`): its bytes already in
/// the buffers, the daemon's wait bounded by what its sleeps left of
/// SO_RCVTIMEO (MSGF_CONT) and taken only if MSG_WAITALL asks for more,
/// its count added to the result; an error after those bytes returns
/// them, as a receive that copied some does.
pub fn recv_from(
    m: &Mount,
    fd: c_int,
    msg: &mut msghdr,
    flags: c_int,
    report: bool,
    handed: Option<Handed>,
) -> Res<usize> {
    let held = IovCopy::of_msg(msg.msg_iov, msg.msg_iovlen)?;
    let dst = held.iovs();
    let (done, cont) = handed.map_or((0, None), |h| {
        (
            h.done.min(dst.len()),
            h.left.map(|l| timeo_left_ns(Some(l))),
        )
    });
    let mut want = dst.len() - done;
    let plain = handed.is_none()
        && !report
        && msg.msg_name.is_null()
        && (msg.msg_control.is_null() || msg.msg_controllen == 0)
        && flags & !(libc::MSG_CMSG_CLOEXEC | libc::MSG_NOSIGNAL) == 0
        && want > 0
        // A read past one FUSE request takes a datagram's first MAX_IO
        // bytes only (src/fuse/files.rs): a larger one comes as a record.
        && (want <= MAX_IO || ioctl::is_stream(fd));
    // Linux reports MSG_CMSG_CLOEXEC back in msg_flags (____sys_recvmsg).
    let echoed = flags & libc::MSG_CMSG_CLOEXEC;
    if plain {
        msg.msg_flags = echoed;
        // SAFETY: reads into the caller's iovecs.
        let r = unsafe { libc::readv(fd, dst.iov, dst.n.min(c_int::MAX as usize) as c_int) };
        return if r < 0 { Err(errno()) } else { Ok(r as usize) };
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || nonblocking(fd);
    let control = if msg.msg_control.is_null() {
        0
    } else {
        msg.msg_controllen
    };
    // A stream's bytes that cannot be copied stay queued, as
    // unix_stream_read_generic copies an skb at a time before it consumes
    // it: the daemon stops before the chunk the buffers cannot take whole,
    // EFAULT when that is the first. A datagram is taken and lost with
    // EFAULT, as on Linux. One probe a page of what one ioctl can bring.
    let probed = want.min(MSG_ROOM);
    let ok = dst.writable_at(done, probed);
    let writable = (ok < probed && ioctl::is_stream(fd)).then_some(ok);
    // After bytes the lane gave, only MSG_WAITALL waits for more.
    let wait = !nonblock && (done == 0 || flags & libc::MSG_WAITALL != 0);
    let first = Ask {
        want,
        room: control,
        wait: wait.then_some(Wait {
            cont,
            ..Wait::default()
        }),
        writable,
        ..Ask::default()
    };
    // The call goes on only as far as the buffers can take.
    if let Some(w) = writable {
        want = w;
    }
    let mut got = match recv_once(m, fd, dst, flags, done, first) {
        Ok(got) => got,
        Err(_) if done > 0 => {
            msg.msg_controllen = 0;
            msg.msg_flags = echoed;
            return Ok(done);
        }
        Err(e) => return Err(e),
    };
    let is_stream = || ioctl::is_stream(fd);
    let stream = udsfs_calls::recv::rest(
        &mut got,
        want,
        flags,
        nonblock,
        is_stream,
        |at, ask, stream| {
            // A stream's later piece likewise stops before what the buffers
            // cannot take.
            let probed = ask.want.min(MSG_ROOM);
            let ok = dst.writable_at(done + at, probed);
            let writable = (ok < probed && stream).then_some(ok);
            if writable == Some(0) {
                return None;
            }
            let ask = Ask {
                room: control,
                writable,
                ..ask
            };
            Some(recv_once(m, fd, dst, flags, done + at, ask))
        },
    );
    let (ret, out_flags) = udsfs_calls::recv::report(&got, flags, stream, || Ok(is_stream()))?;
    if !msg.msg_name.is_null() {
        let mut len = msg.msg_namelen;
        if got.from.is_empty() {
            len = 0;
        } else {
            // The message is taken: a name that cannot be written is
            // EFAULT after it, as move_addr_to_user is.
            put_addr(
                m,
                &got.from,
                got.from_as_given,
                msg.msg_name.cast(),
                &mut len,
            )?;
        }
        msg.msg_namelen = len;
    }
    let (used, cut) = put_control(m, msg, &got, flags & libc::MSG_CMSG_CLOEXEC != 0);
    msg.msg_controllen = used;
    msg.msg_flags = out_flags | if cut { libc::MSG_CTRUNC } else { 0 };
    Ok(done + ret)
}

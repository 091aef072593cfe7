//! The supervisor's side of the daemon: making udsfs sockets through
//! `.udsfs/` files and the ioctls of a data file (`udsfs_proto::ioctl`),
//! as the preload library issues them. A blocking call parks in the daemon:
//! a message ioctl with `Wait`, the open of `accept`, a `connect` written to
//! the ctl file, a record written to the `msg` file (record.rs).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use udsfs_proto::ioctl::{self, *};
use udsfs_proto::mount::type_dir;

pub type Res<T> = Result<T, i32>;

fn last() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

pub struct Daemon {
    pub mount: PathBuf,
}

fn open(path: &Path, flags: i32) -> Res<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: NUL-terminated path; the descriptor is ours.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A control handle's text: "N\n" or "N M\n".
fn numbers(fd: &OwnedFd) -> Res<Vec<u64>> {
    let mut buf = [0u8; 64];
    // SAFETY: reads into a local buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(last());
    }
    let text = std::str::from_utf8(&buf[..n as usize]).map_err(|_| libc::EIO)?;
    text.split_whitespace()
        .map(|w| w.parse().map_err(|_| libc::EIO))
        .collect()
}

impl Daemon {
    fn file(&self, rel: &str) -> PathBuf {
        self.mount.join(".udsfs").join(rel)
    }

    pub fn open_sock(&self, id: u64, nonblock: bool) -> Res<OwnedFd> {
        let nb = if nonblock { libc::O_NONBLOCK } else { 0 };
        open(&self.file(&format!("sock/{id}/data")), libc::O_RDWR | nb)
    }

    /// A new unbound socket of type `ty` (`.udsfs/TYPE/clone`).
    pub fn new_sock(&self, ty: i32, nonblock: bool) -> Res<OwnedFd> {
        let name = type_dir(ty).ok_or(libc::EPROTONOSUPPORT)?;
        let h = open(&self.file(&format!("{name}/clone")), libc::O_RDWR)?;
        let id = *numbers(&h)?.first().ok_or(libc::EIO)?;
        self.open_sock(id, nonblock)
    }

    /// socketpair: `.udsfs/TYPE/pair`.
    pub fn pair(&self, ty: i32, nonblock: bool) -> Res<(OwnedFd, OwnedFd)> {
        let name = type_dir(ty).ok_or(libc::EPROTONOSUPPORT)?;
        let h = open(&self.file(&format!("{name}/pair")), libc::O_RDWR)?;
        let [a, b] = numbers(&h)?[..] else {
            return Err(libc::EIO);
        };
        Ok((self.open_sock(a, nonblock)?, self.open_sock(b, nonblock)?))
    }

    /// One accept: EAGAIN when no connection is queued, or with `wait`
    /// parked in the daemon until one is (the open of `accept` waits, under
    /// SO_RCVTIMEO).
    pub fn accept(&self, listener: &OwnedFd, nonblock: bool, wait: bool) -> Res<OwnedFd> {
        let id = info(listener)?.id;
        let nb = if wait { 0 } else { libc::O_NONBLOCK };
        let h = open(
            &self.file(&format!("sock/{id}/accept")),
            libc::O_RDONLY | nb,
        )?;
        let n = *numbers(&h)?.first().ok_or(libc::EIO)?;
        self.open_sock(n, nonblock)
    }

    /// A connect facing a full backlog, parked in the daemon until there is
    /// room (under SO_SNDTIMEO): `connect ADDR` written to the socket's ctl
    /// file, as the library waits (preload/src/socket.rs).
    pub fn connect_wait(&self, s: &OwnedFd, wire: &[u8]) -> Res<()> {
        let id = info(s)?.id;
        let to = udsfs_proto::addr::Addr::from_wire(wire)?;
        let line = format!("{}\n", udsfs_proto::ctl::Command::Connect(to).format());
        let h = open(&self.file(&format!("sock/{id}/ctl")), libc::O_WRONLY)?;
        // SAFETY: writes a local buffer.
        let r = unsafe { libc::write(h.as_raw_fd(), line.as_ptr().cast(), line.len()) };
        if r < 0 { Err(last()) } else { Ok(()) }
    }
}

/// One control ioctl.
pub fn ctl(fd: &OwnedFd, op: Op, arg: i32, addr: &[u8], given: &[u8]) -> Res<Ctl> {
    let c = Ctl::new(op, arg).with_addr(addr).with_given(given);
    ioctl::request(fd.as_raw_fd(), c)
}

pub fn info(fd: &OwnedFd) -> Res<Info> {
    ctl(fd, Op::Info, 0, &[], &[]).map(|c| c.values())
}

/// One received message.
pub struct Got {
    pub data: Vec<u8>,
    pub full_len: usize,
    pub from: Vec<u8>,
    pub from_as_given: bool,
    pub too_big: bool,
    /// SCM_CREDENTIALS: pid, uid, gid.
    pub creds: Option<[u32; 3]>,
    /// SCM_PIDFD (the receiver has SO_PASSPIDFD): the sender's pid.
    pub pidfd: Option<i32>,
    /// The daemon's pidfd of the sender (src/engine/pins.rs), a tag to
    /// claim over the fd channel; without one a pidfd is made from `pidfd`.
    pub pidfd_tag: Option<u64>,
    /// Passed sockets (numbers) and files (bit 63: a tag for the fd channel).
    pub rights: Vec<u64>,
    /// The daemon dropped passed sockets (MSG_CTRUNC).
    pub ctrunc: bool,
    /// The byte returned is the OOB byte.
    pub oob: bool,
    /// The receive timeout left after this ioctl (TIMEO_NONE: none).
    pub timeo_left: u64,
}

/// What a send carries besides its payload.
#[derive(Default)]
pub struct Meta<'a> {
    pub to: Option<&'a [u8]>,
    pub creds: Option<[u32; 3]>,
    pub rights: &'a [u64],
    pub oob: bool,
}

/// How a message ioctl of a blocking caller waits in the daemon (MSGF_WAIT,
/// under the socket's timeout), made only through `Call::parked`.
#[derive(Clone, Copy, Default)]
pub struct Wait {
    /// MSG_WAITALL on a stream (MSGF_WAITALL).
    pub waitall: bool,
    /// A later ioctl of the same call: the timeout left (MSGF_CONT).
    pub cont: Option<u64>,
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
    }
}

/// One send of at most MSG_ROOM bytes; without `wait` EAGAIN when full,
/// with it a short count when the daemon stopped (timeout, signal, peer).
pub fn send(fd: &OwnedFd, data: &[u8], meta: &Meta, wait: Option<Wait>) -> Res<usize> {
    let mut buf = vec![0u8; MSG_BUF];
    let mut h = MsgHead::new(MSGOP_SEND);
    wait_flags(&mut h, wait);
    let data = &data[..data.len().min(MSG_ROOM)];
    h.len = data.len() as u32;
    if meta.oob {
        h.flags |= MSGF_OOB;
    }
    if let Some(to) = meta.to {
        h.set_addr(to);
    }
    if let Some(c) = meta.creds {
        h.has_creds = HAS_CREDS;
        h.creds = c;
    }
    h.set_rights(meta.rights);
    h.write_to(&mut buf);
    buf[HEAD_SIZE..HEAD_SIZE + data.len()].copy_from_slice(data);
    ioctl::message(fd.as_raw_fd(), &mut buf).map(|r| r.len as usize)
}

/// One receive of up to `want` bytes; without `wait` EAGAIN when empty,
/// with it EAGAIN only at the timeout. `room` is the reader's control
/// buffer length: the daemon closes passed sockets beyond it, as Linux
/// closes the files it does not install. `writable`: how many of `want`
/// bytes the reader's buffers can take (MSGF_LIMIT), when fewer.
pub fn recv(
    fd: &OwnedFd,
    want: usize,
    peek: bool,
    oob: bool,
    room: usize,
    wait: Option<Wait>,
    writable: Option<usize>,
) -> Res<Got> {
    let mut buf = vec![0u8; MSG_BUF];
    let mut h = MsgHead::new(MSGOP_RECV);
    // What the reader wants, not what fits: a larger datagram is "too big"
    // (read from the `msg` file), not cut to the ioctl's room.
    h.len = want.min(u32::MAX as usize) as u32;
    h.flags = MSGF_ROOM;
    if peek {
        h.flags |= MSGF_PEEK;
    }
    if oob {
        h.flags |= MSGF_OOB;
    }
    h.nrights = room.min(u32::MAX as usize) as u32;
    if let Some(w) = writable {
        // A stream's chunk that the buffers cannot take whole stays queued.
        h.flags |= MSGF_LIMIT;
        h.writable = w.min(u32::MAX as usize) as u32;
    }
    wait_flags(&mut h, wait);
    h.write_to(&mut buf);
    let r = ioctl::message(fd.as_raw_fd(), &mut buf)?;
    let n = (r.len as usize).min(MSG_ROOM);
    Ok(Got {
        data: buf[HEAD_SIZE..HEAD_SIZE + n].to_vec(),
        full_len: r.full_len as usize,
        from: r.addr().to_vec(),
        from_as_given: r.addr_flags & ADDR_AS_GIVEN != 0,
        too_big: r.status == STATUS_TOO_BIG,
        creds: r.creds().map(|c| c.to_words()),
        pidfd: r.pidfd_pid(),
        pidfd_tag: r.pidfd_tag(),
        rights: r.rights().to_vec(),
        ctrunc: r.flags & MSGF_CTRUNC != 0,
        oob: r.flags & MSGF_OOB != 0,
        timeo_left: r.timeo_left,
    })
}

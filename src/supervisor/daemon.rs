//! The supervisor's side of the daemon: making udsfs sockets through
//! `.udsfs/` files and the ioctls of a data file (`udsfs_proto::ioctl`),
//! as the preload library issues them. A blocking call parks in the daemon:
//! a message ioctl with `Wait`, the open of `accept`, a `connect` written to
//! the ctl file, a record written to the `msg` file (record.rs).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use udsfs_calls::client::{self, MsgBuf};
pub use udsfs_calls::client::{Ask, Extras, Wait};
use udsfs_proto::ioctl::*;
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
        open(
            &self.file(&format!("sock/{id}/data")),
            libc::O_RDWR | nb | udsfs_calls::fileflags::OPEN,
        )
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

    /// One accept (`udsfs_calls::accept`): EAGAIN when no connection is
    /// queued, or with `wait` parked in the daemon until one is (the open
    /// of the ticket waits, under SO_RCVTIMEO); EMFILE when `slot_free`
    /// says the target has no descriptor slot, the connection left queued.
    pub fn accept(
        &self,
        listener: &OwnedFd,
        nonblock: bool,
        wait: bool,
        slot_free: impl FnMut() -> bool,
    ) -> Res<OwnedFd> {
        let mut f = Opener {
            d: self,
            nonblock,
            slot_free,
        };
        udsfs_calls::accept::accept(&mut f, listener.as_raw_fd(), wait)
    }

    /// A connect facing a full backlog, parked in the daemon until there is
    /// room (under SO_SNDTIMEO): udsfs_calls::connect's `line` written to
    /// the socket's ctl file.
    pub fn connect_wait(&self, s: &OwnedFd, line: &[u8]) -> Res<()> {
        let id = dir_number(s)?;
        let h = open(&self.file(&format!("sock/{id}/ctl")), libc::O_WRONLY)?;
        // SAFETY: writes a local buffer.
        let r = unsafe { libc::write(h.as_raw_fd(), line.as_ptr().cast(), line.len()) };
        if r < 0 { Err(last()) } else { Ok(()) }
    }
}

/// The supervisor's way to the mount's files for an accept: its own
/// opens, installed in the target afterwards.
struct Opener<'a, S> {
    d: &'a Daemon,
    nonblock: bool,
    slot_free: S,
}

impl<S: FnMut() -> bool> udsfs_calls::accept::Front for Opener<'_, S> {
    type Fd = OwnedFd;

    fn slot_free(&mut self) -> bool {
        (self.slot_free)()
    }

    fn open_ctrl(&mut self, rel: &str, flags: i32) -> Res<OwnedFd> {
        open(&self.d.file(rel), flags)
    }

    fn number(&mut self, h: &OwnedFd) -> Res<u64> {
        numbers(h)?.first().copied().ok_or(libc::EIO)
    }

    fn open_data(&mut self, id: u64) -> Res<OwnedFd> {
        self.d.open_sock(id, self.nonblock)
    }

    fn close(&mut self, fd: OwnedFd) {
        drop(fd)
    }
}

/// One control ioctl.
pub fn ctl(fd: &OwnedFd, op: Op, arg: i32, addr: &[u8], given: &[u8]) -> Res<Ctl> {
    let c = Ctl::new(op, arg).with_addr(addr).with_given(given);
    client::ctl(fd.as_raw_fd(), c)
}

pub fn info(fd: &OwnedFd) -> Res<Info> {
    client::info(fd.as_raw_fd())
}

/// The N of the `.udsfs/sock/N/data` a socket's descriptor was opened
/// through (a received socket's own directory), as the library's `sock_id`.
/// The number of the socket behind it (`Info::id`) names its first
/// directory, revoked once its first descriptor closed.
pub fn dir_number(fd: &OwnedFd) -> Res<u64> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let path = link.map_err(|e| e.raw_os_error().unwrap_or(libc::EBADF))?;
    udsfs_proto::mount::data_dir_number(path.as_os_str().as_bytes()).ok_or(libc::EBADF)
}

/// One received message: its payload, copied out of the ioctl's buffer or
/// read from the `msg` file, and its other parts.
pub struct Got {
    pub data: Vec<u8>,
    pub m: client::Got,
}

impl std::ops::Deref for Got {
    type Target = client::Got;
    fn deref(&self) -> &client::Got {
        &self.m
    }
}

impl std::ops::DerefMut for Got {
    fn deref_mut(&mut self) -> &mut client::Got {
        &mut self.m
    }
}

/// One receive ioctl (`client::recv`), its payload copied out.
pub fn recv(fd: &OwnedFd, ask: &Ask) -> Res<Got> {
    let mut buf = MsgBuf::new();
    let m = client::recv(fd.as_raw_fd(), &mut buf, ask)?;
    Ok(Got {
        data: buf.payload(m.len).to_vec(),
        m,
    })
}

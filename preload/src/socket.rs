//! Socket calls on udsfs sockets that open the mount's files: socketpair,
//! connect (a blocking one facing a full backlog), accept, and the names
//! getsockname and getpeername report.

use libc::{c_int, sockaddr, socklen_t};
use udsfs_calls::accept;
use udsfs_proto::ioctl::{Op, ADDR_AS_GIVEN};
use udsfs_proto::mount::type_dir;

use crate::errno::{last, Res};
use crate::files::{close, lowest, nonblocking, open_file, open_sock, read_numbers, with_handle};
use crate::mount::{self, Mount};
use crate::route::put_addr;
use crate::{ioctl, user};

/// socketpair(AF_UNIX): `.udsfs/TYPE/pair`.
pub fn pair(m: &Mount, ty: c_int, sv: &mut [c_int; 2]) -> Res<()> {
    let nonblock = ty & libc::SOCK_NONBLOCK != 0;
    let cloexec = ty & libc::SOCK_CLOEXEC != 0;
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let name = type_dir(base).ok_or(libc::EPROTONOSUPPORT)?;
    let path = m.ctrl_file(&format!("{name}/pair"));
    *sv = with_handle(&path, libc::O_RDWR, |ids| {
        let [a, b] = ids[..] else {
            return Err(libc::EIO);
        };
        let fa = open_sock(m, a, nonblock, cloexec)?;
        match open_sock(m, b, nonblock, cloexec) {
            Ok(fb) => Ok([fa, fb]),
            Err(e) => {
                close(fa);
                Err(e)
            }
        }
    })?;
    // The handle's number, below both, is free again: the pair takes the
    // lowest numbers, in order, as Linux's socketpair does.
    *sv = sv.map(|fd| lowest(fd, cloexec));
    Ok(())
}

/// connect() to `wire`, as udsfs_calls::connect decides it: a blocking
/// caller facing a full backlog writes the line it is given to the
/// socket's ctl file, which parks.
pub fn connect(m: &Mount, fd: c_int, wire: &[u8]) -> Res<()> {
    let blocking = || !nonblocking(fd);
    udsfs_calls::connect::connect(&mount::Own, &m.routes, fd, wire, blocking, |line| {
        let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
        let h = open_file(&m.sock_file(id, "ctl"), libc::O_WRONLY)?;
        // SAFETY: writes a local buffer.
        let r = unsafe { libc::write(h, line.as_ptr().cast(), line.len()) };
        let res = if r < 0 { last() } else { Ok(()) };
        close(h);
        res
    })
}

/// accept4(): the decisions are `udsfs_calls::accept`'s (a ticket asked on
/// the listener's descriptor, opened as `.udsfs/accept/TICKET`, which parks
/// until a connection comes, or EAGAIN under O_NONBLOCK); this library's
/// opens are the program's own, so with no slot left the first fails
/// EMFILE before the daemon sees it and the connection stays queued.
pub fn accept(m: &Mount, fd: c_int, flags: c_int) -> Res<c_int> {
    accept::check_flags(flags)?;
    let mut here = Here {
        m,
        nonblock: flags & libc::SOCK_NONBLOCK != 0,
        cloexec: flags & libc::SOCK_CLOEXEC != 0,
    };
    // The ticket's number, below the data file's, is free again.
    accept::accept(&mut here, fd, !nonblocking(fd)).map(|nfd| lowest(nfd, here.cloexec))
}

/// The library's way to the mount's files: its own opens.
struct Here<'a> {
    m: &'a Mount,
    nonblock: bool,
    cloexec: bool,
}

impl accept::Front for Here<'_> {
    type Fd = c_int;

    fn slot_free(&mut self) -> bool {
        true
    }

    fn open_ctrl(&mut self, rel: &str, flags: c_int) -> Res<c_int> {
        open_file(&self.m.ctrl_file(rel), flags)
    }

    fn number(&mut self, h: &c_int) -> Res<u64> {
        read_numbers(*h)?.first().copied().ok_or(libc::EIO)
    }

    fn open_data(&mut self, id: u64) -> Res<c_int> {
        open_sock(self.m, id, self.nonblock, self.cloexec)
    }

    fn close(&mut self, fd: c_int) {
        close(fd)
    }
}

/// getsockname (peer = false) and getpeername (peer = true); `out` and
/// `len` are the program's (EFAULT when they cannot be read or written).
pub fn name(m: &Mount, fd: c_int, peer: bool, out: *mut sockaddr, len: *mut socklen_t) -> Res<()> {
    let c = ioctl::op(fd, Op::GetName, peer as i32)?;
    let mut room = user::read(len)?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    let wire = c.addr().ok_or(libc::EIO)?;
    put_addr(m, wire, c.addr_flags & ADDR_AS_GIVEN != 0, out, &mut room)?;
    user::write(len, room)
}

/// Raises SIGPIPE in this thread (udsfs_calls::client::sigpipe).
pub fn sigpipe() {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    udsfs_calls::client::sigpipe(pid, tid);
}

//! A kernel AF_UNIX socket becomes a udsfs socket at the call that routes
//! it into the mount: a new udsfs socket of its type takes its descriptor
//! number, with its O_NONBLOCK, FD_CLOEXEC and the options it carries
//! (`udsfs_proto::carry`), its O_ASYNC, SIGIO/SIGURG owner and F_SETSIG
//! (`udsfs_calls::sigio::Carry`), and its places in the program's epoll
//! sets (epolls.rs); its type and network namespace as
//! udsfs_calls::convert decides them. Here: dup3 over the number,
//! in-process.

use libc::c_int;
use udsfs_calls::convert;
use udsfs_proto::carry::Carried;

use crate::errno::{last, Res};
use crate::files::{self, close, open_sock};
use crate::mount::Mount;
use crate::{epolls, real, urg};

/// Puts a new udsfs socket in kernel socket `fd`'s place.
pub fn convert(m: &Mount, fd: c_int) -> Res<()> {
    let (_, name) = convert::sock_type(fd)?;
    // SAFETY: fcntl queries only.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    if fl < 0 || fdfl < 0 {
        return last();
    }
    let carried = Carried::of(fd);
    let kernel = file_id(fd)?;
    let held = epolls::held(fd, kernel.1);
    let sigio = urg::carry_of(fd);
    let clone = m.ctrl_file(&format!("{name}/clone"));
    // The daemon makes the socket in the network namespace of the thread
    // that opens `clone`: the kernel socket's, where the thread has left it.
    let in_ns = convert::SocketNetns::enter(fd, None);
    let h = files::open_file(&clone, libc::O_RDWR);
    drop(in_ns);
    let h = h?;
    let new = files::with_open(h, |ids| {
        let id = ids.first().copied().ok_or(libc::EIO)?;
        open_sock(m, id, fl & libc::O_NONBLOCK != 0, true)
    })?;
    let cloexec = if fdfl & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    // Another thread may have closed `fd` while the daemon made the socket,
    // and a new file taken the number: it stays, and this call fails as
    // one made after that close would (Linux's connect and bind work on
    // the file they took at their start and put nothing at the number).
    if file_id(fd) != Ok(kernel) {
        close(new);
        return Err(libc::EBADF);
    }
    // SAFETY: dup3 replaces the program's kernel socket with the udsfs file.
    let r = unsafe { libc::dup3(new, fd, cloexec) };
    close(new);
    if r < 0 {
        return last();
    }
    epolls::restore(fd, &held);
    urg::carry_apply(&sigio, fd)?;
    carried.apply(fd)
}

/// The device and inode of descriptor `fd`'s file.
fn file_id(fd: c_int) -> Res<(u64, u64)> {
    // SAFETY: zeroed storage fstat fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a local stat.
    if unsafe { real::fstat(fd, &mut st) } < 0 {
        return last();
    }
    Ok((st.st_dev, st.st_ino))
}

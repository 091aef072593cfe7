//! A kernel AF_UNIX socket becomes a udsfs socket at the call that routes
//! it into the mount: a new udsfs socket of its type takes its descriptor
//! number, with its O_NONBLOCK, FD_CLOEXEC and the options it carries
//! (`udsfs_proto::carry`), its O_ASYNC, SIGIO/SIGURG owner and F_SETSIG
//! (`udsfs_calls::sigio::Carry`), and its
//! places in the program's epoll sets (epolls.rs).

use libc::{c_int, socklen_t};
use udsfs_proto::carry::Carried;
use udsfs_proto::mount::type_dir;

use crate::errno::{last, Res};
use crate::files::{self, close, open_sock};
use crate::mount::Mount;
use crate::{epolls, real, urg};

fn kernel_int(fd: c_int, opt: c_int) -> Res<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: getsockopt writes one int.
    let r = unsafe {
        real::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        last()
    } else {
        Ok(v)
    }
}

/// Puts a new udsfs socket in kernel socket `fd`'s place.
pub fn convert(m: &Mount, fd: c_int) -> Res<()> {
    let name = type_dir(kernel_int(fd, libc::SO_TYPE)?).ok_or(libc::EPROTOTYPE)?;
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
    let held = epolls::held(fd, kernel_ino(fd)?);
    let sigio = urg::carry_of(fd);
    let clone = m.ctrl_file(&format!("{name}/clone"));
    // The daemon makes the socket in the network namespace of the thread
    // that opens `clone`: the kernel socket's, where the thread has left it.
    let in_ns = NetnsSwitch::to_socket_netns(fd);
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

/// The calling thread moved into a kernel socket's network namespace for
/// one call, and back when dropped. Linux files a socket's abstract name in
/// the namespace the socket was made in (sock_net): a program that made a
/// socket and then ran unshare(CLONE_NEWNET) or setns binds it in the
/// namespace it left. Raw system calls: the library's own wrappers must not
/// see these.
struct NetnsSwitch {
    back: c_int,
}

impl NetnsSwitch {
    /// None (nothing to do, or it cannot be done: SIOCGSKNS and setns need
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN there, and then the thread's own
    /// namespace stands) unless the thread is elsewhere than socket `fd`.
    fn to_socket_netns(fd: c_int) -> Option<NetnsSwitch> {
        const SIOCGSKNS: libc::c_ulong = 0x894C;
        // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor.
        let ns = unsafe { libc::syscall(libc::SYS_ioctl, fd, SIOCGSKNS) } as c_int;
        if ns < 0 {
            return None;
        }
        let here = c"/proc/thread-self/ns/net";
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let back = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                here.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        } as c_int;
        let moved = back >= 0 && kernel_ino(ns).ok() != kernel_ino(back).ok();
        // SAFETY: setns with a namespace descriptor of the right type.
        let entered =
            moved && unsafe { libc::syscall(libc::SYS_setns, ns, libc::CLONE_NEWNET) } == 0;
        close(ns);
        if !entered {
            if back >= 0 {
                close(back);
            }
            return None;
        }
        Some(NetnsSwitch { back })
    }
}

impl Drop for NetnsSwitch {
    fn drop(&mut self) {
        // SAFETY: back to the namespace the thread was in.
        unsafe { libc::syscall(libc::SYS_setns, self.back, libc::CLONE_NEWNET) };
        close(self.back);
    }
}

/// The inode of descriptor `fd`.
fn kernel_ino(fd: c_int) -> Res<u64> {
    // SAFETY: zeroed storage fstat fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a local stat.
    if unsafe { real::fstat(fd, &mut st) } < 0 {
        return last();
    }
    Ok(st.st_ino)
}

/// Is `fd` a kernel AF_UNIX socket (that may become a udsfs one)?
pub fn kernel_unix(fd: c_int) -> bool {
    kernel_int(fd, libc::SO_DOMAIN) == Ok(libc::AF_UNIX)
}

//! Netdevice ioctls (SIOCGIFINDEX, SIOCGIFNAME, SIOCGIFCONF, ...) on a udsfs
//! socket. Linux answers every socket ioctl of type 0x89 that AF_UNIX does
//! not take itself from the socket's network namespace (sock_do_ioctl, then
//! dev_ioctl); a throwaway kernel AF_UNIX socket gets the same answer.

use libc::{c_int, c_ulong, c_void};

use crate::errno::{errno, Res};
use crate::real;

/// _IOC_TYPE of the socket ioctls (SOCK_IOC_TYPE).
const SOCK_IOC_TYPE: c_ulong = 0x89;

/// Whether Linux would hand `req` to the socket layer's generic code.
pub fn is_socket_ioctl(req: c_ulong) -> bool {
    (req >> 8) & 0xff == SOCK_IOC_TYPE
}

/// `req` answered on a kernel AF_UNIX socket of the caller's namespace.
pub fn forward(req: c_ulong, arg: *mut c_void) -> Res<()> {
    // SAFETY: a new socket, closed below.
    let k = unsafe { real::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if k < 0 {
        return Err(errno());
    }
    // SAFETY: the caller's argument, as the kernel reads it for `req`.
    let r = unsafe { real::ioctl(k, req, arg) };
    let e = errno();
    // SAFETY: closes the socket made above.
    unsafe { libc::close(k as c_int) };
    if r < 0 {
        Err(e)
    } else {
        Ok(())
    }
}

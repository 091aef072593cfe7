//! Where a program's address goes (`udsfs_proto::route` on the bytes of
//! its sockaddr and this process's working directory), and the daemon's
//! names written back as the sockaddr_un Linux would report.

use libc::{c_int, sockaddr, socklen_t};
use udsfs_calls::bind;
use udsfs_proto::route::{self, COPY_LEN};

pub use udsfs_proto::route::Route;

use crate::errno::Res;
use crate::mount::Mount;
use crate::user;

/// The bytes of `addr`, at most `COPY_LEN` (NULL: none).
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be NULL).
unsafe fn bytes<'a>(addr: *const sockaddr, len: socklen_t) -> &'a [u8] {
    if addr.is_null() {
        return &[];
    }
    // SAFETY: the caller's `len` bytes, cut to a sockaddr_un.
    unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), (len as usize).min(COPY_LEN)) }
}

/// Classifies `addr` (NULL-safe).
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be NULL).
pub unsafe fn route(m: &Mount, addr: *const sockaddr, len: socklen_t) -> Route {
    // SAFETY: as the caller promised.
    let a = unsafe { bytes(addr, len) };
    // Only a relative path name needs the working directory.
    let relative = a.len() > 2 && a[2] != 0 && a[2] != b'/';
    let cwd = relative.then(std::env::current_dir).and_then(Result::ok);
    use std::os::unix::ffi::OsStrExt;
    m.routes
        .classify(a, cwd.as_ref().map(|c| c.as_os_str().as_bytes()))
}

/// The sun_path of a path address as the program wrote it (up to its NUL):
/// what Linux reports back for a name bound with it. Empty for an abstract
/// name or autobind.
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be NULL).
pub unsafe fn given_path(addr: *const sockaddr, len: socklen_t) -> Vec<u8> {
    // SAFETY: as the caller promised.
    route::given_path(unsafe { bytes(addr, len) })
}

/// The errno of bind() on udsfs socket `fd` to `path`, a kernel path
/// outside the mount and its routes (udsfs_calls::bind::kernel_path_error).
pub fn kernel_path_bind_error(fd: c_int, path: &[u8]) -> c_int {
    let e = bind::kernel_path_error(&crate::mount::Own, path);
    if e == libc::EINVAL {
        crate::log::say(&format!(
            "bind on udsfs socket fd {fd}: the path is outside the mount and its routes (EINVAL)"
        ));
    }
    e
}

/// Writes a daemon address (wire form) as a sockaddr_un, truncated to the
/// room `*len`; `*len` becomes the full length, as Linux reports it.
/// `as_given`: `wire` is a sun_path as a program gave it. `out` is the
/// program's: EFAULT when it cannot be written.
pub fn put_addr(
    m: &Mount,
    wire: &[u8],
    as_given: bool,
    out: *mut sockaddr,
    len: &mut socklen_t,
) -> Res<()> {
    let bytes = route::sockaddr(&m.routes, wire, as_given);
    let room = (*len as usize).min(bytes.len());
    user::write_from(out.cast(), &bytes[..room])?;
    *len = bytes.len() as socklen_t;
    Ok(())
}

/// A program's sockaddr copied in, at most `COPY_LEN` bytes of it (one past
/// a sockaddr_un tells a longer one), as move_addr_to_kernel copies it
/// before the call looks at it.
pub struct Given {
    buf: [u8; COPY_LEN],
    len: socklen_t,
}

impl Given {
    /// None for NULL; EFAULT when the bytes cannot be read.
    pub fn copy(addr: *const sockaddr, len: socklen_t) -> Res<Option<Given>> {
        if addr.is_null() {
            return Ok(None);
        }
        let mut g = Given {
            buf: [0; COPY_LEN],
            len,
        };
        let n = (len as usize).min(COPY_LEN);
        user::read_into(&mut g.buf[..n], addr.cast())?;
        Ok(Some(g))
    }

    /// The copy, as a pointer `route` and `given_path` read (with `len`).
    pub fn ptr(&self) -> *const sockaddr {
        self.buf.as_ptr().cast()
    }

    pub fn len(&self) -> socklen_t {
        self.len
    }

    /// The bytes copied (at most `COPY_LEN`).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..(self.len as usize).min(COPY_LEN)]
    }
}

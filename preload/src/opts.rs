//! getsockopt, setsockopt and the queue ioctls (FIONREAD/SIOCINQ,
//! SIOCOUTQ) on udsfs sockets, answered by `udsfs_proto::sockopt` as Linux
//! answers them for AF_UNIX; SO_PEERPIDFD installs a pidfd (`pidfd`).

use libc::{c_int, c_void, socklen_t};
use udsfs_proto::sockopt::{self, SO_PEERPIDFD};

use crate::errno::Res;
use crate::{log, pidfd};

/// Copies option `name`'s value out, as sock_getsockopt does: truncated to
/// the caller's length, which becomes the length written (`sockopt::fit`).
unsafe fn put(name: c_int, val: &[u8], out: *mut c_void, len: *mut socklen_t) -> Res<()> {
    if out.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller gives *len writable bytes at out.
    unsafe {
        if (*len as i32) < 0 {
            return Err(libc::EINVAL);
        }
        let n = match sockopt::fit(name, *len, val.len()) {
            Ok(n) => n,
            Err(need) => {
                *len = need;
                return Err(libc::ERANGE);
            }
        };
        std::ptr::copy_nonoverlapping(val.as_ptr(), out as *mut u8, n);
        *len = n as socklen_t;
    }
    Ok(())
}

/// # Safety
/// As for getsockopt(2).
pub unsafe fn get(
    fd: c_int,
    level: c_int,
    name: c_int,
    out: *mut c_void,
    len: *mut socklen_t,
) -> Res<()> {
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let val = if name == SO_PEERPIDFD {
        pidfd::peer(fd)?.to_ne_bytes().to_vec()
    } else {
        sockopt::get(fd, name).inspect_err(|&e| {
            if e == libc::ENOPROTOOPT && sockopt::refusal_worth_saying(name, false) {
                log::say(&format!(
                    "getsockopt(SOL_SOCKET, {name}) is not offered on udsfs sockets (ENOPROTOOPT)"
                ));
            }
        })?
    };
    // SAFETY: as the caller promised.
    unsafe { put(name, &val, out, len) }
}

/// # Safety
/// As for setsockopt(2).
pub unsafe fn set(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> Res<()> {
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    // The longest option value is a timeval.
    let bytes: &[u8] = if val.is_null() {
        &[]
    } else {
        // SAFETY: the caller gives `len` readable bytes at val.
        unsafe { std::slice::from_raw_parts(val.cast(), (len as usize).min(16)) }
    };
    sockopt::set(fd, name, bytes).inspect_err(|&e| {
        if e == libc::ENOPROTOOPT && sockopt::refusal_worth_saying(name, true) {
            log::say(&format!(
                "setsockopt(SOL_SOCKET, {name}) is not offered on udsfs sockets (ENOPROTOOPT)"
            ));
        }
    })
}

/// FIONREAD/SIOCINQ and SIOCOUTQ; the kernel answers FIONREAD for a
/// regular file itself (its size), so the library asks the daemon.
pub fn queue_ioctl(fd: c_int, req: libc::c_ulong, out: *mut c_void) -> Res<()> {
    let n = sockopt::queue_ioctl(fd, req).unwrap_or(Err(libc::ENOTTY))?;
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller passes an int to fill.
    unsafe { std::ptr::write_unaligned(out as *mut c_int, n) };
    Ok(())
}

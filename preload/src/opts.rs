//! getsockopt, setsockopt and the queue ioctls (FIONREAD/SIOCINQ,
//! SIOCOUTQ) on udsfs sockets, answered by `udsfs_proto::sockopt` as Linux
//! answers them for AF_UNIX; SO_PEERPIDFD installs a pidfd (`pidfd`).

use libc::{c_int, c_void, socklen_t};
use udsfs_proto::sockopt::{self, SO_PEERPIDFD};

use crate::errno::Res;
use crate::{log, pidfd, user};

/// The room the caller's `len` gives, read first as sk_getsockopt reads it.
fn room(len: *mut socklen_t) -> Res<socklen_t> {
    let room = user::read(len)?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    Ok(room)
}

/// Copies option `name`'s value out, as sock_getsockopt does: truncated to
/// the caller's length, which becomes the length written (`sockopt::fit`:
/// ERANGE and the length needed where Linux gives them). `out` and `len` are
/// the program's: EFAULT when they cannot be read or written.
fn put(name: c_int, val: &[u8], out: *mut c_void, len: *mut socklen_t) -> Res<()> {
    let n = match sockopt::fit(name, room(len)?, val.len()) {
        Ok(n) => n,
        Err(need) => {
            user::write(len, need)?;
            return Err(libc::ERANGE);
        }
    };
    user::write_from(out.cast(), &val[..n])?;
    user::write(len, n as socklen_t)
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
    room(len)?;
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
    put(name, &val, out, len)
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
    // The longest option value is a timeval; the program's bytes are
    // copied in (EFAULT when they cannot be read, as copy_from_sockptr).
    let mut local = [0u8; 16];
    let n = (len as usize).min(16);
    user::read_into(&mut local[..n], val.cast())?;
    sockopt::set(fd, name, &local[..n]).inspect_err(|&e| {
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
    user::write_from(out.cast(), &n.to_ne_bytes())
}

//! getsockopt, setsockopt and the queue ioctls (FIONREAD/SIOCINQ,
//! SIOCOUTQ) on udsfs sockets, answered as Linux answers them for AF_UNIX.

use libc::{c_int, c_void, socklen_t};

use crate::abi::*;
use crate::sock::{self, Res};
use crate::{log, pidfd};

/// Copies an option value out, as sock_getsockopt does: truncated to the
/// caller's length, which becomes the length written.
unsafe fn put(val: &[u8], out: *mut c_void, len: *mut socklen_t) -> Res<()> {
    if out.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller gives *len writable bytes at out.
    unsafe {
        if (*len as i32) < 0 {
            return Err(libc::EINVAL);
        }
        let n = (*len as usize).min(val.len());
        std::ptr::copy_nonoverlapping(val.as_ptr(), out as *mut u8, n);
        *len = n as socklen_t;
    }
    Ok(())
}

/// x86_64's numbers: glibc passes the _OLD ones (struct timeval), 64-bit
/// time_t programs may pass the _NEW ones (__kernel_sock_timeval); on this
/// ABI both are two 64-bit fields.
const SO_RCVTIMEO_OLD: c_int = 20;
const SO_SNDTIMEO_OLD: c_int = 21;
const SO_RCVTIMEO_NEW: c_int = 66;
const SO_SNDTIMEO_NEW: c_int = 67;

/// The `arg` of OP_SET_TIMEO / OP_GET_TIMEO: 0 receive, 1 send.
fn timeo_dir(name: c_int) -> i32 {
    matches!(name, SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW) as i32
}

/// Options the daemon keeps per socket only to read them back (SO_LINGER
/// too, in two ints): src/engine/sockflags.rs.
const KEPT: [c_int; 7] = [
    libc::SO_REUSEADDR,
    libc::SO_DONTROUTE,
    libc::SO_BROADCAST,
    libc::SO_KEEPALIVE,
    libc::SO_NO_CHECK,
    libc::SO_PASSSEC,
    libc::SO_RCVLOWAT,
];

fn set_kept(fd: c_int, name: c_int, a: i32, b: i32) -> Res<()> {
    // SAFETY: Ctl is plain integers.
    let mut c: Ctl = unsafe { std::mem::zeroed() };
    c.v[0] = a as i64;
    c.v[1] = b as i64;
    sock::ctl_with(fd, OP_SET_SOCKOPT, name, c).map(|_| ())
}

fn int(v: i64) -> Vec<u8> {
    (v as c_int).to_ne_bytes().to_vec()
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
    let val: Vec<u8> = match name {
        libc::SO_DOMAIN => int(libc::AF_UNIX as i64),
        libc::SO_PROTOCOL => int(0),
        libc::SO_TYPE => int(sock::info(fd)?[INFO_TYPE]),
        libc::SO_ACCEPTCONN => int(sock::info(fd)?[INFO_LISTENING]),
        libc::SO_PASSCRED => int(sock::info(fd)?[INFO_PASSCRED]),
        pidfd::SO_PASSPIDFD => int(sock::info(fd)?[INFO_PASSPIDFD]),
        pidfd::SO_PEERPIDFD => int(pidfd::peer(fd)? as i64),
        libc::SO_SNDBUF => int(sock::info(fd)?[INFO_SNDBUF]),
        libc::SO_RCVBUF => int(sock::info(fd)?[INFO_RCVBUF]),
        libc::SO_ERROR => int(sock::ctl(fd, OP_TAKE_ERROR, 0, &[])?.v[0]),
        libc::SO_PEERCRED => {
            let v = sock::info(fd)?;
            [
                v[INFO_PEER_PID] as i32 as u32,
                v[INFO_PEER_UID] as u32,
                v[INFO_PEER_GID] as u32,
            ]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect()
        }
        SO_RCVTIMEO_OLD | SO_SNDTIMEO_OLD | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW => {
            let c = sock::ctl(fd, OP_GET_TIMEO, timeo_dir(name), &[])?;
            // timeval and __kernel_sock_timeval are both two 64-bit fields.
            [c.v[0], c.v[1]]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect()
        }
        libc::SO_LINGER => {
            let c = sock::ctl(fd, OP_GET_SOCKOPT, name, &[])?;
            [c.v[0] as i32, c.v[1] as i32]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect()
        }
        _ if KEPT.contains(&name) => int(sock::ctl(fd, OP_GET_SOCKOPT, name, &[])?.v[0]),
        libc::SO_OOBINLINE => int(sock::ctl(fd, OP_OOB_OPTS, 0, &[])?.v[0]),
        libc::SO_PEEK_OFF => int(sock::ctl(fd, OP_OOB_OPTS, 0, &[])?.v[1]),
        // Write-only options: Linux has no getsockopt for them either.
        libc::SO_SNDBUFFORCE | libc::SO_RCVBUFFORCE => return Err(libc::ENOPROTOOPT),
        _ => {
            log::say(&format!(
                "getsockopt(SOL_SOCKET, {name}) is not offered on udsfs sockets (ENOPROTOOPT)"
            ));
            return Err(libc::ENOPROTOOPT);
        }
    };
    // SAFETY: as the caller promised.
    unsafe { put(&val, out, len) }
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
    let read_int = || -> Res<i32> {
        if val.is_null() || (len as usize) < std::mem::size_of::<c_int>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: at least an int is readable.
        Ok(unsafe { std::ptr::read_unaligned(val as *const c_int) })
    };
    match name {
        libc::SO_PASSCRED => {
            sock::ctl(fd, OP_SET_PASSCRED, (read_int()? != 0) as i32, &[]).map(|_| ())
        }
        pidfd::SO_PASSPIDFD => {
            sock::ctl(fd, OP_SET_PASSPIDFD, (read_int()? != 0) as i32, &[]).map(|_| ())
        }
        libc::SO_SNDBUF => sock::ctl(fd, OP_SET_SNDBUF, read_int()?, &[]).map(|_| ()),
        libc::SO_RCVBUF => sock::ctl(fd, OP_SET_RCVBUF, read_int()?, &[]).map(|_| ()),
        SO_RCVTIMEO_OLD | SO_SNDTIMEO_OLD | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW => {
            // sock_set_timeout: shorter than a timeval is EINVAL.
            if val.is_null() || (len as usize) < 16 {
                return Err(libc::EINVAL);
            }
            // SAFETY: 16 bytes are readable.
            let [sec, usec] = unsafe { std::ptr::read_unaligned(val as *const [i64; 2]) };
            // SAFETY: Ctl is plain integers.
            let mut c: Ctl = unsafe { std::mem::zeroed() };
            c.v[0] = sec;
            c.v[1] = usec;
            sock::ctl_with(fd, OP_SET_TIMEO, timeo_dir(name), c).map(|_| ())
        }
        libc::SO_SNDBUFFORCE => sock::ctl(fd, OP_SET_SNDBUF_FORCE, read_int()?, &[]).map(|_| ()),
        libc::SO_RCVBUFFORCE => sock::ctl(fd, OP_SET_RCVBUF_FORCE, read_int()?, &[]).map(|_| ()),
        libc::SO_OOBINLINE => {
            sock::ctl(fd, OP_SET_OOBINLINE, (read_int()? != 0) as i32, &[]).map(|_| ())
        }
        libc::SO_PEEK_OFF => sock::ctl(fd, OP_SET_PEEK_OFF, read_int()?, &[]).map(|_| ()),
        libc::SO_LINGER => {
            if val.is_null() || (len as usize) < std::mem::size_of::<libc::linger>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: a struct linger is readable.
            let [on, secs] = unsafe { std::ptr::read_unaligned(val as *const [i32; 2]) };
            set_kept(fd, name, on, secs)
        }
        _ if KEPT.contains(&name) => set_kept(fd, name, read_int()?, 0),
        _ => {
            log::say(&format!(
                "setsockopt(SOL_SOCKET, {name}) is not offered on udsfs sockets (ENOPROTOOPT)"
            ));
            Err(libc::ENOPROTOOPT)
        }
    }
}

/// FIONREAD/SIOCINQ and SIOCOUTQ; the kernel answers FIONREAD for a
/// regular file itself (its size), so the library asks the daemon.
pub fn queue_ioctl(fd: c_int, req: libc::c_ulong, out: *mut c_void) -> Res<()> {
    let v = sock::info(fd)?;
    let n = if req == libc::FIONREAD {
        v[INFO_INQ]
    } else {
        v[INFO_OUTQ]
    };
    if n < 0 {
        return Err(libc::EINVAL);
    }
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller passes an int to fill.
    unsafe { std::ptr::write_unaligned(out as *mut c_int, n as c_int) };
    Ok(())
}

/// A kernel socket's SO_SNDBUF and SO_RCVBUF where a program changed them
/// (they differ from net.core.wmem_default / rmem_default), and its
/// SO_RCVTIMEO and SO_SNDTIMEO where set, and the kept options (`KEPT`,
/// SO_LINGER) where they differ from a new socket's, to be set again on the
/// udsfs socket that takes its place.
pub struct Sizes(
    Vec<(c_int, c_int)>,
    Vec<(c_int, [i64; 2])>,
    Vec<(c_int, [i32; 2])>,
);

fn sysctl(name: &str) -> c_int {
    std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(212992)
}

pub fn kernel_sizes(fd: c_int) -> Sizes {
    static DEFAULTS: std::sync::OnceLock<(c_int, c_int)> = std::sync::OnceLock::new();
    let (wdef, rdef) = *DEFAULTS.get_or_init(|| (sysctl("wmem_default"), sysctl("rmem_default")));
    let mut out = Vec::new();
    for (name, default) in [(libc::SO_SNDBUF, wdef), (libc::SO_RCVBUF, rdef)] {
        let mut v: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: getsockopt writes one int.
        let r = unsafe {
            crate::real::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut v as *mut c_int).cast(),
                &mut len,
            )
        };
        if r == 0 && v != default {
            out.push((name, v));
        }
    }
    let mut timeouts = Vec::new();
    for name in [SO_RCVTIMEO_OLD, SO_SNDTIMEO_OLD] {
        let mut tv = [0i64; 2];
        let mut len = std::mem::size_of_val(&tv) as socklen_t;
        // SAFETY: getsockopt writes one timeval.
        let r = unsafe {
            crate::real::getsockopt(fd, libc::SOL_SOCKET, name, tv.as_mut_ptr().cast(), &mut len)
        };
        if r == 0 && tv != [0, 0] {
            timeouts.push((name, tv));
        }
    }
    let mut kept = Vec::new();
    for name in KEPT.into_iter().chain([libc::SO_LINGER]) {
        let mut v = [0i32; 2];
        let mut len = std::mem::size_of_val(&v) as socklen_t;
        // SAFETY: getsockopt writes at most two ints.
        let r = unsafe {
            crate::real::getsockopt(fd, libc::SOL_SOCKET, name, v.as_mut_ptr().cast(), &mut len)
        };
        let fresh = if name == libc::SO_RCVLOWAT {
            [1, 0]
        } else {
            [0, 0]
        };
        if r == 0 && v != fresh {
            kept.push((name, v));
        }
    }
    Sizes(out, timeouts, kept)
}

/// Sets the sizes again: half the value (setsockopt doubles it), forced
/// where a privileged caller had set it past the maximum.
pub fn restore_sizes(fd: c_int, sizes: &Sizes) -> Res<()> {
    for &(name, v) in &sizes.0 {
        let (plain, forced, max) = if name == libc::SO_SNDBUF {
            (OP_SET_SNDBUF, OP_SET_SNDBUF_FORCE, "wmem_max")
        } else {
            (OP_SET_RCVBUF, OP_SET_RCVBUF_FORCE, "rmem_max")
        };
        let op = if v / 2 > sysctl(max) { forced } else { plain };
        sock::ctl(fd, op, v / 2, &[])?;
    }
    for &(name, [sec, usec]) in &sizes.1 {
        // SAFETY: Ctl is plain integers.
        let mut c: Ctl = unsafe { std::mem::zeroed() };
        c.v[0] = sec;
        c.v[1] = usec;
        sock::ctl_with(fd, OP_SET_TIMEO, timeo_dir(name), c)?;
    }
    for &(name, [a, b]) in &sizes.2 {
        set_kept(fd, name, a, b)?;
    }
    Ok(())
}

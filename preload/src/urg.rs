//! Out-of-band data's side calls on udsfs sockets: the SIGURG owner
//! (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP), which the kernel keeps on
//! the file but never signals for a FUSE file, so the daemon is told too;
//! and SIOCATMARK, which the kernel refuses on a regular file; and FIOASYNC,
//! which the kernel refuses (ENOTTY) on a file without `fasync`, as FUSE
//! files are, and O_ASYNC, which F_SETFL accepts on such a file but does
//! not keep: the daemon keeps it (Op::SetAsync), F_GETFL shows it, as
//! Linux does, and the daemon sends SIGIO to the owner (src/engine/sigio.rs).

use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_int, c_ulong, c_void};

use udsfs_proto::ioctl::{AtMark, OobOpts, Op};

use crate::errno::{errno, guarded, set_errno, Res};
use crate::ioctl::op;
use crate::{mount, real, user};

/// Not in the libc crate: F_SETOWN_EX from <fcntl.h>.
const F_SETOWN_EX: c_int = 15;

/// The socket ioctls about owners and the OOB mark; None: not one of them.
pub fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> Option<Res<()>> {
    const FIOSETOWN: c_ulong = 0x8901;
    const SIOCSPGRP: c_ulong = 0x8902;
    const FIOGETOWN: c_ulong = 0x8903;
    const SIOCGPGRP: c_ulong = 0x8904;
    const SIOCATMARK: c_ulong = 0x8905;
    if !matches!(
        req,
        FIOSETOWN | SIOCSPGRP | FIOGETOWN | SIOCGPGRP | SIOCATMARK | FIOASYNC
    ) {
        return None;
    }
    // The argument is the program's: EFAULT when it cannot be read or
    // written (user.rs).
    let out = arg as *mut c_int;
    Some(match req {
        FIOSETOWN | SIOCSPGRP => {
            user::read(out.cast::<[u8; 4]>()).and_then(|b| set_owner(fd, c_int::from_ne_bytes(b)))
        }
        FIOASYNC => {
            // SAFETY: the caller passes an int.
            let on = unsafe { std::ptr::read_unaligned(out) } != 0;
            set_async(fd, on)
        }
        FIOGETOWN | SIOCGPGRP => {
            // SAFETY: F_GETOWN takes no argument.
            let owner = unsafe { real::fcntl(fd, libc::F_GETOWN, 0) };
            user::write_from(out.cast(), &owner.to_ne_bytes())
        }
        _ => op(fd, Op::AtMark, 0).and_then(|c| {
            let at = c.values::<AtMark>().at as c_int;
            user::write_from(out.cast(), &at.to_ne_bytes())
        }),
    })
}

pub const FIOASYNC: c_ulong = 0x5452;

/// FIOASYNC off on a file whose kernel flags never had O_ASYNC succeeds in
/// the kernel without a look at the file (ioctl_fioasync: no change): on a
/// udsfs socket whose O_ASYNC the daemon keeps, it is turned off there.
pub fn fioasync_off(fd: c_int) -> Option<Res<()>> {
    (ASYNC_SEEN.load(Ordering::Relaxed) && mount::udsfs_fd(fd)).then(|| set_async(fd, false))
}

/// Whether this process set O_ASYNC on a udsfs socket: until it does,
/// F_GETFL and F_SETFL without O_ASYNC cost nothing extra.
static ASYNC_SEEN: AtomicBool = AtomicBool::new(false);

/// O_ASYNC on or off on udsfs socket `fd` (FIOASYNC, F_SETFL, a converted
/// socket's), kept by the daemon.
pub fn set_async(fd: c_int, on: bool) -> Res<()> {
    if on {
        ASYNC_SEEN.store(true, Ordering::Relaxed);
    }
    op(fd, Op::SetAsync, on as i32).map(|_| ())
}

/// F_GETFL's flags with O_ASYNC as the daemon keeps it.
fn with_async(fd: c_int, fl: c_int) -> c_int {
    let on = op(fd, Op::OobOpts, 0).is_ok_and(|c| c.values::<OobOpts>().fasync);
    if on {
        fl | libc::O_ASYNC
    } else {
        fl
    }
}

/// Records the owner on the file (F_GETOWN reads it back) and tells the
/// daemon, which sends SIGURG there.
pub fn set_owner(fd: c_int, target: c_int) -> Res<()> {
    // SAFETY: F_SETOWN takes an int.
    if unsafe { real::fcntl(fd, libc::F_SETOWN, target as c_ulong) } < 0 {
        return Err(errno());
    }
    op(fd, Op::SetOwner, target).map(|_| ())
}

/// fcntl's owner commands on a udsfs socket, after the C library did them.
fn after_fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> Res<()> {
    let target = match cmd {
        libc::F_SETOWN => arg as c_int,
        F_SETOWN_EX => {
            if arg == 0 {
                return Err(libc::EFAULT);
            }
            // SAFETY: F_SETOWN_EX takes a struct f_owner_ex (the call above
            // already read it).
            let (kind, pid) = unsafe {
                let p = arg as *const c_int;
                (
                    std::ptr::read_unaligned(p),
                    std::ptr::read_unaligned(p.add(1)),
                )
            };
            // F_OWNER_PGRP; a thread (F_OWNER_TID) gets it as its process.
            if kind == 2 {
                -pid
            } else {
                pid
            }
        }
        _ => return Ok(()),
    };
    op(fd, Op::SetOwner, target).map(|_| ())
}

fn fcntl_impl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let Ok(arg) = crate::files::fcntl_arg(fd, cmd, arg) else {
        return -1;
    };
    // SAFETY: the caller's arguments, as fcntl(2) takes them.
    let r = crate::files::fcntl_result(fd, cmd, unsafe { real::fcntl(fd, cmd, arg) });
    if r < 0 {
        return r;
    }
    let seen = ASYNC_SEEN.load(Ordering::Relaxed);
    match cmd {
        libc::F_GETFL if seen && mount::udsfs_fd(fd) => return with_async(fd, r),
        libc::F_SETFL if (seen || arg as c_int & libc::O_ASYNC != 0) && mount::udsfs_fd(fd) => {
            return match set_async(fd, arg as c_int & libc::O_ASYNC != 0) {
                Ok(()) => r,
                Err(e) => {
                    set_errno(e);
                    -1
                }
            };
        }
        _ => {}
    }
    if !matches!(cmd, libc::F_SETOWN | F_SETOWN_EX) || !mount::udsfs_fd(fd) {
        return r;
    }
    match after_fcntl(fd, cmd, arg) {
        Ok(()) => r,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// fcntl is variadic; its one optional argument arrives in the same
/// register as a third fixed argument on the ABIs Linux runs.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    guarded(-1, || fcntl_impl(fd, cmd, arg))
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    guarded(-1, || fcntl_impl(fd, cmd, arg))
}

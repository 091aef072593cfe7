//! The library's entry to O_ASYNC, the SIGIO/SIGURG owner and SIOCATMARK
//! on udsfs sockets (fcntl, fcntl64, and the ioctls `lib.rs` hands on
//! after the kernel's ENOTTY): what each means and what the daemon is told
//! is udsfs_calls::sigio's; here, the program's memory and its own pid
//! namespace (`Here`), and the fast path: until this process sets O_ASYNC
//! on a udsfs socket (`ASYNC_SEEN`), F_GETFL and F_SETFL cost nothing
//! extra.

use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_int, c_ulong, c_void};

use udsfs_calls::sigio::{self, Part};

use crate::errno::{guarded, set_errno, Res};
use crate::{mount, real, user};

/// The program, reached in-process: its memory through user.rs (EFAULT for
/// a bad pointer), its pids as they are (the library is in its namespace).
struct Here;

impl sigio::Program for Here {
    fn read_int(&self, addr: u64) -> Res<i32> {
        user::read(addr as *const c_int)
    }
    fn write_int(&self, addr: u64, v: i32) -> Res<()> {
        user::write_from(addr as *mut u8, &v.to_ne_bytes())
    }
    fn owner_to_front(&self, target: i32) -> Res<i32> {
        Ok(target)
    }
    fn owner_to_program(&self, owner: i32) -> i32 {
        owner
    }
}

/// The socket ioctls about owners, O_ASYNC and the OOB mark on udsfs socket
/// `fd`; None: not one of them.
pub fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> Option<Res<()>> {
    if req as u32 == sigio::FIOASYNC {
        ASYNC_SEEN.store(true, Ordering::Relaxed);
    }
    sigio::ioctl(fd, req as u32, arg as u64, &Here)
}

pub const FIOASYNC: c_ulong = sigio::FIOASYNC as c_ulong;

/// FIOASYNC off on a file whose kernel flags never had O_ASYNC succeeds in
/// the kernel without a look at the file (ioctl_fioasync: no change): on a
/// udsfs socket whose O_ASYNC the daemon keeps, it is turned off there.
pub fn fioasync_off(fd: c_int) -> Option<Res<()>> {
    (ASYNC_SEEN.load(Ordering::Relaxed) && mount::udsfs_fd(fd)).then(|| sigio::set_async(fd, false))
}

/// Whether this process set O_ASYNC on a udsfs socket: until it does,
/// F_GETFL and F_SETFL without O_ASYNC cost nothing extra.
static ASYNC_SEEN: AtomicBool = AtomicBool::new(false);

/// What a kernel socket's conversion carries of O_ASYNC and the owner
/// (read before it goes; `apply` once the udsfs socket holds `fd`).
pub fn carry_of(fd: c_int) -> sigio::Carry {
    sigio::Carry::of(fd)
}

pub fn carry_apply(c: &sigio::Carry, fd: c_int) -> Res<()> {
    if c.fasync {
        ASYNC_SEEN.store(true, Ordering::Relaxed);
    }
    c.apply(fd, &Here)
}

fn fcntl_impl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // Whether `fd` is a udsfs socket: asked at most once, by the first
    // part that needs to know (the file flags' or the daemon's).
    let mut known = None;
    let mut udsfs = || *known.get_or_insert_with(|| mount::udsfs_fd(fd));
    let Ok(arg) = crate::files::fcntl_arg(cmd, arg, &mut udsfs) else {
        return -1;
    };
    // SAFETY: the caller's arguments, as fcntl(2) takes them.
    let r = crate::files::fcntl_result(cmd, unsafe { real::fcntl(fd, cmd, arg) }, &mut udsfs);
    if r >= 0 && matches!(cmd, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
        crate::lane::duped(fd, r);
    }
    if r < 0 || !sigio::FCNTLS.contains(&cmd) {
        return r;
    }
    let seen = ASYNC_SEEN.load(Ordering::Relaxed);
    let on = arg as c_int & libc::O_ASYNC != 0;
    let cheap = match cmd {
        libc::F_GETFL => !seen,
        libc::F_SETFL => !seen && !on,
        _ => false,
    };
    if cheap || !udsfs() {
        return r;
    }
    let res = sigio::fcntl_part(cmd, arg, &Here).and_then(|part| {
        if matches!(part, Part::SetAsync(true)) {
            ASYNC_SEEN.store(true, Ordering::Relaxed);
        }
        sigio::daemon_part(fd, part, r)
    });
    match res {
        Ok(v) => v,
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

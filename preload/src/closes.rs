//! The program's closes of descriptor numbers: close, `__close`, dup2 and
//! dup3 onto a number, close_range, closefrom, fclose, and syscall() of
//! close, dup2, dup3 and close_range. Each moves the descriptor generation
//! (fdgen.rs) before and after the call, frees the lane table's slots of
//! the numbers it closed (lane.rs `closed`), and a laned end's last close
//! finishes its writer at once (lane.rs `close`).

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_uint};

use crate::fdgen::moved;
use crate::real;

/// `call`, a close of descriptor numbers, between two moves.
fn around<R>(call: impl FnOnce() -> R) -> R {
    moved();
    let r = call();
    moved();
    r
}

/// Descriptor numbers `first..=last` are about to be closed by the
/// program: a lane's eventfd among them is the program's business now
/// (never closed again by the library: lane_hold.rs `program_closed`).
/// Before the close, not after: once a number is closed, another thread's
/// new lane may put its eventfd there, which is the library's
/// (adversarial_lanes4.sh evrace: marked after the close, 13 such eventfds
/// were never given back). A close that then fails leaves at most an
/// eventfd the library no longer closes, never closes the program's file.
/// The epoll registrations of sockets at those numbers are told too
/// (lane_ready.rs `closing`: whether each close is its file's last), and a
/// laned call waiting on one of them gets a copy of its file (lane.rs
/// `going`).
fn going(first: c_int, last: c_int) {
    crate::lane::going(first, last);
    crate::lane_hold::program_closed(first, last);
    crate::lane_ready::closing(first, last);
}

/// Descriptor numbers `first..=last` are closed (`going` was told): the
/// lane table's slots of those numbers freed (lane.rs `closed`) and the
/// epoll registrations of their sockets taken out (lane_ready.rs
/// `closed`): a closed laned socket's last holders let go, and its
/// eventfds and region are given back.
fn gone(first: c_int, last: c_int) {
    crate::lane::closed(first, last);
    crate::lane_ready::closed(first, last);
}

/// Whether syscall() number `nr` closes a descriptor number.
pub fn closes(nr: libc::c_long) -> bool {
    matches!(
        nr,
        libc::SYS_close | libc::SYS_dup2 | libc::SYS_dup3 | libc::SYS_close_range
    )
}

/// syscall()'s call `nr` (`closes`) with its first three arguments, made
/// by `call`.
pub fn syscall(
    nr: libc::c_long,
    a: libc::c_long,
    b: libc::c_long,
    c: libc::c_long,
    call: impl FnOnce() -> libc::c_long,
) -> libc::c_long {
    let num = |x: libc::c_long| x.clamp(0, c_int::MAX as libc::c_long) as c_int;
    match nr {
        libc::SYS_close => going(num(a), num(a)),
        libc::SYS_dup2 | libc::SYS_dup3 if a != b => going(num(b), num(b)),
        libc::SYS_close_range if c & CLOSE_RANGE_CLOEXEC == 0 => {
            going(num(a & 0xffff_ffff), num(b & 0xffff_ffff))
        }
        _ => {}
    }
    let r = around(call);
    match nr {
        libc::SYS_close => gone(num(a), num(a)),
        libc::SYS_dup2 | libc::SYS_dup3 if r >= 0 && a != b => gone(num(b), num(b)),
        libc::SYS_close_range if r == 0 && c & CLOSE_RANGE_CLOEXEC == 0 => {
            gone(num(a & 0xffff_ffff), num(b & 0xffff_ffff))
        }
        _ => {}
    }
    r
}

/// close_range's flag that marks the numbers close-on-exec instead of
/// closing them.
const CLOSE_RANGE_CLOEXEC: libc::c_long = 4;

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    going(fd, fd);
    let r = around(|| close_one(fd));
    gone(fd, fd);
    r
}

#[no_mangle]
pub unsafe extern "C" fn __close(fd: c_int) -> c_int {
    going(fd, fd);
    let r = around(|| close_one(fd));
    gone(fd, fd);
    r
}

/// The program's close of `fd`: a laned end's last close finishes its
/// writer at once (`lane::close`: the peer reads EOF when close returns,
/// as on Linux).
fn close_one(fd: c_int) -> c_int {
    if !crate::lane::any() {
        // SAFETY: the program's call.
        return unsafe { real::close(fd) };
    }
    crate::guarded(-1, || {
        crate::lane::close(fd).unwrap_or_else(|| unsafe { real::close(fd) })
    })
}

/// A copy at the lowest free number: a connect/accept end's lane note
/// follows it as at dup2 (`lane::duped`).
#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    // SAFETY: the program's call.
    let r = unsafe { real::dup(old) };
    if r >= 0 {
        crate::lane::duped(old, r);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        going(new, new);
    }
    let r = around(|| unsafe { real::dup2(old, new) });
    if r >= 0 && old != new {
        gone(new, new);
        crate::lane::duped(old, new);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        going(new, new);
    }
    let r = around(|| unsafe { real::dup3(old, new, flags) });
    if r >= 0 {
        gone(new, new);
        crate::lane::duped(old, new);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fclose(f: *mut libc::FILE) -> c_int {
    // The number before the FILE goes (-1 for a bad one: nothing freed).
    let fd = if f.is_null() {
        -1
    } else {
        // SAFETY: the caller's FILE, which fclose is about to close.
        unsafe { libc::fileno(f) }
    };
    if fd >= 0 {
        going(fd, fd);
    }
    let r = around(|| unsafe { real::fclose(f) });
    if fd >= 0 {
        gone(fd, fd);
    }
    r
}

/// The C library's function `name` (NUL-terminated) if it has one (close_range
/// and closefrom came with glibc 2.34), found once.
fn optional(name: &str, slot: &AtomicUsize) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: name is NUL-terminated.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    slot.store(p.max(1), Ordering::Relaxed);
    p.max(1)
}

static CLOSE_RANGE: AtomicUsize = AtomicUsize::new(0);
static CLOSEFROM: AtomicUsize = AtomicUsize::new(0);

/// Finds the optional functions now (the library's constructor).
pub fn init() {
    optional("close_range\0", &CLOSE_RANGE);
    optional("closefrom\0", &CLOSEFROM);
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let num = |x: c_uint| x.min(c_int::MAX as c_uint) as c_int;
    if libc::c_long::from(flags) & CLOSE_RANGE_CLOEXEC == 0 {
        going(num(first), num(last));
    }
    let r = around(|| match optional("close_range\0", &CLOSE_RANGE) {
        1 => {
            // SAFETY: the system call with the caller's arguments.
            let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
            r as c_int
        }
        p => {
            // SAFETY: the C library's close_range has this signature.
            let f: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int =
                unsafe { std::mem::transmute(p) };
            unsafe { f(first, last, flags) }
        }
    });
    if r == 0 && libc::c_long::from(flags) & CLOSE_RANGE_CLOEXEC == 0 {
        gone(num(first), num(last));
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn closefrom(first: c_int) {
    going(first.max(0), c_int::MAX);
    around(|| match optional("closefrom\0", &CLOSEFROM) {
        1 => {
            // SAFETY: close_range of every number from `first` on.
            unsafe { libc::syscall(libc::SYS_close_range, first as c_uint, c_uint::MAX, 0) };
        }
        p => {
            // SAFETY: the C library's closefrom has this signature.
            let f: unsafe extern "C" fn(c_int) = unsafe { std::mem::transmute(p) };
            unsafe { f(first) }
        }
    });
    gone(first.max(0), c_int::MAX);
}

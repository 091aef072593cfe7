//! The library's system calls on sockets, made from its own call site: the
//! page `udsfs_proto::gadget` describes, mapped here at its fixed address.
//! Under `udsfs run` every process of the tree carries the supervisor's
//! filter (src/supervisor/filter.rs), which lets these calls run untrapped
//! and sends every other socket call to the supervisor: a raw system call,
//! a C library entry point this library does not know, a child exec'd
//! without the library.
//!
//! The page is made once per process (the constructor, or the first call
//! before it); fork keeps it, exec makes a new one. When it cannot be made
//! (something else is mapped there), or while another thread is making it,
//! the C library's syscall() is used: trapped under a run, and carried by
//! the supervisor.

use std::sync::atomic::{AtomicU8, Ordering};

use libc::c_long;
use udsfs_proto::gadget::{ADDR, CODE, LEN};

const UNMAPPED: u8 = 0;
const MAPPING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNMAPPED);

type Gadget =
    unsafe extern "C" fn(c_long, c_long, c_long, c_long, c_long, c_long, c_long) -> c_long;

/// Maps the page (once): read-write for the copy, then read-execute.
pub fn init() {
    // The fallback, found now rather than in a handler.
    next_syscall();
    if STATE
        .compare_exchange(UNMAPPED, MAPPING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // SAFETY: a new anonymous mapping at an address nothing else holds
    // (MAP_FIXED_NOREPLACE fails otherwise); the code is copied into it
    // before it becomes executable.
    let ok = unsafe {
        let p = libc::mmap(
            ADDR as *mut libc::c_void,
            LEN as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            false
        } else if p as u64 != ADDR {
            // A kernel before 4.17 takes the flag as a hint.
            libc::munmap(p, LEN as usize);
            false
        } else {
            std::ptr::copy_nonoverlapping(CODE.as_ptr(), p.cast::<u8>(), CODE.len());
            libc::mprotect(p, LEN as usize, libc::PROT_READ | libc::PROT_EXEC) == 0
        }
    };
    STATE.store(if ok { READY } else { FAILED }, Ordering::Release);
}

/// The C library's syscall(), found with dlsym (this library's own
/// `syscall` comes back here); found by `init`, so that no later call
/// (from a signal handler, say) runs dlsym.
static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `NEXT`, found on the first call; None when the C library has none.
fn next_syscall() -> Option<Gadget> {
    let mut p = NEXT.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: a NUL-terminated name.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"syscall".as_ptr()) } as usize;
        if p == 0 {
            return None;
        }
        NEXT.store(p, Ordering::Relaxed);
    }
    // SAFETY: the C library's syscall, a variadic function whose integer
    // arguments travel as fixed ones on x86-64.
    Some(unsafe { std::mem::transmute::<usize, Gadget>(p) })
}

/// A system call with syscall(2)'s result: -1 and errno on failure.
///
/// # Safety
/// The arguments are what system call `nr` takes.
pub unsafe fn call(
    nr: c_long,
    a: c_long,
    b: c_long,
    c: c_long,
    d: c_long,
    e: c_long,
    f: c_long,
) -> c_long {
    if STATE.load(Ordering::Acquire) == UNMAPPED {
        init();
    }
    if STATE.load(Ordering::Acquire) != READY {
        let Some(g) = next_syscall() else {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            return -1;
        };
        // SAFETY: as the caller promised.
        return unsafe { g(nr, a, b, c, d, e, f) };
    }
    // SAFETY: READY: the page holds CODE, a function of this signature.
    let r = unsafe {
        let g: Gadget = std::mem::transmute(ADDR as usize);
        g(nr, a, b, c, d, e, f)
    };
    if (-4095..0).contains(&r) {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = -r as libc::c_int };
        return -1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_through_the_page() {
        init();
        assert_eq!(STATE.load(Ordering::Acquire), READY);
        // SAFETY: getpid takes nothing; close of a bad descriptor fails.
        unsafe {
            assert_eq!(
                call(libc::SYS_getpid, 0, 0, 0, 0, 0, 0),
                libc::getpid() as c_long
            );
            assert_eq!(call(libc::SYS_close, -1, 0, 0, 0, 0, 0), -1);
            assert_eq!(*libc::__errno_location(), libc::EBADF);
        }
    }
}

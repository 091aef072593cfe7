//! The close of a descriptor the lane code made for itself (a timed sleep's
//! epoll instance, a descriptor moved above the program's). Inside the
//! preloaded library the C library's `close` and `syscall` are the
//! library's own entry points, which take every close for the program's:
//! each moved the descriptor generation (preload/src/fdgen.rs: every laned
//! call of the process then looks at its descriptor again, a statx) and
//! swept the lane tables; a timed sleep did that at each of its slices. The
//! library gives its own call site here at start (`close_with`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The closer given (`close_with`); 0: a system call of our own.
static CLOSER: AtomicUsize = AtomicUsize::new(0);

/// Closes go through `close` from now on.
pub fn close_with(close: unsafe fn(i32) -> i32) {
    CLOSER.store(close as usize, Ordering::Release);
}

/// Closes `fd`, a descriptor of the caller's own.
pub(crate) fn close(fd: i32) {
    let f = CLOSER.load(Ordering::Acquire);
    // SAFETY: `fd` is the caller's own; a closer was given as such a
    // function (`close_with`).
    unsafe {
        if f == 0 {
            libc::syscall(libc::SYS_close, fd);
        } else {
            let close: unsafe fn(i32) -> i32 = std::mem::transmute(f);
            close(fd);
        }
    }
}

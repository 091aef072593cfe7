//! errno as the program sees it: read and set, kept across a udsfs call
//! that succeeds after the C library failed it, and EIO for a panic.

use libc::c_int;

/// A result whose error is an errno.
pub type Res<T> = Result<T, c_int>;

pub fn errno() -> c_int {
    // SAFETY: the thread's errno location is always valid.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// The last call's failure as an Err.
pub fn last<T>() -> Res<T> {
    Err(errno())
}

thread_local! {
    /// errno when the program's call came in: a call that succeeds leaves it
    /// so (programs check errno after a success), even when the udsfs path
    /// first met ENOTSOCK from the C library.
    static ERRNO_AT_ENTRY: std::cell::Cell<c_int> = const { std::cell::Cell::new(0) };
    /// Calls of this library in progress on this thread (it calls some of
    /// its own functions, fcntl for one): only the outermost saves errno.
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What the calls in progress on this thread (a signal handler's to be)
/// left: (depth, errno at the outermost's entry). The handler's calls
/// start from none, as after a jump out of it.
pub fn handler_enters() -> (u32, c_int) {
    (
        DEPTH.with(|d| d.replace(0)),
        ERRNO_AT_ENTRY.with(|e| e.get()),
    )
}

/// The handler returned: the interrupted calls' state back.
pub fn handler_left((depth, at_entry): (u32, c_int)) {
    DEPTH.with(|d| d.set(depth));
    ERRNO_AT_ENTRY.with(|e| e.set(at_entry));
}

/// After a successful udsfs call: errno as the program left it.
pub fn restore_errno() {
    set_errno(ERRNO_AT_ENTRY.with(|e| e.get()));
}

/// Runs `f`; a panic never crosses into the program: it becomes EIO.
pub fn guarded<R>(fail: R, f: impl FnOnce() -> R) -> R {
    if DEPTH.with(|d| d.replace(d.get() + 1)) == 0 {
        ERRNO_AT_ENTRY.with(|e| e.set(errno()));
    }
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    match res {
        Ok(r) => r,
        Err(_) => {
            crate::log::say("internal error; the call fails with EIO");
            set_errno(libc::EIO);
            fail
        }
    }
}

/// A call's result as the C library returns it: 0, or -1 and errno.
pub fn int_ret(r: Res<()>) -> c_int {
    match r {
        Ok(()) => {
            restore_errno();
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// A byte count as the C library returns it: n, or -1 and errno.
pub fn len_ret(r: Res<usize>) -> libc::ssize_t {
    match r {
        Ok(n) => {
            restore_errno();
            n as libc::ssize_t
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

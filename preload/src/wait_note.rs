//! What a socket call knew of its socket before it waited, for the restart
//! rule after a signal ended the wait (restart.rs `retry`): a handler may
//! close the call's number, or put another file at it (dup2), while the
//! call waits. Linux's call holds its file, and restarts on SA_RESTART
//! when that socket has no timeout that way (sock_intr_errno); the restart
//! is then made on the number as it is now (EBADF, or the new file's). Asked
//! after the EINTR, the number no longer tells whether it was a udsfs
//! socket, nor its timeout: the waiting call (lane.rs's blocking read and
//! write, which hold the end's timeouts) notes them here before returning
//! EINTR. Also the count of signal handlers run on the thread (restart.rs's
//! trampoline counts them): a lane's sleep in slices (ring.rs `SLICE`) that
//! a handler ran beside, outside its system call, is interrupted as
//! Linux's would be; and the futex word a laned call sleeps on, which the
//! trampoline bumps (`handler_ran`). Async-signal-safe: const thread-locals
//! without destructors.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::c_int;

thread_local! {
    /// (descriptor, whether it restarts as far as the socket goes); -1: none.
    static NOTE: Cell<(c_int, bool)> = const { Cell::new((-1, false)) };
}

/// A wait on udsfs socket `fd` ended by a signal: `restarts` when the socket
/// has no timeout that way.
pub fn interrupted(fd: c_int, restarts: bool) {
    NOTE.with(|n| n.set((fd, restarts)));
}

/// What was noted of `fd` since the last `take`, taken (any note is taken).
pub fn take(fd: c_int) -> Option<bool> {
    let (at, restarts) = NOTE.with(|n| n.replace((-1, false)));
    (at == fd && at >= 0).then_some(restarts)
}

/// Forgets any note: an outermost call starts with none.
pub fn clear() {
    NOTE.with(|n| n.set((-1, false)));
}

thread_local! {
    static RAN: Cell<u32> = const { Cell::new(0) };
}

thread_local! {
    /// The futex word this thread's laned call sleeps on (0: none).
    static SLEEP_WORD: Cell<usize> = const { Cell::new(0) };
}

/// A handler ran on this thread (the trampoline). A laned call asleep on
/// a futex word (ring.rs `Sleeper::word`) gets the word bumped: after a
/// handler with SA_RESTART the kernel restarts the futex sleep, which then
/// ends at once (the word moved), and the call looks at `handlers_ran` as
/// Linux's would have ended its wait.
pub fn handler_ran() {
    RAN.with(|r| r.set(r.get().wrapping_add(1)));
    let w = SLEEP_WORD.with(Cell::get);
    if w != 0 {
        // SAFETY: noted by `sleeping_on` from a live reference, and
        // unnoted before the call lets go of the region that holds it.
        unsafe { &*(w as *const AtomicU32) }.fetch_add(udsfs_proto::lane::BUMP, Ordering::Relaxed);
    }
}

/// This thread's laned call sleeps on `word` until `slept` with what this
/// returned (a handler's own laned call may sleep meanwhile).
pub fn sleeping_on(word: &AtomicU32) -> usize {
    SLEEP_WORD.with(|w| w.replace(word as *const AtomicU32 as usize))
}

/// The futex word noted now (0: none).
pub fn sleep_word() -> usize {
    SLEEP_WORD.with(Cell::get)
}

/// The sleep `sleeping_on` noted is over.
pub fn slept(before: usize) {
    SLEEP_WORD.with(|w| w.set(before));
}

/// Handlers run on this thread so far.
pub fn handlers_ran() -> u32 {
    RAN.with(Cell::get)
}

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
//! Linux's would be. Async-signal-safe: const thread-locals without
//! destructors.

use std::cell::Cell;

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

/// A handler ran on this thread (the trampoline).
pub fn handler_ran() {
    RAN.with(|r| r.set(r.get().wrapping_add(1)));
}

/// Handlers run on this thread so far.
pub fn handlers_ran() -> u32 {
    RAN.with(Cell::get)
}

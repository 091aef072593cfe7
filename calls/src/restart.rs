//! The restart rule of a socket call a signal ended (sock_intr_errno): a
//! wait on a socket without a timeout that way is restarted when the
//! handler allows it (-ERESTARTSYS: SA_RESTART), one with SO_RCVTIMEO or
//! SO_SNDTIMEO set is EINTR even under SA_RESTART. The fronts say how the
//! handler is seen (the library's trampoline, the supervisor's
//! -ERESTARTSYS answer) and ask here whether the socket allows it.

use udsfs_proto::ioctl::{Op, Timeo};

use crate::client;

/// The direction of a wait: a receive or accept (SO_RCVTIMEO).
pub const RECV: i32 = 0;
/// A send or connect (SO_SNDTIMEO).
pub const SEND: i32 = 1;

/// Whether a wait on udsfs socket `fd` in direction `dir` (`RECV`, `SEND`)
/// that a signal ended may be restarted: the socket has no timeout that
/// way (a zero one, set by a negative tv_sec, is one: the call never
/// waits). An error in asking counts as a timeout: the EINTR stays.
pub fn restarts(fd: i32, dir: i32) -> bool {
    match client::op(fd, Op::GetTimeo, dir).map(|c| c.values::<Timeo>()) {
        Ok(t) => t.sec == 0 && t.usec == 0 && !t.zero,
        Err(_) => false,
    }
}

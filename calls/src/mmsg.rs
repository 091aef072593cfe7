//! sendmmsg and recvmmsg around the fronts' sendmsg and recvmsg, as
//! __sys_sendmmsg and do_recvmmsg drive ___sys_sendmsg and ___sys_recvmsg:
//! at most UIO_MAXIOV messages, each entry's msg_len written after its
//! message, the first error the call's only when nothing went before it.

use std::time::Duration;

use udsfs_proto::Res;
use udsfs_proto::ioctl::Op;

use crate::client;

/// UIO_MAXIOV: at most this many messages in one call (and iovecs in one
/// message).
pub const UIO_MAXIOV: usize = 1024;

/// sendmmsg: `entry(i)` sends message `i` and writes its msg_len (an error
/// either way ends the call). The messages sent, or the first one's error.
pub fn send(vlen: usize, mut entry: impl FnMut(usize) -> Res<()>) -> Res<usize> {
    let mut done = 0;
    for i in 0..vlen.min(UIO_MAXIOV) {
        match entry(i) {
            Ok(()) => done += 1,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// recvmmsg's timeout, as the program gave it: EINVAL out of range.
pub fn timeout(sec: i64, nsec: i64) -> Res<Duration> {
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Duration::new(sec as u64, nsec as u32))
}

/// What a recvmmsg did.
pub struct Received {
    /// Messages received.
    pub done: usize,
    /// With a timeout: what is left of it, for the program's timespec (the
    /// front writes it back once, EFAULT when it cannot, as __sys_recvmmsg).
    pub left: Option<Duration>,
}

/// What recvmmsg asks of its front besides the messages.
pub trait Front {
    /// CLOCK_MONOTONIC.
    fn now(&self) -> Duration;
    /// Error `e` of a message is a signal that Linux restarts: it keeps
    /// ERESTARTSYS itself then, which its next call returns as errno 512.
    fn restarting(&self, e: i32) -> bool;
    /// A log line (rate-limited by the front).
    fn say(&self, what: &str);
}

/// recvmmsg on socket `fd` as do_recvmmsg: `entry(i, flags)` receives
/// message `i` (as recvmsg: a blocking one waits as long as it takes) and
/// writes its msg_len. MSG_WAITFORONE turns on MSG_DONTWAIT after the first;
/// the timeout is looked at only after each message (recvmmsg(2), BUGS). An
/// error after messages is left pending on the socket for the next call or
/// SO_ERROR, unless it only says nothing more was queued or is a restarted
/// signal.
pub fn recv(
    f: &impl Front,
    fd: i32,
    vlen: usize,
    flags: i32,
    timeout: Option<Duration>,
    mut entry: impl FnMut(usize, i32) -> Res<()>,
) -> Res<Received> {
    let now = || f.now();
    let end = timeout.map(|t| now() + t);
    let mut fl = flags & !libc::MSG_WAITFORONE;
    let mut done = 0;
    let mut left = None;
    for i in 0..vlen.min(UIO_MAXIOV) {
        if let Err(e) = entry(i, fl) {
            if done == 0 {
                return Err(e);
            }
            if e != libc::EAGAIN
                && !f.restarting(e)
                && let Err(err) = client::op(fd, Op::SetError, e)
            {
                f.say(&format!(
                    "recvmmsg: error {e} after datagrams not kept: errno {err}"
                ));
            }
            break;
        }
        done += 1;
        if flags & libc::MSG_WAITFORONE != 0 {
            fl |= libc::MSG_DONTWAIT;
        }
        if let Some(end) = end {
            let l = end.saturating_sub(now());
            left = Some(l);
            if l.is_zero() {
                break;
            }
        }
    }
    Ok(Received { done, left })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Clock<'a>(&'a Cell<u64>);

    impl Front for Clock<'_> {
        fn now(&self) -> Duration {
            Duration::from_secs(self.0.get())
        }
        fn restarting(&self, _: i32) -> bool {
            false
        }
        fn say(&self, _: &str) {}
    }

    #[test]
    fn the_timeout_is_looked_at_after_each_message_and_an_error_after_some_is_kept() {
        // A clock that moves 1 s a message; a timeout of 2.5 s: three
        // messages (the third starts before it ran out), 0 s left.
        let t = Cell::new(0u64);
        let c = Clock(&t);
        let entry = |_, _| {
            t.set(t.get() + 1);
            Ok(())
        };
        let r = recv(&c, -1, 8, 0, Some(Duration::from_millis(2500)), entry);
        let r = r.unwrap();
        println!(
            "8 asked, 2.5 s, 1 s each: {} received, {:?} left",
            r.done, r.left
        );
        assert_eq!((r.done, r.left), (3, Some(Duration::ZERO)));
        // The first message's error is the call's; a later one ends it.
        let failing = |i, _| if i == 0 { Err(libc::EBADMSG) } else { Ok(()) };
        let r = recv(&c, -1, 4, 0, None, failing);
        assert_eq!(r.err(), Some(libc::EBADMSG));
        let second = |i, fl: i32| match i {
            0 => Ok(()),
            _ if fl & libc::MSG_DONTWAIT != 0 => Err(libc::EAGAIN),
            _ => panic!("MSG_WAITFORONE did not turn on MSG_DONTWAIT"),
        };
        let r = recv(&c, -1, 4, libc::MSG_WAITFORONE, None, second);
        assert_eq!(r.map(|r| r.done), Ok(1));
        assert_eq!(timeout(0, 1_000_000_000).err(), Some(libc::EINVAL));
        assert_eq!(timeout(-1, 0).err(), Some(libc::EINVAL));
    }
}

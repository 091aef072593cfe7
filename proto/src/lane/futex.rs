//! Shared futexes (no FUTEX_PRIVATE_FLAG: the words live in a memfd mapped by
//! several processes) and the eventfd calls of the lane, by system call.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use crate::Errno;

fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A relative timeout as the kernel takes it; None for none.
fn timespec(timeout: Option<Duration>) -> Option<libc::timespec> {
    timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    })
}

/// `ts` as a system call's argument: null for no timeout.
fn as_ptr(ts: &Option<libc::timespec>) -> *const libc::timespec {
    ts.as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec)
}

/// futex(2) operation `op` on `word` with `val` and a relative timeout
/// (a null pointer: none).
fn futex(word: &AtomicU32, op: i32, val: u32, ts: *const libc::timespec) -> Result<(), Errno> {
    // SAFETY: `word` is a live 4-byte aligned word; the kernel only reads it
    // and the timespec (FUTEX_WAKE reads neither).
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, ts, 0usize, 0u32) };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

/// Sleeps while `word` holds `expected`, at most `timeout`. Ok on a wake-up
/// (or a spurious one); EAGAIN when the word no longer held `expected`,
/// ETIMEDOUT, EINTR on a signal.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> Result<(), Errno> {
    let ts = timespec(timeout);
    futex(word, libc::FUTEX_WAIT, expected, as_ptr(&ts))
}

/// Wakes every sleeper on `word`.
pub fn wake(word: &AtomicU32) {
    let _ = futex(word, libc::FUTEX_WAKE, i32::MAX as u32, std::ptr::null());
}

/// `wait` on a word of this process only (FUTEX_PRIVATE_FLAG), without a
/// timeout: a lock's.
pub fn wait_private(word: &AtomicU32, expected: u32) -> Result<(), Errno> {
    let op = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;
    futex(word, op, expected, std::ptr::null())
}

/// Wakes one sleeper of `wait_private` on `word`.
pub fn wake_one_private(word: &AtomicU32) {
    let op = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;
    let _ = futex(word, op, 1, std::ptr::null());
}

/// Adds 1 to the eventfd `fd` (a peer's readiness). Errors are ignored: a
/// full counter is readable anyway, and a closed fd is the owner's business.
pub fn eventfd_signal(fd: i32) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::syscall(libc::SYS_write, fd, &one as *const u64, 8usize) };
}

/// Empties the non-blocking eventfd `fd`.
pub fn eventfd_drain(fd: i32) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe { libc::syscall(libc::SYS_read, fd, &mut v as *mut u64, 8usize) };
}

/// Sleeps in ppoll until `fd` or `hup` is readable, at most `timeout`. Ok
/// when one is (or on a spurious return); ETIMEDOUT, EINTR. `hup` is the
/// end's daemon-only eventfd (written at the way down, never drained; -1:
/// none, which ppoll skips). With a timeout (the socket's SO_RCVTIMEO or
/// SO_SNDTIMEO) the sleep is an epoll_wait (`epoll_in`).
pub fn poll_in(fd: i32, hup: i32, timeout: Option<Duration>) -> Result<(), Errno> {
    if let Some(r) = timeout.and_then(|t| epoll_in(fd, hup, t)) {
        return r;
    }
    ppoll_in(fd, hup, timeout)
}

/// `poll_in` for at most `slice`, in ppoll whatever the length: a slice
/// of a longer sleep, not the call's timeout (ETIMEDOUT at its end).
pub fn poll_slice(fd: i32, hup: i32, slice: Duration) -> Result<(), Errno> {
    ppoll_in(fd, hup, Some(slice))
}

fn ppoll_in(fd: i32, hup: i32, timeout: Option<Duration>) -> Result<(), Errno> {
    let mut p = [fd, hup].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = timespec(timeout);
    let tsp = as_ptr(&ts);
    // SAFETY: two live pollfds, a live timespec or null, no signal mask.
    let r = unsafe { libc::syscall(libc::SYS_ppoll, p.as_mut_ptr(), 2usize, tsp, 0usize, 8usize) };
    match r {
        r if r < 0 => Err(errno()),
        0 => Err(libc::ETIMEDOUT),
        _ => Ok(()),
    }
}

/// `poll_in` with a timeout, in epoll_wait: Linux ends a socket call that
/// has a timeout with EINTR when its process is stopped and continued, no
/// handler run (signal(7); sock_intr_errno), and epoll_wait does the same,
/// where ppoll and futex are restarted by the kernel. (signals.sh's "recv
/// with SO_RCVTIMEO stopped and continued" gave the bytes sent later on a
/// lane, EINTR on Linux.) None when no epoll descriptor can be had (the
/// program's limit): then ppoll.
fn epoll_in(fd: i32, hup: i32, timeout: Duration) -> Option<Result<(), Errno>> {
    // SAFETY: a new descriptor of our own, closed below.
    let ep = unsafe { libc::syscall(libc::SYS_epoll_create1, libc::EPOLL_CLOEXEC) } as i32;
    if ep < 0 {
        return None;
    }
    for f in [fd, hup].into_iter().filter(|&f| f >= 0) {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: a live epoll_event.
        unsafe { libc::syscall(libc::SYS_epoll_ctl, ep, libc::EPOLL_CTL_ADD, f, &mut ev) };
    }
    // Whole milliseconds, rounded up (a timeout never ends early).
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    let mut out = [libc::epoll_event { events: 0, u64: 0 }; 2];
    // SAFETY: room for 2 events; no signal mask.
    let r = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            ep,
            out.as_mut_ptr(),
            2i32,
            ms,
            0usize,
            8usize,
        )
    };
    let r = match r {
        r if r < 0 => Err(errno()),
        0 => Err(libc::ETIMEDOUT),
        _ => Ok(()),
    };
    super::own_fd::close(ep);
    Some(r)
}

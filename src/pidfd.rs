//! pidfds: opening one, signalling through one, and whether the process it
//! refers to still lives: the engine's pins (src/engine/pins.rs) and the
//! supervisor's adoption check (src/supervisor/adopt.rs) both rely on a pid
//! naming the same process while its pidfd says so.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;

/// PIDFD_THREAD (Linux 6.9): a pidfd of one thread, not its process.
pub const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// A pidfd of process `pid` (with `PIDFD_THREAD`, of thread `pid`).
pub fn open(pid: libc::pid_t, flags: libc::c_uint) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open of a number; no memory involved.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: a new descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `sig` to the process of `fd`, without a siginfo (0: only whether it may
/// be signalled).
pub fn send_signal(fd: &impl AsRawFd, sig: libc::c_int) -> Result<(), Errno> {
    // SAFETY: a signal through a pidfd; no memory is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Whether the process of `fd` has not been reaped yet, so that its number
/// still names it. EPERM (a process we may not signal) is alive too.
pub fn alive(fd: &impl AsRawFd) -> bool {
    matches!(send_signal(fd, 0), Ok(()) | Err(Errno::EPERM))
}

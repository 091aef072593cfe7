//! Whether the process a pidfd refers to still lives: the engine's pins
//! (src/engine/pins.rs) and the supervisor's adoption check
//! (src/supervisor/adopt.rs) both rely on a pid naming the same process
//! while its pidfd says so.

use std::os::fd::AsRawFd;

use nix::errno::Errno;

/// Whether the process of `fd` has not been reaped yet, so that its number
/// still names it. EPERM (a process we may not signal) is alive too.
pub fn alive(fd: &impl AsRawFd) -> bool {
    // SAFETY: signal 0 only checks; no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || Errno::last() == Errno::EPERM
}

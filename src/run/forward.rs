//! The signals `udsfs run` passes on to CMD, so that signalling it is
//! signalling CMD, as with CMD alone: a graceful stop (nginx's and php-fpm's
//! SIGQUIT), a reload (SIGHUP, SIGUSR2), a log reopen (SIGUSR1), a service
//! manager's stop (SIGTERM). Passed on only when a process sent it: one the
//! terminal sends (^C, ^\, a window change, a hang-up: si_code SI_KERNEL)
//! reached CMD's process group, ours, already.

use std::os::fd::{FromRawFd, OwnedFd};

use nix::sys::signal::{SigSet, Signal};

pub(super) const FORWARDED: [Signal; 7] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

pub(super) fn set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in FORWARDED {
        set.add(sig);
    }
    set
}

/// Whether a signal with this si_code is one to pass on (not the terminal's).
pub(super) fn sent_by_a_process(si_code: i32) -> bool {
    si_code != libc::SI_KERNEL
}

/// On a thread of `udsfs run` proper, with `set()` blocked in every thread:
/// passes each signal sent to it on to CMD (`pid`, our child), by a pidfd
/// taken now, so that none reaches another process that took CMD's number
/// once CMD was reaped.
pub(super) fn to_child(pid: libc::pid_t) {
    // SAFETY: pidfd_open of our own unreaped child; the descriptor is ours.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as i32) });
    let set = set();
    let _ = std::thread::Builder::new()
        .name("udsfs-run-signals".into())
        .spawn(move || {
            loop {
                // SAFETY: waits for one of `set`, filling a local siginfo.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let sig = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
                if sig < 0 || !sent_by_a_process(info.si_code) {
                    continue;
                }
                match &pidfd {
                    // SAFETY: a signal to CMD through its pidfd, no siginfo.
                    Some(fd) => unsafe {
                        libc::syscall(
                            libc::SYS_pidfd_send_signal,
                            std::os::fd::AsRawFd::as_raw_fd(fd),
                            sig,
                            std::ptr::null::<libc::siginfo_t>(),
                            0,
                        );
                    },
                    // SAFETY: kill of our child (no pidfd: a kernel before 5.3).
                    None => unsafe {
                        libc::kill(pid, sig);
                    },
                }
            }
        });
}

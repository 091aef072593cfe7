//! The signals `udsfs run` passes on to CMD, so that signalling it is
//! signalling CMD, as with CMD alone: a graceful stop (nginx's and php-fpm's
//! SIGQUIT), a reload (SIGHUP, SIGUSR2), a log reopen (SIGUSR1), a service
//! manager's stop (SIGTERM). Passed on only when a process sent it: one the
//! terminal sends (^C, ^\, a window change, a hang-up: si_code SI_KERNEL)
//! reached CMD's process group, ours, already.

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
/// passes each signal the front (`front`, what the caller started) passes on
/// to CMD (`pid`, our child), by a pidfd taken now, so that none reaches
/// another process that took CMD's number once CMD was reaped. With a front,
/// one another process sent to proper itself is not passed on: it was sent
/// to the process group the three share (`kill -- -PGID`, a service
/// manager's stop of every process), which reached CMD already, and the
/// front passes on its own copy; so CMD gets such a signal twice, where
/// alone it would get it once (a targeted kill of the front, once).
pub(super) fn to_child(pid: libc::pid_t, front: Option<libc::pid_t>) {
    // (Our own child, unreaped: its number is its own now.)
    let pidfd = crate::pidfd::open(pid, 0).ok();
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
                // SAFETY: si_pid of a signal a process sent (SI_USER, SI_QUEUE, SI_TKILL).
                if front.is_some_and(|f| unsafe { info.si_pid() } != f) {
                    continue;
                }
                match &pidfd {
                    Some(fd) => {
                        let _ = crate::pidfd::send_signal(fd, sig);
                    }
                    // SAFETY: kill of our child (no pidfd: a kernel before 5.3).
                    None => unsafe {
                        libc::kill(pid, sig);
                    },
                }
            }
        });
}

//! The target's epoll sets that held a kernel socket's file hold the udsfs
//! socket put at its number (udsfs_calls::convert, as the library's
//! preload/src/epolls.rs does in-process): the registrations are read from
//! /proc/TID/fdinfo before the install drops the kernel socket's file from
//! them, and made again after it. epoll_ctl keys a registration by file and
//! descriptor number, so it is made where the new socket has the target's
//! number: in a thread with a descriptor table of its own (a copy of the
//! supervisor's, unshare(CLONE_FILES)), the new socket dup'd to that number
//! there; the registration outlives that table (it ends only with the file,
//! or the target's EPOLL_CTL_DEL of the number).

use std::os::fd::{AsRawFd, OwnedFd};

use super::call::say;
use super::target::Task;
use udsfs_calls::convert::{self, Held};

/// The registrations of kernel socket `k`, the target's `fd`, in the epoll
/// sets of thread `tid`.
pub fn held(tid: i32, k: &OwnedFd, fd: i32) -> Vec<Held> {
    // SAFETY: zeroed storage fstat fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a local stat.
    if unsafe { libc::fstat(k.as_raw_fd(), &mut st) } < 0 {
        return Vec::new();
    }
    convert::held(&format!("/proc/{tid}"), fd, st.st_ino)
}

/// Adds `new`, now the target's `fd`, to each epoll set of `task` that
/// held the kernel socket it replaced.
pub fn restore(task: &Task, fd: i32, new: &OwnedFd, old: &OwnedFd, held: &[Held]) {
    if held.is_empty() {
        return;
    }
    let sets: Vec<(OwnedFd, &Held)> = held
        .iter()
        .filter_map(|h| task.get_fd(h.epfd).ok().map(|ep| (ep, h)))
        .collect();
    let failed = std::thread::scope(|s| {
        s.spawn(|| add_at(fd, new.as_raw_fd(), old.as_raw_fd(), &sets))
            .join()
            .unwrap_or_else(|_| Err("the thread panicked".into()))
    });
    if let Err(e) = failed {
        say(&format!(
            "fd {fd} of thread {}: not added back to its epoll sets after its conversion: {e}",
            task.tid
        ));
    }
}

/// In a descriptor table of this thread's own: the kernel socket `old`'s
/// places taken out of each set, then `new` at number `fd` added with
/// their events and data.
fn add_at(fd: i32, new: i32, old: i32, sets: &[(OwnedFd, &Held)]) -> Result<(), String> {
    let last = || std::io::Error::last_os_error().to_string();
    // SAFETY: this thread leaves the shared table; the process's is untouched.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return Err(format!("unshare(CLONE_FILES): {}", last()));
    }
    // A set's copy at number `fd` moves above it first.
    let mut eps = Vec::new();
    for (ep, h) in sets {
        let mut n = ep.as_raw_fd();
        if n == fd {
            // SAFETY: a duplicate in this thread's table.
            n = unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, fd + 1) };
            if n < 0 {
                return Err(format!("F_DUPFD: {}", last()));
            }
        }
        eps.push((n, *h));
    }
    // The kernel socket's places go first: a set drops them only when its
    // file's last reference goes, and copies of it outlive the call (this
    // thread's copy of the process's table goes after join() returns), so
    // the program's next epoll_wait could still report the kernel socket's
    // OUT|HUP (conformance front_epoll_before_connect, supervisor_routed,
    // once under CI's load).
    // SAFETY: replaces number `fd` in this thread's table only.
    let at_fd = old == fd || unsafe { libc::dup3(old, fd, libc::O_CLOEXEC) } >= 0;
    if at_fd {
        for (ep, _) in &eps {
            // SAFETY: a DEL takes no event.
            unsafe { libc::epoll_ctl(*ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
        }
    }
    // SAFETY: replaces number `fd` in this thread's table only.
    if new != fd && unsafe { libc::dup3(new, fd, libc::O_CLOEXEC) } < 0 {
        return Err(format!("dup3: {}", last()));
    }
    let mut failed = Vec::new();
    for (ep, h) in eps {
        let mut ev = libc::epoll_event {
            events: h.events,
            u64: h.data,
        };
        // SAFETY: ev is a local epoll_event.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            failed.push(format!("epoll set {}: {}", h.epfd, last()));
        }
    }
    // The table (the copies in it) goes with the thread.
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

//! The epoll sets that hold a descriptor, carried over its conversion.
//!
//! convert.rs puts a udsfs file in a kernel socket's place with dup3, which
//! drops the kernel socket's file from every epoll set that held it; before
//! the dup3 the registrations are read (udsfs_calls::convert::held, from
//! /proc/self), after it the new file is added to each with the same
//! events, flags and data. No table is kept: fork, dup and close need
//! nothing. The look costs a readlink per descriptor, so it is made only in
//! a process that made an epoll set (epoll_create and epoll_create1 are
//! seen here; fork keeps the mark; an epoll set inherited across exec
//! without a new one is not looked for).

use std::sync::atomic::{AtomicBool, Ordering};

use libc::c_int;

pub use udsfs_calls::convert::Held;

/// Whether this process made an epoll set.
static EPOLL_SEEN: AtomicBool = AtomicBool::new(false);

/// An epoll set was made: conversions look for registrations from now on.
pub fn seen() {
    EPOLL_SEEN.store(true, Ordering::Relaxed);
}

/// The registrations of descriptor `fd` (inode `ino`) in this process's
/// epoll sets (udsfs_calls::convert::held).
pub fn held(fd: c_int, ino: u64) -> Vec<Held> {
    if !EPOLL_SEEN.load(Ordering::Relaxed) {
        return Vec::new();
    }
    udsfs_calls::convert::held("/proc/self", fd, ino)
}

/// Adds descriptor `fd` (now another file) to each set that held it.
pub fn restore(fd: c_int, held: &[Held]) {
    for h in held {
        let mut ev = libc::epoll_event {
            events: h.events,
            u64: h.data,
        };
        // SAFETY: ev is a local epoll_event.
        let r = unsafe { libc::epoll_ctl(h.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            crate::log::say(&format!(
                "fd {fd}: could not add it back to epoll set {} after its conversion: {}",
                h.epfd,
                std::io::Error::last_os_error()
            ));
        }
    }
}

//! The descriptor generation: a count that moves on at every close of a
//! descriptor number the program makes (closes.rs: close, `__close`, dup2 and dup3
//! onto a number, close_range, closefrom, fclose, and syscall() of close,
//! dup2, dup3 and close_range), before and after the call. The lane table
//! (lane.rs `find`) and the epoll registrations of laned descriptors
//! (lane_ready.rs) check that a number still names their socket (a statx:
//! numbers are reused) only when the generation moved since their last
//! check, instead of at every read, write and epoll_wait (issue 30: a
//! statx per registration per epoll_wait, and one per read and write, was
//! a third of redis-server's time on a `--lanes` mount).
//!
//! Why before and after: a check that saw the old generation and then its
//! file looked before the close returned may have seen the socket; the
//! move after the close makes every later check look again. A check that
//! began before the close and is still going is the program's own race
//! (a read of a number another thread closes), as on Linux.
//!
//! Not seen (docs/LANE.md "Descriptor checks"): a close made by a raw
//! system call instruction, io_uring's close, a process sharing the
//! descriptor table without sharing memory (clone(CLONE_FILES) without
//! CLONE_VM), and the C library's closes inside its own functions
//! (freopen, daemon) of numbers that are laned sockets.

use std::sync::atomic::{AtomicU64, Ordering};

static GEN: AtomicU64 = AtomicU64::new(1);

/// The generation now (0 is never one: a check stored as 0 is none).
pub fn now() -> u64 {
    GEN.load(Ordering::SeqCst)
}

/// A close of a descriptor number (closes.rs) is under way or done.
pub fn moved() {
    GEN.fetch_add(1, Ordering::SeqCst);
}

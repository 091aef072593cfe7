//! The trapped call this supervisor thread is carrying out, so that what
//! it reads of its thread by thread id (memory, /proc credentials) is
//! taken as that thread's, and what it writes reaches no other.
//!
//! A thread id outlives the trapped call: another thread's exec kills the
//! trapped thread and takes its id over (de_thread gives the exec'ing
//! thread the leader's id), and a dead thread's id is given out again. The
//! supervisor reaches the target's memory by thread id alone
//! (process_vm_readv/writev; /proc/TID/mem would write through read-only
//! pages, where Linux's copy_to_user gives EFAULT), so a result written
//! after a daemon round trip could land in the image that replaced the
//! trapped one: a set-user-ID one in a root run, at addresses and with
//! bytes its caller chose (integration/adversarial_exec_race.sh). The
//! listener's SECCOMP_IOCTL_NOTIF_ID_VALID says the call is still pending,
//! and while it is the trapped thread lives and holds its id and its mm:
//! a read is trusted after such a check, a write made right after one.
//! (A write can still go astray if this thread stalls between its check
//! and the write for longer than the other thread's whole exec.)

use std::cell::Cell;
use std::os::fd::RawFd;

/// The call being carried out: its listener, notification id and thread
/// id, and whether a read is checked after it (`Bound::call`) or counts
/// on a later check (`Bound::triage`).
type Call = (RawFd, u64, i32, bool);

thread_local! {
    static CALL: Cell<Option<Call>> = const { Cell::new(None) };
}

/// The call of notification `id` (thread `tid`, `listener`'s) is this
/// thread's until dropped.
pub struct Bound {
    before: Option<Call>,
}

impl Bound {
    /// For emulate.rs `perform`: every look checked.
    pub fn call(listener: RawFd, id: u64, tid: i32) -> Bound {
        Bound::new((listener, id, tid, true))
    }

    /// For emulate.rs `triage`, whose reads decide between the kernel's
    /// call (harmless for a call that is gone) and an act that a check
    /// comes before: `perform`'s own, a write's, or a credentials read's.
    /// Its reads are not checked, so a call on a kernel file costs no
    /// ioctl more.
    pub fn triage(listener: RawFd, id: u64, tid: i32) -> Bound {
        Bound::new((listener, id, tid, false))
    }

    fn new(call: Call) -> Bound {
        Bound {
            before: CALL.with(|c| c.replace(Some(call))),
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        CALL.with(|c| c.set(self.before));
    }
}

/// Does thread id `tid` still name the thread of the call this thread
/// carries out? Yes for a thread id of no bound call (the supervisor's
/// own tests, an adopted process's start).
pub fn still(tid: i32) -> bool {
    match CALL.with(Cell::get) {
        Some((listener, id, bound, _)) if bound == tid => super::listener::id_valid(listener, id),
        _ => true,
    }
}

/// `still`, as the errno of a memory access whose call is gone (its reply
/// is never seen): before a write, before acting on credentials read.
pub fn check(tid: i32) -> Result<(), i32> {
    if still(tid) { Ok(()) } else { Err(libc::EINTR) }
}

/// `check` after a read of the target's memory, where reads are checked.
pub fn check_read(tid: i32) -> Result<(), i32> {
    match CALL.with(Cell::get) {
        Some((_, _, _, false)) => Ok(()),
        _ => check(tid),
    }
}

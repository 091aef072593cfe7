//! SA_RESTART for udsfs sockets. A signal to a caller parked in the daemon
//! comes as FUSE_INTERRUPT, which the daemon can only answer with EINTR
//! (vendor/fuser/UDSFS-PATCH.md: this kernel refuses ERESTARTSYS in a
//! reply), where Linux's sockets restart the call when every handler that
//! ran has SA_RESTART and the socket has no timeout for that direction
//! (sock_intr_errno). So the library installs the program's handlers behind
//! a trampoline that counts, per thread, the handlers that ran and those
//! without SA_RESTART, and `retry` calls a socket call again after an EINTR
//! exactly when Linux would have restarted it.
//!
//! The trampoline also turns a fault in the library's copy of the
//! program's memory into EFAULT (user.rs): the library holds SIGSEGV and
//! SIGBUS from its constructor on, whatever the program sets, and keeps the
//! program's disposition in the table: a fault of the program's own runs its
//! handler, or its default (death by the signal), as without the library.
//!
//! Everything the trampoline touches is async-signal-safe: atomics and
//! const-initialised thread-locals without destructors, no allocation, no
//! lock.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use libc::{c_int, c_void, iovec, siginfo_t, size_t, ssize_t};

use crate::errno::{errno, guarded, handler_enters, handler_left, set_errno};
use crate::{mount, real, user, wait_note, wait_record};

/// Signals 1..=64.
const NSIG: usize = 65;

/// The program's handler and sa_flags per signal, as it set them; the kernel
/// holds `trampoline` with the same mask and flags (plus SA_SIGINFO).
static HANDLER: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];
/// The process whose table this is: a vfork child shares the parent's
/// memory but not its handlers, and its resets of SIGSEGV and SIGBUS must
/// not reach the parent's table (`set_action`). Set in the constructor and
/// in each fork child.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// SIGSEGV and SIGBUS: held by the trampoline always (`init_faults`); the
/// table has the program's disposition, SIG_DFL and SIG_IGN too.
fn is_fault(sig: c_int) -> bool {
    sig == libc::SIGSEGV || sig == libc::SIGBUS
}

/// The flags that the kernel's action of a fault signal has besides the
/// program's: what sigaction reports as the program set them.
const OWN_FLAGS: c_int = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND;

/// Signals siginterrupt() made interrupting: signal() then leaves out
/// SA_RESTART for them, as glibc's does.
static INTERRUPTING: AtomicU64 = AtomicU64::new(0);

/// Per thread, in one thread-local (one TLS lookup on the fast path).
struct Counts {
    /// Handlers run through the trampoline (wait_note.rs counts them all)
    /// that were installed without SA_RESTART.
    no_restart: Cell<u32>,
    /// `retry` calls in progress on this thread: an inner call (the
    /// library's own read of a data file, sendmmsg's sendmsg) leaves the
    /// decision to the outermost, which knows the whole call.
    depth: Cell<u32>,
}

thread_local! {
    static COUNTS: Counts = const {
        Counts {
            no_restart: Cell::new(0),
            depth: Cell::new(0),
        }
    };
}

use udsfs_calls::restart::{RECV, SEND};

/// The result of a C call: negative on failure.
pub trait Ret: Copy {
    fn failed(self) -> bool;
}

impl Ret for c_int {
    fn failed(self) -> bool {
        self < 0
    }
}

impl Ret for ssize_t {
    fn failed(self) -> bool {
        self < 0
    }
}

/// (handlers run, of them without SA_RESTART) on this thread.
fn marks() -> (u32, u32) {
    (
        wait_note::handlers_ran(),
        COUNTS.with(|c| c.no_restart.get()),
    )
}

extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let s = sig as usize;
    if s >= NSIG {
        return;
    }
    let h = HANDLER[s].load(Relaxed);
    if is_fault(sig) {
        // SAFETY: the kernel's arguments to an SA_SIGINFO handler.
        if unsafe { user::fix_fault(info, ctx) } {
            // The program's one-shot handler was reset by the kernel on the
            // way in, for a fault that was not the program's.
            if FLAGS[s].load(Relaxed) & libc::SA_RESETHAND != 0 {
                hold_fault(sig, HANDLER[s].load(Relaxed), FLAGS[s].load(Relaxed));
            }
            return;
        }
        if !program_fault_handler(sig, info) {
            return;
        }
    }
    let restarts = FLAGS[s].load(Relaxed) & libc::SA_RESTART != 0;
    // A call the handler makes decides for itself (it is not inside the
    // interrupted one).
    wait_note::handler_ran();
    let depth = COUNTS.with(|c| {
        if !restarts {
            c.no_restart.set(c.no_restart.get().wrapping_add(1));
        }
        c.depth.replace(0)
    });
    if !is_function(h) || is_ours(h) {
        COUNTS.with(|c| c.depth.set(depth));
        return;
    }
    // The handler's calls are outermost calls of their own, as the depth
    // above; a handler that jumps out leaves both at the outside.
    let calls = handler_enters();
    wait_record::handler_runs(ctx);
    // SAFETY: the program's handler. The trampoline is installed with
    // SA_SIGINFO, so the kernel gave all three arguments; a handler of one
    // argument (no SA_SIGINFO) ignores the other two, as C calls go.
    unsafe {
        let f: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) = std::mem::transmute(h);
        f(sig, info, ctx);
    }
    wait_record::handler_returned();
    handler_left(calls);
    COUNTS.with(|c| c.depth.set(depth));
}

/// A SIGSEGV or SIGBUS that is not the library's: false when it was dealt
/// with as the program's SIG_DFL or SIG_IGN, true when the program's handler
/// is to run (a one-shot one is then SIG_DFL in the table, as the kernel
/// would have left it, and the library keeps the signal).
fn program_fault_handler(sig: c_int, info: *mut siginfo_t) -> bool {
    let s = sig as usize;
    let (h, f) = (HANDLER[s].load(Relaxed), FLAGS[s].load(Relaxed));
    // SAFETY: the kernel's siginfo.
    let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
    if is_function(h) && !is_ours(h) {
        if f & libc::SA_RESETHAND != 0 {
            HANDLER[s].store(libc::SIG_DFL, Relaxed);
            FLAGS[s].store(0, Relaxed);
            hold_fault(sig, libc::SIG_DFL, 0);
        }
        return true;
    }
    if h == libc::SIG_IGN && sent {
        // A kill() of an ignored signal: nothing happens.
        return false;
    }
    // The default action, as without the library: the kernel's SIG_DFL, then
    // the faulting instruction runs again, or the sent signal comes again
    // (blocked in this handler, delivered as it returns). A synchronous
    // fault kills even when ignored, as force_sig_fault does.
    // SAFETY: plain data for sigaction; tgkill signals this thread.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = libc::SIG_DFL;
        real::sigaction(sig, &a, std::ptr::null_mut());
        if sent {
            libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig);
        }
    }
    false
}

/// Puts the trampoline in the kernel for fault signal `sig` whose program
/// disposition is `h` with `flags` (mask: none beyond the signal).
fn hold_fault(sig: c_int, h: libc::sighandler_t, flags: c_int) {
    // SAFETY: plain data for sigaction.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = h;
        a.sa_flags = flags;
        libc::sigemptyset(&mut a.sa_mask);
        real::sigaction(sig, &kernel_action(&a), std::ptr::null_mut());
    }
}

/// The action the kernel holds for the program's action `a` of a signal:
/// the trampoline with its mask and flags. For a fault signal whose
/// disposition is SIG_DFL or SIG_IGN, on the alternate stack when there is
/// one (a stack overflow's fault needs it) and never one-shot.
fn kernel_action(a: &libc::sigaction) -> libc::sigaction {
    let mut t = *a;
    t.sa_sigaction = trampoline as *const () as usize;
    t.sa_flags |= libc::SA_SIGINFO;
    if !is_function(a.sa_sigaction) {
        t.sa_flags = (t.sa_flags & !(libc::SA_RESETHAND | libc::SA_NODEFER)) | libc::SA_ONSTACK;
    }
    t
}

extern "C" fn forked() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Relaxed);
    crate::lane::forked();
    crate::lane_ready::forked();
}

/// From the library's constructor: SIGSEGV and SIGBUS go to the trampoline,
/// which turns a fault in the library's copies into EFAULT; whatever was
/// set before (SIG_DFL, as a rule) is the program's.
pub fn init_faults() {
    forked();
    // SAFETY: registers a function without preconditions.
    unsafe { libc::pthread_atfork(None, None, Some(forked)) };
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: a query into local storage, then an install.
        unsafe {
            let mut o: libc::sigaction = std::mem::zeroed();
            if real::sigaction(sig, std::ptr::null(), &mut o) != 0 || is_ours(o.sa_sigaction) {
                continue;
            }
            HANDLER[sig as usize].store(o.sa_sigaction, Relaxed);
            FLAGS[sig as usize].store(o.sa_flags, Relaxed);
            real::sigaction(sig, &kernel_action(&o), std::ptr::null_mut());
        }
    }
}

fn is_ours(h: libc::sighandler_t) -> bool {
    h == trampoline as *const () as usize
}

/// Whether `h` is a handler function (not SIG_DFL, SIG_IGN or SIG_ERR).
fn is_function(h: libc::sighandler_t) -> bool {
    h != libc::SIG_DFL && h != libc::SIG_IGN && h != libc::SIG_ERR
}

/// sigaction(): a handler goes behind the trampoline; `old` reports what
/// the program set, never the trampoline.
///
/// # Safety
/// As for sigaction.
unsafe fn set_action(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let s = sig as usize;
    if !(1..NSIG).contains(&s) {
        return unsafe { real::sigaction(sig, act, old) };
    }
    let (prev_h, prev_f) = (HANDLER[s].load(Relaxed), FLAGS[s].load(Relaxed));
    // SAFETY: the caller's struct, when given.
    let new = unsafe { act.as_ref() }.copied();
    // SAFETY: getpid has no preconditions.
    let held = is_fault(sig) && OWNER.load(Relaxed) == unsafe { libc::getpid() };
    let r = match new {
        // The library keeps SIGSEGV and SIGBUS (when `held`) whatever the
        // program sets, and every handler function behind its trampoline.
        Some(a) if !is_ours(a.sa_sigaction) && (held || is_function(a.sa_sigaction)) => {
            // The table first: a signal delivered as soon as the kernel
            // holds the trampoline finds the handler.
            HANDLER[s].store(a.sa_sigaction, Relaxed);
            FLAGS[s].store(a.sa_flags, Relaxed);
            let r = unsafe { real::sigaction(sig, &kernel_action(&a), old) };
            if r < 0 {
                HANDLER[s].store(prev_h, Relaxed);
                FLAGS[s].store(prev_f, Relaxed);
            }
            r
        }
        // SIG_DFL and SIG_IGN leave the table alone: a vfork child (Python's
        // subprocess) resets its handlers through here, in the parent's memory,
        // and the parent's trampoline must still find its handler.
        _ => unsafe { real::sigaction(sig, act, old) },
    };
    if r == 0 {
        // SAFETY: the caller's struct, filled by the C library.
        if let Some(o) = unsafe { old.as_mut() } {
            // The kernel's report but the handler, and SA_SIGINFO as the
            // program set it (also after SA_RESETHAND put back SIG_DFL,
            // which keeps the flags).
            let reset = o.sa_sigaction == libc::SIG_DFL && o.sa_flags & libc::SA_RESETHAND != 0;
            if is_ours(o.sa_sigaction) || reset {
                if !reset {
                    o.sa_sigaction = prev_h;
                }
                o.sa_flags = (o.sa_flags & !OWN_FLAGS) | (prev_f & OWN_FLAGS);
            }
        }
    }
    r
}

/// signal() and bsd_signal(): SA_RESTART unless siginterrupt() said
/// otherwise, the signal itself blocked in its handler (glibc's).
unsafe fn bsd_signal_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    let interrupting =
        (1..NSIG as c_int).contains(&sig) && INTERRUPTING.load(Relaxed) & bit(sig) != 0;
    let flags = if interrupting { 0 } else { libc::SA_RESTART };
    unsafe { install(sig, h, flags, true) }
}

/// sysv_signal(): one-shot, not blocked in its handler, no SA_RESTART.
unsafe fn sysv_signal_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    unsafe { install(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER, false) }
}

unsafe fn install(
    sig: c_int,
    h: libc::sighandler_t,
    flags: c_int,
    mask_self: bool,
) -> libc::sighandler_t {
    if h == libc::SIG_ERR || !(1..NSIG as c_int).contains(&sig) {
        set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: plain data, filled below.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    let mut o: libc::sigaction = unsafe { std::mem::zeroed() };
    a.sa_sigaction = h;
    a.sa_flags = flags;
    unsafe {
        libc::sigemptyset(&mut a.sa_mask);
        if mask_self {
            libc::sigaddset(&mut a.sa_mask, sig);
        }
        if set_action(sig, &a, &mut o) < 0 {
            return libc::SIG_ERR;
        }
    }
    o.sa_sigaction
}

/// Signal `sig` (1..=64) in INTERRUPTING.
fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// siginterrupt(): SA_RESTART off (`interrupt` != 0) or on, kept for
/// later signal() calls too.
unsafe fn siginterrupt_(sig: c_int, interrupt: c_int) -> c_int {
    // SAFETY: plain data, filled by sigaction.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    if unsafe { set_action(sig, std::ptr::null(), &mut a) } < 0 {
        return -1;
    }
    if interrupt != 0 {
        INTERRUPTING.fetch_or(bit(sig), Relaxed);
        a.sa_flags &= !libc::SA_RESTART;
    } else {
        INTERRUPTING.fetch_and(!bit(sig), Relaxed);
        a.sa_flags |= libc::SA_RESTART;
    }
    unsafe { set_action(sig, &a, std::ptr::null_mut()) }
}

/// sigset() (System V): a handler with no flags and the signal unblocked,
/// or SIG_HOLD to block it; returns SIG_HOLD when it was blocked.
unsafe fn sigset_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    const SIG_HOLD: libc::sighandler_t = 2;
    if !(1..NSIG as c_int).contains(&sig) {
        set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: plain data for sigprocmask and sigaction.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut was: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        let mut o: libc::sigaction = std::mem::zeroed();
        if h == SIG_HOLD {
            if set_action(sig, std::ptr::null(), &mut o) < 0
                || libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut was) != 0
            {
                return libc::SIG_ERR;
            }
        } else {
            let mut a: libc::sigaction = std::mem::zeroed();
            a.sa_sigaction = h;
            libc::sigemptyset(&mut a.sa_mask);
            if set_action(sig, &a, &mut o) < 0
                || libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut was) != 0
            {
                return libc::SIG_ERR;
            }
        }
        if libc::sigismember(&was, sig) == 1 {
            SIG_HOLD
        } else {
            o.sa_sigaction
        }
    }
}

/// Whether some handler the trampoline does not see (installed by a raw
/// system call, or before this library) lacks SA_RESTART: an EINTR with no
/// counted handler may then be its doing, and is kept.
fn foreign_interrupting_handler() -> bool {
    (1..NSIG as c_int).any(|sig| {
        // SAFETY: a query into local storage.
        let mut o: libc::sigaction = unsafe { std::mem::zeroed() };
        let r = unsafe { real::sigaction(sig, std::ptr::null(), &mut o) };
        r == 0
            && is_function(o.sa_sigaction)
            && !is_ours(o.sa_sigaction)
            && o.sa_flags & libc::SA_RESTART == 0
    })
}

/// After an EINTR of a call that began with `marks()` (ran, no_restart): whether
/// Linux would have restarted the call on `fd`: every handler that ran had
/// SA_RESTART, and the socket is a udsfs one without a timeout that way, as
/// the call noted before its wait (wait_note.rs: a handler may have closed
/// the number since), else as the number is now.
fn restartable(fd: c_int, dir: i32, (ran, no_restart): (u32, u32)) -> bool {
    let (ran_now, no_restart_now) = marks();
    let noted = wait_note::take(fd);
    if no_restart_now != no_restart || (noted.is_none() && !mount::udsfs_fd(fd)) {
        return false;
    }
    // None counted: a stop and continue (Linux restarts then), or a handler
    // the trampoline does not see.
    if ran_now == ran && foreign_interrupting_handler() {
        return false;
    }
    // sock_intr_errno: not with a timeout that way.
    noted.unwrap_or_else(|| udsfs_calls::restart::restarts(fd, dir))
}

/// After an EINTR of a call that began with `marks()` (ran, _) on `fd`, a
/// udsfs socket: the daemon's, not a signal's, when no handler ran and the
/// daemon says it answered a read of this thread so because the
/// connection's lane came up under it (src/engine/lane.rs `lane_kicks`):
/// the call is made again, through the ring, whatever a signal would have
/// done (a timeout that way).
fn lane_came_up(fd: c_int, (ran, _): (u32, u32)) -> bool {
    marks().0 == ran && mount::udsfs_fd(fd) && crate::lane::woken(fd)
}

/// Runs socket call `call` on `fd` and calls it again after an EINTR that
/// Linux would have restarted (`dir`: SEND or RECV, the timeout that
/// applies). Costs a thread-local look before and after unless the call fails
/// with EINTR.
pub fn retry<R: Ret>(fd: c_int, dir: i32, mut call: impl FnMut() -> R) -> R {
    let entry = errno();
    let (outer, no_restart) = COUNTS.with(|c| {
        let d = c.depth.replace(c.depth.get() + 1);
        (d == 0, c.no_restart.get())
    });
    let mut mark = (wait_note::handlers_ran(), no_restart);
    loop {
        if outer {
            wait_note::clear();
        }
        let r = call();
        let e = errno();
        if !r.failed()
            || e != libc::EINTR
            || !outer
            || !guarded(false, || {
                restartable(fd, dir, mark) || lane_came_up(fd, mark)
            })
        {
            COUNTS.with(|c| c.depth.set(c.depth.get() - 1));
            // The look at the socket and the handlers may leave another
            // errno (sigaction of glibc's own signals says EINVAL).
            if r.failed() {
                set_errno(e);
            }
            return r;
        }
        // The restarted call starts with the program's errno, not EINTR,
        // and is made on the number as it is now, as libc's restart is: on
        // what a handler put there, or EBADF.
        set_errno(entry);
        mark = marks();
    }
}

/// A receive or accept interposer's body (`guarded`), retried as Linux
/// restarts it (SO_RCVTIMEO).
pub fn recv<R: Ret>(fd: c_int, fail: R, mut body: impl FnMut() -> R) -> R {
    retry(fd, RECV, || guarded(fail, &mut body))
}

/// A send or connect interposer's body, likewise (SO_SNDTIMEO).
pub fn send<R: Ret>(fd: c_int, fail: R, mut body: impl FnMut() -> R) -> R {
    retry(fd, SEND, || guarded(fail, &mut body))
}

// read, write, readv and writev of a data file are the file's own (the
// kernel's FUSE path): only their EINTR is looked at.

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    retry(fd, RECV, || {
        crate::lane::recv(fd, buf, n, 0).unwrap_or_else(|| unsafe { real::read(fd, buf, n) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    retry(fd, RECV, || unsafe { real::__read_chk(fd, buf, n, buflen) })
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    retry(fd, RECV, || {
        crate::lane::readv(fd, iov, n).unwrap_or_else(|| unsafe { real::readv(fd, iov, n) })
    })
}

/// write() of some bytes (lib.rs has the interposer: a zero-length one is
/// a send of nothing there).
pub fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    retry(fd, SEND, || {
        crate::lane::send(fd, buf, n, 0).unwrap_or_else(|| unsafe { real::write(fd, buf, n) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    retry(fd, SEND, || {
        crate::lane::writev(fd, iov, n).unwrap_or_else(|| unsafe { real::writev(fd, iov, n) })
    })
}

// The program's ways to set a handler. glibc's signal(), siginterrupt()
// and the rest call its sigaction internally, past this library, so each is
// answered here.

/// Exports each name before `=>` as a C entry point that answers with the
/// function after it: glibc has several names for one way of setting a handler.
macro_rules! handler_entries {
    (=> $($inner:tt)*) => {};
    ($name:ident $(, $more:ident)* => $inner:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            unsafe { $inner($($arg),*) }
        }
        handler_entries!($($more),* => $inner($($arg: $ty),*) -> $ret);
    };
}

handler_entries!(sigaction, __sigaction =>
    set_action(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int);
handler_entries!(signal, bsd_signal, ssignal =>
    bsd_signal_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t);
handler_entries!(sysv_signal, __sysv_signal =>
    sysv_signal_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t);
handler_entries!(siginterrupt => siginterrupt_(sig: c_int, interrupt: c_int) -> c_int);
handler_entries!(sigset => sigset_(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t);

#[cfg(test)]
mod tests {
    use super::*;

    static HITS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn handler(_: c_int) {
        HITS.fetch_add(1, Relaxed);
    }

    fn action(h: usize, flags: c_int) -> libc::sigaction {
        // SAFETY: plain data.
        let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
        a.sa_sigaction = h;
        a.sa_flags = flags;
        a
    }

    fn reported(sig: c_int) -> libc::sigaction {
        let mut o = action(0, 0);
        // SAFETY: a query into local storage.
        assert_eq!(unsafe { set_action(sig, std::ptr::null(), &mut o) }, 0);
        o
    }

    #[test]
    fn handlers_run_behind_the_trampoline_and_are_counted() {
        let sig = libc::SIGUSR2;
        let h = handler as *const () as usize;
        let a = action(h, libc::SA_RESTART);
        // SAFETY: SIGUSR2 is this test's alone; raise() runs the handler on
        // this thread before it returns.
        unsafe {
            assert_eq!(set_action(sig, &a, std::ptr::null_mut()), 0);
            let mut k = action(0, 0);
            real::sigaction(sig, std::ptr::null(), &mut k);
            assert!(is_ours(k.sa_sigaction), "the kernel holds the trampoline");
            let o = reported(sig);
            assert_eq!(o.sa_sigaction, h, "sigaction reports the program's handler");
            assert_eq!(
                o.sa_flags & (libc::SA_RESTART | libc::SA_SIGINFO),
                libc::SA_RESTART
            );

            let (ran, no_restart) = marks();
            libc::raise(sig);
            assert_eq!(HITS.load(Relaxed), 1);
            assert_eq!(marks(), (ran + 1, no_restart));

            assert_eq!(siginterrupt_(sig, 1), 0);
            assert_eq!(reported(sig).sa_flags & libc::SA_RESTART, 0);
            libc::raise(sig);
            assert_eq!(HITS.load(Relaxed), 2);
            assert_eq!(marks(), (ran + 2, no_restart + 1));
            // signal() keeps siginterrupt's choice, as glibc's.
            assert_eq!(bsd_signal_(sig, h), h);
            assert_eq!(reported(sig).sa_flags & libc::SA_RESTART, 0);
            assert_eq!(siginterrupt_(sig, 0), 0);
            assert_eq!(bsd_signal_(sig, libc::SIG_DFL), h);
            assert_eq!(reported(sig).sa_sigaction, libc::SIG_DFL);
        }
    }

    #[test]
    fn a_fault_in_the_copy_is_efault_and_sigsegv_reads_back_as_set() {
        // The test harness's own handler (its stack overflow report, set
        // through this library's sigaction, linked in), or none.
        let before = reported(libc::SIGSEGV);
        init_faults();
        // SAFETY: a fresh page of our own, then reads of the kernel's action.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(user::read(p as *const u64), Err(libc::EFAULT));
            assert_eq!(user::write(p as *mut u64, 1), Err(libc::EFAULT));
            assert_eq!(user::writable(p.cast(), 8192), 0);
            libc::mprotect(p, 4096, libc::PROT_READ);
            assert_eq!(user::read(p as *const u64), Ok(0));
            assert_eq!(user::writable(p.cast(), 100), 0);
            libc::munmap(p, 4096);
            let mut k = action(0, 0);
            real::sigaction(libc::SIGSEGV, std::ptr::null(), &mut k);
            assert!(is_ours(k.sa_sigaction), "the kernel holds the trampoline");
            let o = reported(libc::SIGSEGV);
            assert_eq!(
                o.sa_sigaction, before.sa_sigaction,
                "sigaction reports what was set"
            );
            assert_eq!(o.sa_flags & OWN_FLAGS, before.sa_flags & OWN_FLAGS);
        }
    }

    #[test]
    fn an_eintr_off_udsfs_is_returned_once_with_its_errno() {
        let mut calls = 0;
        let r: c_int = retry(0, RECV, || {
            calls += 1;
            set_errno(libc::EINTR);
            -1
        });
        assert_eq!((r, calls, errno()), (-1, 1, libc::EINTR));
    }
}

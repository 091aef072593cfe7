//! The process the caller of `udsfs run` waits for. `udsfs run` forks before it
//! starts anything: this front waits only for CMD's exit status and exits with it,
//! while the child, `udsfs run` proper, goes on serving what CMD left behind (a
//! daemonized server on the mount, the supervisor of its descendants, a private
//! mount, a capture) until the last descendant is gone. So `udsfs run -- tmux
//! new-session -d` returns when tmux's client does, as tmux alone would.

use std::sync::atomic::{AtomicI32, Ordering};

/// The pipe's write end in `udsfs run` proper (-1: no front, or reported).
static REPORT: AtomicI32 = AtomicI32::new(-1);
/// `udsfs run` proper, as the front knows it: where the signals sent to the
/// front go (forward.rs), on to CMD.
static PROPER: AtomicI32 = AtomicI32::new(0);
/// The front, as `udsfs run` proper knows it (0: no front).
static FRONT: AtomicI32 = AtomicI32::new(0);

/// The front's pid in `udsfs run` proper; None without a front.
pub fn pid() -> Option<libc::pid_t> {
    Some(FRONT.load(Ordering::Relaxed)).filter(|&p| p > 0)
}

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let pid = PROPER.load(Ordering::Relaxed);
    // SAFETY: the kernel's siginfo for this signal (SA_SIGINFO).
    if pid > 0 && super::forward::sent_by_a_process(unsafe { (*info).si_code }) {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The front's handler of each signal `udsfs run` passes on.
fn handle_forwarded() {
    for sig in super::forward::FORWARDED {
        // SAFETY: a zeroed sigaction with an SA_SIGINFO handler and
        // SA_RESTART is valid; the handler only calls kill.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
            libc::sigaction(sig as libc::c_int, &sa, std::ptr::null_mut());
        }
    }
}

/// Splits `udsfs run` in two. Returns in `udsfs run` proper; the front never
/// returns: it exits with CMD's status once that is reported (or with the
/// status of `udsfs run` proper, should it end without reporting). Called
/// before any thread exists. When the pipe or the fork fails, returns with no
/// front: `udsfs run` then waits for every descendant itself, as it did.
pub fn split() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [r, w] = fds;
    // SAFETY: getpid has no preconditions.
    let front = unsafe { libc::getpid() };
    // SAFETY: no other thread exists yet; both sides go on with plain calls.
    match unsafe { libc::fork() } {
        -1 => {
            // SAFETY: the pipe's descriptors are ours.
            unsafe {
                libc::close(r);
                libc::close(w);
            }
        }
        0 => {
            // SAFETY: the read end is the front's; prctl and getppid act on
            // this process only.
            unsafe {
                libc::close(r);
                // Killing `udsfs run` (the front) while CMD runs kills what
                // carries CMD, as it did when they were one process.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != front {
                    libc::_exit(128 + libc::SIGKILL);
                }
            }
            REPORT.store(w, Ordering::Relaxed);
            FRONT.store(front, Ordering::Relaxed);
        }
        pid => {
            // SAFETY: the write end is the child's.
            unsafe { libc::close(w) };
            PROPER.store(pid, Ordering::Relaxed);
            // Signals sent to the front go to CMD through `udsfs run`
            // proper; the terminal's reach CMD's process group anyway.
            handle_forwarded();
            std::process::exit(wait_for_report(r, pid));
        }
    }
}

/// The front: CMD's status from the pipe, or that of `udsfs run` proper.
fn wait_for_report(r: libc::c_int, pid: libc::pid_t) -> i32 {
    let mut code = [0u8; 4];
    let mut got = 0;
    while got < code.len() {
        // SAFETY: reads into the rest of `code`.
        let n = unsafe { libc::read(r, code[got..].as_mut_ptr().cast(), code.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    if got == code.len() {
        return i32::from_ne_bytes(code);
    }
    // Ended without a word (killed, say): its own status.
    let mut status = 0;
    // SAFETY: waits for our only child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// In `udsfs run` proper: hands CMD's status `code` to the front, which
/// exits with it. Once only; nothing without a front.
pub fn report(code: i32) {
    let w = REPORT.swap(-1, Ordering::Relaxed);
    if w >= 0 {
        // SAFETY: prctl acts on this process; writes 4 bytes from `code` to
        // our pipe end, then closes it.
        unsafe {
            // The front exits on this: what stays goes on without it.
            libc::prctl(libc::PR_SET_PDEATHSIG, 0);
            libc::write(w, code.to_ne_bytes().as_ptr().cast(), 4);
            libc::close(w);
        }
    }
}

/// Whether a child of this process is still running (orphans of CMD
/// reparent to `udsfs run`, the subreaper); reaps those that ended.
pub fn descendants_remain() -> bool {
    loop {
        // SAFETY: waitpid on any child, without waiting; statuses are dropped.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        match r {
            0 => return true,
            r if r > 0 => continue,
            _ => return false,
        }
    }
}

/// CMD is gone but its descendants are not: `udsfs run` proper goes on in
/// the background, on nobody's terminal output (a caller reading its
/// output through a pipe sees the end of it, as with the program alone).
pub fn go_to_background(code: i32) {
    report(code);
    // SAFETY: opens /dev/null and puts it over 0, 1 and 2.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }
}

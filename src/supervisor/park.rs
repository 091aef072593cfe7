//! Message calls parked in the daemon (MSGF_WAIT, src/fuse/park.rs): the
//! supervisor's thread waits in its ioctl as a blocking program would, and
//! the daemon wakes it on data, on space or at SO_RCVTIMEO/SO_SNDTIMEO. What
//! the daemon cannot see is the target: a signal pending for it, or the
//! notification gone (killed). A watcher checks the parked calls' targets
//! and ends such a wait by signalling the parked thread: FUSE turns that
//! into FUSE_INTERRUPT, answered EINTR (src/fuse/ioctl.rs).

use std::os::fd::RawFd;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// How often the watcher looks at parked calls' targets: the delay of a
/// signal's handler, or of a killed target's thread going away. Only while
/// a call is parked.
const TICK: Duration = Duration::from_millis(100);

struct Entry {
    key: u64,
    /// The parked supervisor thread.
    thread: libc::pid_t,
    /// The seccomp listener and the notification it serves.
    listener: RawFd,
    id: u64,
    /// The target thread.
    target: libc::pid_t,
}

struct Watch {
    parked: Mutex<(u64, Vec<Entry>)>,
    changed: Condvar,
}

fn watch() -> &'static Watch {
    static W: OnceLock<Watch> = OnceLock::new();
    W.get_or_init(|| {
        install_handler();
        let _ = std::thread::Builder::new()
            .name("udsfs-park-watch".into())
            .spawn(watcher);
        Watch {
            parked: Mutex::new((0, Vec::new())),
            changed: Condvar::new(),
        }
    })
}

/// The signal that ends a parked ioctl: not one std or the C library uses.
fn kick_signal() -> i32 {
    libc::SIGRTMIN() + 5
}

extern "C" fn nothing(_: libc::c_int) {}

/// A handler that does nothing, without SA_RESTART: the interrupted ioctl
/// returns EINTR instead of being made again.
fn install_handler() {
    // SAFETY: a zeroed sigaction with a handler that touches nothing.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(kick_signal(), &sa, std::ptr::null_mut());
    }
}

fn id_valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
}

/// Should the wait of `e` end: the notification gone or a signal waiting.
fn must_end(e: &Entry) -> bool {
    !id_valid(e.listener, e.id) || signal_pending(e.target)
}

/// As procfs::Status::signal_pending, reading only the three masks with
/// std's searches: this runs at every tick for every parked call, and a
/// whole parse (or a byte loop of this crate's unoptimized build) cost
/// about 25 times the kernel's making of the file.
fn signal_pending(tid: libc::pid_t) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    let mask = |key: &str| -> u64 {
        text.find(key)
            .and_then(|at| text[at + key.len()..].split_ascii_whitespace().next())
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .unwrap_or(0)
    };
    let (pnd, shd, blk) = (mask("\nSigPnd:"), mask("\nShdPnd:"), mask("\nSigBlk:"));
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    (pnd | shd) & (!blk | SIGKILL_BIT) != 0
}

fn watcher() {
    let w = watch();
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut g = w.parked.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        while g.1.is_empty() {
            g = w.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        // Signalled again at each tick while it holds: a signal that came
        // just before the thread entered its ioctl did not end it.
        for e in g.1.iter().filter(|e| must_end(e)) {
            // SAFETY: a signal with a no-op handler to one of our threads.
            unsafe { libc::syscall(libc::SYS_tgkill, me, e.thread, kick_signal()) };
        }
        g = w
            .changed
            .wait_timeout(g, TICK)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Registers the calling thread as parked for notification `id` of
/// `listener` on behalf of target thread `target`, until dropped. The
/// listener must outlive it (the caller holds it).
pub struct Parked {
    key: u64,
}

impl Parked {
    pub fn new(listener: RawFd, id: u64, target: libc::pid_t) -> Parked {
        let w = watch();
        // SAFETY: gettid has no preconditions.
        let thread = unsafe { libc::gettid() };
        let mut g = w.parked.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let key = g.0;
        g.1.push(Entry {
            key,
            thread,
            listener,
            id,
            target,
        });
        w.changed.notify_one();
        Parked { key }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        let w = watch();
        let mut g = w.parked.lock().unwrap_or_else(|e| e.into_inner());
        g.1.retain(|e| e.key != self.key);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pending_signal_of_a_thread() {
        // SAFETY: blocks SIGUSR2 in this thread and raises it there.
        unsafe {
            let tid = libc::gettid();
            assert!(!super::signal_pending(tid));
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2);
            // Blocked: not a reason to end a wait (Linux would not either).
            assert!(!super::signal_pending(tid));
            let mut got = 0;
            libc::sigwait(&set, &mut got);
            assert_eq!(got, libc::SIGUSR2);
        }
    }
}

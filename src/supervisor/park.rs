//! Blocking calls parked in the daemon (src/fuse/park.rs: a message ioctl
//! with MSGF_WAIT, the open of `accept`, a `connect` or a record written):
//! the supervisor's thread waits in its FUSE request as a blocking program
//! would, and the daemon wakes it on data, on space, on a connection or at
//! SO_RCVTIMEO/SO_SNDTIMEO. What the daemon cannot see is the target: a
//! signal for it (deliver.rs), or the notification gone (killed). A watcher checks the parked calls' targets
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
/// returns EINTR instead of being made again. Once.
fn install_handler() {
    static DONE: std::sync::Once = std::sync::Once::new();
    // SAFETY: a zeroed sigaction with a handler that touches nothing.
    DONE.call_once(|| unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(kick_signal(), &sa, std::ptr::null_mut());
    });
}

/// Ends the ioctl (or other interruptible wait) thread `thread` of this
/// process is in, with EINTR; nothing if it is in none (a kick that came
/// before the thread entered its wait does not end it: kick again).
pub(super) fn kick(thread: libc::pid_t) {
    install_handler();
    // SAFETY: a signal with a no-op handler to one of our threads.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), thread, kick_signal()) };
}

/// The calling thread's id.
pub(super) fn this_thread() -> libc::pid_t {
    THREAD.with(|t| *t)
}

/// Should the wait of `e` end: the notification gone, or a signal for its
/// thread (deliver.rs: a process's signal ends one thread's wait).
fn must_end(e: &Entry) -> bool {
    !super::listener::id_valid(e.listener, e.id) || super::deliver::signal_for(e.target)
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
        // A whole tick, whatever parks meanwhile: a look reads /proc for
        // every parked call, and calls park thousands of times a second.
        let until = std::time::Instant::now() + TICK;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            g = w
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

thread_local! {
    /// This thread's id, asked once (a worker parks at most once a call).
    // SAFETY: gettid has no preconditions.
    static THREAD: libc::pid_t = unsafe { libc::gettid() };
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
        let thread = THREAD.with(|t| *t);
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
        // Only an idle watcher needs waking; a busy one looks at its tick.
        if g.1.len() == 1 {
            w.changed.notify_one();
        }
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

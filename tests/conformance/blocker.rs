//! One blocking call on a thread of its own, for the blocking scenarios: the
//! scenario thread starts it, waits until the call sleeps in the kernel, wakes it
//! by some other operation (or a signal) and joins it for its result.
//!
//! "Sleeps" is read from `/proc/self/task/<tid>/syscall` (the number of the system
//! call the thread is in, which the kernel shows only while the thread is not
//! running) and `stat` (state S or D). A FUSE caller sleeps as soon as its request
//! is queued, before the daemon has decided to park it: the udsfs backend then also
//! waits for the daemon's count of parked requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::backend::{Res, last_errno};

/// The signal a scenario sends to a blocked call.
pub const WAKE_SIGNAL: libc::c_int = libc::SIGUSR1;

/// How long `still_blocked` gives a call to end that should not.
pub const SETTLE: Duration = Duration::from_millis(50);

/// How long a call may take to fall asleep, or to end once woken: generous,
/// as the scenarios compare outcomes, not latencies.
pub const LIMIT: Duration = Duration::from_secs(10);

extern "C" fn on_wake_signal(_: libc::c_int) {}

/// A do-nothing handler for `WAKE_SIGNAL`, installed without SA_RESTART, so that a
/// blocked call it hits returns EINTR (on the kernel as through the mount).
pub fn install_wake_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a handler that does nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_wake_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(WAKE_SIGNAL, &sa, std::ptr::null_mut()) != 0 {
                panic!("sigaction({WAKE_SIGNAL}): {}", last_errno());
            }
        }
    });
}

/// A call running on its own thread.
pub struct Blocker<T> {
    tid: i32,
    syscall: libc::c_long,
    done: Arc<AtomicBool>,
    rx: mpsc::Receiver<T>,
}

/// Sets the flag when dropped: also when the call panics.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn gettid() -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

impl<T: Send + 'static> Blocker<T> {
    /// Runs `f` on a new thread; `syscall` is the system call `f` blocks in (-1:
    /// any).
    pub fn spawn(syscall: libc::c_long, f: impl FnOnce() -> T + Send + 'static) -> Res<Blocker<T>> {
        install_wake_handler();
        let done = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let (tx, rx) = mpsc::channel();
        let (d, t) = (done.clone(), tid.clone());
        std::thread::Builder::new()
            .name("blocking-call".into())
            .spawn(move || {
                let _done = SetOnDrop(d);
                t.store(gettid(), Ordering::SeqCst);
                let _ = tx.send(f());
            })
            .map_err(|e| format!("HARNESS spawn: {e}"))?;
        let start = Instant::now();
        while tid.load(Ordering::SeqCst) == 0 {
            if start.elapsed() > LIMIT {
                return Err("HARNESS the blocking thread never started".to_string());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(Blocker {
            tid: tid.load(Ordering::SeqCst),
            syscall,
            done,
            rx,
        })
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// Whether the thread sleeps inside its system call now.
    fn asleep(&self) -> bool {
        let task = format!("/proc/self/task/{}", self.tid);
        let Ok(sc) = std::fs::read_to_string(format!("{task}/syscall")) else {
            return false;
        };
        let nr = sc.split_whitespace().next().and_then(|v| v.parse().ok());
        if nr.is_none() || (self.syscall >= 0 && nr != Some(self.syscall)) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(format!("{task}/stat")) else {
            return false;
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        matches!(state, Some('S' | 'D'))
    }

    /// Waits until the call sleeps in the kernel (true) or has ended without
    /// blocking (false).
    pub fn wait_asleep(&self) -> Res<bool> {
        let start = Instant::now();
        loop {
            if self.is_done() {
                return Ok(false);
            }
            if self.asleep() {
                return Ok(true);
            }
            if start.elapsed() > LIMIT {
                return Err(format!(
                    "HARNESS the call did not block or end within {LIMIT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends `WAKE_SIGNAL` to the blocked thread.
    pub fn signal(&self) -> Res<()> {
        if self.is_done() {
            return Err("HARNESS signal to a call that has ended".to_string());
        }
        // SAFETY: plain syscall to a thread of this process that has not ended
        // (it ends only after `done` is set).
        let r = unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid() as libc::c_long,
                self.tid as libc::c_long,
                WAKE_SIGNAL as libc::c_long,
            )
        };
        if r != 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    /// Waits for the call to end and returns what it returned. A call that is
    /// still blocked after the limit is signalled until it ends, so that no
    /// thread is left behind, and the join fails.
    pub fn join(self) -> Res<T> {
        match self.rx.recv_timeout(LIMIT) {
            Ok(r) => Ok(r),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err("HARNESS the blocking call panicked".to_string())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                for _ in 0..50 {
                    if self.is_done() {
                        break;
                    }
                    let _ = self.signal();
                    std::thread::sleep(Duration::from_millis(100));
                }
                let left = if self.is_done() {
                    ""
                } else {
                    " (and not even a signal ended it: the thread is left behind)"
                };
                Err(format!(
                    "HARNESS the call was still blocked {LIMIT:?} after it should have ended{left}"
                ))
            }
        }
    }
}

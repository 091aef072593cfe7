//! Which of a target's threads a signal is for, so that a parked call ends
//! only where Linux would end it. A signal sent to the thread (tgkill, a
//! SIGPIPE) is in its own pending set. One sent to the process (kill) is
//! shared: the kernel gives it to one thread that does not block it
//! (complete_signal: the thread named if it wants it, else the first that
//! does from where the last such search stopped) and wakes only that one.
//! A trapped thread sleeps killable (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
//! and shows nothing of being chosen, so the choice is made again here the
//! same way, once per pending signal, from /proc. A stop is for every
//! thread. What /proc cannot tell is
//! assumed: the sender named the process (its main thread), and a thread is
//! busy with another signal only when one is pending for it or it was
//! chosen here for one.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libc::pid_t;

const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);

/// The parts of /proc/TID/status this needs.
#[derive(Clone, Copy)]
struct Status {
    tgid: pid_t,
    state: u8,
    pending: u64,
    shared: u64,
    blocked: u64,
    /// Ignored or caught: a stop signal so does not stop.
    handled: u64,
}

/// Reads only the fields needed with std's searches: this runs at every
/// tick of the park watcher for every parked call (a whole parse cost about
/// 25 times the kernel's making of the file).
fn status(tid: pid_t) -> Option<Status> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |key: &str| {
        text.find(key)
            .and_then(|at| text[at + key.len()..].split_ascii_whitespace().next())
    };
    let mask = |key: &str| field(key).and_then(|v| u64::from_str_radix(v, 16).ok());
    Some(Status {
        tgid: field("\nTgid:")?.parse().ok()?,
        state: *field("\nState:")?.as_bytes().first()?,
        pending: mask("\nSigPnd:")?,
        shared: mask("\nShdPnd:")?,
        blocked: mask("\nSigBlk:")?,
        handled: mask("\nSigIgn:")? | mask("\nSigCgt:")?,
    })
}

#[derive(Default)]
struct Choices {
    /// The thread each pending shared signal was given to, by (process,
    /// signal number); 0: none wanted it (it stays pending).
    given: HashMap<(pid_t, u32), pid_t>,
    /// Where each process's next search starts (signal->curr_target).
    next: HashMap<pid_t, pid_t>,
    /// Whether each process is stopping, as last seen, when, and for how
    /// long the look serves: one look at its threads serves the rest of a
    /// watcher tick, and longer for a process of many threads.
    stopping: HashMap<pid_t, (std::time::Instant, bool, std::time::Duration)>,
}

fn choices() -> &'static Mutex<Choices> {
    static C: OnceLock<Mutex<Choices>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Process `tgid`'s threads in the kernel's order (that of /proc/PID/task).
fn threads(tgid: pid_t) -> Vec<(pid_t, Status)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<pid_t>().ok())
        .filter_map(|t| Some((t, status(t)?)))
        .collect()
}

impl Choices {
    /// As complete_signal: the thread of `tgid` that signal `sig` goes to.
    fn choose(&mut self, tgid: pid_t, sig: u32) -> pid_t {
        let bit = 1u64 << (sig - 1);
        let busy: Vec<pid_t> = self
            .given
            .iter()
            .filter(|((p, _), _)| *p == tgid)
            .map(|(_, t)| *t)
            .collect();
        let wants = |(tid, st): &(pid_t, Status)| {
            st.blocked & bit == 0
                && !matches!(st.state, b'Z' | b'X' | b'T' | b't')
                && (st.state == b'R' || (st.pending & !st.blocked == 0 && !busy.contains(tid)))
        };
        let all = threads(tgid);
        if let Some(main) = all.iter().find(|(t, _)| *t == tgid)
            && wants(main)
        {
            return tgid;
        }
        let from = self.next.get(&tgid).copied().unwrap_or(tgid);
        let start = all.iter().position(|(t, _)| *t == from).unwrap_or(0);
        let n = all.len();
        match (0..n).map(|k| &all[(start + k) % n]).find(|t| wants(t)) {
            Some(&(t, _)) => {
                // Processes gone keep no entry for long.
                if self.next.len() >= 1024 {
                    self.next
                        .retain(|p, _| std::path::Path::new(&format!("/proc/{p}")).exists());
                }
                self.next.insert(tgid, t);
                t
            }
            None => 0,
        }
    }
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

impl Choices {
    /// Is the process of `me` in a group stop, or about to be? A stop
    /// signal wakes every thread (do_signal_stop), so every parked call
    /// ends and is made again after SIGCONT, as a blocking call on Linux.
    /// `fresh`: not from an earlier look, which may predate a SIGCONT. A
    /// look reads the status of every thread of the process: it serves 50
    /// ms, and 50 ms more for each 64 threads (10,000 threads blocked in
    /// trapped calls: a look every 8 s, a stop seen that late at worst).
    fn stopping(&mut self, me: &Status, fresh: bool) -> bool {
        let stop = bit(libc::SIGTSTP) | bit(libc::SIGTTIN) | bit(libc::SIGTTOU);
        if me.shared & (bit(libc::SIGSTOP) | (stop & !me.handled)) != 0 {
            return true;
        }
        let now = std::time::Instant::now();
        if let Some(&(at, s, serves)) = self.stopping.get(&me.tgid)
            && !fresh
            && now.duration_since(at) < serves
        {
            return s;
        }
        let all = threads(me.tgid);
        let s = all.iter().any(|(_, st)| st.state == b'T');
        let serves = std::time::Duration::from_millis(50 * (1 + all.len() as u64 / 64));
        if self.stopping.len() >= 1024 {
            self.stopping
                .retain(|_, (at, _, serves)| now.duration_since(*at) < *serves);
        }
        self.stopping.insert(me.tgid, (now, s, serves));
        s
    }
}

/// Must a wait of thread `tid` end for a signal: one pending for it that it
/// does not block, SIGKILL, a stop of its process, or a signal of its
/// process given to it. A stop may be seen up to 50 ms after it ended:
/// enough to wake a parked call (park.rs), which then asks `signal_now`.
pub fn signal_for(tid: pid_t) -> bool {
    signal_seen(tid, false)
}

/// As `signal_for`, from what holds now: before a call is answered
/// ERESTARTSYS. A thread that trapped after a SIGCONT has no signal left to
/// handle, so the kernel would not restart its call: it would return 512.
pub fn signal_now(tid: pid_t) -> bool {
    signal_seen(tid, true)
}

fn signal_seen(tid: pid_t, fresh: bool) -> bool {
    let Some(me) = status(tid) else {
        return false;
    };
    let open = !me.blocked | SIGKILL_BIT;
    if me.pending & open != 0 || me.shared & SIGKILL_BIT != 0 {
        return true;
    }
    let mut c = choices().lock().unwrap_or_else(|e| e.into_inner());
    if c.stopping(&me, fresh) {
        return true;
    }
    // Choices for signals taken since are done with.
    c.given
        .retain(|(p, sig), _| *p != me.tgid || me.shared & (1 << (sig - 1)) != 0);
    let mut shared = me.shared & open;
    while shared != 0 {
        let sig = shared.trailing_zeros() + 1;
        shared &= shared - 1;
        let given = match c.given.get(&(me.tgid, sig)) {
            Some(&t) => t,
            None => {
                let t = c.choose(me.tgid, sig);
                // Those of processes gone keep no entry for long.
                if c.given.len() >= 1024 {
                    c.given
                        .retain(|(p, _), _| std::path::Path::new(&format!("/proc/{p}")).exists());
                }
                c.given.insert((me.tgid, sig), t);
                t
            }
        };
        if given == tid {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    fn state(pid: u32) -> u8 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(") ").unwrap().1.as_bytes()[0]
    }

    fn wait_state(pid: u32, stopped: bool) {
        for _ in 0..1000 {
            if (state(pid) == b'T') == stopped {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("process {pid} did not become stopped={stopped}");
    }

    #[test]
    fn a_stop_ended_by_sigcont_is_no_signal_now() {
        let mut child = crate::procfs::sleeping_child(30);
        let pid = child.id();
        // SAFETY: signals to our own child.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        wait_state(pid, true);
        // Seen stopping, and so remembered for a while.
        assert!(super::signal_for(pid as i32));
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        wait_state(pid, false);
        let now = super::signal_now(pid as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert!(!now, "a stop that SIGCONT ended still counted as a signal");
    }

    #[test]
    fn a_blocked_signal_of_the_thread_is_none() {
        // SAFETY: blocks SIGUSR2 in this thread and raises it there.
        unsafe {
            let tid = libc::gettid();
            assert!(!super::signal_for(tid));
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2);
            // Blocked: not a reason to end a wait (Linux would not either).
            assert!(!super::signal_for(tid));
            let mut got = 0;
            libc::sigwait(&set, &mut got);
            assert_eq!(got, libc::SIGUSR2);
        }
    }
}

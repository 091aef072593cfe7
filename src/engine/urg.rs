//! SIGURG to a socket's owner (F_SETOWN, FIOSETOWN, SIOCSPGRP) when an
//! out-of-band byte arrives, and SIGIO when O_ASYNC is on (sent by
//! src/engine/sigio.rs through `UrgOwner::send`), with Linux's permission
//! check.
//!
//! Linux checks each process of an owner group against the ids of whoever
//! set the owner (sigio_perm). udsfs used to read all of /proc to find the
//! group's members, for each byte: its cost grew with every process of the
//! host. The kernel makes that check itself when the signal comes from a
//! process with the setter's ids: for each setter other than root the
//! daemon forks one small signaller (`Signaller`), which takes the
//! setter's uid (ruid, euid and suid) and no groups, and from then on does
//! `kill(target, SIGURG)` for each byte it is told of, answering the
//! errno. Its uid change leaves it non-dumpable, so its user cannot ptrace
//! it; they may stop or kill it, which stops only their own SIGURG (fail
//! closed): a signaller that does not answer within `ANSWER_WITHIN` is
//! killed, and the next one is forked no sooner than a back-off allows.
//! No thread of the daemon ever changes its ids (its user could then kill
//! the daemon's thread).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::Mutex;

use super::log_limit::limited;

/// Who gets SIGURG: a process (`target` > 0) or a process group (< 0), as
/// F_SETOWN takes it, and the user who set it (for the permission check).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UrgOwner {
    pub target: i32,
    pub setter_uid: u32,
    /// A process target's start time when the owner was set: Linux holds
    /// the process itself (a struct pid), so a process that took its pid
    /// since gets nothing. None: a group, or not known.
    pub started: Option<u64>,
}

impl UrgOwner {
    /// The owner `target` set by `setter_uid`, a process's start time read now.
    pub(crate) fn new(target: i32, setter_uid: u32) -> UrgOwner {
        UrgOwner {
            target,
            setter_uid,
            started: (target > 0)
                .then(|| crate::procfs::start_time(target))
                .flatten(),
        }
    }

    /// send_sigurg: the signal goes only where the setter could send it
    /// (sigio_perm: root, or the target's real or saved uid is the setter's).
    pub(crate) fn signal(self) {
        let _ = self.send(Signal::SIGURG);
    }

    /// Sends `sig` (SIGURG, or SIGIO: src/engine/sigio.rs) where the setter
    /// could send it. False when a group's signaller did not answer.
    pub(crate) fn send(self, sig: Signal) -> bool {
        if self.target > 0 {
            self.send_to_process(sig);
            return true;
        }
        if self.setter_uid == 0 {
            if let Err(e) = killpg(Pid::from_raw(-self.target), sig) {
                log::debug!("{sig} to {}: {}", self.target, e.desc());
            }
            return true;
        }
        signallers().signal(self.setter_uid, self.target, sig)
    }

    /// One process: one look at its ids and start time, whatever the host
    /// runs, and the signal through a pidfd opened before that look, so
    /// it reaches the process looked at.
    fn send_to_process(self, sig: Signal) {
        let pid = self.target;
        let pidfd = match crate::pidfd::open(pid, 0) {
            Ok(fd) => fd,
            Err(e) => {
                log::debug!("{sig} to {pid}: {}", e.desc());
                return;
            }
        };
        if self.started.is_some() && crate::procfs::start_time(pid) != self.started {
            limited!(
                info,
                "{sig} to {pid} not sent: the process that owned the socket ended; its pid is another's now"
            );
            return;
        }
        if self.setter_uid != 0 && !uid_may_signal(self.setter_uid, pid) {
            limited!(
                info,
                "{sig} to {pid} not sent: its owner was set by uid {}, who may not signal it",
                self.setter_uid
            );
            return;
        }
        if let Err(e) = crate::pidfd::send_signal(&pidfd, sig as libc::c_int) {
            log::debug!("{sig} to {pid}: {}", e.desc());
        }
    }
}

/// Does process `pid` run with real or saved uid `uid`?
fn uid_may_signal(uid: u32, pid: i32) -> bool {
    // uids: real, effective, saved, filesystem
    u32::try_from(pid)
        .ok()
        .and_then(|p| crate::procfs::Status::read(p).ok())
        .is_some_and(|st| st.uids[0] == uid || st.uids[2] == uid)
}

/// How long a signaller may take to answer before it counts as stopped.
const ANSWER_WITHIN: Duration = Duration::from_millis(50);
/// How long after a signaller failed the next may be forked, doubled at
/// each failure in a row up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The signallers, by setter uid.
#[derive(Default)]
struct Signallers {
    by_uid: Mutex<HashMap<u32, Arc<Slot>>>,
}

#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    live: Option<Signaller>,
    /// No new signaller before this (after a failure).
    not_before: Option<Instant>,
    backoff: Duration,
}

fn signallers() -> &'static Signallers {
    static S: OnceLock<Signallers> = OnceLock::new();
    S.get_or_init(Signallers::default)
}

impl Signallers {
    /// Has `uid`'s signaller send `sig` to group `-target`; false when it
    /// did not answer (busy, gone, stopped or slow).
    fn signal(&self, uid: u32, target: i32, sig: Signal) -> bool {
        let slot = self.by_uid.lock().entry(uid).or_default().clone();
        // One byte at a time per user: a user whose signaller is stopped
        // holds up only their own SIGURG, and a daemon thread at most
        // ANSWER_WITHIN once per back-off.
        let Some(mut st) = slot.state.try_lock_for(ANSWER_WITHIN) else {
            limited!(
                info,
                "{sig} to group {} for uid {uid} dropped: its signaller is busy",
                -target
            );
            return false;
        };
        if st.live.is_none() {
            if st.not_before.is_some_and(|t| Instant::now() < t) {
                return false;
            }
            match Signaller::fork(uid) {
                Ok(s) => st.live = Some(s),
                Err(e) => {
                    limited!(warn, "{sig} for uid {uid}: no signaller: {}", e.desc());
                    st.failed();
                    return false;
                }
            }
        }
        let s = st.live.as_mut().expect("set above");
        match s.ask(target, sig as i32) {
            Ok(0) => st.backoff = Duration::ZERO,
            Ok(errno) => log::debug!(
                "{sig} to group {} as uid {uid}: {}",
                -target,
                nix::errno::Errno::from_raw(errno).desc()
            ),
            Err(Unanswered::Slow) => {
                limited!(
                    info,
                    "{sig} to group {} for uid {uid}: its signaller was slow to answer; kept",
                    -target
                );
                return false;
            }
            Err(why) => {
                limited!(
                    info,
                    "{sig} to group {} for uid {uid} not sent: its signaller {}",
                    -target,
                    why.why()
                );
                // One that served a while (its forking thread may have
                // ended) is replaced at the next byte; one that failed
                // soon after its fork waits out a back-off.
                let old = st
                    .live
                    .take()
                    .is_some_and(|s| s.born.elapsed() > MAX_BACKOFF);
                if !old {
                    st.failed();
                }
                return false;
            }
        }
        true
    }
}

impl SlotState {
    fn failed(&mut self) {
        self.backoff = (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
        self.not_before = Some(Instant::now() + self.backoff);
    }
}

/// A process running as one user that sends SIGURG and SIGIO for them.
struct Signaller {
    pid: libc::pid_t,
    /// Its pidfd: it is killed by that, never by a pid that may be reused.
    pidfd: Option<OwnedFd>,
    sock: OwnedFd,
    born: Instant,
    /// The number of the last request.
    seq: u32,
}

impl Drop for Signaller {
    fn drop(&mut self) {
        if let Some(fd) = &self.pidfd {
            let _ = crate::pidfd::send_signal(fd, libc::SIGKILL);
        }
        // SAFETY: reaps our own child (ECHILD if someone else did).
        unsafe {
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

impl Signaller {
    /// Forks a signaller for `uid` (the daemon must be root).
    fn fork(uid: u32) -> nix::Result<Signaller> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child calls only async-signal-safe functions (raw
        // system calls) before it exits, and never returns here.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(nix::errno::Errno::last());
        }
        if pid == 0 {
            // SAFETY: in the child; see `child`.
            unsafe { child(theirs.as_raw_fd(), parent, uid) }
        }
        drop(theirs);
        // (Our own child, unreaped: its number is its own now.)
        let pidfd = crate::pidfd::open(pid, 0).ok();
        Ok(Signaller {
            pid,
            pidfd,
            sock: ours,
            born: Instant::now(),
            seq: 0,
        })
    }

    /// Has the signaller send `sig` to `target`: its errno (0: sent to
    /// at least one process), or why it did not answer. Each request
    /// carries a number its answer repeats, so the late answer of one that
    /// timed out is told from the answer awaited.
    fn ask(&mut self, target: i32, sig: i32) -> Result<i32, Unanswered> {
        let fd = self.sock.as_raw_fd();
        self.seq = self.seq.wrapping_add(1);
        let mut msg = [0u8; 12];
        msg[..4].copy_from_slice(&self.seq.to_ne_bytes());
        msg[4..8].copy_from_slice(&target.to_ne_bytes());
        msg[8..].copy_from_slice(&sig.to_ne_bytes());
        // SAFETY: send reads msg.len() bytes from msg.
        let n = unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
        if n != msg.len() as isize {
            return Err(Unanswered::Gone);
        }
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll reads and writes one pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
            if ready != 1 {
                return Err(if self.stopped() {
                    Unanswered::Stopped
                } else {
                    Unanswered::Slow
                });
            }
            let mut answer = [0u8; 8];
            // SAFETY: recv writes at most answer.len() bytes into answer.
            let n = unsafe { libc::recv(fd, answer.as_mut_ptr().cast(), answer.len(), 0) };
            if n != answer.len() as isize {
                return Err(Unanswered::Gone);
            }
            let (seq, errno) = answer.split_at(4);
            if u32::from_ne_bytes(seq.try_into().expect("4 bytes")) == self.seq {
                return Ok(i32::from_ne_bytes(errno.try_into().expect("4 bytes")));
            }
            // A late answer to an earlier request: skipped.
        }
    }

    /// Whether the signaller is stopped (SIGSTOP from its user: state T or
    /// t in /proc/PID/stat), not merely slow on a loaded machine.
    fn stopped(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, a)| a.chars().next());
        matches!(state, Some('T' | 't'))
    }
}

/// Why a signaller did not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unanswered {
    /// Its socket is closed: it died (its user killed it).
    Gone,
    /// Its user stopped it.
    Stopped,
    /// Not within `ANSWER_WITHIN`, though running: the machine is busy.
    Slow,
}

impl Unanswered {
    fn why(self) -> &'static str {
        match self {
            Unanswered::Gone => "is gone",
            Unanswered::Stopped => "is stopped",
            Unanswered::Slow => "was slow to answer",
        }
    }
}

/// The signaller's life, in the forked child of a threaded daemon: raw
/// system calls only (no allocation, no locks), then `_exit`.
///
/// # Safety
/// Only in the child of `fork`, with `sock` its end of the socketpair.
unsafe fn child(sock: libc::c_int, parent: libc::pid_t, uid: u32) -> ! {
    // SAFETY: raw system calls on plain values and local buffers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::prctl(libc::PR_SET_NAME, c"udsfs-sigurg".as_ptr());
        // Out of the daemon's session and process group: a signal to those
        // (a terminal's ^C, a kill of the group) is not its user's.
        libc::setsid();
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        // Nothing of the daemon's: no descriptor but the socket.
        let close_range = |from: libc::c_uint, to: libc::c_uint| {
            libc::syscall(libc::SYS_close_range, from, to, 0)
        };
        let s = sock as libc::c_uint;
        if (s > 0 && close_range(0, s - 1) != 0) || close_range(s + 1, libc::c_uint::MAX) != 0 {
            libc::_exit(1);
        }
        // The user's ids and no group: the kernel's kill() then checks what
        // sigio_perm would for this setter. Groups first, while still root.
        let nogroup: libc::gid_t = 65534;
        if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
            || libc::syscall(libc::SYS_setresgid, nogroup, nogroup, nogroup) != 0
            || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
        {
            libc::_exit(1);
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        let mut buf = [0u8; 12];
        loop {
            let n = libc::recv(sock, buf.as_mut_ptr().cast(), buf.len(), 0);
            if n != buf.len() as isize {
                libc::_exit(0);
            }
            let target = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            let sig = i32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]);
            // SIGURG and SIGIO only, whatever its socket says.
            let sig = if sig == libc::SIGIO {
                sig
            } else {
                libc::SIGURG
            };
            let errno = if libc::kill(target, sig) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            // The request's number, then the errno.
            buf[4..8].copy_from_slice(&errno.to_ne_bytes());
            if libc::send(sock, buf.as_ptr().cast(), 8, libc::MSG_NOSIGNAL) != 8 {
                libc::_exit(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A pid whose process is not the one that was the owner (pid reuse)
    /// gets nothing; the owner itself gets the signal.
    #[test]
    fn a_process_that_took_the_owners_pid_gets_no_signal() {
        let mut child = crate::procfs::sleeping_child(30);
        let pid = child.id() as i32;
        let owner = UrgOwner::new(pid, 0);
        let started = owner.started.expect("the child's start time");
        let other = UrgOwner {
            started: Some(started + 1),
            ..owner
        };
        other.send(Signal::SIGIO);
        std::thread::sleep(Duration::from_millis(200));
        let after_other = child.try_wait().expect("try_wait");
        println!("SIGIO for the owner that started a tick later: {after_other:?}");
        assert!(
            after_other.is_none(),
            "the process with the pid was signalled"
        );
        owner.send(Signal::SIGIO);
        let st = child.wait().expect("wait");
        println!("SIGIO for the owner itself: {st:?}");
        assert_eq!(st.signal(), Some(libc::SIGIO));
    }
}

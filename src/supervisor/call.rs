//! What every emulated call works with: the supervisor's context, the
//! call being carried out (`Call`: its waits, its parking, installing a
//! descriptor), why a wait ended, and reading the target's memory and
//! arguments. emulate.rs, msg.rs and fdpass.rs share it.

use std::os::fd::{AsRawFd, OwnedFd};

use super::daemon::{Daemon, Res};
use super::listener::{ERESTARTSYS, Listener};
use super::mem;
use super::opts;
use super::target::{Dev, Task};
use udsfs_proto::route::{self, Route, Routes};

pub struct Ctx {
    pub daemon: Daemon,
    pub routes: Routes,
    pub dev: Dev,
}

/// What a call tried on the loop answers when it would wait.
pub const WOULD_WAIT: i32 = -1;

pub(super) fn say(what: &str) {
    eprintln!("udsfs run (seccomp): {what}");
}

/// Copies a sockaddr of the target (at most sizeof(sockaddr_un) bytes).
pub(super) fn read_addr(tid: i32, addr: u64, len: u64) -> Result<Vec<u8>, i32> {
    let n = (len.min(route::SUN_LEN as u64)) as usize;
    mem::read(tid, addr, n)
}

fn cwd_for(tid: i32, addr: &[u8]) -> Option<Vec<u8>> {
    // Only a relative path name needs the working directory.
    if addr.len() > 2 && addr[2] != 0 && addr[2] != b'/' {
        return cwd_of(tid);
    }
    None
}

pub(super) fn cwd_of(tid: i32) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::fs::read_link(format!("/proc/{tid}/cwd"))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

pub(super) fn classify(ctx: &Ctx, tid: i32, addr: &[u8]) -> Route {
    ctx.routes.classify(addr, cwd_for(tid, addr).as_deref())
}

/// sizeof(struct msghdr).
pub(super) const MSGHDR: usize = 56;

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_ne_bytes)
        .unwrap_or(0)
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_ne_bytes)
        .unwrap_or(0)
}

/// Why a wait ended without its event.
pub(super) enum Stop {
    /// The notification is gone (the target died or was interrupted).
    Gone,
    /// A signal waits for the thread: -ERESTARTSYS, restarted or EINTR.
    Signal,
    /// SO_RCVTIMEO or SO_SNDTIMEO ran out: EAGAIN, as Linux.
    Timeout,
    /// Tried on the loop (`Job::try_first`): the wait belongs on a thread.
    WouldWait,
}

pub(super) struct Call<'a> {
    pub ctx: &'a Ctx,
    pub(super) l: &'a Listener,
    pub task: Task,
    pub(super) id: u64,
    /// The end of this call's waits, read at its first wait (one timeout
    /// for the whole call, as Linux counts it): None not read yet.
    pub(super) deadline: std::cell::Cell<Option<Option<std::time::Instant>>>,
    /// On the notification loop: a wait ends the attempt.
    pub(super) on_loop: bool,
    /// Bytes of this send already sent by the attempt on the loop.
    pub resume: usize,
    /// Out of an attempt on the loop: the bytes it sent before it would wait.
    pub sent: std::cell::Cell<usize>,
}

pub(super) fn errno_of(stop: Stop) -> i32 {
    match stop {
        Stop::Gone => libc::EINTR,
        Stop::Signal => ERESTARTSYS,
        Stop::Timeout => libc::EAGAIN,
        Stop::WouldWait => WOULD_WAIT,
    }
}

impl Call<'_> {
    /// How long the next slice of a wait on `fd` may be; Timeout once the
    /// socket's timeout for direction `dir` (0 receive, 1 send) ran out.
    fn slice(&self, fd: &OwnedFd, dir: i32) -> Result<std::time::Duration, Stop> {
        let step = std::time::Duration::from_millis(100);
        let at = match self.deadline.get() {
            Some(at) => at,
            None => {
                let at = opts::timeout(fd, dir).map(|d| std::time::Instant::now() + d);
                self.deadline.set(Some(at));
                at
            }
        };
        match at {
            None => Ok(step),
            Some(at) => {
                let left = at.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(Stop::Timeout);
                }
                Ok(left.min(step))
            }
        }
    }

    /// Waits for `events` on `fd` without parking anywhere: short polls,
    /// and between them the notification's validity, the target's pending
    /// signals and the socket's timeout. (Temporary: when the daemon's
    /// ioctls park, the wait moves there and this becomes the cancellation
    /// of a parked request.)
    pub fn wait(&self, fd: &OwnedFd, events: i16) -> Result<(), Stop> {
        if self.on_loop {
            return Err(Stop::WouldWait);
        }
        let dir = (events & libc::POLLOUT != 0) as i32;
        loop {
            let ms = self.slice(fd, dir)?.as_millis().max(1) as i32;
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events,
                revents: 0,
            };
            // SAFETY: polls one local pollfd.
            let r = unsafe { libc::poll(&mut p, 1, ms) };
            if !self.l.valid(self.id) {
                return Err(Stop::Gone);
            }
            if r > 0 {
                return Ok(());
            }
            if self.task.signal_pending() {
                return Err(Stop::Signal);
            }
        }
    }

    /// Whether a blocking call parks in the daemon: on its own thread, not
    /// on the notification loop (there a wait ends the attempt).
    pub fn may_park(&self) -> bool {
        !self.on_loop
    }

    /// Runs `op`, a message ioctl made with MSGF_WAIT (`round` counts its
    /// attempts), where the park watcher can end it (park.rs): Gone or
    /// Signal then. An interruption for neither (the signal was taken or
    /// blocked meanwhile) makes it again.
    pub fn parked<T>(&self, mut op: impl FnMut(u32) -> Res<T>) -> Result<Res<T>, Stop> {
        let mut round = 0;
        loop {
            let r = {
                let _p = super::park::Parked::new(self.l.raw(), self.id, self.task.tid);
                op(round)
            };
            match r {
                Err(libc::EINTR) => {
                    if !self.l.valid(self.id) {
                        return Err(Stop::Gone);
                    }
                    if self.task.signal_pending() {
                        return Err(Stop::Signal);
                    }
                    round += 1;
                }
                r => return Ok(r),
            }
        }
    }

    /// A pause for what poll cannot show (a full backlog of a connect on
    /// `fd`): as `wait`, with the send timeout.
    pub(super) fn pause(&self, fd: &OwnedFd, round: u32) -> Result<(), Stop> {
        if self.on_loop {
            return Err(Stop::WouldWait);
        }
        let d = std::time::Duration::from_millis(1 << round.min(6));
        std::thread::sleep(d.min(self.slice(fd, 1)?));
        if !self.l.valid(self.id) {
            return Err(Stop::Gone);
        }
        if self.task.signal_pending() {
            return Err(Stop::Signal);
        }
        Ok(())
    }

    pub fn install(&self, new: &OwnedFd, at: Option<i32>, cloexec: bool) -> Res<i32> {
        if !self.l.valid(self.id) {
            return Err(libc::EINTR);
        }
        self.l.add_fd(self.id, new, at, cloexec)
    }
}

pub(super) fn nonblocking(fd: &OwnedFd) -> bool {
    // SAFETY: fcntl query.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// Writes `bytes` to a (buffer, length pointer) pair of the target as the
/// kernel's getname calls do: cut to the room, the full length reported.
pub(super) fn put_sized(tid: i32, out: u64, lenp: u64, bytes: &[u8]) -> Res<()> {
    let room = mem::read_u32(tid, lenp)?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    let n = (room as usize).min(bytes.len());
    mem::write(tid, out, &bytes[..n])?;
    mem::write_u32(tid, lenp, bytes.len() as u32)
}

//! What every emulated call works with: the supervisor's context, the
//! call being carried out (`Call`: its waits, its parking, installing a
//! descriptor), why a wait ended, and reading the target's memory and
//! arguments. emulate.rs, msg.rs and fdpass.rs share it.

use std::os::fd::{AsRawFd, OwnedFd};

use super::daemon::{Daemon, Res};
use super::listener::{ERESTARTSYS, Listener};
use super::mem;
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

/// Copies a sockaddr of the target (at most `route::COPY_LEN` bytes).
pub(super) fn read_addr(tid: i32, addr: u64, len: u64) -> Result<Vec<u8>, i32> {
    let n = (len.min(route::COPY_LEN as u64)) as usize;
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
}

pub(super) struct Call<'a> {
    pub ctx: &'a Ctx,
    pub(super) l: &'a Listener,
    pub task: Task,
    pub(super) id: u64,
    /// On the notification loop: a wait ends the attempt.
    pub(super) on_loop: bool,
    /// Bytes of this send already sent by the attempt on the loop.
    pub resume: usize,
    /// Out of an attempt on the loop: the bytes it sent before it would wait.
    pub sent: std::cell::Cell<usize>,
    /// The O_NONBLOCK of the call's own socket as triage read it, on the
    /// first attempt (else asked: `nonblocking`).
    pub(super) nonblock: Option<bool>,
}

pub(super) fn errno_of(stop: Stop) -> i32 {
    match stop {
        Stop::Gone => libc::EINTR,
        Stop::Signal => ERESTARTSYS,
    }
}

/// The errno of a wait on socket `fd` ended by `stop`, in direction `dir`
/// (0 receive, 1 send): as sock_intr_errno, a signal restarts the call
/// (ERESTARTSYS) only when the socket has no timeout that way; with one it
/// is EINTR even under SA_RESTART.
pub(super) fn stop_errno(stop: Stop, fd: &OwnedFd, dir: i32) -> i32 {
    match stop {
        Stop::Signal if !udsfs_calls::restart::restarts(fd.as_raw_fd(), dir) => libc::EINTR,
        stop => errno_of(stop),
    }
}

impl Call<'_> {
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
                    if super::deliver::signal_now(self.task.tid) {
                        return Err(Stop::Signal);
                    }
                    round += 1;
                }
                r => return Ok(r),
            }
        }
    }

    /// O_NONBLOCK of `s`, the call's own socket.
    pub fn nonblocking(&self, s: &OwnedFd) -> bool {
        self.nonblock.unwrap_or_else(|| nonblocking(s))
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

//! The control messages of a udsfs send and receive: what a sendmsg's ask
//! (credentials, files to pass: udsfs sockets by number, other files
//! deposited on the fd channel by tag), and the control messages a recvmsg
//! gets (SCM_CREDENTIALS, SCM_RIGHTS, SCM_PIDFD), as Linux writes them.

use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};

use libc::{c_int, msghdr};
use udsfs_calls::control::{self, Passed};
use udsfs_proto::sockopt::SCM_PIDFD;
use udsfs_proto::{cmsg, passed};

use crate::errno::Res;
use crate::files::{self, open_sock};
use crate::message::{Got, Meta};
use crate::mount::{self, Mount};
use crate::{fdpass, log, pidfd, user};

/// Writes the control messages Linux would (credentials, then sockets) and
/// returns the bytes used and whether anything was cut (MSG_CTRUNC).
///
/// The messages are made here, then copied to the program's buffer: one
/// that cannot be written gets none of them, the call goes on (put_cmsg's
/// failures are not the call's), and passed files are closed with
/// MSG_CTRUNC, as scm_detach_fds leaves them.
pub fn put_control(m: &Mount, msg: &msghdr, got: &Got, cloexec: bool) -> (usize, bool) {
    let room = if msg.msg_control.is_null() {
        0
    } else {
        msg.msg_controllen
    };
    // Nothing to put (the common case) costs nothing; else room on the stack
    // for a few, the heap beyond (what is put is bounded: MAX_RIGHTS).
    let nothing = !got.has_control();
    let mut local = [0u8; 256];
    let mut heap = Vec::new();
    let buf: &mut [u8] = if nothing || room == 0 {
        &mut []
    } else if room <= local.len() {
        &mut local[..room]
    } else {
        heap.resize(room.min(CONTROL_MAX), 0);
        &mut heap[..]
    };
    let (used, cut) = put_into(m, buf, got, cloexec);
    if used == 0 {
        return (0, cut);
    }
    if user::write_from(msg.msg_control.cast(), &buf[..used]).is_ok() {
        return (used, cut);
    }
    let mut dropped = false;
    for (level, ty, payload) in cmsg::parse(&buf[..used]).unwrap_or_default() {
        if level == libc::SOL_SOCKET && (ty == libc::SCM_RIGHTS || ty == SCM_PIDFD) {
            for fd in fds(payload) {
                // SAFETY: installed here, never handed out.
                unsafe { libc::close(fd) };
            }
            dropped |= ty == libc::SCM_RIGHTS;
        }
    }
    (0, cut || dropped)
}

/// net.core.optmem_max's default: a sendmsg's control buffer larger than
/// this is ENOBUFS (sock_kmalloc refuses it); what a receive puts (credentials,
/// MAX_RIGHTS descriptors, a pidfd) takes far less.
const CONTROL_MAX: usize = 128 * 1024;

/// Writes the control messages into `buf`; (bytes used, MSG_CTRUNC).
fn put_into(m: &Mount, buf: &mut [u8], got: &Got, cloexec: bool) -> (usize, bool) {
    let (used, cut) = control::put(&Here(m), buf, got, cloexec);
    lowest_rights(&mut buf[..used], cloexec);
    (used, cut)
}

/// The SCM_RIGHTS descriptors written in `buf` moved to the lowest free
/// numbers, in order (files::lowest_in_order), and written back.
fn lowest_rights(buf: &mut [u8], cloexec: bool) {
    let base = buf.as_ptr() as usize;
    let Ok(msgs) = cmsg::parse(buf) else {
        return;
    };
    let spans: Vec<(usize, usize)> = msgs
        .iter()
        .filter(|(level, ty, _)| *level == libc::SOL_SOCKET && *ty == libc::SCM_RIGHTS)
        .map(|(_, _, p)| (p.as_ptr() as usize - base, p.len()))
        .collect();
    for (at, len) in spans {
        let span = &mut buf[at..at + len];
        let mut fds: Vec<c_int> = cmsg::ints(span).collect();
        files::lowest_in_order(&mut fds, cloexec);
        for (c, fd) in span.chunks_exact_mut(4).zip(fds) {
            c.copy_from_slice(&fd.to_ne_bytes());
        }
    }
}

/// This process's descriptors, for udsfs_calls::control.
struct Here<'a>(&'a Mount);

impl control::Installer for Here<'_> {
    fn socket(&self, id: u64, cloexec: bool) -> Res<c_int> {
        let (number, nonblock) = passed::socket_of(id);
        open_sock(self.0, number, nonblock, cloexec)
    }

    fn release(&self, id: u64) {
        if let Ok(fd) = open_sock(self.0, passed::socket_of(id).0, true, true) {
            // SAFETY: fd was just opened here.
            unsafe { libc::close(fd) };
        }
    }

    fn claim(&self, tags: &[u64], cloexec: bool) -> Res<Vec<OwnedFd>> {
        fdpass::connect(self.0)?.claim(tags, cloexec)
    }

    fn install(&self, f: OwnedFd, cloexec: bool) -> Res<c_int> {
        if cloexec {
            // SAFETY: our own descriptor.
            unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        Ok(f.into_raw_fd())
    }

    fn pidfd(&self, pid: i32) -> Res<OwnedFd> {
        pidfd::open(pid)
    }

    fn say(&self, what: &str) {
        log::say(what);
    }
}

impl control::Passer for Here<'_> {
    type File = BorrowedFd<'static>;

    fn passed(&self, fd: c_int) -> Res<Passed<BorrowedFd<'static>>> {
        // SAFETY: F_GETFD only asks.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(libc::EBADF);
        }
        if mount::udsfs_fd(fd) {
            return mount::sock_id(fd)
                .ok_or(libc::EBADF)
                .map(|n| Passed::Socket(passed::socket_item(n, fd)));
        }
        // SAFETY: open, and the program's for the length of its sendmsg.
        Ok(Passed::File(unsafe { BorrowedFd::borrow_raw(fd) }))
    }

    fn channel(&self) -> Res<fdpass::Channel> {
        fdpass::connect(self.0)
    }

    fn say(&self, what: &str) {
        log::say(what);
    }
}

/// A sendmsg's control buffer, copied in as ____sys_sendmsg copies it:
/// EFAULT when it cannot be read, ENOBUFS past what the kernel would
/// allocate for it (sock_kmalloc under net.core.optmem_max).
pub fn control_bytes(msg: &msghdr) -> Res<Vec<u8>> {
    if msg.msg_control.is_null() || msg.msg_controllen == 0 {
        return Ok(Vec::new());
    }
    if msg.msg_controllen > CONTROL_MAX {
        return Err(libc::ENOBUFS);
    }
    let mut buf = vec![0u8; msg.msg_controllen];
    user::read_into(&mut buf, msg.msg_control.cast())?;
    Ok(buf)
}

use cmsg::ints as fds;

/// What a sendmsg's control messages ask (udsfs_calls::control::parse).
pub fn parse_control(m: &Mount, control: &[u8], meta: &mut Meta) -> Res<()> {
    let asked = control::parse(&Here(m), control)?;
    meta.creds = asked.creds;
    meta.rights = asked.rights;
    meta.channel = asked.channel;
    Ok(())
}

/// Does a kernel sendmsg try to pass a udsfs socket? It cannot carry it.
/// (A control buffer that cannot be read is the kernel's EFAULT.)
pub fn passes_udsfs(msg: &msghdr) -> bool {
    let control = control_bytes(msg).unwrap_or_default();
    cmsg::parse(&control)
        .unwrap_or_default()
        .iter()
        .any(|(level, ty, payload)| {
            *level == libc::SOL_SOCKET
                && *ty == libc::SCM_RIGHTS
                && fds(payload).any(mount::udsfs_fd)
        })
}

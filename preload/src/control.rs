//! The control messages of a udsfs send and receive: what a sendmsg's ask
//! (credentials, files to pass: udsfs sockets by number, other files
//! deposited on the fd channel by tag), and the control messages a recvmsg
//! gets (SCM_CREDENTIALS, SCM_RIGHTS, SCM_PIDFD), as Linux writes them.

use libc::{c_int, msghdr};
use udsfs_proto::cmsg;
use udsfs_proto::ioctl::MAX_RIGHTS;
use udsfs_proto::passed::is_file_tag;
use udsfs_proto::sockopt::SCM_PIDFD;

use crate::errno::Res;
use crate::files::open_sock;
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
    let nothing = got.creds.is_none() && got.rights.is_empty() && got.pidfd.is_none();
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
    let mut w = cmsg::Writer::new(buf);
    let mut cut = got.ctrunc;
    if let Some(c) = got.creds {
        let b: Vec<u8> = c.iter().flat_map(|x| x.to_ne_bytes()).collect();
        // put_cmsg writes what fits of a message whose header fits, cut short.
        cut |= !w.put(libc::SOL_SOCKET, libc::SCM_CREDENTIALS, &b);
    }
    // Received files and the sender's pidfd come back in one claim.
    let mut tags: Vec<u64> = got
        .rights
        .iter()
        .copied()
        .filter(|&i| is_file_tag(i))
        .collect();
    tags.extend(got.pidfd_tag);
    let mut files = claim_files(m, &tags, cloexec);
    // The files of `rights` come first in `files`, in order; the pidfd last.
    let mut next_file = 0;
    if !got.rights.is_empty() {
        let fit = w.room().saturating_sub(cmsg::HDR) / std::mem::size_of::<c_int>();
        let mut fds = Vec::new();
        for (i, &id) in got.rights.iter().enumerate() {
            let fd = if is_file_tag(id) {
                next_file += 1;
                files[next_file - 1].take().ok_or(libc::EBADF)
            } else if i < fit {
                open_sock(m, id, false, cloexec)
            } else {
                continue;
            };
            match fd {
                // Past the room of the control buffer: closed, as Linux does.
                Ok(fd) if i >= fit => {
                    // SAFETY: our own new descriptor.
                    unsafe { libc::close(fd) };
                }
                Ok(fd) => fds.push(fd),
                // Past RLIMIT_NOFILE Linux stops installing, silently: MSG_CTRUNC.
                Err(e) => {
                    if e != libc::EMFILE {
                        log::say(&format!(
                            "received {} could not be had: errno {e}",
                            passed_name(id)
                        ));
                    }
                    cut = true;
                    break;
                }
            }
        }
        if fit < got.rights.len() {
            cut = true;
        }
        // Linux closes the passed files it did not install (scm_destroy).
        // The daemon did so for those past the room (MSGF_ROOM); a message
        // read from the `msg` file brings all: opening an entry adopts it,
        // closing it lets the socket go. Past RLIMIT_NOFILE they cannot be
        // opened and wait for the receiver's close. Files claimed for them
        // close here too.
        let nfiles = got.rights.iter().filter(|&&i| is_file_tag(i)).count();
        for f in files[next_file..nfiles].iter_mut().filter_map(Option::take) {
            // SAFETY: claimed here, never handed out.
            unsafe { libc::close(f) };
        }
        next_file = nfiles;
        let installed = fds.len();
        for &id in got.rights[installed..].iter().filter(|&&i| !is_file_tag(i)) {
            if let Ok(fd) = open_sock(m, id, true, true) {
                // SAFETY: fd was just opened here.
                unsafe { libc::close(fd) };
            }
        }
        if !fds.is_empty() {
            let b: Vec<u8> = fds.iter().flat_map(|x| x.to_ne_bytes()).collect();
            w.put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &b);
        }
    }
    // SCM_PIDFD comes last, as scm_recv_unix puts it; a message sent with
    // no credentials (before anyone asked for them) has none.
    let held = got
        .pidfd_tag
        .and_then(|_| files.get_mut(next_file).and_then(Option::take));
    if let Some(pid) = got.pidfd.filter(|&p| p > 0) {
        if w.room() >= cmsg::HDR + 4 {
            // The daemon's pidfd names the sender even once it has exited;
            // without one, a pidfd of the pid it had.
            let fd = match held {
                Some(fd) => {
                    // SAFETY: our own new descriptor; pidfds are close-on-exec.
                    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
                    Ok(fd)
                }
                None => pidfd::open(pid),
            };
            match fd {
                Ok(fd) => {
                    w.put(libc::SOL_SOCKET, SCM_PIDFD, &fd.to_ne_bytes());
                }
                Err(_) => cut = true,
            }
        } else {
            if let Some(fd) = held {
                // SAFETY: our own descriptor, not handed out.
                unsafe { libc::close(fd) };
            }
            cut = true;
        }
    } else if let Some(fd) = held {
        // SAFETY: as above.
        unsafe { libc::close(fd) };
    }
    (w.used(), cut)
}

fn passed_name(id: u64) -> String {
    if is_file_tag(id) {
        "file".to_string()
    } else {
        format!("socket {id}")
    }
}

/// Received files (by tag), claimed from the daemon in one round trip;
/// None for each one that could not be had.
fn claim_files(m: &Mount, tags: &[u64], cloexec: bool) -> Vec<Option<c_int>> {
    if tags.is_empty() {
        return Vec::new();
    }
    let got = fdpass::connect(m).and_then(|ch| fdpass::claim(&ch, tags, cloexec));
    match got {
        Ok(fds) => {
            let mut out: Vec<Option<c_int>> = fds.into_iter().map(Some).collect();
            out.resize(tags.len(), None);
            out
        }
        Err(e) => {
            log::say(&format!(
                "{} received files could not be claimed from the daemon: errno {e}",
                tags.len()
            ));
            vec![None; tags.len()]
        }
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

/// What a sendmsg's control messages ask: credentials, and files to pass.
/// udsfs sockets of this mount go by number; any other file (a regular
/// file, pipe, eventfd, kernel socket, pidfd) goes to the daemon over its
/// fd channel first and by tag.
pub fn parse_control(m: &Mount, control: &[u8], meta: &mut Meta) -> Res<()> {
    let mut foreign = Vec::new();
    for (level, ty, payload) in cmsg::parse(control)? {
        match (level, ty) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                for pfd in fds(payload) {
                    // SAFETY: F_GETFD only asks.
                    if unsafe { libc::fcntl(pfd, libc::F_GETFD) } < 0 {
                        return Err(libc::EBADF);
                    }
                    if mount::udsfs_fd(pfd) {
                        meta.rights.push(mount::sock_id(pfd).ok_or(libc::EBADF)?);
                    } else {
                        foreign.push((meta.rights.len(), pfd));
                        meta.rights.push(0);
                    }
                }
                if meta.rights.len() > MAX_RIGHTS {
                    return Err(libc::EINVAL);
                }
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if payload.len() >= 12 => {
                let w: Vec<u32> = fds(payload).take(3).map(|x| x as u32).collect();
                meta.creds = Some([w[0], w[1], w[2]]);
            }
            _ => return Err(libc::EINVAL),
        }
    }
    if !foreign.is_empty() {
        let ch = fdpass::connect(m)?;
        let raw: Vec<c_int> = foreign.iter().map(|(_, fd)| *fd).collect();
        let tags = ch.deposit(&raw).inspect_err(|e| {
            log::say(&format!(
                "sendmsg: the daemon refused files {raw:?}: errno {e}"
            ))
        })?;
        for ((slot, _), tag) in foreign.iter().zip(tags) {
            meta.rights[*slot] = tag;
        }
        meta.channel = Some(ch);
    }
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

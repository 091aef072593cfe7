//! The mount's own files that make and open udsfs sockets: a socket's data
//! file (`.udsfs/sock/N/data`), the control handles of `.udsfs/TYPE/clone`,
//! `pair` and a listener's `accept`, whose text is the new sockets' numbers.

use std::ffi::CString;

use libc::c_int;

use udsfs_calls::fileflags;

use crate::errno::{errno, last, set_errno, Res};
use crate::mount::Mount;

pub fn open_file(path: &CString, flags: c_int) -> Res<c_int> {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return last();
    }
    Ok(fd)
}

/// Closes a descriptor this library opened, leaving errno as it was.
pub fn close(fd: c_int) {
    let e = errno();
    // SAFETY: closes a descriptor this library opened.
    unsafe { libc::close(fd) };
    set_errno(e);
}

/// The text of a control handle ("N\n" or "N M\n").
pub fn read_numbers(fd: c_int) -> Res<Vec<u64>> {
    let mut buf = [0u8; 64];
    // SAFETY: reads into a local buffer.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return last();
    }
    let text = std::str::from_utf8(&buf[..n as usize]).map_err(|_| libc::EIO)?;
    text.split_whitespace()
        .map(|w| w.parse().map_err(|_| libc::EIO))
        .collect()
}

/// Opens control handle `path` and runs `f` on its numbers while it is
/// open (it holds the new sockets until their data files open); then
/// closes it.
pub fn with_handle<T>(path: &CString, flags: c_int, f: impl FnOnce(&[u64]) -> Res<T>) -> Res<T> {
    with_open(open_file(path, flags)?, f)
}

/// `with_handle` of a handle already open (closed here).
pub fn with_open<T>(h: c_int, f: impl FnOnce(&[u64]) -> Res<T>) -> Res<T> {
    let r = read_numbers(h).and_then(|ids| f(&ids));
    close(h);
    r
}

fn open_flags(nonblock: bool, cloexec: bool) -> c_int {
    libc::O_RDWR
        | fileflags::OPEN
        | if nonblock { libc::O_NONBLOCK } else { 0 }
        | if cloexec { libc::O_CLOEXEC } else { 0 }
}

/// Opens the data file of socket `id` (adopting it if it was received).
pub fn open_sock(m: &Mount, id: u64, nonblock: bool, cloexec: bool) -> Res<c_int> {
    let path = m.sock_file(id, "data");
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), open_flags(nonblock, cloexec)) };
    if fd < 0 {
        return last();
    }
    Ok(fd)
}

/// `fd` at the lowest free descriptor number, as Linux numbers a new
/// descriptor (fs/file.c alloc_fd): socketpair's and accept's data files
/// are opened while the control handle that names them is held, a number
/// below them that is free again once the handle is closed; the program
/// would see the hole (gpg-agent's log named every connection fd 11, the
/// kernel's fd 10). F_DUPFD takes the lowest free number atomically (a
/// dup3 onto the handle's old number could close a file another thread
/// just opened there); O_NONBLOCK is the file's and goes along, FD_CLOEXEC
/// is the number's and is asked again. No round trip: the mount answers
/// FLUSH with ENOSYS, so closing the copy's old number is the kernel's
/// alone. With nothing free below, `fd` stays (the copy is closed).
pub fn lowest(fd: c_int, cloexec: bool) -> c_int {
    let low = dup_from(fd, 0, cloexec);
    if low < 0 {
        return fd;
    }
    let (keep, drop) = if low < fd { (low, fd) } else { (fd, low) };
    close(drop);
    keep
}

/// `fds`, new descriptors of one call, at the lowest free numbers in their
/// order, as scm_detach_fds installs received files one get_unused_fd at a
/// time: a recvmsg's files claimed from the fd channel are opened before
/// its sockets, above the channel's own connection (a file then a socket
/// came as 12 and 11, the kernel's 11 and 12). Each goes above them all
/// first, so every number among them is free, then down (`lowest`).
pub fn lowest_in_order(fds: &mut [c_int], cloexec: bool) {
    if let [fd] = fds {
        *fd = lowest(*fd, cloexec);
        return;
    }
    let Some(above) = fds.iter().max().map(|&m| m.saturating_add(1)) else {
        return;
    };
    for fd in fds.iter_mut() {
        let up = dup_from(*fd, above, cloexec);
        if up >= 0 {
            close(*fd);
            *fd = up;
        }
    }
    for fd in fds.iter_mut() {
        *fd = lowest(*fd, cloexec);
    }
}

/// A copy of `fd` at the lowest free number from `min` (F_DUPFD, with
/// FD_CLOEXEC as `cloexec` says), or -1; errno as it was.
fn dup_from(fd: c_int, min: c_int, cloexec: bool) -> c_int {
    let cmd = if cloexec {
        libc::F_DUPFD_CLOEXEC
    } else {
        libc::F_DUPFD
    };
    let e = errno();
    // SAFETY: duplicates a descriptor this library opened or installed.
    let copy = unsafe { libc::fcntl(fd, cmd, min) };
    set_errno(e);
    copy
}

pub fn nonblocking(fd: c_int) -> bool {
    // SAFETY: fcntl query.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// fcntl's argument for the kernel: F_SETFL's on a udsfs socket keeps
/// O_DIRECT, or fails EINVAL (errno set) when the program asks for it
/// (udsfs_calls::fileflags); others' as they are. `udsfs`: whether the
/// descriptor is a udsfs socket (asked only for F_SETFL).
pub fn fcntl_arg(
    cmd: c_int,
    arg: libc::c_ulong,
    udsfs: &mut impl FnMut() -> bool,
) -> Result<libc::c_ulong, ()> {
    if cmd != libc::F_SETFL || !udsfs() {
        return Ok(arg);
    }
    fileflags::kept(arg as c_int)
        .map(|a| a as libc::c_ulong)
        .map_err(set_errno)
}

/// fcntl's answer `r` as the program sees it: F_GETFL's of a udsfs socket
/// without O_DIRECT and O_LARGEFILE (udsfs_calls::fileflags). Only a file
/// with O_DIRECT set is asked about (`udsfs`: every data file has it; few
/// others do).
pub fn fcntl_result(cmd: c_int, r: c_int, udsfs: &mut impl FnMut() -> bool) -> c_int {
    if cmd == libc::F_GETFL && r >= 0 && r & libc::O_DIRECT != 0 && udsfs() {
        fileflags::visible(r)
    } else {
        r
    }
}

//! udsfs sockets as descriptors: making them (socket, socketpair, accept,
//! received rights), turning a kernel AF_UNIX socket into one at the call
//! that decides it, and the control ioctls on them.

use std::ffi::CString;

use libc::{c_int, sockaddr, sockaddr_un, socklen_t};

use crate::abi::*;
use crate::mount::{self, Mount};
use crate::{errno, real, set_errno};

pub type Res<T> = Result<T, c_int>;

fn last<T>() -> Res<T> {
    Err(errno())
}

/// One control operation.
pub fn ctl(fd: c_int, op: u32, arg: i32, addr: &[u8]) -> Res<Ctl> {
    ctl_given(fd, op, arg, addr, &[])
}

/// bind() of `wire`, which the program gave as sun_path `given` (empty for
/// an abstract name or autobind): the daemon reports `given` back, as Linux.
pub fn bind(fd: c_int, wire: &[u8], given: &[u8]) -> Res<()> {
    ctl_given(fd, OP_BIND, 0, wire, given).map(|_| ())
}

fn ctl_given(fd: c_int, op: u32, arg: i32, addr: &[u8], given: &[u8]) -> Res<Ctl> {
    // SAFETY: Ctl is plain integers; the ioctl copies exactly its size.
    let mut c: Ctl = unsafe { std::mem::zeroed() };
    let n = given.len().min(ADDR_MAX);
    c.given[..n].copy_from_slice(&given[..n]);
    c.given_len = n as u32;
    let n = addr.len().min(ADDR_MAX);
    c.addr[..n].copy_from_slice(&addr[..n]);
    c.addr_len = n as u32;
    ctl_with(fd, op, arg, c)
}

/// A control ioctl with `c`'s inputs (the values in `v`, for one).
pub fn ctl_with(fd: c_int, op: u32, arg: i32, mut c: Ctl) -> Res<Ctl> {
    c.op = op;
    c.arg = arg;
    // SAFETY: the kernel copies size_of::<Ctl>() bytes in and out of c.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            fd,
            UDSFS_IOC_CTL as libc::c_ulong,
            &mut c as *mut Ctl,
        )
    };
    if r < 0 {
        return last();
    }
    Ok(c)
}

pub fn info(fd: c_int) -> Res<[i64; 13]> {
    ctl(fd, OP_INFO, 0, &[]).map(|c| c.v)
}

fn open_file(path: &CString, flags: c_int) -> Res<c_int> {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return last();
    }
    Ok(fd)
}

fn close(fd: c_int) {
    let e = errno();
    // SAFETY: closes a descriptor this library opened.
    unsafe { libc::close(fd) };
    set_errno(e);
}

/// The text of a control handle ("N\n" or "N M\n").
fn read_numbers(fd: c_int) -> Res<Vec<u64>> {
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

fn open_flags(nonblock: bool, cloexec: bool) -> c_int {
    libc::O_RDWR
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

pub fn type_name(ty: c_int) -> Option<&'static str> {
    match ty {
        libc::SOCK_STREAM => Some("stream"),
        // unix_create makes SOCK_RAW a datagram socket.
        libc::SOCK_DGRAM | libc::SOCK_RAW => Some("dgram"),
        libc::SOCK_SEQPACKET => Some("seqpacket"),
        _ => None,
    }
}

/// socketpair(AF_UNIX): `.udsfs/TYPE/pair`.
pub fn pair(m: &Mount, ty: c_int, sv: &mut [c_int; 2]) -> Res<()> {
    let nonblock = ty & libc::SOCK_NONBLOCK != 0;
    let cloexec = ty & libc::SOCK_CLOEXEC != 0;
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let name = type_name(base).ok_or(libc::EPROTONOSUPPORT)?;
    let h = open_file(&m.ctrl_file(&format!("{name}/pair")), libc::O_RDWR)?;
    let ids = read_numbers(h);
    let res = ids.and_then(|ids| {
        let [a, b] = ids[..] else {
            return Err(libc::EIO);
        };
        let fa = open_sock(m, a, nonblock, cloexec)?;
        match open_sock(m, b, nonblock, cloexec) {
            Ok(fb) => Ok([fa, fb]),
            Err(e) => {
                close(fa);
                Err(e)
            }
        }
    });
    close(h);
    *sv = res?;
    Ok(())
}

/// A new udsfs socket of the kernel socket `fd`'s type, put in `fd`'s
/// place with its O_NONBLOCK, FD_CLOEXEC, SO_PASSCRED, SO_PASSPIDFD, SO_SNDBUF and SO_RCVBUF.
pub fn convert(m: &Mount, fd: c_int) -> Res<()> {
    let mut ty: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: getsockopt writes one int.
    if unsafe {
        real::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut c_int).cast(),
            &mut len,
        )
    } < 0
    {
        return last();
    }
    let name = type_name(ty).ok_or(libc::EPROTOTYPE)?;
    let flag = |opt: c_int| {
        let mut on: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: as above.
        unsafe {
            real::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut on as *mut c_int).cast(),
                &mut len,
            );
        }
        on
    };
    let passcred = flag(libc::SO_PASSCRED);
    let passpidfd = flag(crate::pidfd::SO_PASSPIDFD);
    // SAFETY: fcntl queries only.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    if fl < 0 || fdfl < 0 {
        return last();
    }
    let sizes = crate::opts::kernel_sizes(fd);
    let h = open_file(&m.ctrl_file(&format!("{name}/clone")), libc::O_RDWR)?;
    let id = read_numbers(h).and_then(|v| v.first().copied().ok_or(libc::EIO));
    let new = id.and_then(|id| open_sock(m, id, fl & libc::O_NONBLOCK != 0, true));
    close(h);
    let new = new?;
    let cloexec = if fdfl & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    // SAFETY: dup3 replaces the program's kernel socket with the udsfs file.
    let r = unsafe { libc::dup3(new, fd, cloexec) };
    close(new);
    if r < 0 {
        return last();
    }
    if passcred != 0 {
        ctl(fd, OP_SET_PASSCRED, 1, &[])?;
    }
    if passpidfd != 0 {
        ctl(fd, OP_SET_PASSPIDFD, 1, &[])?;
    }
    crate::opts::restore_sizes(fd, &sizes)
}

/// Is `fd` a kernel AF_UNIX socket (that may become a udsfs one)?
pub fn kernel_unix(fd: c_int) -> bool {
    let mut d: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: getsockopt writes one int.
    let r = unsafe {
        real::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut d as *mut c_int).cast(),
            &mut len,
        )
    };
    r == 0 && d == libc::AF_UNIX
}

/// Where an address given to bind, connect or sendto goes.
pub enum Route {
    /// Not AF_UNIX, or a name the kernel keeps.
    Kernel,
    /// bind() with only a family: an autobound abstract name.
    Autobind,
    /// An address in the wire format of `ioctl_abi` (tree path or NUL + name).
    Udsfs(Vec<u8>),
}

/// Classifies `addr` (NULL-safe).
///
/// # Safety
/// `addr` must point to `len` readable bytes.
pub unsafe fn route(m: &Mount, addr: *const sockaddr, len: socklen_t) -> Route {
    let fam_len = std::mem::size_of::<libc::sa_family_t>();
    if addr.is_null() || (len as usize) < fam_len {
        return Route::Kernel;
    }
    // SAFETY: at least the family is readable.
    if unsafe { (*addr).sa_family } as c_int != libc::AF_UNIX {
        return Route::Kernel;
    }
    let plen = (len as usize).min(std::mem::size_of::<sockaddr_un>()) - fam_len;
    if plen == 0 {
        return Route::Autobind;
    }
    // SAFETY: plen bytes after the family are readable (len says so).
    let path = unsafe { std::slice::from_raw_parts((addr as *const u8).add(fam_len), plen) };
    if path[0] == 0 {
        return Route::Udsfs(path.to_vec());
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let path = &path[..end];
    let abs = if path.starts_with(b"/") {
        mount::normalize(path, b"/")
    } else {
        let Ok(cwd) = std::env::current_dir() else {
            return Route::Kernel;
        };
        use std::os::unix::ffi::OsStrExt;
        mount::normalize(path, cwd.as_os_str().as_bytes())
    };
    match m.tree_path(&abs) {
        Some(t) => Route::Udsfs(t),
        None => Route::Kernel,
    }
}

/// The sun_path of a path address as the program wrote it (up to its NUL):
/// what Linux reports back for a name bound with it. Empty for an abstract
/// name or autobind.
///
/// # Safety
/// `addr` must point to `len` readable bytes (or be NULL).
pub unsafe fn given_path(addr: *const sockaddr, len: socklen_t) -> Vec<u8> {
    let fam_len = std::mem::size_of::<libc::sa_family_t>();
    if addr.is_null() || (len as usize) <= fam_len {
        return Vec::new();
    }
    let plen = (len as usize).min(std::mem::size_of::<sockaddr_un>()) - fam_len;
    // SAFETY: plen bytes after the family are readable (len says so).
    let path = unsafe { std::slice::from_raw_parts((addr as *const u8).add(fam_len), plen) };
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    path[..end].to_vec()
}

/// The errno of bind() on udsfs socket `fd` to `path`, a kernel path
/// outside the mount and its routes: what unix_bind's mknod would say when
/// the path exists (EADDRINUSE) or its directory does not (ENOENT,
/// ENOTDIR, EACCES), else EINVAL, as udsfs keeps no kernel names.
pub fn kernel_path_bind_error(fd: c_int, path: &[u8]) -> c_int {
    let exists = |p: &[u8]| -> Result<(), c_int> {
        let c = CString::new(p).map_err(|_| libc::EINVAL)?;
        // SAFETY: lstat fills a zeroed struct for a NUL-terminated path.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::lstat(c.as_ptr(), &mut st) } == 0 {
            Ok(())
        } else {
            Err(errno())
        }
    };
    if path.is_empty() {
        return libc::EINVAL;
    }
    if exists(path).is_ok() {
        return libc::EADDRINUSE;
    }
    let dir = match path.iter().rposition(|&b| b == b'/') {
        Some(0) => &b"/"[..],
        Some(i) => &path[..i],
        None => &b"."[..],
    };
    if let Err(e) = exists(dir) {
        return e;
    }
    crate::log::say(&format!(
        "bind on udsfs socket fd {fd}: the path is outside the mount and its routes (EINVAL)"
    ));
    libc::EINVAL
}

/// Writes a daemon address (wire format) as a sockaddr_un, truncated to the
/// caller's room; `*len` becomes the full length, as Linux reports it.
/// `flags` `ADDR_AS_GIVEN`: `wire` is a sun_path as a program gave it.
///
/// # Safety
/// `out` must have `*len` writable bytes; `len` may be NULL only with `out`.
pub unsafe fn put_addr(
    m: &Mount,
    wire: &[u8],
    flags: u32,
    out: *mut sockaddr,
    len: *mut socklen_t,
) {
    if out.is_null() || len.is_null() {
        return;
    }
    let mut bytes: Vec<u8> = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes().to_vec();
    if flags & ADDR_AS_GIVEN != 0 {
        bytes.extend_from_slice(wire);
        bytes.push(0);
    } else if let Some(&0) = wire.first() {
        bytes.extend_from_slice(wire);
    } else if !wire.is_empty() {
        bytes.extend_from_slice(&m.shown_path(wire));
        bytes.push(0);
    }
    // SAFETY: the caller's room is *len bytes.
    unsafe {
        let room = (*len as usize).min(bytes.len());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out as *mut u8, room);
        *len = bytes.len() as socklen_t;
    }
}

/// A name for `connect` written to a ctl file: every byte that is not
/// plainly safe as \xHH.
fn ctl_escape(wire: &[u8]) -> String {
    let (prefix, bytes) = match wire.first() {
        Some(0) => ("@", &wire[1..]),
        _ => ("", wire),
    };
    let mut s = prefix.to_string();
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"/._-".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

fn nonblocking(fd: c_int) -> bool {
    // SAFETY: fcntl query.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// connect(): the ioctl never parks; a blocking caller facing a full
/// backlog writes `connect` to the socket's ctl file, which parks.
pub fn connect(m: &Mount, fd: c_int, wire: &[u8]) -> Res<()> {
    match ctl(fd, OP_CONNECT, 0, wire) {
        Err(libc::EAGAIN) if !nonblocking(fd) => {
            let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
            let h = open_file(&m.sock_file(id, "ctl"), libc::O_WRONLY)?;
            let line = format!("connect {}\n", ctl_escape(wire));
            // SAFETY: writes a local buffer.
            let r = unsafe { libc::write(h, line.as_ptr().cast(), line.len()) };
            let res = if r < 0 { last() } else { Ok(()) };
            close(h);
            res
        }
        r => r.map(|_| ()),
    }
}

/// accept4(): opening `.udsfs/sock/N/accept` parks until a connection comes
/// (or fails with EAGAIN under O_NONBLOCK) and gives the new socket's
/// control handle, whose number names its data file.
pub fn accept(m: &Mount, fd: c_int, flags: c_int) -> Res<c_int> {
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return Err(libc::EINVAL);
    }
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let nb = if nonblocking(fd) { libc::O_NONBLOCK } else { 0 };
    // With no slot left this open fails (EMFILE) before it reaches the
    // daemon: the connection stays queued, as Linux leaves it.
    let h = open_file(&m.sock_file(id, "accept"), libc::O_RDONLY | nb)?;
    let (nb, cloexec) = (
        flags & libc::SOCK_NONBLOCK != 0,
        flags & libc::SOCK_CLOEXEC != 0,
    );
    let n = match read_numbers(h).and_then(|v| v.first().copied().ok_or(libc::EIO)) {
        Ok(n) => n,
        Err(e) => {
            close(h);
            return Err(e);
        }
    };
    let r = open_sock(m, n, nb, cloexec);
    if r != Err(libc::EMFILE) {
        close(h);
        return r;
    }
    // One slot, taken by the control handle: the listener keeps the socket
    // while the handle closes, and the socket's data file takes the slot.
    // SAFETY: Ctl is plain integers.
    let mut c: Ctl = unsafe { std::mem::zeroed() };
    c.v[0] = n as i64;
    let kept = ctl_with(fd, OP_KEEP_ACCEPTED, 0, c);
    close(h);
    open_sock(m, kept?.v[0] as u64, nb, cloexec)
}

/// getsockname (peer = false) and getpeername (peer = true).
///
/// # Safety
/// As for getsockname.
pub unsafe fn name(
    m: &Mount,
    fd: c_int,
    peer: bool,
    out: *mut sockaddr,
    len: *mut socklen_t,
) -> Res<()> {
    let c = ctl(fd, OP_GETNAME, peer as i32, &[])?;
    if out.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: as the caller promised.
    unsafe { put_addr(m, &c.addr[..c.addr_len as usize], c.addr_flags, out, len) };
    Ok(())
}

/// Raises SIGPIPE in this thread, as unix_stream_sendmsg does.
pub fn sigpipe() {
    // SAFETY: tgkill only sends a signal to this thread.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::gettid(),
            libc::SIGPIPE,
        );
    }
}

pub fn is_stream(fd: c_int) -> bool {
    info(fd).is_ok_and(|v| v[INFO_TYPE] == libc::SOCK_STREAM as i64)
}

pub fn is_nonblocking(fd: c_int) -> bool {
    nonblocking(fd)
}

//! libudsfs_preload: runs an unmodified program's AF_UNIX sockets on a udsfs
//! mount (UDSFS_MOUNT; `udsfs run` sets it up).
//!
//! A socket is a kernel socket until the call that decides it (bind,
//! connect or sendto to a name in the mount or a routed prefix, an abstract
//! name, autobind) or is made by socketpair(); then the program's descriptor
//! is the socket's `.udsfs/sock/N/data` file, so read, write, poll, dup,
//! fork, exec and close need no help. The library keeps no table: a call on
//! a descriptor first goes to the C library, and only when the kernel says
//! ENOTSOCK does the library look at the descriptor's device and inode to
//! see whether it is a udsfs socket. Kernel sockets and other files cost
//! nothing extra.
#![allow(clippy::missing_safety_doc)] // the C library's contracts apply

mod closes;
mod control;
mod convert;
mod epolls;
mod errno;
mod exec;
mod exec_list;
mod fdgen;
mod fdpass;
mod files;
mod gadget;
use udsfs_calls::client as ioctl;
mod iovs;
mod lane;
mod lane_hold;
mod lane_ready;
mod lane_spin;
mod lane_turn;
mod log;
mod message;
mod mount;
mod msg;
mod netdev;
mod opts;
mod pidfd;
mod real;
mod record;
mod restart;
mod route;
mod routed;
mod socket;
mod stat;
mod urg;
mod user;
mod wait_note;
mod wait_record;

use libc::{
    c_int, c_uint, c_ulong, c_void, iovec, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t,
};
use udsfs_proto::ioctl::Op;

use std::mem::offset_of;

use errno::{errno, guarded, int_ret, len_ret, restore_errno, set_errno, Res};
use iovs::{IovCopy, Iovs};
use message::Meta;
use mount::Mount;
use route::{Given, Route};
use udsfs_calls::connect::Connect;
use udsfs_calls::mmsg;

/// The mount, when the failed call `r` was made on a udsfs socket.
fn udsfs_after(r: i64, fd: c_int) -> Option<&'static Mount> {
    if r >= 0 || errno() != libc::ENOTSOCK {
        return None;
    }
    let m = mount::get()?;
    mount::udsfs_fd(fd).then_some(m)
}

/// Makes kernel AF_UNIX socket `fd` a udsfs socket for a routed address;
/// false when `fd` is something else (the C library handles it).
fn adopt_for(m: &Mount, fd: c_int) -> Res<bool> {
    if mount::udsfs_fd(fd) {
        return Ok(true);
    }
    if !udsfs_calls::convert::kernel_unix(fd) {
        return Ok(false);
    }
    let bound = udsfs_calls::convert::kernel_bound(fd);
    convert::convert(m, fd)?;
    udsfs_calls::convert::rebind(fd, bound, |why| log::say(&format!("fd {fd}: {why}")))?;
    Ok(true)
}

/// A call whose argument memory could not be read (`e`, EFAULT): the C
/// library's call `r` on the same arguments decides (EBADF and ENOTSOCK
/// come before EFAULT on Linux, and a kernel socket says EFAULT itself); a
/// udsfs socket gets `e`.
fn kernel_or<R: Copy + TryInto<i64> + From<i8>>(r: R, fd: c_int, e: c_int) -> R {
    if udsfs_after(r.try_into().unwrap_or(-1), fd).is_none() {
        return r;
    }
    set_errno(e);
    R::from(-1)
}

/// bind's and connect's start: the mount and the caller's address copied
/// in; or the answer of `real` (the C library's call) without a mount, and
/// its errno for a udsfs socket whose address cannot be read.
fn addressed(
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
    real: impl Fn() -> c_int,
) -> Result<(&'static Mount, Option<Given>), c_int> {
    let Some(m) = mount::get() else {
        return Err(real());
    };
    match Given::copy(addr, len) {
        Ok(g) => Ok((m, g)),
        Err(e) => Err(kernel_or(real(), fd, e)),
    }
}

/// The copied address as route() reads it, or NULL and `len` when none.
fn given_parts(g: &Option<Given>, len: socklen_t) -> (*const sockaddr, socklen_t) {
    match g {
        Some(g) => (g.ptr(), g.len()),
        None => (std::ptr::null(), len),
    }
}

/// Entry `i` of an mmsghdr vector of the program's (not read here).
fn entry(v: *mut mmsghdr, i: usize) -> *mut mmsghdr {
    v.wrapping_add(i)
}

/// The msg_len of mmsghdr entry `e`.
fn msg_len(e: *mut mmsghdr) -> *mut c_uint {
    e.cast::<u8>()
        .wrapping_add(offset_of!(mmsghdr, msg_len))
        .cast()
}

/// A log line of `what` on udsfs socket `fd` (udsfs_calls::connect's
/// reason for its answer).
fn say_on(fd: c_int, what: &'static str) -> impl FnOnce(&str) {
    move |why| log::say(&format!("{what} on udsfs socket fd {fd}: {why}"))
}

/// socket(2): a kernel socket, as made (a udsfs one takes its place at
/// bind, connect or sendto: convert.rs), but from the library's call site,
/// which the supervisor's filter lets through (gadget.rs).
#[no_mangle]
pub unsafe extern "C" fn socket(d: c_int, t: c_int, p: c_int) -> c_int {
    // SAFETY: socket(2)'s arguments as given.
    unsafe { real::socket(d, t, p) }
}

#[no_mangle]
pub unsafe extern "C" fn socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int {
    guarded(-1, || {
        let m = match mount::get() {
            Some(m) if d == libc::AF_UNIX => m,
            _ => return unsafe { real::socketpair(d, t, p, sv) },
        };
        // unix_create takes protocol 0 or PF_UNIX.
        if p != 0 && p != libc::PF_UNIX {
            return int_ret(Err(libc::EPROTONOSUPPORT));
        }
        let mut fds = [-1; 2];
        let r = socket::pair(m, t, &mut fds).and_then(|()| {
            // __sys_socketpair: the pair goes when sv cannot be written.
            user::write(sv.cast::<[c_int; 2]>(), fds).inspect_err(|_| {
                fds.iter().for_each(|&fd| files::close(fd));
            })
        });
        let ty = t & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        if r.is_ok() && (ty == libc::SOCK_STREAM || ty == libc::SOCK_SEQPACKET) {
            lane::note_pair(fds);
        }
        int_ret(r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    guarded(-1, || {
        let (m, g) = match addressed(fd, addr, len, || unsafe { real::bind(fd, addr, len) }) {
            Ok(mg) => mg,
            Err(r) => return r,
        };
        let (a, len) = given_parts(&g, len);
        let wire = match unsafe { route::route(m, a, len) } {
            Route::Kernel => {
                let r = unsafe { real::bind(fd, addr, len) };
                if udsfs_after(r as i64, fd).is_some() {
                    // SAFETY: the copy of the caller's address.
                    let given = unsafe { route::given_path(a, len) };
                    return int_ret(Err(route::kernel_path_bind_error(fd, &given)));
                }
                return r;
            }
            Route::Invalid => {
                return kernel_or(unsafe { real::bind(fd, addr, len) }, fd, libc::EINVAL)
            }
            Route::Autobind => Vec::new(),
            Route::Udsfs(w) => w,
        };
        // SAFETY: route() read the same bytes.
        let given = unsafe { route::given_path(a, len) };
        if !mount::udsfs_fd(fd) && !udsfs_calls::convert::kernel_unix(fd) {
            return unsafe { real::bind(fd, addr, len) };
        }
        int_ret(udsfs_calls::bind::udsfs(
            &mount::Own,
            &m.routes,
            &wire,
            &given,
            || {
                adopt_for(m, fd)?;
                ioctl::bind(fd, &wire, &given)
            },
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    restart::send(fd, -1, || {
        let (m, g) = match addressed(fd, addr, len, || unsafe { real::connect(fd, addr, len) }) {
            Ok(mg) => mg,
            Err(r) => return r,
        };
        let (a, len) = given_parts(&g, len);
        let route = unsafe { route::route(m, a, len) };
        if let Route::Udsfs(_) = route {
            match adopt_for(m, fd) {
                Ok(true) => {}
                Ok(false) => return unsafe { real::connect(fd, addr, len) },
                Err(e) => return int_ret(Err(e)),
            }
        } else {
            let r = unsafe { real::connect(fd, addr, len) };
            if udsfs_after(r as i64, fd).is_none() {
                return r;
            }
        }
        let bytes = g.as_ref().map_or(&[][..], Given::bytes);
        int_ret(
            udsfs_calls::connect::target(bytes, route, say_on(fd, "connect")).and_then(
                |c| match c {
                    Connect::Disconnect => ioctl::op(fd, Op::Disconnect, 0).map(|_| ()),
                    Connect::To(w) => socket::connect(m, fd, &w).inspect(|()| lane::note_conn(fd)),
                },
            ),
        )
    })
}

/// Entry points the C library answers, unless the kernel says ENOTSOCK on a
/// udsfs socket: then the udsfs expression (with the mount bound to `$m`).
macro_rules! socket_call {
    ($(fn $name:ident($fd:ident: c_int $(, $a:ident: $t:ty)*) => |$m:ident| $udsfs:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name($fd: c_int $(, $a: $t)*) -> c_int {
            guarded(-1, || {
                let r = unsafe { real::$name($fd $(, $a)*) };
                match udsfs_after(r as i64, $fd) {
                    Some($m) => {
                        #[allow(unused_unsafe)]
                        let res = unsafe { $udsfs };
                        int_ret(res)
                    }
                    None => r,
                }
            })
        }
    )*};
}

socket_call! {
    fn listen(fd: c_int, backlog: c_int) => |_m| ioctl::op(fd, Op::Listen, backlog).map(|_| ());
    fn shutdown(fd: c_int, how: c_int) => |_m| ioctl::op(fd, Op::Shutdown, how).map(|_| ());
    fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) => |m| socket::name(m, fd, false, addr, len);
    fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) => |m| socket::name(m, fd, true, addr, len);
    fn getsockopt(fd: c_int, level: c_int, name: c_int, v: *mut c_void, l: *mut socklen_t) => |_m| opts::get(fd, level, name, v, l);
    fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) => |_m| opts::set(fd, level, name, v, l);
}

#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    restart::recv(fd, -1, || {
        let r = unsafe { real::accept4(fd, addr, len, flags) };
        let Some(m) = udsfs_after(r as i64, fd) else {
            return r;
        };
        match socket::accept(m, fd, flags).inspect(|&nfd| lane::note_conn(nfd)) {
            Ok(nfd) => {
                if !addr.is_null() {
                    // The peer is the connecting socket: its name or none.
                    // An address that cannot be written loses the
                    // connection, as __sys_accept4_file drops it.
                    let put = match socket::name(m, nfd, true, addr, len) {
                        Err(libc::EFAULT) => Err(libc::EFAULT),
                        Err(_) => {
                            user::write(len, std::mem::size_of::<libc::sa_family_t>() as socklen_t)
                        }
                        Ok(()) => Ok(()),
                    };
                    if let Err(e) = put {
                        files::close(nfd);
                        set_errno(e);
                        return -1;
                    }
                }
                // The C library's ENOTSOCK is not the program's: a success
                // leaves errno as it was.
                restore_errno();
                nfd
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    unsafe { accept4(fd, addr, len, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    guarded(-1, || {
        let r = unsafe { real::ioctl(fd, req, arg) };
        if req == urg::FIOASYNC
            && r == 0
            && !arg.is_null()
            && unsafe { (arg as *const c_int).read_unaligned() } == 0
        {
            if let Some(res) = urg::fioasync_off(fd) {
                return int_ret(res);
            }
        }
        // The kernel answers FIONREAD on a regular file with its size less
        // the offset (a udsfs data file: 1 GiB); the daemon answers
        // SIOCOUTQ with ENOTTY. Only those answers cost a look at the fd.
        let suspect = match req {
            libc::FIONREAD => {
                // The program's int may be at any address (Python's
                // fcntl.ioctl copies it to a char array on its stack).
                r == 0
                    && !arg.is_null()
                    && unsafe { (arg as *const c_int).read_unaligned() } == UDSFS_FILE_SIZE
            }
            libc::TIOCOUTQ => r < 0 && errno() == libc::ENOTTY,
            _ => false,
        };
        if suspect && req == libc::FIONREAD {
            if let Some(n) = lane::inq(fd) {
                return int_ret(user::write_from(arg.cast(), &n.to_ne_bytes()));
            }
        }
        if suspect && mount::udsfs_fd(fd) {
            return int_ret(opts::queue_ioctl(fd, req, arg));
        }
        if r < 0 && errno() == libc::ENOTTY && mount::udsfs_fd(fd) {
            if let Some(res) = urg::ioctl(fd, req, arg) {
                return int_ret(res);
            }
            if netdev::is_socket_ioctl(req) {
                return int_ret(netdev::forward(req, arg));
            }
            set_errno(libc::ENOTTY);
        }
        r
    })
}

/// The size a udsfs socket file claims, as FIONREAD on it reads.
const UDSFS_FILE_SIZE: c_int = udsfs_proto::mount::SOCKET_FILE_SIZE as c_int;

/// The destination of a send: None (none given), or the wire address
/// (udsfs_calls::connect::send_to).
fn send_target(m: &Mount, fd: c_int, g: &Option<Given>) -> Res<Option<Vec<u8>>> {
    let Some(g) = g
        .as_ref()
        .filter(|g| udsfs_proto::route::send_names(g.ptr() as u64, g.len().into()))
    else {
        return Ok(None);
    };
    // SAFETY: the copy of the caller's address.
    let route = unsafe { route::route(m, g.ptr(), g.len()) };
    udsfs_calls::connect::send_to(g.bytes(), route, say_on(fd, "sendto")).map(Some)
}

/// A send to `to` (None: no address); a routed name the daemon does not
/// know is reached through this process's links, or answered, as
/// udsfs_calls::connect::reach says.
fn reach<T>(
    m: &Mount,
    to: Option<Vec<u8>>,
    mut send: impl FnMut(Option<Vec<u8>>) -> Res<T>,
) -> Res<T> {
    match to {
        None => send(None),
        Some(w) => {
            udsfs_calls::connect::reach(&mount::Own, &m.routes, &w, |w| send(Some(w.to_vec())))
        }
    }
}

/// Before a send with an address: a kernel AF_UNIX socket sending to a
/// routed name becomes a udsfs socket.
unsafe fn adopt_for_send(m: &Mount, fd: c_int, addr: *const sockaddr, len: socklen_t) -> Res<()> {
    if let Route::Udsfs(_) = unsafe { route::route(m, addr, len) } {
        adopt_for(m, fd)?;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    restart::send(fd, -1, || {
        if addr.is_null() {
            if let Some(r) = lane::send(fd, buf, n, flags) {
                return r;
            }
        }
        let Some(m) = mount::get() else {
            return unsafe { real::sendto(fd, buf, n, flags, addr, alen) };
        };
        let g = match Given::copy(addr, alen) {
            Ok(g) => g,
            Err(e) => {
                return kernel_or(
                    unsafe { real::sendto(fd, buf, n, flags, addr, alen) },
                    fd,
                    e,
                )
            }
        };
        let (a, alen_copied) = given_parts(&g, alen);
        if !a.is_null() {
            if let Err(e) = unsafe { adopt_for_send(m, fd, a, alen_copied) } {
                return len_ret(Err(e));
            }
        }
        let r = unsafe { real::sendto(fd, buf, n, flags, addr, alen) };
        if udsfs_after(r as i64, fd).is_none() {
            return r;
        }
        let to = match send_target(m, fd, &g) {
            Ok(t) => t,
            Err(e) => return len_ret(Err(e)),
        };
        let iov = iovec {
            iov_base: buf as *mut c_void,
            iov_len: if buf.is_null() { 0 } else { n },
        };
        len_ret(reach(m, to, |to| {
            let meta = Meta {
                to,
                ..Default::default()
            };
            msg::send(m, fd, Iovs::new(&iov, 1), meta, flags)
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    unsafe { sendto(fd, buf, n, flags, std::ptr::null(), 0) }
}

/// A udsfs socket cannot be passed over a kernel socket: the kernel would
/// pass its data file as if it were the socket. Logs the refusal.
fn passes_udsfs_over_kernel(h: &msghdr, fd: c_int) -> bool {
    let refused = control::passes_udsfs(h) && !mount::udsfs_fd(fd);
    if refused {
        log::say(&format!(
            "sendmsg on kernel socket fd {fd}: a udsfs socket cannot be passed over a kernel socket (EINVAL)"
        ));
    }
    refused
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, m: *const msghdr, flags: c_int) -> ssize_t {
    restart::send(fd, -1, || {
        if let Some(r) = lane::sendmsg(fd, m, flags) {
            return r;
        }
        let Some(mnt) = mount::get() else {
            return unsafe { real::sendmsg(fd, m, flags) };
        };
        // The msghdr, then its name, iovecs and control buffer are copied
        // in, in ____sys_sendmsg's order; what cannot be read is EFAULT
        // before anything is sent (the kernel's own on a kernel socket).
        let h: msghdr = match user::read(m) {
            Ok(h) => h,
            Err(e) => return kernel_or(unsafe { real::sendmsg(fd, m, flags) }, fd, e),
        };
        let name = h.msg_name as *const sockaddr;
        let g = match Given::copy(name, h.msg_namelen) {
            Ok(g) => g,
            Err(e) => return kernel_or(unsafe { real::sendmsg(fd, m, flags) }, fd, e),
        };
        let (addr, alen) = given_parts(&g, h.msg_namelen);
        if !addr.is_null() {
            if let Err(e) = unsafe { adopt_for_send(mnt, fd, addr, alen) } {
                return len_ret(Err(e));
            }
        }
        // Sockets passed over a kernel socket are checked before the kernel
        // would pass a udsfs file as if it were one.
        if passes_udsfs_over_kernel(&h, fd) {
            return len_ret(Err(libc::EINVAL));
        }
        let r = unsafe { real::sendmsg(fd, m, flags) };
        if udsfs_after(r as i64, fd).is_none() {
            return r;
        }
        let mut meta = match send_target(mnt, fd, &g) {
            Ok(to) => Meta {
                to,
                ..Default::default()
            },
            Err(e) => return len_ret(Err(e)),
        };
        let held = match IovCopy::of_msg(h.msg_iov, h.msg_iovlen) {
            Ok(d) => d,
            Err(e) => return len_ret(Err(e)),
        };
        let parsed =
            control::control_bytes(&h).and_then(|c| control::parse_control(mnt, &c, &mut meta));
        if let Err(e) = parsed {
            return len_ret(Err(e));
        }
        // The files deposited for the send wait until it is made (again).
        let Meta {
            to,
            creds,
            rights,
            channel: _deposited,
        } = meta;
        len_ret(reach(mnt, to, |to| {
            let meta = Meta {
                to,
                creds,
                rights: rights.clone(),
                channel: None,
            };
            msg::send(mnt, fd, held.iovs(), meta, flags)
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    restart::send(fd, -1, || {
        for i in 0..n as usize {
            // An entry that cannot be read is the kernel's EFAULT.
            let Ok(h) = user::read(entry(v, i).cast::<msghdr>()) else {
                break;
            };
            if passes_udsfs_over_kernel(&h, fd) {
                return int_ret(Err(libc::EINVAL));
            }
        }
        let r = unsafe { real::sendmmsg(fd, v, n, flags) };
        if udsfs_after(r as i64, fd).is_none() {
            return r;
        }
        let sent = mmsg::send(n as usize, |i| {
            let e = entry(v, i);
            let r = unsafe { sendmsg(fd, e.cast(), flags) };
            if r < 0 {
                return Err(errno());
            }
            // A count that cannot be written ends the call (its message went).
            user::write(msg_len(e), r as c_uint)
        });
        len_ret(sent) as c_int
    })
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, m: *mut msghdr, flags: c_int) -> ssize_t {
    restart::recv(fd, -1, || {
        let handed = std::cell::Cell::new(None);
        if let Some(r) = lane::recvmsg(fd, m, flags, &handed) {
            return r;
        }
        let r = unsafe { real::recvmsg(fd, m, flags) };
        let Some(mnt) = udsfs_after(r as i64, fd) else {
            return r;
        };
        // The msghdr is copied in, and what the receive reports written
        // back, as ____sys_recvmsg does: EFAULT when it cannot be.
        let mut h: msghdr = match user::read(m) {
            Ok(h) => h,
            Err(e) => return len_ret(Err(e)),
        };
        let r = msg::recv_from(mnt, fd, &mut h, flags, true, handed.get()).and_then(|n| {
            let at = m.cast::<u8>();
            let field = |off: usize| at.wrapping_add(off);
            if !h.msg_name.is_null() {
                user::write(field(offset_of!(msghdr, msg_namelen)).cast(), h.msg_namelen)?;
            }
            user::write(field(offset_of!(msghdr, msg_flags)).cast(), h.msg_flags)?;
            user::write(
                field(offset_of!(msghdr, msg_controllen)).cast(),
                h.msg_controllen,
            )?;
            Ok(n)
        });
        len_ret(r)
    })
}

/// Where a recv-family call puts what it receives: one buffer of `n` bytes
/// and, when both pointers are set, the sender's address.
struct RecvInto {
    buf: *mut c_void,
    n: size_t,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
}

impl RecvInto {
    fn unnamed(buf: *mut c_void, n: size_t) -> RecvInto {
        let none = std::ptr::null_mut();
        RecvInto {
            buf,
            n,
            addr: none,
            alen: none.cast(),
        }
    }
}

/// After the C library's recv-family call `r`: on a udsfs socket, the
/// receive as udsfs does it (a recvmsg with one buffer).
unsafe fn recv_after(r: ssize_t, fd: c_int, flags: c_int, into: RecvInto) -> ssize_t {
    let Some(m) = udsfs_after(r as i64, fd) else {
        return r;
    };
    let RecvInto { buf, n, addr, alen } = into;
    let mut iov = iovec {
        iov_base: buf,
        iov_len: n,
    };
    // SAFETY: a zeroed msghdr is empty.
    let mut h: msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    // __sys_recvfrom reads and writes the address length after the
    // receive: one that cannot be is EFAULT, the message taken.
    let room = (!addr.is_null()).then(|| user::read(alen));
    if let Some(Ok(room)) = room {
        h.msg_name = addr.cast();
        h.msg_namelen = room;
    }
    let res = msg::recv(m, fd, &mut h, flags, false).and_then(|n| {
        match room {
            Some(Ok(_)) => user::write(alen, h.msg_namelen)?,
            Some(Err(e)) => return Err(e),
            None => {}
        }
        Ok(n)
    });
    len_ret(res)
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    restart::recv(fd, -1, || unsafe {
        if addr.is_null() {
            if let Some(r) = lane::recv(fd, buf, n, flags) {
                return r;
            }
        }
        let r = real::recvfrom(fd, buf, n, flags, addr, alen);
        recv_after(r, fd, flags, RecvInto { buf, n, addr, alen })
    })
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    restart::recv(fd, -1, || unsafe {
        if let Some(r) = lane::recv(fd, buf, n, flags) {
            return r;
        }
        let r = real::recv(fd, buf, n, flags);
        recv_after(r, fd, flags, RecvInto::unnamed(buf, n))
    })
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    restart::recv(fd, -1, || unsafe {
        let r = real::__recv_chk(fd, buf, n, buflen, flags);
        recv_after(r, fd, flags, RecvInto::unnamed(buf, n))
    })
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    restart::recv(fd, -1, || unsafe {
        let r = real::__recvfrom_chk(fd, buf, n, buflen, flags, addr, alen);
        recv_after(r, fd, flags, RecvInto { buf, n, addr, alen })
    })
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut libc::timespec,
) -> c_int {
    restart::recv(fd, -1, || {
        let r = unsafe { real::recvmmsg(fd, v, n, flags, t) };
        if udsfs_after(r as i64, fd).is_none() {
            return r;
        }
        let ts = if t.is_null() {
            None
        } else {
            match user::read(t) {
                Ok(ts) => Some(ts),
                Err(e) => return int_ret(Err(e)),
            }
        };
        let timeout = match ts
            .map(|ts| mmsg::timeout(ts.tv_sec, ts.tv_nsec))
            .transpose()
        {
            Ok(t) => t,
            Err(e) => return int_ret(Err(e)),
        };
        let got = mmsg::recv(&Mmsg(fd), fd, n as usize, flags, timeout, |i, fl| {
            let e = entry(v, i);
            let r = unsafe { recvmsg(fd, e.cast(), fl) };
            if r < 0 {
                return Err(errno());
            }
            user::write(msg_len(e), r as c_uint)
        });
        // What is left of the timeout goes back once, as __sys_recvmmsg.
        let r = got.and_then(|got| {
            if let Some(left) = got.left {
                let ts = libc::timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                };
                user::write(t, ts)?;
            }
            Ok(got.done)
        });
        len_ret(r) as c_int
    })
}

/// recvmmsg's front (udsfs_calls::mmsg): a signal is EINTR only under
/// SO_RCVTIMEO; without it Linux restarts the call.
struct Mmsg(c_int);

impl mmsg::Front for Mmsg {
    fn now(&self) -> std::time::Duration {
        now()
    }

    fn restarting(&self, e: c_int) -> bool {
        e == libc::EINTR && udsfs_calls::restart::restarts(self.0, udsfs_calls::restart::RECV)
    }

    fn say(&self, what: &str) {
        log::say(what);
    }
}

/// CLOCK_MONOTONIC as a Duration (a vDSO call: no lock, no allocation).
fn now() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A zero-length write(): FUSE never passes one on, so the kernel answers 0
/// without the daemon; on a udsfs socket it is a send of nothing, which on
/// a dgram or seqpacket socket is an empty message, as on Linux. (A
/// zero-length read() takes nothing on Linux either: sock_read_iter.)
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if n != 0 {
        return restart::write(fd, buf, n);
    }
    restart::send(fd, -1, || {
        let Some(m) = mount::get().filter(|_| mount::udsfs_fd(fd)) else {
            return unsafe { real::write(fd, buf, n) };
        };
        let iov = iovec {
            iov_base: buf as *mut c_void,
            iov_len: 0,
        };
        // write(2) on a socket is a send without flags (sock_write_iter).
        len_ret(msg::send(m, fd, Iovs::new(&iov, 1), Meta::default(), 0))
    })
}

/// What a send or receive from a signal handler needs is made ready before
/// the program runs: the mount, and the C library's functions this library
/// calls (found with dlsym, which takes locks and allocates).
extern "C" fn init() {
    real::resolve_all();
    // The lane code's closes of its own descriptors: not the program's.
    udsfs_proto::lane::own_fd::close_with(real::own_close);
    closes::init();
    wait_record::init();
    gadget::init();
    restart::init_faults();
    exec::init();
    mount::get();
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

/// A stat call, then its result shown as a socket when it is a udsfs one.
fn stat_call<T>(st: *mut T, call: impl FnOnce() -> c_int, fix: impl FnOnce(&mut T)) -> c_int {
    guarded(-1, || {
        let r = call();
        if r == 0 && !st.is_null() {
            // SAFETY: the call succeeded, so st points to a filled struct.
            fix(unsafe { &mut *st });
        }
        r
    })
}

/// stat entry points: the C library's call, then `stat_call`'s fix (a data
/// file shown as a socket; a link a routed bind left, found without
/// following it, shown as its socket node: routed.rs).
macro_rules! stat_entry {
    ($(fn $name:ident($($a:ident: $t:ty),*) => $st:ident, $fix:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            stat_call($st, || unsafe { real::$name($($a),*) }, $fix)
        }
    )*};
}

type Path = *const libc::c_char;
const CWD: c_int = libc::AT_FDCWD;

stat_entry! {
    fn fstat(fd: c_int, st: *mut libc::stat) => st, stat::fix_stat;
    fn fstat64(fd: c_int, st: *mut libc::stat64) => st, stat::fix_stat64;
    // A data file's own path (/proc/self/fd/N, .udsfs/sock/N/data).
    fn stat(p: Path, st: *mut libc::stat) => st, stat::fix_stat;
    fn stat64(p: Path, st: *mut libc::stat64) => st, stat::fix_stat64;
    fn fstatat(d: c_int, p: Path, st: *mut libc::stat, fl: c_int) => st,
        |s| { stat::fix_stat(s); routed::fix_lstat(s, d, p) };
    fn fstatat64(d: c_int, p: Path, st: *mut libc::stat64, fl: c_int) => st,
        |s| { stat::fix_stat64(s); routed::fix_lstat64(s, d, p) };
    fn statx(d: c_int, p: Path, fl: c_int, mask: c_uint, st: *mut libc::statx) => st,
        |s| { stat::fix_statx(s); routed::fix_lstatx(s, d, p, fl, mask) };
    fn lstat(p: Path, st: *mut libc::stat) => st, |s| routed::fix_lstat(s, CWD, p);
    fn lstat64(p: Path, st: *mut libc::stat64) => st, |s| routed::fix_lstat64(s, CWD, p);
    // Programs built against a C library before 2.33 call these (Node.js
    // fstat()s a passed handle with __fxstat64 to learn its type).
    fn __fxstat(v: c_int, fd: c_int, st: *mut libc::stat) => st, stat::fix_stat;
    fn __fxstat64(v: c_int, fd: c_int, st: *mut libc::stat64) => st, stat::fix_stat64;
    fn __xstat(v: c_int, p: Path, st: *mut libc::stat) => st, stat::fix_stat;
    fn __xstat64(v: c_int, p: Path, st: *mut libc::stat64) => st, stat::fix_stat64;
    fn __lxstat(v: c_int, p: Path, st: *mut libc::stat) => st, |s| routed::fix_lstat(s, CWD, p);
    fn __lxstat64(v: c_int, p: Path, st: *mut libc::stat64) => st, |s| routed::fix_lstat64(s, CWD, p);
    fn __fxstatat(v: c_int, d: c_int, p: Path, st: *mut libc::stat, fl: c_int) => st,
        |s| { stat::fix_stat(s); routed::fix_lstat(s, d, p) };
    fn __fxstatat64(v: c_int, d: c_int, p: Path, st: *mut libc::stat64, fl: c_int) => st,
        |s| { stat::fix_stat64(s); routed::fix_lstat64(s, d, p) };
}

/// An ioctl request number of the daemon's (udsfs_proto::ioctl).
fn is_daemon_request(req: libc::c_long) -> bool {
    let req = req as u32;
    req == udsfs_proto::ioctl::UDSFS_IOC_CTL || req == udsfs_proto::ioctl::UDSFS_IOC_MSG
}

/// syscall(3): a raw statx, fstat or newfstatat answers as the entry points
/// above (a udsfs socket's data file shown as a socket), a raw ioctl as
/// `ioctl` (the queue ioctls, O_ASYNC, the owner); every other call
/// goes through as made. The x86_64 and aarch64 calling conventions pass a
/// variadic call's integer arguments where they pass fixed ones, so six are
/// taken (those a caller did not give are unused garbage, as for the C
/// library's own syscall).
#[no_mangle]
pub unsafe extern "C" fn syscall(
    nr: libc::c_long,
    a: libc::c_long,
    b: libc::c_long,
    c: libc::c_long,
    d: libc::c_long,
    e: libc::c_long,
    f: libc::c_long,
) -> libc::c_long {
    // SAFETY: the caller's arguments, as the call it names takes them.
    unsafe {
        match nr {
            libc::SYS_statx => statx(a as c_int, b as Path, c as c_int, d as c_uint, e as _).into(),
            libc::SYS_fstat => fstat(a as c_int, b as _).into(),
            libc::SYS_newfstatat => fstatat(a as c_int, b as Path, c as _, d as c_int).into(),
            // The library's own requests to the daemon (udsfs_proto's
            // `control` and `message` come here) go straight to the gadget:
            // a laned call on a thread of a small stack (hackbench -T's 16
            // KiB, its 4 KiB buffer on it) overflowed it by the frames of
            // `ioctl` below (debug build, at a lane's claim).
            libc::SYS_ioctl if is_daemon_request(b) => gadget::call(nr, a, b, c, d, e, f),
            // From the gadget the supervisor lets it by: a udsfs data file's
            // FIONREAD would read the file's 1 GiB, SIOCOUTQ ENOTTY.
            libc::SYS_ioctl => ioctl(a as c_int, b as c_ulong, c as *mut c_void).into(),
            // A close of a descriptor number moves the generation (fdgen.rs).
            _ if closes::closes(nr) => {
                closes::syscall(nr, a, b, c, || gadget::call(nr, a, b, c, d, e, f))
            }
            // From the library's call site: the calls it forwards as made.
            _ => gadget::call(nr, a, b, c, d, e, f),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn unlink(path: Path) -> c_int {
    guarded(-1, || {
        routed::unlink(CWD, path).unwrap_or_else(|| unsafe { real::unlink(path) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: Path, flags: c_int) -> c_int {
    guarded(-1, || {
        let call = || unsafe { real::unlinkat(dirfd, path, flags) };
        match flags {
            0 => routed::unlink(dirfd, path).unwrap_or_else(call),
            libc::AT_REMOVEDIR => routed::rmdir(dirfd, path, call),
            _ => call(),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    epolls::seen();
    let fd = unsafe { real::epoll_create(size) };
    lane_ready::epoll_made(fd);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    epolls::seen();
    let fd = unsafe { real::epoll_create1(flags) };
    lane_ready::epoll_made(fd);
    fd
}

// Readiness: a laned descriptor's is the ring's, answered without the
// daemon (lane_ready.rs); everything else is the C library's call.

/// A readiness call's result; errno as the program left it on success
/// (the lane's eventfd drains leave EAGAIN).
fn ready_ret(r: c_int) -> c_int {
    if r >= 0 {
        errno::restore_errno();
    }
    r
}

/// A poll timeout in milliseconds (negative: none).
fn ms_timeout(ms: c_int) -> Option<std::time::Duration> {
    (ms >= 0).then(|| std::time::Duration::from_millis(ms as u64))
}

/// A timespec timeout (null: none); an invalid one is the C library's to
/// refuse.
fn ts_timeout(ts: *const libc::timespec) -> Result<Option<std::time::Duration>, ()> {
    timeout_at(ts, 1_000_000_000, |t| (t.tv_sec, t.tv_nsec))
}

/// A select timeval as a timeout, as `ts_timeout`.
fn tv_timeout(tv: *const libc::timeval) -> Result<Option<std::time::Duration>, ()> {
    timeout_at(tv, 1_000_000, |t| (t.tv_sec, t.tv_usec))
}

/// The timeout at `p` (null: none; Err: unreadable or invalid), whose
/// `parts` are its seconds and its fraction in 1/`per_sec` units.
fn timeout_at<T: Copy>(
    p: *const T,
    per_sec: i64,
    parts: impl Fn(T) -> (i64, i64),
) -> Result<Option<std::time::Duration>, ()> {
    if p.is_null() {
        return Ok(None);
    }
    let size = std::mem::size_of::<T>();
    if user::readable(p.cast(), size) < size {
        return Err(());
    }
    // SAFETY: probed readable.
    let (sec, frac) = parts(unsafe { *p });
    if sec < 0 || !(0..per_sec).contains(&frac) {
        return Err(());
    }
    let nanos = frac * (1_000_000_000 / per_sec);
    Ok(Some(std::time::Duration::new(sec as u64, nanos as u32)))
}

/// A readiness call (poll, select, epoll_wait and their forms), timeout
/// `t` (Err: one the C library is to refuse): through the lanes when
/// `lane` answers it (lane_ready.rs: a laned descriptor among those waited
/// for), else `real`, the C library's call. `after` sees that call's
/// result: Ok(what the program gets), or Err when an end the call reported
/// had its lane come up while it slept (the daemon told its library's own
/// poll "ready", src/engine/lane.rs's polled rule, or a "ready" for a
/// lane gone again): then the lanes are looked at again for the time left,
/// and a C library's call again is seen by `after` again (unseen, a lane's
/// eventfd event reached the program: adversarial_lanes8.sh threads_up).
fn ready_via(
    t: Result<Option<std::time::Duration>, ()>,
    lane: impl Fn(Option<std::time::Duration>) -> Option<c_int>,
    real: impl Fn() -> c_int,
    after: impl Fn(c_int) -> Result<c_int, ()>,
) -> c_int {
    /// The C library's calls one call makes at most: past them it returns
    /// 0, as at a timeout (the program waits again).
    const AGAIN: u32 = 64;
    guarded(-1, || {
        ready_ret({
            let start = std::time::Instant::now();
            match t {
                Err(()) => real(),
                Ok(t) => lane(t).unwrap_or_else(|| {
                    let mut r = real();
                    for _ in 0..AGAIN {
                        match after(r) {
                            Ok(r) => return r,
                            Err(()) => {
                                let left = t.map(|t| t.saturating_sub(start.elapsed()));
                                if let Some(r) = lane(left) {
                                    return r;
                                }
                                r = real();
                            }
                        }
                    }
                    0
                }),
            }
        })
    })
}

/// poll, ppoll and their _chk forms (`ready_via`, `poll_came_up`).
fn poll_via(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    t: Result<Option<std::time::Duration>, ()>,
    mask: *const libc::sigset_t,
    real: impl Fn() -> c_int,
) -> c_int {
    let lane = |t| lane_ready::poll(fds, n, t, mask);
    let after = |r| match lane_ready::poll_came_up(fds, n, r) {
        true => Err(()),
        false => Ok(r),
    };
    ready_via(t, lane, real, after)
}

/// select and pselect (`ready_via`, `select_came_up`: the sets as they
/// were are put back before the lanes are looked at again).
fn select_via(
    nfds: c_int,
    sets: [*mut libc::fd_set; 3],
    t: Result<Option<std::time::Duration>, ()>,
    mask: *const libc::sigset_t,
    tv: *mut libc::timeval,
    real: impl Fn() -> c_int,
) -> c_int {
    let [r, w, x] = sets;
    let lane = |t| lane_ready::select(nfds, r, w, x, t, mask, tv);
    let saved = sets.map(|s| {
        (!s.is_null())
            .then(|| user::read(s.cast_const()).ok())
            .flatten()
    });
    let after = |got: c_int| {
        if got <= 0 || !lane_ready::select_came_up(nfds, sets) {
            return Ok(got);
        }
        for (s, v) in sets.into_iter().zip(saved) {
            if let Some(v) = v {
                let _ = user::write(s, v);
            }
        }
        Err(())
    };
    ready_via(t, lane, real, after)
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    poll_via(
        fds,
        n,
        Ok(ms_timeout(timeout)),
        std::ptr::null(),
        || unsafe { real::poll(fds, n, timeout) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
    fdslen: size_t,
) -> c_int {
    // An array shorter than n is the C library's to report.
    let fits = fdslen / std::mem::size_of::<libc::pollfd>() >= n as usize;
    let t = if fits {
        Ok(ms_timeout(timeout))
    } else {
        Err(())
    };
    poll_via(fds, n, t, std::ptr::null(), || unsafe {
        real::__poll_chk(fds, n, timeout, fdslen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    poll_via(fds, n, ts_timeout(ts), mask, || unsafe {
        real::ppoll(fds, n, ts, mask)
    })
}

#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
    fdslen: size_t,
) -> c_int {
    let fits = fdslen / std::mem::size_of::<libc::pollfd>() >= n as usize;
    let t = if fits { ts_timeout(ts) } else { Err(()) };
    poll_via(fds, n, t, mask, || unsafe {
        real::__ppoll_chk(fds, n, ts, mask, fdslen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    x: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    let t = tv_timeout(tv);
    select_via(nfds, [r, w, x], t, std::ptr::null(), tv, || unsafe {
        real::select(nfds, r, w, x, tv)
    })
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    x: *mut libc::fd_set,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    let tv = std::ptr::null_mut();
    select_via(nfds, [r, w, x], ts_timeout(ts), mask, tv, || unsafe {
        real::pselect(nfds, r, w, x, ts, mask)
    })
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut libc::epoll_event,
) -> c_int {
    guarded(-1, || {
        ready_ret({
            lane_ready::ctl(epfd, op, fd, ev)
                .unwrap_or_else(|| unsafe { real::epoll_ctl(epfd, op, fd, ev) })
        })
    })
}

/// epoll_wait, epoll_pwait and epoll_pwait2 on set `epfd` (`ready_via`;
/// `after_wait` leaves out the C library's events of ends whose lanes came
/// up, their registrations moved to the lanes).
fn epoll_via(
    epfd: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    t: Result<Option<std::time::Duration>, ()>,
    mask: *const libc::sigset_t,
    real: impl Fn() -> c_int,
) -> c_int {
    let lane = |t| lane_ready::wait(epfd, ev, max, t, mask);
    let after = |r| lane_ready::after_wait(epfd, ev, r).ok_or(());
    ready_via(t, lane, real, after)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    epoll_via(
        epfd,
        ev,
        max,
        Ok(ms_timeout(timeout)),
        std::ptr::null(),
        || unsafe { real::epoll_wait(epfd, ev, max, timeout) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    epoll_via(epfd, ev, max, Ok(ms_timeout(timeout)), mask, || unsafe {
        real::epoll_pwait(epfd, ev, max, timeout, mask)
    })
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    epoll_via(epfd, ev, max, ts_timeout(ts), mask, || unsafe {
        real::epoll_pwait2(epfd, ev, max, ts, mask)
    })
}

/// remove(): the C library's calls its own unlink and rmdir, which this
/// library does not see; as it does, a directory (EISDIR) is removed with
/// rmdir.
#[no_mangle]
pub unsafe extern "C" fn remove(path: Path) -> c_int {
    guarded(-1, || match routed::unlink(CWD, path) {
        None => unsafe { real::remove(path) },
        Some(r) if r < 0 && errno() == libc::EISDIR => {
            routed::rmdir(CWD, path, || unsafe { real::rmdir(path) })
        }
        Some(r) => r,
    })
}

#[no_mangle]
pub unsafe extern "C" fn link(old: Path, new: Path) -> c_int {
    guarded(-1, || {
        routed::link(CWD, old, CWD, new, || unsafe { real::link(old, new) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn linkat(od: c_int, old: Path, nd: c_int, new: Path, fl: c_int) -> c_int {
    guarded(-1, || {
        // With or without AT_SYMLINK_FOLLOW: on Linux the routed path is
        // the socket file itself, no link to follow.
        routed::link(od, old, nd, new, || unsafe {
            real::linkat(od, old, nd, new, fl)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn rmdir(path: Path) -> c_int {
    guarded(-1, || {
        routed::rmdir(CWD, path, || unsafe { real::rmdir(path) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn rename(old: Path, new: Path) -> c_int {
    guarded(-1, || {
        routed::rename(CWD, old, CWD, new, 0, || unsafe { real::rename(old, new) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn renameat(od: c_int, old: Path, nd: c_int, new: Path) -> c_int {
    guarded(-1, || {
        routed::rename(od, old, nd, new, 0, || unsafe {
            real::renameat(od, old, nd, new)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn renameat2(
    od: c_int,
    old: Path,
    nd: c_int,
    new: Path,
    fl: c_uint,
) -> c_int {
    guarded(-1, || {
        routed::rename(od, old, nd, new, fl, || unsafe {
            real::renameat2(od, old, nd, new, fl)
        })
    })
}

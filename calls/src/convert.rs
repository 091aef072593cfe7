//! A kernel AF_UNIX socket becomes a udsfs socket at the call that routes
//! it into the mount (bind, connect, a send with an address): what goes
//! with it besides its options (`udsfs_proto::carry`). A new udsfs socket
//! of its type takes its descriptor number; the epoll sets that held the
//! kernel socket's file hold the new one, with the same events, flags and
//! data (`Held`, read before the file goes: an epoll registration belongs to
//! the file, and dup3 or SECCOMP_IOCTL_NOTIF_ADDFD over the number drops
//! it; nginx adds an upstream socket to epoll before its connect); and a
//! socket bound to a kernel name gets an autobound name instead (`rebind`),
//! so that a client that bound a scratch path (nc -uU) is still answerable.
//! Which sockets convert (`kernel_unix`), the new one's type (`sock_type`)
//! and the network namespace it is made in (`SocketNetns`) are decided
//! here too. The front reads the kernel socket and puts the new one in its
//! place (the library by dup3, the supervisor by SECCOMP_IOCTL_NOTIF_ADDFD).
//! The calls here are raw system calls: in the library, the C library's
//! wrappers are its own entry points.

use libc::c_int;
use udsfs_proto::Res;
use udsfs_proto::ioctl::Op;
use udsfs_proto::mount::type_dir;

use crate::client;

/// The last errno.
fn last() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// An int option of socket `fd` at SOL_SOCKET.
fn sock_int(fd: c_int, opt: c_int) -> Res<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int and its length.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getsockopt,
            fd,
            libc::SOL_SOCKET,
            opt,
            &mut v as *mut c_int,
            &mut len as *mut libc::socklen_t,
        )
    };
    if r < 0 { Err(last()) } else { Ok(v) }
}

/// Is `fd` a kernel AF_UNIX socket, that may become a udsfs one?
pub fn kernel_unix(fd: c_int) -> bool {
    sock_int(fd, libc::SO_DOMAIN) == Ok(libc::AF_UNIX)
}

/// Is kernel socket `fd` bound to a name (then `rebind`)?
pub fn kernel_bound(fd: c_int) -> bool {
    // SAFETY: zeroed storage the size getsockname is told.
    unsafe {
        let mut a: libc::sockaddr_un = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        libc::syscall(
            libc::SYS_getsockname,
            fd,
            &mut a as *mut libc::sockaddr_un,
            &mut len as *mut libc::socklen_t,
        ) == 0
            && len as usize > std::mem::size_of::<libc::sa_family_t>()
    }
}

/// The type of the udsfs socket that takes kernel socket `fd`'s place: its
/// SO_TYPE and the mount's directory for it (a type udsfs has no socket of
/// is EPROTOTYPE).
pub fn sock_type(fd: c_int) -> Res<(c_int, &'static str)> {
    let ty = sock_int(fd, libc::SO_TYPE)?;
    Ok((ty, type_dir(ty).ok_or(libc::EPROTOTYPE)?))
}

/// The inode of descriptor `fd` (a namespace's).
fn ino(fd: c_int) -> Option<u64> {
    // SAFETY: zeroed storage fstat fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a local stat.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) };
    (r == 0).then_some(st.st_ino)
}

fn close(fd: c_int) {
    // SAFETY: a descriptor of ours, closed once.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// The calling thread in a kernel socket's network namespace while it makes
/// the socket's udsfs stand-in, and back when dropped. Linux files a
/// socket's abstract name in the namespace the socket was made in
/// (sock_net): a program that made a socket and then ran
/// unshare(CLONE_NEWNET) or setns binds it in the namespace it left, and the
/// daemon makes a socket in the namespace of the thread that asks.
pub struct SocketNetns {
    back: c_int,
}

impl SocketNetns {
    /// Enters kernel socket `k`'s namespace when the program's thread is
    /// elsewhere: `program` is the inode of that thread's network namespace
    /// (None: the calling thread is the program's). None: nothing to do, or
    /// it cannot be done (SIOCGSKNS and setns need CAP_NET_ADMIN and
    /// CAP_SYS_ADMIN there): then the program thread's namespace stands.
    pub fn enter(k: c_int, program: Option<u64>) -> Option<SocketNetns> {
        const SIOCGSKNS: libc::c_ulong = 0x894C;
        // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor.
        let ns = unsafe { libc::syscall(libc::SYS_ioctl, k, SIOCGSKNS) } as c_int;
        if ns < 0 {
            return None;
        }
        let here = c"/proc/thread-self/ns/net";
        // SAFETY: a NUL-terminated path; the descriptor is closed or kept.
        let back = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                here.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        } as c_int;
        let theirs = program.or_else(|| ino(back));
        let moved = back >= 0 && ino(ns).is_some() && ino(ns) != theirs;
        // SAFETY: setns with a network namespace descriptor.
        let entered =
            moved && unsafe { libc::syscall(libc::SYS_setns, ns, libc::CLONE_NEWNET) } == 0;
        close(ns);
        if !entered {
            if back >= 0 {
                close(back);
            }
            return None;
        }
        Some(SocketNetns { back })
    }
}

impl Drop for SocketNetns {
    fn drop(&mut self) {
        // SAFETY: back to the namespace the thread was in.
        unsafe { libc::syscall(libc::SYS_setns, self.back, libc::CLONE_NEWNET) };
        close(self.back);
    }
}

/// One registration of a descriptor in an epoll set: the set's descriptor
/// (in the program's table), events (with their flags: EPOLLET,
/// EPOLLONESHOT, ...) and data.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub epfd: i32,
    pub events: u32,
    pub data: u64,
}

/// The registrations of descriptor `fd` (of file inode `ino`) in the epoll
/// sets of the process whose /proc directory is `proc` ("/proc/self", or
/// "/proc/TID" of a supervised thread): each descriptor that is an epoll
/// set (anon_inode:[eventpoll]) lists its registrations in its fdinfo. A
/// readlink per descriptor: the library looks only in a process that made
/// an epoll set.
pub fn held(proc: &str, fd: i32, ino: u64) -> Vec<Held> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("{proc}/fd")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(epfd) = std::str::from_utf8(entry.file_name().as_bytes())
            .ok()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let is_epoll = std::fs::read_link(entry.path())
            .is_ok_and(|l| l.as_os_str().as_bytes() == b"anon_inode:[eventpoll]");
        if !is_epoll {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(format!("{proc}/fdinfo/{epfd}")) else {
            continue;
        };
        out.extend(
            info.lines()
                .filter_map(parse_tfd)
                .filter(|r| r.0 == fd && r.3 == ino)
                .map(|(_, events, data, _)| Held { epfd, events, data }),
        );
    }
    out
}

/// One `tfd:` line of an epoll descriptor's fdinfo (fs/eventpoll.c
/// ep_show_fdinfo): `tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx
/// sdev:%x`: the descriptor, events, data and inode.
fn parse_tfd(line: &str) -> Option<(i32, u32, u64, u64)> {
    let rest = line.strip_prefix("tfd:")?;
    let mut words = rest.split_whitespace();
    let fd = words.next()?.parse().ok()?;
    let (mut events, mut data, mut ino) = (None, None, None);
    while let Some(w) = words.next() {
        match w {
            "events:" => events = u32::from_str_radix(words.next()?, 16).ok(),
            "data:" => data = u64::from_str_radix(words.next()?, 16).ok(),
            _ => {
                if let Some(i) = w.strip_prefix("ino:") {
                    ino = u64::from_str_radix(i, 16).ok();
                }
            }
        }
    }
    Some((fd, events?, data?, ino?))
}

/// After the conversion of a kernel socket that was `bound` to a kernel
/// name: new udsfs socket `new` is autobound (udsfs keeps no kernel names),
/// with a line said through `say`.
pub fn rebind(new: i32, bound: bool, say: impl FnOnce(&str)) -> Res<()> {
    if !bound {
        return Ok(());
    }
    say("it was bound to a kernel AF_UNIX name; on udsfs it is autobound instead");
    client::op(new, Op::Bind, 0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_tfd_line() {
        let line = "tfd:        7 events: 80000019 data:     12345678abcdef  pos:0 ino:1f2e sdev:8";
        assert_eq!(
            parse_tfd(line),
            Some((7, 0x8000_0019, 0x12_3456_78ab_cdef, 0x1f2e))
        );
        assert_eq!(parse_tfd("pos:\t0"), None);
    }

    #[test]
    fn finds_the_registrations_of_a_descriptor_in_this_process() {
        use std::os::fd::AsRawFd;
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: a new epoll set, closed below.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0xfeed,
        };
        // SAFETY: a local epoll_event.
        assert_eq!(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, a.as_raw_fd(), &mut ev) },
            0
        );
        let ino = std::fs::metadata(format!("/proc/self/fd/{}", a.as_raw_fd()))
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap();
        let got = held("/proc/self", a.as_raw_fd(), ino);
        println!("registrations of fd {}: {got:?}", a.as_raw_fd());
        // The kernel adds EPOLLERR and EPOLLHUP, which are always reported.
        let events = libc::EPOLLIN | libc::EPOLLET | libc::EPOLLERR | libc::EPOLLHUP;
        let want = Held {
            epfd: ep,
            events: events as u32,
            data: 0xfeed,
        };
        assert_eq!(got, vec![want]);
        // SAFETY: ours.
        unsafe { libc::close(ep) };
    }
}

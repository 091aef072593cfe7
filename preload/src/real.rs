//! The C library's own functions behind the ones this library replaces,
//! found once with dlsym(RTLD_NEXT) (`next`); the socket calls among them
//! are made as system calls from the library's own call site instead
//! (`gadget.rs`), which the supervisor's filter lets through untrapped.
//! They are then not cancellation points, as the C library's are.

use libc::{c_int, c_uint, c_ulong, c_void, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use std::sync::atomic::{AtomicUsize, Ordering};

fn resolve(name: &'static str, slot: &AtomicUsize) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: name is NUL-terminated (see the macro below).
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if p == 0 {
        crate::log::say(&format!(
            "no next definition of {}; aborting",
            name.trim_end_matches('\0')
        ));
        // SAFETY: abort never returns.
        unsafe { libc::abort() };
    }
    slot.store(p, Ordering::Relaxed);
    p
}

macro_rules! real {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {
    /// The C library's functions, found with dlsym.
    pub mod next {
        use super::*;
        /// One slot per function, filled at the first call or by `resolve_all`.
        #[allow(non_upper_case_globals)]
        mod slot {
            use std::sync::atomic::AtomicUsize;
            $(pub static $name: AtomicUsize = AtomicUsize::new(0);)*
        }
        $(
        /// The C library's function of this name.
        pub unsafe fn $name($($a: $t),*) -> $r {
            let p = resolve(concat!(stringify!($name), "\0"), &slot::$name);
            // SAFETY: the symbol has this C signature.
            let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute(p) };
            unsafe { f($($a),*) }
        }
        )*
        /// Finds every function now (the library's constructor), so that no
        /// later call, from a signal handler say, runs dlsym.
        pub fn resolve_all() {
            $(resolve(concat!(stringify!($name), "\0"), &slot::$name);)*
        }
    }
    };
}

pub use next::*;

real! {
    __recv_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
    __recvfrom_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t;
    fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    fstatat(dirfd: c_int, path: *const libc::c_char, st: *mut libc::stat, flags: c_int) -> c_int;
    fstatat64(dirfd: c_int, path: *const libc::c_char, st: *mut libc::stat64, flags: c_int) -> c_int;
    lstat(path: *const libc::c_char, st: *mut libc::stat) -> c_int;
    stat(path: *const libc::c_char, st: *mut libc::stat) -> c_int;
    stat64(path: *const libc::c_char, st: *mut libc::stat64) -> c_int;
    __xstat(ver: c_int, path: *const libc::c_char, st: *mut libc::stat) -> c_int;
    __xstat64(ver: c_int, path: *const libc::c_char, st: *mut libc::stat64) -> c_int;
    lstat64(path: *const libc::c_char, st: *mut libc::stat64) -> c_int;
    __lxstat(ver: c_int, path: *const libc::c_char, st: *mut libc::stat) -> c_int;
    __lxstat64(ver: c_int, path: *const libc::c_char, st: *mut libc::stat64) -> c_int;
    epoll_create(size: c_int) -> c_int;
    epoll_create1(flags: c_int) -> c_int;
    epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int;
    epoll_wait(epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int;
    epoll_pwait(epfd: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int;
    epoll_pwait2(epfd: c_int, ev: *mut libc::epoll_event, max: c_int, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
    ppoll(fds: *mut libc::pollfd, n: libc::nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    __poll_chk(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int, fdslen: size_t) -> c_int;
    __ppoll_chk(fds: *mut libc::pollfd, n: libc::nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t, fdslen: size_t) -> c_int;
    select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, x: *mut libc::fd_set, tv: *mut libc::timeval) -> c_int;
    pselect(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, x: *mut libc::fd_set, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    remove(path: *const libc::c_char) -> c_int;
    link(old: *const libc::c_char, new: *const libc::c_char) -> c_int;
    linkat(olddir: c_int, old: *const libc::c_char, newdir: c_int, new: *const libc::c_char, flags: c_int) -> c_int;
    statx(dirfd: c_int, path: *const libc::c_char, flags: c_int, mask: c_uint, st: *mut libc::statx) -> c_int;
    write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t;
    // fdgen.rs: the closes of descriptor numbers.
    close(fd: c_int) -> c_int;
    dup(old: c_int) -> c_int;
    dup2(old: c_int, new: c_int) -> c_int;
    dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    fclose(f: *mut libc::FILE) -> c_int;
    // restart.rs: the handler calls and the data file's own I/O.
    sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t;
    __read_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    // exec.rs: the exec calls, when no supervisor is wanted.
    execve(path: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    execv(path: *const libc::c_char, argv: *const *const libc::c_char) -> c_int;
    execvp(file: *const libc::c_char, argv: *const *const libc::c_char) -> c_int;
    execvpe(file: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    fexecve(fd: c_int, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    posix_spawn(pid: *mut libc::pid_t, path: *const libc::c_char, fa: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    posix_spawnp(pid: *mut libc::pid_t, file: *const libc::c_char, fa: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
}

/// The socket calls, made through the gadget page (their system call
/// numbers are those the supervisor's filter traps).
macro_rules! sys {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty = $nr:ident;)*) => {$(
        /// The system call of this name, from the library's call site.
        pub unsafe fn $name($($a: $t),*) -> $r {
            // SAFETY: the arguments of the system call, in its order.
            unsafe { raw(libc::$nr, &[$($a as libc::c_long),*]) as $r }
        }
    )*};
}

/// System call `nr` with up to six arguments through the gadget.
///
/// # Safety
/// The arguments are what the call takes.
unsafe fn raw(nr: libc::c_long, a: &[libc::c_long]) -> libc::c_long {
    let g = |i: usize| a.get(i).copied().unwrap_or(0);
    // SAFETY: as the caller promised.
    unsafe { crate::gadget::call(nr, g(0), g(1), g(2), g(3), g(4), g(5)) }
}

sys! {
    socket(d: c_int, t: c_int, p: c_int) -> c_int = SYS_socket;
    socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int = SYS_socketpair;
    bind(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int = SYS_bind;
    connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int = SYS_connect;
    listen(fd: c_int, backlog: c_int) -> c_int = SYS_listen;
    accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int = SYS_accept4;
    sendto(fd: c_int, b: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t = SYS_sendto;
    sendmsg(fd: c_int, m: *const msghdr, flags: c_int) -> ssize_t = SYS_sendmsg;
    sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int = SYS_sendmmsg;
    recvfrom(fd: c_int, b: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t = SYS_recvfrom;
    recvmsg(fd: c_int, m: *mut msghdr, flags: c_int) -> ssize_t = SYS_recvmsg;
    recvmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, t: *mut libc::timespec) -> c_int = SYS_recvmmsg;
    getsockname(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int = SYS_getsockname;
    getpeername(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int = SYS_getpeername;
    getsockopt(fd: c_int, level: c_int, name: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int = SYS_getsockopt;
    setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int = SYS_setsockopt;
    shutdown(fd: c_int, how: c_int) -> c_int = SYS_shutdown;
    ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int = SYS_ioctl;
    // The library's close of a descriptor of its own (an eventfd, an
    // inotify watch), which is none of the program's closes (closes.rs):
    // through those, a give-back's close swept the lane table, which gave
    // back the next slot, whose close swept again, one level each
    // (hackbench -T's 16 KiB stacks overflowed at 40 pairs).
    own_close(fd: c_int) -> c_int = SYS_close;
    // The library's copy of a program's descriptor (lane.rs `Kept`), not
    // through its syscall() entry either.
    own_fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int = SYS_fcntl;
    // Trapped with --route prefixes (src/supervisor/filter.rs ROUTED: a
    // routed name's node goes too, or moves along).
    unlink(path: *const libc::c_char) -> c_int = SYS_unlink;
    unlinkat(dirfd: c_int, path: *const libc::c_char, flags: c_int) -> c_int = SYS_unlinkat;
    rmdir(path: *const libc::c_char) -> c_int = SYS_rmdir;
    rename(old: *const libc::c_char, new: *const libc::c_char) -> c_int = SYS_rename;
    renameat(olddir: c_int, old: *const libc::c_char, newdir: c_int, new: *const libc::c_char) -> c_int = SYS_renameat;
    renameat2(olddir: c_int, old: *const libc::c_char, newdir: c_int, new: *const libc::c_char, flags: c_uint) -> c_int = SYS_renameat2;
}

/// recv(2) is recvfrom without an address, as the C library makes it.
pub unsafe fn recv(fd: c_int, b: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: as for recvfrom.
    unsafe { recvfrom(fd, b, n, flags, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// The fortified receives: a length past the buffer is the C library's to
/// refuse (it aborts the program); else the plain call.
pub unsafe fn __recv_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    if n > buflen {
        // SAFETY: the C library's check, which does not return.
        return unsafe { next::__recv_chk(fd, b, n, buflen, flags) };
    }
    // SAFETY: as for recv.
    unsafe { recv(fd, b, n, flags) }
}

pub unsafe fn __recvfrom_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    a: *mut sockaddr,
    l: *mut socklen_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: as above.
        return unsafe { next::__recvfrom_chk(fd, b, n, buflen, flags, a, l) };
    }
    // SAFETY: as for recvfrom.
    unsafe { recvfrom(fd, b, n, flags, a, l) }
}

/// The stat calls that name a file by descriptor (AT_EMPTY_PATH), from the
/// library's call site: the supervisor's filter traps those made elsewhere
/// (for programs without the library, src/supervisor/stat.rs), and these
/// are the library's to fix (lib.rs `stat_entry`). By path they are the C
/// library's, which the filter lets run.
mod by_fd {
    use super::{next, raw};
    use libc::{c_char, c_int, c_long, c_uint};

    const EMPTY: c_int = libc::AT_EMPTY_PATH;

    unsafe fn newfstatat<T>(fd: c_int, path: *const c_char, st: *mut T, flags: c_int) -> c_int {
        let a = [fd as c_long, path as c_long, st as c_long, flags as c_long];
        // SAFETY: newfstatat's arguments; struct stat and stat64 are one
        // layout on x86-64.
        unsafe { raw(libc::SYS_newfstatat, &a) as c_int }
    }

    /// fstat, __fxstat, fstatat and __fxstatat for one struct (`stat` or
    /// `stat64`): by descriptor the system call, by path the C library's.
    macro_rules! stat_calls {
        ($st:ty, $fstat:ident, $fxstat:ident, $fstatat:ident, $fxstatat:ident) => {
            pub unsafe fn $fstat(fd: c_int, st: *mut $st) -> c_int {
                // SAFETY: as the caller promised.
                unsafe { newfstatat(fd, c"".as_ptr(), st, EMPTY) }
            }

            pub unsafe fn $fxstat(_v: c_int, fd: c_int, st: *mut $st) -> c_int {
                // SAFETY: as the caller promised.
                unsafe { $fstat(fd, st) }
            }

            pub unsafe fn $fstatat(d: c_int, p: *const c_char, st: *mut $st, fl: c_int) -> c_int {
                // SAFETY: as the caller promised.
                unsafe {
                    if fl & EMPTY != 0 {
                        newfstatat(d, p, st, fl)
                    } else {
                        next::$fstatat(d, p, st, fl)
                    }
                }
            }

            pub unsafe fn $fxstatat(
                _v: c_int,
                d: c_int,
                p: *const c_char,
                st: *mut $st,
                fl: c_int,
            ) -> c_int {
                // SAFETY: as the caller promised.
                unsafe { $fstatat(d, p, st, fl) }
            }
        };
    }

    stat_calls!(libc::stat, fstat, __fxstat, fstatat, __fxstatat);
    stat_calls!(libc::stat64, fstat64, __fxstat64, fstatat64, __fxstatat64);

    pub unsafe fn statx(
        d: c_int,
        p: *const c_char,
        fl: c_int,
        mask: c_uint,
        st: *mut libc::statx,
    ) -> c_int {
        // SAFETY: as the caller promised.
        unsafe {
            if fl & EMPTY != 0 {
                let a = [
                    d as c_long,
                    p as c_long,
                    fl as c_long,
                    mask as c_long,
                    st as c_long,
                ];
                raw(libc::SYS_statx, &a) as c_int
            } else {
                next::statx(d, p, fl, mask, st)
            }
        }
    }
}

pub use by_fd::{
    __fxstat, __fxstat64, __fxstatat, __fxstatat64, fstat, fstat64, fstatat, fstatat64, statx,
};

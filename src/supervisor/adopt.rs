//! Both fronts in one process tree. A program under the preload library that
//! execs a static or Go binary (preload/src/exec.rs) execs
//! `udsfs run --in-place SOCK --exec-file FILE -- ARGV` instead, in the same
//! process: its pid and parent stay. That process (`exec_in_place`) asks the
//! `udsfs run` listening at SOCK (`Requests`) to supervise it, installs the
//! filter, hands the listener over as CMD's is handed over (`install`,
//! `take_listener`) and execs FILE. The supervisor is `udsfs run` itself:
//! an ancestor of every process it runs, as the daemon's act-for check
//! requires (src/fuse/actfor.rs), and it outlives them (it reaps them all).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{below_us, call, filter, install, last, serve, take_listener};

/// The socket at which `udsfs run` takes requests to supervise a process
/// of its tree; removed with its directory when dropped.
pub struct Requests {
    dir: PathBuf,
}

impl Requests {
    /// Listens on a fresh socket for the programs on `mount` with `routes`.
    pub fn start(mount: &Path, routes: &[Vec<u8>]) -> Result<Requests, String> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let ctx = Arc::new(super::context(mount, routes)?);
        let base = std::env::temp_dir();
        sweep(&base);
        // A random part: another user who can write to $TMPDIR must not be
        // able to take every name this pid would try in advance. Made 0700,
        // so that no one else can put a file in it before the chmod below.
        let dir = (0..100)
            .map(|_| {
                let mut r = 0u64;
                // SAFETY: getrandom writes at most 8 bytes into r.
                unsafe { libc::getrandom((&mut r as *mut u64).cast(), 8, 0) };
                base.join(format!("udsfs-exec-{}-{r:016x}", std::process::id()))
            })
            .find(|d| std::fs::DirBuilder::new().mode(0o700).create(d).is_ok())
            .ok_or("cannot make a directory for the supervisor's socket")?;
        let req = Requests { dir };
        // A program that switched users must reach it too: who may be
        // supervised is decided by the peer's place in the tree (`serve_one`).
        let perm =
            |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
        perm(&req.dir, 0o711).map_err(|e| e.to_string())?;
        let sock = req.socket();
        let l = UnixListener::bind(&sock).map_err(|e| format!("{}: {e}", sock.display()))?;
        perm(&sock, 0o666).map_err(|e| e.to_string())?;
        let unlink = !routes.is_empty();
        std::thread::Builder::new()
            .name("udsfs-run-requests".into())
            .spawn(move || {
                for conn in l.incoming().flatten() {
                    let ctx = ctx.clone();
                    let _ = std::thread::Builder::new()
                        .name("udsfs-run-adopt".into())
                        .spawn(move || {
                            if let Err(e) = serve_one(conn.into(), unlink, ctx) {
                                eprintln!("udsfs run: supervising an exec: {e}");
                            }
                        });
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(req)
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes what runs killed outright (SIGKILL) left in `base`: the socket
/// directories of processes that are gone, if they are ours.
fn sweep(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("udsfs-exec-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !crate::procfs::exists(pid) {
            let _ = std::fs::remove_file(e.path().join("sock"));
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// One request: the peer (SO_PEERCRED) must be in our tree; it is told
/// which filter to install (with unlink for routes: b'u', else b'n'), sends
/// its listener as `install` does, and from then on its calls are served.
fn serve_one(conn: OwnedFd, unlink: bool, ctx: Arc<call::Ctx>) -> Result<(), String> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes one ucred.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(format!("SO_PEERCRED: {}", last()));
    }
    let peer = peer_pidfd(&conn).map_err(|e| format!("process {}: SO_PEERPIDFD: {e}", cred.pid))?;
    // The ancestry read from /proc is the peer's only if the peer still
    // lives after it: its pid cannot have gone to another process meanwhile.
    if !below_us(cred.pid) || !crate::pidfd::alive(&peer) {
        return Err(format!(
            "process {} is not one this udsfs run started: refused",
            cred.pid
        ));
    }
    let which = if unlink { b"u" } else { b"n" };
    // SAFETY: writes one byte of a local buffer.
    if unsafe { libc::write(conn.as_raw_fd(), which.as_ptr().cast(), 1) } != 1 {
        return Err(format!("process {}: {}", cred.pid, last()));
    }
    match take_listener(&conn, Some((cred.pid, &peer))) {
        Ok(listener) => serve(listener, ctx),
        // Under this run's own filter already (the library's tree): carried.
        Err(e) if e == super::ALREADY => Ok(()),
        Err(e) => Err(e),
    }
}

/// The pidfd of the process that connected `conn` (Linux 6.5).
fn peer_pidfd(conn: &OwnedFd) -> std::io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            udsfs_proto::sockopt::SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Raw system calls: this process still has the library (LD_PRELOAD), and
/// the socket's directory may lie under a route.
fn connect(sock: &Path) -> std::io::Result<OwnedFd> {
    let path = sock.as_os_str().as_bytes();
    // SAFETY: a zeroed sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= sa.sun_path.len() {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &b) in sa.sun_path.iter_mut().zip(path) {
        *d = b as libc::c_char;
    }
    let ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    // SAFETY: socket makes a descriptor, which we own at once.
    let fd = unsafe { libc::syscall(libc::SYS_socket, libc::AF_UNIX, ty, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: connect reads sizeof(sa) bytes of sa.
    let r = unsafe {
        libc::syscall(
            libc::SYS_connect,
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_un,
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// This process under the filter of the `udsfs run` at `sock`.
fn attach(sock: &Path) -> Result<(), String> {
    let conn = connect(sock).map_err(|e| format!("{}: {e}", sock.display()))?;
    let mut which = 0u8;
    // SAFETY: reads one byte into a local.
    if unsafe { libc::syscall(libc::SYS_read, conn.as_raw_fd(), &mut which as *mut u8, 1) } != 1 {
        return Err("the supervisor refused (see its message)".into());
    }
    let prog = filter::program(filter::Kind::Supervised {
        routed: which == b'u',
    });
    install(&prog, conn.as_raw_fd(), false, false).map_err(|e| e.to_string())
}

/// LD_PRELOAD without `lib`: the program runs under the supervisor alone,
/// as under `udsfs run --front seccomp` (its dynamic children too).
fn without_library(lib: &OsStr) {
    let Some(old) = std::env::var_os("LD_PRELOAD") else {
        return;
    };
    let kept: Vec<&[u8]> = old
        .as_bytes()
        .split(|&b| b == b':' || b == b' ')
        .filter(|e| !e.is_empty() && *e != lib.as_bytes())
        .collect();
    // SAFETY: this process has one thread (it is about to exec).
    unsafe {
        if kept.is_empty() {
            std::env::remove_var("LD_PRELOAD");
        } else {
            std::env::set_var("LD_PRELOAD", OsStr::from_bytes(&kept.join(&b':')));
        }
    }
}

/// `udsfs run --in-place SOCK --exec-file FILE [--preloaded LIB]
/// [--sigpipe-ignored] -- ARGV`: execs FILE with ARGV and this environment
/// (less LIB) under the supervisor at SOCK; returns only if the exec failed.
/// Not supervised (the request refused), FILE still runs, on kernel
/// sockets, and says so.
pub fn exec_in_place(
    sock: &Path,
    file: &Path,
    argv: &[OsString],
    lib: Option<&OsStr>,
    sigpipe_ignored: bool,
) -> i32 {
    if let Err(e) = attach(sock) {
        eprintln!(
            "udsfs run: {}: not under the supervisor ({e}): its sockets stay kernel sockets",
            file.display()
        );
    }
    if let Some(lib) = lib {
        without_library(lib);
    }
    // The caller's disposition of SIGPIPE, which this binary's runtime set
    // to ignored at its start; exec keeps an ignored signal ignored.
    if !sigpipe_ignored {
        // SAFETY: restores the default action of one signal.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let cstr = |s: &OsStr| CString::new(s.as_bytes()).ok();
    let (Some(path), Some(args)) = (
        cstr(file.as_os_str()),
        argv.iter().map(|a| cstr(a)).collect::<Option<Vec<_>>>(),
    ) else {
        eprintln!("udsfs run: {}: a NUL in an argument", file.display());
        return 127;
    };
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: NUL-terminated strings and NULL-terminated vectors; a raw
    // execve, so that the library in this process does not see it again.
    unsafe { libc::syscall(libc::SYS_execve, path.as_ptr(), ptrs.as_ptr(), environ) };
    let e = std::io::Error::last_os_error();
    eprintln!("udsfs run: {}: {e}", file.display());
    if e.raw_os_error() == Some(libc::ENOENT) {
        127
    } else {
        126
    }
}

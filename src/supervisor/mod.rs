//! `udsfs run --front seccomp`: a supervisor for programs the preload
//! library cannot reach (Go, static binaries, raw system calls). CMD starts
//! under a seccomp filter (`filter`) whose listener (`listener`) comes back
//! to the supervisor; each trapped socket call (`notify`) is answered at once
//! for kernel sockets and otherwise emulated (`emulate`) with the daemon's own
//! files and ioctls (`daemon`), reading and writing the target's memory
//! (`mem`) and descriptors (`target`) and routing names as the library does
//! (`udsfs_proto::route`). A udsfs socket in CMD is its `.udsfs/sock/N/data` file at the
//! descriptor number the program holds, so read, write, poll and close are
//! native.

mod actfor;
mod adopt;
mod call;
mod daemon;
mod deliver;
mod emulate;
mod epolls;
mod fcntl;
mod fdpass;
mod filter;
mod listener;
mod mem;
mod msg;
mod notify;
mod opts;
mod park;
mod pending;
mod pidfd;
mod record;
mod routed;
mod stat;
mod target;
mod thread_uid;
mod tree;
mod wait;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use udsfs_proto::route;

pub use adopt::{Requests, exec_in_place};

/// What comes back from CMD's side before it execs: the listener, once the
/// supervisor holds a copy of it.
pub struct Setup {
    helper: std::thread::JoinHandle<Result<OwnedFd, String>>,
    child_end: OwnedFd,
    ctx: call::Ctx,
}

fn last() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The channel between `udsfs run` and the process it starts under the
/// filter (the child's end passes the seccomp listener back).
fn stream_pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
}

/// Makes `cmd` start under the filter (`library`: CMD carries the preload
/// library, `filter::Kind::Library`). Call `Setup::start` once `cmd` is
/// spawned (or failed to).
pub fn prepare(
    cmd: &mut Command,
    mount: &Path,
    routes: &[Vec<u8>],
    library: bool,
) -> Result<Setup, String> {
    use std::os::unix::process::CommandExt;
    let ctx = context(mount, routes)?;
    let (parent, child) = stream_pair().map_err(|e| format!("socketpair: {e}"))?;
    let routed = !routes.is_empty();
    let prog = filter::program(if library {
        filter::Kind::Library { routed }
    } else {
        filter::Kind::Supervised { routed }
    });
    let chan = child.as_raw_fd();
    // SAFETY: the closure makes only async-signal-safe system calls.
    unsafe { cmd.pre_exec(move || install(&prog, chan, true, library)) };
    let helper = std::thread::Builder::new()
        .name("udsfs-run-listener".into())
        .spawn(move || take_listener(&parent, None))
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(Setup {
        helper,
        child_end: child,
        ctx,
    })
}

/// What the supervisor of programs on `mount` with `routes` works with.
fn context(mount: &Path, routes: &[Vec<u8>]) -> Result<call::Ctx, String> {
    use std::os::unix::ffi::OsStrExt;
    let dev = target::Dev::of(mount).ok_or_else(|| format!("{}: {}", mount.display(), last()))?;
    // Every udsfs socket is made through these files.
    if !mount.join(".udsfs/unix").is_file() {
        return Err(format!("{} is not a udsfs mount", mount.display()));
    }
    Ok(call::Ctx {
        daemon: daemon::Daemon {
            mount: mount.to_path_buf(),
        },
        routes: route::Routes {
            mount: mount.as_os_str().as_bytes().to_vec(),
            routes: routes.iter().map(|r| route::normalize(r, b"/")).collect(),
        },
        dev,
    })
}

/// Is process (or thread) `pid` below this one?
pub(crate) fn below_us(mut pid: i32) -> bool {
    let us = std::process::id() as i32;
    for _ in 0..4096 {
        if pid <= 1 {
            return false;
        }
        match crate::procfs::Status::read(pid as u32) {
            Ok(st) if st.ppid == us => return true,
            Ok(st) => pid = st.ppid,
            Err(_) => return false,
        }
    }
    false
}

/// In CMD, just before exec: no new privileges when the caller is not
/// privileged (seccomp requires it then; a setuid or setgid program then
/// runs without its privilege: preload/src/exec.rs refuses it), death
/// with the supervisor (`pdeathsig`: when it is the parent), the
/// filter, and the listener's number and our pid sent to the supervisor,
/// which takes a copy with pidfd_getfd (a sendmsg would be trapped itself).
///
/// `optional`: CMD carries the library, and runs without the filter when
/// the kernel refuses it (seccomp forbidden by a container's own filter,
/// say), as it did before there was one; the supervisor is told the errno
/// (listener `-NOT_INSTALLED - errno`) and says so on the run's stderr.
fn install(
    prog: &[libc::sock_filter],
    chan: RawFd,
    pdeathsig: bool,
    optional: bool,
) -> std::io::Result<()> {
    // SAFETY: prctl and seccomp on this process; the program outlives the call.
    let fd = unsafe {
        // Without its supervisor every trapped call fails (ENOSYS): CMD
        // goes with it rather than hang on a socket nobody serves.
        if pdeathsig && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
            return Err(last());
        }
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        let set = |flags: libc::c_ulong| {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        };
        // Once the supervisor has a call, only a fatal signal interrupts
        // it (Linux 5.19): a call it carried out is not made again. Pending
        // signals end its waits instead (emulate.rs `wait`).
        let flags =
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
        let set_any = || {
            let fd = set(flags);
            if fd < 0 && last().raw_os_error() == Some(libc::EINVAL) {
                return set(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
            }
            fd
        };
        // Root (CAP_SYS_ADMIN in its user namespace) installs it without
        // no_new_privs: a setgid program of a root run (Debian's ssh-agent)
        // keeps its group, and its calls still come here.
        let mut fd = set_any();
        if fd < 0 && last().raw_os_error() == Some(libc::EACCES) {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
                return Err(last());
            }
            fd = set_any();
        }
        // One listener per filter chain (EBUSY): this tree is under another
        // udsfs run's filter already (a run inside a run, a static program
        // adopted below a library run), whose supervisor carries it. Said
        // to the supervisor as listener -1 (`ALREADY`).
        if fd < 0 && last().raw_os_error() == Some(libc::EBUSY) {
            -1
        } else if fd < 0 && optional {
            -NOT_INSTALLED - last().raw_os_error().unwrap_or(0)
        } else if fd < 0 {
            return Err(last());
        } else {
            fd as i32
        }
    };
    let mut msg = [0u8; 8];
    // SAFETY: getpid has no preconditions.
    msg[..4].copy_from_slice(&unsafe { libc::getpid() }.to_ne_bytes());
    msg[4..].copy_from_slice(&fd.to_ne_bytes());
    let mut ack = 0u8;
    // SAFETY: write and read of local buffers on our end of the pair.
    let ok = unsafe {
        libc::write(chan, msg.as_ptr().cast(), msg.len()) == msg.len() as isize
            && libc::read(chan, (&mut ack as *mut u8).cast(), 1) == 1
    };
    if fd >= 0 {
        // SAFETY: the listener is the supervisor's now.
        unsafe { libc::close(fd) };
    }
    if !ok {
        return Err(std::io::Error::other(
            "the supervisor did not take the seccomp listener",
        ));
    }
    Ok(())
}

/// `install` could not install an optional filter: listener -(this + errno).
const NOT_INSTALLED: i32 = 1000;

/// What `take_listener` says when the process is under another run's
/// filter already (`install`): not an error of the process.
pub const ALREADY: &str = "already under the filter of an enclosing udsfs run, whose supervisor carries what the library does not";

/// The supervisor's side of `install` (from process `expect` only, when given).
/// `expect`: the peer of an adoption request, by its process id and the
/// pidfd its socket names (SO_PEERPIDFD), through which the listener is
/// taken: a pid opened anew could meanwhile be another process's.
fn take_listener(chan: &OwnedFd, expect: Option<(i32, &OwnedFd)>) -> Result<OwnedFd, String> {
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        // SAFETY: reads into a local buffer.
        let n = unsafe {
            libc::read(
                chan.as_raw_fd(),
                msg[got..].as_mut_ptr().cast(),
                msg.len() - got,
            )
        };
        if n <= 0 {
            return Err("the command ended before its seccomp filter was in place".into());
        }
        got += n as usize;
    }
    let pid = i32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let fd = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    if fd == -1 {
        // SAFETY: writes one byte.
        unsafe { libc::write(chan.as_raw_fd(), b"k".as_ptr().cast(), 1) };
        return Err(ALREADY.into());
    }
    if fd <= -NOT_INSTALLED {
        // SAFETY: writes one byte.
        unsafe { libc::write(chan.as_raw_fd(), b"k".as_ptr().cast(), 1) };
        let e = std::io::Error::from_raw_os_error(-fd - NOT_INSTALLED);
        return Err(format!(
            "the command runs without the supervisor's seccomp filter ({e}): the library \
             carries it, but what the library does not (a raw system call, a child without \
             the library, a static or set-ID program) stays on kernel sockets"
        ));
    }
    let opened;
    let pidfd = match expect {
        Some((peer, _)) if peer != pid => {
            return Err(format!(
                "process {peer} sent the listener of another ({pid})"
            ));
        }
        Some((_, pidfd)) => pidfd,
        None => {
            // CMD, our child: its pid stays its own until we reap it.
            opened = crate::pidfd::open(pid, 0)
                .map_err(|e| format!("pidfd_open: {}", std::io::Error::from(e)))?;
            &opened
        }
    };
    // SAFETY: pidfd_getfd returns a descriptor we own.
    let listener = unsafe {
        let l = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if l < 0 {
            return Err(format!("pidfd_getfd of the seccomp listener: {}", last()));
        }
        OwnedFd::from_raw_fd(l as i32)
    };
    // SAFETY: writes one byte.
    unsafe { libc::write(chan.as_raw_fd(), b"k".as_ptr().cast(), 1) };
    Ok(listener)
}

impl Setup {
    /// After `cmd.spawn()`: serves CMD's trapped calls on a thread until
    /// no process under the filter is left.
    pub fn start(self) -> Result<(), String> {
        // Ours closed, the helper sees EOF if CMD never got to its filter.
        drop(self.child_end);
        let listener = self
            .helper
            .join()
            .map_err(|_| "the listener thread failed".to_string())??;
        serve(listener, Arc::new(self.ctx))
    }
}

/// Serves the trapped calls of `listener` on a thread until no process
/// under its filter is left.
fn serve(listener: OwnedFd, ctx: Arc<call::Ctx>) -> Result<(), String> {
    let listener = Arc::new(listener::Listener::new(listener));
    std::thread::Builder::new()
        .name("udsfs-supervise".into())
        .spawn(move || notify::serve(listener, ctx))
        .map(|_| ())
        .map_err(|e| format!("cannot start the supervisor: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool ends when the last process under the filter goes, on every
    /// kernel: with receives that stay blocked at the end, as before Linux
    /// 6.11 (`listener::RECV_STAYS`), the end watcher (notify.rs
    /// `watch_end`) still ends them. A child under the filter makes one
    /// trapped call (socket, a kernel socket: continued) and exits.
    #[test]
    fn the_pool_ends_when_recv_stays_blocked() {
        use std::os::unix::process::CommandExt;
        listener::RECV_STAYS.store(true, std::sync::atomic::Ordering::Relaxed);
        let (parent, child) = stream_pair().unwrap();
        let prog = filter::program(filter::Kind::Supervised { routed: false });
        let chan = child.as_raw_fd();
        let mut cmd = Command::new("python3");
        cmd.args([
            "-c",
            "import socket; socket.socket(socket.AF_INET); print('made')",
        ]);
        // SAFETY: install makes only async-signal-safe calls.
        unsafe { cmd.pre_exec(move || install(&prog, chan, false, false)) };
        let helper = std::thread::spawn(move || take_listener(&parent, None));
        let mut c = cmd.spawn().expect("python3");
        drop(child);
        let fd = helper.join().unwrap().expect("the listener");
        let ctx = call::Ctx {
            daemon: daemon::Daemon {
                mount: "/nonexistent".into(),
            },
            routes: route::Routes {
                mount: b"/nonexistent".to_vec(),
                routes: Vec::new(),
            },
            dev: target::Dev { major: 0, minor: 0 },
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let l = Arc::new(listener::Listener::new(fd));
        std::thread::spawn(move || {
            notify::serve(l, Arc::new(ctx));
            let _ = tx.send(());
        });
        let st = c.wait().unwrap();
        println!("the child under the filter: {st}");
        assert!(st.success());
        let ended = rx.recv_timeout(std::time::Duration::from_secs(20));
        println!("the pool after the child's exit, receives staying blocked: {ended:?}");
        assert!(
            ended.is_ok(),
            "the pool still serves 20 s after the last target went"
        );
    }
}

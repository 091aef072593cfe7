//! `udsfs mount`: checks the mount point, starts the daemon (in the background
//! when asked) and serves the mount until a signal or an unmount ends it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fuser::{Config, MountOption, SessionACL};

use super::mounts;
use super::options::{MountArgs, kernel_options};
use crate::engine::{self, Engine};
use crate::fuse::UdsFs;

/// The pipe on which a background daemon says "ready" or why it failed.
const READY_FD_ENV: &str = "UDSFS_READY_FD";

/// `argv`: the arguments as the binary got them, for re-running itself.
pub fn main(a: &MountArgs, argv: &[OsString]) -> i32 {
    let mp = match preflight(&a.mountpoint) {
        Ok(mp) => mp,
        Err(e) => {
            eprintln!("udsfs: {e}");
            return 1;
        }
    };
    if a.background {
        return background(a, argv);
    }
    init_log(a.log_file.as_deref());
    let mut ready = ready_pipe();
    match run(a, &mp, &mut ready) {
        Ok(()) => 0,
        Err(e) => {
            if let Some(mut f) = ready {
                let _ = writeln!(f, "{}", e.replace('\n', "\t"));
            }
            eprintln!("udsfs: {e}");
            log::error!("{e}");
            1
        }
    }
}

/// Refuses a mount point udsfs already serves, and clears a stale udsfs mount
/// (its daemon gone: ENOTCONN) so the new daemon can take its place.
fn preflight(mp: &Path) -> Result<PathBuf, String> {
    let mp = mounts::absolute(mp)?;
    let top = mounts::top_mount(&mp);
    match std::fs::metadata(&mp) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            let e = nix::errno::Errno::ENOTCONN.desc();
            let Some(m) = top.filter(|m| m.is_udsfs()) else {
                return Err(format!(
                    "{}: {e}: a stale FUSE mount of another filesystem; \
                     clear it with fusermount3 -u -z {0}",
                    mp.display()
                ));
            };
            let daemon = m
                .daemon_pid()
                .map(|p| format!(" (daemon pid {p} is gone)"))
                .unwrap_or_default();
            let msg = format!(
                "{}: stale udsfs mount{daemon}: {}; clearing it and mounting anew",
                mp.display(),
                nix::errno::Errno::ENOTCONN.desc()
            );
            eprintln!("udsfs: {msg}");
            log::warn!("{msg}");
            mounts::detach(&mp)?;
            Ok(mp)
        }
        Err(e) => Err(format!("{}: {e}", mp.display())),
        Ok(md) if !md.is_dir() => Err(format!("{}: not a directory", mp.display())),
        Ok(_) => match top.filter(|m| m.is_udsfs()) {
            Some(m) => Err(format!(
                "{}: already a udsfs mount, served by {}; `udsfs umount {0}` stops it",
                mp.display(),
                match m.daemon_pid() {
                    Some(p) if mounts::daemon_alive(p) => format!("daemon pid {p}"),
                    Some(p) => format!("daemon pid {p} (not in this pid namespace)"),
                    None => "an unknown daemon".into(),
                }
            )),
            None => Ok(mp),
        },
    }
}

fn init_log(file: Option<&Path>) {
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(f) = file.and_then(|f| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .ok()
    }) {
        b.target(env_logger::Target::Pipe(Box::new(f)));
    }
    let _ = b.try_init();
}

/// The write end of the readiness pipe, when a parent waits on one.
fn ready_pipe() -> Option<File> {
    let fd: i32 = std::env::var(READY_FD_ENV).ok()?.parse().ok()?;
    // SAFETY: the parent passed us this fd and nothing else owns it.
    Some(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Starts the daemon as a child and waits for its word that the mount is live.
fn background(a: &MountArgs, argv: &[OsString]) -> i32 {
    let (rd, wr) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("udsfs: pipe: {e}");
            return 1;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("udsfs"));
    let args = argv.iter().skip(1).filter(|x| *x != "--background");
    let log = a.log_file.as_ref().and_then(|f| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .ok()
    });
    let stderr = match log {
        Some(f) => Stdio::from(f),
        None => Stdio::null(),
    };
    // The child gets the pipe's write end; it must survive exec.
    let _ = nix::fcntl::fcntl(
        &wr,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    );
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env(READY_FD_ENV, wr.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: setsid is async-signal-safe and touches only the child.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("udsfs: cannot start the daemon: {e}");
            return 1;
        }
    };
    drop(wr);
    let mut line = String::new();
    let _ = BufReader::new(File::from(rd)).read_line(&mut line);
    match line.trim() {
        "ready" => {
            if !a.helper {
                println!("{}", child.id());
            }
            0
        }
        "" => {
            eprintln!("udsfs: the daemon did not come up (see its log)");
            1
        }
        why => {
            eprintln!("udsfs: {}", why.replace('\t', "\n"));
            1
        }
    }
}

fn run(a: &MountArgs, mountpoint: &Path, ready: &mut Option<File>) -> Result<(), String> {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    // Shares only matter where other users can reach the mount.
    let share = if a.allow_other { a.user_share * 10 } else { 0 };
    let cfg = engine::Config {
        hash_buckets: a.hash_buckets.max(1),
        max_dgram_qlen: a.max_dgram_qlen.unwrap_or_else(engine::host_max_dgram_qlen),
        sndbuf: a.sndbuf.max(4608),
        gc_trigger: a.gc_trigger,
        mountpoint: Some(mountpoint.to_path_buf()),
        max_nodes: a.max_nodes,
        max_sockets: a.max_sockets,
        max_queued_bytes: a.max_queued_bytes,
        user_share_permille: share,
        allow_other: a.allow_other,
        background_gc: !a.gc_manual,
        lanes: !a.no_lanes,
        root_uid: uid,
        root_gid: gid,
        ..engine::Config::default()
    };
    // Signals are taken by one thread with sigwait; block them before any thread starts,
    // so every thread inherits the mask.
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    set.add(nix::sys::signal::Signal::SIGTERM);
    set.add(nix::sys::signal::Signal::SIGHUP);
    let _ = set.thread_block();
    warn_request_timeout();
    let eng = Engine::new(cfg);
    crate::fdchannel::start(eng.clone());
    let fs = UdsFs::new(eng, uid, gid);
    let inner = fs.inner();
    inner.parks.set_max(a.max_parked);
    inner.parks.held.set_max(a.max_held_bytes);
    inner.parks.parked.set_user_share(share);
    inner.parks.held.set_user_share(share);
    inner.listings.set_max(a.max_held_bytes);
    inner.listings.set_user_share(share);
    inner.set_capture_root_only(a.capture == "root");
    let mut config = Config::default();
    // The type shows as fuse.udsfs in the mount table: root mounts directly,
    // and only the kernel option carries the subtype there; fusermount3 takes
    // fuser's own.
    let subtype = if nix::unistd::geteuid().is_root() {
        MountOption::CUSTOM("subtype=udsfs".into())
    } else {
        MountOption::Subtype("udsfs".into())
    };
    config.mount_options = vec![
        MountOption::FSName(format!("udsfs:{}", std::process::id())),
        subtype,
        MountOption::DefaultPermissions,
    ];
    config.mount_options.extend(kernel_options(a));
    if a.allow_other {
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(a.threads.max(1));
    // A close must be done before the caller's next call is served, whichever thread
    // reads that call (vendor/fuser/src/release_order.rs).
    config.ordered_release = true;
    let mut session = fuser::Session::new(fs, mountpoint, &config)
        .map_err(|e| super::devfuse::explain(mountpoint, e))?;
    let unmounter = Arc::new(parking_lot::Mutex::new(session.unmount_callable()));
    {
        let inner = inner.clone();
        let unmounter = unmounter.clone();
        let mp = mountpoint.to_path_buf();
        std::thread::Builder::new()
            .name("udsfs-signals".into())
            .spawn(move || {
                if let Ok(sig) = set.wait() {
                    log::info!("{sig:?}: answering parked requests and unmounting");
                }
                inner.shutdown();
                if let Err(e) = unmounter.lock().unmount() {
                    // Busy (files still open): detach it lazily instead.
                    log::info!("unmount: {e}; detaching");
                    if let Err(e) = mounts::detach(&mp) {
                        log::warn!("detach: {e}");
                    }
                }
                // Files still open keep a lazily unmounted connection alive; the
                // daemon's exit ends it for them.
                std::thread::sleep(Duration::from_millis(500));
                std::process::exit(0);
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    }
    if let Some(mut f) = ready.take() {
        let mp = mountpoint.to_path_buf();
        std::thread::spawn(move || {
            let ok = std::fs::metadata(mp.join(".udsfs")).is_ok();
            let _ = f.write_all(if ok {
                b"ready\n"
            } else {
                b"the mount does not answer\n"
            });
        });
    }
    log::info!("udsfs mounted on {}", mountpoint.display());
    session.run().map_err(|e| e.to_string())?;
    inner.shutdown();
    Ok(())
}

/// A FUSE request timeout would abort the whole connection when a reader
/// waits long: say so at start-up.
fn warn_request_timeout() {
    for f in ["default_request_timeout", "max_request_timeout"] {
        if let Some(v) = crate::procfs::sysctl(&format!("fs.fuse.{f}"))
            && v != 0
        {
            log::warn!("fs.fuse.{f} is {v}: blocked readers may abort the mount");
        }
    }
}

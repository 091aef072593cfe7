//! The command line: `udsfs mount` and `udsfs umount`.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use fuser::{Config, MountOption, SessionACL};

use crate::engine::{self, Engine};
use crate::fuse::UdsFs;

#[derive(Parser)]
#[command(
    name = "udsfs",
    version,
    about = "Linux AF_UNIX sockets as a FUSE filesystem"
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mount udsfs (foreground unless --background).
    #[command(args_override_self = true)]
    Mount(MountArgs),
    /// Unmount a udsfs mount and stop its daemon.
    Umount { mountpoint: PathBuf },
    /// List the sockets of a mount, like `ss -x`.
    Ss {
        #[arg(default_value = "mountpoints/default")]
        mountpoint: PathBuf,
    },
}

#[derive(Args, Clone)]
struct MountArgs {
    /// Return once the mount answers requests; print the daemon's PID.
    #[arg(long)]
    background: bool,
    /// Let other users in (kernel default_permissions is always on).
    #[arg(long)]
    allow_other: bool,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Name-table buckets per half (1 = one lock, as before seed 003).
    #[arg(long, default_value_t = 256)]
    hash_buckets: usize,
    /// Datagram queue length (default: the host's net.unix.max_dgram_qlen).
    #[arg(long)]
    max_dgram_qlen: Option<usize>,
    /// Send buffer of new sockets, in bytes.
    #[arg(long, default_value_t = 212992)]
    sndbuf: usize,
    /// Sockets in flight that trigger a collection.
    #[arg(long, default_value_t = 16000)]
    gc_trigger: usize,
    /// Directories, socket nodes and symlinks the tree may hold (ENOSPC beyond).
    #[arg(long, default_value_t = 1 << 20)]
    max_nodes: usize,
    /// Requests that may wait in the daemon at once (ENOBUFS beyond).
    #[arg(long, default_value_t = 65536)]
    max_parked: u64,
    /// Bytes that waiting writes and partly written msg records may hold
    /// (ENOBUFS beyond).
    #[arg(long, default_value_t = 256 << 20)]
    max_held_bytes: u64,
    /// Sockets the mount's clients may make (ENFILE beyond).
    #[arg(long, default_value_t = 1 << 20)]
    max_sockets: u64,
    /// With --allow-other: the percentage of each bound (nodes, sockets,
    /// parked requests, bytes held) one user other than root may take.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100))]
    user_share: u64,
    /// Where the daemon logs when it runs in the background.
    #[arg(long)]
    log_file: Option<PathBuf>,
    #[arg(default_value = "mountpoints/default")]
    mountpoint: PathBuf,
}

const READY_FD_ENV: &str = "UDSFS_READY_FD";

pub fn main() -> i32 {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Mount(a) if a.background => background(&a),
        Cmd::Mount(a) => {
            init_log(a.log_file.as_deref());
            match run(&a) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("udsfs: {e}");
                    log::error!("{e}");
                    1
                }
            }
        }
        Cmd::Ss { mountpoint } => match ss(&mountpoint) {
            Ok(table) => {
                print!("{table}");
                0
            }
            Err(e) => {
                eprintln!("udsfs ss: {e}");
                1
            }
        },
        Cmd::Umount { mountpoint } => match umount(&mountpoint) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("udsfs umount: {e}");
                1
            }
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

/// Starts the daemon as a child and waits for its word that the mount is live.
fn background(a: &MountArgs) -> i32 {
    let (rd, wr) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("udsfs: pipe: {e}");
            return 1;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("udsfs"));
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|x| x != "--background")
        .collect();
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
    cmd.args(&args)
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
    let _ = BufReader::new(std::fs::File::from(rd)).read_line(&mut line);
    if line.trim() == "ready" {
        println!("{}", child.id());
        0
    } else {
        eprintln!(
            "udsfs: the daemon did not come up{}",
            if line.is_empty() { "" } else { ": " }
        );
        eprint!("{line}");
        1
    }
}

fn run(a: &MountArgs) -> std::io::Result<()> {
    let mountpoint = std::fs::canonicalize(&a.mountpoint)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", a.mountpoint.display())))?;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    // Shares only matter where other users can reach the mount.
    let share = if a.allow_other { a.user_share * 10 } else { 0 };
    let cfg = engine::Config {
        hash_buckets: a.hash_buckets.max(1),
        max_dgram_qlen: a.max_dgram_qlen.unwrap_or_else(engine::host_max_dgram_qlen),
        sndbuf: a.sndbuf.max(4608),
        gc_trigger: a.gc_trigger,
        mountpoint: Some(mountpoint.clone()),
        max_nodes: a.max_nodes,
        max_sockets: a.max_sockets,
        user_share_permille: share,
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
    let fs = UdsFs::new(eng, uid, gid);
    let inner = fs.inner();
    inner.parks.set_max(a.max_parked);
    inner.parks.held.set_max(a.max_held_bytes);
    inner.parks.parked.set_user_share(share);
    inner.parks.held.set_user_share(share);
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("udsfs:{}", std::process::id())),
        MountOption::Subtype("udsfs".into()),
        MountOption::DefaultPermissions,
    ];
    if a.allow_other {
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(a.threads.max(1));
    let mut session = fuser::Session::new(fs, &mountpoint, &config)?;
    let unmounter = Arc::new(parking_lot::Mutex::new(session.unmount_callable()));
    {
        let inner = inner.clone();
        let unmounter = unmounter.clone();
        let mp = mountpoint.clone();
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
                    if let Err(e) = detach(&mp) {
                        log::warn!("detach: {e}");
                    }
                }
                // Files still open keep a lazily unmounted connection alive; the
                // daemon's exit ends it for them.
                std::thread::sleep(Duration::from_millis(500));
                std::process::exit(0);
            })?;
    }
    if let Ok(fd) = std::env::var(READY_FD_ENV) {
        let mp = mountpoint.clone();
        std::thread::spawn(move || {
            let ok = std::fs::metadata(mp.join(".udsfs")).is_ok();
            if let Ok(fd) = fd.parse::<i32>() {
                // SAFETY: the parent passed us this fd and nothing else owns it.
                let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
                let _ = f.write_all(if ok {
                    b"ready\n"
                } else {
                    b"mount does not answer\n"
                });
            }
        });
    }
    log::info!("udsfs mounted on {}", mountpoint.display());
    session.run()?;
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

/// Finds the daemon of a mount from its fsname ("udsfs:PID").
fn daemon_pid(mp: &Path) -> Option<i32> {
    let mounts = crate::procfs::mounts().ok()?;
    mounts
        .iter()
        .rev()
        .find(|m| m.target == mp)
        .and_then(|m| m.source.strip_prefix("udsfs:")?.parse().ok())
}

fn is_mounted(mp: &Path) -> bool {
    crate::procfs::mounts().is_ok_and(|m| m.iter().any(|m| m.target == mp))
}

fn umount(mp: &Path) -> Result<(), String> {
    let mp = std::fs::canonicalize(mp).map_err(|e| format!("{}: {e}", mp.display()))?;
    if let Some(pid) = daemon_pid(&mp) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if !is_mounted(&mp) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if !is_mounted(&mp) {
        return Err(format!("{} is not mounted", mp.display()));
    }
    detach(&mp)
}

/// Lazy unmount: as root directly, otherwise through fusermount3.
fn detach(mp: &Path) -> Result<(), String> {
    if nix::mount::umount2(mp, nix::mount::MntFlags::MNT_DETACH).is_ok() {
        return Ok(());
    }
    let st = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mp)
        .status()
        .map_err(|e| format!("fusermount3: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err("fusermount3 -u -z failed".into())
    }
}

/// A table like `ss -x`, from `.udsfs/unix` and each socket's status file
/// (sockets whose status the caller may not read show `-` for the rest).
fn ss(mp: &Path) -> Result<String, String> {
    let unix = std::fs::read_to_string(mp.join(".udsfs/unix"))
        .map_err(|e| format!("{}: {e}", mp.display()))?;
    let mut out = format!(
        "{:<10} {:<12} {:>6} {:>8} {:>8}  {:<24} {}\n",
        "Netid", "State", "Sock", "Recv-Q", "Wmem", "Local", "Peer"
    );
    for line in unix.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(id) = f.get(6) else { continue };
        let netid = match f.get(4).copied() {
            Some("0001") => "u_str",
            Some("0002") => "u_dgr",
            Some("0005") => "u_seq",
            _ => "?",
        };
        let status = std::fs::read_to_string(mp.join(format!(".udsfs/sock/{id}/status")))
            .unwrap_or_default();
        let get = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                .map(str::to_owned)
                .unwrap_or_else(|| "-".into())
        };
        let local = f.get(7).copied().unwrap_or("*");
        let peer = get("peer");
        out.push_str(&format!(
            "{:<10} {:<12} {:>6} {:>8} {:>8}  {:<24} {}\n",
            netid,
            get("state"),
            id,
            get("rcvq_bytes"),
            get("wmem"),
            local,
            if peer.is_empty() { "*" } else { &peer }
        ));
    }
    Ok(out)
}

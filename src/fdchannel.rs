//! The fd channel: how files that are not udsfs sockets reach the daemon and
//! come back out. FUSE cannot carry a file descriptor, so the daemon listens
//! on a kernel AF_UNIX seqpacket socket of its own, at the abstract name
//! `@udsfs-fdpass-PID` (PID: the daemon's, as in the mount source
//! `udsfs:PID`), or, when someone holds that name already, one with a random
//! suffix. Anyone may bind an abstract name, so the name a client trusts is
//! the one the mount itself serves in `.udsfs/fdchannel` (only this daemon
//! answers reads of its mount); clients also check with SO_PEERCRED that the
//! peer has the daemon's uid, and its pid where that uid cannot tell
//! (`Client::connect`). The daemon takes the client's uid from
//! SO_PEERCRED and serves only users that may use the mount; every
//! connection and deposit is a descriptor of the daemon, charged to that
//! user (src/engine/fds.rs). Each request must also come from that uid, or
//! from root, as its sender is when it sends (the real uid of the
//! SCM_CREDENTIALS the kernel attaches to every packet: the listener has
//! SO_PASSCRED, and its connections inherit it): a connection made by root
//! and kept by a process that has become another user since (a program
//! that drops its privileges after the library connected, or one given the
//! descriptor) cannot claim as root any more (EACCES). Root's real uid may
//! use a connection made as another euid (the supervisor's `connect_as`).
//!
//! An abstract name exists in one network namespace only: a program in a
//! network namespace of its own (`unshare -n`) could not reach it. So the
//! daemon also listens at a path, `fdchannel` (mode 0666: whoever may use
//! the mount is checked as above) in a directory it makes itself, mode 0755:
//! `/run/udsfs-PID` (root) or `/tmp/udsfs-PID` (another user), or, when that
//! exists already (another user's, or a dead daemon's), the same with a
//! random suffix: a directory the daemon did not make is never used, and
//! nobody else can add, remove or replace a name in one it made. The path
//! is the file's second line; the directory goes at exit (a daemon killed
//! leaves it behind, and its path unanswered).
//!
//! The requests and answers are `udsfs_proto::fdchannel`'s; deposits not
//! sent when the connection closes are closed.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, Backlog, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr, accept, bind,
    getsockopt, listen, sendmsg, socket, sockopt,
};

use crate::engine::Engine;
use crate::engine::fds::ChargedFd;
use crate::engine::log_limit::limited;
use crate::engine::quota::Quota;
use crate::engine::rights::is_file_tag;
use udsfs_proto::fdchannel::{self as proto, MAX_FDS};

mod recv;
mod refuse;
use refuse::Refuser;

/// Connections served at once (a thread each), shared among users as the
/// mount's other bounds are (`--user-share`).
const MAX_CONNECTIONS: u64 = 1024;
/// Names tried when the usual one is taken.
const NAME_TRIES: usize = 8;

/// The name this daemon listens on, served as `.udsfs/fdchannel`.
static LISTENING_ON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The directory of the path socket, and the socket's path.
static LISTENING_AT: std::sync::OnceLock<(PathBuf, String)> = std::sync::OnceLock::new();

/// The text of `.udsfs/fdchannel`: the channel's abstract name (without the
/// leading NUL) and a newline, then its path and a newline when it has one;
/// nothing when the channel is off.
pub fn published_name() -> String {
    LISTENING_ON
        .get()
        .map(|n| proto::published(n, LISTENING_AT.get().map(|(_, p)| p.as_str())))
        .unwrap_or_default()
}

/// Binds the channel and serves it on a thread of its own. A failure is
/// logged: passing non-socket files is then refused.
pub fn start(eng: Arc<Engine>) {
    raise_nofile_limit();
    eng.set_fd_budget();
    let Some((name, listener)) = bind_unsquatted() else {
        log::warn!(
            "fd channel: no name could be bound: passing files other than udsfs sockets is off"
        );
        return;
    };
    let mut listeners = vec![listener];
    match bind_path() {
        Some((dir, path, l)) => {
            log::info!("fd channel listening at {path} too");
            let _ = LISTENING_AT.set((dir, path));
            listeners.push(l);
            // SAFETY: registers a function without arguments.
            unsafe { libc::atexit(remove_path) };
        }
        None => log::warn!(
            "fd channel: no path socket: programs in another network namespace cannot pass files"
        ),
    }
    let _ = LISTENING_ON.set(name.clone());
    log::info!("fd channel listening on @{name}");
    let spawned = std::thread::Builder::new()
        .name("udsfs-fdchannel".into())
        .spawn(move || serve(listeners, eng));
    if let Err(e) = spawned {
        log::warn!("fd channel: cannot start its thread: {e}");
    }
}

/// Files in flight are descriptors of the daemon (Linux holds them without
/// one): allow as many as the hard limit lets.
fn raise_nofile_limit() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 || r.rlim_cur >= r.rlim_max {
            return;
        }
        let soft = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) == 0 {
            log::info!(
                "RLIMIT_NOFILE raised from {soft} to {} for files in flight",
                r.rlim_max
            );
        } else {
            log::warn!(
                "RLIMIT_NOFILE stays {soft}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The usual name, or, if another process holds it (squatting it to receive
/// clients' files), a random one: clients read the name from the mount.
fn bind_unsquatted() -> Option<(String, OwnedFd)> {
    let usual = proto::channel_name(std::process::id());
    for i in 0..NAME_TRIES {
        let name = if i == 0 {
            usual.clone()
        } else {
            let mut b = [0u8; 8];
            // SAFETY: getrandom writes at most 8 bytes into b.
            unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
            format!("{usual}-{:016x}", u64::from_ne_bytes(b))
        };
        match listen_on(&name) {
            Ok(l) => return Some((name, l)),
            Err(Errno::EADDRINUSE) => {
                log::warn!("fd channel @{name}: taken by another process; trying another name")
            }
            Err(e) => {
                log::warn!("fd channel @{name}: {e}");
                return None;
            }
        }
    }
    None
}

/// The path socket in a directory of the daemon's own making (the module's
/// comment says where): its directory, its path and its listener.
fn bind_path() -> Option<(PathBuf, String, OwnedFd)> {
    let base = if nix::unistd::geteuid().is_root() {
        "/run"
    } else {
        "/tmp"
    };
    bind_path_in(base)
}

fn bind_path_in(base: &str) -> Option<(PathBuf, String, OwnedFd)> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let euid = nix::unistd::geteuid();
    let usual = format!("{base}/udsfs-{}", std::process::id());
    for i in 0..NAME_TRIES {
        let dir = if i == 0 {
            PathBuf::from(&usual)
        } else {
            let mut b = [0u8; 8];
            // SAFETY: getrandom writes at most 8 bytes into b.
            unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
            PathBuf::from(format!("{usual}-{:016x}", u64::from_ne_bytes(b)))
        };
        // mkdir makes it or fails: never one that was there (nor a link).
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                log::warn!(
                    "fd channel: {} exists already (not made by this daemon); trying another name",
                    dir.display()
                );
                continue;
            }
            Err(e) => {
                log::warn!("fd channel: cannot make {}: {e}", dir.display());
                return None;
            }
        }
        let made =
            std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir() && m.uid() == euid.as_raw());
        if !made || std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).is_err()
        {
            log::warn!(
                "fd channel: {} is not the daemon's own directory",
                dir.display()
            );
            return None;
        }
        let path = dir.join(proto::PATH_SOCKET);
        let Some(shown) = path.to_str().map(str::to_owned) else {
            let _ = std::fs::remove_dir(&dir);
            return None;
        };
        let bound = UnixAddr::new(&path)
            .and_then(|a| listen_at(&a))
            .and_then(|l| {
                // Anyone may connect: the daemon checks who (`may_connect`).
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
                    .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
                Ok(l)
            });
        return match bound {
            Ok(l) => Some((dir, shown, l)),
            Err(e) => {
                log::warn!("fd channel {shown}: {e}");
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_dir(&dir);
                None
            }
        };
    }
    None
}

/// At exit: the path socket and its directory go.
extern "C" fn remove_path() {
    if let Some((dir, path)) = LISTENING_AT.get() {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_dir(dir);
    }
}

fn listen_on(name: &str) -> nix::Result<OwnedFd> {
    listen_at(&UnixAddr::new_abstract(name.as_bytes())?)
}

fn listen_at(addr: &UnixAddr) -> nix::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    bind(fd.as_raw_fd(), addr)?;
    // Inherited by each accepted connection; a packet sent before the accept
    // carries its sender's credentials too (Linux attaches them for an
    // embryo), so every request comes with them.
    nix::sys::socket::setsockopt(&fd, sockopt::PassCred, &true)?;
    listen(&fd, Backlog::new(128)?)?;
    Ok(fd)
}

/// Who may use the channel: whoever may use the mount (anyone on an
/// `--allow-other` mount; else its owner and root, as FUSE admits).
fn may_connect(eng: &Engine, uid: u32) -> bool {
    eng.cfg.allow_other || uid == 0 || uid == eng.cfg.root_uid
}

/// The next connection on any of `listeners` (nonblocking: a connection
/// gone between the poll and the accept is EAGAIN, not a wait there).
fn accept_any(listeners: &[OwnedFd], next: &mut usize) -> nix::Result<RawFd> {
    let mut p: Vec<libc::pollfd> = listeners
        .iter()
        .map(|l| libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: poll reads and writes the pollfds given.
    if unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) } < 0 {
        return Err(Errno::last());
    }
    // Each in turn: one busy listener does not starve the other.
    for k in 0..p.len() {
        let i = (*next + k) % p.len();
        if p[i].revents != 0 {
            *next = i + 1;
            return accept(p[i].fd);
        }
    }
    Err(Errno::EAGAIN)
}

fn serve(listeners: Vec<OwnedFd>, eng: Arc<Engine>) {
    static CONN: AtomicU64 = AtomicU64::new(1);
    let refuser = Refuser::start();
    let conns = Arc::new(Quota::new("fd channel connections"));
    conns.set_max(MAX_CONNECTIONS);
    conns.set_user_share(eng.cfg.user_share_permille);
    let mut next = 0;
    loop {
        let conn = match accept_any(&listeners, &mut next) {
            // SAFETY: accept returned a new descriptor we own.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(Errno::EINTR | Errno::ECONNABORTED | Errno::EAGAIN) => continue,
            Err(e) => {
                log::warn!("fd channel: accept: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
        };
        let id = CONN.fetch_add(1, Ordering::Relaxed);
        // Who it is decides before anything is read from it.
        let uid = match getsockopt(&conn, sockopt::PeerCredentials) {
            Ok(c) => c.uid(),
            Err(e) => {
                limited!(info, "fd channel {id}: SO_PEERCRED: {e}");
                continue;
            }
        };
        if !may_connect(&eng, uid) {
            limited!(
                warn,
                "fd channel {id}: uid {uid} may not use this mount: refused (EACCES)"
            );
            refuser.refuse(conn, Errno::EACCES);
            continue;
        }
        if conns.take(uid, 1).is_err() {
            refuser.refuse(conn, Errno::ETOOMANYREFS);
            continue;
        }
        // Charged like any descriptor held for the user; refused, it
        // closes after its answer.
        let conn = match ChargedFd::try_new(&eng.depot.quota, uid, conn) {
            Ok(c) => c,
            Err((e, conn)) => {
                conns.give(uid, 1);
                limited!(
                    warn,
                    "fd channel {id}: uid {uid}: no descriptor left for it ({e})"
                );
                refuser.refuse(conn, e);
                continue;
            }
        };
        let (eng, conns2) = (eng.clone(), conns.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("udsfs-fdconn-{id}"))
            .spawn(move || {
                serve_connection(&eng, &conn, uid, id);
                let dropped = eng.depot.connection_closed(id);
                if dropped > 0 {
                    limited!(
                        info,
                        "fd channel {id}: {dropped} deposited files never sent, closed"
                    );
                }
                drop(conn);
                conns2.give(uid, 1);
            });
        if let Err(e) = spawned {
            conns.give(uid, 1);
            log::warn!("fd channel: cannot start a connection thread: {e}");
        }
    }
}

fn serve_connection(eng: &Engine, conn: &ChargedFd, uid: u32, id: u64) {
    let mut buf = vec![0u8; proto::MAX_PACKET];
    loop {
        // The kernel installs passed files as it receives them: wait for a
        // request first, then make room only for what the user may still
        // deposit, so that many connections cannot take the daemon's
        // descriptors even for a moment (the rest close, MSG_CTRUNC).
        // At its end, it reserves nothing: room taken here for a closed
        // connection would refuse the user's next one for a moment.
        if !wait_readable(conn) || recv::at_end(conn.as_raw_fd()) {
            return;
        }
        let room = reserve_up_to(&eng.depot.quota, uid, MAX_FDS as u64);
        let got = recv::recv(conn.as_raw_fd(), &mut buf, room as usize);
        eng.depot.quota.give(uid, room);
        let recv::Request {
            bytes: n,
            fds,
            truncated,
            sender,
        } = match got {
            Ok(r) => r,
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        let answer = match buf[0] {
            // Root's (real uid 0): a process that may become anyone again,
            // as the supervisor's connection made as its target's euid.
            _ if sender != Some(uid) && sender != Some(0) => {
                // Its files (if any) close here, unused.
                limited!(
                    warn,
                    "fd channel {id}: a request sent as uid {sender:?} on uid {uid}'s connection: refused (EACCES)"
                );
                Err(Errno::EACCES)
            }
            proto::DEPOSIT if truncated => {
                limited!(
                    info,
                    "fd channel {id}: uid {uid}: files past its share closed (ETOOMANYREFS)"
                );
                Err(Errno::ETOOMANYREFS)
            }
            proto::DEPOSIT => deposit(eng, id, uid, fds),
            proto::CLAIM => claim(eng, uid, &proto::tags_of(&buf[..n]), conn, id),
            other => {
                limited!(info, "fd channel {id}: unknown request {other:#x}");
                Err(Errno::EINVAL)
            }
        };
        let sent = match answer {
            Ok(Some(reply)) => send_plain(conn, &reply),
            Ok(None) => Ok(()),
            Err(e) => send_plain(conn, &proto::error_answer(e as i32)),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Waits until a request (or the end) can be read.
fn wait_readable(conn: &ChargedFd) -> bool {
    let mut p = libc::pollfd {
        fd: conn.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll reads and writes the one pollfd given.
        match unsafe { libc::poll(&mut p, 1, -1) } {
            1 => return true,
            _ if Errno::last() == Errno::EINTR => continue,
            _ => return false,
        }
    }
}

/// Takes as much as `uid` may still hold of `q`, up to `n`; the caller
/// gives it back.
fn reserve_up_to(q: &Quota, uid: u32, n: u64) -> u64 {
    let mut want = n;
    while want > 0 {
        if q.take(uid, want).is_ok() {
            return want;
        }
        let free = q.max().saturating_sub(q.used());
        let mine = if uid == 0 {
            free
        } else {
            q.user_limit().saturating_sub(q.user_used(uid))
        };
        want = (want - 1).min(free).min(mine);
    }
    0
}

pub(crate) fn send_plain(conn: &impl AsRawFd, bytes: &[u8]) -> nix::Result<()> {
    let iov = [std::io::IoSlice::new(bytes)];
    sendmsg::<()>(conn.as_raw_fd(), &iov, &[], MsgFlags::MSG_NOSIGNAL, None).map(|_| ())
}

fn deposit(eng: &Engine, id: u64, uid: u32, fds: Vec<OwnedFd>) -> Result<Option<Vec<u8>>, Errno> {
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(Errno::EINVAL);
    }
    // One sendmsg's worth waits per connection: a client cannot make the
    // daemon hold files that are not in flight without bound.
    if eng.depot.deposits_of(id) + fds.len() > MAX_FDS {
        limited!(
            info,
            "fd channel {id}: more than {MAX_FDS} files deposited and not sent (ETOOMANYREFS)"
        );
        return Err(Errno::ETOOMANYREFS);
    }
    if let Some(f) = fds.iter().find(|f| own_mount_file(eng, f)) {
        // The library passes this mount's sockets by number; any other file
        // of the mount held here would keep the mount busy from inside.
        limited!(
            info,
            "fd channel {id}: {} is a file of this mount, not a socket's data file: refused (EINVAL)",
            fd_path(f).display()
        );
        return Err(Errno::EINVAL);
    }
    if fds.iter().any(is_channel_client) {
        // Held here, a connection to this channel never reads as closed: its
        // thread, slot and descriptors would stay for good (a cycle that
        // Linux's collector would break).
        limited!(
            info,
            "fd channel {id}: a connection to the channel itself: refused (EINVAL)"
        );
        return Err(Errno::EINVAL);
    }
    let mut tags = Vec::with_capacity(fds.len());
    for f in fds {
        match eng.depot.deposit(id, uid, f) {
            Ok(t) => tags.push((tags.len(), t)),
            Err(e) => {
                // All or none: the ones taken already close too.
                drop(eng.depot.take_deposits(&tags, uid));
                limited!(info, "fd channel {id}: uid {uid}: deposit refused ({e})");
                return Err(e);
            }
        }
    }
    let tags: Vec<u64> = tags.into_iter().map(|(_, t)| t).collect();
    Ok(Some(proto::with_tags(proto::TAGS, &tags)))
}

fn claim(
    eng: &Engine,
    uid: u32,
    tags: &[u64],
    conn: &ChargedFd,
    id: u64,
) -> Result<Option<Vec<u8>>, Errno> {
    if tags.is_empty() || tags.len() > MAX_FDS || !tags.iter().all(|t| is_file_tag(*t)) {
        return Err(Errno::EINVAL);
    }
    let files = eng.depot.claim(tags, uid).inspect_err(|_| {
        limited!(
            info,
            "fd channel {id}: claim of files not received for uid {uid} (EBADF)"
        )
    })?;
    let raw: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [std::io::IoSlice::new(&[proto::FILES])];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    if let Err(e) = sendmsg::<()>(conn.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
        limited!(
            info,
            "fd channel {id}: handing {} files back: {e}",
            raw.len()
        );
    }
    // Our copies close here; the receiver has its own now.
    drop(files);
    Ok(None)
}

/// Is `f` a socket connected to this channel's name or path?
fn is_channel_client(f: &OwnedFd) -> bool {
    let Some(ours) = LISTENING_ON.get() else {
        return false;
    };
    let Ok(a) = nix::sys::socket::getpeername::<UnixAddr>(f.as_raw_fd()) else {
        return false;
    };
    a.as_abstract().is_some_and(|n| n == ours.as_bytes())
        || LISTENING_AT
            .get()
            .is_some_and(|(_, p)| a.path().is_some_and(|n| n == std::path::Path::new(p)))
}

fn fd_path(f: &impl AsFd) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_fd().as_raw_fd())).unwrap_or_default()
}

/// Is `f` a file of the mount this daemon serves? Judged by device, not by
/// path: the same mount bound elsewhere (a user's own mount namespace) shows
/// another path. When the device cannot be learnt, every FUSE file is taken
/// as ours (fail closed).
fn own_mount_file(eng: &Engine, f: &OwnedFd) -> bool {
    const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
    let fuse = nix::sys::statfs::fstatfs(f)
        .map(|s| s.filesystem_type().0 == FUSE_SUPER_MAGIC)
        .unwrap_or(false);
    let Some(m) = eng.cfg.mountpoint.as_ref() else {
        return false;
    };
    if !fuse {
        return false;
    }
    match (mount_dev(m), nix::sys::stat::fstat(f)) {
        (Some(dev), Ok(st)) => st.st_dev == dev || fd_path(f).starts_with(m),
        _ => true,
    }
}

/// The device of the mount at `m` (no request to ourselves); kept once found.
fn mount_dev(m: &std::path::Path) -> Option<libc::dev_t> {
    static DEV: std::sync::OnceLock<libc::dev_t> = std::sync::OnceLock::new();
    if let Some(d) = DEV.get() {
        return Some(*d);
    }
    let dev = crate::procfs::mount_dev(m)?;
    let _ = DEV.set(dev);
    Some(dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Another user's directory at the usual name (made before the daemon
    /// started, to catch its clients' files) is left alone: the channel's
    /// path is in a directory of the daemon's own making, 0755, the socket
    /// 0666, and a client reaches it there.
    #[test]
    fn the_path_socket_is_in_a_directory_of_its_own_making() {
        let base = std::env::temp_dir().join(format!("udsfs-fdchan-test-{}", std::process::id()));
        std::fs::create_dir(&base).unwrap();
        let base_s = base.to_str().unwrap().to_owned();
        let squat = base.join(format!("udsfs-{}", std::process::id()));
        std::fs::create_dir(&squat).unwrap();
        std::fs::set_permissions(&squat, std::fs::Permissions::from_mode(0o777)).unwrap();
        // (another user's, when the test may give it away)
        let _ = std::os::unix::fs::chown(&squat, Some(65534), Some(65534));
        let (dir, path, l) = bind_path_in(&base_s).expect("a path");
        println!("squatted {}; got {path}", squat.display());
        assert_ne!(dir, squat, "the squatted directory was taken");
        let (d, sq) = (dir.display().to_string(), squat.display().to_string());
        assert!(d.starts_with(&format!("{sq}-")), "{d}");
        assert_eq!(std::fs::read_dir(&squat).unwrap().count(), 0);
        let d = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(
            (d.mode() & 0o7777, d.uid()),
            (0o755, nix::unistd::geteuid().as_raw())
        );
        let sm = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(sm.mode() & 0o777, 0o666);
        // SAFETY: getuid only reads.
        let me = unsafe { libc::getuid() };
        let c = proto::Client::connect_published(
            &proto::Published {
                name: b"udsfs-fdchan-test-nobody-here".to_vec(),
                path: Some(path.clone().into_bytes()),
            },
            me,
        );
        assert!(c.is_ok(), "no fallback to the path: {:?}", c.err());
        let a = accept(l.as_raw_fd());
        assert!(
            a.is_ok(),
            "the connection did not arrive at the path: {a:?}"
        );
        drop(l);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        std::fs::remove_dir(&squat).unwrap();
        std::fs::remove_dir(&base).unwrap();
    }
}

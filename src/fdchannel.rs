//! The fd channel: how files that are not udsfs sockets reach the daemon and
//! come back out. FUSE cannot carry a file descriptor, so the daemon listens
//! on a kernel AF_UNIX seqpacket socket of its own, at the abstract name
//! `@udsfs-fdpass-PID` (PID: the daemon's, as in the mount source
//! `udsfs:PID`), or, when someone holds that name already, one with a random
//! suffix. Anyone may bind an abstract name, so the name a client trusts is
//! the one the mount itself serves in `.udsfs/fdchannel` (only this daemon
//! answers reads of its mount); clients also check with SO_PEERCRED that the
//! peer has the daemon's uid. The daemon takes the client's uid from
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

/// The text of `.udsfs/fdchannel`: the channel's abstract name (without the
/// leading NUL) and a newline, or nothing when the channel is off.
pub fn published_name() -> String {
    LISTENING_ON
        .get()
        .map(|n| proto::published(n))
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
    let _ = LISTENING_ON.set(name.clone());
    log::info!("fd channel listening on @{name}");
    let spawned = std::thread::Builder::new()
        .name("udsfs-fdchannel".into())
        .spawn(move || serve(listener, eng));
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

fn listen_on(name: &str) -> nix::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    bind(fd.as_raw_fd(), &UnixAddr::new_abstract(name.as_bytes())?)?;
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

fn serve(listener: OwnedFd, eng: Arc<Engine>) {
    static CONN: AtomicU64 = AtomicU64::new(1);
    let refuser = Refuser::start();
    let conns = Arc::new(Quota::new("fd channel connections"));
    conns.set_max(MAX_CONNECTIONS);
    conns.set_user_share(eng.cfg.user_share_permille);
    loop {
        let conn = match accept(listener.as_raw_fd()) {
            // SAFETY: accept returned a new descriptor we own.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(Errno::EINTR | Errno::ECONNABORTED) => continue,
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
                log::info!("fd channel {id}: SO_PEERCRED: {e}");
                continue;
            }
        };
        if !may_connect(&eng, uid) {
            log::warn!("fd channel {id}: uid {uid} may not use this mount: refused (EACCES)");
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
                log::warn!("fd channel {id}: uid {uid}: no descriptor left for it ({e})");
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
                    log::info!("fd channel {id}: {dropped} deposited files never sent, closed");
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
        if !wait_readable(conn) {
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
                log::info!(
                    "fd channel {id}: uid {uid}: files past its share closed (ETOOMANYREFS)"
                );
                Err(Errno::ETOOMANYREFS)
            }
            proto::DEPOSIT => deposit(eng, id, uid, fds),
            proto::CLAIM => claim(eng, uid, &proto::tags_of(&buf[..n]), conn, id),
            other => {
                log::info!("fd channel {id}: unknown request {other:#x}");
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
        log::info!(
            "fd channel {id}: more than {MAX_FDS} files deposited and not sent (ETOOMANYREFS)"
        );
        return Err(Errno::ETOOMANYREFS);
    }
    if let Some(f) = fds.iter().find(|f| own_mount_file(eng, f)) {
        // The library passes this mount's sockets by number; any other file
        // of the mount held here would keep the mount busy from inside.
        log::info!(
            "fd channel {id}: {} is a file of this mount, not a socket's data file: refused (EINVAL)",
            fd_path(f).display()
        );
        return Err(Errno::EINVAL);
    }
    if fds.iter().any(is_channel_client) {
        // Held here, a connection to this channel never reads as closed: its
        // thread, slot and descriptors would stay for good (a cycle that
        // Linux's collector would break).
        log::info!("fd channel {id}: a connection to the channel itself: refused (EINVAL)");
        return Err(Errno::EINVAL);
    }
    let mut tags = Vec::with_capacity(fds.len());
    for f in fds {
        match eng.depot.deposit(id, uid, f) {
            Ok(t) => tags.push((tags.len(), t)),
            Err(e) => {
                // All or none: the ones taken already close too.
                drop(eng.depot.take_deposits(&tags, uid));
                log::info!("fd channel {id}: uid {uid}: deposit refused ({e})");
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
        log::info!("fd channel {id}: claim of files not received for uid {uid} (EBADF)")
    })?;
    let raw: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [std::io::IoSlice::new(&[proto::FILES])];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    if let Err(e) = sendmsg::<()>(conn.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
        log::info!("fd channel {id}: handing {} files back: {e}", raw.len());
    }
    // Our copies close here; the receiver has its own now.
    drop(files);
    Ok(None)
}

/// Is `f` a socket connected to this channel's name?
fn is_channel_client(f: &OwnedFd) -> bool {
    let Some(ours) = LISTENING_ON.get() else {
        return false;
    };
    nix::sys::socket::getpeername::<UnixAddr>(f.as_raw_fd())
        .ok()
        .and_then(|a| a.as_abstract().map(|n| n == ours.as_bytes()))
        .unwrap_or(false)
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

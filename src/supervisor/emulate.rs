//! One trapped call: `triage` answers calls on kernel sockets and other
//! files at once (CONTINUE) and copies what decides it; `perform`, on a
//! thread of its own, does a udsfs call with the same ioctls as the preload
//! library (preload/src/lib.rs) on a copy of the target's descriptor.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use libc::seccomp_notif;

use super::call::{
    Call, Ctx, MSGHDR, WOULD_WAIT, classify, nonblocking, put_sized, read_addr, say, stop_errno,
    u32_at, u64_at,
};
use super::daemon::{self, Daemon, Res};
use super::listener::{Listener, Reply};
use super::mem;
use super::opts;
use super::target::Task;
use super::tree::Tree;
use udsfs_calls as calls;
use udsfs_calls::connect::Connect;
use udsfs_proto::carry::Carried;
use udsfs_proto::ioctl::{ADDR_AS_GIVEN, Op};
use udsfs_proto::mount::type_dir;
use udsfs_proto::route::{self, Route};

/// A call for the supervisor to carry out.
pub struct Job {
    pub id: u64,
    pub tid: i32,
    pub nr: i64,
    pub args: [u64; 6],
    /// The target's descriptor (args[0]) was a udsfs data file at triage.
    udsfs: bool,
    /// The address that made a kernel socket's call udsfs work (copied once).
    addr: Option<Vec<u8>>,
    /// The call may wait (accept, connect, a send or receive on a blocking
    /// descriptor without MSG_DONTWAIT): it gets a thread of its own.
    pub may_wait: bool,
    /// It may, but is tried once on the loop first: nothing it does before
    /// its first wait needs undoing (accept, connect, recvfrom, recvmsg
    /// without MSG_WAITALL), so at that wait it stops (`WOULD_WAIT`) and
    /// goes to a thread whole; a sendto or sendmsg goes to a thread from
    /// the bytes it sent (`resume`).
    pub try_first: bool,
    pub resume: usize,
    /// The trapped thread as triage opened it, for the first attempt only
    /// (a clone holds no pidfd: 10,000 held calls would hold 10,000).
    pub task: Option<Task>,
    /// The copy of its descriptor that triage looked at. A udsfs socket's
    /// copy serves every attempt, clones too: the call goes on with the
    /// file it named, as Linux's holds the file it took at its start, even
    /// once another thread closed the number and a new file took it
    /// (integration/adversarial_close_race.sh, held_reuse.c). Any other
    /// copy serves the first attempt only (a kernel socket an attempt
    /// converted is looked at anew).
    pub copy: Option<Arc<OwnedFd>>,
    /// That copy's O_NONBLOCK as triage read it (with `task` only): the
    /// first attempt does not ask again.
    nonblock: Option<bool>,
}

impl Clone for Job {
    fn clone(&self) -> Job {
        Job {
            addr: self.addr.clone(),
            task: None,
            copy: self.copy.clone().filter(|_| self.udsfs),
            nonblock: None,
            ..*self
        }
    }
}

fn try_first(nr: i64, args: &[u64; 6]) -> bool {
    match nr {
        libc::SYS_accept | libc::SYS_accept4 | libc::SYS_connect => true,
        libc::SYS_recvfrom => args[3] as i32 & libc::MSG_WAITALL == 0,
        libc::SYS_recvmsg => args[2] as i32 & libc::MSG_WAITALL == 0,
        libc::SYS_sendto | libc::SYS_sendmsg => true,
        _ => false,
    }
}

/// Whether the leader (notify.rs) tries a call that may wait once without
/// parking before it hands it over: a receive (not MSG_WAITALL) and a
/// sendto that is one message ioctl, where nothing is to be undone and the
/// attempt is one request to the daemon, which a busy program's calls
/// mostly end with. Not accept, connect, sendmsg or a larger sendto: an
/// attempt there costs files opened and closed (their release reaches the
/// daemon afterwards) for calls that mostly wait; they park at once.
pub fn tried_on_loop(job: &Job) -> bool {
    job.try_first
        && match job.nr {
            libc::SYS_recvfrom | libc::SYS_recvmsg => true,
            libc::SYS_sendto => job.args[2] as usize <= udsfs_proto::ioctl::MSG_ROOM,
            _ => false,
        }
}

/// Whether call `nr` on the target's descriptor `args[0]` (`nonblock`:
/// its O_NONBLOCK) may wait.
fn may_wait(nonblock: bool, nr: i64, args: &[u64; 6]) -> bool {
    let flags = match nr {
        libc::SYS_accept | libc::SYS_accept4 | libc::SYS_connect => 0,
        libc::SYS_recvfrom | libc::SYS_sendto | libc::SYS_recvmmsg | libc::SYS_sendmmsg => {
            args[3] as i32
        }
        libc::SYS_recvmsg | libc::SYS_sendmsg => args[2] as i32,
        _ => return false,
    };
    !nonblock && flags & libc::MSG_DONTWAIT == 0
}

/// Decides a call on the spot when it is not udsfs work.
pub fn triage(ctx: &Ctx, l: &Listener, n: &seccomp_notif) -> Result<Job, Reply> {
    let (nr, args, tid) = (n.data.nr as i64, n.data.args, n.pid as i32);
    // What is read of `tid` is its call's (pending.rs).
    let _call = super::pending::Bound::triage(l.raw(), n.id, tid);
    // write of nothing (filter.rs traps it in a supervised tree) is a send
    // of nothing, as Linux's sock_write_iter makes it: the kernel's file
    // (not a udsfs socket) runs the write itself, as any sendto's.
    let (nr, args) = match nr {
        libc::SYS_write if args[2] == 0 => (libc::SYS_sendto, [args[0], args[1], 0, 0, 0, 0]),
        libc::SYS_write => return Err(Reply::Continue),
        _ => (nr, args),
    };
    let job = |udsfs, addr, got: Option<(Task, Arc<OwnedFd>)>| {
        let nonblock = got.as_ref().map(|g| nonblocking(&g.1));
        let (task, copy) = got.unzip();
        Job {
            id: n.id,
            tid,
            nr,
            args,
            udsfs,
            addr,
            may_wait: may_wait(nonblock == Some(true), nr, &args),
            try_first: try_first(nr, &args),
            resume: 0,
            task,
            copy,
            nonblock,
        }
    };
    match nr {
        libc::SYS_socket => return Err(Reply::Continue),
        nr if super::filter::REFUSED.contains(&nr) => {
            return Err(Reply::Errno(super::filter::refuse(tid, nr)));
        }
        libc::SYS_fstat | libc::SYS_newfstatat | libc::SYS_statx | libc::SYS_lstat => {
            return Err(super::stat::triage(ctx, tid, nr, args));
        }
        libc::SYS_socketpair => {
            // Anything the daemon would refuse goes to the kernel, which
            // gives Linux's errno in Linux's order.
            let (ty, proto) = (args[1] as i32, args[2] as i32);
            let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
            let valid = type_dir(base).is_some() && (proto == 0 || proto == libc::PF_UNIX);
            return if args[0] as i32 == libc::AF_UNIX && valid {
                Ok(job(false, None, None))
            } else {
                Err(Reply::Continue)
            };
        }
        libc::SYS_unlink => {
            return Err(super::routed::unlink(ctx, tid, libc::AT_FDCWD, args[0], 0));
        }
        libc::SYS_unlinkat => {
            let (dirfd, flags) = (args[0] as i32, args[2] as i32);
            return Err(super::routed::unlink(ctx, tid, dirfd, args[1], flags));
        }
        libc::SYS_link => {
            let cwd = libc::AT_FDCWD;
            return Err(super::routed::link(
                ctx,
                tid,
                (cwd, args[0]),
                (cwd, args[1]),
            ));
        }
        // With or without AT_SYMLINK_FOLLOW: on Linux the routed path is the
        // socket file itself, no link to follow; AT_EMPTY_PATH names a
        // descriptor, the kernel's.
        libc::SYS_linkat if args[4] as i32 & libc::AT_EMPTY_PATH == 0 => {
            let (old, new) = ((args[0] as i32, args[1]), (args[2] as i32, args[3]));
            return Err(super::routed::link(ctx, tid, old, new));
        }
        libc::SYS_linkat => return Err(Reply::Continue),
        libc::SYS_rmdir => {
            return Err(super::routed::rmdir(ctx, tid, libc::AT_FDCWD, args[0]));
        }
        libc::SYS_rename | libc::SYS_renameat | libc::SYS_renameat2 => {
            let cwd = i64::from(libc::AT_FDCWD) as u64;
            let [od, o, nd, n, flags] = match nr {
                libc::SYS_rename => [cwd, args[0], cwd, args[1], 0],
                libc::SYS_renameat => [args[0], args[1], args[2], args[3], 0],
                _ => [args[0], args[1], args[2], args[3], args[4]],
            };
            let (old, new) = ((od as i32, o), (nd as i32, n));
            return Err(super::routed::rename(ctx, tid, old, new, flags as u32));
        }
        _ => {}
    }
    // A copy of the descriptor tells what it is without /proc (and serves
    // the first attempt).
    let got = match Task::open(tid).and_then(|t| Ok((t.get_fd(args[0] as i32)?, t))) {
        Ok((fd, t)) => Some((t, Arc::new(fd))),
        // The supervisor out of descriptors cannot tell what it is.
        Err(libc::EMFILE | libc::ENFILE) => return Err(Reply::Errno(libc::ENOBUFS)),
        Err(_) => None,
    };
    if got.as_ref().is_some_and(|g| ctx.dev.is_data(&g.1)) {
        return Ok(job(true, None, got));
    }
    // A kernel socket (or no socket): only an address in the mount, under a
    // route or abstract makes it udsfs work.
    let addr = match nr {
        libc::SYS_bind | libc::SYS_connect => read_addr(tid, args[1], args[2]),
        libc::SYS_sendto if route::send_names(args[4], args[5]) => read_addr(tid, args[4], args[5]),
        libc::SYS_sendmsg => mem::read(tid, args[1], MSGHDR).and_then(|h| {
            let name = u64_at(&h, 0);
            if !route::send_names(name, u32_at(&h, 8).into()) {
                return Err(0);
            }
            read_addr(tid, name, u32_at(&h, 8) as u64)
        }),
        _ => return Err(Reply::Continue),
    };
    // Unreadable memory: the kernel gives the errno Linux gives.
    let Ok(addr) = addr else {
        return Err(Reply::Continue);
    };
    match classify(ctx, tid, &addr) {
        Route::Udsfs(_) => Ok(job(false, Some(addr), got)),
        Route::Autobind if nr == libc::SYS_bind => Ok(job(false, Some(addr), got)),
        _ => Err(Reply::Continue),
    }
}

/// A udsfs socket standing for kernel socket `k`: its type (as
/// udsfs_calls::convert decides it), O_NONBLOCK and the options it carries
/// (`Carried`), as the preload library converts one.
fn convert(d: &Daemon, k: &OwnedFd, tid: i32) -> Res<OwnedFd> {
    let (ty, _) = calls::convert::sock_type(k.as_raw_fd())?;
    // Made in the kernel socket's network namespace (sock_net), where the
    // target has left it.
    let in_ns = super::actfor::SocketNetns::enter(&d.mount, tid, k);
    let new = d.new_sock(ty, nonblocking(k));
    drop(in_ns);
    let new = new?;
    Carried::of(k.as_raw_fd()).apply(new.as_raw_fd())?;
    super::fcntl::carry(k, &new, tid)?;
    Ok(new)
}

fn value(r: Res<i64>) -> Reply {
    match r {
        Ok(v) => Reply::Value(v),
        Err(e) => Reply::Errno(e),
    }
}

/// Does the daemon see who makes this call? Everything that makes, names,
/// connects or sends (credentials, permissions, quotas, the abstract
/// namespace); not the queries and receives without control data, which
/// then cost two round trips less.
fn needs_grant(job: &Job) -> bool {
    // SO_PEERCRED and SO_PEERPIDFD answer in the caller's pid and user
    // namespaces: the daemon must see the target asking.
    let peer_opt = job.nr == libc::SYS_getsockopt
        && job.args[1] as i32 == libc::SOL_SOCKET
        && matches!(job.args[2] as i32, libc::SO_PEERCRED | libc::SO_PEERPIDFD);
    !job.udsfs
        || peer_opt
        || super::fcntl::sets_owner(job.nr, &job.args)
        || !matches!(
            job.nr,
            libc::SYS_getsockname
                | libc::SYS_getpeername
                | libc::SYS_getsockopt
                | libc::SYS_shutdown
                | libc::SYS_ioctl
                | libc::SYS_fcntl
                | libc::SYS_recvfrom
        )
}

/// A send on a udsfs socket whose only daemon request that the caller
/// decides is its message ioctl: sendto without an address, of one piece
/// (a larger datagram goes by the `msg` file), without MSG_OOB.
fn names_its_thread(job: &Job) -> bool {
    job.udsfs
        && job.nr == libc::SYS_sendto
        && !route::send_names(job.args[4], job.args[5])
        && job.args[2] as usize <= udsfs_proto::ioctl::MSG_ROOM
        && job.args[3] as i32 & libc::MSG_OOB == 0
}

/// Carries out a udsfs call; the reply goes back after a validity check.
pub fn perform(ctx: &Ctx, l: &Listener, mut job: Job, on_loop: bool) -> Reply {
    let _call = super::pending::Bound::call(l.raw(), job.id, job.tid);
    // Triage's copy, which it found a udsfs data file (`job.udsfs`), is
    // that file still: not asked again.
    let known_data = job.udsfs && job.copy.is_some();
    let nonblock = job.nonblock.take().filter(|_| known_data);
    let got = job.copy.take();
    let task = match job.task.take().map_or_else(|| Task::open(job.tid), Ok) {
        Ok(t) => t,
        Err(_) => return Reply::Errno(libc::ESRCH),
    };
    // The pidfd and the copy are the trapped thread's only while the call
    // is pending. A thread pidfd kept from before the notification proves
    // nothing: another thread's exec takes the trapped leader's id over,
    // and its pidfd with it (pending.rs).
    if !l.valid(job.id) {
        return Reply::Errno(libc::EINTR);
    }
    // The daemon takes this thread's requests as the target's (its pid,
    // users, network namespace: src/fuse/actfor.rs) until the guard drops.
    // Refused to a thread outside this run's tree: the kernel makes a call
    // of a kernel socket as the thread would on its own; one on a udsfs
    // socket fails.
    // A send that is one message ioctl (connected, no control data, no
    // OOB, one piece) names its thread in the ioctl instead: one round trip
    // to the daemon, not two (actfor.rs `Named`).
    let named = names_its_thread(&job)
        .then(|| super::actfor::Named::new(&ctx.daemon.mount, job.tid))
        .flatten();
    let grant = (named.is_none() && needs_grant(&job))
        .then(|| super::actfor::Grant::new(&ctx.daemon.mount, job.tid));
    let _grant = match grant {
        Some(None) if !job.udsfs => return Reply::Continue,
        Some(None) => return Reply::Errno(libc::EPERM),
        g => g,
    };
    let c = Call {
        ctx,
        l,
        task,
        id: job.id,
        on_loop,
        resume: job.resume,
        sent: Default::default(),
        nonblock,
    };
    let a = job.args;
    if job.nr == libc::SYS_socketpair {
        return value(socketpair(&c, a));
    }
    let fd = a[0] as i32;
    let own = match got.map_or_else(|| c.task.get_fd(fd).map(Arc::new), Ok) {
        Ok(own) => own,
        // The supervisor out of descriptors: not the kernel's call to make.
        Err(libc::EMFILE | libc::ENFILE) => return Reply::Errno(libc::ENOBUFS),
        Err(_) => return Reply::Continue,
    };
    // A copy taken now: what the descriptor is now decides (an attempt on
    // the loop that made it udsfs already).
    let is_data = known_data || ctx.dev.is_data(&own);
    let r = if is_data && job.nr == libc::SYS_fcntl {
        super::fcntl::fcntl(&own, c.task.tid, a)
    } else if is_data {
        value(on_udsfs(&c, &job, &own))
    } else if job.udsfs {
        Reply::Continue
    } else {
        kernel_socket(&c, &job, fd, &own)
    };
    match r {
        Reply::Errno(WOULD_WAIT) if c.sent.get() > 0 => Reply::Resume(c.sent.get()),
        r => r,
    }
}

fn socketpair(c: &Call, a: [u64; 6]) -> Res<i64> {
    let ty = a[1] as i32;
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    // The target's array must take two ints before sockets are made.
    mem::write(c.task.tid, a[3], &[0u8; 8])?;
    let (x, y) = c.ctx.daemon.pair(base, ty & libc::SOCK_NONBLOCK != 0)?;
    let cloexec = ty & libc::SOCK_CLOEXEC != 0;
    let fx = c.install(&x, None, cloexec)?;
    let fy = c.install(&y, None, cloexec)?;
    let mut sv = (fx as u32).to_ne_bytes().to_vec();
    sv.extend_from_slice(&(fy as u32).to_ne_bytes());
    mem::write(c.task.tid, a[3], &sv)?;
    Ok(0)
}

/// bind, connect or a send with an address that makes kernel socket `k`
/// (the target's `fd`) a udsfs socket, put at the same number.
fn kernel_socket(c: &Call, job: &Job, fd: i32, k: &OwnedFd) -> Reply {
    let Some(addr) = job.addr.as_deref() else {
        return Reply::Continue;
    };
    if !calls::convert::kernel_unix(k.as_raw_fd()) {
        return Reply::Continue;
    }
    let route = classify(c.ctx, c.task.tid, addr);
    let a = job.args;
    let new = match convert(&c.ctx.daemon, k, c.task.tid) {
        Ok(n) => n,
        Err(e) => return Reply::Errno(e),
    };
    if job.nr == libc::SYS_bind {
        let wire = match &route {
            Route::Udsfs(w) => w.clone(),
            Route::Autobind => Vec::new(),
            Route::Kernel | Route::Invalid => return Reply::Continue,
        };
        if let Err(e) = bind(c, &new, &wire, &route::given_path(addr)) {
            // The target keeps its kernel socket.
            return Reply::Errno(e);
        }
        return match put_in_place(c, k, &new, fd) {
            Ok(()) => Reply::Value(0),
            Err(e) => Reply::Errno(e),
        };
    }
    let Route::Udsfs(wire) = route else {
        return Reply::Continue;
    };
    let rebound = calls::convert::rebind(
        new.as_raw_fd(),
        calls::convert::kernel_bound(k.as_raw_fd()),
        |why| say(&format!("fd {fd}: {why}")),
    );
    if let Err(e) = rebound {
        return Reply::Errno(e);
    }
    if job.nr == libc::SYS_connect {
        let r = connect(c, &new, &wire);
        // A connect that failed has still made the socket udsfs, as the
        // library adopts before it connects, and a SO_PASSCRED one named:
        // unix_stream_connect and unix_dgram_connect autobind before the
        // lookup. A wait for a thread starts again from the kernel socket.
        if r == Err(WOULD_WAIT) {
            return Reply::Errno(WOULD_WAIT);
        }
        if let Err(e) = put_in_place(c, k, &new, fd) {
            return Reply::Errno(e);
        }
        return value(r.map(|_| 0));
    }
    // A send to a routed name: the socket becomes udsfs, then sends.
    if let Err(e) = put_in_place(c, k, &new, fd) {
        return Reply::Errno(e);
    }
    value(super::msg::send(c, &new, job.nr, a))
}

/// New udsfs socket `new` put at the target's `fd` in kernel socket `k`'s
/// place, with its FD_CLOEXEC and its places in the target's epoll sets
/// (udsfs_calls::convert::held).
fn put_in_place(c: &Call, k: &OwnedFd, new: &OwnedFd, fd: i32) -> Res<()> {
    // Another thread of the target may have closed `fd` while the daemon
    // made the socket, and a new file taken the number: it stays, and the
    // call fails as one made after that close would (Linux's bind and
    // connect put nothing at the number).
    if !c.task.holds(fd, k) {
        return Err(libc::EBADF);
    }
    let held = super::epolls::held(c.task.tid, k, fd);
    c.install(new, Some(fd), c.task.cloexec(fd))?;
    super::epolls::restore(&c.task, fd, new, k, &held);
    Ok(())
}

/// bind on a udsfs socket, as udsfs_calls::bind decides it: a routed name
/// gets its link first, its directories below the mount too.
fn bind(c: &Call, s: &OwnedFd, wire: &[u8], given: &[u8]) -> Res<()> {
    let bind = || daemon::ctl(s, Op::Bind, 0, wire, given).map(|_| ());
    calls::bind::udsfs(&Tree(c.task.tid), &c.ctx.routes, wire, given, bind)
}

/// connect, as udsfs_calls::connect decides it: a blocking caller facing
/// a full backlog parks in the daemon until there is room
/// (`Daemon::connect_wait`), on a thread of its own (on the loop the
/// attempt ends there).
fn connect(c: &Call, s: &OwnedFd, wire: &[u8]) -> Res<()> {
    let tree = Tree(c.task.tid);
    let blocking = || !nonblocking(s);
    calls::connect::connect(
        &tree,
        &c.ctx.routes,
        s.as_raw_fd(),
        wire,
        blocking,
        |line| {
            if !c.may_park() {
                return Err(WOULD_WAIT);
            }
            c.parked(|_| c.ctx.daemon.connect_wait(s, line))
                .map_err(|stop| stop_errno(stop, s, 1))?
        },
    )
}

/// A log line of `what` on the target's udsfs socket `fd`.
pub(super) fn say_on(fd: i32, what: &'static str) -> impl FnOnce(&str) {
    move |why| say(&format!("{what} on udsfs socket fd {fd}: {why}"))
}

fn on_udsfs(c: &Call, job: &Job, s: &OwnedFd) -> Res<i64> {
    let (a, tid) = (job.args, c.task.tid);
    match job.nr {
        libc::SYS_bind => {
            if a[2] < 2 {
                return Err(libc::EINVAL);
            }
            let addr = read_addr(tid, a[1], a[2])?;
            let wire = match classify(c.ctx, tid, &addr) {
                Route::Udsfs(w) => w,
                Route::Autobind => Vec::new(),
                Route::Invalid => return Err(libc::EINVAL),
                Route::Kernel => {
                    let e = calls::bind::kernel_path_error(&Tree(tid), &route::given_path(&addr));
                    if e == libc::EINVAL {
                        say(&format!(
                            "bind on udsfs socket fd {}: the path is outside the mount and its routes (EINVAL)",
                            a[0] as i32
                        ));
                    }
                    return Err(e);
                }
            };
            bind(c, s, &wire, &route::given_path(&addr)).map(|_| 0)
        }
        libc::SYS_connect => {
            let addr = read_addr(tid, a[1], a[2])?;
            let route = classify(c.ctx, tid, &addr);
            match calls::connect::target(&addr, route, say_on(a[0] as i32, "connect"))? {
                Connect::Disconnect => daemon::ctl(s, Op::Disconnect, 0, &[], &[]).map(|_| 0),
                Connect::To(w) => connect(c, s, &w).map(|_| 0),
            }
        }
        libc::SYS_listen => daemon::ctl(s, Op::Listen, a[1] as i32, &[], &[]).map(|_| 0),
        libc::SYS_shutdown => daemon::ctl(s, Op::Shutdown, a[1] as i32, &[], &[]).map(|_| 0),
        libc::SYS_getsockname | libc::SYS_getpeername => {
            let peer = job.nr == libc::SYS_getpeername;
            let got = daemon::ctl(s, Op::GetName, peer as i32, &[], &[])?;
            let wire = got.addr().unwrap_or_default();
            let bytes = route::sockaddr(&c.ctx.routes, wire, got.addr_flags & ADDR_AS_GIVEN != 0);
            put_sized(tid, a[1], a[2], &bytes).map(|_| 0)
        }
        libc::SYS_ioctl => super::fcntl::ioctl(s, tid, a)
            .unwrap_or_else(|| opts::queue_ioctl(s, tid, a))
            .map(|_| 0),
        libc::SYS_getsockopt => {
            let peer = || super::pidfd::peer(c.ctx, s);
            let install = |f: OwnedFd| c.install(&f, None, true);
            opts::get(s, tid, a, peer, install, say).map(|_| 0)
        }
        libc::SYS_setsockopt => opts::set(s, tid, a, say).map(|_| 0),
        libc::SYS_accept | libc::SYS_accept4 => {
            let flags = if job.nr == libc::SYS_accept {
                0
            } else {
                a[3] as i32
            };
            accept(c, s, a[1], a[2], flags)
        }
        libc::SYS_sendto | libc::SYS_sendmsg | libc::SYS_sendmmsg => {
            super::msg::send(c, s, job.nr, a)
        }
        libc::SYS_recvfrom | libc::SYS_recvmsg | libc::SYS_recvmmsg => {
            super::msg::recv(c, s, job.nr, a)
        }
        _ => Err(libc::ENOSYS),
    }
}

fn accept(c: &Call, s: &OwnedFd, addr: u64, lenp: u64, flags: i32) -> Res<i64> {
    udsfs_calls::accept::check_flags(flags)?;
    let nb = flags & libc::SOCK_NONBLOCK != 0;
    // The target's slot is asked for before the connection is taken
    // (udsfs_calls::accept). A blocking accept parks in the daemon (the
    // open of its ticket waits), on a thread of its own; on the loop the
    // attempt ends at the wait.
    let slot = || c.task.has_free_fd();
    let new = if nonblocking(s) {
        c.ctx.daemon.accept(s, nb, false, slot)?
    } else if !c.may_park() {
        match c.ctx.daemon.accept(s, nb, false, slot) {
            Err(libc::EAGAIN) => return Err(WOULD_WAIT),
            r => r?,
        }
    } else {
        c.parked(|_| c.ctx.daemon.accept(s, nb, true, slot))
            .map_err(|stop| stop_errno(stop, s, 0))??
    };
    // The peer's name, read before the socket is the target's.
    let peer = daemon::ctl(&new, Op::GetName, 1, &[], &[]).ok().map(|g| {
        let wire = g.addr().unwrap_or_default();
        route::sockaddr(&c.ctx.routes, wire, g.addr_flags & ADDR_AS_GIVEN != 0)
    });
    if addr != 0 && lenp != 0 {
        let bytes = peer.unwrap_or_else(|| (libc::AF_UNIX as u16).to_ne_bytes().to_vec());
        // Before the install: a bad address fails the accept and drops
        // the connection, as Linux's accept does.
        put_sized(c.task.tid, addr, lenp, &bytes)?;
    }
    let nfd = c.install(&new, None, flags & libc::SOCK_CLOEXEC != 0)?;
    Ok(nfd as i64)
}

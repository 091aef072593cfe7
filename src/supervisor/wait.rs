//! Calls that would wait while every parking slot of the pool is taken
//! (notify.rs `PARKED`): held here without a thread of their own. Each is
//! a copy of the target's descriptor in one epoll set, waiting for what the
//! call waits for (readable for a receive or an accept, writable for a
//! send), and is tried again without parking when it comes: the same
//! attempt the pool makes, which sends from where the last one stopped
//! (`Job::resume`) and otherwise does nothing before its wait. A connect
//! (its socket says nothing of the listener's backlog) and a call whose
//! descriptor cannot be copied are tried again at each tick. At each tick
//! the held calls are also looked at as park.rs looks at parked ones: the
//! notification gone (the thread killed), a signal for the thread (ended
//! -ERESTARTSYS, or EINTR when the socket has a timeout that way), or the
//! socket's SO_RCVTIMEO/SO_SNDTIMEO past (after a last try: EAGAIN, or
//! the bytes a send sent).

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::call::{Ctx, Stop, errno_of, stop_errno};
use super::emulate::{self, Job};
use super::listener::{Listener, Reply};
use super::target::Task;

/// How often held calls are looked at (as park.rs's watcher).
const TICK: Duration = Duration::from_millis(100);
/// Most held calls looked at in one tick (each look reads /proc): with more
/// held, a signal takes several ticks to be seen (10,000 held: 8 s).
const LOOKS: usize = 128;

struct Held {
    job: Job,
    /// Our copy of the target's descriptor, in the epoll set: the job's own
    /// for a udsfs socket (emulate.rs `Job::copy`), the one tried again.
    fd: Option<Arc<OwnedFd>>,
    /// 0: waits to receive (EPOLLIN); 1: to send (EPOLLOUT).
    dir: i32,
    deadline: Option<Instant>,
    /// The socket's timeout, which a send that got further waits afresh.
    limit: Option<Duration>,
}

impl Held {
    /// The try that sent up to `resume`: a send that got further waits its
    /// timeout afresh, as park.rs's `rearm` (Linux waits per skb).
    fn sent_to(&mut self, resume: usize) {
        if resume > self.job.resume {
            self.deadline = self.limit.map(|l| Instant::now() + l);
        }
        self.job.resume = resume;
    }

    /// What a call whose timeout ran out answers: the bytes a send sent, or
    /// EAGAIN.
    fn timed_out(&self) -> Reply {
        if self.job.resume > 0 {
            Reply::Value(self.job.resume as i64)
        } else {
            Reply::Errno(libc::EAGAIN)
        }
    }
}

pub struct Waiter {
    pub l: Arc<Listener>,
    pub ctx: Arc<Ctx>,
    /// Calls waiting for a parking slot, whole (not tried piecewise).
    pub queued: Mutex<VecDeque<Job>>,
    epoll: OnceLock<Option<OwnedFd>>,
    held: Mutex<HashMap<u64, Held>>,
    next: AtomicU64,
    /// Where the next tick's looks start.
    cursor: AtomicU64,
}

fn dir_of(nr: i64) -> i32 {
    match nr {
        libc::SYS_sendto | libc::SYS_sendmsg | libc::SYS_sendmmsg | libc::SYS_connect => 1,
        _ => 0,
    }
}

/// How many descriptors we may hold: as many as the hard limit lets.
fn raise_nofile() {
    // SAFETY: get/setrlimit of a local struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

impl Waiter {
    pub fn new(l: Arc<Listener>, ctx: Arc<Ctx>) -> Waiter {
        Waiter {
            l,
            ctx,
            queued: Mutex::new(VecDeque::new()),
            epoll: OnceLock::new(),
            held: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            cursor: AtomicU64::new(0),
        }
    }

    /// The epoll set, and its thread started, at the first call held.
    fn epoll(self: &Arc<Self>) -> Option<i32> {
        self.epoll
            .get_or_init(|| {
                raise_nofile();
                // SAFETY: a new epoll descriptor we own.
                let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
                if fd < 0 {
                    return None;
                }
                // SAFETY: as above.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                let q = self.clone();
                let raw = fd.as_raw_fd();
                std::thread::Builder::new()
                    .name("udsfs-held-calls".into())
                    .spawn(move || serve(q, raw))
                    .ok()?;
                Some(fd)
            })
            .as_ref()
            .map(|f| f.as_raw_fd())
    }

    /// Holds `job`, which would wait, until it can go on.
    pub(super) fn hold(self: &Arc<Self>, job: Job) {
        let p = self;
        let Some(ep) = self.epoll() else {
            // No epoll set: answered as a signal would end it, and made again.
            finish(p, job.id, Reply::Errno(errno_of(Stop::Signal)));
            return;
        };
        let dir = dir_of(job.nr);
        let fd = match &job.copy {
            Some(copy) => Some(copy.clone()),
            None => Task::open(job.tid)
                .and_then(|t| t.get_fd(job.args[0] as i32))
                .ok()
                .map(Arc::new),
        };
        let limit = fd
            .as_ref()
            .and_then(|f| super::opts::timeout(f, dir))
            .filter(|d| !d.is_zero());
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let held = Held {
            job,
            fd,
            dir,
            deadline: limit.map(|d| Instant::now() + d),
            limit,
        };
        self.keep(ep, key, held, libc::EPOLL_CTL_ADD);
    }

    /// `h` in the map under `key`, then its descriptor armed in `ep` (`op`):
    /// in the map before epoll can report it.
    fn keep(&self, ep: i32, key: u64, h: Held, op: i32) {
        let fd = h.fd.as_ref().map(|f| f.as_raw_fd());
        let dir = h.dir;
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, h);
        if let Some(fd) = fd {
            arm(ep, fd, dir, key, op);
        }
    }
}

fn arm(ep: i32, fd: i32, dir: i32, key: u64, op: i32) {
    let events = if dir == 0 {
        libc::EPOLLIN
    } else {
        libc::EPOLLOUT
    };
    let mut ev = libc::epoll_event {
        events: (events | libc::EPOLLONESHOT) as u32,
        u64: key,
    };
    // SAFETY: epoll_ctl reads the event; both descriptors are ours.
    unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) };
}

/// Why a held or queued call ends without its event, if it does: the
/// reply then.
pub(super) fn ended(p: &Waiter, job: &Job) -> Option<Reply> {
    if !p.l.valid(job.id) {
        return Some(Reply::Errno(errno_of(Stop::Gone)));
    }
    if !(super::deliver::signal_for(job.tid) && super::deliver::signal_now(job.tid)) {
        return None;
    }
    if job.resume > 0 {
        return Some(Reply::Value(job.resume as i64));
    }
    let copy = match &job.copy {
        Some(copy) => Ok(copy.clone()),
        None => Task::open(job.tid)
            .and_then(|t| t.get_fd(job.args[0] as i32))
            .map(Arc::new),
    };
    let e = match copy {
        Ok(fd) => stop_errno(Stop::Signal, &fd, dir_of(job.nr)),
        Err(_) => errno_of(Stop::Signal),
    };
    Some(Reply::Errno(e))
}

/// The waiting thread: tries again the calls whose descriptor is ready,
/// and at each tick looks at the held and queued ones.
fn serve(p: Arc<Waiter>, ep: i32) {
    let w = &*p;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut tick = Instant::now() + TICK;
    loop {
        let ms = tick.saturating_duration_since(Instant::now()).as_millis() as i32;
        // SAFETY: epoll_wait fills at most `events.len()` events.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, ms) };
        for ev in events.iter().take(n.max(0) as usize) {
            let key = ev.u64;
            let h = w
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            if let Some(h) = h {
                retry(&p, ep, key, h);
            }
        }
        if Instant::now() < tick {
            continue;
        }
        tick = Instant::now() + TICK;
        look(&p, ep);
        sweep_queued(&p);
        if gone(&p.l) && w.held.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            break;
        }
    }
}

/// A held call tried again: done, or held again from where it stopped.
fn retry(p: &Waiter, ep: i32, key: u64, mut h: Held) {
    let id = h.job.id;
    match run(p, h.job.clone(), true) {
        Reply::Errno(super::call::WOULD_WAIT) => {}
        Reply::Resume(n) => h.sent_to(n),
        r => return finish(p, id, r),
    }
    p.keep(ep, key, h, libc::EPOLL_CTL_MOD);
}

/// A held call whose timeout ran out tries once more, as park.rs's
/// `expire` (Linux's sender takes the room there, though too little to
/// have woken it): done, or further (a send then waits afresh), or EAGAIN
/// or the bytes a send sent.
fn last_look(p: &Waiter, ep: i32, key: u64, mut h: Held) {
    let id = h.job.id;
    match run(p, h.job.clone(), true) {
        Reply::Resume(n) if n > h.job.resume => {
            h.sent_to(n);
            p.keep(ep, key, h, libc::EPOLL_CTL_MOD);
        }
        Reply::Errno(super::call::WOULD_WAIT) | Reply::Resume(_) => finish(p, id, h.timed_out()),
        r => finish(p, id, r),
    }
}

/// One tick's looks: at most `LOOKS` held calls, from where the last
/// tick's stopped.
fn look(p: &Waiter, ep: i32) {
    let w = p;
    let mut keys: Vec<u64> = w
        .held
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .copied()
        .collect();
    keys.sort_unstable();
    let from = w.cursor.load(Ordering::Relaxed);
    let start = keys.partition_point(|&k| k < from);
    let n = keys.len().min(LOOKS);
    let now = Instant::now();
    for k in (0..n).map(|i| keys[(start + i) % keys.len()]) {
        w.cursor.store(k + 1, Ordering::Relaxed);
        let Some(h) = w.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&k) else {
            continue;
        };
        if let Some(r) = ended(p, &h.job) {
            finish(p, h.job.id, r);
            continue;
        }
        if h.deadline.is_some_and(|d| now >= d) {
            last_look(p, ep, k, h);
            continue;
        }
        if h.fd.is_none() || h.job.nr == libc::SYS_connect {
            retry(p, ep, k, h);
            continue;
        }
        w.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k, h);
    }
}

/// No process uses the filter any more.
fn gone(l: &Listener) -> bool {
    let mut fd = libc::pollfd {
        fd: l.raw(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one local pollfd without waiting.
    unsafe { libc::poll(&mut fd, 1, 0) == 1 && fd.revents & libc::POLLHUP != 0 }
}

/// The queued calls that a signal or the target's death ended: answered
/// as a parked call would be.
fn sweep_queued(p: &Waiter) {
    let mut q = p.queued.lock().unwrap_or_else(|e| e.into_inner());
    let mut done = Vec::new();
    q.retain(|job| match ended(p, job) {
        Some(r) => {
            done.push((job.id, r));
            false
        }
        None => true,
    });
    drop(q);
    for (id, r) in done {
        finish(p, id, r);
    }
}

/// The reply to notification `id`, while it is pending.
pub(super) fn finish(p: &Waiter, id: u64, r: Reply) {
    // No validity check first: a reply to a notification no longer
    // pending fails with ENOENT (ids are never reused), so the check
    // was one more ioctl a call for nothing.
    p.l.reply(id, &r);
}

/// One call; bad input must not leave the target trapped for good.
pub(super) fn run(p: &Waiter, job: Job, on_loop: bool) -> Reply {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        emulate::perform(&p.ctx, &p.l, job, on_loop)
    }))
    .unwrap_or(Reply::Errno(libc::EIO))
}

//! The notification pool of one listener: workers that each receive a
//! trapped call (up to `RECEIVERS` at once, each waiting for its turn and
//! then in SECCOMP_IOCTL_NOTIF_RECV, which returns when the last target
//! goes since Linux 6.11; on every kernel a watcher in poll for POLLHUP
//! ends the receives then with a signal: `watch_end`), triage it and carry it out, parking in the daemon
//! when it waits (park.rs) as the target's thread would block. A receiver
//! carries out the calls that do not wait itself and receives the next,
//! and leaves its place only before a call that waits: a call costs no
//! wake-up of another worker. No thread is started per call: the pool
//! grows by one worker when the one that leaves its place leaves fewer
//! than `RECEIVERS` idle, up to `WORKERS`. At most
//! `PARKED` calls park at once, so that the rest of the workers are always
//! there for calls that do not wait: a call that would wait past that bound
//! is held without a thread (wait.rs) until its socket is ready, or, when
//! it cannot be tried piecewise (MSG_WAITALL, the mmsg calls), queued until
//! a parked call ends. The listener itself (replies, validity checks,
//! descriptor installs) is in listener.rs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::call::{Ctx, WOULD_WAIT};
use super::emulate::{self, Job};
use super::listener::{Listener, Reply};
use super::wait::{Waiter, finish, run};

/// Most workers of one listener (threads of the supervisor).
pub const WORKERS: usize = 160;
/// Most calls of one listener parked in the daemon at once; the other
/// `WORKERS - PARKED` workers never park. A parked call costs a thread
/// (its stack, mostly untouched) and no wake-up; a held one (wait.rs) no
/// thread but a look at each tick.
pub const PARKED: usize = 128;
/// Workers that never park, whatever the call.
const RESERVE: usize = 8;
/// Workers receiving at once, each carrying out the calls that do not
/// wait itself, so that under a busy program a worker done with a call
/// receives the next without sleeping, and the daemon gets several
/// requests at once (it reads the next without sleeping). Each waits in an
/// epoll set of its own holding the listener with EPOLLEXCLUSIVE
/// (listener.rs `wait_turn`): a new notification wakes one of them. In
/// RECV itself every receiver woke for each notification and all but one
/// slept again: two context switches a call for each receiver more.
/// Counted with `perf stat`, the program and the daemon (load 7-14, 6 runs
/// alternated, medians), msgbench 1 20 (20 senders, 20 receivers): 2 in
/// RECV: 0.85 s, 916 ms CPU, the daemon 22k context switches; 8 in RECV:
/// 0.45-0.69 s, 777 ms, 8k; 8 in their turn: 0.64 s, 774 ms, 10k (the
/// library: 0.33 s, 281 ms, 9k). A ping-pong of two processes whose
/// receives wait (2,000 round trips): 2 in RECV 43-50k switches in the
/// program, 8 in RECV 91-96k, 8 in their turn 44-46k. A program making
/// one call at a time that never waits keeps one worker (the pool grows
/// only when a call parks).
const RECEIVERS: usize = 8;

struct Pool {
    /// The threads of the workers receiving now (at most `RECEIVERS`); the
    /// others between calls wait on `freed` for a place.
    receiving: Mutex<Vec<libc::pid_t>>,
    freed: Condvar,
    workers: AtomicUsize,
    /// Workers between calls (waiting for a place or receiving).
    idle: AtomicUsize,
    /// Calls in progress that may park.
    parking: AtomicUsize,
    /// No process uses the filter any more: workers leave.
    done: AtomicBool,
    /// Calls held while they wait without a thread, and those queued for a
    /// parking slot; also the listener and the context.
    w: Arc<Waiter>,
}

/// Serves notifications until every process under the filter is gone; the
/// calling thread is the first worker.
pub fn serve(listener: Arc<Listener>, ctx: Arc<Ctx>) {
    let pool = Arc::new(Pool {
        receiving: Mutex::new(Vec::with_capacity(RECEIVERS)),
        freed: Condvar::new(),
        workers: AtomicUsize::new(1),
        idle: AtomicUsize::new(0),
        parking: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        w: Arc::new(Waiter::new(listener, ctx)),
    });
    let q = pool.clone();
    let watcher = std::thread::Builder::new()
        .name("udsfs-sv-end".into())
        .spawn(move || watch_end(&q));
    if watcher.is_err() {
        // Without it the pool still ends on Linux 6.11 and later.
        say_once("cannot start the supervisor's end watcher");
    }
    worker(pool);
}

fn say_once(what: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        super::call::say(what);
    }
}

/// Waits for the last process under the filter to go (POLLHUP: one
/// wake-up, at the end, none a call), then ends the pool: a receiver
/// blocked in RECV on a kernel before 6.11 would wait there for ever (its
/// RECV returns at the end since 6.11 only), holding its thread, the
/// listener and the pool. Each receiver still in its place is signalled
/// (park.rs `kick`: a no-op handler without SA_RESTART, so RECV returns
/// EINTR and the receiver sees `done`), again every few milliseconds: a
/// signal that came just before a receiver entered RECV did not end it.
fn watch_end(p: &Pool) {
    p.w.l.wait_hung_up();
    p.done.store(true, Ordering::SeqCst);
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        {
            let g = p.receiving.lock().unwrap_or_else(|e| e.into_inner());
            p.freed.notify_all();
            if g.is_empty() {
                return;
            }
            for &t in g.iter() {
                super::park::kick(t);
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// A place among the receivers; false once the pool is done.
fn enter(p: &Pool) -> bool {
    let mut g = p.receiving.lock().unwrap_or_else(|e| e.into_inner());
    while g.len() >= RECEIVERS && !p.done.load(Ordering::SeqCst) {
        g = p.freed.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    if p.done.load(Ordering::SeqCst) {
        return false;
    }
    g.push(super::park::this_thread());
    true
}

fn leave(p: &Pool) {
    let me = super::park::this_thread();
    p.receiving
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&t| t != me);
    if p.done.load(Ordering::SeqCst) {
        p.freed.notify_all();
    } else {
        p.freed.notify_one();
    }
}

fn worker(p: Arc<Pool>) {
    loop {
        p.idle.fetch_add(1, Ordering::SeqCst);
        if !enter(&p) {
            p.idle.fetch_sub(1, Ordering::SeqCst);
            break;
        }
        // A receiver: receives, and carries out the calls that do not wait
        // one after another while it holds its place, so that a call costs
        // no hand-over (a wake-up of a worker waiting for the place and a
        // sleep of this one, two context switches a call); it leaves its
        // place before a call that waits (parks), which another worker's
        // receive must not wait for.
        let job = loop {
            if p.done.load(Ordering::SeqCst) {
                break None;
            }
            let n = match p.w.l.next() {
                Some(Ok(n)) => n,
                // ENOENT: the caller went away before the receive.
                Some(Err(libc::EINTR | libc::ENOENT)) => continue,
                Some(Err(e)) => {
                    eprintln!(
                        "udsfs run: seccomp notification: {}",
                        std::io::Error::from_raw_os_error(e)
                    );
                    p.done.store(true, Ordering::SeqCst);
                    break None;
                }
                None => {
                    p.done.store(true, Ordering::SeqCst);
                    break None;
                }
            };
            if let Some(job) = lead(&p, &n) {
                break Some(job);
            }
        };
        let idle = p.idle.fetch_sub(1, Ordering::SeqCst) - 1;
        leave(&p);
        let Some((job, tried)) = job else {
            break;
        };
        // This call may park: another worker takes the place.
        if idle < RECEIVERS {
            grow(&p);
        }
        handle(&p, job, tried);
    }
    p.workers.fetch_sub(1, Ordering::SeqCst);
}

/// What a receiver does with notification `n`: answers it, or carries it
/// out when that does not wait (a receive or a send of one message ioctl
/// that may wait tried once without parking first:
/// `emulate::tried_on_loop`). Some: a call for `handle` once the place is
/// left, and whether it was tried.
fn lead(p: &Arc<Pool>, n: &libc::seccomp_notif) -> Option<(Job, bool)> {
    // Calls on kernel sockets and other files are answered here.
    let triaged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        emulate::triage(&p.w.ctx, &p.w.l, n)
    }));
    let job = match triaged.unwrap_or(Err(Reply::Errno(libc::EIO))) {
        Ok(job) => job,
        Err(r) => {
            p.w.l.reply(n.id, &r);
            return None;
        }
    };
    if job.may_wait && !emulate::tried_on_loop(&job) {
        return Some((job, false));
    }
    let id = job.id;
    // What goes on is a clone (with the copy of a udsfs socket only:
    // emulate.rs `Job::copy`).
    let mut rest = job.clone();
    match run(&p.w, job, true) {
        Reply::Errno(WOULD_WAIT) => Some((rest, true)),
        Reply::Resume(n) => {
            rest.resume = n;
            Some((rest, true))
        }
        r => {
            finish(&p.w, id, r);
            None
        }
    }
}

/// One more worker, below the bound.
fn grow(p: &Arc<Pool>) {
    let n = p.workers.fetch_add(1, Ordering::SeqCst);
    if n >= WORKERS {
        p.workers.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let q = p.clone();
    let started = std::thread::Builder::new()
        .name("udsfs-supervise".into())
        .spawn(move || worker(q));
    if started.is_err() {
        p.workers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A call after the role was handed over (`tried`: by `lead`, once
/// without parking): one that does not wait carried out, one that may
/// parked in the daemon while a slot is free, else held or queued.
fn handle(p: &Arc<Pool>, job: Job, tried: bool) {
    if !job.may_wait {
        let id = job.id;
        let r = run(&p.w, job, true);
        finish(&p.w, id, r);
        return;
    }
    // A call that cannot be tried piecewise may park past PARKED, in the
    // workers kept for calls that do not wait, all but RESERVE of them.
    let limit = if job.try_first {
        PARKED
    } else {
        WORKERS - RESERVE
    };
    if take_slot(p, limit) {
        carry_parked(p, job);
        return;
    }
    // Every parking slot is taken: a call tried (by `lead`, else here) is
    // held where it would wait; one that cannot be tried piecewise is
    // queued.
    if tried {
        p.w.hold(job);
        return;
    }
    if job.try_first {
        attempt(p, job);
        return;
    }
    // (A clone: what triage read for the first attempt goes.)
    let job = job.clone();
    p.w.queued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(job);
    // A slot freed meanwhile would not look at the queue.
    if take_slot(p, WORKERS - RESERVE) {
        drain(p);
    }
}

/// The call tried without parking: done, or held where it waits (wait.rs).
fn attempt(p: &Arc<Pool>, job: Job) {
    let id = job.id;
    // What is held is a clone (a held call costs one descriptor: its
    // udsfs socket's copy, or wait.rs's own).
    let mut held = job.clone();
    match run(&p.w, job, true) {
        Reply::Errno(WOULD_WAIT) => p.w.hold(held),
        Reply::Resume(n) => {
            held.resume = n;
            p.w.hold(held)
        }
        r => finish(&p.w, id, r),
    }
}

fn take_slot(p: &Pool, limit: usize) -> bool {
    if p.parking.fetch_add(1, Ordering::SeqCst) < limit {
        return true;
    }
    p.parking.fetch_sub(1, Ordering::SeqCst);
    false
}

/// Carries out `job`, which holds a parking slot, then the queued calls
/// while there are any.
fn carry_parked(p: &Pool, job: Job) {
    let id = job.id;
    let r = run(&p.w, job, false);
    finish(&p.w, id, r);
    drain(p);
}

/// With a parking slot held: the queued calls, then the slot goes.
fn drain(p: &Pool) {
    loop {
        let next =
            p.w.queued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
        let Some(job) = next else { break };
        let id = job.id;
        if !p.w.l.valid(id) {
            continue;
        }
        let r = run(&p.w, job, false);
        finish(&p.w, id, r);
    }
    p.parking.fetch_sub(1, Ordering::SeqCst);
    // A call queued after the look above and before the slot went.
    if !p
        .w
        .queued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_empty()
        && take_slot(p, WORKERS - RESERVE)
    {
        drain(p);
    }
}

//! The notification pool of one listener: workers that each receive a
//! trapped call (one receiver at a time, so that none is left blocked in
//! SECCOMP_IOCTL_NOTIF_RECV when the last target goes), triage it and carry
//! it out, parking in the daemon when it waits (park.rs) as the target's
//! thread would block. No thread is started per call: the pool grows by one
//! worker when the one that just took a call leaves none idle, up to
//! `WORKERS`. At most `PARKED` calls park at once, so that the rest of the
//! workers are always there for calls that do not wait: a call that would
//! wait past that bound is held without a thread (wait.rs) until its
//! socket is ready, or, when it cannot be tried piecewise (MSG_WAITALL, the
//! mmsg calls), queued until a parked call ends. The listener itself
//! (replies, validity checks, descriptor installs) is in listener.rs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

struct Pool {
    /// Held by the worker receiving: poll and RECV are made by one at a time.
    recv: Mutex<()>,
    workers: AtomicUsize,
    /// Workers between calls (waiting for `recv` or holding it).
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
        recv: Mutex::new(()),
        workers: AtomicUsize::new(1),
        idle: AtomicUsize::new(0),
        parking: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        w: Arc::new(Waiter::new(listener, ctx)),
    });
    worker(pool);
}

fn worker(p: Arc<Pool>) {
    loop {
        p.idle.fetch_add(1, Ordering::SeqCst);
        let n = {
            let _g = p.recv.lock().unwrap_or_else(|e| e.into_inner());
            if p.done.load(Ordering::SeqCst) {
                None
            } else {
                p.w.l.next()
            }
        };
        let idle = p.idle.fetch_sub(1, Ordering::SeqCst) - 1;
        let n = match n {
            Some(Ok(n)) => n,
            // ENOENT: the caller went away between poll and receive.
            Some(Err(libc::EINTR | libc::ENOENT)) => continue,
            Some(Err(e)) => {
                eprintln!(
                    "udsfs run: seccomp notification: {}",
                    std::io::Error::from_raw_os_error(e)
                );
                p.done.store(true, Ordering::SeqCst);
                break;
            }
            None => {
                p.done.store(true, Ordering::SeqCst);
                break;
            }
        };
        // This call may park: another worker takes the next one.
        if idle == 0 {
            grow(&p);
        }
        handle(&p, &n);
    }
    p.workers.fetch_sub(1, Ordering::SeqCst);
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

fn handle(p: &Arc<Pool>, n: &libc::seccomp_notif) {
    // Calls on kernel sockets and other files are answered here.
    let triaged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        emulate::triage(&p.w.ctx, &p.w.l, n)
    }));
    let job = match triaged.unwrap_or(Err(Reply::Errno(libc::EIO))) {
        Ok(job) => job,
        Err(r) => {
            p.w.l.reply(n.id, &r);
            return;
        }
    };
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
    // Every parking slot is taken: tried without parking, and held where
    // it would wait.
    if !job.try_first {
        // (Without the copy: a queued call looks anew.)
        let job = job.clone();
        p.w.queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
        // A slot freed meanwhile would not look at the queue.
        if take_slot(p, WORKERS - RESERVE) {
            drain(p);
        }
        return;
    }
    attempt(p, job);
}

/// The call tried without parking: done, or held where it waits (wait.rs).
fn attempt(p: &Arc<Pool>, job: Job) {
    let id = job.id;
    // What is held is a clone: without triage's pidfd and copy, which the
    // attempt takes (a held call costs one descriptor, wait.rs's own).
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

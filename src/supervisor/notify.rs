//! The notification loop: receives each trapped call on the listener,
//! answers those that cannot wait at once and hands each that may wait
//! (accept, a receive on an empty queue) to a thread of its own, so that it
//! never holds up the target's other threads. The listener itself (replies,
//! validity checks, descriptor installs) is in listener.rs.

use std::sync::Arc;

use super::call::Ctx;
use super::emulate;
use super::listener::{Listener, Reply};

/// Serves notifications until every process under the filter is gone.
pub fn serve(listener: Arc<Listener>, ctx: Arc<Ctx>) {
    while let Some(n) = listener.next() {
        let n = match n {
            Ok(n) => n,
            // ENOENT: the caller went away between poll and receive.
            Err(libc::EINTR | libc::ENOENT) => continue,
            Err(e) => {
                eprintln!(
                    "udsfs run: seccomp notification: {}",
                    std::io::Error::from_raw_os_error(e)
                );
                break;
            }
        };
        // Calls on kernel sockets and other files are answered here.
        let triaged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            emulate::triage(&ctx, &listener, &n)
        }));
        let job = match triaged.unwrap_or(Err(Reply::Errno(libc::EIO))) {
            Ok(job) => job,
            Err(r) => {
                listener.reply(n.id, &r);
                continue;
            }
        };
        let id = job.id;
        // A call that cannot wait is done here, and one that may is tried
        // here first: a new thread costs more than the call (milliseconds
        // on a loaded machine).
        let job = if !job.may_wait || job.try_first {
            // (A descriptor made blocking since triage may wait too.)
            let again = job.clone();
            let r = run(&ctx, &listener, job, true);
            match r {
                Reply::Errno(super::call::WOULD_WAIT) => again,
                Reply::Resume(n) => {
                    let mut job = again;
                    job.resume = n;
                    job
                }
                _ => {
                    if listener.valid(id) {
                        listener.reply(id, &r);
                    }
                    continue;
                }
            }
        } else {
            job
        };
        if !spawn(&listener, &ctx, job) {
            listener.reply(id, &Reply::Errno(libc::EAGAIN));
        }
    }
}

/// Carries out `job` on a thread of its own; false if none could start.
fn spawn(listener: &Arc<Listener>, ctx: &Arc<Ctx>, job: emulate::Job) -> bool {
    let (l, c) = (listener.clone(), ctx.clone());
    std::thread::Builder::new()
        .name("udsfs-supervise".into())
        .spawn(move || {
            let id = job.id;
            let r = run(&c, &l, job, false);
            if l.valid(id) {
                l.reply(id, &r);
            }
        })
        .is_ok()
}

/// One call; bad input must not leave the target trapped for good.
fn run(ctx: &Ctx, l: &Listener, job: emulate::Job, on_loop: bool) -> Reply {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        emulate::perform(ctx, l, job, on_loop)
    }))
    .unwrap_or(Reply::Errno(libc::EIO))
}

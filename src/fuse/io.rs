//! Reads and writes on open files: tried once on the worker thread, parked
//! when they would block, and retried from the waker (see `park`).

use std::sync::{Arc, Weak};

use fuser::{Errno as FErrno, FileHandle, ReplyData, ReplyWrite, Request};
use nix::errno::Errno;

use super::park::{OpenOp, Outcome, Parked, Pending, Retry};
use super::{Inner, caller, ferr, nonblocking};
use crate::engine::{Caller, Waiter};

/// Retries parked requests on behalf of the park table.
pub(super) struct Retrier(pub(super) Weak<Inner>);

impl Retry for Retrier {
    fn attempt(&self, p: Pending, tid: u32, uid: u32, gid: u32, waiter: &Arc<Parked>) -> Outcome {
        let Some(inner) = self.0.upgrade() else {
            p.fail(FErrno::ENOTCONN);
            return Outcome::Done;
        };
        let w: Waiter = waiter.clone();
        inner.attempt(p, &Caller::new(tid, uid, gid), Some(&w))
    }

    fn abandon(&self, p: Pending, err: FErrno) {
        let Some(inner) = self.0.upgrade() else {
            return p.fail(err);
        };
        match p {
            Pending::Open { op, reply } => {
                if let OpenOp::Connect { client, .. } = op {
                    inner.eng.put(&client);
                }
                reply.error(err);
            }
            Pending::Write { fh, job, reply } => {
                let errno = Errno::from_raw(err.code());
                match inner.files.get(fh).and_then(|f| f.end_write(job, errno)) {
                    Some(n) => reply.written(n as u32),
                    None => reply.error(err),
                }
            }
            p => p.fail(err),
        }
    }
}

/// Stream sends to a closed peer raise SIGPIPE in the sending thread, as
/// unix_stream_sendmsg does.
fn sigpipe(tid: u32) {
    let c = Caller::new(tid, 0, 0);
    let tgid = c.status().tgid;
    // SAFETY: tgkill only sends a signal.
    unsafe {
        libc::syscall(libc::SYS_tgkill, tgid, tid as i32, libc::SIGPIPE);
    }
}

impl Inner {
    pub(super) fn read(
        &self,
        req: &Request,
        fh: u64,
        offset: u64,
        size: u32,
        flags: i32,
        reply: ReplyData,
    ) {
        let Some(f) = self.files.get(fh) else {
            return reply.error(FErrno::EBADF);
        };
        match f.read(&self.eng, offset, size, &caller(req), None) {
            Ok(d) => reply.data(&d),
            Err(Errno::EAGAIN) if !nonblocking(flags) => {
                self.park(Pending::Read { fh, size, reply }, req)
            }
            Err(e) => reply.error(ferr(e)),
        }
    }

    pub(super) fn write(&self, req: &Request, fh: u64, data: &[u8], flags: i32, reply: ReplyWrite) {
        let Some(f) = self.files.get(fh) else {
            return reply.error(FErrno::EBADF);
        };
        let mut job = match f.start_write(&self.eng, data) {
            Ok(job) => job,
            Err(e) => return reply.error(ferr(e)),
        };
        match f.write(&self.eng, &mut job, &caller(req), None) {
            Ok(n) => reply.written(n as u32),
            Err(Errno::EAGAIN) if !nonblocking(flags) => {
                let job = job.into_owned();
                self.park(Pending::Write { fh, job, reply }, req)
            }
            Err(e) => match f.end_write(job, e) {
                Some(n) => reply.written(n as u32),
                None => {
                    if e == Errno::EPIPE && f.is_stream_data() {
                        sigpipe(req.pid());
                    }
                    reply.error(ferr(e))
                }
            },
        }
    }

    /// Retries a parked request (see `park`).
    fn attempt(&self, p: Pending, caller: &Caller, w: Option<&Waiter>) -> Outcome {
        match p {
            Pending::Read { fh, size, reply } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(FErrno::EBADF);
                    return Outcome::Done;
                };
                match f.read(&self.eng, 0, size, caller, w) {
                    Ok(d) => reply.data(&d),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Read { fh, size, reply });
                    }
                    Err(e) => reply.error(ferr(e)),
                }
                Outcome::Done
            }
            Pending::Write { fh, mut job, reply } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(FErrno::EBADF);
                    return Outcome::Done;
                };
                match f.write(&self.eng, &mut job, caller, w) {
                    Ok(n) => reply.written(n as u32),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Write { fh, job, reply });
                    }
                    Err(e) => match f.end_write(job, e) {
                        Some(n) => reply.written(n as u32),
                        None => {
                            if e == Errno::EPIPE && f.is_stream_data() {
                                sigpipe(caller.tid);
                            }
                            reply.error(ferr(e))
                        }
                    },
                }
                Outcome::Done
            }
            Pending::Open { op, reply } => match self.open_blocking(op, caller, w) {
                Ok((fh, flags)) => {
                    reply.opened(FileHandle(fh), flags);
                    Outcome::Done
                }
                Err((Errno::EAGAIN, Some(op))) => Outcome::Blocked(Pending::Open { op, reply }),
                Err((e, op)) => {
                    if let Some(OpenOp::Connect { client, .. }) = op {
                        self.eng.put(&client);
                    }
                    reply.error(ferr(e));
                    Outcome::Done
                }
            },
        }
    }

    pub(super) fn park(&self, p: Pending, req: &Request) {
        self.parks.park(p, req.pid(), req.uid(), req.gid());
    }
}

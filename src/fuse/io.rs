//! The requests that may wait: reads, writes and message ioctls on open
//! files (and the retry of a blocking open): tried once on the worker
//! thread, parked when they would block, and retried from the waker (see
//! `park`).

use nix::errno::Errno;

use super::files::OpenFile;
use super::front::{Inner, nonblocking};
use super::ioctl;
use super::outgoing::WriteJob;
use super::park::{Outcome, deferring_wakeups};
use super::pending::{OpenOp, Pending};
use super::reply::{DataReply, IoctlOut, IoctlReply, Sink, WriteReply};
use crate::engine::{Caller, Waiter};

impl Inner {
    /// Answers a request that will not be retried (see `Retry::abandon`).
    pub(super) fn abandon(&self, p: Pending, err: Errno) {
        match p {
            Pending::Open { op, reply } => {
                if let OpenOp::Connect { client, .. } = op {
                    self.eng.put(&client);
                }
                reply.error(err);
            }
            Pending::Write { fh, job, reply } => {
                match self.files.get(fh).and_then(|f| f.end_write(job, err)) {
                    Some(n) => reply.written(n as u32),
                    None => reply.error(err),
                }
            }
            Pending::Msg { fh, call, reply } => {
                let recv = call.is_recv();
                call.end(err, reply);
                if let Some(s) = recv
                    .then(|| self.files.get(fh))
                    .flatten()
                    .and_then(|f| f.sock.clone())
                {
                    self.eng.pass_wakeup(&s);
                }
            }
            Pending::Read { fh, reply, .. } => {
                reply.error(err);
                // It may have been the one reader woken for a message.
                if let Some(s) = self.files.get(fh).and_then(|f| f.sock.clone()) {
                    self.eng.pass_wakeup(&s);
                }
            }
        }
    }
}

/// Stream sends to a closed peer raise SIGPIPE in the sending thread, as
/// unix_stream_sendmsg does (udsfs_calls::client::sigpipe, as the fronts).
fn sigpipe(tid: u32) {
    if let Ok(tgid) = crate::procfs::Status::read(tid).map(|s| s.tgid) {
        udsfs_calls::client::sigpipe(tgid, tid as i32);
    }
}

/// Answers a write that stopped with `e`: the count taken, if any, else
/// the error (with SIGPIPE for a stream's closed peer).
fn end_write(f: &OpenFile, job: WriteJob, e: Errno, tid: u32, reply: WriteReply) {
    match f.end_write(job, e) {
        Some(n) => reply.written(n as u32),
        None => {
            if e == Errno::EPIPE && f.is_stream_data() {
                sigpipe(tid);
            }
            reply.error(e)
        }
    }
}

impl Inner {
    /// The open file `fh` for a read or a write, its socket's lane (if it has
    /// one) taken down first: its bytes go through the daemon from here on.
    fn file_for_io(&self, fh: u64) -> Option<std::sync::Arc<OpenFile>> {
        let f = self.files.get(fh)?;
        if let Some(s) = &f.sock {
            self.eng.lane_down(s);
        }
        Some(f)
    }

    /// read(2) on an open file.
    pub fn read(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        flags: i32,
        c: Caller,
        reply: impl Sink<Vec<u8>>,
    ) {
        let reply = DataReply::new(reply);
        deferring_wakeups(|| {
            let Some(f) = self.file_for_io(fh) else {
                return reply.error(Errno::EBADF);
            };
            match f.read(&self.eng, offset, size, &c, None) {
                Ok(d) => reply.data(d),
                Err(Errno::EAGAIN) if !nonblocking(flags) => {
                    self.park(Pending::Read { fh, size, reply }, &c)
                }
                Err(e) => reply.error(e),
            }
            // A lane made meanwhile (the other end's join) would not carry
            // what this read parked for: down again (src/engine/lane.rs).
            if let Some(s) = &f.sock {
                self.eng.lane_down(s);
            }
        })
    }

    /// write(2) on an open file.
    pub fn write(&self, fh: u64, data: &[u8], flags: i32, c: Caller, reply: impl Sink<u32>) {
        let reply = WriteReply::new(reply);
        deferring_wakeups(|| {
            let Some(f) = self.file_for_io(fh) else {
                return reply.error(Errno::EBADF);
            };
            let mut job = match f.start_write(&self.eng, data, c.fsuid) {
                Ok(job) => job,
                Err(e) => return reply.error(e),
            };
            match f.write(&self.eng, &mut job, &c, None) {
                Ok(n) => reply.written(n as u32),
                Err(Errno::EAGAIN) if !nonblocking(flags) => {
                    let job = job.into_owned();
                    self.park(Pending::Write { fh, job, reply }, &c)
                }
                Err(e) => end_write(&f, job, e, c.tid, reply),
            }
            // As in read: a lane made meanwhile goes down again.
            if let Some(s) = &f.sock {
                self.eng.lane_down(s);
            }
        })
    }

    /// ioctl(2) on an open file: a udsfs control operation, or a message
    /// call that parks when it would block (see `ioctl.rs`).
    pub fn ioctl(&self, fh: u64, cmd: u32, input: &[u8], c: Caller, reply: impl Sink<IoctlOut>) {
        let reply = IoctlReply::new(reply);
        let sock = self.files.get(fh).and_then(|f| f.sock.clone());
        if let Err((call, reply)) = ioctl::ioctl(&self.eng, sock.as_ref(), cmd, input, &c, reply) {
            self.park(Pending::Msg { fh, call, reply }, &c)
        }
        // A message call: as in read, a lane made meanwhile goes down again.
        if let Some(s) = sock
            .as_ref()
            .filter(|_| cmd == udsfs_proto::ioctl::UDSFS_IOC_MSG)
        {
            self.eng.lane_down(s);
        }
    }

    /// Retries a parked request (see `park`).
    pub(super) fn attempt(
        &self,
        p: Pending,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Outcome<Pending> {
        match p {
            Pending::Read { fh, size, reply } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(Errno::EBADF);
                    return Outcome::Done;
                };
                match f.read(&self.eng, 0, size, caller, w) {
                    Ok(d) => reply.data(d),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Read { fh, size, reply });
                    }
                    Err(e) => reply.error(e),
                }
                // Woken as the one reader of a message, it may have been
                // served otherwise (a record its file had buffered): a
                // message still queued goes to the next reader.
                if let Some(s) = &f.sock {
                    self.eng.pass_wakeup(s);
                }
                Outcome::Done
            }
            Pending::Write { fh, mut job, reply } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(Errno::EBADF);
                    return Outcome::Done;
                };
                match f.write(&self.eng, &mut job, caller, w) {
                    Ok(n) => reply.written(n as u32),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Write { fh, job, reply });
                    }
                    Err(e) => end_write(&f, job, e, caller.tid, reply),
                }
                Outcome::Done
            }
            Pending::Msg { fh, call, reply } => {
                let Some(s) = self.files.get(fh).and_then(|f| f.sock.clone()) else {
                    reply.error(Errno::EBADF);
                    return Outcome::Done;
                };
                match ioctl::retry_message(&self.eng, &s, call, reply, caller, w) {
                    Ok(()) => Outcome::Done,
                    Err((call, reply)) => Outcome::Blocked(Pending::Msg { fh, call, reply }),
                }
            }
            Pending::Open { op, reply } => match self.open_blocking(op, caller, w) {
                Ok((fh, flags)) => {
                    reply.opened(fh, flags.bits());
                    Outcome::Done
                }
                Err((Errno::EAGAIN, Some(op))) => Outcome::Blocked(Pending::Open { op, reply }),
                Err((e, op)) => {
                    if let Some(OpenOp::Connect { client, .. }) = op {
                        self.eng.put(&client);
                    }
                    reply.error(e);
                    Outcome::Done
                }
            },
        }
    }
}

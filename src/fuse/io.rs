//! The requests that may wait: reads, writes and message ioctls on open
//! files (and the retry of a blocking open): tried once on the worker
//! thread, parked when they would block, and retried from the waker (see
//! `park`).

use std::sync::{Arc, Weak};

use nix::errno::Errno;
use udsfs_proto::ioctl::{UDSFS_IOC_CTL, UDSFS_IOC_MSG};

use super::files::OpenFile;
use super::front::{Inner, nonblocking};
use super::ioctl;
use super::outgoing::WriteJob;
use super::park::{Outcome, deferring_wakeups};
use super::pending::{OpenOp, Pending};
use super::reply::{Answer, DataReply, IoctlOut, IoctlReply, Sink, WriteReply};
use crate::engine::{Caller, Socket, Waiter};

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
            Pending::AfterLane { run, .. } => run(Err(err)),
        }
    }

    /// Parks a request on `s` whose lane's way down waits for an end's
    /// busy word (`Engine::lane_down` said EAGAIN), on no worker thread:
    /// `run(Ok)` runs it again whole when the way down is done (`run(Err)`
    /// answers it with that errno). `held`: the bytes it holds meanwhile
    /// (a write's). `parker`: its caller without the FUSE id (`parker`).
    fn park_after_lane(
        &self,
        s: &Arc<Socket>,
        parker: Caller,
        held: u64,
        run: Box<dyn FnOnce(Result<(), Errno>) + Send>,
    ) {
        let sock = s.clone();
        self.park(Pending::AfterLane { sock, held, run }, &parker);
    }
}

/// The caller of a request parked until a lane is down, without its FUSE
/// id: the request it runs again parks under that id if it must wait
/// itself (an interrupt meanwhile is kept for it then,
/// `ParkTable::interrupt_request`).
fn parker(c: &Caller) -> Caller {
    Caller::again(c.tid, c.fsuid, c.fsgid, c.known_status().cloned()).with_checked(c.checked())
}

/// What a request parked until a lane is down does then: `run` on the
/// front if it is still there (else ENOTCONN: unmounted), or the errno it
/// ended with (an interrupt, unmount) answered.
fn rerun<T: 'static>(
    inner: Weak<Inner>,
    reply: Answer<T>,
    run: impl FnOnce(&Inner, Answer<T>) + Send + 'static,
) -> Box<dyn FnOnce(Result<(), Errno>) + Send> {
    Box::new(move |r| match (r, inner.upgrade()) {
        (Ok(()), Some(i)) => run(&i, reply),
        (Ok(()), None) => reply.error(Errno::ENOTCONN),
        (Err(e), _) => reply.error(e),
    })
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
        self.read_now(fh, offset, size, flags, c, DataReply::new(reply))
    }

    fn read_now(&self, fh: u64, offset: u64, size: u32, flags: i32, c: Caller, reply: DataReply) {
        deferring_wakeups(|| {
            let Some(f) = self.files.get(fh) else {
                return reply.error(Errno::EBADF);
            };
            // Its socket's lane (if it has one) is taken down first: its
            // bytes go through the daemon from here on.
            if let Some(s) = f.byte_sock()
                && self.eng.lane_down(s, None).is_err()
            {
                let p = parker(&c);
                let run = move |i: &Inner, r| i.read_now(fh, offset, size, flags, c, r);
                return self.park_after_lane(s, p, 0, rerun(self.me.clone(), reply, run));
            }
            match f.read(&self.eng, offset, size, &c, None) {
                Ok(d) => reply.data(d),
                Err(Errno::EAGAIN) if !nonblocking(flags) => {
                    self.park(Pending::Read { fh, size, reply }, &c)
                }
                Err(e) => reply.error(e),
            }
            // A lane made meanwhile (the other end's join): this read, if
            // it parked, goes on through the ring if it is the asker's, else
            // the lane goes down again (src/engine/lane.rs).
            if let Some(s) = f.byte_sock() {
                self.eng.lane_after_read(s, c.tid);
            }
        })
    }

    /// write(2) on an open file.
    pub fn write(&self, fh: u64, data: &[u8], flags: i32, c: Caller, reply: impl Sink<u32>) {
        self.write_now(fh, data, flags, c, WriteReply::new(reply))
    }

    fn write_now(&self, fh: u64, data: &[u8], flags: i32, c: Caller, reply: WriteReply) {
        deferring_wakeups(|| {
            let Some(f) = self.files.get(fh) else {
                return reply.error(Errno::EBADF);
            };
            // As in read: the lane down first.
            if let Some(s) = &f.sock
                && self.eng.lane_down(s, None).is_err()
            {
                let (p, data) = (parker(&c), data.to_vec());
                let held = data.len() as u64;
                let run = move |i: &Inner, r| i.write_now(fh, &data, flags, c, r);
                return self.park_after_lane(s, p, held, rerun(self.me.clone(), reply, run));
            }
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
                let _ = self.eng.lane_down(s, None);
            }
        })
    }

    /// ioctl(2) on an open file: a udsfs control operation, or a message
    /// call that parks when it would block (see `ioctl.rs`).
    pub fn ioctl(&self, fh: u64, cmd: u32, input: &[u8], c: Caller, reply: impl Sink<IoctlOut>) {
        self.ioctl_now(fh, cmd, input, c, IoctlReply::new(reply))
    }

    fn ioctl_now(&self, fh: u64, cmd: u32, input: &[u8], c: Caller, reply: IoctlReply) {
        let sock = self.files.get(fh).and_then(|f| f.sock.clone());
        // The lane down first, as the call needs (ioctl::lane_down).
        if let Some(s) = sock
            .as_ref()
            .filter(|_| [UDSFS_IOC_CTL, UDSFS_IOC_MSG].contains(&cmd))
            && ioctl::lane_down(&self.eng, s, cmd, input, None).is_err()
        {
            let (p, input) = (parker(&c), input.to_vec());
            let held = input.len() as u64;
            let run = move |i: &Inner, r| i.ioctl_now(fh, cmd, &input, c, r);
            return self.park_after_lane(s, p, held, rerun(self.me.clone(), reply, run));
        }
        if let Err((call, reply)) = ioctl::ioctl(&self.eng, sock.as_ref(), cmd, input, &c, reply) {
            self.park(Pending::Msg { fh, call, reply }, &c)
        }
        // As in read, a lane made meanwhile goes down again where the call
        // took it down first (a message call, a shutdown: ioctl::lane_down_after).
        if let Some(s) = sock
            .as_ref()
            .filter(|_| [UDSFS_IOC_CTL, UDSFS_IOC_MSG].contains(&cmd))
        {
            ioctl::lane_down_after(&self.eng, s, cmd, input);
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
                // Its connection's lane came up under it (the grant woke
                // it): back to its library, which reads the ring.
                if let Some(s) = &f.sock
                    && self.eng.lane_kicks(s, caller.tid)
                {
                    reply.error(Errno::EINTR);
                    return Outcome::Done;
                }
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
            // Run again whole once the lane is down (its way down wakes it).
            Pending::AfterLane { sock, held, run } => {
                if self.eng.lane_down(&sock, w) == Err(Errno::EAGAIN) {
                    return Outcome::Blocked(Pending::AfterLane { sock, held, run });
                }
                run(Ok(()));
                Outcome::Done
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use parking_lot::Mutex;
    use udsfs_proto::lane::region::busy_word;
    use udsfs_proto::lane::{Framing, Side};

    use super::*;
    use crate::engine::cred::ProcStatus;
    use crate::engine::{Config, Engine, SockType};
    use crate::fuse::files::FileKind;

    type Slot = Arc<Mutex<Option<Result<Vec<u8>, Errno>>>>;

    struct Got(Slot);

    impl Sink<Vec<u8>> for Got {
        fn send(self: Box<Self>, a: Result<Vec<u8>, Errno>) {
            *self.0.lock() = Some(a);
        }
    }

    /// This process, as a thread no process has (above PID_MAX_LIMIT).
    fn me() -> Caller {
        let st = ProcStatus {
            tgid: std::process::id() as i32,
            umask: 0o022,
            ..Default::default()
        };
        Caller::with_status(1 << 23, st)
    }

    /// A read of a laned socket whose peer's busy word is up (a copy under
    /// way) is parked, not waited for on the worker: the worker's call
    /// returns at once, and once the busy word is down the read runs again
    /// and gets the ring's bytes, drained in order (no reset).
    #[test]
    fn a_read_parks_while_a_busy_word_is_up_and_then_gets_the_rings_bytes() {
        let eng = Engine::new(Config {
            lanes: true,
            ..Config::small()
        });
        let inner = Inner::new(eng.clone(), 0, 0);
        let (a, b) = eng.socketpair(SockType::Stream, &me());
        eng.lane_prepare(&a, &me())
            .expect("a fresh pair gets a lane");
        eng.lane_region(&a, |r| {
            let (mut w, _) = r.end(Side::A, Framing::Stream);
            assert_eq!(w.write(b"published"), Ok(9));
            r.word(busy_word(0)).store(1, Ordering::SeqCst);
        });
        let fh = inner
            .files
            .insert(OpenFile::new(Some(b.clone()), FileKind::Data));
        let got: Slot = Arc::default();
        let t = Instant::now();
        inner.read(fh, 0, 64, 0, me(), Got(got.clone()));
        let back = t.elapsed();
        println!(
            "the worker's read call returned after {back:?}, answered: {:?}",
            got.lock()
        );
        assert!(got.lock().is_none(), "answered before the way down");
        assert!(
            back < Duration::from_millis(100),
            "the worker waited {back:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        eng.lane_region(&a, |r| r.word(busy_word(0)).store(0, Ordering::SeqCst));
        while got.lock().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let answer = got.lock().clone();
        println!("the read's answer after {:?}: {answer:?}", t.elapsed());
        assert_eq!(answer, Some(Ok(b"published".to_vec())));
        assert_eq!(a.lock().err, None, "a copy that finished is no reset");
    }
}

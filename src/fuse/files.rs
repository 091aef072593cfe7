//! The open files of the mount (the handle table, `OpenFile` and what each
//! kind holds) and one read or write on one file; the parking around them
//! is in io.rs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use nix::errno::Errno;
use parking_lot::Mutex;

use super::dir_cursor::DirCursor;
use super::outgoing::{Held, WriteJob, send_batch};
use super::poll_waiter::PollWaiter;
use crate::ctl::{self, Command};
use crate::engine::quota::{Charge, Quota};
use crate::engine::{
    Caller, Claim, Engine, MAX_MSG, RecvFlags, RightsRoom, SendMsg, SockType, Socket, Waiter,
};
use crate::msgfmt::{self, Batch, Ending};
use crate::sharded::ShardedMap;
use std::borrow::Cow;
use udsfs_proto::record::MAX_DGRAM;

pub enum FileKind {
    /// A control handle: reading gives `text`, writing runs commands.
    Ctl {
        text: Vec<u8>,
    },
    Data,
    Msg(Mutex<MsgReader>, Mutex<MsgWriter>),
    /// Text made at open (status, unix).
    Snapshot(Vec<u8>),
    /// The collector's figures at open; writing `run` collects now.
    Gc(Vec<u8>),
    /// The fault rules the opener may see, at open; writing runs a
    /// command (fuse/faults.rs).
    Faults(Vec<u8>),
    /// An open directory of the tree: where its listing got to.
    Dir(Mutex<DirCursor>),
    /// A capture (src/capture): reads give pcapng, writes filter lines.
    Capture(crate::capture::Handle),
}

/// A received record being read out in pieces. Taken out of its queue, it
/// counts as an open listing's text until it is read to its end: a user's
/// handles, each reading one byte of a record of 1 MiB, held gigabytes.
pub struct MsgReader {
    buf: Vec<u8>,
    pos: usize,
    held: Charge,
}

/// Room kept for a received record's header.
const RECORD_HEADER_ROOM: u64 = 16 * 1024;
/// What a reader reserves before a record leaves its queue: the largest
/// stream record and a generous header (a larger datagram reserves its own
/// size, `RecvFlags::reserve`).
const MAX_RECORD: u64 = MAX_MSG as u64 + RECORD_HEADER_ROOM;

impl MsgReader {
    pub fn new(listings: Arc<Quota>) -> MsgReader {
        MsgReader {
            buf: Vec::new(),
            pos: 0,
            held: Charge::new(listings),
        }
    }
}

/// Records written in pieces (see `msgfmt::Assembler`): what waits for the
/// rest of its record counts toward the mount's bytes held, charged to the
/// user who wrote last.
pub struct MsgWriter {
    asm: msgfmt::Assembler,
    held: Charge,
    uid: u32,
}

impl MsgWriter {
    pub fn new(held: Arc<Quota>) -> MsgWriter {
        MsgWriter {
            asm: msgfmt::Assembler::default(),
            held: Charge::new(held),
            uid: 0,
        }
    }

    /// Takes a write (see `Assembler::take`); ENOBUFS, with nothing taken,
    /// when the bytes it may leave waiting do not fit.
    fn take(&mut self, data: &[u8], uid: u32) -> Result<Batch, Errno> {
        let most = (self.asm.buffered() + data.len()) as u64;
        if self.held.set(uid, most).is_err() {
            return Err(Errno::ENOBUFS);
        }
        self.uid = uid;
        let batch = self.asm.take(data);
        // What will wait unless sending stops early (then `settle` counts
        // again); shrinking a charge is never refused.
        let rest = batch.as_ref().map_or(0, |b| b.input.len() - b.whole);
        let _ = self.held.set(uid, rest as u64);
        batch
    }

    /// Drops what is kept (see `Assembler::discard`).
    fn discard(&mut self) {
        self.asm.discard();
        let _ = self.held.set(self.uid, 0);
    }

    /// Records how far sending `b` got (see `Assembler::settle`).
    fn settle(&mut self, b: &Batch, done: usize, how: Ending) -> usize {
        let n = self.asm.settle(b, done, how);
        // Bytes taken back after a pause were counted at `take`; should
        // the quota have shrunk since, they stay uncounted rather than lost.
        let _ = self.held.set(self.uid, self.asm.buffered() as u64);
        n
    }
}

pub struct OpenFile {
    /// The socket this file holds a reference to.
    pub sock: Option<Arc<Socket>>,
    pub kind: FileKind,
    /// A socketpair's second socket, kept until one of its files is opened.
    pub pair_half: Mutex<Option<Arc<Socket>>>,
    /// The file's poll registration, made at its first poll.
    pub poller: OnceLock<Arc<PollWaiter>>,
    /// The claim this handle keeps on its socket directory
    /// (src/engine/access.rs), given back at close.
    pub claim: Mutex<Option<Claim>>,
    /// What the text of a listing handle holds of its opener's share of
    /// `Inner::listings`, given back at close.
    pub listing: Option<Charge>,
}

/// Open files by handle number.
#[derive(Default)]
pub struct Files {
    map: ShardedMap<u64, Arc<OpenFile>>,
    next: AtomicU64,
}

impl Files {
    pub fn insert(&self, f: OpenFile) -> u64 {
        // Handle 0 is never given out.
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.map.insert(fh, Arc::new(f));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<OpenFile>> {
        self.map.get(&fh)
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<OpenFile>> {
        self.map.remove(&fh)
    }
}

fn read_at(text: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = (offset as usize).min(text.len());
    let end = start.saturating_add(size as usize).min(text.len());
    text[start..end].to_vec()
}

impl OpenFile {
    /// The socket whose bytes this file moves (a data or msg file): its
    /// lane matters to the file's reads and close. A control handle (an
    /// accept's among them) or a snapshot moves none, and its read may end
    /// after the other end's ask made the lane (adversarial_through.sh
    /// share: an accept handle's read took the new lane down under it).
    pub fn byte_sock(&self) -> Option<&Arc<Socket>> {
        match self.kind {
            FileKind::Data | FileKind::Msg(..) => self.sock.as_ref(),
            _ => None,
        }
    }

    pub fn new(sock: Option<Arc<Socket>>, kind: FileKind) -> OpenFile {
        OpenFile {
            sock,
            kind,
            pair_half: Mutex::new(None),
            poller: OnceLock::new(),
            claim: Mutex::new(None),
            listing: None,
        }
    }

    pub fn is_stream_data(&self) -> bool {
        matches!(self.kind, FileKind::Data | FileKind::Msg(..))
            && self.sock.as_ref().is_some_and(|s| s.ty == SockType::Stream)
    }

    /// One read. EAGAIN means nothing yet; `w` waits for it.
    pub fn read(
        &self,
        eng: &Engine,
        offset: u64,
        size: u32,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<Vec<u8>, Errno> {
        match &self.kind {
            FileKind::Ctl { text } => Ok(read_at(text, offset, size)),
            FileKind::Snapshot(text) | FileKind::Gc(text) | FileKind::Faults(text) => {
                Ok(read_at(text, offset, size))
            }
            FileKind::Dir(_) => Err(Errno::EISDIR),
            FileKind::Capture(h) => h.reader.read(size as usize, w),
            FileKind::Data => {
                let s = self.sock.as_ref().ok_or(Errno::EBADF)?;
                // The kernel cuts a read(2) past one FUSE request into
                // requests at growing offsets of a stream file (0 at each
                // call): a datagram socket's read is one datagram, taken by
                // the first; a later one of the same call ends it.
                if offset > 0 && s.ty != SockType::Stream {
                    return Ok(Vec::new());
                }
                // read() has no room for passed sockets: they are closed, as
                // recvmsg without a control buffer does.
                let flags = RecvFlags {
                    room: Some(RightsRoom::NONE),
                    ..RecvFlags::new(size as usize)
                };
                Ok(eng.recvmsg(s, flags, w)?.data)
            }
            FileKind::Msg(reader, _) => {
                let s = self.sock.as_ref().ok_or(Errno::EBADF)?;
                let mut r = reader.lock();
                // A later request of a read(2) cut into several (offset > 0)
                // after its record ended at a request's end: the call ends
                // there, and never takes the next record.
                if r.pos >= r.buf.len() && offset > 0 {
                    return Ok(Vec::new());
                }
                if r.pos >= r.buf.len() {
                    // Room for the largest record before one leaves its queue.
                    if r.held.set(caller.fsuid, MAX_RECORD).is_err() {
                        log::info!(
                            "socket {}: a record for uid {} cannot be kept: ENOMEM",
                            s.id,
                            caller.fsuid
                        );
                        return Err(Errno::ENOMEM);
                    }
                    // A stream record is what is queued now, whatever the
                    // reader's buffer: bash `read` asks one byte at a time.
                    // A datagram is taken whole, up to the largest one; one
                    // larger than the reservation is charged before it
                    // leaves its queue.
                    let want = match s.ty {
                        SockType::Stream => MAX_MSG,
                        _ => MAX_DGRAM,
                    };
                    let uid = caller.fsuid;
                    let got = {
                        let held = std::cell::RefCell::new(&mut r.held);
                        let reserve = |n: usize| {
                            let need = n as u64 + RECORD_HEADER_ROOM;
                            need <= MAX_RECORD || held.borrow_mut().set(uid, need).is_ok()
                        };
                        let flags = RecvFlags {
                            deliver_to: Some(caller),
                            pid_only: true,
                            reserve: Some(&reserve),
                            ..RecvFlags::new(want)
                        };
                        eng.recvmsg(s, flags, w)
                    };
                    if got.as_ref().is_err_and(|e| *e == Errno::ENOMEM) {
                        log::info!(
                            "socket {}: a record for uid {} cannot be kept: ENOMEM",
                            s.id,
                            caller.fsuid
                        );
                    }
                    let mut got = match got {
                        Ok(got) => got,
                        Err(e) => {
                            let _ = r.held.set(caller.fsuid, 0);
                            return Err(e);
                        }
                    };
                    let ids = std::mem::take(&mut got.passed);
                    got.for_viewer(caller.tid);
                    let from = got.from.as_ref().map(|n| &n.addr);
                    let received = msgfmt::Received {
                        from,
                        creds: got.creds,
                        pidfd: got.pidfd,
                        rights: &ids,
                        ctrunc: got.ctrunc,
                        stamp: got.stamp,
                    };
                    let mut rec = msgfmt::format_header(got.data.len(), &received).into_bytes();
                    rec.extend_from_slice(&got.data);
                    r.buf = rec;
                    r.pos = 0;
                }
                let end = (r.pos + size as usize).min(r.buf.len());
                let out = r.buf[r.pos..end].to_vec();
                r.pos = end;
                if r.pos >= r.buf.len() {
                    // Read to its end: nothing kept.
                    r.buf = Vec::new();
                    r.pos = 0;
                }
                // Shrinking is never refused; a record larger than reserved
                // (a long header) stays counted at the reservation.
                let left = (r.buf.len() - r.pos) as u64;
                let _ = r.held.set(caller.fsuid, left);
                Ok(out)
            }
        }
    }

    /// Takes a write: for `msg` files, adds it to what the file's
    /// assembler keeps and gives the segments ready to send.
    pub fn start_write<'a>(
        &self,
        eng: &Arc<Engine>,
        data: &'a [u8],
        uid: u32,
    ) -> Result<WriteJob<'a>, Errno> {
        match &self.kind {
            FileKind::Msg(_, asm) => {
                let mut asm = asm.lock();
                let batch = asm.take(data, uid).inspect_err(|e| {
                    log::info!("msg write refused: {}", e.desc());
                })?;
                // A write that only begins a record (a large one comes in
                // pieces of one FUSE request) is refused at once when the
                // datagram will not fit its socket, as Linux refuses the
                // send: the writer gets the errno, not a short count.
                if let (Some(len), Some(s), true) = (
                    batch.unfinished,
                    self.sock.as_ref(),
                    batch.segments.is_empty(),
                ) && let Err(e) = eng.record_fits(s, len)
                {
                    log::info!("socket {}: a msg record of {len} bytes: {}", s.id, e.desc());
                    asm.discard();
                    return Err(e);
                }
                Ok(WriteJob::Msg {
                    batch,
                    done: 0,
                    held: Held::new(eng.clone()),
                })
            }
            _ => Ok(WriteJob::Plain {
                data: Cow::Borrowed(data),
                done: 0,
            }),
        }
    }

    /// Runs a write on from where it got. Ok(n) is the count to report;
    /// EAGAIN leaves `w` waiting and the job updated.
    pub fn write(
        &self,
        eng: &Engine,
        job: &mut WriteJob,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize, Errno> {
        let (data, done) = match job {
            WriteJob::Plain { data, done } => (&data[..], done),
            WriteJob::Msg { batch, done, held } => {
                let (s, FileKind::Msg(_, asm)) = (self.sock.as_ref(), &self.kind) else {
                    return Err(Errno::EBADF);
                };
                let s = s.ok_or(Errno::EBADF)?;
                let cut = send_batch(s, batch, done, held, caller, w)?;
                // A rule's cut is the write's count, as for a data file.
                let (upto, how) = if cut {
                    (*done, Ending::Cut)
                } else {
                    (batch.whole, Ending::Sent)
                };
                return Ok(asm.lock().settle(batch, upto, how));
            }
        };
        if let FileKind::Capture(h) = &self.kind {
            return h.reader.configure(data);
        }
        if let FileKind::Faults(_) = self.kind {
            return super::faults::write(eng, data, caller);
        }
        if let FileKind::Gc(_) = self.kind {
            return match data.trim_ascii() {
                b"run" => {
                    eng.collect();
                    Ok(data.len())
                }
                _ => Err(Errno::EINVAL),
            };
        }
        let s = self.sock.as_ref().ok_or(Errno::EBADF)?;
        match &self.kind {
            FileKind::Snapshot(_)
            | FileKind::Gc(_)
            | FileKind::Faults(_)
            | FileKind::Msg(..)
            | FileKind::Dir(_)
            | FileKind::Capture(_) => Err(Errno::EBADF),
            FileKind::Ctl { .. } => {
                while *done < data.len() {
                    let rest = &data[*done..];
                    let (line, used) = match rest.iter().position(|&b| b == b'\n') {
                        Some(i) => (&rest[..i], i + 1),
                        None => (rest, rest.len()),
                    };
                    if let Some(res) = super::faults::ctl_line(eng, s, line, caller) {
                        res?;
                    } else if !line.iter().all(|b| b.is_ascii_whitespace()) {
                        run_command(eng, s, line, caller, w).inspect_err(|e| {
                            if *e != Errno::EAGAIN {
                                log::info!(
                                    "socket {}: {:?} failed: {}",
                                    s.id,
                                    // A log line, not a copy of whatever was written.
                                    String::from_utf8_lossy(&line[..line.len().min(120)]),
                                    e.desc()
                                );
                            }
                        })?;
                    }
                    *done += used;
                }
                Ok(data.len())
            }
            FileKind::Data => {
                if s.ty != SockType::Stream {
                    // The kernel cuts a write(2) past one FUSE request into
                    // several: each would be a datagram of its own. A write
                    // is one datagram of at most MAX_MSG (larger ones go as
                    // `msg` records, as the fronts send them).
                    if data.len() > MAX_MSG {
                        return Err(Errno::EMSGSIZE);
                    }
                    return eng.sendmsg(s, SendMsg::new(data), caller, w);
                }
                while *done < data.len() {
                    match eng.send(s, SendMsg::new(&data[*done..]), caller, w) {
                        Ok(sent) => {
                            *done += sent.len;
                            // A fault's short count is the write's, as a
                            // short send is the program's to finish.
                            if sent.cut {
                                return Ok(*done);
                            }
                        }
                        Err(e) if *done > 0 && e != Errno::EAGAIN => return Ok(*done),
                        Err(e) => return Err(e),
                    }
                }
                Ok(data.len())
            }
        }
    }

    /// Ends a write that stops early with `err` (EAGAIN without waiting, a
    /// signal, a failure): the count write(2) reports when part of it was
    /// taken, None to report `err`. A `msg` file keeps the unsent rest of a
    /// record begun (see `msgfmt::Assembler`) unless the send failed.
    pub fn end_write(&self, job: WriteJob, err: Errno) -> Option<usize> {
        let paused = matches!(err, Errno::EAGAIN | Errno::EINTR | Errno::ENOTCONN);
        let n = match (job, &self.kind) {
            (WriteJob::Msg { batch, done, .. }, FileKind::Msg(_, asm)) => {
                let how = if paused {
                    Ending::Paused
                } else {
                    Ending::Failed
                };
                asm.lock().settle(&batch, done, how)
            }
            // A command that fails is the write's error, even after others ran.
            (WriteJob::Plain { .. }, FileKind::Ctl { .. }) if !paused => 0,
            (WriteJob::Plain { done, .. }, _) => done,
            (WriteJob::Msg { .. }, _) => 0,
        };
        (n > 0).then_some(n)
    }
}

fn run_command(
    eng: &Engine,
    s: &Arc<Socket>,
    line: &[u8],
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<(), Errno> {
    match ctl::parse(line)? {
        Command::Bind(Some(a)) => eng.bind(s, &a, caller),
        Command::Bind(None) => eng.autobind(s, caller),
        Command::Listen(b) => eng.listen(s, b, caller),
        Command::Connect(Some(a)) => eng.connect(s, &a, caller, w),
        Command::Connect(None) => eng.disconnect(s),
        Command::Shutdown(how) => eng.shutdown(s, how),
        Command::Passcred(on) => {
            eng.set_passcred(s, on);
            Ok(())
        }
        Command::OobInline(on) => {
            eng.set_oob_inline(s, on);
            Ok(())
        }
        Command::PeekOff(off) => {
            eng.set_peek_off(s, off);
            Ok(())
        }
        Command::Owner(target) => {
            eng.set_urg_owner(s, target, caller);
            Ok(())
        }
        Command::Passpidfd(on) => {
            eng.set_passpidfd(s, on);
            Ok(())
        }
        Command::Buffer { buf, val, force } => eng.set_buffer(s, buf, val, force, caller),
        Command::Timeout { dir, millis } => {
            let sec = (millis / 1000).min(i64::MAX as u64) as i64;
            s.timeouts.set(dir, sec, (millis % 1000) as i64 * 1000)
        }
        Command::CaptureProto(p) => {
            eng.set_capture_proto(s, p);
            Ok(())
        }
    }
}

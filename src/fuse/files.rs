//! Open files of the mount and the I/O on them: what a read, a write or a
//! blocking open does, tried once at once and again from the waker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use parking_lot::Mutex;

use crate::ctl::{self, Command};
use crate::engine::{Caller, Engine, MAX_MSG, SockType, Socket, Ucred, Waiter};
use crate::msgfmt;
use crate::sharded::ShardedMap;

pub enum FileKind {
    /// A control handle: reading gives `text`, writing runs commands.
    Ctl {
        text: Vec<u8>,
    },
    Data,
    Msg(Mutex<MsgReader>, Mutex<msgfmt::Assembler>),
    /// Text made at open (status, unix).
    Snapshot(Vec<u8>),
    /// The collector's figures at open; writing `run` collects now.
    Gc(Vec<u8>),
}

/// A received record being read out in pieces.
#[derive(Default)]
pub struct MsgReader {
    buf: Vec<u8>,
    pos: usize,
}

pub struct OpenFile {
    /// The socket this file holds a reference to.
    pub sock: Option<Arc<Socket>>,
    pub kind: FileKind,
    /// A socketpair's second socket, held until one of its files is opened.
    pub held: Mutex<Option<Arc<Socket>>>,
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

/// Explicit credentials are the caller's own unless it is root (scm_check_creds).
fn check_creds(c: &Ucred, caller: &Caller) -> Result<(), Errno> {
    if !caller.is_root() {
        let st = caller.status();
        let pid_ok = c.pid == st.tgid;
        let uid_ok = st.uids[..3].contains(&c.uid);
        let gid_ok = st.gids[..3].contains(&c.gid);
        if !(pid_ok && uid_ok && gid_ok) {
            return Err(Errno::EPERM);
        }
    }
    if c.pid <= 0 || !std::path::Path::new(&format!("/proc/{}", c.pid)).exists() {
        return Err(if caller.is_root() {
            Errno::ESRCH
        } else {
            Errno::EPERM
        });
    }
    Ok(())
}

impl OpenFile {
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
            FileKind::Snapshot(text) | FileKind::Gc(text) => Ok(read_at(text, offset, size)),
            FileKind::Data => {
                let s = self.sock.as_ref().ok_or(Errno::EBADF)?;
                let got = eng.recv(s, size as usize, w)?;
                // read() has no room for passed sockets: they are closed, as
                // recvmsg without a control buffer does.
                for r in &got.rights {
                    eng.put(r);
                }
                Ok(got.data)
            }
            FileKind::Msg(reader, _) => {
                let s = self.sock.as_ref().ok_or(Errno::EBADF)?;
                let mut r = reader.lock();
                if r.pos >= r.buf.len() {
                    // A stream record is what is queued now, whatever the
                    // reader's buffer: bash `read` asks one byte at a time.
                    let want = MAX_MSG;
                    let got = eng.recv(s, want, w)?;
                    let from = got.from.as_ref().map(|n| &n.addr);
                    let limit = if got.rights.is_empty() {
                        0
                    } else {
                        caller.nofile_limit()
                    };
                    let ids = eng.deliver_rights(s, got.rights, caller.fsuid, caller.fsgid, limit);
                    let mut rec =
                        msgfmt::format_header(got.data.len(), from, got.creds, &ids).into_bytes();
                    rec.extend_from_slice(&got.data);
                    r.buf = rec;
                    r.pos = 0;
                }
                let end = (r.pos + size as usize).min(r.buf.len());
                let out = r.buf[r.pos..end].to_vec();
                r.pos = end;
                Ok(out)
            }
        }
    }

    /// One write, continued from `done` (bytes already taken). Ok(n) is the
    /// count to report; EAGAIN leaves `w` waiting and `done` updated.
    pub fn write(
        &self,
        eng: &Engine,
        data: &[u8],
        done: &mut usize,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize, Errno> {
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
            FileKind::Snapshot(_) | FileKind::Gc(_) => Err(Errno::EBADF),
            FileKind::Ctl { .. } => {
                while *done < data.len() {
                    let rest = &data[*done..];
                    let (line, used) = match rest.iter().position(|&b| b == b'\n') {
                        Some(i) => (&rest[..i], i + 1),
                        None => (rest, rest.len()),
                    };
                    if !line.iter().all(|b| b.is_ascii_whitespace()) {
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
                    return eng.send(s, data, None, None, caller, w);
                }
                while *done < data.len() {
                    match eng.send(s, &data[*done..], None, None, caller, w) {
                        Ok(n) => *done += n,
                        Err(e) if *done > 0 && e != Errno::EAGAIN => return Ok(*done),
                        Err(e) => return Err(e),
                    }
                }
                Ok(data.len())
            }
            FileKind::Msg(..) => {
                // `data` holds whole records (see `assemble`); `done` is how
                // far into it the sending got.
                while *done < data.len() {
                    send_record(eng, s, data, done, caller, w)?;
                }
                Ok(data.len())
            }
        }
    }

    /// For `msg` files: what of a write forms whole records (None for
    /// other files, which take each write as it is).
    pub fn assemble(&self, data: &[u8]) -> Option<Result<Vec<u8>, Errno>> {
        match &self.kind {
            FileKind::Msg(_, asm) => Some(asm.lock().push(data)),
            _ => None,
        }
    }
}

/// Sends the record that `*done` points into, from where it got to.
fn send_record(
    eng: &Engine,
    s: &Arc<Socket>,
    buf: &[u8],
    done: &mut usize,
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<(), Errno> {
    // Find the record *done points into: its header is at `at`, its
    // payload at start..end; *done == at means it is not begun.
    let mut at = 0;
    let (h, start, end) = loop {
        let (h, start, end) = msgfmt::record_at(buf, at)?;
        if *done < end || *done == at {
            break (h, start, end);
        }
        at = end;
    };
    let fresh = *done == at;
    if fresh {
        if let Some(c) = &h.creds {
            check_creds(c, caller)?;
        }
        *done = start;
    }
    // Sockets go with the first piece of the payload only.
    let mut rights = if fresh {
        eng.hold_for_passing(&h.rights, caller).inspect_err(|e| {
            log::info!(
                "socket {}: rights={:?} refused: {}",
                s.id,
                h.rights,
                e.desc()
            );
        })?
    } else {
        Vec::new()
    };
    let res = if s.ty == SockType::Stream {
        let mut r = Ok(());
        while *done < end {
            match eng.send_msg(
                s,
                &buf[*done..end],
                h.to.as_ref(),
                h.creds,
                &mut rights,
                caller,
                w,
            ) {
                Ok(n) => *done += n,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        r
    } else {
        eng.send_msg(
            s,
            &buf[start..end],
            h.to.as_ref(),
            h.creds,
            &mut rights,
            caller,
            w,
        )
        .map(|_| *done = end)
    };
    // Whatever was not queued (a failed send, or a zero-length stream
    // message, which drops them as Linux does) is let go.
    for r in rights {
        eng.put(&r);
    }
    res
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
        Command::Bind(None) => eng.autobind(s),
        Command::Listen(b) => eng.listen(s, b, caller),
        Command::Connect(Some(a)) => eng.connect(s, &a, caller, w),
        Command::Connect(None) => eng.disconnect(s),
        Command::Shutdown(how) => eng.shutdown(s, how),
        Command::Passcred(on) => {
            eng.set_passcred(s, on);
            Ok(())
        }
    }
}

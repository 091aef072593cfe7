//! The backend under test: sockets through a private udsfs mount.
//!
//! - socket(ty): open `.udsfs/<ty>/clone` O_RDWR|O_NONBLOCK, read "N\n"; that fd is
//!   the control handle and commands are written to it, one line per write.
//! - socketpair(ty): open `.udsfs/<ty>/pair`, read "N M\n", then open
//!   `.udsfs/sock/M/ctl` so that M has a handle of its own.
//! - send/recv: `.udsfs/sock/N/data` opened O_RDWR|O_NONBLOCK on first use.
//!   A zero-length write() never reaches a FUSE file system, so an empty datagram
//!   is sent as an empty `msg` record ("len=0\n") instead.
//! - sendto/recvfrom: `.udsfs/sock/N/msg` ("len=L to=ADDR\n" + payload; reading gives
//!   "len=L[ from=ADDR]...\n" + payload).
//! - getsockname/getpeername: `local=` / `peer=` (and `state=`) of `status`.
//! - close: close every fd of the socket, then wait until `.udsfs/sock/N` is gone:
//!   FUSE sends RELEASE asynchronously after close(2) returns, so without the wait the
//!   next operation would race with the daemon's close of the socket.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, symlink};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::backend::*;
use super::blocker::Blocker;
use super::mount::Mount;

struct USock {
    n: String,
    ctl: File,
    data: Option<File>,
    msg: Option<File>,
    /// Payload bytes still owed by a stream record that `msg` took in part:
    /// the file takes the next bytes written as that record's rest.
    msg_owed: usize,
}

pub struct Udsfs {
    // Field order matters: the sockets' fds close before the mount goes.
    socks: Vec<Option<USock>>,
    /// Blocking calls by `Job`; None once joined.
    jobs: Vec<Option<Blocker<Res<UOut>>>>,
    trace: Trace,
    mount: Mount,
}

fn open_rw_nonblock(p: &PathBuf) -> Res<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| io_errno(&e))
}

/// An address in the control language: a path as is, an abstract name as `@` plus
/// the escaped bytes.
fn ctl_addr(a: &Addr) -> Res<String> {
    match a {
        Addr::Path(p) => {
            if p.is_empty() || p.bytes().any(|c| c.is_ascii_whitespace() || c == b'\\') {
                Err(format!(
                    "HARNESS path {p:?} cannot be written in the control language"
                ))
            } else {
                Ok(p.clone())
            }
        }
        Addr::Abstract(b) => Ok(format!("@{}", escape(b))),
    }
}

/// Parse an address as udsfs prints it (status `local=`/`peer=`, msg `from=`).
fn parse_name(v: &str) -> Name {
    if v.is_empty() {
        Name::Unnamed
    } else if let Some(rest) = v.strip_prefix('@') {
        Name::Abstract(unescape(rest))
    } else {
        Name::Path(unescape(v))
    }
}

fn write_once(f: &mut File, buf: &[u8], what: &str) -> Res<()> {
    match f.write(buf) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(format!(
            "HARNESS short {what} write: {n} of {} bytes",
            buf.len()
        )),
        Err(e) => Err(io_errno(&e)),
    }
}

impl Udsfs {
    pub fn new(mount: Mount) -> Udsfs {
        Udsfs {
            socks: Vec::new(),
            jobs: Vec::new(),
            trace: Trace::default(),
            mount,
        }
    }

    /// Close every socket (waiting for each to go) and return the trace and mount.
    pub fn finish(mut self) -> (Vec<(String, String)>, Mount) {
        // Calls a scenario left blocked are signalled and joined first.
        for j in 0..self.jobs.len() {
            if self.jobs[j].is_some() {
                let _ = self.raw_join(j);
            }
        }
        for s in 0..self.socks.len() {
            if self.socks[s].is_some() {
                let _ = self.raw_close(s);
            }
        }
        let entries = std::mem::take(&mut self.trace.entries);
        (entries, self.mount)
    }

    fn path(&self, p: &str) -> PathBuf {
        self.mount.path().join(p)
    }

    fn ctrl(&self, rel: &str) -> PathBuf {
        self.mount.path().join(".udsfs").join(rel)
    }

    fn sock(&mut self, s: Sock) -> Res<&mut USock> {
        match self.socks.get_mut(s) {
            Some(Some(u)) => Ok(u),
            _ => Err("EBADF".to_string()),
        }
    }

    fn cmd(&mut self, s: Sock, line: String) -> Res<()> {
        let u = self.sock(s)?;
        write_once(&mut u.ctl, format!("{line}\n").as_bytes(), "ctl")
    }

    fn data(&mut self, s: Sock) -> Res<&mut File> {
        self.sock_file(s, "data", |u| &mut u.data)
    }

    fn msg(&mut self, s: Sock) -> Res<&mut File> {
        self.sock_file(s, "msg", |u| &mut u.msg)
    }

    /// The socket's file `name`, opened read-write and non-blocking on first use and
    /// kept in `slot`.
    fn sock_file(
        &mut self,
        s: Sock,
        name: &str,
        slot: fn(&mut USock) -> &mut Option<File>,
    ) -> Res<&mut File> {
        let n = self.sock(s)?.n.clone();
        let p = self.ctrl(&format!("sock/{n}/{name}"));
        let f = slot(self.sock(s)?);
        if f.is_none() {
            *f = Some(open_rw_nonblock(&p)?);
        }
        Ok(f.as_mut().unwrap())
    }

    fn status(&mut self, s: Sock) -> Res<Vec<(String, String)>> {
        let n = self.sock(s)?.n.clone();
        let text = std::fs::read_to_string(self.ctrl(&format!("sock/{n}/status")))
            .map_err(|e| format!("HARNESS reading status: {}", io_errno(&e)))?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    fn status_field(&mut self, s: Sock, key: &str) -> Res<String> {
        self.status(s)?
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("HARNESS status has no {key}= line"))
    }

    fn send_record(&mut self, s: Sock, d: &[u8], to: Option<&Addr>) -> Res<usize> {
        let mut rec = format!("len={}", d.len());
        if let Some(a) = to {
            rec.push_str(" to=");
            rec.push_str(&ctl_addr(a)?);
        }
        rec.push('\n');
        let hdr = rec.len();
        let mut buf = rec.into_bytes();
        buf.extend_from_slice(d);
        let f = self.msg(s)?;
        match f.write(&buf) {
            Ok(n) if n == buf.len() => Ok(d.len()),
            Ok(n) => Err(format!(
                "HARNESS msg write returned {n} for a {hdr}-byte header and {} payload bytes",
                d.len()
            )),
            Err(e) => Err(io_errno(&e)),
        }
    }

    fn open_sock(&mut self, n: String, ctl: File) -> Sock {
        self.socks.push(Some(USock {
            n,
            ctl,
            data: None,
            msg: None,
            msg_owed: 0,
        }));
        self.socks.len() - 1
    }
}

impl Backend for Udsfs {
    fn trace(&mut self) -> &mut Trace {
        &mut self.trace
    }

    fn raw_socket(&mut self, ty: Ty) -> Res<Sock> {
        let mut ctl = open_rw_nonblock(&self.ctrl(&format!("{}/clone", ty.name())))?;
        let mut buf = [0u8; 64];
        let k = ctl
            .read(&mut buf)
            .map_err(|e| format!("HARNESS reading clone: {}", io_errno(&e)))?;
        let text = String::from_utf8_lossy(&buf[..k]);
        let n = text.trim_end_matches('\n');
        if n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) || !text.ends_with('\n') {
            return Err(format!(
                "HARNESS clone read gave {text:?}, expected \"N\\n\""
            ));
        }
        Ok(self.open_sock(n.to_string(), ctl))
    }

    fn raw_pair(&mut self, ty: Ty) -> Res<(Sock, Sock)> {
        let mut ctl = open_rw_nonblock(&self.ctrl(&format!("{}/pair", ty.name())))?;
        let mut buf = [0u8; 64];
        let k = ctl
            .read(&mut buf)
            .map_err(|e| format!("HARNESS reading pair: {}", io_errno(&e)))?;
        let text = String::from_utf8_lossy(&buf[..k]).into_owned();
        let nums: Vec<&str> = text.trim_end_matches('\n').split(' ').collect();
        if nums.len() != 2
            || nums
                .iter()
                .any(|n| n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()))
        {
            return Err(format!(
                "HARNESS pair read gave {text:?}, expected \"N M\\n\""
            ));
        }
        let m_ctl = open_rw_nonblock(&self.ctrl(&format!("sock/{}/ctl", nums[1])))
            .map_err(|e| format!("HARNESS opening the pair's second ctl: {e}"))?;
        let a = self.open_sock(nums[0].to_string(), ctl);
        let b = self.open_sock(nums[1].to_string(), m_ctl);
        Ok((a, b))
    }

    fn raw_bind(&mut self, s: Sock, a: &Addr) -> Res<()> {
        let a = ctl_addr(a)?;
        self.cmd(s, format!("bind {a}"))
    }

    fn raw_autobind(&mut self, s: Sock) -> Res<()> {
        self.cmd(s, "bind".to_string())
    }

    fn raw_connect(&mut self, s: Sock, a: &Addr) -> Res<()> {
        let a = ctl_addr(a)?;
        self.cmd(s, format!("connect {a}"))
    }

    fn raw_listen(&mut self, s: Sock, backlog: i32) -> Res<()> {
        self.cmd(s, format!("listen {backlog}"))
    }

    fn raw_shutdown(&mut self, s: Sock, how: How) -> Res<()> {
        self.cmd(s, format!("shutdown {}", how.name()))
    }

    fn raw_send(&mut self, s: Sock, d: &[u8]) -> Res<usize> {
        if d.is_empty() {
            return self.send_record(s, d, None);
        }
        let f = self.data(s)?;
        f.write(d).map_err(|e| io_errno(&e))
    }

    fn raw_sendto(&mut self, s: Sock, d: &[u8], a: &Addr) -> Res<usize> {
        self.send_record(s, d, Some(a))
    }

    fn raw_recv(&mut self, s: Sock, bufsize: usize) -> Res<Vec<u8>> {
        let f = self.data(s)?;
        let mut v = vec![0u8; bufsize];
        let n = f.read(&mut v).map_err(|e| io_errno(&e))?;
        v.truncate(n);
        Ok(v)
    }

    fn raw_recvfrom(&mut self, s: Sock, bufsize: usize) -> Res<Msg> {
        let (hdr, mut data) = self.read_record(s)?;
        let from = hdr
            .split(' ')
            .find_map(|f| f.strip_prefix("from="))
            .map_or(Name::Unnamed, parse_name);
        data.truncate(bufsize);
        Ok(Msg { data, from })
    }

    fn raw_getsockname(&mut self, s: Sock) -> Res<Name> {
        Ok(parse_name(&self.status_field(s, "local")?))
    }

    fn raw_getpeername(&mut self, s: Sock) -> Res<Name> {
        let st = self.status(s)?;
        let get = |key: &str| {
            st.iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| format!("HARNESS status has no {key}= line"))
        };
        let state = get("state")?;
        let peer = get("peer")?;
        match state.as_str() {
            "connected" | "disconnected" => Ok(parse_name(&peer)),
            _ => Err("ENOTCONN".to_string()),
        }
    }

    fn raw_close(&mut self, s: Sock) -> Res<()> {
        let u = match self.socks.get_mut(s).and_then(Option::take) {
            Some(u) => u,
            None => return Err("EBADF".to_string()),
        };
        let dir = self.ctrl(&format!("sock/{}", u.n));
        {
            let _spawning = super::backend::spawn_guard();
            drop(u);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match std::fs::symlink_metadata(&dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                _ if Instant::now() > deadline => {
                    return Err(format!(
                        "HARNESS {} still exists 5 s after all its fds were closed",
                        dir.display()
                    ));
                }
                _ => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    fn raw_mkdir(&mut self, path: &str) -> Res<()> {
        std::fs::create_dir(self.path(path)).map_err(|e| io_errno(&e))
    }

    fn raw_rmdir(&mut self, path: &str) -> Res<()> {
        std::fs::remove_dir(self.path(path)).map_err(|e| io_errno(&e))
    }

    fn raw_rm(&mut self, path: &str) -> Res<()> {
        std::fs::remove_file(self.path(path)).map_err(|e| io_errno(&e))
    }

    fn raw_rename(&mut self, from: &str, to: &str) -> Res<()> {
        std::fs::rename(self.path(from), self.path(to)).map_err(|e| io_errno(&e))
    }

    fn raw_symlink(&mut self, target: &str, link: &str) -> Res<()> {
        symlink(target, self.path(link)).map_err(|e| io_errno(&e))
    }

    fn raw_stat(&mut self, path: &str) -> Res<String> {
        std::fs::symlink_metadata(self.path(path))
            .map(|m| describe_metadata(&m))
            .map_err(|e| io_errno(&e))
    }

    // ---- stream / seqpacket ----

    /// Open `.udsfs/sock/L/accept` O_RDONLY|O_NONBLOCK (a failed accept fails the
    /// open), read "M\n" from it, then open `.udsfs/sock/M/ctl` O_RDWR for commands;
    /// the accept handle (also M's control handle, but read-only) is then closed.
    fn raw_accept(&mut self, s: Sock) -> Res<Sock> {
        let n = self.sock(s)?.n.clone();
        let mut acc = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.ctrl(&format!("sock/{n}/accept")))
            .map_err(|e| io_errno(&e))?;
        let m = read_accepted(&mut acc)?;
        let ctl = open_rw_nonblock(&self.ctrl(&format!("sock/{m}/ctl")))
            .map_err(|e| format!("HARNESS opening the accepted socket's ctl: {e}"))?;
        drop(acc);
        Ok(self.open_sock(m.to_string(), ctl))
    }

    fn raw_poll(&mut self, s: Sock) -> Res<i16> {
        use std::os::fd::AsRawFd;
        poll_now(self.data(s)?.as_raw_fd())
    }

    /// A write on `data` (the daemon raises SIGPIPE in the writing thread on a stream
    /// EPIPE, before it answers the write).
    fn raw_send_sig(&mut self, s: Sock, d: &[u8]) -> (Res<usize>, bool) {
        let f = match self.data(s) {
            Ok(f) => f,
            Err(e) => return (Err(e), false),
        };
        sigpipe_check(|| f.write(d).map_err(|e| io_errno(&e)))
    }

    // ---- names / permissions ----

    fn raw_passcred(&mut self, s: Sock, on: bool) -> Res<()> {
        let v = if on { "on" } else { "off" };
        self.cmd(s, format!("passcred {v}"))
    }

    fn raw_sndtimeo(&mut self, s: Sock, ms: u32) -> Res<()> {
        self.cmd(s, format!("sndtimeo {ms}"))
    }

    /// Opens `.udsfs/sock/N/ctl` again: another handle on the same socket.
    fn raw_dup(&mut self, s: Sock) -> Res<Sock> {
        let n = self.sock(s)?.n.clone();
        let ctl = open_rw_nonblock(&self.ctrl(&format!("sock/{n}/ctl")))?;
        Ok(self.open_sock(n, ctl))
    }

    fn raw_drop_handle(&mut self, s: Sock) -> Res<()> {
        match self.socks.get_mut(s).and_then(Option::take) {
            Some(u) => {
                drop(u);
                Ok(())
            }
            None => Err("EBADF".to_string()),
        }
    }

    fn raw_link(&mut self, from: &str, to: &str) -> Res<()> {
        std::fs::hard_link(self.path(from), self.path(to)).map_err(|e| io_errno(&e))
    }

    fn raw_mknod_sock(&mut self, path: &str) -> Res<()> {
        let c = path_cstring(&self.path(path));
        // SAFETY: valid C string.
        if unsafe { libc::mknod(c.as_ptr(), libc::S_IFSOCK | 0o666, 0) } != 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    fn raw_chmod(&mut self, path: &str, mode: u32) -> Res<()> {
        let c = path_cstring(&self.path(path));
        // SAFETY: valid C string.
        if unsafe { libc::chmod(c.as_ptr(), mode as libc::mode_t) } != 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    fn raw_chown(&mut self, path: &str, uid: u32, gid: u32) -> Res<()> {
        let c = path_cstring(&self.path(path));
        // SAFETY: valid C string.
        if unsafe { libc::chown(c.as_ptr(), uid, gid) } != 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    fn raw_owner(&mut self, path: &str) -> Res<String> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(self.path(path))
            .map(|m| format!("{}:{}", m.uid(), m.gid()))
            .map_err(|e| io_errno(&e))
    }

    /// Replaces the mount by one made with `--allow-other`.
    fn raw_multiuser(&mut self) -> Res<()> {
        if !self.socks.is_empty() {
            return Err("HARNESS multiuser must come before any socket".to_string());
        }
        self.mount = Mount::new_with_args(&["--allow-other"]);
        Ok(())
    }

    fn raw_bind_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()> {
        let a = ctl_addr(&sun_to_addr(sun))?;
        self.cmd(s, format!("bind {a}"))
    }

    fn raw_connect_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()> {
        let a = ctl_addr(&sun_to_addr(sun))?;
        self.cmd(s, format!("connect {a}"))
    }

    fn raw_sendto_sun(&mut self, s: Sock, d: &[u8], sun: &[u8]) -> Res<usize> {
        self.send_record(s, d, Some(&sun_to_addr(sun)))
    }
    // ---- credentials, rights and GC ----

    fn raw_get_passcred(&mut self, s: Sock) -> Res<bool> {
        match self.status_field(s, "passcred")?.as_str() {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(format!("HARNESS status passcred={v:?}")),
        }
    }

    fn raw_peercred(&mut self, s: Sock) -> Res<Option<Ucred>> {
        let v = self.status_field(s, "peercred")?;
        if v.is_empty() {
            return Ok(None);
        }
        parse_ucred(&v)
            .map(Some)
            .ok_or_else(|| format!("HARNESS status peercred={v:?}"))
    }

    fn raw_sendmsg(&mut self, s: Sock, m: &SendMsg) -> Res<usize> {
        let owed = self.sock(s)?.msg_owed;
        if owed > 0 {
            // After a partial sendmsg the caller sends the rest; `msg` takes
            // it as the rest of the record begun, with no new header.
            if m.data.len() > owed || m.to.is_some() || m.creds.is_some() || !m.rights.is_empty() {
                return Err(format!(
                    "HARNESS a sendmsg of {} bytes (or with a header field) after a \
                     record that still owes {owed}",
                    m.data.len()
                ));
            }
            let r = self.msg(s)?.write(&m.data).map_err(|e| io_errno(&e));
            if let Ok(n) = r {
                self.sock(s)?.msg_owed -= n;
            }
            return r;
        }
        let (rec, _) = self.msg_record(m)?;
        let f = self.msg(s)?;
        let r = f.write(&rec).map_err(|e| io_errno(&e));
        let r = sendmsg_result(r, &rec);
        if let Ok(n) = r {
            self.sock(s)?.msg_owed = m.data.len() - n;
        }
        r
    }

    fn raw_recvmsg(&mut self, s: Sock, bufsize: usize) -> Res<RecvMsg> {
        let (hdr, data) = self.read_record(s)?;
        self.adopt_record(&hdr, data, bufsize)
    }

    fn raw_child(&mut self, c: &Child, ops: &[ChildOp]) -> Res<Vec<Res<usize>>> {
        use std::os::fd::AsRawFd;
        // (fd, bytes to write, where the OWN_PID digits go, result on a full write)
        let mut preps: Vec<(libc::c_int, Vec<u8>, Option<usize>, usize)> = Vec::new();
        for op in ops {
            preps.push(match op {
                ChildOp::Send(s, d) if d.is_empty() => {
                    (self.msg(*s)?.as_raw_fd(), b"len=0\n".to_vec(), None, 0)
                }
                ChildOp::Send(s, d) => (self.data(*s)?.as_raw_fd(), d.clone(), None, usize::MAX),
                ChildOp::SendMsg(s, m) => {
                    let (rec, off) = self.msg_record(m)?;
                    (self.msg(*s)?.as_raw_fd(), rec, off, m.data.len())
                }
                ChildOp::Connect(s, a) => {
                    let line = format!("connect {}\n", ctl_addr(a)?).into_bytes();
                    (self.sock(*s)?.ctl.as_raw_fd(), line, None, 0)
                }
                ChildOp::Listen(s, n) => {
                    let line = format!("listen {n}\n").into_bytes();
                    (self.sock(*s)?.ctl.as_raw_fd(), line, None, 0)
                }
            });
        }
        let mut body = |res: &mut [i64]| {
            // SAFETY: raw system calls on buffers prepared before the clone.
            unsafe {
                let me = libc::syscall(libc::SYS_getpid) as u64;
                for (i, (fd, buf, off, _)) in preps.iter_mut().enumerate() {
                    if let Some(o) = off {
                        let mut v = me;
                        for k in (0..PID_DIGITS).rev() {
                            buf[*o + k] = b'0' + (v % 10) as u8;
                            v /= 10;
                        }
                    }
                    let r = libc::write(*fd, buf.as_ptr().cast(), buf.len());
                    res[i] = if r < 0 { neg_errno() } else { r as i64 };
                }
            }
        };
        let out = run_in_child(c, ops.len(), &mut body)?;
        Ok(out
            .into_iter()
            .zip(preps.iter())
            .map(|(v, (_, buf, _, full))| match child_result(v) {
                Ok(n) if *full == usize::MAX => Ok(n),
                Ok(n) if n == buf.len() => Ok(*full),
                Ok(n) => Err(format!(
                    "HARNESS child write returned {n} of {} bytes",
                    buf.len()
                )),
                Err(e) => Err(e),
            })
            .collect())
    }

    fn raw_ident(&mut self, s: Sock) -> Res<u64> {
        let n = &self.sock(s)?.n;
        n.parse()
            .map_err(|_| format!("HARNESS socket number {n:?}"))
    }

    fn raw_alive(&mut self, id: u64) -> Res<bool> {
        match std::fs::symlink_metadata(self.ctrl(&format!("sock/{id}"))) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("HARNESS stat of sock/{id}: {}", io_errno(&e))),
        }
    }

    fn raw_close_ref(&mut self, s: Sock) -> Res<()> {
        let n = self.sock(s)?.n.clone();
        let before = self.refs_of(&n)?;
        let u = self.socks[s].take().expect("checked by sock()");
        let k = 1 + usize::from(u.data.is_some()) + usize::from(u.msg.is_some());
        drop(u);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.refs_of(&n)? {
                None => return Ok(()),
                Some(r) if before.is_some_and(|b| r + k <= b) => return Ok(()),
                _ if Instant::now() > deadline => {
                    return Err(format!(
                        "HARNESS sock/{n}: refs= still {:?} 5 s after closing {k} handles \
                         (was {before:?})",
                        self.refs_of(&n)
                    ));
                }
                _ => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    fn raw_start(&mut self, op: &Blocking) -> Res<Job> {
        let call = self.spawn_call(op)?;
        self.jobs.push(Some(call));
        Ok(self.jobs.len() - 1)
    }

    fn raw_wait_blocked(&mut self, j: Job) -> Res<bool> {
        if !self.job(j)?.wait_asleep()? {
            return Ok(false);
        }
        // Asleep in FUSE only means the request is queued: wait until the daemon
        // has parked every call that has not ended (`parked=` of .udsfs/gc).
        let start = Instant::now();
        loop {
            let live = self.jobs.iter().flatten().filter(|b| !b.is_done()).count();
            if self.parked()? >= live || self.job(j)?.is_done() {
                return Ok(!self.job(j)?.is_done());
            }
            if start.elapsed() > super::blocker::LIMIT {
                return Err(format!(
                    "HARNESS {live} calls are asleep but the daemon has {} parked",
                    self.parked()?
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn raw_ended(&mut self, j: Job) -> Res<bool> {
        Ok(self.job(j)?.is_done())
    }

    fn raw_signal(&mut self, j: Job) -> Res<()> {
        self.job(j)?.signal()
    }

    fn raw_join(&mut self, j: Job) -> Res<Done> {
        let call = take_job(&mut self.jobs, j)?;
        match call.join()?? {
            UOut::Count(n) => Ok(Done::Count(n)),
            UOut::Data(d) => Ok(Done::Data(d)),
            UOut::Record(hdr, data, bufsize) => {
                self.adopt_record(&hdr, data, bufsize).map(Done::Msg)
            }
            UOut::Accepted(acc, m) => {
                let ctl = open_rw_nonblock(&self.ctrl(&format!("sock/{m}/ctl")))
                    .map_err(|e| format!("HARNESS opening the accepted socket's ctl: {e}"))?;
                drop(acc);
                Ok(Done::Sock(self.open_sock(m, ctl)))
            }
            UOut::Unit => Ok(Done::Unit),
        }
    }

    fn raw_gc(&mut self) -> Res<()> {
        // The collector runs by itself when the last handle of an in-flight socket
        // closes (a dead cycle is freed within 100 ms); wait until the
        // socket directories stop changing.
        let dir = self.ctrl("sock");
        super::kernel::gc_settle(|| {
            let mut v: Vec<String> = std::fs::read_dir(&dir)
                .map_err(|e| format!("HARNESS listing .udsfs/sock: {}", io_errno(&e)))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            Ok(v)
        })
    }
}

// ---- names / permissions ----

fn path_cstring(p: &std::path::Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path without NUL")
}

/// Raw sun_path bytes as an address (abstract when the first byte is NUL).
fn sun_to_addr(sun: &[u8]) -> Addr {
    match sun.split_first() {
        Some((0, rest)) => Addr::Abstract(rest.to_vec()),
        _ => Addr::Path(String::from_utf8_lossy(sun).into_owned()),
    }
}

// ---- credentials, rights and GC ----

/// Width of the zero-padded pid a child fills in for `OWN_PID`.
const PID_DIGITS: usize = 10;

fn parse_ucred(v: &str) -> Option<Ucred> {
    let mut it = v.split(':');
    let pid = it.next()?.parse().ok()?;
    let uid = it.next()?.parse().ok()?;
    let gid = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some(Ucred::new(pid, uid, gid))
}

impl Udsfs {
    /// The `msg` record for `m`, and where the pid digits are when its credentials
    /// carry `OWN_PID` (written as PID_DIGITS zeros, for a child to fill in).
    fn msg_record(&mut self, m: &SendMsg) -> Res<(Vec<u8>, Option<usize>)> {
        let mut rec = format!("len={}", m.data.len());
        if let Some(a) = &m.to {
            rec.push_str(&format!(" to={}", ctl_addr(a)?));
        }
        let mut off = None;
        if let Some(c) = &m.creds {
            rec.push_str(" creds=");
            if c.pid == OWN_PID {
                off = Some(rec.len());
                rec.push_str(&"0".repeat(PID_DIGITS));
            } else {
                rec.push_str(&c.pid.to_string());
            }
            rec.push_str(&format!(":{}:{}", c.uid, c.gid));
        }
        if !m.rights.is_empty() {
            let mut v = Vec::new();
            for r in &m.rights {
                v.push(self.sock(*r)?.n.clone());
            }
            rec.push_str(&format!(" rights={}", v.join(",")));
        }
        rec.push('\n');
        let mut buf = rec.into_bytes();
        buf.extend_from_slice(&m.data);
        Ok((buf, off))
    }

    /// What recvmsg returns for a record read from `msg`: every received socket
    /// is adopted (recvmsg installs the descriptors) and gets the next handle.
    fn adopt_record(&mut self, hdr: &str, mut data: Vec<u8>, bufsize: usize) -> Res<RecvMsg> {
        let mut from = Name::Unnamed;
        let mut creds = None;
        let mut ids: Vec<String> = Vec::new();
        for field in hdr.split(' ') {
            if let Some(v) = field.strip_prefix("from=") {
                from = parse_name(v);
            } else if let Some(v) = field.strip_prefix("creds=") {
                creds = Some(parse_ucred(v).ok_or_else(|| format!("HARNESS msg header {hdr:?}"))?);
            } else if let Some(v) = field.strip_prefix("rights=") {
                ids = v.split(',').map(str::to_string).collect();
            }
        }
        data.truncate(bufsize);
        let mut rights = Vec::new();
        for h in ids {
            let ctl = open_rw_nonblock(&self.ctrl(&format!("sock/{h}/ctl")))
                .map_err(|e| format!("HARNESS adopting received socket {h}: {e}"))?;
            rights.push(self.open_sock(h, ctl));
        }
        Ok(RecvMsg {
            data,
            from,
            creds,
            rights,
        })
    }

    /// One record from `msg`: its header line (without the newline) and payload.
    fn read_record(&mut self, s: Sock) -> Res<(String, Vec<u8>)> {
        read_record_from(self.msg(s)?)
    }
}

/// One record from a `msg` file: its header line (without the newline) and payload.
fn read_record_from(f: &mut File) -> Res<(String, Vec<u8>)> {
    let hdr = read_header(f)?;
    let len = hdr
        .split(' ')
        .find_map(|f| f.strip_prefix("len="))
        .and_then(|v| v.parse::<usize>().ok())
        .ok_or_else(|| format!("HARNESS msg header {hdr:?} has no len="))?;
    let mut data = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match f.read(&mut data[got..]) {
            Ok(0) => {
                return Err(format!(
                    "HARNESS msg payload ended after {got} of {len} bytes"
                ));
            }
            Ok(n) => got += n,
            Err(e) => {
                return Err(format!(
                    "HARNESS msg payload read failed with {} after {got} of {len} bytes",
                    io_errno(&e)
                ));
            }
        }
    }
    Ok((hdr, data))
}

impl Udsfs {
    /// `refs=` of `.udsfs/sock/N/status`; None once the socket is gone.
    fn refs_of(&self, n: &str) -> Res<Option<usize>> {
        match std::fs::read_to_string(self.ctrl(&format!("sock/{n}/status"))) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("HARNESS reading sock/{n}/status: {}", io_errno(&e))),
            Ok(t) => t
                .lines()
                .find_map(|l| l.strip_prefix("refs="))
                .and_then(|v| v.parse().ok())
                .map(Some)
                .ok_or_else(|| format!("HARNESS sock/{n}/status has no refs=")),
        }
    }
}

/// Reads a `msg` record's header line a byte at a time, so that nothing past
/// it is consumed; the newline is dropped.
fn read_header(f: &mut std::fs::File) -> Res<String> {
    let mut hdr = Vec::new();
    loop {
        let mut c = [0u8; 1];
        match f.read(&mut c) {
            Ok(1) if c[0] == b'\n' => break,
            Ok(1) => {
                hdr.push(c[0]);
                if hdr.len() > 8192 {
                    return Err("HARNESS msg header longer than 8192 bytes".to_string());
                }
            }
            Ok(_) => {
                return Err(format!(
                    "HARNESS msg read returned EOF after header bytes {:?}",
                    String::from_utf8_lossy(&hdr)
                ));
            }
            Err(e) if hdr.is_empty() => return Err(io_errno(&e)),
            Err(e) => {
                return Err(format!(
                    "HARNESS msg read failed with {} inside header {:?}",
                    io_errno(&e),
                    String::from_utf8_lossy(&hdr)
                ));
            }
        }
    }
    Ok(String::from_utf8_lossy(&hdr).into_owned())
}

// ---- blocking calls (blocking.rs) ----

/// What a blocking call through the mount returned.
enum UOut {
    Count(usize),
    Data(Vec<u8>),
    /// A `msg` record: header, payload, and the buffer size recvmsg had.
    Record(String, Vec<u8>, usize),
    /// The open `accept` file (the new socket's handle until its ctl is open)
    /// and the new socket's number.
    Accepted(File, String),
    Unit,
}

/// The new socket's number "M\n" that an open `accept` file reads.
fn read_accepted(acc: &mut File) -> Res<String> {
    let mut buf = [0u8; 64];
    let k = acc
        .read(&mut buf)
        .map_err(|e| format!("HARNESS reading accept: {}", io_errno(&e)))?;
    let text = String::from_utf8_lossy(&buf[..k]).into_owned();
    let m = text.trim_end_matches('\n');
    if m.is_empty() || !m.bytes().all(|c| c.is_ascii_digit()) || !text.ends_with('\n') {
        return Err(format!(
            "HARNESS accept read gave {text:?}, expected \"M\\n\""
        ));
    }
    Ok(m.to_string())
}

/// A file of the mount opened for reading and writing, without O_NONBLOCK.
fn open_rw_blocking(p: &PathBuf) -> Res<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| io_errno(&e))
}

/// What sendmsg returns for a write of the `msg` record `rec`: the payload bytes
/// the write took (a stream may take part of a record: the header and some of
/// the payload).
fn sendmsg_result(r: Res<usize>, rec: &[u8]) -> Res<usize> {
    let hdr = rec
        .iter()
        .position(|&c| c == b'\n')
        .map_or(rec.len(), |i| i + 1);
    match r? {
        n if n >= hdr && n <= rec.len() => Ok(n - hdr),
        n => Err(format!(
            "HARNESS msg write returned {n} for a {}-byte record with a {hdr}-byte header",
            rec.len()
        )),
    }
}

impl Udsfs {
    /// Requests the daemon has parked (`parked=` of `.udsfs/gc`).
    fn parked(&self) -> Res<usize> {
        super::kernel::parked(self.mount.path())
    }

    fn job(&mut self, j: Job) -> Res<&mut Blocker<Res<UOut>>> {
        match self.jobs.get_mut(j) {
            Some(Some(b)) => Ok(b),
            _ => Err("HARNESS no such blocking call".to_string()),
        }
    }

    /// Opens what the call needs here (so that the thread only makes the call
    /// that blocks) and starts it.
    fn spawn_call(&mut self, op: &Blocking) -> Res<Blocker<Res<UOut>>> {
        let n = self.sock(op.sock())?.n.clone();
        let file = |u: &Udsfs, name: &str| open_rw_blocking(&u.ctrl(&format!("sock/{n}/{name}")));
        match op {
            Blocking::Recv(_, size) => {
                let (mut f, size) = (file(self, "data")?, *size);
                Blocker::spawn(libc::SYS_read, move || {
                    let mut v = vec![0u8; size];
                    let k = f.read(&mut v).map_err(|e| io_errno(&e))?;
                    v.truncate(k);
                    Ok(UOut::Data(v))
                })
            }
            Blocking::RecvMsg(_, size) => {
                let (mut f, size) = (file(self, "msg")?, *size);
                Blocker::spawn(libc::SYS_read, move || {
                    let (hdr, data) = read_record_from(&mut f)?;
                    Ok(UOut::Record(hdr, data, size))
                })
            }
            Blocking::Send(_, d) => {
                let (mut f, d) = (file(self, "data")?, d.clone());
                Blocker::spawn(libc::SYS_write, move || {
                    f.write(&d).map(UOut::Count).map_err(|e| io_errno(&e))
                })
            }
            Blocking::SendMsg(_, m) => {
                let (rec, _) = self.msg_record(m)?;
                let mut f = file(self, "msg")?;
                Blocker::spawn(libc::SYS_write, move || {
                    let r = f.write(&rec).map_err(|e| io_errno(&e));
                    sendmsg_result(r, &rec).map(UOut::Count)
                })
            }
            Blocking::Accept(_) => {
                let path = path_cstring(&self.ctrl(&format!("sock/{n}/accept")));
                Blocker::spawn(libc::SYS_openat, move || {
                    // open(2) itself: std's open retries on EINTR, and the
                    // EINTR is what a signal scenario looks for.
                    // SAFETY: a valid C string; the new descriptor is owned below.
                    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                    if fd < 0 {
                        return Err(last_errno());
                    }
                    // SAFETY: a fresh descriptor we own.
                    let mut acc = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                    let m = read_accepted(&mut acc)?;
                    Ok(UOut::Accepted(acc, m))
                })
            }
            Blocking::Connect(_, a) => {
                let line = format!("connect {}\n", ctl_addr(a)?);
                let mut ctl = file(self, "ctl")?;
                Blocker::spawn(libc::SYS_write, move || {
                    write_once(&mut ctl, line.as_bytes(), "ctl").map(|_| UOut::Unit)
                })
            }
        }
    }
}

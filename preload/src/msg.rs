//! send and receive on udsfs sockets. A plain send, recv or recvfrom
//! without a name is one read() or write() of the data file, as the file
//! dialect costs; a call with an address, passed sockets, credentials,
//! per-call flags, or that reports msg_flags (recvmsg) is one UDSFS_IOC_MSG
//! ioctl; a message too large for the ioctl goes through the `msg` file.
//! A blocking call blocks in the daemon (MSGF_WAIT), which times it and
//! answers signals as for reads and writes: nothing here polls or retries.
//! Nothing here allocates or locks on the paths a signal handler takes (a
//! send or receive of a small message on a socketpair): buffers are on the
//! stack and what is found once is found in the library's constructor.

use libc::{c_int, cmsghdr, iovec, msghdr, ssize_t};

use crate::abi::*;
use crate::mount::{self, Mount};
use crate::sock::{self, Res};
use crate::{errno, log, set_errno};
use crate::{fdpass, pidfd};

/// What a send carries besides its payload.
#[derive(Default)]
pub struct Meta {
    pub to: Option<Vec<u8>>,
    pub creds: Option<[u32; 3]>,
    pub rights: Vec<u64>,
    /// Open while the files among `rights` wait in the daemon for this send.
    pub channel: Option<crate::fdpass::Channel>,
}

impl Meta {
    fn is_empty(&self) -> bool {
        self.to.is_none() && self.creds.is_none() && self.rights.is_empty()
    }
}

const PLAIN_SEND: c_int = libc::MSG_EOR | libc::MSG_MORE;

/// A caller's iovecs, read or written at a running offset without a copy
/// of their own (a send or receive must not allocate: signal handlers call
/// them, see README "Messages").
#[derive(Clone, Copy)]
pub struct Iovs {
    iov: *const iovec,
    n: usize,
}

impl Iovs {
    pub fn new(iov: *const iovec, n: usize) -> Iovs {
        Iovs {
            iov: if n == 0 { std::ptr::null() } else { iov },
            n,
        }
    }

    /// A msghdr's iovecs, refused as Linux refuses them: more than
    /// UIO_MAXIOV is EMSGSIZE, none where some are counted is EFAULT.
    pub fn of_msg(iov: *const iovec, n: usize) -> Res<Iovs> {
        match n {
            n if n > 1024 => Err(libc::EMSGSIZE),
            n if n > 0 && iov.is_null() => Err(libc::EFAULT),
            n => Ok(Iovs::new(iov, n)),
        }
    }

    fn each(&self) -> impl Iterator<Item = (*mut u8, usize)> + '_ {
        // SAFETY: the caller's iovecs describe memory of theirs.
        (0..self.n).map(|i| unsafe {
            let v = &*self.iov.add(i);
            (v.iov_base as *mut u8, v.iov_len)
        })
    }

    pub fn len(&self) -> usize {
        self.each().map(|(_, l)| l).sum()
    }

    /// Copies the bytes at `off` into `dst`; returns how many.
    fn read_at(&self, mut off: usize, dst: &mut [u8]) -> usize {
        let mut done = 0;
        for (base, len) in self.each() {
            if done == dst.len() {
                break;
            }
            if off >= len {
                off -= len;
                continue;
            }
            let k = (len - off).min(dst.len() - done);
            // SAFETY: inside the iovec and inside dst.
            unsafe { std::ptr::copy_nonoverlapping(base.add(off), dst.as_mut_ptr().add(done), k) };
            done += k;
            off = 0;
        }
        done
    }

    /// Copies `src` into the iovecs at `off`; returns how many fitted.
    fn write_at(&self, mut off: usize, src: &[u8]) -> usize {
        let mut done = 0;
        for (base, len) in self.each() {
            if done == src.len() {
                break;
            }
            if off >= len {
                off -= len;
                continue;
            }
            let k = (len - off).min(src.len() - done);
            // SAFETY: inside the iovec and inside src.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(done), base.add(off), k) };
            done += k;
            off = 0;
        }
        done
    }

    fn gathered(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        self.read_at(0, &mut out);
        out
    }
}

/// One UDSFS_IOC_MSG buffer, on the stack.
#[repr(C, align(8))]
struct Buf([u8; MSG_BUF]);

impl Buf {
    fn new() -> Buf {
        Buf([0; MSG_BUF])
    }
}

fn head() -> MsgHead {
    // SAFETY: MsgHead is plain integers.
    unsafe { std::mem::zeroed() }
}

fn msg_ioctl(fd: c_int, buf: &mut Buf) -> Res<MsgHead> {
    let buf = &mut buf.0;
    // SAFETY: the kernel copies MSG_BUF bytes in and out of buf.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            fd,
            UDSFS_IOC_MSG as libc::c_ulong,
            buf.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: buf starts with a MsgHead.
    Ok(unsafe { std::ptr::read_unaligned(buf.as_ptr().cast::<MsgHead>()) })
}

fn put_head(buf: &mut Buf, h: &MsgHead) {
    // SAFETY: buf has room for a MsgHead.
    unsafe { std::ptr::write_unaligned(buf.0.as_mut_ptr().cast::<MsgHead>(), *h) };
}

const HS: usize = std::mem::size_of::<MsgHead>();

/// sendmsg() on a udsfs socket: the payload is the caller's `data`. A
/// blocking call waits in the daemon (MSGF_WAIT), under its SO_SNDTIMEO.
pub fn send(m: &Mount, fd: c_int, data: Iovs, meta: Meta, flags: c_int) -> Res<usize> {
    let len = data.len();
    // One write of the data file. Not writev of several buffers: FUSE cuts
    // a write into requests by pages, and each request is a message.
    if meta.is_empty() && flags & !PLAIN_SEND == 0 && len > 0 && (data.n == 1 || len > MSG_ROOM) {
        let one = if data.n == 1 {
            None
        } else {
            Some(data.gathered())
        };
        let (p, n) = match &one {
            Some(v) => (v.as_ptr(), v.len()),
            None => data
                .each()
                .next()
                .map(|(p, n)| (p as *const u8, n))
                .expect("one"),
        };
        // SAFETY: writes the caller's bytes; the daemon raises SIGPIPE.
        let n = unsafe { libc::write(fd, p.cast(), n) };
        return if n < 0 { Err(errno()) } else { Ok(n as usize) };
    }
    let oob = flags & libc::MSG_OOB != 0;
    if oob && !sock::is_stream(fd) {
        return Err(libc::EOPNOTSUPP);
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || sock::is_nonblocking(fd);
    if len > MSG_ROOM && !sock::is_stream(fd) {
        return send_record(m, fd, &data.gathered(), &meta, nonblock);
    }
    let mut buf = Buf::new();
    let mut sent = 0;
    let mut meta = Some(meta);
    // Each piece waits up to SO_SNDTIMEO afresh, as unix_stream_sendmsg
    // waits per skb (sock_alloc_send_pskb); a receive is timed once (CONT).
    loop {
        let chunk = (len - sent).min(MSG_ROOM);
        let mut h = head();
        h.op = MSGOP_SEND;
        h.len = chunk as u32;
        if !nonblock {
            h.flags |= MSGF_WAIT;
        }
        if oob && sent + chunk == len {
            // The last byte of the send is the OOB byte.
            h.flags |= MSGF_OOB;
        }
        if let Some(mt) = &meta {
            if let Some(to) = &mt.to {
                let n = to.len().min(ADDR_MAX);
                h.addr[..n].copy_from_slice(&to[..n]);
                h.addr_len = n as u32;
            }
            if let Some(c) = mt.creds {
                h.has_creds = 1;
                h.creds = c;
            }
            let n = mt.rights.len().min(MAX_RIGHTS);
            h.rights[..n].copy_from_slice(&mt.rights[..n]);
            h.nrights = n as u32;
        }
        put_head(&mut buf, &h);
        data.read_at(sent, &mut buf.0[HS..HS + chunk]);
        match msg_ioctl(fd, &mut buf) {
            Ok(r) => {
                // Addresses and sockets go with the first piece only.
                meta = None;
                sent += r.len as usize;
                // A short piece: the daemon stopped (non-blocking, the
                // timeout, a signal, the peer gone) and says how far it got.
                if sent >= len || (r.len as usize) < chunk {
                    return Ok(sent);
                }
            }
            // Part went out: the count, as Linux (no SIGPIPE then).
            Err(_) if sent > 0 => return Ok(sent),
            Err(e) => {
                if e == libc::EPIPE && flags & libc::MSG_NOSIGNAL == 0 && sock::is_stream(fd) {
                    sock::sigpipe();
                }
                return Err(e);
            }
        }
    }
}

/// A message too large for one ioctl: one record on the `msg` file.
fn send_record(m: &Mount, fd: c_int, data: &[u8], meta: &Meta, nonblock: bool) -> Res<usize> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let mut rec = format!("len={}", data.len());
    if let Some(to) = &meta.to {
        rec.push_str(" to=");
        rec.push_str(&record_addr(to));
    }
    if let Some([p, u, g]) = meta.creds {
        rec.push_str(&format!(" creds={}:{u}:{g}", p as i32));
    }
    if !meta.rights.is_empty() {
        let ids: Vec<String> = meta
            .rights
            .iter()
            .map(|&r| {
                if r & FILE_TAG != 0 {
                    format!("file:{}", r & !FILE_TAG)
                } else {
                    r.to_string()
                }
            })
            .collect();
        rec.push_str(&format!(" rights={}", ids.join(",")));
    }
    rec.push('\n');
    let header = rec.len();
    let mut bytes = rec.into_bytes();
    bytes.extend_from_slice(data);
    let n = msg_file(m, id, nonblock, MsgIo::Write(&bytes))?;
    // The file reports the bytes of the record it queued: a datagram goes
    // whole or not at all, so anything short of it was not sent.
    if n < bytes.len() {
        log::say(&format!(
            "a record of {} bytes was taken {n} bytes short",
            bytes.len()
        ));
        return Err(libc::EAGAIN);
    }
    Ok(n - header)
}

enum MsgIo<'a> {
    Write(&'a [u8]),
    Read(&'a mut [u8]),
}

/// One write or read of socket `id`'s `msg` file, opened for just this call.
fn msg_file(m: &Mount, id: u64, nonblock: bool, io: MsgIo) -> Res<usize> {
    let path = m.sock_file(id, "msg");
    let mode = match io {
        MsgIo::Write(_) => libc::O_WRONLY,
        MsgIo::Read(_) => libc::O_RDONLY,
    };
    let fl = mode | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
    // SAFETY: path is NUL-terminated; the I/O is on the given buffer.
    unsafe {
        let h = libc::open(path.as_ptr(), fl);
        if h < 0 {
            return Err(errno());
        }
        let n = match io {
            MsgIo::Write(b) => libc::write(h, b.as_ptr().cast(), b.len()),
            MsgIo::Read(b) => libc::read(h, b.as_mut_ptr().cast(), b.len()),
        };
        let e = errno();
        libc::close(h);
        if n < 0 {
            return Err(e);
        }
        Ok(n as usize)
    }
}

/// An address as `msg` records write it (see src/engine/addr.rs escape).
fn record_addr(wire: &[u8]) -> String {
    let (mut s, bytes) = match wire.first() {
        Some(0) => ("@".to_string(), &wire[1..]),
        _ => (String::new(), wire),
    };
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x21..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

fn unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' && text.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if text[i] == b'\\' && text.get(i + 1) == Some(&b'x') && i + 3 < text.len() + 1 {
            let hex = std::str::from_utf8(&text[i + 2..(i + 4).min(text.len())]).unwrap_or("");
            out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// One received message, however it came; its payload went straight into
/// the caller's buffers.
struct Got {
    /// Payload bytes placed.
    len: usize,
    full_len: usize,
    from: Vec<u8>,
    /// `ADDR_AS_GIVEN`: `from` is a sun_path as its program gave it.
    from_flags: u32,
    creds: Option<[u32; 3]>,
    /// The sender's pid, for SCM_PIDFD.
    pidfd: Option<i32>,
    /// A pidfd of the sender the daemon made when it sent, to claim.
    pidfd_tag: Option<u64>,
    rights: Vec<u64>,
    /// The byte is the OOB byte (MSG_OOB in msg_flags).
    oob: bool,
    /// The daemon dropped passed sockets (MSG_CTRUNC).
    ctrunc: bool,
    /// What the daemon left of SO_RCVTIMEO (see MsgHead::timeo_left).
    timeo_left: u64,
}

/// The `msg` file's record, for a message larger than one ioctl; its
/// payload goes to `dst` at `at`.
fn recv_record(
    m: &Mount,
    fd: c_int,
    want: usize,
    nonblock: bool,
    dst: Iovs,
    at: usize,
) -> Res<Got> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let mut buf = vec![0u8; want + 8192];
    let n = msg_file(m, id, nonblock, MsgIo::Read(&mut buf))?;
    buf.truncate(n);
    let nl = buf.iter().position(|&b| b == b'\n').ok_or(libc::EIO)?;
    let mut got = Got {
        len: 0,
        full_len: 0,
        from: Vec::new(),
        // Records name the sender in the mount's terms.
        from_flags: 0,
        creds: None,
        pidfd: None,
        pidfd_tag: None,
        rights: Vec::new(),
        oob: false,
        ctrunc: false,
        timeo_left: TIMEO_NONE,
    };
    for field in buf[..nl].split(|&b| b == b' ') {
        let text = String::from_utf8_lossy(field);
        let Some((k, v)) = text.split_once('=') else {
            continue;
        };
        match k {
            "len" => got.full_len = v.parse().map_err(|_| libc::EIO)?,
            "from" => {
                let raw = field.splitn(2, |&b| b == b'=').nth(1).unwrap_or(&[]);
                got.from = match raw.strip_prefix(b"@") {
                    Some(name) => std::iter::once(0).chain(unescape(name)).collect(),
                    None => unescape(raw),
                };
            }
            "creds" => {
                let p: Vec<i64> = v.split(':').filter_map(|x| x.parse().ok()).collect();
                if let [pid, uid, gid] = p[..] {
                    got.creds = Some([pid as u32, uid as u32, gid as u32]);
                }
            }
            "rights" => got.rights = v.split(',').filter_map(passed_item).collect(),
            "pidfd" => got.pidfd = v.parse().ok(),
            "flags" => got.ctrunc = v.split(',').any(|f| f == "ctrunc"),
            _ => {}
        }
    }
    let payload = &buf[nl + 1..];
    got.len = dst.write_at(at, &payload[..payload.len().min(want).min(got.full_len)]);
    Ok(got)
}

/// One receive ioctl into `dst` at `at`; `control` is the room of the
/// caller's control buffer, so that the daemon closes the passed sockets
/// that do not fit. `wait`: the daemon parks it until it can be answered
/// (under SO_RCVTIMEO); the library itself never waits.
#[allow(clippy::too_many_arguments)]
fn recv_once(
    m: &Mount,
    fd: c_int,
    dst: Iovs,
    at: usize,
    want: usize,
    flags: c_int,
    wait: bool,
    control: usize,
    skip: usize,
    cont: Option<u64>,
) -> Res<Got> {
    let mut buf = Buf::new();
    let mut h = head();
    if let Some(l) = cont {
        h.flags |= MSGF_CONT;
        h.timeo_left = l;
    }
    h.op = MSGOP_RECV;
    h.len = want.min(u32::MAX as usize) as u32;
    if flags & libc::MSG_PEEK != 0 {
        h.flags |= MSGF_PEEK;
        h.skip = skip.min(u32::MAX as usize) as u32;
    }
    if flags & libc::MSG_OOB != 0 {
        h.flags |= MSGF_OOB;
    }
    if flags & libc::MSG_WAITALL != 0 {
        h.flags |= MSGF_WAITALL;
    }
    if wait {
        h.flags |= MSGF_WAIT;
    }
    h.flags |= MSGF_ROOM;
    h.nrights = control.min(u32::MAX as usize) as u32;
    put_head(&mut buf, &h);
    let r = msg_ioctl(fd, &mut buf)?;
    if r.status == STATUS_TOO_BIG {
        return recv_record(m, fd, want, !wait, dst, at);
    }
    let n = (r.len as usize).min(MSG_ROOM);
    let rights = &r.rights[..(r.nrights as usize).min(MAX_RIGHTS)];
    Ok(Got {
        len: dst.write_at(at, &buf.0[HS..HS + n]),
        full_len: r.full_len as usize,
        from: r.addr[..(r.addr_len as usize).min(ADDR_MAX)].to_vec(),
        from_flags: r.addr_flags,
        creds: (r.has_creds & HAS_CREDS != 0).then_some(r.creds),
        pidfd: (r.has_creds & HAS_PIDFD != 0).then_some(r.creds[0] as i32),
        pidfd_tag: (r.has_creds & HAS_PIDFD_FILE != 0)
            .then(|| r.rights.get(r.nrights as usize).copied())
            .flatten(),
        rights: rights.to_vec(),
        oob: r.flags & MSGF_OOB != 0,
        ctrunc: r.flags & MSGF_CTRUNC != 0,
        timeo_left: r.timeo_left,
    })
}

const CMSG_HDR: usize = std::mem::size_of::<cmsghdr>();

fn cmsg_align(n: usize) -> usize {
    n.next_multiple_of(std::mem::size_of::<usize>())
}

/// Writes the control messages Linux would (credentials, then sockets) and
/// returns the bytes used and whether anything was cut (MSG_CTRUNC).
fn put_control(m: &Mount, msg: &mut msghdr, got: &Got, cloexec: bool) -> (usize, bool) {
    let room = if msg.msg_control.is_null() {
        0
    } else {
        msg.msg_controllen
    };
    let base = msg.msg_control as *mut u8;
    let mut used = 0;
    let mut cut = got.ctrunc;
    let put = |level: c_int, ty: c_int, payload: &[u8], used: &mut usize| {
        let len = CMSG_HDR + payload.len();
        // SAFETY: writes inside the caller's control buffer, within `room`.
        unsafe {
            let h = base.add(*used) as *mut cmsghdr;
            (*h).cmsg_len = len as _;
            (*h).cmsg_level = level;
            (*h).cmsg_type = ty;
            std::ptr::copy_nonoverlapping(
                payload.as_ptr(),
                base.add(*used + CMSG_HDR),
                payload.len(),
            );
        }
        *used += cmsg_align(len).min(room - *used);
    };
    if let Some(c) = got.creds {
        let b: Vec<u8> = c.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let fits = (room - used).saturating_sub(CMSG_HDR);
        if fits < b.len() {
            cut = true;
        }
        // put_cmsg writes what fits of a message whose header fits, cut short.
        if room - used >= CMSG_HDR {
            put(
                libc::SOL_SOCKET,
                libc::SCM_CREDENTIALS,
                &b[..fits.min(b.len())],
                &mut used,
            );
        }
    }
    // Received files and the sender's pidfd come back in one claim.
    let mut tags: Vec<u64> = got
        .rights
        .iter()
        .copied()
        .filter(|i| i & FILE_TAG != 0)
        .collect();
    tags.extend(got.pidfd_tag);
    let mut files = claim_files(m, &tags, cloexec);
    // The files of `rights` come first in `files`, in order; the pidfd last.
    let mut next_file = 0;
    if !got.rights.is_empty() {
        let fit = (room - used).saturating_sub(CMSG_HDR) / std::mem::size_of::<c_int>();
        let mut fds = Vec::new();
        for (i, &id) in got.rights.iter().enumerate() {
            let fd = if id & FILE_TAG != 0 {
                next_file += 1;
                files[next_file - 1].take().ok_or(libc::EBADF)
            } else if i < fit {
                sock::open_sock(m, id, false, cloexec)
            } else {
                continue;
            };
            match fd {
                // Past the room of the control buffer: closed, as Linux does.
                Ok(fd) if i >= fit => {
                    // SAFETY: our own new descriptor.
                    unsafe { libc::close(fd) };
                }
                Ok(fd) => fds.push(fd),
                // Past RLIMIT_NOFILE Linux stops installing, silently: MSG_CTRUNC.
                Err(e) => {
                    if e != libc::EMFILE {
                        log::say(&format!(
                            "received {} could not be had: errno {e}",
                            passed_name(id)
                        ));
                    }
                    cut = true;
                    break;
                }
            }
        }
        if fit < got.rights.len() {
            cut = true;
        }
        // Linux closes the passed files it did not install (scm_destroy).
        // The daemon did so for those past the room (MSGF_ROOM); a message
        // read from the `msg` file brings all: opening an entry adopts it,
        // closing it lets the socket go. Past RLIMIT_NOFILE they cannot be
        // opened and wait for the receiver's close. Files claimed for them
        // close here too.
        let nfiles = got.rights.iter().filter(|&&i| i & FILE_TAG != 0).count();
        for f in files[next_file..nfiles].iter_mut().filter_map(Option::take) {
            // SAFETY: claimed here, never handed out.
            unsafe { libc::close(f) };
        }
        next_file = nfiles;
        let installed = fds.len();
        for &id in got.rights[installed..]
            .iter()
            .filter(|&&i| i & FILE_TAG == 0)
        {
            if let Ok(fd) = sock::open_sock(m, id, true, true) {
                // SAFETY: fd was just opened here.
                unsafe { libc::close(fd) };
            }
        }
        if !fds.is_empty() {
            let b: Vec<u8> = fds.iter().flat_map(|x| x.to_ne_bytes()).collect();
            put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &b, &mut used);
        }
    }
    // SCM_PIDFD comes last, as scm_recv_unix puts it; a message sent with
    // no credentials (before anyone asked for them) has none.
    let held = got
        .pidfd_tag
        .and_then(|_| files.get_mut(next_file).and_then(Option::take));
    if let Some(pid) = got.pidfd.filter(|&p| p > 0) {
        if room - used >= CMSG_HDR + 4 {
            // The daemon's pidfd names the sender even once it has exited;
            // without one, a pidfd of the pid it had.
            let fd = match held {
                Some(fd) => {
                    // SAFETY: our own new descriptor; pidfds are close-on-exec.
                    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
                    Ok(fd)
                }
                None => pidfd::open(pid),
            };
            match fd {
                Ok(fd) => put(
                    libc::SOL_SOCKET,
                    pidfd::SCM_PIDFD,
                    &fd.to_ne_bytes(),
                    &mut used,
                ),
                Err(_) => cut = true,
            }
        } else {
            if let Some(fd) = held {
                // SAFETY: our own descriptor, not handed out.
                unsafe { libc::close(fd) };
            }
            cut = true;
        }
    } else if let Some(fd) = held {
        // SAFETY: as above.
        unsafe { libc::close(fd) };
    }
    (used, cut)
}

/// Bit 63 marks a file the daemon holds (src/engine/held.rs) among socket numbers.
const FILE_TAG: u64 = 1 << 63;

/// One item of a `msg` record's `rights=`: a socket number, or `file:T`.
fn passed_item(v: &str) -> Option<u64> {
    match v.strip_prefix("file:") {
        Some(t) => t.parse::<u64>().ok().map(|t| t | FILE_TAG),
        None => v.parse().ok(),
    }
}

fn passed_name(id: u64) -> String {
    if id & FILE_TAG != 0 {
        "file".to_string()
    } else {
        format!("socket {id}")
    }
}

/// Received files (by tag), claimed from the daemon in one round trip;
/// None for each one that could not be had.
fn claim_files(m: &Mount, tags: &[u64], cloexec: bool) -> Vec<Option<c_int>> {
    if tags.is_empty() {
        return Vec::new();
    }
    let got = fdpass::connect(m).and_then(|ch| ch.claim(tags, cloexec));
    match got {
        Ok(fds) => {
            let mut out: Vec<Option<c_int>> = fds.into_iter().map(Some).collect();
            out.resize(tags.len(), None);
            out
        }
        Err(e) => {
            log::say(&format!(
                "{} received files could not be claimed from the daemon: errno {e}",
                tags.len()
            ));
            vec![None; tags.len()]
        }
    }
}

/// recvmsg() on a udsfs socket. `report`: the caller reads msg_flags
/// (recvmsg, recvmmsg), so even a plain receive goes through the ioctl,
/// which tells MSG_TRUNC and MSG_CTRUNC; recv and recvfrom read the file.
pub fn recv(m: &Mount, fd: c_int, msg: &mut msghdr, flags: c_int, report: bool) -> Res<usize> {
    let dst = Iovs::of_msg(msg.msg_iov, msg.msg_iovlen)?;
    let want = dst.len();
    let plain = !report
        && msg.msg_name.is_null()
        && (msg.msg_control.is_null() || msg.msg_controllen == 0)
        && flags & !(libc::MSG_CMSG_CLOEXEC | libc::MSG_NOSIGNAL) == 0
        && want > 0;
    // Linux reports MSG_CMSG_CLOEXEC back in msg_flags (____sys_recvmsg).
    let echoed = flags & libc::MSG_CMSG_CLOEXEC;
    if plain {
        msg.msg_flags = echoed;
        // SAFETY: reads into the caller's iovecs.
        let r = unsafe { libc::readv(fd, dst.iov, dst.n.min(c_int::MAX as usize) as c_int) };
        return if r < 0 { Err(errno()) } else { Ok(r as usize) };
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || sock::is_nonblocking(fd);
    let control = if msg.msg_control.is_null() {
        0
    } else {
        msg.msg_controllen
    };
    let mut got = recv_once(m, fd, dst, 0, want, flags, !nonblock, control, 0, None)?;
    let peek = flags & libc::MSG_PEEK != 0;
    let mut stream = None;
    // More than one ioctl holds: a peek goes on in pieces (`skip`); a
    // stream receive takes what else is queued (MSG_WAITALL: waits for it).
    while want > got.len && got.len >= MSG_ROOM && got.len % MSG_ROOM == 0 {
        let is_stream = *stream.get_or_insert_with(|| sock::is_stream(fd));
        // A datagram: only a peek goes on, while the message has more.
        let more_of_datagram = peek && got.len < got.full_len;
        if !is_stream && !more_of_datagram {
            break;
        }
        let waitall = is_stream && !peek && flags & libc::MSG_WAITALL != 0;
        let left = want - got.len;
        let skip = if peek { got.len } else { 0 };
        let wait = waitall && !nonblock;
        let cont = wait.then_some(got.timeo_left);
        let more = recv_once(m, fd, dst, got.len, left, flags, wait, control, skip, cont);
        match more {
            Ok(g) if g.len == 0 => break,
            Ok(g) => {
                got.len += g.len;
                got.rights.extend_from_slice(&g.rights);
                got.ctrunc |= g.ctrunc;
                got.timeo_left = g.timeo_left;
            }
            Err(_) => break,
        }
    }
    let mut out_flags = if got.oob { libc::MSG_OOB } else { 0 };
    if got.full_len > got.len && !(flags & libc::MSG_WAITALL != 0 && stream == Some(true)) {
        out_flags |= libc::MSG_TRUNC;
    }
    if !msg.msg_name.is_null() {
        let mut len = msg.msg_namelen;
        if got.from.is_empty() {
            len = 0;
        } else {
            // SAFETY: msg_name has msg_namelen bytes.
            unsafe { sock::put_addr(m, &got.from, got.from_flags, msg.msg_name.cast(), &mut len) };
        }
        msg.msg_namelen = len;
    }
    let (used, cut) = put_control(m, msg, &got, flags & libc::MSG_CMSG_CLOEXEC != 0);
    msg.msg_controllen = used;
    if cut {
        out_flags |= libc::MSG_CTRUNC;
    }
    msg.msg_flags = out_flags | echoed;
    if flags & libc::MSG_TRUNC != 0 && out_flags & libc::MSG_TRUNC != 0 {
        return Ok(got.full_len);
    }
    Ok(got.len)
}

/// The control messages of a sendmsg: (level, type, payload) each.
fn cmsgs(msg: &msghdr) -> Res<Vec<(c_int, c_int, &[u8])>> {
    let mut out = Vec::new();
    if msg.msg_control.is_null() || msg.msg_controllen == 0 {
        return Ok(out);
    }
    let base = msg.msg_control as *const u8;
    let end = msg.msg_controllen;
    let mut off = 0;
    while off + CMSG_HDR <= end {
        // SAFETY: inside the caller's control buffer.
        let h = unsafe { &*(base.add(off) as *const cmsghdr) };
        let len = h.cmsg_len;
        if len < CMSG_HDR || off + len > end {
            return Err(libc::EINVAL);
        }
        // SAFETY: the payload lies inside the buffer (checked above).
        let payload =
            unsafe { std::slice::from_raw_parts(base.add(off + CMSG_HDR), len - CMSG_HDR) };
        out.push((h.cmsg_level, h.cmsg_type, payload));
        off += cmsg_align(len);
    }
    Ok(out)
}

fn fds(payload: &[u8]) -> impl Iterator<Item = c_int> + '_ {
    payload
        .chunks_exact(4)
        .map(|c| c_int::from_ne_bytes([c[0], c[1], c[2], c[3]]))
}

/// What a sendmsg's control messages ask: credentials, and files to pass.
/// udsfs sockets of this mount go by number; any other file (a regular
/// file, pipe, eventfd, kernel socket, pidfd) goes to the daemon over its
/// fd channel first and by tag.
pub fn parse_control(m: &Mount, msg: &msghdr, meta: &mut Meta) -> Res<()> {
    let mut foreign = Vec::new();
    for (level, ty, payload) in cmsgs(msg)? {
        match (level, ty) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                for pfd in fds(payload) {
                    // SAFETY: F_GETFD only asks.
                    if unsafe { libc::fcntl(pfd, libc::F_GETFD) } < 0 {
                        return Err(libc::EBADF);
                    }
                    if mount::udsfs_fd(pfd) {
                        meta.rights.push(mount::sock_id(pfd).ok_or(libc::EBADF)?);
                    } else {
                        foreign.push((meta.rights.len(), pfd));
                        meta.rights.push(0);
                    }
                }
                if meta.rights.len() > MAX_RIGHTS {
                    return Err(libc::EINVAL);
                }
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if payload.len() >= 12 => {
                let w: Vec<u32> = fds(payload).take(3).map(|x| x as u32).collect();
                meta.creds = Some([w[0], w[1], w[2]]);
            }
            _ => return Err(libc::EINVAL),
        }
    }
    if !foreign.is_empty() {
        let ch = fdpass::connect(m)?;
        let raw: Vec<c_int> = foreign.iter().map(|(_, fd)| *fd).collect();
        let tags = ch.deposit(&raw).inspect_err(|e| {
            log::say(&format!(
                "sendmsg: the daemon refused files {raw:?}: errno {e}"
            ))
        })?;
        for ((slot, _), tag) in foreign.iter().zip(tags) {
            meta.rights[*slot] = tag;
        }
        meta.channel = Some(ch);
    }
    Ok(())
}

/// Does a kernel sendmsg try to pass a udsfs socket? It cannot carry it.
pub fn passes_udsfs(msg: &msghdr) -> bool {
    cmsgs(msg)
        .unwrap_or_default()
        .iter()
        .any(|(level, ty, payload)| {
            *level == libc::SOL_SOCKET
                && *ty == libc::SCM_RIGHTS
                && fds(payload).any(mount::udsfs_fd)
        })
}

pub fn ret(r: Res<usize>) -> ssize_t {
    match r {
        Ok(n) => {
            crate::restore_errno();
            n as ssize_t
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

//! send and receive on udsfs sockets. A plain call is one read() or write()
//! of the data file, as the file dialect costs; a call with an address,
//! passed sockets, credentials or per-call flags is one UDSFS_IOC_MSG
//! ioctl; a message too large for the ioctl goes through the `msg` file.

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

fn gather(iov: *const iovec, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        // SAFETY: the caller's iovecs describe readable memory.
        unsafe {
            let v = &*iov.add(i);
            if !v.iov_base.is_null() && v.iov_len > 0 {
                out.extend_from_slice(std::slice::from_raw_parts(
                    v.iov_base as *const u8,
                    v.iov_len,
                ));
            }
        }
    }
    out
}

fn iov_len(iov: *const iovec, n: usize) -> usize {
    // SAFETY: the caller's iovecs are readable.
    (0..n).map(|i| unsafe { (*iov.add(i)).iov_len }).sum()
}

fn scatter(data: &[u8], iov: *const iovec, n: usize) {
    let mut off = 0;
    for i in 0..n {
        if off >= data.len() {
            break;
        }
        // SAFETY: the caller's iovecs describe writable memory.
        unsafe {
            let v = &*iov.add(i);
            let k = v.iov_len.min(data.len() - off);
            std::ptr::copy_nonoverlapping(data.as_ptr().add(off), v.iov_base as *mut u8, k);
            off += k;
        }
    }
}

fn head() -> MsgHead {
    // SAFETY: MsgHead is plain integers.
    unsafe { std::mem::zeroed() }
}

fn msg_ioctl(fd: c_int, buf: &mut [u8]) -> Res<MsgHead> {
    debug_assert_eq!(buf.len(), MSG_BUF);
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

fn put_head(buf: &mut [u8], h: &MsgHead) {
    // SAFETY: buf has room for a MsgHead.
    unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast::<MsgHead>(), *h) };
}

/// sendmsg() on a udsfs socket.
pub fn send(m: &Mount, fd: c_int, data: &[u8], meta: Meta, flags: c_int) -> Res<usize> {
    if meta.is_empty() && flags & !PLAIN_SEND == 0 && !data.is_empty() {
        // SAFETY: writes the caller's bytes; the daemon raises SIGPIPE.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        return if n < 0 { Err(errno()) } else { Ok(n as usize) };
    }
    let oob = flags & libc::MSG_OOB != 0;
    if oob && !sock::is_stream(fd) {
        return Err(libc::EOPNOTSUPP);
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || sock::is_nonblocking(fd);
    if data.len() > MSG_ROOM && !sock::is_stream(fd) {
        return send_record(m, fd, data, &meta, nonblock);
    }
    let mut buf = vec![0u8; MSG_BUF];
    let mut sent = 0;
    let mut meta = Some(meta);
    let mut deadline = sock::Deadline::send(fd);
    loop {
        let chunk = &data[sent..data.len().min(sent + MSG_ROOM)];
        let mut h = head();
        h.op = MSGOP_SEND;
        h.len = chunk.len() as u32;
        if oob && sent + chunk.len() == data.len() {
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
        let hs = std::mem::size_of::<MsgHead>();
        buf[hs..hs + chunk.len()].copy_from_slice(chunk);
        match msg_ioctl(fd, &mut buf) {
            Ok(r) => {
                // Addresses and sockets go with the first piece only.
                meta = None;
                sent += r.len as usize;
                if sent >= data.len() || (nonblock && (r.len as usize) < chunk.len()) {
                    return Ok(sent);
                }
            }
            Err(libc::EAGAIN) if !nonblock => {
                if let Err(e) = deadline.wait(libc::POLLOUT) {
                    return if sent > 0 { Ok(sent) } else { Err(e) };
                }
            }
            Err(e) if sent > 0 && e != libc::EPIPE => return Ok(sent),
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
    let mut bytes = rec.into_bytes();
    bytes.extend_from_slice(data);
    msg_file(m, id, nonblock, MsgIo::Write(&bytes))?;
    Ok(data.len())
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

/// One received message, however it came.
struct Got {
    data: Vec<u8>,
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
}

/// The `msg` file's record, for a message larger than one ioctl.
fn recv_record(m: &Mount, fd: c_int, want: usize, nonblock: bool) -> Res<Got> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let mut buf = vec![0u8; want + 8192];
    let n = msg_file(m, id, nonblock, MsgIo::Read(&mut buf))?;
    buf.truncate(n);
    let nl = buf.iter().position(|&b| b == b'\n').ok_or(libc::EIO)?;
    let mut got = Got {
        data: Vec::new(),
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
    got.data = payload[..payload.len().min(want).min(got.full_len)].to_vec();
    Ok(got)
}

/// One receive; `control` is the room of the caller's control buffer, so
/// that the daemon closes the passed sockets that do not fit.
fn recv_once(
    m: &Mount,
    fd: c_int,
    want: usize,
    flags: c_int,
    nonblock: bool,
    control: usize,
    deadline: &mut sock::Deadline,
) -> Res<Got> {
    let mut buf = vec![0u8; MSG_BUF];
    let mut idle = 0u32;
    loop {
        let mut h = head();
        h.op = MSGOP_RECV;
        h.len = want.min(u32::MAX as usize) as u32;
        if flags & libc::MSG_PEEK != 0 {
            h.flags |= MSGF_PEEK;
        }
        if flags & libc::MSG_OOB != 0 {
            h.flags |= MSGF_OOB;
        }
        h.flags |= MSGF_ROOM;
        h.nrights = control.min(u32::MAX as usize) as u32;
        put_head(&mut buf, &h);
        match msg_ioctl(fd, &mut buf) {
            Ok(r) if r.status == STATUS_TOO_BIG => return recv_record(m, fd, want, nonblock),
            Ok(r) => {
                let hs = std::mem::size_of::<MsgHead>();
                let n = (r.len as usize).min(MSG_ROOM);
                return Ok(Got {
                    data: buf[hs..hs + n].to_vec(),
                    full_len: r.full_len as usize,
                    from: r.addr[..(r.addr_len as usize).min(ADDR_MAX)].to_vec(),
                    from_flags: r.addr_flags,
                    creds: (r.has_creds & HAS_CREDS != 0).then_some(r.creds),
                    pidfd: (r.has_creds & HAS_PIDFD != 0).then_some(r.creds[0] as i32),
                    pidfd_tag: (r.has_creds & HAS_PIDFD_FILE != 0)
                        .then(|| r.rights.get(r.nrights as usize).copied())
                        .flatten(),
                    rights: r.rights[..(r.nrights as usize).min(MAX_RIGHTS)].to_vec(),
                    oob: r.flags & MSGF_OOB != 0,
                    ctrunc: r.flags & MSGF_CTRUNC != 0,
                });
            }
            Err(libc::EAGAIN) if !nonblock => {
                deadline.wait(libc::POLLIN)?;
                // poll says readable while a peek finds nothing at its offset
                // (SO_PEEK_OFF past the data, a taken OOB byte's place), where
                // Linux sleeps until the queue changes: back off, never spin.
                if idle > 0 {
                    std::thread::sleep(std::time::Duration::from_micros(50 << idle.min(8)));
                }
                idle += 1;
            }
            Err(e) => return Err(e),
        }
    }
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
    let mut files = claim_files(m, &tags, cloexec).into_iter();
    if !got.rights.is_empty() {
        let fit = (room - used).saturating_sub(CMSG_HDR) / std::mem::size_of::<c_int>();
        let mut fds = Vec::new();
        for (i, &id) in got.rights.iter().enumerate() {
            let fd = if id & FILE_TAG != 0 {
                match files.next().flatten() {
                    Some(fd) => Ok(fd),
                    None => Err(libc::EBADF),
                }
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
        // opened and wait for the receiver's close.
        for &id in &got.rights[fds.len()..] {
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
    let held = got.pidfd_tag.and_then(|_| files.next().flatten());
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

/// recvmsg() on a udsfs socket.
pub fn recv(m: &Mount, fd: c_int, msg: &mut msghdr, flags: c_int) -> Res<usize> {
    let iov = msg.msg_iov as *const iovec;
    let n = msg.msg_iovlen;
    let want = iov_len(iov, n);
    let plain = msg.msg_name.is_null()
        && (msg.msg_control.is_null() || msg.msg_controllen == 0)
        && flags & !(libc::MSG_CMSG_CLOEXEC | libc::MSG_NOSIGNAL) == 0
        && want > 0;
    // Linux reports MSG_CMSG_CLOEXEC back in msg_flags (____sys_recvmsg).
    let echoed = flags & libc::MSG_CMSG_CLOEXEC;
    if plain {
        msg.msg_flags = echoed;
        // SAFETY: reads into the caller's iovecs.
        let r = unsafe { libc::readv(fd, iov, n as c_int) };
        return if r < 0 { Err(errno()) } else { Ok(r as usize) };
    }
    let nonblock = flags & libc::MSG_DONTWAIT != 0 || sock::is_nonblocking(fd);
    let waitall = flags & libc::MSG_WAITALL != 0
        && flags & (libc::MSG_PEEK | libc::MSG_OOB) == 0
        && sock::is_stream(fd);
    let control = if msg.msg_control.is_null() {
        0
    } else {
        msg.msg_controllen
    };
    let mut deadline = sock::Deadline::recv(fd);
    let mut got = recv_once(m, fd, want, flags, nonblock, control, &mut deadline)?;
    // MSG_WAITALL: until the whole length, EOF, an error, a signal or the
    // timeout (one SO_RCVTIMEO for the whole call); then the partial count.
    while waitall && got.data.len() < want {
        let left = want - got.data.len();
        match recv_once(m, fd, left, flags, nonblock, 0, &mut deadline) {
            Ok(more) if more.data.is_empty() => break,
            Ok(more) => got.data.extend_from_slice(&more.data),
            Err(_) => break,
        }
    }
    scatter(&got.data, iov, n);
    let mut out_flags = if got.oob { libc::MSG_OOB } else { 0 };
    if got.full_len > got.data.len() && !waitall {
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
    Ok(got.data.len())
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

pub fn gathered(msg: &msghdr) -> Vec<u8> {
    gather(msg.msg_iov, msg.msg_iovlen)
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

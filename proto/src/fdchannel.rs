//! The fd channel: how files that are not udsfs sockets reach the daemon
//! and come back out. FUSE cannot carry a file descriptor, so the daemon
//! listens on a kernel AF_UNIX seqpacket socket at an abstract name
//! (`channel_name`, or one with a random suffix when that is taken), which
//! it publishes in its mount's `.udsfs/fdchannel`. Anyone may bind an
//! abstract name, so a client trusts the name the mount serves, and checks
//! with SO_PEERCRED that the peer has the daemon's uid (and, in a user
//! namespace that maps neither the daemon's uid nor the peer's, where both
//! read as the overflow uid, the daemon's pid).
//!
//! An abstract name exists in one network namespace only, so the daemon
//! also listens at a path (`fdchannel` in a directory it made itself, which
//! nobody else can write), published on the file's second line: a client
//! whose abstract name is not answered by the daemon (a program in a network
//! namespace of its own, or one whose check refused who answers there)
//! connects there (`Client::connect_published`). Nobody else can have a
//! socket at that path, so there the uid is checked and no pid (a client in
//! a pid namespace of its own sees none: `unshare -Urnpf`).
//!
//! One request per packet:
//! - `DEPOSIT` with SCM_RIGHTS: the files; answer `TAGS` and one u64 tag
//!   each, to put among a message's passed things;
//! - `CLAIM` and u64 tags: received files; answer `FILES` with SCM_RIGHTS.
//!
//! Either answers `ERROR` and an i32 errno on failure.
//!
//! `Client` speaks it by system call, not through the C library: the
//! preload library defines connect, sendmsg and recvmsg itself.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{Res, SCM_MAX_FD};

/// Files one request may carry.
pub const MAX_FDS: usize = SCM_MAX_FD;

pub const DEPOSIT: u8 = b'D';
pub const TAGS: u8 = b'T';
pub const CLAIM: u8 = b'C';
pub const FILES: u8 = b'F';
pub const ERROR: u8 = b'E';

/// The longest packet: a tag byte and MAX_FDS tags.
pub const MAX_PACKET: usize = 1 + 8 * MAX_FDS;

/// The file of the mount (in `.udsfs/`) that names the channel.
pub const PUBLISHED_FILE: &str = "fdchannel";

/// The channel's usual abstract name for the daemon with process id `pid`
/// (as in the mount source `udsfs:PID`).
pub fn channel_name(pid: u32) -> String {
    format!("udsfs-fdpass-{pid}")
}

/// The daemon's pid in a channel name it published (`channel_name`, or
/// that with a random suffix).
pub fn channel_pid(name: &[u8]) -> Option<u32> {
    let rest = name.strip_prefix(b"udsfs-fdpass-")?;
    let digits = rest.split(|b| *b == b'-').next()?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The uid that users of another user namespace read as (`kernel.overflowuid`):
/// every uid not mapped in the caller's own reads as this one.
fn overflow_uid() -> u32 {
    let mut buf = [0u8; 16];
    // SAFETY: open, read into a local buffer and close, by system call.
    let n = unsafe {
        let fd = libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/sys/kernel/overflowuid".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 65534;
        }
        let n = libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len());
        libc::syscall(libc::SYS_close, fd);
        n
    };
    let text = buf
        .get(..usize::try_from(n).unwrap_or(0))
        .unwrap_or_default();
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(65534)
}

/// The file of the daemon's own directory that is the channel's path socket.
pub const PATH_SOCKET: &str = "fdchannel";

/// The text of `.udsfs/fdchannel`: the abstract name and a newline, then,
/// when the daemon listens at one, the path and a newline.
pub fn published(name: &str, path: Option<&str>) -> String {
    match path {
        Some(p) => format!("{name}\n{p}\n"),
        None => format!("{name}\n"),
    }
}

/// Where the channel is, as `.udsfs/fdchannel` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The abstract name, without its leading NUL.
    pub name: Vec<u8>,
    /// The path socket's absolute path, if any.
    pub path: Option<Vec<u8>>,
}

/// The text of `.udsfs/fdchannel` read (None: the channel is off, or the
/// text is not a name, and a path, each fitting a sun_path with its NUL).
pub fn parse_published(text: &[u8]) -> Option<Published> {
    let text = text.strip_suffix(b"\n")?;
    let mut lines = text.split(|b| *b == b'\n');
    let name = lines.next()?;
    let path = lines.next();
    if lines.next().is_some() || name.is_empty() || name.len() >= crate::addr::MAX_ABSTRACT_NAME {
        return None;
    }
    if let Some(p) = path
        && (p.first() != Some(&b'/') || p.len() >= crate::addr::MAX_ABSTRACT_NAME || p.contains(&0))
    {
        return None;
    }
    Some(Published {
        name: name.to_vec(),
        path: path.map(<[u8]>::to_vec),
    })
}

/// The channel as a message shows it: `NAME` or `NAME (or PATH)`.
pub fn shown(p: &Published) -> String {
    let name = String::from_utf8_lossy(&p.name);
    match &p.path {
        Some(path) => format!("{name} (or {})", String::from_utf8_lossy(path)),
        None => name.into_owned(),
    }
}

/// A packet of `kind` followed by `tags`.
pub fn with_tags(kind: u8, tags: &[u64]) -> Vec<u8> {
    let mut p = Vec::with_capacity(1 + 8 * tags.len());
    p.push(kind);
    for t in tags {
        p.extend_from_slice(&t.to_ne_bytes());
    }
    p
}

/// The tags after a packet's kind byte (a partial one at the end is dropped).
pub fn tags_of(packet: &[u8]) -> Vec<u64> {
    packet
        .get(1..)
        .unwrap_or_default()
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

pub fn error_answer(errno: i32) -> Vec<u8> {
    let mut p = vec![ERROR];
    p.extend_from_slice(&errno.to_ne_bytes());
    p
}

/// An answer's kind, or the errno it carries; ECONNRESET for none (the
/// daemon closed the connection), EIO for one that is not an answer.
pub fn answer_kind(packet: &[u8]) -> Res<u8> {
    match packet {
        [] => Err(libc::ECONNRESET),
        [ERROR, e @ ..] if e.len() >= 4 => Err(i32::from_ne_bytes([e[0], e[1], e[2], e[3]])),
        [k @ (TAGS | FILES), ..] => Ok(*k),
        _ => Err(libc::EIO),
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(r: libc::c_long) -> Res<libc::c_long> {
    if r < 0 { Err(last_errno()) } else { Ok(r) }
}

/// CMSG_SPACE of `nfds` descriptors, in u64 words (for alignment).
fn cmsg_words(nfds: usize) -> usize {
    // SAFETY: CMSG_SPACE is arithmetic.
    let bytes = unsafe { libc::CMSG_SPACE((nfds * size_of::<RawFd>()) as u32) } as usize;
    bytes.div_ceil(8)
}

/// One connection to the channel, closed when dropped: deposits not sent
/// by then die with it.
pub struct Client(OwnedFd);

impl Client {
    /// Connects to abstract `name` and makes sure the peer has `daemon_uid`
    /// (a name someone else bound after the daemon died would not). ECONNREFUSED
    /// for another uid. Where the daemon's uid is not mapped (the caller is
    /// in a user namespace of its own), it reads as the overflow uid, as does
    /// every other user's there: the peer must then also be the process
    /// whose pid the name carries (`channel_pid`), as the caller sees it
    /// (0 where it cannot: refused).
    pub fn connect(name: &[u8], daemon_uid: u32) -> Res<Client> {
        Self::connect_to(name, true, daemon_uid, channel_pid(name))
    }

    /// `connect` at the daemon's path socket `path` (absolute), which only
    /// the daemon can have made: its uid is checked, not its pid.
    pub fn connect_path(path: &[u8], daemon_uid: u32) -> Res<Client> {
        Self::connect_to(path, false, daemon_uid, None)
    }

    /// The channel the mount publishes: its abstract name, or, when the
    /// daemon does not answer there (the caller is in another network
    /// namespace, or someone else holds the name in it), its path. The
    /// abstract name's errno when neither answers.
    pub fn connect_published(p: &Published, daemon_uid: u32) -> Res<Client> {
        match (Self::connect(&p.name, daemon_uid), &p.path) {
            (Err(libc::ECONNREFUSED), Some(path)) => {
                Self::connect_path(path, daemon_uid).map_err(|_| libc::ECONNREFUSED)
            }
            (r, _) => r,
        }
    }

    fn connect_to(
        name: &[u8],
        abstract_name: bool,
        daemon_uid: u32,
        daemon_pid: Option<u32>,
    ) -> Res<Client> {
        if name.len() >= crate::addr::MAX_ABSTRACT_NAME || name.contains(&0) && !abstract_name {
            return Err(libc::EINVAL);
        }
        let skip = usize::from(abstract_name);
        let ty = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
        // SAFETY: socket makes a descriptor, which we own at once.
        let fd = check(unsafe { libc::syscall(libc::SYS_socket, libc::AF_UNIX, ty, 0) })?;
        // SAFETY: a new descriptor of ours.
        let c = Client(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        // SAFETY: a zeroed sockaddr_un is valid; the name fits after its NUL.
        let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in name.iter().enumerate() {
            sa.sun_path[i + skip] = *b as libc::c_char;
        }
        // (a path's length with its NUL, which the zeroed sun_path has)
        let len = size_of::<libc::sa_family_t>() + 1 + name.len();
        // SAFETY: connect reads `len` bytes of sa.
        check(unsafe {
            libc::syscall(
                libc::SYS_connect,
                c.0.as_raw_fd(),
                &sa as *const libc::sockaddr_un,
                len as libc::socklen_t,
            )
        })?;
        let (uid, pid) = c.peer()?;
        let unsure = abstract_name && uid == overflow_uid();
        if uid != daemon_uid || (unsure && Some(pid) != daemon_pid) {
            return Err(libc::ECONNREFUSED);
        }
        Ok(c)
    }

    /// The uid and pid of the process that answers (SO_PEERCRED).
    fn peer(&self) -> Res<(u32, u32)> {
        // SAFETY: a zeroed ucred is valid; getsockopt writes at most its size.
        let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: as above.
        check(unsafe {
            libc::syscall(
                libc::SYS_getsockopt,
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                &mut cred as *mut libc::ucred,
                &mut len as *mut libc::socklen_t,
            )
        })?;
        Ok((cred.uid, cred.pid as u32))
    }

    fn send(&self, bytes: &[u8], fds: &[RawFd]) -> Res<()> {
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let mut ctl = vec![0u64; cmsg_words(fds.len())];
        // SAFETY: the msghdr and control buffer are built here, the latter
        // sized by CMSG_SPACE for the descriptors copied into it.
        unsafe {
            let mut h: libc::msghdr = std::mem::zeroed();
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            if !fds.is_empty() {
                h.msg_control = ctl.as_mut_ptr().cast();
                h.msg_controllen = libc::CMSG_SPACE((fds.len() * 4) as u32) as usize;
                let c = libc::CMSG_FIRSTHDR(&h);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
            }
            check(libc::syscall(
                libc::SYS_sendmsg,
                self.0.as_raw_fd(),
                &h as *const libc::msghdr,
                libc::MSG_NOSIGNAL,
            ))?;
        }
        Ok(())
    }

    /// One answer: its bytes and the descriptors it carried.
    fn answer(&self, cloexec: bool) -> Res<(Vec<u8>, Vec<OwnedFd>)> {
        let mut buf = vec![0u8; MAX_PACKET];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut ctl = vec![0u64; cmsg_words(MAX_FDS)];
        let mut fds = Vec::new();
        // SAFETY: receives into buffers built here; walks the kernel's cmsgs,
        // whose descriptors become ours.
        let n = unsafe {
            let mut h: libc::msghdr = std::mem::zeroed();
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            h.msg_control = ctl.as_mut_ptr().cast();
            h.msg_controllen = ctl.len() * 8;
            let fl = if cloexec { libc::MSG_CMSG_CLOEXEC } else { 0 };
            let n = loop {
                let r = libc::syscall(
                    libc::SYS_recvmsg,
                    self.0.as_raw_fd(),
                    &mut h as *mut libc::msghdr,
                    fl,
                );
                match check(r) {
                    Err(libc::EINTR) => continue,
                    r => break r?,
                }
            };
            let mut c = libc::CMSG_FIRSTHDR(&h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let hdr = libc::CMSG_LEN(0) as usize;
                    let k = ((*c).cmsg_len as usize - hdr) / 4;
                    let p = libc::CMSG_DATA(c) as *const RawFd;
                    for i in 0..k {
                        fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(i))));
                    }
                }
                c = libc::CMSG_NXTHDR(&h, c);
            }
            n as usize
        };
        buf.truncate(n);
        answer_kind(&buf)?;
        Ok((buf, fds))
    }

    /// One request and its answer. A connection the daemon refused (a user
    /// past its share, or one who may not use the mount) has its answer
    /// queued before it closes: read it rather than report EPIPE.
    fn request(&self, bytes: &[u8], fds: &[RawFd], cloexec: bool) -> Res<(Vec<u8>, Vec<OwnedFd>)> {
        match self.send(bytes, fds) {
            Ok(()) | Err(libc::EPIPE | libc::ECONNRESET) => self.answer(cloexec),
            Err(e) => Err(e),
        }
    }

    /// Hands `fds` to the daemon; returns their tags, in order.
    pub fn deposit(&self, fds: &[RawFd]) -> Res<Vec<u64>> {
        let (buf, _) = self.request(&[DEPOSIT], fds, true)?;
        let tags = tags_of(&buf);
        if buf[0] != TAGS || tags.len() != fds.len() {
            return Err(libc::EIO);
        }
        Ok(tags)
    }

    /// Takes received files `tags` back as new descriptors, in order (fewer
    /// when the daemon could not give them all).
    pub fn claim(&self, tags: &[u64], cloexec: bool) -> Res<Vec<OwnedFd>> {
        let (buf, fds) = self.request(&with_tags(CLAIM, tags), &[], cloexec)?;
        if buf[0] != FILES {
            return Err(libc::EIO);
        }
        Ok(fds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip() {
        let tags = [1u64 << 63 | 7, 1 << 63 | 8];
        let p = with_tags(CLAIM, &tags);
        assert_eq!((p[0], p.len()), (CLAIM, 17));
        assert_eq!(tags_of(&p), tags);
        assert_eq!(tags_of(&p[..12]), &tags[..1], "a partial tag is dropped");
        assert_eq!(tags_of(b""), Vec::<u64>::new());
        assert_eq!(answer_kind(&with_tags(TAGS, &tags)), Ok(TAGS));
        assert_eq!(answer_kind(b"F"), Ok(FILES));
        assert_eq!(
            answer_kind(&error_answer(libc::ETOOMANYREFS)),
            Err(libc::ETOOMANYREFS)
        );
        assert_eq!(answer_kind(b""), Err(libc::ECONNRESET));
        assert_eq!(answer_kind(b"E\x01"), Err(libc::EIO), "an errno cut short");
        assert_eq!(answer_kind(b"Q"), Err(libc::EIO));
    }

    #[test]
    fn published_names_round_trip() {
        let n = channel_name(42);
        assert_eq!(n, "udsfs-fdpass-42");
        assert_eq!(channel_pid(n.as_bytes()), Some(42));
        assert_eq!(channel_pid(b"udsfs-fdpass-42-00ff00ff00ff00ff"), Some(42));
        assert_eq!(channel_pid(b"udsfs-fdpass-"), None);
        assert_eq!(channel_pid(b"someone-else-42"), None);
        let only = Published {
            name: n.clone().into_bytes(),
            path: None,
        };
        assert_eq!(parse_published(published(&n, None).as_bytes()), Some(only));
        let both = Published {
            name: n.clone().into_bytes(),
            path: Some(b"/run/udsfs-42/fdchannel".to_vec()),
        };
        let text = published(&n, Some("/run/udsfs-42/fdchannel"));
        assert_eq!(text, "udsfs-fdpass-42\n/run/udsfs-42/fdchannel\n");
        assert_eq!(parse_published(text.as_bytes()), Some(both));
        assert_eq!(parse_published(b""), None, "the channel is off");
        assert_eq!(parse_published(b"\n"), None);
        assert_eq!(parse_published(b"name"), None, "no newline");
        assert_eq!(parse_published(&[b'n'; 200]), None);
        assert_eq!(
            parse_published(b"n\nrelative\n"),
            None,
            "a path not absolute"
        );
        assert_eq!(parse_published(b"n\n/p\n/q\n"), None, "a third line");
        let mut long = b"n\n/".to_vec();
        long.extend_from_slice(&[b'p'; 120]);
        long.push(b'\n');
        assert_eq!(parse_published(&long), None, "a path past sun_path");
    }

    /// A seqpacket listener at abstract `name`, standing for the daemon.
    fn listen(name: &[u8]) -> OwnedFd {
        // SAFETY: plain socket calls on a new descriptor of ours.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0);
            let mut sa: libc::sockaddr_un = std::mem::zeroed();
            sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (i, b) in name.iter().enumerate() {
                sa.sun_path[i + 1] = *b as libc::c_char;
            }
            let len = (2 + 1 + name.len()) as libc::socklen_t;
            assert_eq!(
                libc::bind(fd, (&sa as *const libc::sockaddr_un).cast(), len),
                0
            );
            assert_eq!(libc::listen(fd, 4), 0);
            OwnedFd::from_raw_fd(fd)
        }
    }

    #[test]
    fn a_client_checks_who_answers_and_reads_its_answers() {
        let name = format!("udsfs-proto-test-{}", std::process::id());
        let l = listen(name.as_bytes());
        // SAFETY: getuid only reads.
        let me = unsafe { libc::getuid() };
        assert_eq!(
            Client::connect(name.as_bytes(), me.wrapping_add(1)).err(),
            Some(libc::ECONNREFUSED)
        );
        let c = Client::connect(name.as_bytes(), me).unwrap();
        let server = std::thread::spawn(move || {
            // SAFETY: accept, read and write on descriptors of ours.
            unsafe {
                // The refused client's connection first, then the real one.
                let refused =
                    libc::accept(l.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut());
                libc::close(refused);
                let s = libc::accept(l.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut());
                let mut req = [0u8; 64];
                let n = libc::read(s, req.as_mut_ptr().cast(), req.len());
                assert_eq!(&req[..n as usize], &[DEPOSIT]);
                let a = with_tags(TAGS, &[1 << 63 | 3]);
                libc::write(s, a.as_ptr().cast(), a.len());
                let n = libc::read(s, req.as_mut_ptr().cast(), req.len());
                assert_eq!(tags_of(&req[..n as usize]), [1 << 63 | 3]);
                let e = error_answer(libc::EBADF);
                libc::write(s, e.as_ptr().cast(), e.len());
                libc::close(s);
            }
        });
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(c.deposit(&[f.as_raw_fd()]), Ok(vec![1 << 63 | 3]));
        assert_eq!(c.claim(&[1 << 63 | 3], true).err(), Some(libc::EBADF));
        server.join().unwrap();
        assert_eq!(
            Client::connect(b"udsfs-proto-no-such-name", me).err(),
            Some(libc::ECONNREFUSED)
        );
        assert_eq!(Client::connect(&[b'n'; 120], me).err(), Some(libc::EINVAL));
    }
}

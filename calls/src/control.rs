//! The control messages of a udsfs send and receive, both ways: what a
//! sendmsg's control buffer asks (credentials; files to pass: udsfs sockets
//! by number, any other file deposited on the daemon's fd channel by tag),
//! and the control messages a recvmsg gets (SCM_TIMESTAMP and its kin,
//! SCM_CREDENTIALS, SCM_RIGHTS, SCM_PIDFD), as Linux writes them. The front says how the program's
//! descriptors are reached (`Passer`, `Installer`): the library's are its
//! own, the supervisor's are pidfd_getfd copies and SECCOMP_IOCTL_NOTIF_ADDFD.

use std::os::fd::{AsRawFd, OwnedFd};

use udsfs_proto::fdchannel::Client;
use udsfs_proto::ioctl::MAX_RIGHTS;
use udsfs_proto::passed::is_file_tag;
use udsfs_proto::sockopt::SCM_PIDFD;
use udsfs_proto::{Res, cmsg};

use crate::client::Got;

/// One descriptor a sendmsg passes, as the front found it.
pub enum Passed<F> {
    /// A udsfs socket of the mount: its number.
    Socket(u64),
    /// Any other file: deposited on the fd channel (`F` holds it open).
    File(F),
}

/// How a front reaches the descriptors a sendmsg passes.
pub trait Passer {
    /// The front's hold on a file to deposit.
    type File: AsRawFd;
    /// Descriptor `fd` of the program; EBADF when it is not open.
    fn passed(&self, fd: i32) -> Res<Passed<Self::File>>;
    /// A connection to the daemon's fd channel, as the program.
    fn channel(&self) -> Res<Client>;
    /// A log line (rate-limited by the front).
    fn say(&self, what: &str);
}

/// What a sendmsg's control messages ask.
#[derive(Default)]
pub struct Asked {
    /// SCM_CREDENTIALS: pid, uid, gid.
    pub creds: Option<[u32; 3]>,
    /// Sockets by number and files by tag (`udsfs_proto::passed`).
    pub rights: Vec<u64>,
    /// Open while the files among `rights` wait in the daemon for the send.
    pub channel: Option<Client>,
}

/// Parses a sendmsg's control bytes `b`: credentials and the descriptors to
/// pass (at most MAX_RIGHTS, else EINVAL; any other message EINVAL). The
/// files that are not udsfs sockets go to the daemon now, by tag.
pub fn parse(p: &impl Passer, b: &[u8]) -> Res<Asked> {
    let mut out = Asked::default();
    // Files that are not udsfs sockets: their place in `rights`, the hold.
    let mut files = Vec::new();
    for (level, ty, payload) in cmsg::parse(b)? {
        match (level, ty) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                for fd in cmsg::ints(payload) {
                    match p.passed(fd)? {
                        Passed::Socket(id) => out.rights.push(id),
                        Passed::File(f) => {
                            files.push((out.rights.len(), f));
                            out.rights.push(0);
                        }
                    }
                }
                if out.rights.len() > MAX_RIGHTS {
                    return Err(libc::EINVAL);
                }
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if payload.len() >= 12 => {
                let mut w = cmsg::ints(payload).map(|x| x as u32);
                let mut next = || w.next().unwrap_or(0);
                out.creds = Some([next(), next(), next()]);
            }
            _ => return Err(libc::EINVAL),
        }
    }
    if files.is_empty() {
        return Ok(out);
    }
    let ch = p.channel()?;
    let raw: Vec<i32> = files.iter().map(|(_, f)| f.as_raw_fd()).collect();
    let tags = ch.deposit(&raw).inspect_err(|e| {
        p.say(&format!(
            "sendmsg: the daemon refused files ({} of them): errno {e}",
            raw.len()
        ))
    })?;
    for ((slot, _), tag) in files.iter().zip(tags) {
        out.rights[*slot] = tag;
    }
    out.channel = Some(ch);
    Ok(out)
}

/// How a front puts received descriptors into the program.
pub trait Installer {
    /// Passed socket `id` opened and installed in the program: its
    /// descriptor there.
    fn socket(&self, id: u64, cloexec: bool) -> Res<i32>;
    /// Passed socket `id` not installed: let go (opening an entry adopts it,
    /// closing it lets the socket go).
    fn release(&self, id: u64);
    /// Received files `tags` claimed from the daemon, in order (fewer when
    /// the rest could not be had).
    fn claim(&self, tags: &[u64], cloexec: bool) -> Res<Vec<OwnedFd>>;
    /// File `f` installed in the program: its descriptor there.
    fn install(&self, f: OwnedFd, cloexec: bool) -> Res<i32>;
    /// A new pidfd of process `pid`.
    fn pidfd(&self, pid: i32) -> Res<OwnedFd>;
    /// A log line (rate-limited by the front).
    fn say(&self, what: &str);
}

/// Writes the control messages of received message `got` into `buf` (the
/// room of the program's control buffer, or none when the front found it
/// cannot be written) and installs what they pass: credentials, then the
/// passed descriptors, then the sender's pidfd, as scm_recv_unix. As
/// scm_detach_fds, the descriptors that fit are installed in order until
/// the first that cannot be (past RLIMIT_NOFILE: silently); the rest are
/// closed, and MSG_CTRUNC says so. (bytes used, MSG_CTRUNC).
pub fn put(inst: &impl Installer, buf: &mut [u8], got: &Got, cloexec: bool) -> (usize, bool) {
    let mut w = cmsg::Writer::new(buf);
    let mut cut = got.ctrunc;
    // SCM_TIMESTAMP(NS) and SCM_TIMESTAMPING first, as
    // __sock_recv_timestamp writes them before scm_recv_unix.
    if let Some((ns, t)) = got.stamp {
        for (ty, b) in t.cmsgs(ns) {
            cut |= !w.put(libc::SOL_SOCKET, ty, &b);
        }
    }
    if let Some(c) = got.creds {
        let mut b = [0u8; 12];
        for (i, x) in c.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&x.to_ne_bytes());
        }
        // put_cmsg writes what fits of a message whose header fits, cut short.
        cut |= !w.put(libc::SOL_SOCKET, libc::SCM_CREDENTIALS, &b);
    }
    // Received files and the sender's pidfd come back in one claim; the
    // files of `rights` first, in order, the pidfd last.
    let nfiles = got.rights.iter().filter(|&&i| is_file_tag(i)).count();
    let mut claimed: Vec<Option<OwnedFd>> = Vec::new();
    if nfiles > 0 || got.pidfd_tag.is_some() {
        let mut tags: Vec<u64> = got
            .rights
            .iter()
            .copied()
            .filter(|&i| is_file_tag(i))
            .collect();
        tags.extend(got.pidfd_tag);
        match inst.claim(&tags, cloexec) {
            Ok(fds) => claimed.extend(fds.into_iter().map(Some)),
            Err(e) => inst.say(&format!(
                "recvmsg: {} received files could not be claimed from the daemon: errno {e}",
                tags.len()
            )),
        }
        claimed.resize_with(tags.len(), || None);
    }
    let held = got
        .pidfd_tag
        .and_then(|_| claimed.get_mut(nfiles).and_then(Option::take));
    if !got.rights.is_empty() {
        let fit = w.room().saturating_sub(cmsg::HDR) / 4;
        let mut files = claimed.iter_mut().take(nfiles);
        let mut fds = Vec::new();
        let mut stopped = false;
        for (i, &id) in got.rights.iter().enumerate() {
            let file = is_file_tag(id).then(|| files.next().and_then(Option::take));
            if i >= fit || stopped {
                // Not installed: a claimed file closes (dropped), a socket
                // is let go.
                if file.is_none() {
                    inst.release(id);
                }
                continue;
            }
            let r = match file {
                Some(Some(f)) => inst.install(f, cloexec),
                Some(None) => Err(libc::EBADF),
                None => inst.socket(id, cloexec),
            };
            match r {
                Ok(fd) => fds.push(fd),
                Err(e) => {
                    if e != libc::EMFILE {
                        let what = if is_file_tag(id) {
                            "a file"
                        } else {
                            "a socket"
                        };
                        inst.say(&format!(
                            "recvmsg: received {what} could not be had: errno {e}"
                        ));
                    }
                    if !is_file_tag(id) {
                        inst.release(id);
                    }
                    stopped = true;
                }
            }
        }
        cut |= fds.len() < got.rights.len();
        if !fds.is_empty() {
            let b: Vec<u8> = fds.iter().flat_map(|x| x.to_ne_bytes()).collect();
            w.put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &b);
        }
    }
    // SCM_PIDFD comes last, as scm_recv_unix puts it; a message sent with no
    // credentials (before anyone asked for them) has none. The daemon's
    // pidfd names the sender even once it has exited; without one, a pidfd
    // of the pid it had. Close-on-exec whatever MSG_CMSG_CLOEXEC says, as
    // Linux 6.18 gives it.
    if let Some(pid) = got.pidfd.filter(|&p| p > 0) {
        if w.room() < cmsg::HDR + 4 {
            cut = true;
        } else {
            let fd = held
                .map_or_else(|| inst.pidfd(pid), Ok)
                .and_then(|f| inst.install(f, true));
            match fd {
                Ok(fd) => cut |= !w.put(libc::SOL_SOCKET, SCM_PIDFD, &fd.to_ne_bytes()),
                Err(_) => cut = true,
            }
        }
    }
    (w.used(), cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::os::fd::FromRawFd;

    /// Installs sockets as descriptor 100 + id until `slots` run out
    /// (EMFILE); records what it did.
    struct Fake {
        slots: RefCell<usize>,
        done: RefCell<Vec<String>>,
    }

    impl Fake {
        fn take(&self) -> Res<()> {
            let mut s = self.slots.borrow_mut();
            if *s == 0 {
                return Err(libc::EMFILE);
            }
            *s -= 1;
            Ok(())
        }
    }

    impl Installer for Fake {
        fn socket(&self, id: u64, _: bool) -> Res<i32> {
            self.take()?;
            self.done.borrow_mut().push(format!("socket {id}"));
            Ok(100 + id as i32)
        }
        fn release(&self, id: u64) {
            self.done.borrow_mut().push(format!("release {id}"));
        }
        fn claim(&self, tags: &[u64], _: bool) -> Res<Vec<OwnedFd>> {
            // SAFETY: new descriptors of our own (/dev/null).
            let null = || unsafe {
                OwnedFd::from_raw_fd(libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY))
            };
            Ok(tags.iter().map(|_| null()).collect())
        }
        fn install(&self, _: OwnedFd, _: bool) -> Res<i32> {
            self.take()?;
            self.done.borrow_mut().push("file".into());
            Ok(7)
        }
        fn pidfd(&self, _: i32) -> Res<OwnedFd> {
            Err(libc::ESRCH)
        }
        fn say(&self, _: &str) {}
    }

    fn received(rights: Vec<u64>) -> Got {
        Got {
            rights,
            ..Got::default()
        }
    }

    #[test]
    fn what_fits_is_installed_in_order_until_the_first_that_cannot_be() {
        let file = udsfs_proto::passed::FILE_TAG | 1;
        for (room, slots, want, ctrunc) in [
            (4, 9, "socket 1; socket 2; file; socket 3", false),
            (2, 9, "socket 1; socket 2; release 3", true),
            (4, 1, "socket 1; release 2; release 3", true),
        ] {
            let f = Fake {
                slots: RefCell::new(slots),
                done: RefCell::new(Vec::new()),
            };
            let mut buf = vec![0u8; cmsg::HDR + 4 * room];
            let (used, cut) = put(&f, &mut buf, &received(vec![1, 2, file, 3]), false);
            let done = f.done.borrow().join("; ");
            println!("room {room}, {slots} free slots: {done}; {used} bytes, ctrunc {cut}");
            assert_eq!((done.as_str(), cut), (want, ctrunc));
        }
    }
}

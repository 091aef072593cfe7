//! The library's end of the daemon's fd channel (src/fdchannel.rs): files
//! that are not udsfs sockets go to the daemon before the sendmsg that
//! passes them, by tag, and come back after the recvmsg that received them.

use libc::{c_int, cmsghdr, iovec, msghdr};

use crate::mount::Mount;
use crate::real;
use crate::sock::Res;
use crate::{errno, log};

/// SCM_MAX_FD.
const MAX_FDS: usize = 253;

/// One connection to the channel, closed when dropped: deposits not sent by then die with it.
pub struct Channel(c_int);

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: our own descriptor.
        unsafe { libc::close(self.0) };
    }
}

/// The channel's abstract name and the daemon's uid, from the mount's own
/// `.udsfs/fdchannel` (src/fdchannel.rs): anyone can bind an abstract name
/// first, but only the daemon answers reads of its mount (the file must be
/// on the mount's device), and the file is owned by the daemon's uid. Read
/// once: the mount, and so its daemon, is the process's for good.
fn channel_of(m: &Mount) -> Option<&'static (Vec<u8>, u32)> {
    static CH: std::sync::OnceLock<Option<(Vec<u8>, u32)>> = std::sync::OnceLock::new();
    CH.get_or_init(|| read_channel(m)).as_ref()
}

fn read_channel(m: &Mount) -> Option<(Vec<u8>, u32)> {
    let path = m.ctrl_file("fdchannel");
    // SAFETY: open, fstat, read and close on a descriptor of our own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let mut buf = [0u8; 128];
        let ok = real::fstat(fd, &mut st) == 0 && m.owns_stat_dev(st.st_dev);
        let n = if ok {
            libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
        } else {
            -1
        };
        libc::close(fd);
        if n <= 1 || buf[n as usize - 1] != b'\n' {
            return None;
        }
        let name = buf[..n as usize - 1].to_vec();
        // It names a sun_path after the leading NUL.
        (name.len() < 107).then_some((name, st.st_uid))
    }
}

/// Connects to the daemon serving `m`, making sure it is the daemon that answers.
pub fn connect(m: &Mount) -> Res<Channel> {
    let Some((name, daemon_uid)) = channel_of(m) else {
        log::say(
            "fd channel: the mount serves no .udsfs/fdchannel name; cannot pass files (EINVAL)",
        );
        return Err(libc::EINVAL);
    };
    let shown = String::from_utf8_lossy(name);
    // SAFETY: plain socket calls on a new descriptor we own.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let ch = Channel(fd);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in name.iter().enumerate() {
            sa.sun_path[i + 1] = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        // The real connect: this library would route an abstract name into udsfs.
        if real::connect(fd, (&sa as *const libc::sockaddr_un).cast(), len as u32) < 0 {
            let e = errno();
            log::say(&format!("fd channel @{shown}: connect: errno {e}"));
            return Err(e);
        }
        // The name came from the daemon; the uid check guards a name bound
        // by someone else after the daemon died (a pid would be relative to
        // a pid namespace; a uid is not).
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut cl = std::mem::size_of::<libc::ucred>() as u32;
        let r = real::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut cl,
        );
        if r < 0 || cred.uid != *daemon_uid {
            log::say(&format!(
                "fd channel @{shown}: answered by uid {}, not the daemon's {daemon_uid}: refused",
                cred.uid
            ));
            return Err(libc::ECONNREFUSED);
        }
        Ok(ch)
    }
}

const HDR: usize = std::mem::size_of::<cmsghdr>();

fn space(nfds: usize) -> usize {
    // SAFETY: CMSG_SPACE is arithmetic.
    unsafe { libc::CMSG_SPACE((nfds * 4) as u32) as usize }
}

impl Channel {
    fn send(&self, bytes: &[u8], fds: &[c_int]) -> Res<()> {
        let mut iov = iovec {
            iov_base: bytes.as_ptr() as *mut _,
            iov_len: bytes.len(),
        };
        let mut ctl = vec![0u64; space(fds.len()).div_ceil(8)];
        // SAFETY: msghdr and control buffer built here, sized by CMSG_SPACE.
        unsafe {
            let mut h: msghdr = std::mem::zeroed();
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            if !fds.is_empty() {
                h.msg_control = ctl.as_mut_ptr().cast();
                h.msg_controllen = space(fds.len());
                let c = libc::CMSG_FIRSTHDR(&h);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
            }
            if real::sendmsg(self.0, &h, libc::MSG_NOSIGNAL) < 0 {
                return Err(errno());
            }
        }
        Ok(())
    }

    /// One answer: its bytes and the descriptors it carried.
    fn answer(&self, cloexec: bool) -> Res<(Vec<u8>, Vec<c_int>)> {
        let mut buf = vec![0u8; 1 + 8 * MAX_FDS];
        let mut iov = iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut ctl = vec![0u64; space(MAX_FDS).div_ceil(8)];
        let mut fds = Vec::new();
        // SAFETY: receives into buffers built here; walks the kernel's cmsgs.
        let n = unsafe {
            let mut h: msghdr = std::mem::zeroed();
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            h.msg_control = ctl.as_mut_ptr().cast();
            h.msg_controllen = ctl.len() * 8;
            let fl = if cloexec { libc::MSG_CMSG_CLOEXEC } else { 0 };
            let n = loop {
                let n = real::recvmsg(self.0, &mut h, fl);
                if n >= 0 || errno() != libc::EINTR {
                    break n;
                }
            };
            if n < 0 {
                return Err(errno());
            }
            let mut c = libc::CMSG_FIRSTHDR(&h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let k = ((*c).cmsg_len as usize - HDR) / 4;
                    let p = libc::CMSG_DATA(c) as *const c_int;
                    fds.extend((0..k).map(|i| std::ptr::read_unaligned(p.add(i))));
                }
                c = libc::CMSG_NXTHDR(&h, c);
            }
            n as usize
        };
        buf.truncate(n);
        if buf.first() == Some(&b'E') && buf.len() >= 5 {
            return Err(c_int::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]));
        }
        if buf.is_empty() {
            return Err(libc::ECONNRESET);
        }
        Ok((buf, fds))
    }

    /// One request and its answer. A connection the daemon refused (a user
    /// past its share, or one who may not use the mount) has its answer
    /// queued before it closes: read it rather than report EPIPE.
    fn request(&self, bytes: &[u8], fds: &[c_int], cloexec: bool) -> Res<(Vec<u8>, Vec<c_int>)> {
        match self.send(bytes, fds) {
            Ok(()) | Err(libc::EPIPE | libc::ECONNRESET) => self.answer(cloexec),
            Err(e) => Err(e),
        }
    }

    /// Hands `fds` to the daemon; returns their tags, in order.
    pub fn deposit(&self, fds: &[c_int]) -> Res<Vec<u64>> {
        let (buf, _) = self.request(b"D", fds, true)?;
        let tags: Vec<u64> = buf[1..]
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if buf[0] != b'T' || tags.len() != fds.len() {
            return Err(libc::EIO);
        }
        Ok(tags)
    }

    /// Takes received files `tags` back as new descriptors of this process.
    pub fn claim(&self, tags: &[u64], cloexec: bool) -> Res<Vec<c_int>> {
        let mut req = vec![b'C'];
        for t in tags {
            req.extend_from_slice(&t.to_ne_bytes());
        }
        let (_, fds) = self.request(&req, &[], cloexec)?;
        Ok(fds)
    }
}

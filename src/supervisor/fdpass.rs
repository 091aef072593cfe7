//! The supervisor's end of the daemon's fd channel (src/fdchannel.rs, which
//! states the protocol): files that are not udsfs sockets are deposited
//! before the message ioctl that passes them, by tag, and claimed after the
//! one that received them. The same requests and checks as the library's
//! preload/src/fdpass.rs, written again here because that one calls the C
//! library's own functions from inside the preload layer (`crate::real`).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr,
    connect as sock_connect, getsockopt, recvmsg, sendmsg, socket, sockopt,
};

use super::daemon::Res;
use super::emulate::say;

/// SCM_MAX_FD.
const MAX_FDS: usize = 253;

/// One connection: deposits not passed by the time it closes die with it.
pub struct Channel(OwnedFd);

/// The channel's abstract name and the daemon's uid, from the mount's
/// `.udsfs/fdchannel`: the file must be on the mount's device (only the
/// daemon answers there), and its owner is the daemon's uid.
fn read_channel(mount: &Path) -> Option<(Vec<u8>, u32)> {
    let root = std::fs::metadata(mount).ok()?;
    let path = mount.join(".udsfs/fdchannel");
    let f = std::fs::File::open(&path).ok()?;
    let meta = f.metadata().ok()?;
    if meta.dev() != root.dev() {
        return None;
    }
    let mut text = Vec::new();
    use std::io::Read;
    f.take(128).read_to_end(&mut text).ok()?;
    let name = text.strip_suffix(b"\n")?;
    (!name.is_empty() && name.len() < 107).then(|| (name.to_vec(), meta.uid()))
}

pub fn connect(mount: &Path) -> Res<Channel> {
    let Some((name, uid)) = read_channel(mount) else {
        say("fd channel: the mount serves no .udsfs/fdchannel name; cannot pass files (EINVAL)");
        return Err(libc::EINVAL);
    };
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| e as i32)?;
    let addr = UnixAddr::new_abstract(&name).map_err(|e| e as i32)?;
    sock_connect(fd.as_raw_fd(), &addr).map_err(|e| e as i32)?;
    // A name someone else bound after the daemon died: not the daemon's uid.
    let cred = getsockopt(&fd, sockopt::PeerCredentials).map_err(|e| e as i32)?;
    if cred.uid() != uid {
        say(&format!(
            "fd channel: answered by uid {}, not the daemon's {uid}: refused",
            cred.uid()
        ));
        return Err(libc::ECONNREFUSED);
    }
    Ok(Channel(fd))
}

impl Channel {
    /// One request and its answer (bytes, descriptors). A refused
    /// connection has its answer queued before it closes: read it.
    fn request(&self, bytes: &[u8], fds: &[RawFd]) -> Res<(Vec<u8>, Vec<OwnedFd>)> {
        let fd = self.0.as_raw_fd();
        let iov = [IoSlice::new(bytes)];
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
        match sendmsg::<()>(fd, &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(_) | Err(nix::errno::Errno::EPIPE | nix::errno::Errno::ECONNRESET) => {}
            Err(e) => return Err(e as i32),
        }
        let mut buf = vec![0u8; 1 + 8 * MAX_FDS];
        let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
        let (n, got) = loop {
            let mut iov = [IoSliceMut::new(&mut buf)];
            match recvmsg::<()>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e as i32),
                Ok(m) => {
                    let mut got = Vec::new();
                    for c in m.cmsgs().map_err(|e| e as i32)? {
                        if let ControlMessageOwned::ScmRights(v) = c {
                            // SAFETY: descriptors the kernel just gave us.
                            got.extend(v.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
                        }
                    }
                    break (m.bytes, got);
                }
            }
        };
        buf.truncate(n);
        match buf.first() {
            None => Err(libc::ECONNRESET),
            Some(b'E') if buf.len() >= 5 => {
                Err(i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]))
            }
            Some(_) => Ok((buf, got)),
        }
    }

    /// Hands `fds` (ours) to the daemon; their tags, in order.
    pub fn deposit(&self, fds: &[RawFd]) -> Res<Vec<u64>> {
        let (buf, _) = self.request(b"D", fds)?;
        let tags: Vec<u64> = buf[1..]
            .chunks_exact(8)
            .filter_map(|c| c.try_into().ok().map(u64::from_ne_bytes))
            .collect();
        if buf[0] != b'T' || tags.len() != fds.len() {
            return Err(libc::EIO);
        }
        Ok(tags)
    }

    /// Takes received files `tags` back, as descriptors of the supervisor,
    /// in order (fewer when the daemon could not give them all).
    pub fn claim(&self, tags: &[u64]) -> Res<Vec<OwnedFd>> {
        let mut req = vec![b'C'];
        for t in tags {
            req.extend_from_slice(&t.to_ne_bytes());
        }
        let (buf, fds) = self.request(&req, &[])?;
        if buf[0] != b'F' {
            return Err(libc::EIO);
        }
        Ok(fds)
    }
}

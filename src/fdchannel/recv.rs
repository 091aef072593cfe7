//! One request off a channel connection: its bytes, the files it carried and
//! its sender's uid, read with the C library's CMSG walk. nix hands out no
//! control message once MSG_CTRUNC is set, and the files the kernel did
//! install before it ran out of room (up to the room given) would then stay
//! open in the daemon for good, counted nowhere: a user could leak the
//! room it has left, again and again.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

pub(super) struct Request {
    pub bytes: usize,
    pub fds: Vec<OwnedFd>,
    pub truncated: bool,
    /// The real uid of its SCM_CREDENTIALS.
    pub sender: Option<u32>,
}

/// Room for `nfds` descriptors and one SCM_CREDENTIALS.
fn control_room(nfds: usize) -> usize {
    // SAFETY: CMSG_SPACE is arithmetic.
    unsafe {
        libc::CMSG_SPACE((nfds * size_of::<RawFd>()) as u32) as usize
            + libc::CMSG_SPACE(size_of::<libc::ucred>() as u32) as usize
    }
}

/// Whether the connection on `fd` has ended (or holds an empty request, which
/// ends it too): a peek with no room for files, which installs none.
pub(super) fn at_end(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: one byte into a live local.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// A nonblocking recvmsg on `fd` into `buf`, with room for `nfds` files.
pub(super) fn recv(fd: RawFd, buf: &mut [u8], nfds: usize) -> Result<Request, Errno> {
    // u64s: aligned for cmsghdr.
    let mut space = vec![0u64; control_room(nfds).div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set below to live buffers.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = space.as_mut_ptr().cast();
    mh.msg_controllen = space.len() * 8;
    // SAFETY: mh names buf and space, both alive and as long as said.
    let n = unsafe { libc::recvmsg(fd, &mut mh, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(Errno::last());
    }
    let mut req = Request {
        bytes: n as usize,
        fds: Vec::new(),
        truncated: mh.msg_flags & libc::MSG_CTRUNC != 0,
        sender: None,
    };
    // SAFETY: the kernel wrote msg_controllen bytes of well-formed control
    // messages into space (cmsg_len of a truncated SCM_RIGHTS counts only the
    // descriptors it installed); CMSG_* stay inside them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let len = ((*c).cmsg_len as usize).saturating_sub(data as usize - c as usize);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                    for i in 0..len / size_of::<RawFd>() {
                        let f = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                        req.fds.push(OwnedFd::from_raw_fd(f));
                    }
                }
                (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if len >= size_of::<libc::ucred>() => {
                    let u: libc::ucred = std::ptr::read_unaligned(data.cast());
                    req.sender = Some(u.uid);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Ok(req)
}

//! A caller's iovecs (struct iovec arrays of sendmsg, recvmsg, readv).

use libc::iovec;

use crate::errno::Res;

/// A caller's iovecs, read or written at a running offset without a copy
/// of their own (a send or receive must not allocate: signal handlers call
/// them, see README "Messages").
#[derive(Clone, Copy)]
pub struct Iovs {
    pub iov: *const iovec,
    pub n: usize,
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

    pub fn each(&self) -> impl Iterator<Item = (*mut u8, usize)> + '_ {
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
    pub fn read_at(&self, mut off: usize, dst: &mut [u8]) -> usize {
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
    pub fn write_at(&self, mut off: usize, src: &[u8]) -> usize {
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

    pub fn gathered(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        self.read_at(0, &mut out);
        out
    }
}

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

    /// Walks at most `want` bytes of the iovecs from `off` on, a piece an
    /// iovec: `piece(at, done, k)` for `k` bytes at `at` in the iovec that
    /// are bytes `done..done + k` of the walk. Returns how many were walked.
    fn walk_at(
        &self,
        mut off: usize,
        want: usize,
        mut piece: impl FnMut(*mut u8, usize, usize),
    ) -> usize {
        let mut done = 0;
        for (base, len) in self.each() {
            if done == want {
                break;
            }
            if off >= len {
                off -= len;
                continue;
            }
            let k = (len - off).min(want - done);
            // SAFETY: off < len, inside the iovec.
            piece(unsafe { base.add(off) }, done, k);
            done += k;
            off = 0;
        }
        done
    }

    /// Copies the bytes at `off` into `dst`; returns how many.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> usize {
        let to = dst.as_mut_ptr();
        self.walk_at(off, dst.len(), |at, done, k| {
            // SAFETY: inside the iovec and inside dst.
            unsafe { std::ptr::copy_nonoverlapping(at, to.add(done), k) }
        })
    }

    /// Copies `src` into the iovecs at `off`; returns how many fitted.
    pub fn write_at(&self, off: usize, src: &[u8]) -> usize {
        self.walk_at(off, src.len(), |at, done, k| {
            // SAFETY: inside the iovec and inside src.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(done), at, k) }
        })
    }

    pub fn gathered(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        self.read_at(0, &mut out);
        out
    }
}

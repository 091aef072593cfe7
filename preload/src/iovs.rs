//! A caller's iovecs (struct iovec arrays of sendmsg, recvmsg, readv).

use libc::iovec;

use crate::errno::Res;
use crate::user;

/// iovecs, read or written at a running offset without a copy of their
/// bytes (a send or receive must not allocate: signal handlers call them,
/// see README "Messages"). The array itself is the library's (`IovCopy`, or
/// a local one); the buffers are the program's, reached through `user`.
#[derive(Clone, Copy)]
pub struct Iovs {
    pub iov: *const iovec,
    pub n: usize,
}

/// iovecs a call copies from the program before anything else, as
/// import_iovec does (EFAULT when the array cannot be read): up to
/// `INLINE` in place, more on the heap.
pub struct IovCopy {
    inline: [iovec; INLINE],
    heap: Vec<iovec>,
    n: usize,
}

const INLINE: usize = 8;

/// __sys_sendmsg's and __sys_recvmsg's UIO_MAXIOV.
const UIO_MAXIOV: usize = 1024;

impl IovCopy {
    /// A msghdr's iovecs, refused as Linux refuses them: more than
    /// UIO_MAXIOV is EMSGSIZE, an array that cannot be read EFAULT.
    pub fn of_msg(iov: *const iovec, n: usize) -> Res<IovCopy> {
        if n > UIO_MAXIOV {
            return Err(libc::EMSGSIZE);
        }
        let empty = iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut c = IovCopy {
            inline: [empty; INLINE],
            heap: Vec::new(),
            n,
        };
        let bytes = n * std::mem::size_of::<iovec>();
        let to: *mut iovec = if n <= INLINE {
            c.inline.as_mut_ptr()
        } else {
            c.heap = vec![empty; n];
            c.heap.as_mut_ptr()
        };
        // SAFETY: `to` has room for n iovecs.
        unsafe { user::copy(to.cast(), iov.cast(), bytes)? };
        Ok(c)
    }

    pub fn iovs(&self) -> Iovs {
        let p = if self.n <= INLINE {
            self.inline.as_ptr()
        } else {
            self.heap.as_ptr()
        };
        Iovs::new(p, self.n)
    }
}

impl Iovs {
    /// iovecs of the library's own (a local iovec, an `IovCopy`).
    pub fn new(iov: *const iovec, n: usize) -> Iovs {
        Iovs {
            iov: if n == 0 { std::ptr::null() } else { iov },
            n,
        }
    }

    pub fn each(&self) -> impl Iterator<Item = (*mut u8, usize)> + '_ {
        // SAFETY: the iovec array is the library's (see `Iovs`).
        (0..self.n).map(|i| unsafe {
            let v = &*self.iov.add(i);
            (v.iov_base as *mut u8, v.iov_len)
        })
    }

    pub fn len(&self) -> usize {
        self.each().fold(0usize, |a, (_, l)| a.saturating_add(l))
    }

    /// Walks at most `want` bytes of the iovecs from `off` on, a piece an
    /// iovec: `piece(at, done, k)` for `k` bytes at `at` in the iovec that
    /// are bytes `done..done + k` of the walk. Returns how many were walked;
    /// a piece's error ends the walk.
    fn walk_at(
        &self,
        mut off: usize,
        want: usize,
        mut piece: impl FnMut(*mut u8, usize, usize) -> Res<()>,
    ) -> Res<usize> {
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
            piece(base.wrapping_add(off), done, k)?;
            done += k;
            off = 0;
        }
        Ok(done)
    }

    /// Copies the bytes at `off` into `dst`; returns how many. EFAULT when
    /// the program's buffers cannot be read.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> Res<usize> {
        let to = dst.as_mut_ptr();
        self.walk_at(off, dst.len(), |at, done, k| {
            // SAFETY: inside dst; `at` is the program's.
            unsafe { user::copy(to.add(done), at, k) }
        })
    }

    /// Copies `src` into the iovecs at `off`; returns how many fitted.
    /// EFAULT when the program's buffers cannot be written.
    pub fn write_at(&self, off: usize, src: &[u8]) -> Res<usize> {
        self.walk_at(off, src.len(), |at, done, k| {
            // SAFETY: inside src; `at` is the program's.
            unsafe { user::copy(at, src.as_ptr().add(done), k) }
        })
    }

    /// How many of the first `limit` bytes can be read (user::readable, a
    /// byte a page).
    pub fn readable(&self, limit: usize) -> usize {
        self.usable_at(0, limit, |at, k| user::readable(at, k))
    }

    /// How many of the `limit` bytes from `off` on can be written, found
    /// without changing them (user::writable, a probe a page).
    pub fn writable_at(&self, off: usize, limit: usize) -> usize {
        self.usable_at(off, limit, user::writable)
    }

    /// How many of the `limit` bytes from `off` on pass `probe` (which says how
    /// many of the `k` bytes at a place do): up to the first that does not.
    fn usable_at(
        &self,
        off: usize,
        limit: usize,
        probe: impl Fn(*mut u8, usize) -> usize,
    ) -> usize {
        let mut prefix = None;
        let walked = self.walk_at(off, limit, |at, done, k| {
            let ok = probe(at, k);
            if ok < k {
                prefix = Some(done + ok);
                return Err(libc::EFAULT);
            }
            Ok(())
        });
        prefix.unwrap_or(walked.unwrap_or(0))
    }

    pub fn gathered(&self) -> Res<Vec<u8>> {
        let mut out = vec![0u8; self.len()];
        self.read_at(0, &mut out)?;
        Ok(out)
    }
}

//! The target's memory, read and written with process_vm_readv/writev.
//! Every argument is copied once into the supervisor and then validated:
//! nothing is read twice, as another thread of the target may change it.
//! The thread id may have stopped naming the trapped thread (an exec by
//! another thread, a reused id): a read counts only when its call is
//! still pending after it, and a write is made only right after a look
//! that it is (pending.rs).

use libc::{c_void, iovec, pid_t};

use super::pending;

/// Most bytes one call copies (a send's payload is cut to this): one past
/// the largest datagram, which is then refused as on Linux.
pub const MAX_COPY: usize = udsfs_proto::record::MAX_DGRAM + 1;

/// `len` bytes at `addr` of task `pid`; EFAULT for memory it cannot read.
pub fn read(pid: pid_t, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if addr == 0 || len > MAX_COPY {
        return Err(libc::EFAULT);
    }
    let mut buf = vec![0u8; len];
    let local = iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: `local` is our own buffer of `len` bytes; the remote side is
    // checked by the kernel.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n != len as isize {
        return Err(libc::EFAULT);
    }
    pending::check_read(pid)?;
    Ok(buf)
}

/// Writes `data` at `addr` of task `pid`; EFAULT when it does not fit.
pub fn write(pid: pid_t, addr: u64, data: &[u8]) -> Result<(), i32> {
    if data.is_empty() {
        return Ok(());
    }
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let local = iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let remote = iovec {
        iov_base: addr as *mut c_void,
        iov_len: data.len(),
    };
    pending::check(pid)?;
    // SAFETY: `local` is read only; the kernel checks the remote side.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if n != data.len() as isize {
        return Err(libc::EFAULT);
    }
    Ok(())
}

pub fn read_u32(pid: pid_t, addr: u64) -> Result<u32, i32> {
    let b = read(pid, addr, 4)?;
    Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

pub fn write_u32(pid: pid_t, addr: u64, v: u32) -> Result<(), i32> {
    write(pid, addr, &v.to_ne_bytes())
}

/// A NUL-terminated string of the target, at most `max` bytes (without
/// the NUL), read a page at a time so that a string near the end of a
/// mapping is still read. ENAMETOOLONG past `max`.
pub fn read_cstr(pid: pid_t, addr: u64, max: usize) -> Result<Vec<u8>, i32> {
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let to_page = 4096 - (at % 4096) as usize;
        let chunk = read(pid, at, to_page)?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return if out.len() > max {
                Err(libc::ENAMETOOLONG)
            } else {
                Ok(out)
            };
        }
        out.extend_from_slice(&chunk);
        if out.len() > max {
            return Err(libc::ENAMETOOLONG);
        }
        at += to_page as u64;
    }
}

/// A struct iovec array of the target: (base, len) pairs, `n` of them
/// (at most UIO_MAXIOV, as the kernel allows).
pub fn read_iovecs(pid: pid_t, addr: u64, n: usize) -> Result<Vec<(u64, usize)>, i32> {
    if n > 1024 {
        return Err(libc::EMSGSIZE);
    }
    let raw = read(pid, addr, n * 16)?;
    Ok(raw
        .chunks_exact(16)
        .map(|c| {
            let base = u64::from_ne_bytes(c[..8].try_into().unwrap_or([0; 8]));
            let len = u64::from_ne_bytes(c[8..].try_into().unwrap_or([0; 8]));
            (base, len.min(isize::MAX as u64) as usize)
        })
        .collect())
}

/// The remote iovecs of the first `limit` bytes an iovec list names (the
/// empty ones left out), and how many bytes they hold.
fn remote_iovecs(iov: &[(u64, usize)], limit: usize) -> (Vec<iovec>, usize) {
    let mut out = Vec::with_capacity(iov.len());
    let mut total = 0usize;
    for &(base, len) in iov {
        let k = len.min(limit - total);
        if k > 0 {
            out.push(iovec {
                iov_base: base as *mut c_void,
                iov_len: k,
            });
        }
        total += k;
        if total >= limit {
            break;
        }
    }
    (out, total)
}

/// Gathers the bytes an iovec list names, up to `limit` in all: one
/// process_vm_readv for the whole list (at most UIO_MAXIOV entries, as
/// `read_iovecs` gives); EFAULT when any of it cannot be read.
pub fn gather(pid: pid_t, iov: &[(u64, usize)], limit: usize) -> Result<Vec<u8>, i32> {
    let (remote, total) = remote_iovecs(iov, limit.min(MAX_COPY));
    if total == 0 {
        return Ok(Vec::new());
    }
    if remote.iter().any(|r| r.iov_base.is_null()) {
        return Err(libc::EFAULT);
    }
    let mut buf = vec![0u8; total];
    let local = iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: total,
    };
    // SAFETY: `local` is our own buffer of `total` bytes; the kernel checks
    // the remote side.
    let n =
        unsafe { libc::process_vm_readv(pid, &local, 1, remote.as_ptr(), remote.len() as _, 0) };
    if n != total as isize {
        return Err(libc::EFAULT);
    }
    pending::check_read(pid)?;
    Ok(buf)
}

/// How many of the first `limit` bytes an iovec list names can be written,
/// found without changing them: a byte of each page is read and written
/// back (a page is writable whole or not at all). A receive asks this
/// before it takes a stream's bytes, which Linux leaves queued when they
/// cannot be copied. (A byte another thread of the target stores between
/// the two copies is put back: that thread races with the receive itself.)
pub fn writable_prefix(pid: pid_t, iov: &[(u64, usize)], limit: usize) -> usize {
    const PAGE: u64 = 4096;
    // (where, how many bytes of the walk lie before it, up to the end of its page).
    let mut probes: Vec<(u64, usize)> = Vec::new();
    let mut walked = 0usize;
    for &(base, len) in iov {
        let len = len.min(limit - walked);
        let mut at = base;
        let end = base.saturating_add(len as u64);
        while at < end {
            probes.push((at, walked + (at - base) as usize));
            at = (at / PAGE + 1) * PAGE;
        }
        walked += len;
        if walked >= limit {
            break;
        }
    }
    let mut bytes = vec![0u8; probes.len()];
    let ok = |n: isize, want: usize| n >= 0 && n as usize == want;
    // One byte of each page, in order: the first that fails ends the prefix.
    let local: Vec<iovec> = bytes
        .iter_mut()
        .map(|b| iovec {
            iov_base: (b as *mut u8).cast(),
            iov_len: 1,
        })
        .collect();
    let remote: Vec<iovec> = probes
        .iter()
        .map(|&(at, _)| iovec {
            iov_base: at as *mut c_void,
            iov_len: 1,
        })
        .collect();
    // Nothing written back (none of it counts) once the call is gone.
    if !pending::still(pid) {
        return 0;
    }
    let mut good = 0;
    for (l, r) in local.chunks(1024).zip(remote.chunks(1024)) {
        // SAFETY: `local` points into `bytes`; the kernel checks the remote side.
        let n = unsafe {
            libc::process_vm_readv(pid, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
        };
        let read = n.max(0) as usize;
        // SAFETY: writes back what was read, to the same places.
        let w = unsafe {
            libc::process_vm_writev(pid, l.as_ptr(), read as _, r.as_ptr(), read as _, 0)
        };
        let written = if ok(w, read) { read } else { w.max(0) as usize };
        good += written;
        if !ok(n, l.len()) || written < read {
            break;
        }
    }
    match probes.get(good) {
        Some(&(_, before)) => before,
        None => walked,
    }
}

/// Scatters `data` over an iovec list: one process_vm_writev for the
/// whole list; EFAULT when any of it cannot be written (what comes before
/// that is written, as a copy in turn would).
pub fn scatter(pid: pid_t, iov: &[(u64, usize)], data: &[u8]) -> Result<(), i32> {
    let (remote, total) = remote_iovecs(iov, data.len());
    if total == 0 {
        return Ok(());
    }
    if remote.iter().any(|r| r.iov_base.is_null()) {
        return Err(libc::EFAULT);
    }
    let local = iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: total,
    };
    pending::check(pid)?;
    // SAFETY: `local` is read only; the kernel checks the remote side.
    let n =
        unsafe { libc::process_vm_writev(pid, &local, 1, remote.as_ptr(), remote.len() as _, 0) };
    if n != total as isize {
        return Err(libc::EFAULT);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_own_memory_and_refuses_bad_addresses() {
        let me = std::process::id() as pid_t;
        let src = *b"hello, target";
        let got = read(me, src.as_ptr() as u64, src.len()).expect("read");
        assert_eq!(got, src);
        let mut dst = [0u8; 5];
        write(me, dst.as_mut_ptr() as u64, b"world").expect("write");
        assert_eq!(&dst, b"world");
        assert_eq!(read(me, 8, 4), Err(libc::EFAULT));
        assert_eq!(read(me, 0, 4), Err(libc::EFAULT));
        assert_eq!(write(me, 8, b"x"), Err(libc::EFAULT));
        assert_eq!(read(me, 8, MAX_COPY + 1), Err(libc::EFAULT));
        let s = b"a/path\0junk";
        assert_eq!(
            read_cstr(me, s.as_ptr() as u64, 100),
            Ok(b"a/path".to_vec())
        );
        assert_eq!(read_cstr(me, s.as_ptr() as u64, 3), Err(libc::ENAMETOOLONG));
        assert_eq!(read_cstr(me, 8, 100), Err(libc::EFAULT));
    }

    /// gather and scatter copy a whole iovec list in one call each, in
    /// order, cut to the limit or the data, and fail EFAULT on a bad entry.
    #[test]
    fn gathers_and_scatters_iovec_lists() {
        let me = std::process::id() as pid_t;
        let (a, b) = (*b"hello, ", *b"world!");
        let iov = [
            (a.as_ptr() as u64, a.len()),
            (0, 0),
            (b.as_ptr() as u64, b.len()),
        ];
        assert_eq!(gather(me, &iov, 100), Ok(b"hello, world!".to_vec()));
        assert_eq!(gather(me, &iov, 9), Ok(b"hello, wo".to_vec()));
        assert_eq!(gather(me, &[(8, 4)], 100), Err(libc::EFAULT));
        assert_eq!(
            gather(me, &[(a.as_ptr() as u64, 2), (0, 3)], 100),
            Err(libc::EFAULT)
        );
        let (mut x, mut y) = ([0u8; 3], [0u8; 4]);
        let out = [
            (x.as_mut_ptr() as u64, x.len()),
            (y.as_mut_ptr() as u64, y.len()),
        ];
        scatter(me, &out, b"abcdef").expect("scatter");
        assert_eq!((&x, &y[..3], y[3]), (b"abc", &b"def"[..], 0));
        assert_eq!(scatter(me, &[(8, 4)], b"zz"), Err(libc::EFAULT));
    }
}

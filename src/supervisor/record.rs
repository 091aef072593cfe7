//! Datagrams too large for one message ioctl go through the socket's `msg`
//! file as one record (`udsfs_calls::record`), as the library sends and
//! reads them. A blocking send's write parks in the daemon until the record
//! fits (under SO_SNDTIMEO); reads never wait (the record is there).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use udsfs_calls::record;

use super::daemon::{Daemon, Extras, Got, Res};

fn path(d: &Daemon, id: u64) -> Res<CString> {
    let p = d.mount.join(format!(".udsfs/sock/{id}/msg"));
    CString::new(p.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)
}

/// Sends `data` as one record of socket `id`; EAGAIN when the queue is
/// full, or with `wait` parked until it is not (EINTR when interrupted).
pub fn send(d: &Daemon, id: u64, data: &[u8], x: &Extras, wait: bool) -> Res<usize> {
    record::send(&path(d, id)?, data, x, !wait)
}

/// Reads the record at the head of socket `id`'s queue, `want` bytes of
/// its payload at most.
pub fn recv(d: &Daemon, id: u64, want: usize) -> Res<Got> {
    let mut data = Vec::new();
    let m = record::recv(&path(d, id)?, want, true, |b| {
        data.extend_from_slice(b);
        Ok(b.len())
    })?;
    Ok(Got { data, m })
}

//! A message too large for one message ioctl goes through the socket's `msg`
//! file as one record (`udsfs_proto::record`), opened for just that call. A
//! send's write parks in the daemon until the record fits (under
//! SO_SNDTIMEO) unless `nonblock`; a read never waits (the record is
//! there).

use std::ffi::CStr;

use udsfs_proto::addr::Addr;
use udsfs_proto::record::{self, MAX_DGRAM, SendHeader};
use udsfs_proto::{Cred, Res};

use crate::client::{Extras, Got};

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The `msg` file at `path`, open for writing or reading, closed when
/// dropped.
struct MsgFile(i32);

impl MsgFile {
    fn open(path: &CStr, write: bool, nonblock: bool) -> Res<MsgFile> {
        let mode = if write {
            libc::O_WRONLY
        } else {
            libc::O_RDONLY
        };
        let fl = mode | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
        // SAFETY: a NUL-terminated path.
        let h = unsafe { libc::open(path.as_ptr(), fl) };
        if h < 0 { Err(errno()) } else { Ok(MsgFile(h)) }
    }
}

impl Drop for MsgFile {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.0) };
    }
}

/// Sends `data` as one record through the `msg` file at `path`; EAGAIN when
/// the queue is full (or filled while the record's pieces came: a datagram
/// goes whole or not at all). The payload bytes sent.
pub fn send(path: &CStr, data: &[u8], x: &Extras, nonblock: bool) -> Res<usize> {
    let head = SendHeader {
        len: data.len(),
        to: x.to.map(Addr::from_wire).transpose()?.flatten(),
        creds: x.creds.map(Cred::from_words),
        rights: x.rights.to_vec(),
        oob: false,
    }
    .format();
    let mut rec = head.into_bytes();
    rec.extend_from_slice(data);
    let f = MsgFile::open(path, true, nonblock)?;
    // SAFETY: writes a local buffer.
    let n = unsafe { libc::write(f.0, rec.as_ptr().cast(), rec.len()) };
    if n < 0 {
        return Err(errno());
    }
    record::record_written(n as usize, rec.len())?;
    Ok(data.len())
}

/// Reads the record at the head of the queue of the `msg` file at `path`,
/// `want` payload bytes of it at most, and hands them to `put` (which says
/// how many it placed). EIO when it is not a record the daemon writes.
pub fn recv(
    path: &CStr,
    want: usize,
    nonblock: bool,
    put: impl FnOnce(&[u8]) -> Res<usize>,
) -> Res<Got> {
    let f = MsgFile::open(path, false, nonblock)?;
    let read = |b: &mut [u8]| {
        // SAFETY: reads into the given buffer.
        match unsafe { libc::read(f.0, b.as_mut_ptr().cast(), b.len()) } {
            n if n < 0 => Err(errno()),
            n => Ok(n as usize),
        }
    };
    let (h, payload) = record::read_record(read, want.min(MAX_DGRAM))?;
    Ok(Got {
        len: put(&payload[..payload.len().min(want)])?,
        full_len: h.len,
        // Records name the sender in the mount's terms.
        from: h.from.map(|a| a.to_wire()).unwrap_or_default(),
        creds: h.creds.map(Cred::to_words),
        // A record names the sender's pid only (`pidfd=`): no pinned pidfd.
        pidfd: h.pidfd,
        rights: h.rights,
        ctrunc: h.ctrunc,
        stamp: h.stamp,
        ..Got::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use udsfs_proto::record::RecvHeader;

    #[test]
    fn record_addresses_escape_and_come_back() {
        for wire in [&b"run/x.sock"[..], b"\0abs name", b"a\\b", b"\xff/\x01"] {
            let to = Addr::from_wire(wire).unwrap();
            let e = to.as_ref().unwrap().display();
            assert!(!e.contains(' ') && !e.contains('\n'), "{e}");
            let line = format!("len=0 from={e}");
            let back = RecvHeader::parse(line.as_bytes()).unwrap().from;
            assert_eq!(back.map(|a| a.to_wire()).as_deref(), Some(wire));
        }
        // Cut short: refused, as the daemon refuses it, and no panic.
        assert_eq!(RecvHeader::parse(b"len=0 from=@\\x4"), Err(libc::EINVAL));
    }
}

//! A message too large for one message ioctl goes through the socket's
//! `msg` file as one record (`udsfs_proto::record`), opened for just that
//! call.

use libc::c_int;
use udsfs_proto::addr::Addr;
use udsfs_proto::record::{RecvHeader, SendHeader};
use udsfs_proto::Cred;

use crate::errno::{errno, Res};
use crate::iovs::Iovs;
use crate::log;
use crate::message::{Got, Meta};
use crate::mount::{self, Mount};

enum MsgIo<'a> {
    Write(&'a [u8]),
    Read(&'a mut [u8]),
}

/// One write or read of socket `id`'s `msg` file, opened for just this call.
fn msg_file(m: &Mount, id: u64, nonblock: bool, io: MsgIo) -> Res<usize> {
    let path = m.sock_file(id, "msg");
    let mode = match io {
        MsgIo::Write(_) => libc::O_WRONLY,
        MsgIo::Read(_) => libc::O_RDONLY,
    };
    let fl = mode | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
    // SAFETY: path is NUL-terminated; the I/O is on the given buffer.
    unsafe {
        let h = libc::open(path.as_ptr(), fl);
        if h < 0 {
            return Err(errno());
        }
        let n = match io {
            MsgIo::Write(b) => libc::write(h, b.as_ptr().cast(), b.len()),
            MsgIo::Read(b) => libc::read(h, b.as_mut_ptr().cast(), b.len()),
        };
        let e = errno();
        libc::close(h);
        if n < 0 {
            return Err(e);
        }
        Ok(n as usize)
    }
}

/// Sends `data` as one record; the payload bytes sent.
pub fn send(m: &Mount, fd: c_int, data: &[u8], meta: &Meta, nonblock: bool) -> Res<usize> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let head = SendHeader {
        len: data.len(),
        to: meta
            .to
            .as_deref()
            .map(Addr::from_wire)
            .transpose()?
            .flatten(),
        creds: meta.creds.map(Cred::from_words),
        rights: meta.rights.clone(),
        oob: false,
    }
    .format();
    let mut bytes = head.clone().into_bytes();
    bytes.extend_from_slice(data);
    let n = msg_file(m, id, nonblock, MsgIo::Write(&bytes))?;
    // The file reports the bytes of the record it queued: a datagram goes
    // whole or not at all, so anything short of it was not sent.
    if n < bytes.len() {
        log::say(&format!(
            "a record of {} bytes was taken {n} bytes short",
            bytes.len()
        ));
        return Err(libc::EAGAIN);
    }
    Ok(n - head.len())
}

/// Receives the record at the head of the queue, `want` payload bytes of
/// it at most, into `dst` at `at`.
pub fn recv(m: &Mount, fd: c_int, want: usize, nonblock: bool, dst: Iovs, at: usize) -> Res<Got> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let mut buf = vec![0u8; want + 8192];
    let n = msg_file(m, id, nonblock, MsgIo::Read(&mut buf))?;
    buf.truncate(n);
    // The daemon wrote it: one it cannot have written is an I/O error.
    let (h, payload) = RecvHeader::split(&buf).map_err(|_| {
        log::say("a msg record that does not parse (EIO)");
        libc::EIO
    })?;
    Ok(Got {
        len: dst.write_at(at, &payload[..payload.len().min(want)])?,
        full_len: h.len,
        // Records name the sender in the mount's terms.
        from: h.from.map(|a| a.to_wire()).unwrap_or_default(),
        creds: h.creds.map(Cred::to_words),
        pidfd: h.pidfd,
        rights: h.rights,
        ctrunc: h.ctrunc,
        ..Got::default()
    })
}

//! A message too large for one message ioctl goes through the socket's
//! `msg` file as one record (`udsfs_proto::record`), opened for just that
//! call.

use libc::c_int;
use udsfs_proto::addr::Addr;
use udsfs_proto::record::{self, RecvHeader, SendHeader};
use udsfs_proto::Cred;

use crate::errno::{errno, Res};
use crate::iovs::Iovs;
use crate::log;
use crate::message::{Got, Meta};
use crate::mount::{self, Mount};

enum MsgIo<'a> {
    Write(&'a [u8]),
    /// A record read (`udsfs_proto::record::read_record`), `want` payload
    /// bytes of it at most.
    Read(usize, &'a mut Option<(RecvHeader, Vec<u8>)>),
}

/// One write or record read of socket `id`'s `msg` file, opened for just
/// this call.
fn msg_file(m: &Mount, id: u64, nonblock: bool, io: MsgIo) -> Res<usize> {
    let path = m.sock_file(id, "msg");
    let mode = match io {
        MsgIo::Write(_) => libc::O_WRONLY,
        MsgIo::Read(..) => libc::O_RDONLY,
    };
    let fl = mode | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
    // SAFETY: path is NUL-terminated; the I/O is on the given buffer.
    unsafe {
        let h = libc::open(path.as_ptr(), fl);
        if h < 0 {
            return Err(errno());
        }
        let r = match io {
            MsgIo::Write(b) => match libc::write(h, b.as_ptr().cast(), b.len()) {
                n if n < 0 => Err(errno()),
                n => Ok(n as usize),
            },
            MsgIo::Read(want, out) => {
                let read = |b: &mut [u8]| match libc::read(h, b.as_mut_ptr().cast(), b.len()) {
                    n if n < 0 => Err(errno()),
                    n => Ok(n as usize),
                };
                record::read_record(read, want).map(|got| {
                    *out = Some(got);
                    0
                })
            }
        };
        libc::close(h);
        r
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
    record::record_written(n, bytes.len()).inspect_err(|_| {
        log::say(&format!(
            "a record of {} bytes was taken {n} bytes short",
            bytes.len()
        ));
    })?;
    Ok(n - head.len())
}

/// Receives the record at the head of the queue, `want` payload bytes of
/// it at most, into `dst` at `at`.
pub fn recv(m: &Mount, fd: c_int, want: usize, nonblock: bool, dst: Iovs, at: usize) -> Res<Got> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let mut got = None;
    // The daemon wrote it: one it cannot have written is an I/O error.
    msg_file(m, id, nonblock, MsgIo::Read(want, &mut got)).inspect_err(|&e| {
        if e == libc::EIO {
            log::say("a msg record that does not parse, or a failed read of one (EIO)");
        }
    })?;
    let (h, payload) = got.ok_or(libc::EIO)?;
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

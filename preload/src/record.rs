//! A message too large for one message ioctl goes through the socket's
//! `msg` file as one record (udsfs_calls::record), opened for just that
//! call: the library's part is where the file is and the log.

use libc::c_int;
use udsfs_calls::record;

use crate::errno::Res;
use crate::iovs::Iovs;
use crate::log;
use crate::message::{Got, Meta};
use crate::mount::{self, Mount};

/// Sends `data` as one record; the payload bytes sent.
pub fn send(m: &Mount, fd: c_int, data: &[u8], meta: &Meta, nonblock: bool) -> Res<usize> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    record::send(&m.sock_file(id, "msg"), data, &meta.extras(), nonblock)
}

/// Receives the record at the head of the queue, `want` payload bytes of
/// it at most, into `dst` at `at`.
pub fn recv(m: &Mount, fd: c_int, want: usize, nonblock: bool, dst: Iovs, at: usize) -> Res<Got> {
    let id = mount::sock_id(fd).ok_or(libc::EBADF)?;
    let path = m.sock_file(id, "msg");
    // The daemon wrote it: one it cannot have written is an I/O error.
    record::recv(&path, want, nonblock, |b| dst.write_at(at, b)).inspect_err(|&e| {
        if e == libc::EIO {
            log::say("a msg record that does not parse, or a failed read of one (EIO)");
        }
    })
}

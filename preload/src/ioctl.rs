//! The library's ioctl client: control operations and message ioctls on a
//! udsfs data file, in the daemon's format (`udsfs_proto::ioctl`).

use libc::c_int;
use udsfs_proto::ioctl::{self, Ctl, Info, MsgHead, Op, MSG_BUF};

use crate::errno::Res;

/// One control operation with `c`'s inputs; what came back.
pub fn ctl(fd: c_int, c: Ctl) -> Res<Ctl> {
    ioctl::request(fd, c)
}

/// One control operation that takes `arg` only.
pub fn op(fd: c_int, op: Op, arg: i32) -> Res<Ctl> {
    ctl(fd, Ctl::new(op, arg))
}

/// bind() of `wire`, which the program gave as sun_path `given` (empty for
/// an abstract name or autobind): the daemon reports `given` back, as Linux.
pub fn bind(fd: c_int, wire: &[u8], given: &[u8]) -> Res<()> {
    ctl(fd, Ctl::new(Op::Bind, 0).with_addr(wire).with_given(given)).map(|_| ())
}

pub fn info(fd: c_int) -> Res<Info> {
    op(fd, Op::Info, 0).map(|c| c.values())
}

pub fn is_stream(fd: c_int) -> bool {
    info(fd).is_ok_and(|i| i.ty == libc::SOCK_STREAM)
}

/// One UDSFS_IOC_MSG buffer, on the stack (a send or receive must not
/// allocate: signal handlers call them).
#[repr(C, align(8))]
pub struct MsgBuf(pub [u8; MSG_BUF]);

impl MsgBuf {
    pub fn new() -> MsgBuf {
        MsgBuf([0; MSG_BUF])
    }
}

/// One message ioctl with `buf` (its head already written).
pub fn message(fd: c_int, buf: &mut MsgBuf) -> Res<MsgHead> {
    ioctl::message(fd, &mut buf.0)
}

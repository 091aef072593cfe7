//! ioctl on socket files. None is supported yet: shells probe terminals
//! with TCGETS, and these are no terminals.

use fuser::{Errno, ReplyIoctl};

use super::Inner;

impl Inner {
    pub(super) fn ioctl(
        &self,
        _fh: u64,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }
}

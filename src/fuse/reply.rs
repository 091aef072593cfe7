//! Where the answer to a read, write or open goes: fuser's reply objects
//! for the kernel, or anything else (an in-process caller, a test). The
//! open-file layer, the park table and retries only see this trait, so they
//! run without a mount.

use fuser::{FileHandle, FopenFlags, ReplyData, ReplyIoctl, ReplyOpen, ReplyWrite};
use nix::errno::Errno;

/// The answer to one request; each method consumes the sink, so a request
/// is answered once.
pub trait Reply: Send + 'static {
    fn data(self: Box<Self>, data: &[u8]);
    fn written(self: Box<Self>, n: u32);
    /// `flags` are FOPEN_* bits.
    fn opened(self: Box<Self>, fh: u64, flags: u32);
    fn error(self: Box<Self>, err: Errno);
    /// An ioctl's answer: result 0 and the bytes copied out. Sinks that are
    /// no mount's take it as data.
    fn ioctl(self: Box<Self>, out: &[u8]) {
        self.data(out)
    }
}

pub type ReplySink = Box<dyn Reply>;

/// fuser's reply for each kind of request.
pub enum FuseReply {
    Data(ReplyData),
    Write(ReplyWrite),
    Open(ReplyOpen),
    Ioctl(ReplyIoctl),
}

fn ferr(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e as i32)
}

impl FuseReply {
    /// An answer of the wrong kind is a bug here: log it, answer EIO.
    fn mismatch(self, what: &str) {
        log::error!("a {what} answer to a request of another kind: EIO");
        match self {
            FuseReply::Data(r) => r.error(fuser::Errno::EIO),
            FuseReply::Write(r) => r.error(fuser::Errno::EIO),
            FuseReply::Open(r) => r.error(fuser::Errno::EIO),
            FuseReply::Ioctl(r) => r.error(fuser::Errno::EIO),
        }
    }
}

impl Reply for FuseReply {
    fn data(self: Box<Self>, data: &[u8]) {
        match *self {
            FuseReply::Data(r) => r.data(data),
            other => other.mismatch("data"),
        }
    }

    fn written(self: Box<Self>, n: u32) {
        match *self {
            FuseReply::Write(r) => r.written(n),
            other => other.mismatch("written"),
        }
    }

    fn opened(self: Box<Self>, fh: u64, flags: u32) {
        match *self {
            FuseReply::Open(r) => r.opened(FileHandle(fh), FopenFlags::from_bits_retain(flags)),
            other => other.mismatch("opened"),
        }
    }

    fn error(self: Box<Self>, err: Errno) {
        match *self {
            FuseReply::Data(r) => r.error(ferr(err)),
            FuseReply::Write(r) => r.error(ferr(err)),
            FuseReply::Open(r) => r.error(ferr(err)),
            FuseReply::Ioctl(r) => r.error(ferr(err)),
        }
    }

    fn ioctl(self: Box<Self>, out: &[u8]) {
        match *self {
            FuseReply::Ioctl(r) => r.ioctl(0, out),
            other => other.mismatch("ioctl"),
        }
    }
}

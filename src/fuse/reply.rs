//! Where the answer to a request that may wait goes (read, write, open, a
//! message ioctl): one reply type per kind of answer, each over a `Sink` of
//! its own value, so an answer of the wrong kind does not compile. The
//! adapter (`adapter.rs`) makes fuser's replies sinks; an in-process caller
//! or a test brings its own, so the park table and retries run without a
//! mount.

use nix::errno::Errno;

/// Takes one answer, value or errno; consumed, so a request is answered once.
pub trait Sink<T>: Send + 'static {
    fn send(self: Box<Self>, answer: Result<T, Errno>);
}

/// What an open answers: the handle and its FOPEN_* bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub flags: u32,
}

/// What a udsfs ioctl copies out (its result is 0).
#[derive(Debug, PartialEq, Eq)]
pub struct IoctlOut(pub Vec<u8>);

/// The answer owed to a read: its data. A sink of another kind of answer
/// does not compile:
///
/// ```
/// use nix::errno::Errno;
/// use udsfs::fuse::reply::{DataReply, Sink};
/// struct Bytes;
/// impl Sink<Vec<u8>> for Bytes {
///     fn send(self: Box<Self>, _: Result<Vec<u8>, Errno>) {}
/// }
/// DataReply::new(Bytes).data(b"x".to_vec());
/// ```
///
/// ```compile_fail
/// use nix::errno::Errno;
/// use udsfs::fuse::reply::{DataReply, Sink};
/// struct Count;
/// impl Sink<u32> for Count {
///     fn send(self: Box<Self>, _: Result<u32, Errno>) {}
/// }
/// DataReply::new(Count).data(b"x".to_vec());
/// ```
pub type DataReply = Answer<Vec<u8>>;

/// The answer owed to a write: the count taken.
pub type WriteReply = Answer<u32>;

/// The answer owed to an open.
pub type OpenReply = Answer<Opened>;

/// The answer owed to an ioctl.
pub type IoctlReply = Answer<IoctlOut>;

/// The answer owed to a request that answers a `T` or an errno.
pub struct Answer<T>(Box<dyn Sink<T>>);

impl<T: 'static> Answer<T> {
    pub fn new(s: impl Sink<T>) -> Answer<T> {
        Answer(Box::new(s))
    }
    pub fn error(self, err: Errno) {
        self.0.send(Err(err))
    }
}

impl DataReply {
    pub fn data(self, data: Vec<u8>) {
        self.0.send(Ok(data))
    }
}

impl WriteReply {
    pub fn written(self, n: u32) {
        self.0.send(Ok(n))
    }
}

impl OpenReply {
    /// `flags` are FOPEN_* bits.
    pub fn opened(self, fh: u64, flags: u32) {
        self.0.send(Ok(Opened { fh, flags }))
    }
}

impl IoctlReply {
    pub fn ioctl(self, out: Vec<u8>) {
        self.0.send(Ok(IoctlOut(out)))
    }
}

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
pub struct DataReply(Box<dyn Sink<Vec<u8>>>);

/// The answer owed to a write: the count taken.
pub struct WriteReply(Box<dyn Sink<u32>>);

/// The answer owed to an open.
pub struct OpenReply(Box<dyn Sink<Opened>>);

/// The answer owed to an ioctl.
pub struct IoctlReply(Box<dyn Sink<IoctlOut>>);

impl DataReply {
    pub fn new(s: impl Sink<Vec<u8>>) -> DataReply {
        DataReply(Box::new(s))
    }
    pub fn data(self, data: Vec<u8>) {
        self.0.send(Ok(data))
    }
    pub fn error(self, err: Errno) {
        self.0.send(Err(err))
    }
}

impl WriteReply {
    pub fn new(s: impl Sink<u32>) -> WriteReply {
        WriteReply(Box::new(s))
    }
    pub fn written(self, n: u32) {
        self.0.send(Ok(n))
    }
    pub fn error(self, err: Errno) {
        self.0.send(Err(err))
    }
}

impl OpenReply {
    pub fn new(s: impl Sink<Opened>) -> OpenReply {
        OpenReply(Box::new(s))
    }
    /// `flags` are FOPEN_* bits.
    pub fn opened(self, fh: u64, flags: u32) {
        self.0.send(Ok(Opened { fh, flags }))
    }
    pub fn error(self, err: Errno) {
        self.0.send(Err(err))
    }
}

impl IoctlReply {
    pub fn new(s: impl Sink<IoctlOut>) -> IoctlReply {
        IoctlReply(Box::new(s))
    }
    pub fn ioctl(self, out: Vec<u8>) {
        self.0.send(Ok(IoctlOut(out)))
    }
    pub fn error(self, err: Errno) {
        self.0.send(Err(err))
    }
}

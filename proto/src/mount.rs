//! What a udsfs mount shows its clients outside the ioctls.

/// The size a socket's data file (and a clone or pair handle) claims: large
/// so that the kernel lets writers run in parallel (PARALLEL_DIRECT_WRITES
/// needs pos + len <= i_size). FIONREAD on a regular file answers its size
/// less the offset, which is how a client tells that answer from the daemon's.
pub const SOCKET_FILE_SIZE: u64 = 1 << 30;

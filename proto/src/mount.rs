//! What a udsfs mount shows its clients outside the ioctls.

/// The size a socket's data file (and a clone or pair handle) claims: the
/// kernel answers FIONREAD on a regular file with its size less the
/// offset, which is how a client tells that answer from the daemon's.
pub const SOCKET_FILE_SIZE: u64 = 1 << 30;

/// The directory of the mount's own files (`.udsfs/sock/N/data`, ...).
pub const CONTROL_DIR: &str = ".udsfs";

//! What a udsfs mount shows its clients outside the ioctls.

/// The size a socket's data file (and a clone or pair handle) claims: large
/// so that the kernel lets writers run in parallel (PARALLEL_DIRECT_WRITES
/// needs pos + len <= i_size). FIONREAD on a regular file answers its size
/// less the offset, which is how a client tells that answer from the daemon's.
pub const SOCKET_FILE_SIZE: u64 = 1 << 30;

/// What fstat and statx of a socket's data file report in its place, as
/// for a kernel socket: (mode S_IFSOCK | 0777, size 0, blocks 0). The
/// library's stat entry points and the supervisor's trapped stat calls
/// both put these in.
pub fn socket_stat() -> (u32, u64, u64) {
    (libc::S_IFSOCK | 0o777, 0, 0)
}

/// Inode numbers of a socket's files (`.udsfs/sock/N/FILE`): this tag in
/// the top byte (`INO_TAG_SHIFT`), N, and the file's code in the low four
/// bits. The daemon numbers its whole control tree so (src/fuse/inode.rs);
/// clients tell a data file by it without asking the daemon.
pub const INO_TAG_SHIFT: u32 = 56;
pub const INO_TAG_SOCK: u64 = 2;
/// The file code of a socket's data file.
pub const DATA_FILE_CODE: u64 = 2;

/// Whether `ino` is the inode number of a socket's data file.
pub fn is_data_ino(ino: u64) -> bool {
    ino >> INO_TAG_SHIFT == INO_TAG_SOCK && ino & 0xf == DATA_FILE_CODE
}

/// The directory of `.udsfs/` whose `clone` and `pair` make sockets of
/// type `ty` (SOCK_STREAM, ...); unix_create makes SOCK_RAW a datagram socket.
pub fn type_dir(ty: i32) -> Option<&'static str> {
    match ty {
        libc::SOCK_STREAM => Some("stream"),
        libc::SOCK_DGRAM | libc::SOCK_RAW => Some("dgram"),
        libc::SOCK_SEQPACKET => Some("seqpacket"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sockets_data_file_has_a_data_inode() {
        let ino = |tag: u64, n: u64, code: u64| (tag << INO_TAG_SHIFT) | (n << 4) | code;
        assert!(is_data_ino(ino(INO_TAG_SOCK, 99, DATA_FILE_CODE)));
        assert!(!is_data_ino(ino(INO_TAG_SOCK, 99, 3)), "its msg file");
        assert!(!is_data_ino(ino(1, 0, DATA_FILE_CODE)), "a control file");
        assert!(!is_data_ino(DATA_FILE_CODE), "a tree node");
    }

    #[test]
    fn socket_types_have_their_directories() {
        assert_eq!(type_dir(libc::SOCK_STREAM), Some("stream"));
        assert_eq!(type_dir(libc::SOCK_RAW), type_dir(libc::SOCK_DGRAM));
        assert_eq!(type_dir(libc::SOCK_SEQPACKET), Some("seqpacket"));
        assert_eq!(type_dir(libc::SOCK_RDM), None);
        assert_eq!(type_dir(libc::SOCK_STREAM | libc::SOCK_NONBLOCK), None);
    }
}

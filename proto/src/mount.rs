//! What a udsfs mount shows its clients outside the ioctls.

/// The size a socket's data file (and a clone or pair handle) claims: large
/// so that the kernel lets writers run in parallel (PARALLEL_DIRECT_WRITES
/// needs pos + len <= i_size). FIONREAD on a regular file answers its size
/// less the offset, which is how a client tells that answer from the daemon's.
pub const SOCKET_FILE_SIZE: u64 = 1 << 30;

/// What fstat and statx of a socket's data file report in its place, as
/// for a kernel socket, from the data file's `mode`: (mode S_IFSOCK with
/// the file's permission bits, size 0, blocks 0). The daemon gives a data
/// file its socket's inode's mode and owner (0777 at creation, what fchmod
/// and fchown made of it since: src/engine/sockinode.rs), so the owner is
/// the file's as it stands. The library's stat entry points and the
/// supervisor's trapped stat calls both put these in.
pub fn socket_stat(mode: u32) -> (u32, u64, u64) {
    (libc::S_IFSOCK | (mode & 0o7777), 0, 0)
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

/// The N of a data file's path `.../.udsfs/sock/N/data` (a descriptor's
/// /proc link): the directory it was opened through, which is what a
/// sendmsg passes it by (a received socket's own directory, not the number
/// of the socket behind it, which its inode number and `Info` carry: the
/// directory of that number may be another's by now, or revoked with the
/// first descriptor).
pub fn data_dir_number(path: &[u8]) -> Option<u64> {
    let dir = path.strip_suffix(b"/data")?;
    let i = dir.iter().rposition(|&b| b == b'/')?;
    let (up, n) = (&dir[..i], &dir[i + 1..]);
    if !up.ends_with(b"/sock") {
        return None;
    }
    std::str::from_utf8(n).ok()?.parse().ok()
}

/// The directory of `.udsfs/` that holds accept tickets (`Op::AcceptTicket`):
/// searchable by anyone, listing nothing; an entry opens only for the
/// thread its ticket was given to, once.
pub const ACCEPT_DIR: &str = "accept";

/// How long a ticket stays good: the thread that asked for it opens it at
/// once (the open then waits for a connection as long as accept waits).
pub const TICKET_TTL_MS: u64 = 2000;

/// A ticket's name in `ACCEPT_DIR`: 16 lowercase hex digits.
pub fn ticket_name(t: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        let d = (t >> (60 - 4 * i)) as u8 & 0xf;
        *b = if d < 10 { b'0' + d } else { b'a' + d - 10 };
    }
    out
}

/// The ticket a name of `ACCEPT_DIR` stands for: exactly `ticket_name`'s
/// form (no other spelling names it), never 0.
pub fn parse_ticket(name: &[u8]) -> Option<u64> {
    if name.len() != 16 {
        return None;
    }
    let mut t = 0u64;
    for &b in name {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        t = t << 4 | d as u64;
    }
    (t != 0).then_some(t)
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

/// The extended attribute `udsfs run --route /P` sets, on the mount's
/// `.udsfs/dgram/clone`, to declare `/P` (its value) a route root to the daemon: the
/// mount's directories at, above and below it are then copies of the
/// kernel's, with their owners, groups and modes (README "What is routed").
pub const ROUTE_XATTR: &str = "user.udsfs.route";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_files_path_names_its_directory() {
        for (path, want) in [
            (&b"/tmp/m/.udsfs/sock/4711/data"[..], Some(4711)),
            (b"/tmp/m/.udsfs/sock/4711/msg", None),
            (b"/tmp/m/.udsfs/sock/x/data", None),
            (b"/tmp/m/r/4711/data", None),
            (b"data", None),
        ] {
            let got = data_dir_number(path);
            println!("{}: {got:?}", String::from_utf8_lossy(path));
            assert_eq!(got, want);
        }
    }

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

    #[test]
    fn ticket_names_round_trip_in_one_spelling() {
        for t in [1u64, 0xdead_beef, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(parse_ticket(&ticket_name(t)), Some(t));
        }
        assert_eq!(parse_ticket(b"0000000000000000"), None, "0 is no ticket");
        assert_eq!(parse_ticket(b"00000000DEADBEEF"), None, "upper case");
        assert_eq!(parse_ticket(b"deadbeef"), None, "short");
        assert_eq!(parse_ticket(b"+00000000deadbeef"), None, "long");
    }
}

//! The file status flags of a udsfs socket's descriptor. Both fronts open a
//! socket's data file O_DIRECT: the file is a FUSE file opened
//! FOPEN_DIRECT_IO|FOPEN_STREAM, and without O_DIRECT Linux's splice(2)
//! and sendfile(2) read it through the page cache (filemap_splice_read),
//! whose readahead takes queued bytes that read(2) then never sees; with
//! it they copy through the file's read (copy_splice_read). The kernel also
//! adds O_LARGEFILE to every open of a 64-bit process. A socket shows
//! neither (F_GETFL of a kernel socketpair: O_RDWR), and F_SETFL(O_DIRECT)
//! on a socket is EINVAL (no FMODE_CAN_ODIRECT). The rule is here, once;
//! both fronts' fcntl apply it (preload/src/files.rs, and
//! src/supervisor/fcntl.rs, which makes F_SETFL itself on its copy).

use libc::c_int;

/// The flags every data file of a program's socket is opened with, beyond
/// O_RDWR and the program's O_NONBLOCK/O_CLOEXEC.
pub const OPEN: c_int = libc::O_DIRECT;

/// The kernel's O_LARGEFILE as F_GETFL reports it (the libc crate's
/// O_LARGEFILE is 0 on 64-bit targets: an open's argument needs none there).
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
const LARGEFILE: c_int = 0o400000;
#[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
const LARGEFILE: c_int = 0o100000;

/// What F_GETFL shows of a udsfs socket whose kernel flags are `kernel`.
pub fn visible(kernel: c_int) -> c_int {
    kernel & !(libc::O_DIRECT | LARGEFILE)
}

/// The argument F_SETFL gives the kernel for a program's `arg` on a udsfs
/// socket: O_DIRECT kept (the kernel would clear a flag the argument
/// lacks); EINVAL when the program asks for O_DIRECT, as on a socket.
pub fn kept(arg: c_int) -> Result<c_int, c_int> {
    if arg & libc::O_DIRECT != 0 {
        return Err(libc::EINVAL);
    }
    Ok(arg | libc::O_DIRECT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getfl_shows_a_sockets_flags() {
        let k = libc::O_RDWR | libc::O_NONBLOCK | libc::O_DIRECT | LARGEFILE;
        assert_eq!(visible(k), libc::O_RDWR | libc::O_NONBLOCK);
        assert_eq!(
            visible(libc::O_RDWR | libc::O_ASYNC),
            libc::O_RDWR | libc::O_ASYNC
        );
    }

    #[test]
    fn setfl_keeps_o_direct_and_refuses_it_asked() {
        assert_eq!(
            kept(libc::O_NONBLOCK),
            Ok(libc::O_NONBLOCK | libc::O_DIRECT)
        );
        assert_eq!(kept(0), Ok(libc::O_DIRECT));
        assert_eq!(kept(libc::O_DIRECT | libc::O_NONBLOCK), Err(libc::EINVAL));
    }
}

//! fstat, fstatat and statx report a udsfs socket's data file as a socket
//! (S_IFSOCK, the socket's permission bits and owner, size 0), as they do
//! for a kernel socket.

use crate::mount;

use udsfs_proto::mount::socket_stat;

/// Is this a udsfs data file as a stat call describes it?
fn is_socket_file(mode: u32, dev_is_mount: impl FnOnce(&mount::Mount) -> bool, ino: u64) -> bool {
    mode & libc::S_IFMT == libc::S_IFREG
        && mount::is_data_ino(ino)
        && mount::get().is_some_and(dev_is_mount)
}

/// `fix_stat` and `fix_stat64`: the two layouts have the same fields.
macro_rules! fix_stat_like {
    ($name:ident, $ty:ty) => {
        pub fn $name(st: &mut $ty) {
            let dev = st.st_dev;
            if is_socket_file(st.st_mode, |m| m.owns_stat_dev(dev), st.st_ino) {
                let (mode, size, blocks) = socket_stat(st.st_mode);
                st.st_mode = mode;
                st.st_size = size as _;
                st.st_blocks = blocks as _;
            }
        }
    };
}

fix_stat_like!(fix_stat, libc::stat);
fix_stat_like!(fix_stat64, libc::stat64);

pub fn fix_statx(st: &mut libc::statx) {
    let (major, minor) = (st.stx_dev_major, st.stx_dev_minor);
    if is_socket_file(
        u32::from(st.stx_mode),
        |m| m.owns_dev(major, minor),
        st.stx_ino,
    ) {
        let (mode, size, blocks) = socket_stat(st.stx_mode.into());
        st.stx_mode = mode as u16;
        st.stx_size = size;
        st.stx_blocks = blocks;
    }
}

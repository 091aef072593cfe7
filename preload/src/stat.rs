//! fstat, fstatat and statx report a udsfs socket's data file as a socket
//! (S_IFSOCK, srwxrwxrwx, size 0), as they do for a kernel socket.

use crate::mount;

const SOCK_MODE: u32 = libc::S_IFSOCK | 0o777;

/// Rewrites stat results that describe a udsfs data file.
pub fn fix_stat(st: &mut libc::stat) {
    if let Some(m) = mount::get() {
        if st.st_mode & libc::S_IFMT == libc::S_IFREG
            && m.owns_stat_dev(st.st_dev)
            && mount::is_data_ino(st.st_ino)
        {
            st.st_mode = SOCK_MODE;
            st.st_size = 0;
            st.st_blocks = 0;
        }
    }
}

pub fn fix_stat64(st: &mut libc::stat64) {
    if let Some(m) = mount::get() {
        if st.st_mode & libc::S_IFMT == libc::S_IFREG
            && m.owns_stat_dev(st.st_dev)
            && mount::is_data_ino(st.st_ino)
        {
            st.st_mode = SOCK_MODE;
            st.st_size = 0;
            st.st_blocks = 0;
        }
    }
}

pub fn fix_statx(st: &mut libc::statx) {
    if let Some(m) = mount::get() {
        if u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFREG
            && m.owns_dev(st.stx_dev_major, st.stx_dev_minor)
            && mount::is_data_ino(st.stx_ino)
        {
            st.stx_mode = SOCK_MODE as u16;
            st.stx_size = 0;
            st.stx_blocks = 0;
        }
    }
}

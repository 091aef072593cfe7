//! A routed name (README "What is routed") is a symlink at the path the
//! program bound to the socket's node in the mount. Here that link acts as
//! Linux's socket file does: lstat shows the node (S_IFSOCK), unlink, also
//! relative to a directory descriptor (shutil.rmtree), removes the node
//! with it, rmdir the directories a bind made in the mount, and rename
//! moves the node along.

use std::ffi::{CStr, CString};

use libc::{c_char, c_int};

use crate::{errno, mount, real, set_errno};

/// The mount, when it has routes (else nothing here applies).
fn routed_mount() -> Option<&'static mount::Mount> {
    mount::get().filter(|m| !m.routes.is_empty())
}

/// The absolute path, normalized as routes are (lexically), that `path`
/// names relative to `dirfd`: the current directory for AT_FDCWD, the
/// directory the descriptor was opened on otherwise.
fn absolute(dirfd: c_int, path: &[u8]) -> Option<Vec<u8>> {
    if path.starts_with(b"/") {
        return Some(mount::normalize(path, b"/"));
    }
    let base = if dirfd == libc::AT_FDCWD {
        use std::os::unix::ffi::OsStrExt;
        std::env::current_dir()
            .ok()?
            .as_os_str()
            .as_bytes()
            .to_vec()
    } else {
        mount::fd_path(dirfd).filter(|p| p.starts_with(b"/"))?
    };
    Some(mount::normalize(path, &base))
}

/// The caller's path as bytes (None for a null pointer).
fn bytes<'a>(path: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: the caller's NUL-terminated path, when not null.
    (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_bytes())
}

/// The node in the mount for the routed path `path` (relative to `dirfd`).
fn node_of(m: &mount::Mount, dirfd: c_int, path: *const c_char) -> Option<(Vec<u8>, CString)> {
    let abs = absolute(dirfd, bytes(path)?)?;
    let node = m.routed_node(&abs)?;
    Some((abs, node))
}

/// Is `path` (relative to `dirfd`) the link a routed bind made, pointing at
/// the node of its own path? Then that node.
fn own_link(m: &mount::Mount, dirfd: c_int, path: *const c_char) -> Option<(Vec<u8>, CString)> {
    let (abs, node) = node_of(m, dirfd, path)?;
    let mut buf = [0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes; the path is the
    // caller's (an empty one reads the link open on dirfd, as fstatat does).
    let n = unsafe { libc::readlinkat(dirfd, path, buf.as_mut_ptr().cast(), buf.len()) };
    (n > 0 && &buf[..n as usize] == node.to_bytes()).then_some((abs, node))
}

/// After an lstat-like call that succeeded: when it found the link a routed
/// bind left, the stat of the node it points at (a socket of the mount), as
/// Linux's lstat of a socket file. `node_stat` stats a node, following it;
/// `is_link` and `is_mount_sock` read a result's file type (and device). Costs nothing beyond
/// the mode check unless the result is a link under a route.
pub fn fix_link<T>(
    st: &mut T,
    dirfd: c_int,
    path: *const c_char,
    is_link: fn(&T) -> bool,
    is_mount_sock: fn(&mount::Mount, &T) -> bool,
    node_stat: impl FnOnce(&CStr, &mut T) -> c_int,
) {
    if !is_link(st) {
        return;
    }
    let Some(m) = routed_mount() else { return };
    let saved = errno();
    if let Some((_, node)) = own_link(m, dirfd, path) {
        // SAFETY: T is a C stat layout; all zeroes is a valid value.
        let mut at: T = unsafe { std::mem::zeroed() };
        if node_stat(&node, &mut at) == 0 && is_mount_sock(m, &at) {
            *st = at;
        }
    }
    set_errno(saved);
}

macro_rules! lstat_fix {
    ($name:ident, $ty:ty, $real:ident) => {
        /// `fix_link` for this stat layout.
        pub fn $name(st: &mut $ty, dirfd: c_int, path: *const c_char) {
            fix_link(
                st,
                dirfd,
                path,
                |s| s.st_mode & libc::S_IFMT == libc::S_IFLNK,
                |m, s| s.st_mode & libc::S_IFMT == libc::S_IFSOCK && m.owns_stat_dev(s.st_dev),
                // SAFETY: a NUL-terminated path and a struct to fill.
                |node, at| unsafe { real::$real(libc::AT_FDCWD, node.as_ptr(), at, 0) },
            )
        }
    };
}

lstat_fix!(fix_lstat, libc::stat, fstatat);
lstat_fix!(fix_lstat64, libc::stat64, fstatat64);

/// `fix_link` for statx, asking for what the caller asked (`flags` less
/// those that would not follow the link).
pub fn fix_lstatx(
    st: &mut libc::statx,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: libc::c_uint,
) {
    let sync = flags & (libc::AT_STATX_FORCE_SYNC | libc::AT_STATX_DONT_SYNC);
    fix_link(
        st,
        dirfd,
        path,
        |s| u32::from(s.stx_mode) & libc::S_IFMT == libc::S_IFLNK,
        |m, s| {
            u32::from(s.stx_mode) & libc::S_IFMT == libc::S_IFSOCK
                && m.owns_dev(s.stx_dev_major, s.stx_dev_minor)
        },
        // SAFETY: a NUL-terminated path and a struct to fill.
        |node, at| unsafe { real::statx(libc::AT_FDCWD, node.as_ptr(), sync, mask, at) },
    )
}

/// unlink of a routed socket path, relative to `dirfd` (AT_FDCWD or a
/// directory descriptor), removes its node in the mount too, as servers
/// unlink a stale socket before they bind it again and shutil.rmtree
/// removes a directory's entries with unlinkat(dirfd, name, 0). None: not a
/// routed path (the C library's call is the whole answer).
pub fn unlink(dirfd: c_int, path: *const c_char) -> Option<c_int> {
    let m = routed_mount()?;
    let (_, node) = node_of(m, dirfd, path)?;
    let saved = errno();
    // SAFETY: NUL-terminated paths.
    let inside = unsafe { real::unlink(node.as_ptr()) };
    let e = errno();
    let outside = unsafe { real::unlinkat(dirfd, path, 0) };
    if inside == 0 || outside == 0 {
        set_errno(saved);
        return Some(0);
    }
    set_errno(if e == libc::ENOENT { errno() } else { e });
    Some(-1)
}

/// rmdir of a routed directory (`call`, the C library's rmdir or
/// unlinkat with AT_REMOVEDIR) removes the directory a bind below it made in
/// the mount (Mount::mirror_route_dirs) too, once the kernel's is gone: a
/// later bind of the same name would find it there (EADDRINUSE).
pub fn rmdir(dirfd: c_int, path: *const c_char, call: impl FnOnce() -> c_int) -> c_int {
    let r = call();
    if r == 0 {
        if let Some((_, node)) = routed_mount().and_then(|m| node_of(m, dirfd, path)) {
            let saved = errno();
            // SAFETY: a NUL-terminated path.
            unsafe { real::rmdir(node.as_ptr()) };
            set_errno(saved);
        }
    }
    r
}

/// rename of a routed socket path: the kernel moves the link (with its
/// errors and replacing what was at the new path, as for a socket file),
/// then the node moves to the new path's place in the mount, where connect
/// looks for it, and the link is pointed at it there. `call` is the C
/// library's rename. RENAME_EXCHANGE and a new path outside the routes
/// only move the link (a log line says so).
pub fn rename(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    flags: libc::c_uint,
    call: impl FnOnce() -> c_int,
) -> c_int {
    // A success leaves errno as the program left it (readlinkat of a path
    // that is no link sets it).
    let saved = errno();
    let src = routed_mount().and_then(|m| Some((m, own_link(m, olddir, old)?)));
    set_errno(saved);
    let r = call();
    let Some((m, (src_abs, src_node))) = src.filter(|_| r == 0) else {
        return r;
    };
    let dst = node_of(m, newdir, new).filter(|_| flags & libc::RENAME_EXCHANGE == 0);
    let Some((dst_abs, dst_node)) = dst else {
        crate::log::say(&format!(
            "rename of routed socket path {}: only its link moved (the new path is not under a route, or RENAME_EXCHANGE); connect finds it under its old name only",
            String::from_utf8_lossy(&src_abs)
        ));
        set_errno(saved);
        return r;
    };
    m.mirror_route_dirs(&dst_abs[1..]);
    // SAFETY: NUL-terminated paths.
    if unsafe { real::rename(src_node.as_ptr(), dst_node.as_ptr()) } != 0 {
        crate::log::say(&format!(
            "rename of routed socket path {}: its node did not move in the mount: {}",
            String::from_utf8_lossy(&src_abs),
            std::io::Error::last_os_error()
        ));
    } else if let Err(e) = repoint(newdir, new, &dst_node) {
        crate::log::say(&format!(
            "rename of routed socket path {}: the link at the new path still points at the old node: {}",
            String::from_utf8_lossy(&src_abs),
            std::io::Error::from_raw_os_error(e)
        ));
    }
    set_errno(saved);
    r
}

/// Replaces the link at `path` (relative to `dirfd`) by one to `node` in
/// one step, a new link beside it renamed over it, so the path never goes
/// missing.
fn repoint(dirfd: c_int, path: *const c_char, node: &CStr) -> Result<(), c_int> {
    let p = bytes(path).ok_or(libc::EFAULT)?;
    let dir = &p[..p.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)];
    let mut tmp = dir.to_vec();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    tmp.extend_from_slice(format!(".udsfs-link-{}-{tid}", std::process::id()).as_bytes());
    let tmp = CString::new(tmp).map_err(|_| libc::EINVAL)?;
    // SAFETY: NUL-terminated paths.
    unsafe {
        if libc::symlinkat(node.as_ptr(), dirfd, tmp.as_ptr()) != 0 {
            return Err(errno());
        }
        if real::renameat(dirfd, tmp.as_ptr(), dirfd, path) != 0 {
            let e = errno();
            real::unlinkat(dirfd, tmp.as_ptr(), 0);
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_absolute_from_the_directory_they_are_relative_to() {
        assert_eq!(
            absolute(libc::AT_FDCWD, b"/a/./b/../c"),
            Some(b"/a/c".to_vec())
        );
        let cwd = std::env::current_dir().unwrap();
        let here = cwd.join("x.sock");
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(
            absolute(libc::AT_FDCWD, b"./x.sock").as_deref(),
            Some(here.as_os_str().as_bytes())
        );
        let dir = std::fs::File::open("/usr/lib").unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(
            absolute(dir.as_raw_fd(), b"../s.sock"),
            Some(b"/usr/s.sock".to_vec())
        );
        assert_eq!(absolute(dir.as_raw_fd(), b""), Some(b"/usr/lib".to_vec()));
        assert_eq!(absolute(-1, b"x"), None);
    }
}

//! A routed name (README "What is routed") is a symlink at the path the
//! program bound to the socket's node in the mount. Here that link acts as
//! Linux's socket file does: lstat shows the node (S_IFSOCK), unlink, also
//! relative to a directory descriptor (shutil.rmtree), removes the node
//! with it, rmdir the directories a bind made in the mount, rename
//! moves the node along, and link makes a second name for the node.

use std::ffi::{CStr, CString};

use libc::{c_char, c_int};

use crate::errno::{errno, set_errno};
use crate::{mount, real};

/// The mount, when it has routes (else nothing here applies).
fn routed_mount() -> Option<&'static mount::Mount> {
    mount::get().filter(|m| m.has_routes())
}

/// The absolute path, normalized as routes are, that `path` names relative
/// to `dirfd`: the current directory for AT_FDCWD, the directory the
/// descriptor was opened on otherwise (udsfs_calls::routed::absolute).
fn absolute(dirfd: c_int, path: &[u8]) -> Option<Vec<u8>> {
    udsfs_calls::routed::absolute(path, || {
        if dirfd != libc::AT_FDCWD {
            return mount::fd_path(dirfd);
        }
        use std::os::unix::ffi::OsStrExt;
        let cwd = std::env::current_dir().ok()?;
        Some(cwd.as_os_str().as_bytes().to_vec())
    })
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
/// the node of its own path? Then that node (udsfs_calls::routed::own_link).
fn own_link(m: &mount::Mount, dirfd: c_int, path: *const c_char) -> Option<(Vec<u8>, CString)> {
    let abs = absolute(dirfd, bytes(path)?)?;
    let node = udsfs_calls::routed::own_link(&mount::Own, &m.routes, &abs)?;
    Some((abs, CString::new(node).ok()?))
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

/// rename under a route, `call` being the C library's rename: the kernel
/// moves the link or directory (with its errors, replacing what was at the
/// new path), then the mount follows. A bound socket's node moves to the new
/// path's place in the mount, where connect looks for it, and its link is
/// pointed at it there; a directory the mount mirrors moves there too, and
/// the links of the sockets below it are pointed at their nodes' new paths.
/// RENAME_EXCHANGE and a new path outside the routes move only what the
/// kernel moved (a log line says so).
pub fn rename(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    flags: libc::c_uint,
    call: impl FnOnce() -> c_int,
) -> c_int {
    // A success leaves errno as the program left it (readlinkat of a path
    // that is no link sets it). The old path is read before the call: a
    // current directory inside a renamed directory moves with it.
    let saved = errno();
    let src = routed_mount().and_then(|m| {
        let (abs, node) = node_of(m, olddir, old)?;
        let link = is_link_to(olddir, old, &node);
        Some((m, abs, node, link))
    });
    set_errno(saved);
    let r = call();
    let Some((m, src_abs, src_node, link)) = src.filter(|_| r == 0) else {
        return r;
    };
    let what = if link {
        Some("socket path")
    } else if is_dir(newdir, new) && is_dir(libc::AT_FDCWD, src_node.as_ptr()) {
        Some("directory")
    } else {
        None
    };
    let moved = what.and_then(|what| {
        let dst_node = new_node(m, &src_abs, what, newdir, new, flags)?;
        move_node(&src_abs, what, &src_node, &dst_node).then_some(dst_node)
    });
    match moved {
        Some(dst_node) if link => repoint_socket(&src_abs, newdir, new, &dst_node),
        Some(dst_node) => repoint_dir(&src_node, newdir, new, &dst_node),
        None => {}
    }
    set_errno(saved);
    r
}

/// link (linkat) of a routed socket path, `call` being the C library's
/// call: the node gets a second name, as udsfs_calls::routed::link makes
/// it; a path that is no routed bind's link, or a new path outside the
/// routes, gets what the C library makes (a copy of the link).
pub fn link(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let saved = errno();
    let made = routed_mount().and_then(|m| {
        let old = absolute(olddir, bytes(old)?)?;
        let new = absolute(newdir, bytes(new)?)?;
        udsfs_calls::routed::link(&mount::Own, &m.routes, &old, &new)
    });
    set_errno(saved);
    match made {
        None => call(),
        Some(Ok(())) => 0,
        Some(Err(e)) => {
            set_errno(e);
            -1
        }
    }
}

fn is_link_to(dirfd: c_int, path: *const c_char, node: &CStr) -> bool {
    let mut buf = [0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes.
    let n = unsafe { libc::readlinkat(dirfd, path, buf.as_mut_ptr().cast(), buf.len()) };
    n > 0 && &buf[..n as usize] == node.to_bytes()
}

fn is_dir(dirfd: c_int, path: *const c_char) -> bool {
    // SAFETY: fstatat fills a zeroed struct; the C library's, not this
    // library's (which would show a routed link as its node).
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        real::fstatat(dirfd, path, &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }
}

/// The node in the mount for the new path, when the mount can follow.
fn new_node(
    m: &mount::Mount,
    src_abs: &[u8],
    what: &str,
    newdir: c_int,
    new: *const c_char,
    flags: libc::c_uint,
) -> Option<CString> {
    let dst = node_of(m, newdir, new).filter(|_| flags & libc::RENAME_EXCHANGE == 0);
    let Some((dst_abs, dst_node)) = dst else {
        crate::log::say(&format!(
            "rename of routed {what} {}: the mount keeps it under the old name (the new path is not under a route, or RENAME_EXCHANGE); connect finds it there only",
            String::from_utf8_lossy(src_abs)
        ));
        return None;
    };
    m.mirror_route_dirs(&dst_abs[1..]);
    Some(dst_node)
}

/// Moves `src_node` in the mount to `dst_node`; false (logged) when it fails.
fn move_node(src_abs: &[u8], what: &str, src_node: &CStr, dst_node: &CStr) -> bool {
    // SAFETY: NUL-terminated paths.
    let moved = unsafe { real::rename(src_node.as_ptr(), dst_node.as_ptr()) } == 0;
    if !moved {
        crate::log::say(&format!(
            "rename of routed {what} {}: it did not move in the mount: {}",
            String::from_utf8_lossy(src_abs),
            std::io::Error::last_os_error()
        ));
    }
    moved
}

/// The link at the new path of a moved socket is pointed at its new node.
fn repoint_socket(src_abs: &[u8], newdir: c_int, new: *const c_char, dst_node: &CStr) {
    if let Err(e) = repoint(newdir, new, dst_node) {
        crate::log::say(&format!(
            "rename of routed socket path {}: the link at the new path still points at the old node: {}",
            String::from_utf8_lossy(src_abs),
            std::io::Error::from_raw_os_error(e)
        ));
    }
}

/// The links below a moved directory's new path that pointed below its old
/// node are pointed below its new one.
fn repoint_dir(src_node: &CStr, newdir: c_int, new: *const c_char, dst_node: &CStr) {
    // SAFETY: a NUL-terminated path; the descriptor is closed by repoint_below.
    let fd = unsafe {
        libc::openat(
            newdir,
            new,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd >= 0 {
        repoint_below(fd, src_node.to_bytes(), dst_node.to_bytes(), 0);
    }
}

/// The links below directory `fd` (closed here) that point below `from`
/// are pointed at the same place below `to`.
fn repoint_below(fd: c_int, from: &[u8], to: &[u8], depth: u32) {
    // SAFETY: fdopendir takes fd; readdir's entries live until the next call.
    let dir = unsafe { libc::fdopendir(fd) };
    if dir.is_null() {
        // SAFETY: fd is still ours when fdopendir fails.
        unsafe { libc::close(fd) };
        return;
    }
    loop {
        // SAFETY: dir is an open directory stream.
        let e = unsafe { libc::readdir64(dir) };
        if e.is_null() {
            break;
        }
        // SAFETY: readdir's entry holds a NUL-terminated name.
        let (kind, name) = unsafe { ((*e).d_type, CStr::from_ptr((*e).d_name.as_ptr())) };
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        // SAFETY: dir is open.
        let dfd = unsafe { libc::dirfd(dir) };
        if kind == libc::DT_DIR && depth < 64 {
            // SAFETY: a name of this directory.
            let sub = unsafe {
                libc::openat(
                    dfd,
                    name.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if sub >= 0 {
                repoint_below(sub, from, to, depth + 1);
            }
        } else if kind == libc::DT_LNK {
            let mut buf = [0u8; libc::PATH_MAX as usize];
            // SAFETY: readlinkat writes at most buf.len() bytes.
            let n =
                unsafe { libc::readlinkat(dfd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            let target = &buf[..n.max(0) as usize];
            if let Some(rest) = target.strip_prefix(from).filter(|r| r.starts_with(b"/")) {
                if let Ok(node) = CString::new([to, rest].concat()) {
                    let _ = repoint(dfd, name.as_ptr(), &node);
                }
            }
        }
    }
    // SAFETY: closes the stream and fd.
    unsafe { libc::closedir(dir) };
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

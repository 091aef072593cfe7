//! A routed name (README "What is routed") is a symlink at the path the
//! program bound to the socket's node in the mount. Here that link acts as
//! Linux's socket file does, as udsfs_calls::routed decides: lstat shows
//! the node (S_IFSOCK), unlink, also relative to a directory descriptor
//! (shutil.rmtree), removes the node with it, rmdir the directories a bind
//! made in the mount, rename moves the node along, and link makes a second
//! name for the node. This file reaches the program's paths and makes the
//! C library's call (`carried`).

use std::ffi::{CStr, CString};

use libc::{c_char, c_int};
use udsfs_calls::routed::Removed;

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

/// The result of a core call as the C library returns it: 0 with errno as
/// the program left it (`saved`), or -1 and the errno.
fn returned(saved: c_int, r: udsfs_calls::Res<()>) -> c_int {
    match r {
        Ok(()) => {
            set_errno(saved);
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// A C library call's 0 or -1 and errno as a result.
fn res(r: c_int) -> udsfs_calls::Res<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// A call of `core` on the absolute paths `paths` name (relative to their
/// directory descriptors), under a routed mount, `call` being the C
/// library's call: the core decides (udsfs_calls::routed), or, where it
/// says the C library's call is the whole answer, that call alone.
fn carried<const N: usize>(
    paths: [(c_int, *const c_char); N],
    call: impl FnOnce() -> c_int,
    core: impl FnOnce(
        &mount::Mount,
        &[Vec<u8>; N],
        &mut dyn FnMut() -> udsfs_calls::Res<()>,
    ) -> Option<udsfs_calls::Res<()>>,
) -> c_int {
    let saved = errno();
    let abs = routed_mount().and_then(|m| {
        let mut out: [Vec<u8>; N] = std::array::from_fn(|_| Vec::new());
        for (o, (dirfd, path)) in out.iter_mut().zip(paths) {
            *o = absolute(dirfd, bytes(path)?)?;
        }
        Some((m, out))
    });
    set_errno(saved);
    let mut call = Some(call);
    let r = abs.and_then(|(m, abs)| core(m, &abs, &mut || res(call.take().map_or(-1, |c| c()))));
    match (r, call.take()) {
        (Some(r), _) => returned(saved, r),
        // The core's looks (a readlink of no link) leave errno as the
        // program left it for the C library's call.
        (None, Some(call)) => {
            set_errno(saved);
            call()
        }
        (None, None) => -1,
    }
}

/// unlink of a routed socket path, relative to `dirfd` (AT_FDCWD or a
/// directory descriptor), removes its node in the mount too
/// (udsfs_calls::routed::remove). None: not a routed path (the C library's
/// call is the whole answer).
pub fn unlink(dirfd: c_int, path: *const c_char) -> Option<c_int> {
    let m = routed_mount()?;
    let abs = absolute(dirfd, bytes(path)?)?;
    m.routed_node(&abs)?;
    Some(carried(
        [(dirfd, path)],
        // SAFETY: the program's path.
        || unsafe { real::unlinkat(dirfd, path, 0) },
        |m, [abs], call| {
            udsfs_calls::routed::remove(Removed::Link, &mount::Own, &m.routes, abs, call)
        },
    ))
}

/// rmdir of a routed directory (`call`, the C library's rmdir or unlinkat
/// with AT_REMOVEDIR) removes the directory a bind below it made in the
/// mount too, once the kernel's is gone (udsfs_calls::routed::remove).
pub fn rmdir(dirfd: c_int, path: *const c_char, call: impl FnOnce() -> c_int) -> c_int {
    carried([(dirfd, path)], call, |m, [abs], call| {
        udsfs_calls::routed::remove(Removed::Dir, &mount::Own, &m.routes, abs, call)
    })
}

/// rename under a route, `call` being the C library's rename: the kernel
/// moves the link or directory, then the mount follows
/// (udsfs_calls::routed::rename).
pub fn rename(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
    flags: libc::c_uint,
    call: impl FnOnce() -> c_int,
) -> c_int {
    carried(
        [(olddir, old), (newdir, new)],
        call,
        |m, [old, new], call| {
            udsfs_calls::routed::rename(&mount::Own, &m.routes, old, new, flags, call)
        },
    )
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
    carried([(olddir, old), (newdir, new)], call, |m, [old, new], _| {
        udsfs_calls::routed::link(&mount::Own, &m.routes, old, new)
    })
}

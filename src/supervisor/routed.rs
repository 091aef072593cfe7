//! A routed name's link acting as Linux's socket file (udsfs_calls::routed
//! decides, as for the library's preload/src/routed.rs): unlink and
//! unlinkat remove the node in the mount too, link and linkat give the node
//! a second name, rename, renameat and renameat2 move it along, rmdir (and
//! unlinkat with AT_REMOVEDIR) of a routed directory removes its copy in
//! the mount, and lstat (lstat, newfstatat or statx without following) of
//! the link a routed bind made shows the node, a socket. The kernel's part
//! of a call is made here, as the target (`Arg`, `as_target`). Answered on the notification loop: none
//! makes a daemon call that could wait. All look and act as the target
//! (`Tree`: its root, working directory and file credentials), so that
//! root's supervisor does not remove or show what the program's user may
//! not (integration/adversarial_root_run.sh).

use super::call::Ctx;
use super::listener::Reply;
use super::mem;
use super::thread_uid::FsCreds;
use super::tree::Tree;
use udsfs_calls::Res;
use udsfs_calls::routed::{self, Removed};

/// Path argument `at` of thread `tid` made absolute against `dirfd`.
fn absolute(tid: i32, dirfd: i32, at: u64) -> Option<Vec<u8>> {
    let p = mem::read_cstr(tid, at, libc::PATH_MAX as usize).ok()?;
    Tree(tid).absolute(dirfd, &p)
}

/// A path argument of the target: its absolute form (the core's), and the
/// path by which the supervisor reaches what it names, as the target
/// would (`/proc/TID/root` for an absolute one, the working directory or
/// the directory descriptor's `/proc/TID/fd/N` for a relative one).
struct Arg {
    abs: Vec<u8>,
    reach: std::ffi::CString,
}

impl Arg {
    /// None: unreadable, empty (the kernel's ENOENT) or past PATH_MAX, or
    /// not to be made absolute: the kernel answers.
    fn read(tid: i32, dirfd: i32, at: u64) -> Option<Arg> {
        let p = mem::read_cstr(tid, at, libc::PATH_MAX as usize).ok()?;
        if p.is_empty() {
            return None;
        }
        let abs = Tree(tid).absolute(dirfd, &p)?;
        let base = if p.starts_with(b"/") {
            format!("/proc/{tid}/root")
        } else if dirfd == libc::AT_FDCWD {
            format!("/proc/{tid}/cwd/")
        } else if dirfd >= 0 {
            format!("/proc/{tid}/fd/{dirfd}/")
        } else {
            return None;
        };
        let reach = std::ffi::CString::new([base.as_bytes(), &p].concat()).ok()?;
        Some(Arg { abs, reach })
    }
}

/// The kernel's part of a call made here as the target (its file
/// credentials), or the core's answer as a reply; None: the kernel's call
/// is the whole answer.
fn reply(r: Option<Res<()>>) -> Reply {
    match r {
        None => Reply::Continue,
        Some(Ok(())) => Reply::Value(0),
        Some(Err(e)) => Reply::Errno(e),
    }
}

/// 0 or -1 and errno of a call made as thread `tid`.
fn as_target(tid: i32, call: impl FnOnce() -> libc::c_int) -> Res<()> {
    let _as = FsCreds::of(tid)?;
    if call() == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

/// unlink (unlinkat: `flags` 0, or AT_REMOVEDIR for `rmdir`) of a routed
/// path, relative to `dirfd`: its node in the mount goes too
/// (udsfs_calls::routed::remove), the link at the path removed here as the
/// target.
pub fn unlink(ctx: &Ctx, tid: i32, dirfd: i32, path: u64, flags: i32) -> Reply {
    match flags {
        0 => remove(ctx, tid, dirfd, path, Removed::Link),
        libc::AT_REMOVEDIR => rmdir(ctx, tid, dirfd, path),
        _ => Reply::Continue,
    }
}

/// rmdir of a routed directory (or unlinkat with AT_REMOVEDIR): the
/// directory a bind below it made in the mount goes too
/// (udsfs_calls::routed::remove), the kernel's removed here as the target.
pub fn rmdir(ctx: &Ctx, tid: i32, dirfd: i32, path: u64) -> Reply {
    remove(ctx, tid, dirfd, path, Removed::Dir)
}

/// unlink or rmdir (`what`) of a routed path: the kernel's call made here
/// as the target, then the mount follows; not routed: Continue.
fn remove(ctx: &Ctx, tid: i32, dirfd: i32, path: u64, what: Removed) -> Reply {
    if ctx.routes.routes.is_empty() {
        return Reply::Continue;
    }
    let Some(p) = Arg::read(tid, dirfd, path) else {
        return Reply::Continue;
    };
    reply(routed::remove(
        what,
        &Tree(tid),
        &ctx.routes,
        &p.abs,
        || {
            let at = p.reach.as_ptr();
            // SAFETY: a NUL-terminated path.
            as_target(tid, || unsafe {
                match what {
                    Removed::Link => libc::unlink(at),
                    Removed::Dir => libc::rmdir(at),
                }
            })
        },
    ))
}

/// rename, renameat and renameat2 (`flags`) of a routed socket path or a
/// directory the mount mirrors: the kernel's rename made here as the
/// target, then the mount follows (udsfs_calls::routed::rename); anything
/// else the kernel's.
pub fn rename(
    ctx: &Ctx,
    tid: i32,
    (olddir, old): (i32, u64),
    (newdir, new): (i32, u64),
    flags: u32,
) -> Reply {
    if ctx.routes.routes.is_empty() {
        return Reply::Continue;
    }
    let (Some(old), Some(new)) = (Arg::read(tid, olddir, old), Arg::read(tid, newdir, new)) else {
        return Reply::Continue;
    };
    let r = routed::rename(&Tree(tid), &ctx.routes, &old.abs, &new.abs, flags, || {
        as_target(tid, || {
            // SAFETY: NUL-terminated paths.
            unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    old.reach.as_ptr(),
                    libc::AT_FDCWD,
                    new.reach.as_ptr(),
                    flags,
                )
            }
        })
    });
    reply(r)
}

/// link (linkat: `flags`) of routed socket path `old` to `new`, as
/// udsfs_calls::routed::link makes it; anything else the kernel's.
pub fn link(ctx: &Ctx, tid: i32, (olddir, old): (i32, u64), (newdir, new): (i32, u64)) -> Reply {
    if ctx.routes.routes.is_empty() {
        return Reply::Continue;
    }
    let (Some(old), Some(new)) = (absolute(tid, olddir, old), absolute(tid, newdir, new)) else {
        return Reply::Continue;
    };
    reply(routed::link(&Tree(tid), &ctx.routes, &old, &new))
}

/// lstat of the link a routed bind made at `path` (relative to `dirfd`):
/// the stat of its node, following it, as Linux's lstat of a socket file;
/// None when `path` is anything else (the kernel answers). `stat` stats the
/// node (a path of the supervisor's) into what it writes to the target.
pub fn lstat(
    ctx: &Ctx,
    tid: i32,
    dirfd: i32,
    path: u64,
    stat: impl FnOnce(&std::ffi::CStr) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    if ctx.routes.routes.is_empty() {
        return None;
    }
    let abs = absolute(tid, dirfd, path)?;
    let node = routed::own_link(&Tree(tid), &ctx.routes, &abs)?;
    let node = std::ffi::CString::new(node).ok()?;
    let _as = FsCreds::of(tid).ok()?;
    stat(&node)
}

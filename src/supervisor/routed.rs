//! A routed name's link acting as Linux's socket file (udsfs_calls::routed,
//! as the library's preload/src/routed.rs): unlink and unlinkat remove the
//! node in the mount too, link and linkat give the node a second name, and
//! lstat (newfstatat or statx without following) of the link a routed bind
//! made shows the node, a socket. Answered on the notification loop: none
//! makes a daemon call that could wait. All look and act as the target
//! (`Tree`: its root, working directory and file credentials), so that
//! root's supervisor does not remove or show what the program's user may
//! not (integration/adversarial_root_run.sh).

use std::os::unix::ffi::OsStrExt;

use super::call::Ctx;
use super::listener::Reply;
use super::mem;
use super::thread_uid::FsCreds;
use super::tree::Tree;
use udsfs_calls::routed;

/// Path argument `at` of thread `tid` made absolute against `dirfd`.
fn absolute(tid: i32, dirfd: i32, at: u64) -> Option<Vec<u8>> {
    let p = mem::read_cstr(tid, at, libc::PATH_MAX as usize).ok()?;
    Tree(tid).absolute(dirfd, &p)
}

/// unlink (`flags` 0) of a routed path, relative to `dirfd`: its node in the
/// mount goes too, then the kernel removes the link at the path.
pub fn unlink(ctx: &Ctx, tid: i32, dirfd: i32, path: u64, flags: i32) -> Reply {
    if ctx.routes.routes.is_empty() || flags != 0 {
        return Reply::Continue;
    }
    let Some(abs) = absolute(tid, dirfd, path) else {
        return Reply::Continue;
    };
    let Some(node) = routed::node(&ctx.routes, &abs) else {
        return Reply::Continue;
    };
    let Ok(_as) = FsCreds::of(tid) else {
        return Reply::Continue;
    };
    if std::fs::remove_file(std::ffi::OsStr::from_bytes(&node)).is_err() {
        return Reply::Continue;
    }
    // The node is gone: the call succeeds even with no link left to remove.
    let link = [format!("/proc/{tid}/root").as_bytes(), &abs].concat();
    match std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&link)) {
        Ok(_) => Reply::Continue,
        Err(_) => Reply::Value(0),
    }
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
    match routed::link(&Tree(tid), &ctx.routes, &old, &new) {
        None => Reply::Continue,
        Some(Ok(())) => Reply::Value(0),
        Some(Err(e)) => Reply::Errno(e),
    }
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

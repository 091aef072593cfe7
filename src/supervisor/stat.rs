//! fstat, newfstatat and statx of a udsfs socket by its descriptor say
//! S_IFSOCK (the socket's permission bits and owner, its ids as the
//! target's user namespace sees them; size 0), as for a kernel socket and
//! as the preload library's stat entry points say (preload/src/stat.rs,
//! the same `udsfs_proto::mount::socket_stat` fix): an event library that
//! tells a received descriptor's kind with fstat takes a udsfs socket for a
//! socket, not a file. lstat, and newfstatat and statx without following,
//! of the link a routed bind made show its node, a socket
//! (super::routed::lstat). Every other stat call runs in the kernel as made.

use std::ffi::CString;

use super::call::Ctx;
use super::listener::Reply;
use super::mem;
use crate::engine::userns::{self, Standing};
use udsfs_proto::mount::socket_stat;

const AT_EMPTY_PATH: u64 = libc::AT_EMPTY_PATH as u64;

/// Answers a trapped stat call that names a udsfs socket by descriptor;
/// Continue for anything else (a path, another file, unreadable memory).
pub fn triage(ctx: &Ctx, tid: i32, nr: i64, a: [u64; 6]) -> Reply {
    let dev = &ctx.dev;
    let empty_path = |p: u64| p == 0 || mem::read(tid, p, 1).is_ok_and(|b| b[0] == 0);
    let (by_fd, out) = match nr {
        libc::SYS_fstat => (true, a[1]),
        libc::SYS_newfstatat => (a[3] & AT_EMPTY_PATH != 0 && empty_path(a[1]), a[2]),
        libc::SYS_statx => (a[2] & AT_EMPTY_PATH != 0 && empty_path(a[1]), a[4]),
        _ => (false, 0),
    };
    let fd = a[0] as i32;
    if !by_fd {
        return lstat(ctx, tid, nr, a);
    }
    if fd < 0 {
        return Reply::Continue;
    }
    let link = format!("/proc/{tid}/fd/{fd}");
    if !dev.probe(&link) {
        return Reply::Continue;
    }
    let Ok(c) = CString::new(link) else {
        return Reply::Continue;
    };
    let written = if nr == libc::SYS_statx {
        // The link is followed to the data file; only the sync flags stay.
        let flags = a[2] as i32 & libc::AT_STATX_SYNC_TYPE;
        // SAFETY: statx fills the zeroed struct; the path is NUL-terminated.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        if unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), flags, a[3] as u32, &mut st) } != 0 {
            return Reply::Continue;
        }
        let (mode, size, blocks) = socket_stat(st.stx_mode.into());
        st.stx_mode = mode as u16;
        st.stx_size = size;
        st.stx_blocks = blocks;
        (st.stx_uid, st.stx_gid) = as_seen(tid, st.stx_uid, st.stx_gid);
        mem::write(tid, out, as_bytes(&st))
    } else {
        // SAFETY: stat fills the zeroed struct; the path is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::stat(c.as_ptr(), &mut st) } != 0 {
            return Reply::Continue;
        }
        let (mode, size, blocks) = socket_stat(st.st_mode);
        st.st_mode = mode;
        st.st_size = size as i64;
        st.st_blocks = blocks as i64;
        (st.st_uid, st.st_gid) = as_seen(tid, st.st_uid, st.st_gid);
        mem::write(tid, out, as_bytes(&st))
    };
    match written {
        Ok(()) => Reply::Value(0),
        Err(e) => Reply::Errno(e),
    }
}

/// The socket's owner (`uid`, `gid`, as the supervisor's stat gave them) as
/// the target's own stat would show them: in its user namespace, the
/// overflow ids where its maps do not reach (from_kuid_munged), and so too
/// when its namespace cannot be told.
fn as_seen(tid: i32, uid: u32, gid: u32) -> (u32, u32) {
    match userns::standing(tid as u32) {
        Standing::Own => (uid, gid),
        Standing::Other(maps) => maps.shown(uid, gid),
        Standing::Unknown => userns::Maps::default().shown(uid, gid),
    }
}

/// lstat, or newfstatat or statx without following, of a routed bind's link:
/// the node's stat, a socket of the mount (super::routed::lstat).
fn lstat(ctx: &Ctx, tid: i32, nr: i64, a: [u64; 6]) -> Reply {
    let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
    let (dirfd, path, flags, out) = match nr {
        libc::SYS_newfstatat => (a[0], a[1], a[3], a[2]),
        libc::SYS_statx => (a[0], a[1], a[2], a[4]),
        // The C library's __lxstat (filter::ROUTED_STAT).
        libc::SYS_lstat => (i64::from(libc::AT_FDCWD) as u64, a[0], nofollow, a[1]),
        _ => return Reply::Continue,
    };
    if flags & nofollow == 0 {
        return Reply::Continue;
    }
    let sock = |mode: u32, major: u32, minor: u32| {
        mode & libc::S_IFMT == libc::S_IFSOCK && (major, minor) == (ctx.dev.major, ctx.dev.minor)
    };
    let got = super::routed::lstat(ctx, tid, dirfd as i32, path, |node| {
        if nr == libc::SYS_statx {
            let sync = a[2] as i32 & libc::AT_STATX_SYNC_TYPE;
            // SAFETY: statx fills the zeroed struct; the path is NUL-terminated.
            let mut st: libc::statx = unsafe { std::mem::zeroed() };
            let r =
                unsafe { libc::statx(libc::AT_FDCWD, node.as_ptr(), sync, a[3] as u32, &mut st) };
            let ok = r == 0 && sock(st.stx_mode.into(), st.stx_dev_major, st.stx_dev_minor);
            ok.then(|| as_bytes(&st).to_vec())
        } else {
            // SAFETY: stat fills the zeroed struct; the path is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::stat(node.as_ptr(), &mut st) };
            let ok = r == 0 && sock(st.st_mode, libc::major(st.st_dev), libc::minor(st.st_dev));
            ok.then(|| as_bytes(&st).to_vec())
        }
    });
    match got.map(|b| mem::write(tid, out, &b)) {
        None => Reply::Continue,
        Some(Ok(())) => Reply::Value(0),
        Some(Err(e)) => Reply::Errno(e),
    }
}

fn as_bytes<T>(v: &T) -> &[u8] {
    // SAFETY: a plain C struct, read as its bytes.
    unsafe { std::slice::from_raw_parts((v as *const T).cast(), std::mem::size_of::<T>()) }
}

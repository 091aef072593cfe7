//! Which mount is udsfs (UDSFS_MOUNT), which paths route into it
//! (UDSFS_ROUTES, routed by `udsfs_proto::route`), and how a file
//! descriptor shows it is one of its sockets: by its device and inode
//! number, never by a table that dup, fork or exec could lose.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use libc::c_int;
use udsfs_calls::bind;
pub use udsfs_proto::mount::is_data_ino;
use udsfs_proto::route::Routes;

pub use udsfs_proto::route::normalize;

use crate::errno::{errno, Res};
use crate::real;

pub struct Mount {
    /// The canonical mount point (without a trailing slash) and the
    /// absolute prefixes whose paths are names in the mount (at the same
    /// path below the mount point).
    pub routes: Routes,
    dev: (u32, u32),
}

static MOUNT: OnceLock<Option<Mount>> = OnceLock::new();

/// The udsfs mount this process uses, if any (and if it is mounted).
pub fn get() -> Option<&'static Mount> {
    MOUNT.get_or_init(load).as_ref()
}

fn canonical(p: &[u8]) -> Option<Vec<u8>> {
    let c = CString::new(p).ok()?;
    // SAFETY: realpath with a NULL buffer allocates the result, freed below.
    let r = unsafe { libc::realpath(c.as_ptr(), std::ptr::null_mut()) };
    if r.is_null() {
        return None;
    }
    // SAFETY: r is a NUL-terminated string from realpath.
    let out = unsafe { std::ffi::CStr::from_ptr(r) }.to_bytes().to_vec();
    // SAFETY: r came from malloc.
    unsafe { libc::free(r.cast()) };
    Some(out)
}

fn load() -> Option<Mount> {
    use std::os::unix::ffi::OsStrExt;
    let m = std::env::var_os("UDSFS_MOUNT")?;
    // A mount this process cannot reach (another user's, without
    // allow_other) leaves every socket a kernel socket: say so once.
    let unreachable = || {
        crate::log::say(&format!(
            "UDSFS_MOUNT={}: {}; sockets stay kernel sockets",
            m.to_string_lossy(),
            std::io::Error::last_os_error()
        ))
    };
    let Some(path) = canonical(m.as_bytes()) else {
        unreachable();
        return None;
    };
    let c = CString::new(path.clone()).ok()?;
    let Some(st) = statx_of(libc::AT_FDCWD, &c, 0) else {
        unreachable();
        return None;
    };
    let routes = std::env::var_os("UDSFS_ROUTES")
        .map(|r| {
            r.as_bytes()
                .split(|&b| b == b':')
                .filter(|p| p.starts_with(b"/") && p.len() > 1)
                .map(|p| normalize(p, b"/"))
                .collect()
        })
        .unwrap_or_default();
    Some(Mount {
        routes: Routes {
            mount: path,
            routes,
        },
        dev: (st.stx_dev_major, st.stx_dev_minor),
    })
}

fn statx_of(dirfd: c_int, path: &std::ffi::CStr, flags: c_int) -> Option<libc::statx> {
    // SAFETY: statx fills the zeroed struct it is given.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let r = real::statx(dirfd, path.as_ptr(), flags, libc::STATX_INO, &mut st);
        (r == 0).then_some(st)
    }
}

impl Mount {
    /// The canonical mount point.
    pub fn path(&self) -> &[u8] {
        &self.routes.mount
    }

    /// Whether any prefix routes into the mount.
    pub fn has_routes(&self) -> bool {
        !self.routes.routes.is_empty()
    }

    pub fn owns_dev(&self, major: u32, minor: u32) -> bool {
        self.dev == (major, minor)
    }

    pub fn owns_stat_dev(&self, dev: u64) -> bool {
        libc::major(dev) == self.dev.0 && libc::minor(dev) == self.dev.1
    }

    /// `.udsfs/sock/N/FILE` of this mount.
    pub fn sock_file(&self, id: u64, file: &str) -> CString {
        let mut p = self.path().to_vec();
        p.extend_from_slice(format!("/.udsfs/sock/{id}/{file}").as_bytes());
        CString::new(p).expect("no NUL in a mount path")
    }

    pub fn ctrl_file(&self, rel: &str) -> CString {
        let mut p = self.path().to_vec();
        p.extend_from_slice(b"/.udsfs/");
        p.extend_from_slice(rel.as_bytes());
        CString::new(p).expect("no NUL in a mount path")
    }

    /// The node in the mount that stands for a routed path (None when the
    /// path is not under a route).
    pub fn routed_node(&self, abs: &[u8]) -> Option<CString> {
        CString::new(udsfs_calls::routed::node(&self.routes, abs)?).ok()
    }
}

/// The program's file tree as this process sees it (udsfs_calls::bind).
pub struct Own;

fn cpath(p: &[u8]) -> Res<CString> {
    CString::new(p).map_err(|_| libc::EINVAL)
}

/// A call of two paths that returns 0 or -1 and errno.
fn two_paths(a: &[u8], b: &[u8], call: impl FnOnce(&CStr, &CStr) -> c_int) -> Res<()> {
    let (a, b) = (cpath(a)?, cpath(b)?);
    if call(&a, &b) == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// A call of one path that returns 0 or -1 and errno.
fn one_path(a: &[u8], call: impl FnOnce(&CStr) -> c_int) -> Res<()> {
    two_paths(a, b"", |a, _| call(a))
}

impl udsfs_calls::routed::Links for Own {
    fn resolve(&self, path: &[u8]) -> Res<Vec<u8>> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        std::fs::canonicalize(std::ffi::OsStr::from_bytes(path))
            .map(|p| p.into_os_string().into_vec())
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    fn readlink(&self, path: &[u8]) -> Res<Vec<u8>> {
        let p = cpath(path)?;
        let mut buf = [0u8; libc::PATH_MAX as usize];
        // SAFETY: readlink writes at most buf.len() bytes.
        let n = unsafe { libc::readlink(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(errno());
        }
        Ok(buf[..n as usize].to_vec())
    }

    fn hard_link(&self, old: &[u8], new: &[u8]) -> Res<()> {
        // SAFETY: NUL-terminated paths; the C library's link.
        two_paths(old, new, |o, n| unsafe {
            real::link(o.as_ptr(), n.as_ptr())
        })
    }
}

impl udsfs_calls::routed::Moves for Own {
    fn rename_node(&self, old: &[u8], new: &[u8]) -> Res<()> {
        // SAFETY: NUL-terminated paths.
        two_paths(old, new, |o, n| unsafe {
            real::rename(o.as_ptr(), n.as_ptr())
        })
    }

    fn node_is_dir(&self, node: &[u8]) -> bool {
        use udsfs_calls::bind::Tree;
        self.mode(node, false)
            .is_ok_and(|m| m & libc::S_IFMT == libc::S_IFDIR)
    }

    fn rmdir_node(&self, node: &[u8]) -> Res<()> {
        // SAFETY: a NUL-terminated path.
        one_path(node, |p| unsafe { real::rmdir(p.as_ptr()) })
    }

    fn unlink_node(&self, node: &[u8]) -> Res<()> {
        // SAFETY: a NUL-terminated path; the system call, not this
        // library's unlink.
        one_path(node, |p| unsafe { real::unlink(p.as_ptr()) })
    }

    fn rename_path(&self, old: &[u8], new: &[u8]) -> Res<()> {
        self.rename_node(old, new)
    }

    fn entries(&self, path: &[u8]) -> Vec<(Vec<u8>, udsfs_calls::routed::Kind)> {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        udsfs_calls::routed::read_entries(dir).unwrap_or_default()
    }

    fn say(&self, line: &str) {
        crate::log::say(line);
    }
}

impl bind::Tree for Own {
    fn mode(&self, path: &[u8], follow: bool) -> Res<u32> {
        let c = cpath(path)?;
        // SAFETY: (l)stat fills a zeroed struct for a NUL-terminated path.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe {
            if follow {
                libc::stat(c.as_ptr(), &mut st)
            } else {
                libc::lstat(c.as_ptr(), &mut st)
            }
        };
        if r == 0 {
            Ok(st.st_mode)
        } else {
            Err(errno())
        }
    }

    fn symlink(&self, target: &[u8], path: &[u8]) -> Res<()> {
        // SAFETY: NUL-terminated paths.
        two_paths(target, path, |t, p| unsafe {
            libc::symlink(t.as_ptr(), p.as_ptr())
        })
    }

    fn unlink_link(&self, path: &[u8]) {
        if let Ok(p) = cpath(path) {
            // SAFETY: a NUL-terminated path; the C library's unlink (this
            // library's would remove the node too).
            unsafe { real::unlink(p.as_ptr()) };
        }
    }

    fn mkdir(&self, inside: &[u8], mode: u32) {
        if let Ok(p) = cpath(inside) {
            // SAFETY: a NUL-terminated path.
            unsafe { libc::mkdir(p.as_ptr(), mode) };
        }
    }

    fn chmod(&self, inside: &[u8], mode: u32) {
        if let Ok(p) = cpath(inside) {
            // SAFETY: a NUL-terminated path.
            unsafe { libc::chmod(p.as_ptr(), mode) };
        }
    }

    fn may(&self, path: &[u8], mask: i32) -> Res<()> {
        bind::accessible(&cpath(path)?, mask)
    }
}

/// The socket number behind a udsfs data file, or None for any other fd.
/// statx with AT_STATX_DONT_SYNC reads the inode the kernel has cached: no
/// round trip to the daemon.
pub fn udsfs_fd(fd: c_int) -> bool {
    let Some(m) = get() else { return false };
    let flags = libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC;
    match statx_of(fd, c"", flags) {
        Some(st) => m.owns_dev(st.stx_dev_major, st.stx_dev_minor) && is_data_ino(st.stx_ino),
        None => false,
    }
}

/// The path a descriptor was opened with (its data file's path).
pub fn fd_path(fd: c_int) -> Option<Vec<u8>> {
    let link = CString::new(format!("/proc/self/fd/{fd}")).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: readlink writes at most buf.len() bytes.
    let n = unsafe { libc::readlink(link.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

/// The socket number N of `.../.udsfs/sock/N/data` open on `fd`.
pub fn sock_id(fd: c_int) -> Option<u64> {
    udsfs_proto::mount::data_dir_number(&fd_path(fd)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Mount {
        Mount {
            routes: Routes {
                mount: b"/tmp/m".to_vec(),
                routes: vec![b"/var/run/app".to_vec()],
            },
            dev: (0, 1),
        }
    }

    #[test]
    fn paths_route_into_the_mount_and_back() {
        let m = m().routes;
        assert_eq!(
            m.tree_path(b"/tmp/m/run/x.sock"),
            Some(b"run/x.sock".to_vec())
        );
        assert_eq!(m.tree_path(b"/tmp/mx/y"), None);
        assert_eq!(m.tree_path(b"/tmp/m"), None);
        assert_eq!(
            m.tree_path(b"/var/run/app/x.sock"),
            Some(b"var/run/app/x.sock".to_vec())
        );
        assert_eq!(m.tree_path(b"/var/run/application"), None);
        assert_eq!(m.tree_path(b"/run/systemd/journal/socket"), None);
        assert_eq!(m.shown_path(b"run/x.sock"), b"/tmp/m/run/x.sock".to_vec());
        assert_eq!(
            m.shown_path(b"var/run/app/x.sock"),
            b"/var/run/app/x.sock".to_vec()
        );
        assert_eq!(m.shown_path(b"/tmp/m/abs"), b"/tmp/m/abs".to_vec());
    }

    #[test]
    fn names_are_normalized_lexically() {
        assert_eq!(normalize(b"a/./b//c", b"/w"), b"/w/a/b/c".to_vec());
        assert_eq!(normalize(b"../x", b"/w/d"), b"/w/x".to_vec());
        assert_eq!(normalize(b"/../..", b"/w"), b"/".to_vec());
        assert!(is_data_ino((2 << 56) | (7 << 4) | 2));
        assert!(!is_data_ino((2 << 56) | (7 << 4) | 1));
        assert!(!is_data_ino(7));
    }

    #[test]
    fn routed_names_have_a_node_in_the_mount() {
        let m = m();
        assert_eq!(
            m.routed_node(b"/var/run/app/x.sock").unwrap().as_bytes(),
            b"/tmp/m/var/run/app/x.sock"
        );
        assert!(m.routed_node(b"/var/run/application").is_none());
        assert_eq!(
            m.sock_file(3, "data").as_bytes(),
            b"/tmp/m/.udsfs/sock/3/data"
        );
    }
}

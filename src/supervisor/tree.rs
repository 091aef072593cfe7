//! The target's file tree as the socket-call core looks at it
//! (udsfs_calls::bind::Tree): through its /proc entries (its root and
//! working directory), with its file credentials (`FsCreds`), so that
//! root's supervisor sees and makes only what the program's user may.
//! emulate.rs (bind, connect), msg.rs (a send's unreached name) and
//! routed.rs (unlink, link, rename, rmdir: `Moves`) share it.

use super::daemon::Res;
use super::thread_uid::FsCreds;
use udsfs_calls as calls;

/// The target's file tree, reached through its /proc entries (its root and
/// working directory), for udsfs_calls::bind, and looked at with the
/// target's file credentials (`FsCreds`); directories in the mount are the
/// supervisor's paths to it.
pub struct Tree(pub i32);

impl Tree {
    fn path(&self, p: &[u8]) -> Res<std::ffi::CString> {
        let at = if p.first() == Some(&b'/') {
            format!("/proc/{}/root", self.0)
        } else {
            format!("/proc/{}/cwd/", self.0)
        };
        std::ffi::CString::new([at.as_bytes(), p].concat()).map_err(|_| libc::EINVAL)
    }
}

fn errno_of<T>(r: std::io::Result<T>) -> Res<T> {
    r.map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

impl calls::bind::Tree for Tree {
    fn mode(&self, p: &[u8], follow: bool) -> Res<u32> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        let c = self.path(p)?;
        let _as = FsCreds::of(self.0)?;
        let path = std::ffi::OsStr::from_bytes(c.as_bytes());
        let m = if follow {
            std::fs::metadata(path)
        } else {
            std::fs::symlink_metadata(path)
        };
        errno_of(m).map(|m| m.mode())
    }

    fn symlink(&self, target: &[u8], p: &[u8]) -> Res<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = self.path(p)?;
        let _as = FsCreds::of(self.0)?;
        let (t, path) = (
            std::ffi::OsStr::from_bytes(target),
            std::ffi::OsStr::from_bytes(c.as_bytes()),
        );
        errno_of(std::os::unix::fs::symlink(t, path))
    }

    fn unlink_link(&self, p: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = self.path(p)
            && let Ok(_as) = FsCreds::of(self.0)
        {
            let _ = std::fs::remove_file(std::ffi::OsStr::from_bytes(c.as_bytes()));
        }
    }

    fn mkdir(&self, inside: &[u8], mode: u32) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::DirBuilderExt;
        // As the target, as the library's mkdir: a symlink in the mount
        // (the target's user may make one) leads anywhere.
        let Ok(_as) = FsCreds::of(self.0) else {
            return;
        };
        let _ = std::fs::DirBuilder::new()
            .mode(mode)
            .create(std::ffi::OsStr::from_bytes(inside));
    }

    fn chmod(&self, inside: &[u8], mode: u32) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        // As the target, as the library's chmod: only its own copies.
        let Ok(_as) = FsCreds::of(self.0) else {
            return;
        };
        let _ = std::fs::set_permissions(
            std::ffi::OsStr::from_bytes(inside),
            std::fs::Permissions::from_mode(mode),
        );
    }

    fn may(&self, p: &[u8], mask: i32) -> Res<()> {
        let c = self.path(p)?;
        let _as = FsCreds::of(self.0)?;
        calls::bind::accessible(&c, mask)
    }
}

impl calls::routed::Links for Tree {
    fn resolve(&self, p: &[u8]) -> Res<Vec<u8>> {
        use std::os::unix::ffi::OsStringExt;
        let c = self.path(p)?;
        as_target(self.0, c.as_bytes(), |p| std::fs::canonicalize(p))
            .map(|p| p.into_os_string().into_vec())
    }

    fn readlink(&self, p: &[u8]) -> Res<Vec<u8>> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let c = self.path(p)?;
        let _as = FsCreds::of(self.0)?;
        let l = std::fs::read_link(std::ffi::OsStr::from_bytes(c.as_bytes()));
        errno_of(l).map(|l| l.into_os_string().into_vec())
    }

    fn hard_link(&self, old: &[u8], new: &[u8]) -> Res<()> {
        use std::os::unix::ffi::OsStrExt;
        // As the target, as the library's link: nodes in the mount.
        let _as = FsCreds::of(self.0)?;
        let (o, n) = (
            std::ffi::OsStr::from_bytes(old),
            std::ffi::OsStr::from_bytes(new),
        );
        errno_of(std::fs::hard_link(o, n))
    }
}

/// `f` on `p` as the target's user (FsCreds), its io::Error as an errno.
fn as_target<T>(
    tid: i32,
    p: &[u8],
    f: impl FnOnce(&std::path::Path) -> std::io::Result<T>,
) -> Res<T> {
    use std::os::unix::ffi::OsStrExt;
    let _as = FsCreds::of(tid)?;
    errno_of(f(std::path::Path::new(std::ffi::OsStr::from_bytes(p))))
}

impl calls::routed::Moves for Tree {
    fn rename_node(&self, old: &[u8], new: &[u8]) -> Res<()> {
        use std::os::unix::ffi::OsStrExt;
        as_target(self.0, old, |o| {
            std::fs::rename(o, std::ffi::OsStr::from_bytes(new))
        })
    }

    fn node_is_dir(&self, node: &[u8]) -> bool {
        as_target(self.0, node, |n| std::fs::symlink_metadata(n)).is_ok_and(|m| m.is_dir())
    }

    fn rmdir_node(&self, node: &[u8]) -> Res<()> {
        as_target(self.0, node, |n| std::fs::remove_dir(n))
    }

    fn unlink_node(&self, node: &[u8]) -> Res<()> {
        as_target(self.0, node, |n| std::fs::remove_file(n))
    }

    fn rename_path(&self, old: &[u8], new: &[u8]) -> Res<()> {
        let (o, n) = (self.path(old)?, self.path(new)?);
        self.rename_node(o.as_bytes(), n.as_bytes())
    }

    fn entries(&self, p: &[u8]) -> Vec<(Vec<u8>, calls::routed::Kind)> {
        let Ok(c) = self.path(p) else {
            return Vec::new();
        };
        as_target(self.0, c.as_bytes(), calls::routed::read_entries).unwrap_or_default()
    }

    /// At most a line a second: a program can rename at will.
    fn say(&self, line: &str) {
        static LIMIT: crate::engine::log_limit::LogLimit =
            crate::engine::log_limit::LogLimit::new();
        if let Some(skipped) = LIMIT.admit() {
            let more = match skipped {
                0 => String::new(),
                n => format!(" ({n} more such lines left out)"),
            };
            super::call::say(&format!("thread {}: {line}{more}", self.0));
        }
    }
}

impl Tree {
    /// The absolute path `path` of the target names relative to `dirfd`
    /// (udsfs_calls::routed::absolute): its working directory for
    /// AT_FDCWD, the directory the descriptor was opened on otherwise.
    pub fn absolute(&self, dirfd: i32, path: &[u8]) -> Option<Vec<u8>> {
        use std::os::unix::ffi::OsStringExt;
        calls::routed::absolute(path, || {
            let link = if dirfd == libc::AT_FDCWD {
                format!("/proc/{}/cwd", self.0)
            } else {
                format!("/proc/{}/fd/{dirfd}", self.0)
            };
            let p = std::fs::read_link(link).ok()?;
            Some(p.into_os_string().into_vec())
        })
    }
}

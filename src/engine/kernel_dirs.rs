//! The kernel's directories, as the mount's copies of them must be. A tree
//! path `/P/d` in the mount is the place of kernel path `/P/d` for every
//! `udsfs run --route P` (README "What is routed"), so the mount's directory
//! there decides who may bind, connect and rename below it, as the kernel's
//! directory does on Linux. Its owner, group and mode are therefore taken
//! from the kernel's directory by the daemon itself, never from whoever
//! made the copy first (integration/adversarial_lanes2.sh `route_squat`):
//! looked up as the calling thread sees the kernel's tree (its root, through
//! `/proc/TID/root`, with its links followed inside that root only), or as
//! the daemon sees it when the thread's mount namespace could show anything
//! (one an unprivileged user made: `userns::mnt_ns_trusted`).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::userns;

/// A kernel directory's owner, group and mode (permission bits, sticky
/// and set-id bits included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDir {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// Whose view of the kernel's tree a request's copies follow.
pub struct View {
    root: Option<OwnedFd>,
    /// The mount's own device: a walk that leads back into the mount stops
    /// there, never asking the daemon itself for a lookup.
    mount_dev: Option<(u32, u32)>,
}

/// Links a walk follows at most (MAXSYMLINKS).
const MAX_LINKS: usize = 40;

impl View {
    /// The view of thread `tid` (a FUSE request's), or the daemon's own
    /// when that thread's mount namespace is not to be believed, or it is
    /// gone. `mount` is the mount point as the daemon sees it.
    pub fn of(tid: u32, mount: &[u8]) -> View {
        let path = if userns::mnt_ns_trusted(tid) {
            format!("/proc/{tid}/root")
        } else {
            "/".to_string()
        };
        let root = open(libc::AT_FDCWD, path.as_bytes(), libc::O_PATH, 0)
            .or_else(|| open(libc::AT_FDCWD, b"/", libc::O_PATH, 0));
        let mount_dev = CString::new(mount)
            .ok()
            .and_then(|m| statx(libc::AT_FDCWD, &m, 0))
            .map(|x| (x.stx_dev_major, x.stx_dev_minor));
        View { root, mount_dev }
    }

    /// The kernel directory at each of the first `n` prefixes of the
    /// components `parts` of an absolute path (`/a`, `/a/b`, ...), as far
    /// as each is a directory: links followed within the view's root (an
    /// absolute one from that root, `..` never above it), one component
    /// at a time with O_NOFOLLOW, so no link is followed out of the root
    /// and no walk enters the mount (the daemon would ask itself). Shorter
    /// than `n` where a prefix is no directory or cannot be told.
    pub fn dirs(&self, parts: &[&[u8]], n: usize) -> Vec<KernelDir> {
        let mut out = Vec::new();
        let Some(root) = self.root.as_ref().and_then(|r| r.try_clone().ok()) else {
            return out;
        };
        let Some(rx) = statx(root.as_raw_fd(), c"", libc::AT_EMPTY_PATH) else {
            return out;
        };
        // (each directory of the walk, with its attributes)
        let mut stack = vec![(root, rx)];
        let mut links = 0;
        for part in parts.iter().take(n) {
            let mut pending = vec![part.to_vec()];
            while let Some(name) = pending.pop() {
                if name.is_empty() || name == b"." {
                    continue;
                }
                if name == b".." {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    continue;
                }
                let Some((cur, _)) = stack.last() else {
                    return out;
                };
                let Some(f) = open(
                    cur.as_raw_fd(),
                    &name,
                    libc::O_PATH | libc::O_NOFOLLOW,
                    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
                ) else {
                    return out;
                };
                let Some(x) = statx(f.as_raw_fd(), c"", libc::AT_EMPTY_PATH) else {
                    return out;
                };
                if Some((x.stx_dev_major, x.stx_dev_minor)) == self.mount_dev {
                    return out;
                }
                match u32::from(x.stx_mode) & libc::S_IFMT {
                    libc::S_IFDIR => stack.push((f, x)),
                    libc::S_IFLNK => {
                        links += 1;
                        let Some(target) = readlink(&f).filter(|_| links <= MAX_LINKS) else {
                            return out;
                        };
                        if target.starts_with(b"/") {
                            stack.truncate(1);
                        }
                        let mut more: Vec<Vec<u8>> =
                            target.split(|&b| b == b'/').map(<[u8]>::to_vec).collect();
                        more.reverse();
                        pending.extend(more);
                    }
                    _ => return out,
                }
            }
            let Some((_, st)) = stack.last() else {
                return out;
            };
            out.push(KernelDir {
                uid: st.stx_uid,
                gid: st.stx_gid,
                mode: u32::from(st.stx_mode) & 0o7777,
            });
        }
        out
    }
}

/// struct open_how (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(2) of `path` below `dir` with `flags` (O_CLOEXEC added) and
/// `resolve`.
fn open(dir: i32, path: &[u8], flags: i32, resolve: u64) -> Option<OwnedFd> {
    let c = CString::new(path).ok()?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: a NUL-terminated path and an open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    // SAFETY: a non-negative return is a descriptor the kernel just made ours.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// statx(2) of `path` at `dir`, with the attributes the daemon has at hand
/// only (AT_STATX_DONT_SYNC: a FUSE file, the mount's root among them, is
/// not asked of its daemon).
fn statx(dir: i32, path: &CStr, flags: i32) -> Option<libc::statx> {
    // SAFETY: statx writes one struct statx.
    let mut x: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct statx to fill.
    let r = unsafe {
        libc::statx(
            dir,
            path.as_ptr(),
            flags | libc::AT_STATX_DONT_SYNC | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS,
            &mut x,
        )
    };
    (r == 0).then_some(x)
}

/// readlink of the link `f` (O_PATH|O_NOFOLLOW) names.
fn readlink(f: &OwnedFd) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::readlinkat(
            f.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_directories_are_seen_as_the_thread_sees_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("udsfs-kdirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d/e")).unwrap();
        std::fs::set_permissions(dir.join("d"), std::fs::Permissions::from_mode(0o1733)).unwrap();
        std::fs::set_permissions(dir.join("d/e"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("/nonexistent-udsfs", dir.join("dangling")).unwrap();
        std::os::unix::fs::symlink(dir.join("d"), dir.join("linked")).unwrap();
        std::os::unix::fs::symlink("../../../../../../..", dir.join("up")).unwrap();
        std::fs::write(dir.join("f"), b"").unwrap();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let v = View::of(tid, b"/nonexistent-mount");
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let base = dir.clone().into_os_string().into_encoded_bytes();
        let parts: Vec<&[u8]> = base
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty())
            .collect();
        let below = parts.len();
        for (rest, want) in [
            ("d/e", vec![0o1733, 0o700]),
            ("linked/e", vec![0o1733, 0o700]),
            ("d/../d", vec![0o1733, 0o755, 0o1733]),
            ("dangling/x", vec![]),
            ("f/x", vec![]),
            ("missing", vec![]),
        ] {
            let mut all = parts.clone();
            all.extend(rest.split('/').map(str::as_bytes));
            let got = v.dirs(&all, all.len());
            let modes: Vec<u32> = got.iter().skip(below).map(|d| d.mode).collect();
            println!(
                "{rest}: {:?}",
                modes.iter().map(|m| format!("{m:o}")).collect::<Vec<_>>()
            );
            assert_eq!(
                got.len().min(below),
                below,
                "{rest}: the temp directory itself"
            );
            assert_eq!(modes, want, "{rest}");
            assert!(got[below..].iter().all(|d| (d.uid, d.gid) == (uid, gid)));
        }
        // Out of the root no link leads: /.. is /.
        let all = [&b"up"[..], b"..", b"tmp"];
        let mut from_dir = parts.clone();
        from_dir.extend(all);
        let got = v.dirs(&from_dir, from_dir.len());
        println!("up/../tmp: {} of {}", got.len(), from_dir.len());
        assert_eq!(got.len(), from_dir.len());
        assert_eq!(got.last().map(|d| d.mode & 0o1000), Some(0o1000));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_mkdir_in_the_mount_makes_a_copy_with_the_kernels_owner_and_mode() {
        use crate::engine::tree::{Maker, ROOT_INO};
        use crate::engine::{Config, Engine};
        let eng = Engine::new(Config {
            mountpoint: Some("/nonexistent-udsfs-mount".into()),
            ..Config::default()
        });
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let b = Maker {
            uid: 61052,
            gid: 61052,
            mode: 0o777,
        };
        // No route declared: B's mkdir of tmp is B's, as on a plain mount.
        let plain = eng.mkdir(ROOT_INO, b"tmp", b, tid).unwrap();
        let p = eng.tree.getattr(plain).unwrap();
        println!("B's mkdir of tmp, no route: {:o} {}", p.perm, p.uid);
        assert_eq!((p.perm, p.uid), (0o777, 61052));
        eng.tree.rmdir(ROOT_INO, b"tmp").unwrap();
        // A route below /tmp declared: /tmp is the kernel's (root's, 1777),
        // above the route; B's own name beside the route is no copy.
        eng.tree.declare_route(b"/tmp/udsfs-route", 61052).unwrap();
        let tmp = eng.mkdir(ROOT_INO, b"tmp", b, tid).unwrap();
        let own = eng.mkdir(tmp, b"udsfs-no-such-kernel-dir", b, tid).unwrap();
        let (t, o) = (
            eng.tree.getattr(tmp).unwrap(),
            eng.tree.getattr(own).unwrap(),
        );
        println!(
            "B's mkdir of tmp: {:o} {}; of a name the kernel lacks: {:o} {}",
            t.perm, t.uid, o.perm, o.uid
        );
        assert_eq!((t.perm, t.uid, t.gid), (0o1777, 0, 0));
        assert_eq!((o.perm, o.uid), (0o777, 61052));
        assert_eq!(
            eng.tree.path_of(own).unwrap(),
            b"tmp/udsfs-no-such-kernel-dir"
        );
        assert_eq!(eng.tree.path_of(ROOT_INO).unwrap(), b"");
    }
}

//! A routed name (README "What is routed") is a symlink at the path the
//! program bound, to the socket's node in the mount (`node`: the mount
//! point and the path). That link acts as Linux's socket file does: lstat
//! shows the node (`own_link` tells the link a routed bind made from any
//! other), unlink removes the node with it (`unlink`), link makes a second
//! name for the node (`link`), rename moves the node along (`rename`) and
//! rmdir of a routed directory removes the one a bind made below the mount
//! (`rmdir`). Paths here are absolute and normalized as routes are
//! (`absolute`); the front says how the program's tree is reached (`Links`,
//! `Moves`) and makes the kernel's part of the call (`call`: the library its
//! own, the supervisor as the target).

use udsfs_proto::Res;
use udsfs_proto::route::{Routes, normalize};

use crate::bind::{Tree, mirror_dirs};

/// What `link` needs of the program's tree besides `Tree`.
pub trait Links: Tree {
    /// readlink(2) of `path`.
    fn readlink(&self, path: &[u8]) -> Res<Vec<u8>>;
    /// link(2) of `old` to `new`, both nodes in the mount (the front's
    /// view of it).
    fn hard_link(&self, old: &[u8], new: &[u8]) -> Res<()>;
    /// realpath(3) of `path`: every link followed (a routed bind's into
    /// the mount, the front's view of it).
    fn resolve(&self, path: &[u8]) -> Res<Vec<u8>>;
}

/// The absolute path, normalized as routes are (lexically), that `path`
/// names relative to `base` (the working directory or the directory a
/// descriptor was opened on, asked only for a relative path; None when it
/// cannot be told).
pub fn absolute(path: &[u8], base: impl FnOnce() -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    if path.starts_with(b"/") {
        return Some(normalize(path, b"/"));
    }
    let base = base().filter(|b| b.starts_with(b"/"))?;
    Some(normalize(path, &base))
}

/// The node in the mount of routed path `abs` (None: not under a route).
pub fn node(routes: &Routes, abs: &[u8]) -> Option<Vec<u8>> {
    routes
        .routed(abs)
        .then(|| [routes.mount.as_slice(), abs].concat())
}

/// Is `abs` the link a routed bind made? Then the node it points at: the
/// node of its own path, or of the path the bind was given when that named
/// this place through a linked directory (a bind of dl/a.sock, dl -> d,
/// made its link at d/a.sock, pointing at the node of dl/a.sock: the same
/// name in a directory that resolves to the same one).
pub fn own_link(t: &impl Links, routes: &Routes, abs: &[u8]) -> Option<Vec<u8>> {
    let node = node(routes, abs)?;
    let target = t.readlink(abs).ok()?;
    if target == node {
        return Some(node);
    }
    let given = target.strip_prefix(routes.mount.as_slice())?;
    (routes.routed(given) && same_place(t, given, abs)).then_some(target)
}

/// Do absolute paths `a` and `b` name the same entry: the same last name in
/// directories that resolve to the same one?
fn same_place(t: &impl Links, a: &[u8], b: &[u8]) -> bool {
    let split = |p: &[u8]| {
        let i = p.iter().rposition(|&c| c == b'/').unwrap_or(0);
        (p[..i.max(1)].to_vec(), p[i + 1..].to_vec())
    };
    let ((da, na), (db, nb)) = (split(a), split(b));
    na == nb && da != db && {
        let (ra, rb) = (t.resolve(&da), t.resolve(&db));
        ra.is_ok() && ra == rb
    }
}

/// link(2) of routed socket path `old` to `new`: on Linux the new name is
/// the same socket file, so connect through it reaches the socket and
/// unlink of the old name leaves it bound (supervisord binds NAME.PID,
/// links NAME to it and unlinks NAME.PID). Here the node gets a second name
/// in the mount (a hard link there) and `new` a link to that name, as a
/// routed bind leaves: `new` first (its errors are link's: EEXIST, ENOENT,
/// EACCES), its directories below the mount, then the hard link, `new`'s
/// link going again when that fails. None: `old` is not a routed bind's
/// link or `new` is not under a route; the kernel's call is the answer.
pub fn link(t: &impl Links, routes: &Routes, old: &[u8], new: &[u8]) -> Option<Res<()>> {
    let src = own_link(t, routes, old)?;
    let dst = node(routes, new)?;
    let made = t.symlink(&dst, new).and_then(|()| {
        mirror_dirs(t, &routes.mount, new);
        t.hard_link(&src, &dst).inspect_err(|_| t.unlink_link(new))
    });
    Some(made)
}

/// What rename, rmdir and unlink of routed names need of the program's
/// tree and the mount besides `Links`. Program paths are absolute; nodes
/// are the front's paths in the mount.
pub trait Moves: Links {
    /// rename(2) of node `old` to `new`, both in the mount.
    fn rename_node(&self, old: &[u8], new: &[u8]) -> Res<()>;
    /// Is `node` a directory in the mount (not following a link)?
    fn node_is_dir(&self, node: &[u8]) -> bool;
    /// rmdir(2) of `node`, a directory in the mount.
    fn rmdir_node(&self, node: &[u8]) -> Res<()>;
    /// unlink(2) of `node`, a socket in the mount.
    fn unlink_node(&self, node: &[u8]) -> Res<()>;
    /// rename(2) of `old` to `new` in the program's tree (a link this
    /// module made over the one at `new`).
    fn rename_path(&self, old: &[u8], new: &[u8]) -> Res<()>;
    /// The entries of directory `path` of the program's tree (without "."
    /// and ".."), each with its kind, not following links.
    fn entries(&self, path: &[u8]) -> Vec<(Vec<u8>, Kind)>;
    /// A line in the front's log.
    fn say(&self, line: &str);
}

/// An entry's kind, as `Moves::entries` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Link,
    Other,
}

/// The entries of directory `dir` (a path the front reaches it by) as
/// `Moves::entries` gives them, read with the calling thread's credentials.
pub fn read_entries(dir: &std::path::Path) -> std::io::Result<Vec<(Vec<u8>, Kind)>> {
    use std::os::unix::ffi::OsStringExt;
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .map(|e| {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => Kind::Dir,
                Ok(t) if t.is_symlink() => Kind::Link,
                _ => Kind::Other,
            };
            (e.file_name().into_vec(), kind)
        })
        .collect())
}

/// What a removal of a routed path removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    /// unlink: the link at the path.
    Link,
    /// rmdir, or unlinkat with AT_REMOVEDIR: a directory.
    Dir,
}

/// unlink or rmdir (`what`) of routed path `abs`, the kernel's `call`
/// removing the link or the directory at the path. None: not a routed
/// path (the kernel's call is the whole answer).
///
/// unlink removes the path's node in the mount too, as servers unlink a
/// stale socket before they bind it again (and shutil.rmtree removes a
/// directory's entries with unlinkat): the kernel's link, then the node.
/// The kernel's error is the answer (the node stays), but ENOENT: then the
/// node alone is removed (a node whose link is gone), with its error.
///
/// rmdir removes the directory a bind below it made in the mount
/// (`bind::mirror_dirs`) too, once the kernel's is gone: a later bind of
/// the same name would find it there (EADDRINUSE).
pub fn remove(
    what: Removed,
    t: &impl Moves,
    routes: &Routes,
    abs: &[u8],
    call: impl FnOnce() -> Res<()>,
) -> Option<Res<()>> {
    let node = node(routes, abs)?;
    Some(match what {
        // The kernel's link first: only a caller that may remove the
        // name (or finds none there: a node left without its link) removes
        // the node. The mount's copy of a directory can be another user's
        // (whoever bound there first), whose sticky bit or write permission
        // must not decide what the kernel's refused
        // (adversarial_lanes2.sh route_unlink).
        Removed::Link => match call() {
            Ok(()) => {
                let _ = t.unlink_node(&node);
                Ok(())
            }
            Err(libc::ENOENT) => t.unlink_node(&node),
            Err(e) => Err(e),
        },
        Removed::Dir => {
            let r = call();
            if r.is_ok() {
                let _ = t.rmdir_node(&node);
            }
            r
        }
    })
}

/// What a rename of a routed path moves in the mount.
#[derive(Clone, Copy)]
enum Moved {
    /// The link a routed bind made: its node.
    Socket,
    /// A directory whose node the mount has: it, and the links below.
    Dir,
}

impl Moved {
    fn name(self) -> &'static str {
        match self {
            Moved::Socket => "socket path",
            Moved::Dir => "directory",
        }
    }
}

/// rename (renameat2 `flags`) of routed path `old` to `new`: the kernel's
/// `call` moves the link or directory (with its errors, replacing what was
/// at the new path), then the mount follows. A bound socket's node moves to
/// the new path's place in the mount, where connect looks for it, and the
/// link at the new path is pointed at it there; a directory the mount
/// mirrors moves there too, and the links of the sockets below it are
/// pointed at their nodes' new paths. RENAME_EXCHANGE and a new path
/// outside the routes move only what the kernel moved (a log line says
/// so). None: `old` is neither a routed bind's link nor a directory the
/// mount mirrors (the kernel's call is the whole answer). Both paths are
/// read before the call: a working directory inside a renamed directory
/// moves with it.
pub fn rename(
    t: &impl Moves,
    routes: &Routes,
    old: &[u8],
    new: &[u8],
    flags: u32,
    call: impl FnOnce() -> Res<()>,
) -> Option<Res<()>> {
    let src = node(routes, old)?;
    let what = if t.readlink(old).is_ok_and(|l| l == src) {
        Moved::Socket
    } else if t
        .mode(old, false)
        .is_ok_and(|m| m & libc::S_IFMT == libc::S_IFDIR)
        && t.node_is_dir(&src)
    {
        Moved::Dir
    } else {
        return None;
    };
    let r = call();
    if r.is_ok() {
        follow(t, routes, old, &src, what, new, flags);
    }
    Some(r)
}

/// The mount follows a rename the kernel made (`rename`).
fn follow(
    t: &impl Moves,
    routes: &Routes,
    old: &[u8],
    src: &[u8],
    what: Moved,
    new: &[u8],
    flags: u32,
) {
    let shown = String::from_utf8_lossy(old);
    let Some(dst) = node(routes, new).filter(|_| flags & libc::RENAME_EXCHANGE == 0) else {
        t.say(&format!(
            "rename of routed {} {shown}: the mount keeps it under the old name (the new path is not under a route, or RENAME_EXCHANGE); connect finds it there only",
            what.name()
        ));
        return;
    };
    mirror_dirs(t, &routes.mount, new);
    if let Err(e) = t.rename_node(src, &dst) {
        t.say(&format!(
            "rename of routed {} {shown}: it did not move in the mount: {}",
            what.name(),
            std::io::Error::from_raw_os_error(e)
        ));
        return;
    }
    match what {
        Moved::Socket => {
            if let Err(e) = repoint(t, new, &dst) {
                t.say(&format!(
                    "rename of routed socket path {shown}: the link at the new path still points at the old node: {}",
                    std::io::Error::from_raw_os_error(e)
                ));
            }
        }
        Moved::Dir => repoint_below(t, new, src, &dst, 0),
    }
}

/// The links below directory `dir` that point below node `from` are
/// pointed at the same place below `to` (64 levels deep at most).
fn repoint_below(t: &impl Moves, dir: &[u8], from: &[u8], to: &[u8], depth: u32) {
    for (name, kind) in t.entries(dir) {
        let path = [dir, b"/", &name].concat();
        match kind {
            Kind::Dir if depth < 64 => repoint_below(t, &path, from, to, depth + 1),
            Kind::Link => {
                let Ok(target) = t.readlink(&path) else {
                    continue;
                };
                if let Some(rest) = target.strip_prefix(from).filter(|r| r.starts_with(b"/")) {
                    let _ = repoint(t, &path, &[to, rest].concat());
                }
            }
            _ => {}
        }
    }
}

/// Replaces the link at `path` by one to `node` in one step, a new link
/// beside it renamed over it, so the path never goes missing.
fn repoint(t: &impl Moves, path: &[u8], node: &[u8]) -> Res<()> {
    let dir = &path[..path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)];
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    let tmp = [dir, format!(".udsfs-link-{pid}-{tid}").as_bytes()].concat();
    t.symlink(node, &tmp)?;
    t.rename_path(&tmp, path)
        .inspect_err(|_| t.unlink_link(&tmp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{ascii, fake};

    #[test]
    fn a_link_of_a_routed_socket_names_its_node_twice() {
        let routes = crate::fake::m_r();
        let t = fake(
            &[b"/r", b"/r/d"],
            &[(b"/r/s", b"/m/r/s"), (b"/r/other", b"/elsewhere")],
        );
        let r = link(&t, &routes, b"/r/s", b"/r/d/t");
        let done = t.taken();
        println!("link /r/s /r/d/t: {r:?}; {done}");
        assert_eq!(r, Some(Ok(())));
        assert_eq!(
            done,
            "link /r/d/t -> /m/r/d/t; mkdir /m/r 700; chmod /m/r 700; mkdir /m/r/d 700; chmod /m/r/d 700; hard link /m/r/s /m/r/d/t"
        );
        for (old, new, want) in [
            (&b"/r/other"[..], &b"/r/x"[..], None),
            (b"/r/s", b"/tmp/x", None),
            (b"/r/s", b"/r/other", Some(Err(libc::EEXIST))),
            (b"/r/s", b"/r/full", Some(Err(libc::ENOSPC))),
        ] {
            let r = link(&t, &routes, old, new);
            println!("link {} {}: {r:?}", ascii(old), ascii(new));
            assert_eq!(r, want);
        }
        assert!(t.done.borrow().last().unwrap() == "unlink /r/full");
    }

    #[test]
    fn relative_paths_are_made_absolute_from_their_base() {
        assert_eq!(absolute(b"/a/./b/../c", || None), Some(b"/a/c".to_vec()));
        assert_eq!(
            absolute(b"../s.sock", || Some(b"/usr/lib".to_vec())),
            Some(b"/usr/s.sock".to_vec())
        );
        assert_eq!(absolute(b"x", || None), None);
        assert_eq!(absolute(b"x", || Some(b"pipe:[1]".to_vec())), None);
    }

    fn routes() -> Routes {
        crate::fake::m_r()
    }

    /// The scratch link `repoint` makes in `dir`.
    fn scratch(dir: &str) -> String {
        // SAFETY: no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        format!("{dir}/.udsfs-link-{pid}-{tid}")
    }

    #[test]
    fn a_renamed_socket_path_takes_its_node_along() {
        let t = fake(
            &[b"/r", b"/r/d"],
            &[(b"/r/s", b"/m/r/s"), (b"/r/other", b"/x")],
        );
        let r = rename(&t, &routes(), b"/r/s", b"/r/d/t", 0, || Ok(()));
        let done = t.taken();
        println!("rename /r/s /r/d/t: {r:?}; {done}");
        assert_eq!(r, Some(Ok(())));
        let tmp = scratch("/r/d");
        assert_eq!(
            done,
            format!(
                "mkdir /m/r 700; chmod /m/r 700; mkdir /m/r/d 700; chmod /m/r/d 700; rename node /m/r/s /m/r/d/t; link {tmp} -> /m/r/d/t; rename {tmp} /r/d/t"
            )
        );
        // The kernel's refusal is the answer, and nothing moves.
        let r = rename(&t, &routes(), b"/r/s", b"/r/d/t", 0, || Err(libc::EXDEV));
        println!("refused by the kernel: {r:?}; {}", t.taken());
        assert_eq!(r, Some(Err(libc::EXDEV)));
        assert!(t.done.borrow().is_empty());
        // No routed bind's link, or not under a route: the kernel's alone.
        for old in [&b"/r/other"[..], b"/r/nothing", b"/tmp/s"] {
            let r = rename(&t, &routes(), old, b"/r/z", 0, || {
                panic!("not the core's call")
            });
            println!("rename {}: {r:?}", ascii(old));
            assert_eq!(r, None);
        }
        // Out of the routes, or exchanged: the mount keeps it, and says so.
        for (new, flags) in [(&b"/tmp/s"[..], 0), (b"/r/d/t", libc::RENAME_EXCHANGE)] {
            let r = rename(&t, &routes(), b"/r/s", new, flags, || Ok(()));
            let done = t.taken();
            println!("rename /r/s {} flags {flags}: {r:?}; {done}", ascii(new));
            assert_eq!(r, Some(Ok(())));
            assert!(done.starts_with("say rename of routed socket path /r/s: the mount keeps it"));
        }
        // The node cannot move: said, the link left as the kernel left it.
        let r = rename(&t, &routes(), b"/r/s", b"/r/full", 0, || Ok(()));
        let done = t.taken();
        println!("rename /r/s /r/full: {r:?}; {done}");
        assert!(
            done.ends_with("it did not move in the mount: No space left on device (os error 28)")
        );
    }

    #[test]
    fn a_renamed_directory_takes_its_node_and_the_links_below_along() {
        let t = fake(
            &[b"/r", b"/r/d", b"/m/r/d", b"/r/e", b"/r/e/sub"],
            &[
                (b"/r/e/x", b"/m/r/d/x"),
                (b"/r/e/y", b"/elsewhere"),
                (b"/r/e/dx", b"/m/r/dx"),
                (b"/r/e/sub/z", b"/m/r/d/sub/z"),
            ],
        );
        let r = rename(&t, &routes(), b"/r/d", b"/r/e", 0, || Ok(()));
        let done = t.taken();
        println!("rename /r/d /r/e: {r:?}; {done}");
        assert_eq!(r, Some(Ok(())));
        let (e, sub) = (scratch("/r/e"), scratch("/r/e/sub"));
        assert_eq!(
            done,
            format!(
                "mkdir /m/r 700; chmod /m/r 700; rename node /m/r/d /m/r/e; \
                 link {sub} -> /m/r/e/sub/z; rename {sub} /r/e/sub/z; \
                 link {e} -> /m/r/e/x; rename {e} /r/e/x"
            )
        );
        // A routed directory the mount has no copy of: the kernel's alone.
        let r = rename(&t, &routes(), b"/r/e", b"/r/f", 0, || panic!("not ours"));
        assert_eq!(r, None);
    }

    #[test]
    fn unlink_and_rmdir_of_routed_names_take_their_nodes() {
        let t = fake(&[b"/r"], &[]);
        for (path, kernel, want) in [
            (&b"/r/s"[..], Err(libc::ENOENT), Some(Ok(()))),
            (b"/r/gone", Ok(()), Some(Ok(()))),
            (b"/r/gone", Err(libc::EPERM), Some(Err(libc::EPERM))),
            (b"/r/full", Err(libc::ENOENT), Some(Err(libc::ENOSPC))),
            (b"/r/full", Ok(()), Some(Ok(()))),
            // The kernel refused the caller the link: the node stays.
            (b"/r/s", Err(libc::EPERM), Some(Err(libc::EPERM))),
            (b"/tmp/s", Ok(()), None),
        ] {
            let r = remove(Removed::Link, &t, &routes(), path, || kernel);
            let done = t.taken();
            println!("unlink {} (kernel {kernel:?}): {r:?}; {done}", ascii(path));
            assert_eq!(r, want);
            if matches!(kernel, Err(e) if e != libc::ENOENT) {
                assert_eq!(done, "", "a node removed where the kernel refused the link");
            }
        }
        let r = remove(Removed::Dir, &t, &routes(), b"/r/d", || Ok(()));
        let done = t.taken();
        println!("rmdir /r/d: {r:?}; {done}");
        assert_eq!((r, done.as_str()), (Some(Ok(())), "rmdir node /m/r/d"));
        let r = remove(Removed::Dir, &t, &routes(), b"/r/d", || {
            Err(libc::ENOTEMPTY)
        });
        assert_eq!((r, t.taken().as_str()), (Some(Err(libc::ENOTEMPTY)), ""));
        assert_eq!(
            remove(Removed::Dir, &t, &routes(), b"/tmp/d", || Ok(())),
            None
        );
    }

    #[test]
    fn a_link_made_through_a_linked_directory_is_a_routed_binds() {
        let t = fake(
            &[b"/r", b"/r/d"],
            &[
                (b"/r/dl", b"/r/d"),
                (b"/r/d/a.sock", b"/m/r/dl/a.sock"),
                (b"/r/d/b.sock", b"/m/r/dl/other.sock"),
                (b"/r/d/c.sock", b"/m/r/e/c.sock"),
                (b"/r/d/s", b"/m/r/d/s"),
            ],
        );
        for (path, want) in [
            (&b"/r/d/s"[..], Some(&b"/m/r/d/s"[..])),
            (b"/r/d/a.sock", Some(b"/m/r/dl/a.sock")),
            (b"/r/d/b.sock", None),
            (b"/r/d/c.sock", None),
            (b"/r/dl", None),
        ] {
            let got = own_link(&t, &routes(), path);
            println!("{}: {:?}", ascii(path), got.as_deref().map(ascii));
            assert_eq!(got.as_deref(), want, "{}", ascii(path));
        }
    }
}

//! A routed name (README "What is routed") is a symlink at the path the
//! program bound, to the socket's node in the mount (`node`: the mount
//! point and the path). That link acts as Linux's socket file does: lstat
//! shows the node (`own_link` tells the link a routed bind made from any
//! other), unlink removes the node with it, and link makes a second name
//! for the node (`link`). Paths here are absolute and normalized as routes
//! are (`absolute`); the front says how the program's tree is reached
//! (`Links`) and makes the kernel's part of the call.

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

/// Is `abs` the link a routed bind made, pointing at the node of its own
/// path? Then that node.
pub fn own_link(t: &impl Links, routes: &Routes, abs: &[u8]) -> Option<Vec<u8>> {
    let node = node(routes, abs)?;
    (t.readlink(abs).ok()? == node).then_some(node)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{ascii, fake};

    #[test]
    fn a_link_of_a_routed_socket_names_its_node_twice() {
        let routes = Routes {
            mount: b"/m".to_vec(),
            routes: vec![b"/r".to_vec()],
        };
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
            "link /r/d/t -> /m/r/d/t; mkdir /m/r 700; mkdir /m/r/d 700; hard link /m/r/s /m/r/d/t"
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
}

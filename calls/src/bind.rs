//! bind() of a udsfs socket to a path, as Linux's unix_bind answers it: the
//! errno of a kernel path outside the mount and its routes, and the order of
//! a routed bind (the link at the routed path first, as Linux makes the
//! socket file first). The front says how the program's file tree is reached
//! (`Tree`): the library with its own calls, the supervisor through the
//! target's /proc entries.

use udsfs_proto::Res;
use udsfs_proto::route::Routes;

/// The program's view of the kernel's file tree. Paths are as the program
/// gave them (relative to its working directory, or absolute), except the
/// routed ones, which are absolute.
pub trait Tree {
    /// st_mode of `path` (stat(2), or lstat(2) unless `follow`), or its
    /// errno.
    fn mode(&self, path: &[u8], follow: bool) -> Res<u32>;
    /// symlink(2) of `path` to `target`.
    fn symlink(&self, target: &[u8], path: &[u8]) -> Res<()>;
    /// unlink(2) of the link `symlink` made (not the library's unlink,
    /// which would remove the node too).
    fn unlink_link(&self, path: &[u8]);
    /// mkdir(2) of `inside`, a directory in the mount (the front's view of
    /// it), with `mode`; an error is left for the bind to meet.
    fn mkdir(&self, inside: &[u8], mode: u32);
    /// chmod(2) of `inside`, a directory in the mount (the front's view of
    /// it), as the program: refused (EPERM) unless it owns it or is root;
    /// an error is left.
    fn chmod(&self, inside: &[u8], mode: u32);
    /// May the program reach `path` (following links) for `mask` (W_OK,
    /// X_OK)? faccessat2(2) with AT_EACCESS, as the program: its errno when
    /// not (also the walk's: EACCES for a directory on the way it may not
    /// search, ENOENT, ENOTDIR, ELOOP).
    fn may(&self, path: &[u8], mask: i32) -> Res<()>;
}

/// faccessat2(2) `mask` of `path` with AT_EACCESS: may the calling thread,
/// with the file credentials it has now, reach it so (following links)? The
/// system call itself: the C library may emulate AT_EACCESS with the
/// effective ids, not the file ones a front set (`Tree::may`).
pub fn accessible(path: &std::ffi::CStr, mask: i32) -> Res<()> {
    // SAFETY: a NUL-terminated path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            mask,
            libc::AT_EACCESS,
        )
    };
    if r == 0 {
        return Ok(());
    }
    Err(std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO))
}

/// The errno of bind() to `path`, a kernel path outside the mount and its
/// routes: what unix_bind's mknod would say when the path exists
/// (EADDRINUSE) or its directory does not (ENOENT, ENOTDIR, EACCES), else
/// EINVAL, as udsfs keeps no kernel names (the front logs that one).
pub fn kernel_path_error(t: &impl Tree, path: &[u8]) -> i32 {
    if path.is_empty() {
        return libc::EINVAL;
    }
    match t.mode(path, false) {
        Ok(_) => return libc::EADDRINUSE,
        // The lookup's own failure (a directory the caller may not search:
        // EACCES; ELOOP, ENOTDIR), as mknod's path walk gives it.
        Err(e) if e != libc::ENOENT => return e,
        Err(_) => {}
    }
    let dir = match path.iter().rposition(|&b| b == b'/') {
        Some(0) => &b"/"[..],
        Some(i) => &path[..i],
        None => &b"."[..],
    };
    match t.mode(dir, true) {
        Err(e) => e,
        Ok(m) if m & libc::S_IFMT != libc::S_IFDIR => libc::ENOTDIR,
        Ok(_) => libc::EINVAL,
    }
}

/// bind() of a udsfs socket to tree path `wire` (empty: autobind; a NUL
/// first: an abstract name), which the program gave as sun_path `given`: a
/// last component no socket file can take is refused first
/// (`last_component_error`); a routed name is bound as `routed` makes it,
/// any other by `bind` (the daemon's) alone.
pub fn udsfs(
    t: &impl Tree,
    routes: &Routes,
    wire: &[u8],
    given: &[u8],
    bind: impl FnOnce() -> Res<()>,
) -> Res<()> {
    if let Some(e) = last_component_error(t, given) {
        return Err(e);
    }
    match routes.routed_path(wire) {
        Some(abs) => routed(t, &routes.mount, &abs, bind),
        None => bind(),
    }
}

/// The errno of bind() to sun_path `given` whose last component mknod
/// cannot create, as filename_create answers: "." or ".." name something
/// that exists (EEXIST, which unix_bind reports as EADDRINUSE); a name with
/// trailing slashes asks for a directory: EADDRINUSE when the name exists,
/// ENOENT when it does not (or the error of its lookup). The lexical
/// routing would otherwise bind "t.sock/" as "t.sock" and "d/." as "d".
pub fn last_component_error(t: &impl Tree, given: &[u8]) -> Option<i32> {
    let name = match given.iter().rposition(|&b| b != b'/') {
        Some(end) => &given[..=end],
        None => return (!given.is_empty()).then_some(libc::EADDRINUSE),
    };
    let last = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    if last == b"." || last == b".." {
        return Some(libc::EADDRINUSE);
    }
    if name.len() == given.len() {
        return None;
    }
    Some(match t.mode(name, false) {
        Ok(_) => libc::EADDRINUSE,
        Err(e) => e,
    })
}

/// A bind of a routed name: `abs` the routed path the program bound,
/// `mount` the mount point (its node is `mount` + `abs`). The directories of
/// `abs` are made below the mount too, with the kernel directories' modes;
/// the link at `abs` to the node is made first, as Linux makes the socket
/// file: a path that exists, of any kind (a name a crashed server left, a
/// regular file), gives EADDRINUSE, a missing directory ENOENT, and so on,
/// as unix_bind's mknod; then `bind` (the daemon's), and the link goes
/// again when that fails.
pub fn routed(t: &impl Tree, mount: &[u8], abs: &[u8], bind: impl FnOnce() -> Res<()>) -> Res<()> {
    let node = [mount, abs].concat();
    t.symlink(&node, abs).map_err(|e| match e {
        libc::EEXIST => libc::EADDRINUSE,
        e => e,
    })?;
    mirror_dirs(t, mount, abs);
    bind().inspect_err(|_| t.unlink_link(abs))
}

/// Each directory of routed path `abs` made below `mount` as well, with
/// the kernel directory's mode (0755 when it cannot be read), and one
/// there already given the kernel directory's mode now, as far as the
/// program may (its owner or root): the daemon's bind checks the mount's
/// copy, which kept the mode it was made with, so a bind in a directory
/// chmod made writable since (the routed root made 1777 after the run
/// began) was EACCES. A copy the program may not chmod is the daemon's to
/// correct: its bind gives every copy on the path the kernel directory's
/// owner, group and mode as it sees them (src/engine/kernel_dirs.rs), so
/// what the program makes or chmods here only counts until then.
pub fn mirror_dirs(t: &impl Tree, mount: &[u8], abs: &[u8]) {
    let mut at = 1;
    while let Some(i) = abs
        .get(at..)
        .and_then(|r| r.iter().position(|&b| b == b'/'))
    {
        at += i + 1;
        let dir = &abs[..at - 1];
        let Ok(mode) = t.mode(dir, true) else {
            t.mkdir(&[mount, dir].concat(), 0o755);
            continue;
        };
        let inside = [mount, dir].concat();
        t.mkdir(&inside, mode & 0o7777);
        t.chmod(&inside, mode & 0o7777);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{ascii, fake as tree};

    fn fake(have: &[&'static [u8]]) -> crate::fake::Fake {
        tree(have, &[])
    }

    #[test]
    fn a_kernel_path_answers_as_mknod() {
        let t = fake(&[b"/tmp", b"/tmp/there", b"/tmp/a-file", b".", b"/locked"]);
        for (path, want) in [
            (&b"/locked/x"[..], libc::EACCES),
            (b"/tmp/there", libc::EADDRINUSE),
            (b"/tmp/a-file/x", libc::ENOTDIR),
            (b"/tmp/new", libc::EINVAL),
            (b"/nodir/x", libc::ENOENT),
            (b"rel", libc::EINVAL),
            (b"", libc::EINVAL),
        ] {
            let got = kernel_path_error(&t, path);
            println!("bind {}: errno {got}", ascii(path));
            assert_eq!(got, want, "{}", ascii(path));
        }
    }

    #[test]
    fn a_last_component_mknod_cannot_create_is_refused() {
        let t = fake(&[b"/tmp", b"there"]);
        for (given, want) in [
            (&b"t.sock/"[..], Some(libc::ENOENT)),
            (b"there//", Some(libc::EADDRINUSE)),
            (b".", Some(libc::EADDRINUSE)),
            (b"d/..", Some(libc::EADDRINUSE)),
            (b"d/.", Some(libc::EADDRINUSE)),
            (b"/", Some(libc::EADDRINUSE)),
            (b"t.sock", None),
            (b"d/.x", None),
            (b"", None),
        ] {
            let got = last_component_error(&t, given);
            println!("bind {}: {got:?}", ascii(given));
            assert_eq!(got, want, "{}", ascii(given));
        }
        let routes = Routes {
            mount: b"/m".to_vec(),
            routes: vec![],
        };
        let r = udsfs(&t, &routes, b"t.sock", b"t.sock/", || {
            panic!("bound t.sock/")
        });
        assert_eq!(r, Err(libc::ENOENT));
    }

    #[test]
    fn a_routed_bind_links_first_and_unlinks_when_the_bind_fails() {
        let t = fake(&[b"/r/taken", b"/r"]);
        let r = routed(&t, b"/m", b"/r/taken", || panic!("bound past a taken name"));
        println!("routed bind of a taken name: {r:?}");
        assert_eq!(r, Err(libc::EADDRINUSE));
        let r = routed(&t, b"/m", b"/r/d/s", || Err(libc::EADDRINUSE));
        let done = t.done.borrow().join("; ");
        println!("routed bind the daemon refused: {r:?}; {done}");
        assert_eq!(r, Err(libc::EADDRINUSE));
        assert_eq!(
            done,
            "link /r/d/s -> /m/r/d/s; mkdir /m/r 700; chmod /m/r 700; mkdir /m/r/d 755; unlink /r/d/s"
        );
    }
}

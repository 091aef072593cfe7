//! Where an AF_UNIX address goes: into the udsfs mount (a path below the
//! mount point or under a routed prefix, an abstract name, autobind), or to
//! the kernel; and how the daemon's names come back to the program. The
//! preload library and the seccomp supervisor both route with this, on the
//! bytes of a sockaddr_un and the caller's working directory.

/// sizeof(struct sockaddr_un).
pub const SUN_LEN: usize = 110;
/// How many bytes of a program's sockaddr the fronts copy for `classify`:
/// one more than a sockaddr_un, so that a longer address shows as one.
pub const COPY_LEN: usize = SUN_LEN + 1;
const FAM: usize = 2;

/// The mount and the prefixes routed into it.
#[derive(Clone, Debug)]
pub struct Routes {
    /// Canonical mount point, no trailing slash.
    pub mount: Vec<u8>,
    /// Absolute, normalized prefixes (without a trailing slash).
    pub routes: Vec<Vec<u8>>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Not AF_UNIX, or a name the kernel keeps.
    Kernel,
    /// Only the family: autobind (bind) or nothing (connect).
    Autobind,
    /// An AF_UNIX address longer than sockaddr_un: EINVAL for bind, connect
    /// and sendto, before any autobind or lookup (unix_validate_addr). A
    /// kernel socket gets the kernel's own EINVAL.
    Invalid,
    /// The wire form (`crate::addr`): a tree path, or a NUL and an
    /// abstract name.
    Udsfs(Vec<u8>),
}

/// Joins `path` to `cwd` when relative and removes `.`, `..` and repeated
/// slashes lexically (a socket name is a name).
pub fn normalize(path: &[u8], cwd: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let rel = !path.starts_with(b"/");
    let base = if rel { cwd } else { &b""[..] };
    for c in base.split(|&b| b == b'/').chain(path.split(|&b| b == b'/')) {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::new();
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

fn under(abs: &[u8], prefix: &[u8]) -> bool {
    abs.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with(b"/"))
}

impl Routes {
    /// Whether absolute path `abs` lies under a routed prefix.
    pub fn routed(&self, abs: &[u8]) -> bool {
        self.routes.iter().any(|r| under(abs, r))
    }

    /// The tree path an absolute path names, if it lies in the mount or
    /// under a route.
    pub fn tree_path(&self, abs: &[u8]) -> Option<Vec<u8>> {
        if let Some(rel) = abs
            .strip_prefix(self.mount.as_slice())
            .and_then(|r| r.strip_prefix(b"/"))
            .filter(|r| !r.is_empty())
        {
            return Some(rel.to_vec());
        }
        self.routed(abs).then(|| abs[1..].to_vec())
    }

    /// What the program sees for a tree path the daemon reports.
    pub fn shown_path(&self, tree: &[u8]) -> Vec<u8> {
        if tree.starts_with(b"/") {
            return tree.to_vec();
        }
        let abs = [&b"/"[..], tree].concat();
        if self.routed(&abs) {
            return abs;
        }
        [self.mount.as_slice(), &abs].concat()
    }

    /// The kernel path that stands for a routed tree path (None when the
    /// path is not under a route): where the library leaves a symlink.
    pub fn routed_path(&self, tree: &[u8]) -> Option<Vec<u8>> {
        let abs = [&b"/"[..], tree].concat();
        self.routed(&abs).then_some(abs)
    }

    /// Classifies a sockaddr the program gave (`addr`: its bytes, at most
    /// `COPY_LEN` of them, as copied), relative names against `cwd`.
    pub fn classify(&self, addr: &[u8], cwd: Option<&[u8]>) -> Route {
        if addr.len() < FAM || u16::from_ne_bytes([addr[0], addr[1]]) != libc::AF_UNIX as u16 {
            return Route::Kernel;
        }
        if addr.len() > SUN_LEN {
            return Route::Invalid;
        }
        let path = &addr[FAM..addr.len().min(SUN_LEN)];
        if path.is_empty() {
            return Route::Autobind;
        }
        if path[0] == 0 {
            return Route::Udsfs(path.to_vec());
        }
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        let path = &path[..end];
        let abs = if path.starts_with(b"/") {
            normalize(path, b"/")
        } else {
            match cwd {
                Some(c) => normalize(path, c),
                None => return Route::Kernel,
            }
        };
        match self.tree_path(&abs) {
            Some(t) => Route::Udsfs(t),
            None => Route::Kernel,
        }
    }
}

/// Whether a send's address argument (`sendto`'s, a msghdr's msg_name)
/// names an address. Linux looks at the length: a non-NULL name of length 0
/// is no address, as a NULL one is (`__sys_sendto` copies no name then,
/// `unix_dgram_sendmsg` looks only `if (msg->msg_namelen)`). A widely used
/// standard library passes a zeroed sockaddr_un with msg_namelen 0 when it
/// sends ancillary data without an address. Both fronts ask here.
pub fn send_names(name: u64, len: u64) -> bool {
    name != 0 && len != 0
}

/// The sun_path of a path address up to its NUL (empty for abstract names,
/// autobind and another family than AF_UNIX, which bind refuses with
/// EINVAL before any path is looked at): what bind reports back, as Linux
/// does.
pub fn given_path(addr: &[u8]) -> Vec<u8> {
    if addr.len() <= FAM
        || addr[FAM] == 0
        || u16::from_ne_bytes([addr[0], addr[1]]) != libc::AF_UNIX as u16
    {
        return Vec::new();
    }
    let path = &addr[FAM..addr.len().min(SUN_LEN)];
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    path[..end].to_vec()
}

/// A daemon address (wire format, or a sun_path as given with
/// `as_given`) as the bytes of a sockaddr_un, as Linux reports it.
pub fn sockaddr(r: &Routes, wire: &[u8], as_given: bool) -> Vec<u8> {
    let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    if as_given {
        out.extend_from_slice(wire);
        out.push(0);
    } else if wire.first() == Some(&0) {
        out.extend_from_slice(wire);
    } else if !wire.is_empty() {
        out.extend_from_slice(&r.shown_path(wire));
        out.push(0);
    }
    out.truncate(SUN_LEN + 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Routes {
        Routes {
            mount: b"/tmp/m".to_vec(),
            routes: vec![b"/var/run/app".to_vec()],
        }
    }

    fn un(path: &[u8]) -> Vec<u8> {
        [&(libc::AF_UNIX as u16).to_ne_bytes()[..], path].concat()
    }

    #[test]
    fn addresses_route_as_the_library_routes_them() {
        let r = r();
        assert_eq!(
            r.classify(&un(b"/tmp/m/run/x.sock\0"), None),
            Route::Udsfs(b"run/x.sock".to_vec())
        );
        assert_eq!(
            r.classify(&un(b"x.sock"), Some(b"/tmp/m/d")),
            Route::Udsfs(b"d/x.sock".to_vec())
        );
        assert_eq!(r.classify(&un(b"x.sock"), None), Route::Kernel);
        assert_eq!(r.classify(&un(b"/tmp/mx/y"), None), Route::Kernel);
        assert_eq!(r.classify(&un(b"/tmp/m"), None), Route::Kernel);
        assert_eq!(
            r.classify(&un(b"/var/run/app/s"), None),
            Route::Udsfs(b"var/run/app/s".to_vec())
        );
        assert_eq!(
            r.classify(&un(b"/var/run/application"), None),
            Route::Kernel
        );
        assert_eq!(
            r.classify(&un(b"\0abs"), None),
            Route::Udsfs(b"\0abs".to_vec())
        );
        assert_eq!(r.classify(&un(b""), None), Route::Autobind);
        // unix_validate_addr: longer than sockaddr_un is EINVAL, whatever
        // the name; 108 bytes of sun_path are a name.
        let name = |b: u8, n: usize| un(&[&[b][..], &vec![b'a'; n - 1]].concat());
        assert_eq!(r.classify(&name(0, 109), None), Route::Invalid);
        assert_eq!(r.classify(&name(b'/', 109), None), Route::Invalid);
        assert_eq!(
            r.classify(&name(0, 108), None),
            Route::Udsfs(name(0, 108)[2..].to_vec())
        );
        assert_eq!(r.classify(&[2, 0, 1, 2].repeat(30), None), Route::Kernel);
        assert_eq!(r.classify(&[2, 0, 1, 2], None), Route::Kernel);
        assert_eq!(r.classify(&[1], None), Route::Kernel);
        assert_eq!(normalize(b"a/./b//c", b"/w"), b"/w/a/b/c".to_vec());
        assert_eq!(normalize(b"/../..", b"/w"), b"/".to_vec());
    }

    #[test]
    fn names_come_back_as_the_program_sees_them() {
        let r = r();
        assert_eq!(r.shown_path(b"run/x"), b"/tmp/m/run/x".to_vec());
        assert_eq!(r.shown_path(b"var/run/app/x"), b"/var/run/app/x".to_vec());
        assert_eq!(sockaddr(&r, b"run/x", false), un(b"/tmp/m/run/x\0"));
        assert_eq!(sockaddr(&r, b"./x", true), un(b"./x\0"));
        assert_eq!(sockaddr(&r, b"\0ab", false), un(b"\0ab"));
        assert_eq!(sockaddr(&r, b"", false), un(b""));
        assert_eq!(given_path(&un(b"./x\0junk")), b"./x".to_vec());
        assert_eq!(given_path(&un(b"\0x")), Vec::<u8>::new());
    }
}

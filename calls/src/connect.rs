//! connect() of a udsfs socket and the address of a send, as Linux's
//! unix_stream_connect, unix_dgram_connect and unix_dgram_sendmsg answer
//! them: what the program's sockaddr asks for (`target`, `send_to`), the
//! connect itself with its wait for room in a full backlog (`connect`), and
//! the errno of a routed name the daemon does not know (`unreached`). The
//! front says how the program's file tree is reached (`routed::Links`) and
//! how a blocking connect waits.

use udsfs_proto::Res;
use udsfs_proto::addr::Addr;
use udsfs_proto::ctl::Command;
use udsfs_proto::ioctl::{Ctl, Op};
use udsfs_proto::route::{Route, Routes};

use crate::client;
use crate::routed::{Links, own_link};

/// sizeof(sa_family_t).
const FAM: usize = 2;

/// What connect() on a udsfs socket does with the program's address.
#[derive(Debug, PartialEq, Eq)]
pub enum Connect {
    /// AF_UNSPEC: the association goes (unix_dgram_connect).
    Disconnect,
    /// To the socket at this wire address.
    To(Vec<u8>),
}

/// The family of sockaddr bytes `addr`, when it holds one.
fn family(addr: &[u8]) -> Option<i32> {
    (addr.len() >= FAM).then(|| u16::from_ne_bytes([addr[0], addr[1]]).into())
}

/// The errno of an address that names no udsfs socket (`route` is not
/// `Udsfs`), as unix_validate_addr and the lookup answer: too short for a
/// name (only the family, or less), not AF_UNIX, or longer than a
/// sockaddr_un is EINVAL; an AF_UNIX path the kernel keeps (outside the
/// mount and its routes) is ECONNREFUSED, said through `say` (udsfs keeps
/// no kernel names).
fn unnamed(addr: &[u8], route: &Route, say: impl FnOnce(&str)) -> i32 {
    let kernel_path = addr.len() > FAM && family(addr) == Some(libc::AF_UNIX);
    match route {
        Route::Kernel if kernel_path => {
            say("the address is a kernel AF_UNIX name outside the mount and its routes");
            libc::ECONNREFUSED
        }
        _ => libc::EINVAL,
    }
}

/// connect() on a udsfs socket to sockaddr bytes `addr` (at most
/// `route::COPY_LEN` of them, as copied), which `route` classified.
pub fn target(addr: &[u8], route: Route, say: impl FnOnce(&str)) -> Res<Connect> {
    if family(addr) == Some(libc::AF_UNSPEC) {
        return Ok(Connect::Disconnect);
    }
    match route {
        Route::Udsfs(w) => Ok(Connect::To(w)),
        r => Err(unnamed(addr, &r, say)),
    }
}

/// The wire address of a send on a udsfs socket that names one (sockaddr
/// bytes `addr`, classified as `route`; `route::send_names` said it names
/// one).
pub fn send_to(addr: &[u8], route: Route, say: impl FnOnce(&str)) -> Res<Vec<u8>> {
    match route {
        Route::Udsfs(w) => Ok(w),
        r => Err(unnamed(addr, &r, say)),
    }
}

/// The line a blocking connect to `wire` writes to the socket's `ctl` file,
/// where it parks in the daemon until the listener's backlog has room
/// (under SO_SNDTIMEO).
pub fn wait_line(wire: &[u8]) -> Res<String> {
    let to = Addr::from_wire(wire)?;
    Ok(format!("{}\n", Command::Connect(to).format()))
}

/// connect() of udsfs socket `fd` to `wire`: the control ioctl, which never
/// parks; facing a full backlog (EAGAIN) a blocking socket (`blocking`,
/// asked then) waits with `wait`, given `wait_line`'s line. A routed name
/// the daemon does not know is reached through links or answered as
/// `reach` says.
pub fn connect(
    t: &impl Links,
    routes: &Routes,
    fd: i32,
    wire: &[u8],
    blocking: impl FnOnce() -> bool,
    wait: impl FnOnce(&[u8]) -> Res<()>,
) -> Res<()> {
    let (mut blocking, mut wait) = (Some(blocking), Some(wait));
    reach(t, routes, wire, |to| {
        match client::ctl(fd, Ctl::new(Op::Connect, 0).with_addr(to)) {
            Err(libc::EAGAIN) if blocking.take().is_some_and(|b| b()) => {
                let wait = wait.take().ok_or(libc::EAGAIN)?;
                wait_line(to).and_then(|l| wait(l.as_bytes()))
            }
            r => r.map(|_| ()),
        }
    })
}

/// `attempt` (a connect or send) at tree path `wire`; a routed name the
/// daemon does not know (ENOENT) whose kernel path leads through the
/// program's links into the mount, as unix_find_bsd's lookup follows them
/// (a link to a routed bind's link, a chain, a linked directory), is tried
/// again once at the name it leads to; else the errno is `unreached`'s. A
/// routed name in a directory the program may not search is EACCES before
/// any attempt (`searchable`).
pub fn reach<T>(
    t: &impl Links,
    routes: &Routes,
    wire: &[u8],
    mut attempt: impl FnMut(&[u8]) -> Res<T>,
) -> Res<T> {
    searchable(t, routes, wire)?;
    match attempt(wire) {
        Err(libc::ENOENT) => {}
        r => return r,
    }
    let unknown = |e| unreached(t, routes, e, wire);
    match through_links(t, routes, wire) {
        Some(there) => attempt(&there).map_err(unknown),
        None => Err(unknown(libc::ENOENT)),
    }
}

/// unix_find_bsd's lookup of routed name `wire` walks the program's kernel
/// directories first, and a directory on the way it may not search is
/// EACCES, whatever is behind it: the kernel's directories are the truth
/// (their mode, owner and sticky bit now), asked before the daemon's walk
/// of the mount's copies (which the daemon corrects from the kernel's at a
/// bind, a stream connect and, at most once a second per directory, a
/// datagram send). Asked as the program (faccessat2 X_OK of
/// the name's directory: search on it and on every directory above); any
/// other error of that walk (ENOENT, ENOTDIR, ELOOP) is left to the attempt
/// and `unreached`, as before.
fn searchable(t: &impl Links, routes: &Routes, wire: &[u8]) -> Res<()> {
    let Some(p) = routes.routed_path(wire) else {
        return Ok(());
    };
    let dir = &p[..p.iter().rposition(|&b| b == b'/').unwrap_or(0).max(1)];
    match t.may(dir, libc::X_OK) {
        Err(libc::EACCES) => Err(libc::EACCES),
        _ => Ok(()),
    }
}

/// The tree path in the mount that routed name `wire` leads to through the
/// program's links, when another.
fn through_links(t: &impl Links, routes: &Routes, wire: &[u8]) -> Option<Vec<u8>> {
    let p = routes.routed_path(wire)?;
    let real = t.resolve(&p).ok()?;
    let inside = real
        .strip_prefix(routes.mount.as_slice())?
        .strip_prefix(b"/")?;
    (!inside.is_empty() && inside != wire).then(|| inside.to_vec())
}

/// The errno of a connect or send to tree path `wire` that the daemon
/// answered `e`: a routed name the daemon does not know (ENOENT) is looked
/// up in the program's kernel tree as unix_find_bsd does, as the program:
/// the walk's error, following links (ENOENT for a dangling one, ELOOP,
/// EACCES for a directory it may not search); then write permission on
/// what it found (EACCES); then ECONNREFUSED, as Linux refuses a path that
/// is no socket (a regular file, a directory). The link a routed bind made,
/// whose node is gone (a crashed server's, on a mount since replaced), is a
/// socket file nobody listens at: ECONNREFUSED.
pub fn unreached(t: &impl Links, routes: &Routes, e: i32, wire: &[u8]) -> i32 {
    if e != libc::ENOENT {
        return e;
    }
    let Some(p) = routes.routed_path(wire) else {
        return e;
    };
    match t.mode(&p, true) {
        Err(_) if own_link(t, routes, &p).is_some() => libc::ECONNREFUSED,
        Err(walk) => walk,
        Ok(_) => t.may(&p, libc::W_OK).err().unwrap_or(libc::ECONNREFUSED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(family: i32, path: &[u8]) -> Vec<u8> {
        let mut a = (family as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    #[test]
    fn the_address_decides_as_linux() {
        let routes = crate::fake::m_r();
        let cases: [(&str, Vec<u8>, Res<Connect>); 8] = [
            (
                "AF_UNSPEC",
                sa(libc::AF_UNSPEC, b""),
                Ok(Connect::Disconnect),
            ),
            ("nothing", vec![], Err(libc::EINVAL)),
            ("one byte", vec![1], Err(libc::EINVAL)),
            ("the family only", sa(libc::AF_UNIX, b""), Err(libc::EINVAL)),
            ("AF_INET", sa(libc::AF_INET, b"\0\0\0\0"), Err(libc::EINVAL)),
            (
                "too long",
                sa(libc::AF_UNIX, &[b'a'; 109]),
                Err(libc::EINVAL),
            ),
            (
                "a kernel path",
                sa(libc::AF_UNIX, b"/tmp/k"),
                Err(libc::ECONNREFUSED),
            ),
            (
                "a routed path",
                sa(libc::AF_UNIX, b"/r/s"),
                Ok(Connect::To(b"r/s".to_vec())),
            ),
        ];
        for (what, addr, want) in cases {
            let said = std::cell::Cell::new(false);
            let got = target(&addr, routes.classify(&addr, None), |_| said.set(true));
            println!("connect to {what}: {got:?} (logged: {})", said.get());
            assert_eq!(got, want, "{what}");
            assert_eq!(said.get(), want == Err(libc::ECONNREFUSED), "{what}");
        }
    }

    #[test]
    fn an_unknown_routed_name_answers_as_the_kernel_lookup() {
        use crate::fake::{ascii, fake};
        let routes = crate::fake::m_r();
        let t = fake(
            &[b"/r", b"/r/dir", b"/r/ro", b"/r/a-file"],
            &[
                (b"/r/dangling", b"/r/nowhere"),
                (b"/r/loop1", b"/r/loop2"),
                (b"/r/loop2", b"/r/loop1"),
                (b"/r/stale", b"/m/r/stale"),
                (b"/r/to-dir", b"/r/dir"),
            ],
        );
        for (wire, e, want) in [
            (&b"r/nothing"[..], libc::ENOENT, libc::ENOENT),
            (b"r/dangling", libc::ENOENT, libc::ENOENT),
            (b"r/loop1", libc::ENOENT, libc::ELOOP),
            (b"locked/x", libc::ENOENT, libc::ENOENT),
            (b"r/dir", libc::ENOENT, libc::ECONNREFUSED),
            (b"r/to-dir", libc::ENOENT, libc::ECONNREFUSED),
            (b"r/a-file", libc::ENOENT, libc::ECONNREFUSED),
            (b"r/ro", libc::ENOENT, libc::EACCES),
            (b"r/stale", libc::ENOENT, libc::ECONNREFUSED),
            (b"r/dir", libc::EAGAIN, libc::EAGAIN),
        ] {
            let got = unreached(&t, &routes, e, wire);
            println!("{} (daemon: {e}): {got}", ascii(wire));
            assert_eq!(got, want, "{}", ascii(wire));
        }
    }

    #[test]
    fn a_routed_name_is_reached_through_the_programs_links() {
        use crate::fake::{ascii, fake};
        let routes = crate::fake::m_r();
        let t = fake(
            &[b"/r", b"/r/shut"],
            &[
                (b"/r/real", b"/m/r/real"),
                (b"/r/link", b"/r/real"),
                (b"/r/chain", b"/r/link"),
                (b"/r/gone", b"/m/r/gone"),
                (b"/r/out", b"/r"),
            ],
        );
        // The daemon knows r/real and r/shut/real (in a directory the
        // program may not search: never asked).
        let daemon = |w: &[u8]| {
            if w == b"r/real" || w == b"r/shut/real" {
                Ok(w.to_vec())
            } else {
                Err(libc::ENOENT)
            }
        };
        for (wire, want) in [
            (&b"r/link"[..], Ok(b"r/real".to_vec())),
            (b"r/chain", Ok(b"r/real".to_vec())),
            (b"r/real", Ok(b"r/real".to_vec())),
            (b"r/gone", Err(libc::ECONNREFUSED)),
            (b"r/out", Err(libc::ECONNREFUSED)),
            (b"r/none", Err(libc::ENOENT)),
            (b"r/shut/real", Err(libc::EACCES)),
        ] {
            let mut tried = Vec::new();
            let got = reach(&t, &routes, wire, |w| {
                tried.push(ascii(w));
                daemon(w)
            });
            println!("{}: {got:?} (tried {tried:?})", ascii(wire));
            assert_eq!(got, want, "{}", ascii(wire));
        }
    }
}

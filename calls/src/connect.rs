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
/// the daemon does not know is answered as `unreached` says.
pub fn connect(
    t: &impl Links,
    routes: &Routes,
    fd: i32,
    wire: &[u8],
    blocking: impl FnOnce() -> bool,
    wait: impl FnOnce(&[u8]) -> Res<()>,
) -> Res<()> {
    let r = match client::ctl(fd, Ctl::new(Op::Connect, 0).with_addr(wire)) {
        Err(libc::EAGAIN) if blocking() => wait_line(wire).and_then(|l| wait(l.as_bytes())),
        r => r.map(|_| ()),
    };
    r.map_err(|e| unreached(t, routes, e, wire))
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
        Ok(_) => t.may_write(&p).err().unwrap_or(libc::ECONNREFUSED),
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
        let routes = Routes {
            mount: b"/m".to_vec(),
            routes: vec![b"/r".to_vec()],
        };
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
        let routes = Routes {
            mount: b"/m".to_vec(),
            routes: vec![b"/r".to_vec()],
        };
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
}

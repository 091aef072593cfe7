//! getsockopt and setsockopt of a udsfs socket in sk_getsockopt's and
//! sk_setsockopt's order, on the values `udsfs_proto::sockopt` answers:
//! only SOL_SOCKET (else EOPNOTSUPP); the caller's length read first
//! (EFAULT, a negative one EINVAL) before the option is looked at; the
//! value cut to the room (`sockopt::fit`); SO_PEERPIDFD's pidfd installed
//! only once both places were written (a bad pointer fails first and the
//! program gets no descriptor); at most a timeval's 16 bytes of a set's
//! value copied in. A refusal of an option Linux has for AF_UNIX is said.
//! The front says how the program's arguments are reached (`Args`) and
//! how a pidfd is claimed and installed.

use udsfs_proto::Res;
use udsfs_proto::sockopt::{self, SO_PEERPIDFD};

/// A getsockopt's `optval` and `optlen` in the program.
pub trait Args {
    /// `*optlen`.
    fn room(&self) -> Res<u32>;
    /// `optval`'s first `val.len()` bytes.
    fn put(&self, val: &[u8]) -> Res<()>;
    /// `*optlen` written.
    fn put_len(&self, n: u32) -> Res<()>;
}

/// The line of a refusal worth saying (ENOPROTOOPT of an option Linux has).
fn refused(e: i32, name: i32, set: bool, say: impl FnOnce(&str)) {
    if e == libc::ENOPROTOOPT && sockopt::refusal_worth_saying(name, set) {
        let call = if set { "setsockopt" } else { "getsockopt" };
        say(&format!(
            "{call}(SOL_SOCKET, {name}) is not offered on udsfs sockets (ENOPROTOOPT)"
        ));
    }
}

/// getsockopt(`level`, `name`) of udsfs socket `fd`: SO_PEERPIDFD is
/// `peer_pidfd`'s (the daemon's pin of the peer, claimed, not yet the
/// program's), made the program's by `install` (its number).
pub fn get<F>(
    fd: i32,
    (level, name): (i32, i32),
    args: &impl Args,
    peer_pidfd: impl FnOnce() -> Res<F>,
    install: impl FnOnce(F) -> Res<i32>,
    say: impl FnOnce(&str),
) -> Res<()> {
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let room = args.room()?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    if name == SO_PEERPIDFD {
        let f = peer_pidfd()?;
        let n = (room as usize).min(size_of::<i32>());
        args.put(&[0u8; 4][..n])?;
        args.put_len(n as u32)?;
        let pidfd = install(f)?;
        return args.put(&pidfd.to_ne_bytes()[..n]);
    }
    let val = sockopt::get(fd, name).inspect_err(|&e| refused(e, name, false, say))?;
    match sockopt::fit(name, room, val.len()) {
        Ok(n) => {
            args.put(&val[..n])?;
            args.put_len(n as u32)
        }
        Err(need) => {
            args.put_len(need)?;
            Err(libc::ERANGE)
        }
    }
}

/// setsockopt(`level`, `name`) of udsfs socket `fd` with `len` bytes of the
/// program's, which `read` copies in (at most 16: the longest value is a
/// timeval; EFAULT when they cannot be read, as copy_from_sockptr).
pub fn set(
    fd: i32,
    (level, name): (i32, i32),
    len: u32,
    read: impl FnOnce(&mut [u8]) -> Res<()>,
    say: impl FnOnce(&str),
) -> Res<()> {
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let mut local = [0u8; 16];
    let n = (len as usize).min(local.len());
    if n > 0 {
        read(&mut local[..n])?;
    }
    sockopt::set(fd, name, &local[..n]).inspect_err(|&e| refused(e, name, true, say))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// The program's arguments: its length, or EFAULT for a bad pointer.
    struct Prog {
        room: Res<u32>,
        val_ok: bool,
        wrote: RefCell<Vec<String>>,
    }

    impl Args for Prog {
        fn room(&self) -> Res<u32> {
            self.room
        }
        fn put(&self, val: &[u8]) -> Res<()> {
            if !self.val_ok {
                return Err(libc::EFAULT);
            }
            self.wrote.borrow_mut().push(format!("val {val:?}"));
            Ok(())
        }
        fn put_len(&self, n: u32) -> Res<()> {
            self.wrote.borrow_mut().push(format!("len {n}"));
            Ok(())
        }
    }

    fn prog(room: Res<u32>, val_ok: bool) -> Prog {
        Prog {
            room,
            val_ok,
            wrote: RefCell::new(Vec::new()),
        }
    }

    #[test]
    fn the_length_is_read_first_and_a_pidfd_installed_last() {
        let never = || -> Res<()> { panic!("the peer was asked for") };
        let no_install = |_: ()| -> Res<i32> { panic!("installed") };
        let say = |_: &str| {};
        // A bad optlen: EFAULT before the option is looked at (fd -1 would
        // be EBADF); a negative one EINVAL; another level EOPNOTSUPP.
        for (room, level, want) in [
            (Err(libc::EFAULT), libc::SOL_SOCKET, libc::EFAULT),
            (Ok(u32::MAX), libc::SOL_SOCKET, libc::EINVAL),
            (Ok(4), libc::SOL_IP, libc::EOPNOTSUPP),
        ] {
            let p = prog(room, true);
            let r = get(-1, (level, 99), &p, never, no_install, say);
            println!("getsockopt(level {level}) with room {room:?}: {r:?}");
            assert_eq!(r, Err(want));
        }
        // SO_PEERPIDFD with a bad optval: the pidfd claimed is dropped, not
        // the program's; with room for 8 bytes, 4 and the number last.
        let peer = (libc::SOL_SOCKET, SO_PEERPIDFD);
        let p = prog(Ok(4), false);
        let r = get(-1, peer, &p, || Ok(()), no_install, say);
        println!("SO_PEERPIDFD to a bad optval: {r:?}");
        assert_eq!(r, Err(libc::EFAULT));
        let p = prog(Ok(8), true);
        let r = get(-1, peer, &p, || Ok(()), |_| Ok(7), say);
        let wrote = p.wrote.borrow().join("; ");
        println!("SO_PEERPIDFD with room 8: {r:?}: {wrote}");
        assert_eq!(wrote, "val [0, 0, 0, 0]; len 4; val [7, 0, 0, 0]");
    }
}

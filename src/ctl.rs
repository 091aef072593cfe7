//! The ctl command language (its grammar is `udsfs_proto::ctl`) in the
//! engine's terms.

use nix::errno::Errno;
use udsfs_proto::ctl::{self as proto, Dir, Shutdown};

use crate::engine::socket::{RCV_SHUTDOWN, SEND_SHUTDOWN, SHUTDOWN_MASK};
use crate::engine::timeo::Direction;
use crate::engine::{Addr, Buf};
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `bind ADDR`, or `bind` alone for autobind.
    Bind(Option<Addr>),
    Listen(i64),
    /// `connect ADDR`, or `connect` alone to drop a dgram default peer.
    Connect(Option<Addr>),
    Shutdown(u8),
    Passcred(bool),
    /// `oobinline on|off`: SO_OOBINLINE.
    OobInline(bool),
    /// `peek_off N`: SO_PEEK_OFF (negative: off).
    PeekOff(i32),
    /// `owner PID` (or `-PGRP`, or 0): who gets SIGURG (F_SETOWN).
    Owner(i32),
    /// SO_PASSPIDFD: `msg` records carry `pidfd=PID` of their sender.
    Passpidfd(bool),
    /// `sndbuf N`, `rcvbuf N` (SO_SNDBUF, SO_RCVBUF) and `sndbufforce N`,
    /// `rcvbufforce N` (the FORCE forms: CAP_NET_ADMIN, no maximum).
    Buffer {
        buf: Buf,
        val: i32,
        force: bool,
    },
    /// `rcvtimeo MS`, `sndtimeo MS`: SO_RCVTIMEO, SO_SNDTIMEO (0: none).
    Timeout {
        dir: Direction,
        millis: u64,
    },
}

/// Parses one line (without its newline).
pub fn parse(line: &[u8]) -> Result<Command, Errno> {
    let addr = |a: Option<udsfs_proto::addr::Addr>| a.map(Addr::from);
    Ok(match proto::parse(line).map_err(Errno::from_raw)? {
        proto::Command::Bind(a) => Command::Bind(addr(a)),
        proto::Command::Connect(a) => Command::Connect(addr(a)),
        proto::Command::Listen(n) => Command::Listen(n),
        proto::Command::Shutdown(how) => Command::Shutdown(match how {
            Shutdown::Read => RCV_SHUTDOWN,
            Shutdown::Write => SEND_SHUTDOWN,
            Shutdown::Both => SHUTDOWN_MASK,
        }),
        proto::Command::Passcred(on) => Command::Passcred(on),
        proto::Command::OobInline(on) => Command::OobInline(on),
        proto::Command::PeekOff(n) => Command::PeekOff(n),
        proto::Command::Owner(n) => Command::Owner(n),
        proto::Command::Passpidfd(on) => Command::Passpidfd(on),
        proto::Command::Buffer { dir, val, force } => Command::Buffer {
            buf: match dir {
                Dir::Send => Buf::Send,
                Dir::Recv => Buf::Recv,
            },
            val,
            force,
        },
        proto::Command::Timeout { dir, millis } => Command::Timeout {
            dir: match dir {
                Dir::Send => Direction::Send,
                Dir::Recv => Direction::Recv,
            },
            millis,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(
            parse(b"bind run/a.sock"),
            Ok(Command::Bind(Some(Addr::Path(b"run/a.sock".to_vec()))))
        );
        assert_eq!(parse(b"  bind  "), Ok(Command::Bind(None)));
        assert_eq!(
            parse(b"bind @x\\x00y"),
            Ok(Command::Bind(Some(Addr::Abstract(b"x\0y".to_vec()))))
        );
        assert_eq!(parse(b"listen 5"), Ok(Command::Listen(5)));
        assert_eq!(parse(b"listen"), Ok(Command::Listen(-1)));
        assert_eq!(parse(b"listen x"), Err(Errno::EINVAL));
        assert_eq!(parse(b"shutdown wr"), Ok(Command::Shutdown(SEND_SHUTDOWN)));
        assert_eq!(parse(b"shutdown 3"), Err(Errno::EINVAL));
        assert_eq!(parse(b"passcred on\r"), Ok(Command::Passcred(true)));
        assert_eq!(parse(b"passpidfd off"), Ok(Command::Passpidfd(false)));
        assert_eq!(parse(b"passpidfd yes"), Err(Errno::EINVAL));
        assert_eq!(parse(b"connect"), Ok(Command::Connect(None)));
        assert_eq!(parse(b"frobnicate"), Err(Errno::EINVAL));
        assert_eq!(
            parse(b"rcvbufforce -5"),
            Ok(Command::Buffer {
                buf: Buf::Recv,
                val: -5,
                force: true
            })
        );
        assert_eq!(parse(b"sndbuf 99999999999"), Err(Errno::EINVAL));
        assert_eq!(parse(b""), Err(Errno::EINVAL));
        assert_eq!(
            parse(b"rcvtimeo 250"),
            Ok(Command::Timeout {
                dir: Direction::Recv,
                millis: 250
            })
        );
        assert_eq!(parse(b"sndtimeo -1"), Err(Errno::EINVAL));
    }
}

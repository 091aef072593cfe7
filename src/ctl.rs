//! The ctl command language (its grammar is `udsfs_proto::ctl`) in the
//! engine's terms.

use nix::errno::Errno;
use udsfs_proto::ctl::{self as proto, Dir, Shutdown};

use crate::engine::socket::{RCV_SHUTDOWN, SEND_SHUTDOWN, SHUTDOWN_MASK};
use crate::engine::timeo::Direction;
use crate::engine::{Addr, Buf};

/// A command in the engine's terms: its address, buffer, timeout direction
/// and shutdown mask (RCV_SHUTDOWN, SEND_SHUTDOWN or both).
pub type Command = proto::Command<Addr, Buf, Direction, u8>;

/// Parses one line (without its newline).
pub fn parse(line: &[u8]) -> Result<Command, Errno> {
    let cmd = proto::parse(line).map_err(Errno::from_raw)?;
    Ok(cmd.map(
        Addr::from,
        |b| match b {
            Dir::Send => Buf::Send,
            Dir::Recv => Buf::Recv,
        },
        |d| match d {
            Dir::Send => Direction::Send,
            Dir::Recv => Direction::Recv,
        },
        |how| match how {
            Shutdown::Read => RCV_SHUTDOWN,
            Shutdown::Write => SEND_SHUTDOWN,
            Shutdown::Both => SHUTDOWN_MASK,
        },
    ))
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

//! The ctl command language (SPEC §3): one command per line.

use nix::errno::Errno;

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
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = trim(line);
    let (word, rest) = match line.iter().position(|b| b.is_ascii_whitespace()) {
        Some(i) => (&line[..i], trim(&line[i..])),
        None => (line, &b""[..]),
    };
    let addr = |rest: &[u8]| {
        if rest.is_empty() {
            Ok(None)
        } else {
            Addr::parse(rest).map(Some)
        }
    };
    match word {
        b"bind" => Ok(Command::Bind(addr(rest)?)),
        b"connect" => Ok(Command::Connect(addr(rest)?)),
        b"listen" => {
            if rest.is_empty() {
                // listen() with no backlog: the kernel's default, somaxconn.
                return Ok(Command::Listen(-1));
            }
            let s = std::str::from_utf8(rest).map_err(|_| Errno::EINVAL)?;
            s.parse::<i64>()
                .map(Command::Listen)
                .map_err(|_| Errno::EINVAL)
        }
        b"shutdown" => match rest {
            b"rd" | b"0" => Ok(Command::Shutdown(RCV_SHUTDOWN)),
            b"wr" | b"1" => Ok(Command::Shutdown(SEND_SHUTDOWN)),
            b"rdwr" | b"2" => Ok(Command::Shutdown(SHUTDOWN_MASK)),
            _ => Err(Errno::EINVAL),
        },
        b"passpidfd" => match rest {
            b"on" | b"1" => Ok(Command::Passpidfd(true)),
            b"off" | b"0" => Ok(Command::Passpidfd(false)),
            _ => Err(Errno::EINVAL),
        },
        b"passcred" => match rest {
            b"on" | b"1" => Ok(Command::Passcred(true)),
            b"off" | b"0" => Ok(Command::Passcred(false)),
            _ => Err(Errno::EINVAL),
        },
        b"oobinline" => match rest {
            b"on" | b"1" => Ok(Command::OobInline(true)),
            b"off" | b"0" => Ok(Command::OobInline(false)),
            _ => Err(Errno::EINVAL),
        },
        b"peek_off" => signed(rest).map(Command::PeekOff),
        b"owner" => signed(rest).map(Command::Owner),
        b"sndbuf" | b"rcvbuf" | b"sndbufforce" | b"rcvbufforce" => Ok(Command::Buffer {
            buf: if word.starts_with(b"snd") {
                Buf::Send
            } else {
                Buf::Recv
            },
            val: signed(rest)?,
            force: word.ends_with(b"force"),
        }),
        b"rcvtimeo" | b"sndtimeo" => {
            let millis = std::str::from_utf8(rest)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse().ok())
                .ok_or(Errno::EINVAL)?;
            let dir = if word == b"rcvtimeo" {
                Direction::Recv
            } else {
                Direction::Send
            };
            Ok(Command::Timeout { dir, millis })
        }
        _ => Err(Errno::EINVAL),
    }
}

/// A decimal int, optionally negative.
fn signed(v: &[u8]) -> Result<i32, Errno> {
    let s = std::str::from_utf8(v).map_err(|_| Errno::EINVAL)?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Errno::EINVAL);
    }
    s.parse().map_err(|_| Errno::EINVAL)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !first.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
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

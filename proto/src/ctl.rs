//! The ctl command language: one command per line, written to a socket's
//! `ctl` file (`bind ADDR`, `listen N`, `connect ADDR`, ...).

use crate::Res;
use crate::addr::Addr;

/// Which half of a socket a buffer size or timeout is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Send,
    Recv,
}

/// shutdown(2)'s `how`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    Read,
    Write,
    Both,
}

/// One command. The types of its address (`A`), buffer (`B`), timeout
/// direction (`D`) and shutdown (`S`) are a parameter, so that the daemon
/// names the same commands in its engine's terms (`Command::map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<A = Addr, B = Dir, D = Dir, S = Shutdown> {
    /// `bind ADDR`, or `bind` alone for autobind.
    Bind(Option<A>),
    /// `listen N`; `listen` alone is -1, the kernel's default (somaxconn).
    Listen(i64),
    /// `connect ADDR`, or `connect` alone to drop a dgram default peer.
    Connect(Option<A>),
    /// `shutdown rd|wr|rdwr` (or 0, 1, 2).
    Shutdown(S),
    /// `passcred on|off` (or 1, 0): SO_PASSCRED.
    Passcred(bool),
    /// `oobinline on|off`: SO_OOBINLINE.
    OobInline(bool),
    /// `peek_off N`: SO_PEEK_OFF (negative: off).
    PeekOff(i32),
    /// `owner PID` (or `-PGRP`, or 0): who gets SIGURG (F_SETOWN).
    Owner(i32),
    /// `passpidfd on|off`: SO_PASSPIDFD.
    Passpidfd(bool),
    /// `sndbuf N`, `rcvbuf N` (SO_SNDBUF, SO_RCVBUF) and `sndbufforce N`,
    /// `rcvbufforce N` (the FORCE forms: CAP_NET_ADMIN, no maximum).
    Buffer { buf: B, val: i32, force: bool },
    /// `rcvtimeo MS`, `sndtimeo MS`: SO_RCVTIMEO, SO_SNDTIMEO (0: none).
    Timeout { dir: D, millis: u64 },
    /// `capture_proto NAME`: the payload protocol captures show for this
    /// socket's conversations (a Wireshark dissector name; in the `tcp`
    /// encoding, its port); `capture_proto` alone: none.
    CaptureProto(Option<String>),
}

impl<A, B, D, S> Command<A, B, D, S> {
    /// The same command in other terms.
    pub fn map<A2, B2, D2, S2>(
        self,
        addr: impl Fn(A) -> A2,
        buf: impl Fn(B) -> B2,
        dir: impl Fn(D) -> D2,
        how: impl Fn(S) -> S2,
    ) -> Command<A2, B2, D2, S2> {
        match self {
            Command::Bind(a) => Command::Bind(a.map(addr)),
            Command::Connect(a) => Command::Connect(a.map(addr)),
            Command::Listen(n) => Command::Listen(n),
            Command::Shutdown(s) => Command::Shutdown(how(s)),
            Command::Passcred(on) => Command::Passcred(on),
            Command::OobInline(on) => Command::OobInline(on),
            Command::PeekOff(n) => Command::PeekOff(n),
            Command::Owner(n) => Command::Owner(n),
            Command::Passpidfd(on) => Command::Passpidfd(on),
            Command::Buffer { buf: b, val, force } => Command::Buffer {
                buf: buf(b),
                val,
                force,
            },
            Command::Timeout { dir: d, millis } => Command::Timeout {
                dir: dir(d),
                millis,
            },
            Command::CaptureProto(p) => Command::CaptureProto(p),
        }
    }
}

/// Parses one line (without its newline; a trailing `\r` is dropped).
pub fn parse(line: &[u8]) -> Res<Command> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.trim_ascii();
    let (word, rest) = match line.iter().position(|b| b.is_ascii_whitespace()) {
        Some(i) => (&line[..i], line[i..].trim_ascii()),
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
        b"listen" if rest.is_empty() => Ok(Command::Listen(-1)),
        b"listen" => std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .map(Command::Listen)
            .ok_or(libc::EINVAL),
        b"shutdown" => match rest {
            b"rd" | b"0" => Ok(Command::Shutdown(Shutdown::Read)),
            b"wr" | b"1" => Ok(Command::Shutdown(Shutdown::Write)),
            b"rdwr" | b"2" => Ok(Command::Shutdown(Shutdown::Both)),
            _ => Err(libc::EINVAL),
        },
        b"passcred" => on_off(rest).map(Command::Passcred),
        b"passpidfd" => on_off(rest).map(Command::Passpidfd),
        b"oobinline" => on_off(rest).map(Command::OobInline),
        b"peek_off" => signed(rest).map(Command::PeekOff),
        b"owner" => signed(rest).map(Command::Owner),
        b"sndbuf" | b"rcvbuf" | b"sndbufforce" | b"rcvbufforce" => Ok(Command::Buffer {
            buf: if word.starts_with(b"snd") {
                Dir::Send
            } else {
                Dir::Recv
            },
            val: signed(rest)?,
            force: word.ends_with(b"force"),
        }),
        b"rcvtimeo" | b"sndtimeo" => {
            let millis = std::str::from_utf8(rest)
                .ok()
                .and_then(|s| crate::passed::digits(s).ok())
                .ok_or(libc::EINVAL)?;
            let dir = if word == b"rcvtimeo" {
                Dir::Recv
            } else {
                Dir::Send
            };
            Ok(Command::Timeout { dir, millis })
        }
        b"capture_proto" if rest.is_empty() => Ok(Command::CaptureProto(None)),
        b"capture_proto" => protocol_name(rest).map(|p| Command::CaptureProto(Some(p))),
        _ => Err(libc::EINVAL),
    }
}

/// The longest protocol name a socket may carry.
pub const MAX_PROTO_NAME: usize = 64;

/// A dissector name as Wireshark spells them ("http", "dns", "grpc",
/// "ieee1394.ohci"): letters, digits, `.`, `_`, `-`.
fn protocol_name(v: &[u8]) -> Res<String> {
    let ok = |b: &u8| b.is_ascii_alphanumeric() || b"._-".contains(b);
    if v.len() > MAX_PROTO_NAME || !v.iter().all(ok) {
        return Err(libc::EINVAL);
    }
    Ok(String::from_utf8_lossy(v).into_owned())
}

fn on_off(v: &[u8]) -> Res<bool> {
    match v {
        b"on" | b"1" => Ok(true),
        b"off" | b"0" => Ok(false),
        _ => Err(libc::EINVAL),
    }
}

/// A decimal int, optionally negative.
fn signed(v: &[u8]) -> Res<i32> {
    let s = std::str::from_utf8(v).map_err(|_| libc::EINVAL)?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(libc::EINVAL);
    }
    s.parse().map_err(|_| libc::EINVAL)
}

impl Command {
    /// The line (without its newline) that `parse` reads back as `self`.
    pub fn format(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        let addr = |word: &str, a: &Option<Addr>| match a {
            Some(a) => format!("{word} {}", a.display()),
            None => word.to_string(),
        };
        match self {
            Command::Bind(a) => addr("bind", a),
            Command::Connect(a) => addr("connect", a),
            Command::Listen(n) => format!("listen {n}"),
            Command::Shutdown(how) => format!(
                "shutdown {}",
                match how {
                    Shutdown::Read => "rd",
                    Shutdown::Write => "wr",
                    Shutdown::Both => "rdwr",
                }
            ),
            Command::Passcred(b) => format!("passcred {}", on(*b)),
            Command::Passpidfd(b) => format!("passpidfd {}", on(*b)),
            Command::OobInline(b) => format!("oobinline {}", on(*b)),
            Command::PeekOff(n) => format!("peek_off {n}"),
            Command::Owner(n) => format!("owner {n}"),
            Command::Buffer { buf, val, force } => format!(
                "{}buf{} {val}",
                match buf {
                    Dir::Send => "snd",
                    Dir::Recv => "rcv",
                },
                if *force { "force" } else { "" }
            ),
            Command::Timeout { dir, millis } => format!(
                "{}timeo {millis}",
                match dir {
                    Dir::Send => "snd",
                    Dir::Recv => "rcv",
                }
            ),
            Command::CaptureProto(Some(p)) => format!("capture_proto {p}"),
            Command::CaptureProto(None) => "capture_proto".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_their_spacing_and_spellings() {
        let path = |p: &[u8]| Some(Addr::Path(p.to_vec()));
        let cases: [(&[u8], Command); 11] = [
            (
                b"\tconnect  srv/a\\\\.sock \r",
                Command::Connect(path(b"srv/a\\.sock")),
            ),
            (
                b"bind @\\x41b",
                Command::Bind(Some(Addr::Abstract(b"Ab".to_vec()))),
            ),
            (b"bind", Command::Bind(None)),
            (b"listen -3", Command::Listen(-3)),
            (b"shutdown rd", Command::Shutdown(Shutdown::Read)),
            (b"shutdown 1", Command::Shutdown(Shutdown::Write)),
            (b"oobinline 0", Command::OobInline(false)),
            (
                b"sndbufforce 7",
                Command::Buffer {
                    buf: Dir::Send,
                    val: 7,
                    force: true,
                },
            ),
            (
                b"sndtimeo 15",
                Command::Timeout {
                    dir: Dir::Send,
                    millis: 15,
                },
            ),
            (
                b"capture_proto  http2 ",
                Command::CaptureProto(Some("http2".to_string())),
            ),
            (b"capture_proto", Command::CaptureProto(None)),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line), Ok(want), "{line:?}");
        }
    }

    #[test]
    fn bad_lines_are_einval() {
        crate::assert_all_einval(
            parse,
            &[
                b"".as_slice(),
                b"frobnicate",
                b"listen x",
                b"shutdown 3",
                b"passpidfd yes",
                b"sndbuf 99999999999",
                b"sndbuf -",
                b"sndtimeo -1",
                b"rcvtimeo +1",
                b"capture_proto h t t p",
                b"capture_proto http/1",
                b"capture_proto \xff",
                b"bind @\\x4",
                b"connect a\\x00b",
                b"owner 1 2",
            ],
        );
        let long = format!("capture_proto {}", "a".repeat(MAX_PROTO_NAME + 1));
        assert_eq!(parse(long.as_bytes()), Err(libc::EINVAL));
    }

    #[test]
    fn every_command_formats_to_a_line_that_parses_back() {
        let all = [
            Command::Bind(None),
            Command::Bind(Some(Addr::Abstract(b"a b\0".to_vec()))),
            Command::Connect(Some(Addr::Path(b"run/x y".to_vec()))),
            Command::Connect(None),
            Command::Listen(-1),
            Command::Listen(128),
            Command::Shutdown(Shutdown::Read),
            Command::Shutdown(Shutdown::Write),
            Command::Shutdown(Shutdown::Both),
            Command::Passcred(true),
            Command::Passpidfd(false),
            Command::OobInline(true),
            Command::PeekOff(-1),
            Command::Owner(-42),
            Command::Buffer {
                buf: Dir::Send,
                val: 4096,
                force: false,
            },
            Command::Buffer {
                buf: Dir::Recv,
                val: -5,
                force: true,
            },
            Command::Timeout {
                dir: Dir::Send,
                millis: 0,
            },
            Command::CaptureProto(Some("ieee1394.ohci".to_string())),
            Command::CaptureProto(None),
        ];
        for c in all {
            assert_eq!(
                parse(c.format().as_bytes()),
                Ok(c.clone()),
                "{}",
                c.format()
            );
        }
        assert_eq!(
            Command::Connect(Some(Addr::Abstract(b"s".to_vec()))).format(),
            "connect @s"
        );
    }
}

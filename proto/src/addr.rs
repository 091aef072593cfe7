//! Socket addresses: their text form (ctl commands, `msg` records, status
//! files: `@name` or a path, with `\xHH` escapes), their wire form in the
//! ioctls (a tree path as bytes, or a NUL and an abstract name), and the
//! limits `struct sockaddr_un` puts on them.

use crate::Res;

/// Longest path name: sun_path is 108 bytes and Linux accepts it without a NUL.
/// The text form (ctl commands, `msg` records) takes tree paths up to this.
pub const MAX_PATH_NAME: usize = 108;
/// Longest tree path of the wire form (`ioctl::WIRE_MAX`): a routed name is
/// its route's prefix and the name, which a relative sun_path of 108 bytes
/// names from the working directory, as Linux resolves it.
pub const MAX_WIRE_PATH: usize = crate::ioctl::WIRE_MAX;
/// Longest abstract name: 108 bytes minus the leading NUL.
pub const MAX_ABSTRACT_NAME: usize = 107;

/// An address as a caller gives it (bind, connect, sendto).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// A path name, relative to the mount root or absolute inside the mount.
    Path(Vec<u8>),
    /// An abstract name (the bytes after the leading NUL).
    Abstract(Vec<u8>),
}

impl Addr {
    /// Parses the text form: `@name` or a path, both with escapes.
    pub fn parse(text: &[u8]) -> Res<Addr> {
        if let Some(rest) = text.strip_prefix(b"@") {
            return Addr::abstract_name(unescape(rest)?);
        }
        // Paths take the same escapes, so that what status shows can be
        // given back to connect.
        Addr::path(unescape(text)?, MAX_PATH_NAME)
    }

    /// The text form: one whitespace-free token that `parse` reads back.
    pub fn display(&self) -> String {
        match self {
            Addr::Path(p) => escape(p),
            Addr::Abstract(n) => format!("@{}", escape(n)),
        }
    }

    /// Decodes the wire form; empty is no address (unnamed, or autobind).
    pub fn from_wire(wire: &[u8]) -> Res<Option<Addr>> {
        match wire.split_first() {
            None => Ok(None),
            Some((0, name)) => Addr::abstract_name(name.to_vec()).map(Some),
            Some(_) => Addr::path(wire.to_vec(), MAX_WIRE_PATH).map(Some),
        }
    }

    /// The wire form.
    pub fn to_wire(&self) -> Vec<u8> {
        match self {
            Addr::Path(p) => p.clone(),
            Addr::Abstract(n) => [&[0u8][..], n].concat(),
        }
    }

    fn path(p: Vec<u8>, max: usize) -> Res<Addr> {
        if p.is_empty() || p.len() > max || p.contains(&0) {
            return Err(libc::EINVAL);
        }
        Ok(Addr::Path(p))
    }

    fn abstract_name(n: Vec<u8>) -> Res<Addr> {
        if n.len() > MAX_ABSTRACT_NAME {
            return Err(libc::EINVAL);
        }
        Ok(Addr::Abstract(n))
    }
}

/// Decodes `\xHH` (exactly two hex digits) and `\\`; any other byte stands
/// for itself; any other backslash is EINVAL.
pub fn unescape(text: &[u8]) -> Res<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            out.push(text[i]);
            i += 1;
            continue;
        }
        match text.get(i + 1) {
            Some(b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            Some(b'x') => {
                let hex = text.get(i + 2..i + 4).ok_or(libc::EINVAL)?;
                out.push(hex_digit(hex[0])? << 4 | hex_digit(hex[1])?);
                i += 4;
            }
            _ => return Err(libc::EINVAL),
        }
    }
    Ok(out)
}

fn hex_digit(c: u8) -> Res<u8> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(libc::EINVAL),
    }
}

/// Printable ASCII stays as it is (but for `\`); everything else becomes
/// `\xHH`, so a name is always one whitespace-free token.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x21..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_show_as_one_token_that_parses_back() {
        let a = Addr::Abstract(b"x y\\\0".to_vec());
        assert_eq!(a.display(), "@x\\x20y\\\\\\x00");
        assert_eq!(Addr::parse(a.display().as_bytes()), Ok(a));
        assert_eq!(Addr::parse(b"@\\xFf"), Ok(Addr::Abstract(vec![0xff])));
        assert_eq!(Addr::parse(b"run/\\x61"), Ok(Addr::Path(b"run/a".to_vec())));
    }

    #[test]
    fn every_byte_escapes_and_comes_back() {
        let all: Vec<u8> = (0..=255).collect();
        let shown = escape(&all);
        assert!(!shown.contains(' ') && !shown.contains('\n'));
        assert_eq!(unescape(shown.as_bytes()).unwrap(), all);
    }

    #[test]
    fn bad_escapes_are_einval() {
        crate::assert_all_einval(
            unescape,
            &[
                b"\\x4".as_slice(),
                b"\\x",
                b"\\",
                b"\\q",
                b"\\xZZ",
                b"\\x+1",
                b"a\\x-1",
            ],
        );
    }

    #[test]
    fn names_past_sockaddr_un_are_einval() {
        for n in [1, 107, 108] {
            assert!(Addr::parse(&vec![b'p'; n]).is_ok(), "{n}");
        }
        assert_eq!(Addr::parse(&[b'p'; 109]), Err(libc::EINVAL));
        let name = |n: usize| [&b"@"[..], &vec![b'a'; n]].concat();
        assert_eq!(Addr::parse(&name(107)), Ok(Addr::Abstract(vec![b'a'; 107])));
        assert_eq!(Addr::parse(&name(108)), Err(libc::EINVAL));
        // An escaped NUL is a name's byte, never a path's.
        assert_eq!(Addr::parse(b"a\\x00"), Err(libc::EINVAL));
        assert_eq!(Addr::parse(b""), Err(libc::EINVAL));
        assert_eq!(Addr::parse(b"@"), Ok(Addr::Abstract(vec![])));
    }

    #[test]
    fn wire_form_round_trips_and_refuses_bad_names() {
        for a in [
            Addr::Path(b"run/x.sock".to_vec()),
            Addr::Abstract(b"x\0y".to_vec()),
            Addr::Abstract(vec![]),
        ] {
            assert_eq!(Addr::from_wire(&a.to_wire()), Ok(Some(a.clone())));
        }
        assert_eq!(Addr::from_wire(b""), Ok(None));
        assert_eq!(Addr::from_wire(b"a\0b"), Err(libc::EINVAL));
        // A routed name's tree path may pass 108 bytes (MAX_WIRE_PATH);
        // the text form keeps sun_path's limit.
        let p = |n: usize| vec![b'a'; n];
        assert_eq!(
            Addr::from_wire(&p(MAX_WIRE_PATH)),
            Ok(Some(Addr::Path(p(MAX_WIRE_PATH))))
        );
        assert_eq!(Addr::from_wire(&p(MAX_WIRE_PATH + 1)), Err(libc::EINVAL));
        assert_eq!(Addr::parse(&p(109)), Err(libc::EINVAL));
        let mut long = vec![0u8];
        long.extend([b'n'; 108]);
        assert_eq!(Addr::from_wire(&long), Err(libc::EINVAL));
    }
}

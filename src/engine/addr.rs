//! Socket addresses: how they are written in ctl commands and status files, and
//! the limits `struct sockaddr_un` puts on them.

use nix::errno::Errno;

/// Longest path name: sun_path is 108 bytes and Linux accepts it without a NUL.
pub const MAX_PATH_NAME: usize = 108;
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
    /// Parses `@name` (with `\xHH` escapes) or a path.
    pub fn parse(text: &[u8]) -> Result<Addr, Errno> {
        if let Some(rest) = text.strip_prefix(b"@") {
            let name = unescape(rest)?;
            if name.len() > MAX_ABSTRACT_NAME {
                return Err(Errno::EINVAL);
            }
            return Ok(Addr::Abstract(name));
        }
        // Paths take the same escapes, so that what status shows can be
        // given back to connect.
        let path = unescape(text)?;
        if path.is_empty() || path.len() > MAX_PATH_NAME || path.contains(&0) {
            return Err(Errno::EINVAL);
        }
        Ok(Addr::Path(path))
    }

    /// The address as status files and `.udsfs/unix` show it.
    pub fn display(&self) -> String {
        match self {
            Addr::Path(p) => escape(p),
            Addr::Abstract(n) => format!("@{}", escape(n)),
        }
    }
}

/// Decodes `\xHH` and `\\`; any other byte stands for itself.
pub fn unescape(text: &[u8]) -> Result<Vec<u8>, Errno> {
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
                let hex = text.get(i + 2..i + 4).ok_or(Errno::EINVAL)?;
                // Exactly two hex digits (from_str_radix alone takes "+1").
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(Errno::EINVAL);
                }
                let s = std::str::from_utf8(hex).map_err(|_| Errno::EINVAL)?;
                out.push(u8::from_str_radix(s, 16).map_err(|_| Errno::EINVAL)?);
                i += 4;
            }
            _ => return Err(Errno::EINVAL),
        }
    }
    Ok(out)
}

/// Printable ASCII stays as it is (but for `\`); everything else becomes `\xHH`,
/// so a name is always one whitespace-free token.
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
    fn abstract_names_round_trip_through_escapes() {
        let a = Addr::parse(b"@a\\x00b c\\\\").unwrap();
        assert_eq!(a, Addr::Abstract(b"a\0b c\\".to_vec()));
        assert_eq!(a.display(), "@a\\x00b\\x20c\\\\");
        assert_eq!(Addr::parse(a.display().as_bytes()).unwrap(), a);
    }

    #[test]
    fn limits_follow_sockaddr_un() {
        assert!(Addr::parse(&[b'a'; 108]).is_ok());
        assert_eq!(Addr::parse(&[b'a'; 109]), Err(Errno::EINVAL));
        let mut long = b"@".to_vec();
        long.extend([b'n'; 107]);
        assert!(Addr::parse(&long).is_ok());
        long.push(b'n');
        assert_eq!(Addr::parse(&long), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@\\x4"), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@\\x+1"), Err(Errno::EINVAL));
        // Paths round-trip through their display too.
        let p = Addr::Path(b"a b\\c\x01".to_vec());
        assert_eq!(Addr::parse(p.display().as_bytes()).unwrap(), p);
        assert_eq!(Addr::parse(b"a\\x00b"), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b""), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@"), Ok(Addr::Abstract(vec![])));
    }
}

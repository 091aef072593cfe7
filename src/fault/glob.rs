//! The name pattern of a `name GLOB` selector: `*` any run of bytes (slashes
//! too), `?` one byte, everything else itself. It is written as addresses are
//! in status files (`\xHH` for bytes that are not printable ASCII, `\\`),
//! with `\*` and `\?` for a literal star or question mark, so that a pattern
//! is always one whitespace-free token.

use std::fmt;

use super::message::Name;
use crate::wildcard::{Wild, matches_by};

/// The longest pattern, as written: a message is matched against each
/// rule's, at up to its length times the name's.
pub const MAX_LEN: usize = 512;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    pieces: Vec<Wild>,
}

impl Glob {
    pub fn parse(text: &str) -> Result<Glob, String> {
        let b = text.as_bytes();
        if b.is_empty() {
            return Err("empty pattern".into());
        }
        // Every message is matched against every rule's pattern.
        if b.len() > MAX_LEN {
            return Err(format!("pattern of {} bytes (at most {MAX_LEN})", b.len()));
        }
        let mut pieces = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'*' => pieces.push(Wild::Run),
                b'?' => pieces.push(Wild::One),
                b'\\' => match b.get(i + 1) {
                    Some(&c @ (b'\\' | b'*' | b'?')) => {
                        pieces.push(Wild::Byte(c));
                        i += 1;
                    }
                    Some(b'x') => {
                        let hex = b
                            .get(i + 2..i + 4)
                            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                            .ok_or_else(|| format!("bad escape in '{text}' (\\xHH)"))?;
                        let hex = std::str::from_utf8(hex).expect("hex digits are ASCII");
                        pieces.push(Wild::Byte(
                            u8::from_str_radix(hex, 16).expect("two hex digits"),
                        ));
                        i += 3;
                    }
                    _ => return Err(format!("bad escape in '{text}' (\\\\, \\*, \\?, \\xHH)")),
                },
                c => pieces.push(Wild::Byte(c)),
            }
            i += 1;
        }
        Ok(Glob { pieces })
    }

    /// Whether the name matches: an abstract name as `@name`, a path with
    /// any leading slashes dropped on both sides (paths are relative to the
    /// mount root, given with or without the slash).
    pub fn matches(&self, name: Name<'_>) -> bool {
        match name {
            Name::Abstract(n) => match self.pieces.split_first() {
                Some((Wild::Byte(b'@'), rest)) => match_pieces(rest, n),
                // A pattern led by a wildcard may stand for the `@` too.
                Some((Wild::Run | Wild::One, _)) => {
                    let mut at = Vec::with_capacity(n.len() + 1);
                    at.push(b'@');
                    at.extend_from_slice(n);
                    match_pieces(&self.pieces, &at)
                }
                _ => false,
            },
            Name::Path(p) => {
                let start = self
                    .pieces
                    .iter()
                    .position(|&x| x != Wild::Byte(b'/'))
                    .unwrap_or(self.pieces.len());
                let p = &p[p.iter().position(|&b| b != b'/').unwrap_or(p.len())..];
                match_pieces(&self.pieces[start..], p)
            }
        }
    }
}

fn match_pieces(pat: &[Wild], s: &[u8]) -> bool {
    matches_by(pat, s, |&p| p)
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for piece in &self.pieces {
            match *piece {
                Wild::Run => f.write_str("*")?,
                Wild::One => f.write_str("?")?,
                Wild::Byte(b @ (b'\\' | b'*' | b'?')) => write!(f, "\\{}", b as char)?,
                Wild::Byte(b @ 0x21..=0x7e) => write!(f, "{}", b as char)?,
                Wild::Byte(b) => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(g: &str, p: &str) -> bool {
        Glob::parse(g).unwrap().matches(Name::Path(p.as_bytes()))
    }

    #[test]
    fn wildcards_match_paths() {
        assert!(path("run/db.sock", "run/db.sock"));
        assert!(path("/run/db.sock", "run/db.sock"));
        assert!(path("run/db.sock", "/run/db.sock"));
        assert!(!path("run/db.sock", "run/db.sockx"));
        assert!(path("run/*.sock", "run/db.sock"));
        assert!(path("*", "a/b/c"));
        assert!(path("run/*", "run/x/y.sock"));
        assert!(path("run/d?.sock", "run/db.sock"));
        assert!(!path("run/d?.sock", "run/d.sock"));
        assert!(path("*b*c*", "aabxxc"));
        assert!(!path("*b*c*", "aacxxb"));
        assert!(path(r"a\*", "a*"));
        assert!(!path(r"a\*", "ab"));
    }

    #[test]
    fn abstract_names_match_with_their_at() {
        let g = Glob::parse("@bus").unwrap();
        assert!(g.matches(Name::Abstract(b"bus")));
        assert!(!g.matches(Name::Path(b"bus")));
        assert!(!Glob::parse("bus").unwrap().matches(Name::Abstract(b"bus")));
        assert!(Glob::parse("*").unwrap().matches(Name::Abstract(b"bus")));
        assert!(
            Glob::parse("@\\x00x*")
                .unwrap()
                .matches(Name::Abstract(b"\0xyz"))
        );
    }

    #[test]
    fn patterns_format_back_to_themselves() {
        for text in ["run/db.sock", "@bus", r"a\*b\?c\\d", r"@\x00\x20x", "*?"] {
            let g = Glob::parse(text).unwrap();
            assert_eq!(g.to_string(), text);
            assert_eq!(Glob::parse(&g.to_string()).unwrap(), g);
        }
        assert!(Glob::parse("").is_err());
        assert!(Glob::parse(r"a\q").is_err());
        assert!(Glob::parse(r"a\x4").is_err());
    }

    #[test]
    fn a_pattern_is_at_most_max_len_bytes() {
        assert!(Glob::parse(&"*a".repeat(MAX_LEN / 2)).is_ok());
        let e = Glob::parse(&"*a".repeat(MAX_LEN / 2 + 1)).unwrap_err();
        assert!(e.contains("at most 512"), "{e}");
    }
}

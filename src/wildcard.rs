//! The one wildcard matcher of udsfs (fault rules' `name` selectors, capture
//! filters per path component, `udsfs ss` patterns): `*` any run of bytes,
//! `?` one byte. Patterns come from any user of a shared mount, so matching
//! never recurses (a pattern of a million stars would overflow a worker's
//! stack) and never takes more than O(pattern × name) steps.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wild {
    Byte(u8),
    /// `?`
    One,
    /// `*`
    Run,
}

impl Wild {
    /// A pattern byte as the shell reads it, without escapes.
    pub fn of_byte(b: u8) -> Wild {
        match b {
            b'*' => Wild::Run,
            b'?' => Wild::One,
            c => Wild::Byte(c),
        }
    }
}

/// Whether `s` matches `pat`, whose items `wild` reads.
pub fn matches_by<T>(pat: &[T], s: &[u8], wild: impl Fn(&T) -> Wild) -> bool {
    let (mut p, mut i) = (0, 0);
    // The last star seen and where in `s` its run ends for now: on a
    // mismatch the run takes one byte more. Earlier stars need no retry,
    // since the last one can take whatever they would have.
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match pat.get(p).map(&wild) {
            Some(Wild::Run) => {
                star = Some((p, i));
                p += 1;
            }
            Some(Wild::One) => {
                p += 1;
                i += 1;
            }
            Some(Wild::Byte(b)) if b == s[i] => {
                p += 1;
                i += 1;
            }
            _ => match star {
                Some((sp, si)) => {
                    star = Some((sp, si + 1));
                    p = sp + 1;
                    i = si + 1;
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|x| wild(x) == Wild::Run)
}

/// `matches_by` for a pattern of plain bytes.
pub fn matches_bytes(pat: &[u8], s: &[u8]) -> bool {
    matches_by(pat, s, |&b| Wild::of_byte(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, by recursion: what the loop must agree with.
    fn by_definition(pat: &[u8], s: &[u8]) -> bool {
        match (pat.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                by_definition(&pat[1..], s) || (!s.is_empty() && by_definition(pat, &s[1..]))
            }
            (Some(b'?'), Some(_)) => by_definition(&pat[1..], &s[1..]),
            (Some(p), Some(c)) if p == c => by_definition(&pat[1..], &s[1..]),
            _ => false,
        }
    }

    #[test]
    fn agrees_with_the_definition_on_every_short_pattern_and_name() {
        // Every pattern over {a, b, *, ?} up to 5 long against every name
        // over {a, b} up to 6 long.
        fn all(alphabet: &[u8], most: usize) -> Vec<Vec<u8>> {
            let mut out = vec![Vec::new()];
            let mut last = vec![Vec::new()];
            for _ in 0..most {
                last = last
                    .iter()
                    .flat_map(|w: &Vec<u8>| {
                        alphabet.iter().map(move |&c| {
                            let mut w = w.clone();
                            w.push(c);
                            w
                        })
                    })
                    .collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        let names = all(b"ab", 6);
        for pat in all(b"ab*?", 5) {
            for name in &names {
                assert_eq!(
                    matches_bytes(&pat, name),
                    by_definition(&pat, name),
                    "{:?} against {:?}",
                    String::from_utf8_lossy(&pat),
                    String::from_utf8_lossy(name)
                );
            }
        }
    }

    #[test]
    fn a_hostile_pattern_neither_recurses_nor_backtracks_without_end() {
        let stars = vec![b'*'; 1_000_000];
        assert!(matches_bytes(&stars, b"anything"));
        let mut many = b"*a".repeat(256);
        many.push(b'b');
        assert!(!matches_bytes(&many, &[b'a'; 108]));
    }
}

//! `.udsfs/faults`, the mount-wide rule file, as both its server and
//! `udsfs fault` see it. Each write is one command:
//!
//! ```text
//! name run/db.sock down latency latency=100      adds a rule
//! del 3                                          deletes the writer's rule 3
//! del 0:3                                        deletes user 0's rule 3 (root may)
//! clear                                          deletes every rule the writer may
//! ```
//!
//! A malformed line fails the write with EINVAL (the daemon logs why).
//! Reading lists one rule a line, oldest first; each user numbers their own
//! rules, and a rule of another user (root's, or any to root) shows as
//! `OWNER:N`:
//!
//! ```text
//! 3<TAB>name run/db.sock down latency latency=100 jitter=0<TAB>matched=12 injected=5
//! 0:1<TAB>uid 1000 full toxicity=0.01<TAB>matched=2 injected=0
//! ```

use super::id::RuleRef;
use super::rule::Rule;
use super::rules::Listed;

/// The file, relative to the mount root.
pub const FAULTS_FILE: &str = ".udsfs/faults";

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Add(Rule),
    Del(RuleRef),
    Clear,
}

impl Command {
    /// Parses one written line (its newline taken off or not).
    pub fn parse(line: &str) -> Result<Command, String> {
        let line = line.trim();
        let mut words = line.split_ascii_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("clear"), None, _) => Ok(Command::Clear),
            (Some("clear"), Some(_), _) => Err("clear: takes nothing".into()),
            (Some("del"), Some(id), None) => id
                .parse()
                .map(Command::Del)
                .map_err(|_| format!("del: not a rule number (N or OWNER:N): '{id}'")),
            (Some("del"), _, _) => Err("del: takes one rule number (N or OWNER:N)".into()),
            _ => Rule::parse(line).map(Command::Add),
        }
    }

    /// The line to write, newline included.
    pub fn line(&self) -> String {
        match self {
            Command::Add(rule) => format!("{rule}\n"),
            Command::Del(id) => format!("del {id}\n"),
            Command::Clear => "clear\n".into(),
        }
    }
}

/// A listed rule as the file shows it to `viewer`, newline included.
pub fn listing_line(l: &Listed, viewer: u32) -> String {
    format!(
        "{}\t{}\tmatched={} injected={}\n",
        RuleRef::seen_by(l.id, viewer),
        l.rule,
        l.matched,
        l.injected
    )
}

/// What reading the file gives `viewer`: every rule it may see.
pub fn listing(rules: &[Listed], viewer: u32) -> String {
    rules.iter().map(|l| listing_line(l, viewer)).collect()
}

/// A line of the listing read back: id (N: the reader's own), rule,
/// matched, injected.
#[derive(Clone, Debug, PartialEq)]
pub struct ListingLine {
    pub id: RuleRef,
    pub rule: Rule,
    pub matched: u64,
    pub injected: u64,
}

pub fn parse_listing_line(line: &str) -> Result<ListingLine, String> {
    let bad = || format!("not a rule listing: '{line}'");
    let mut cols = line.trim_end_matches('\n').split('\t');
    let (Some(id), Some(rule), Some(counters), None) =
        (cols.next(), cols.next(), cols.next(), cols.next())
    else {
        return Err(bad());
    };
    let id = id.parse().map_err(|_| bad())?;
    let rule = Rule::parse(rule)?;
    let mut matched = None;
    let mut injected = None;
    for word in counters.split_ascii_whitespace() {
        match word.split_once('=') {
            Some(("matched", n)) => matched = n.parse().ok(),
            Some(("injected", n)) => injected = n.parse().ok(),
            _ => {}
        }
    }
    Ok(ListingLine {
        id,
        rule,
        matched: matched.ok_or_else(bad)?,
        injected: injected.ok_or_else(bad)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::id::RuleId;
    use super::*;

    #[test]
    fn commands_round_trip() {
        for line in [
            "del 3\n",
            "del 0:3\n",
            "clear\n",
            "socket 12 slicer average_size=64 size_variation=32 delay=0\n",
        ] {
            let c = Command::parse(line).unwrap();
            assert_eq!(c.line(), line);
        }
        assert!(matches!(Command::parse("name x full"), Ok(Command::Add(_))));
        assert_eq!(
            Command::parse("del x"),
            Err("del: not a rule number (N or OWNER:N): 'x'".into())
        );
        assert!(Command::parse("del 1:").is_err());
        assert!(Command::parse("del :1").is_err());
        assert!(Command::parse("del -1").is_err());
        assert!(Command::parse("del").is_err());
        assert!(Command::parse("del 1 2").is_err());
        assert!(Command::parse("clear all").is_err());
        assert!(Command::parse("socket 1 latency jitter=y").is_err());
    }

    #[test]
    fn listing_lines_round_trip() {
        let l = Listed {
            id: RuleId { owner: 0, n: 7 },
            rule: Rule::parse("name run/db.sock down latency latency=100").unwrap(),
            matched: 12,
            injected: 5,
        };
        let text = listing_line(&l, 0);
        assert_eq!(listing(&[l.clone(), l.clone()], 0), text.repeat(2));
        // Another user sees whose it is.
        assert!(listing_line(&l, 1000).starts_with("0:7\tname"));
        let back = parse_listing_line(&listing_line(&l, 1000)).unwrap();
        assert_eq!(back.id.of(1000), l.id);
        assert_eq!(
            text,
            "7\tname run/db.sock down latency latency=100 jitter=0\tmatched=12 injected=5\n"
        );
        let back = parse_listing_line(&text).unwrap();
        assert_eq!(
            (back.id.of(0), back.rule, back.matched, back.injected),
            (l.id, l.rule, 12, 5)
        );
        assert!(parse_listing_line("7 name x full").is_err());
        assert!(parse_listing_line("7\tname x full\tmatched=1").is_err());
    }
}

//! `.udsfs/faults`, the mount-wide rule file, as both its server and
//! `udsfs fault` see it. Each write is one command:
//!
//! ```text
//! name run/db.sock down latency latency=100      adds a rule
//! del 3                                          deletes rule 3
//! clear                                          deletes every rule the writer may
//! ```
//!
//! A malformed line fails the write with EINVAL (the daemon logs why).
//! Reading lists one rule a line, oldest first:
//!
//! ```text
//! 3<TAB>name run/db.sock down latency latency=100 jitter=0<TAB>matched=12 injected=5
//! ```

use super::rule::Rule;
use super::rules::Listed;

/// The file, relative to the mount root.
pub const FAULTS_FILE: &str = ".udsfs/faults";

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Add(Rule),
    Del(u64),
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
                .map_err(|_| format!("del: not a rule number: '{id}'")),
            (Some("del"), _, _) => Err("del: takes one rule number".into()),
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

/// A listed rule as the file shows it, newline included.
pub fn listing_line(l: &Listed) -> String {
    format!(
        "{}\t{}\tmatched={} injected={}\n",
        l.id, l.rule, l.matched, l.injected
    )
}

/// What reading the file gives: every rule the reader may see.
pub fn listing(rules: &[Listed]) -> String {
    rules.iter().map(listing_line).collect()
}

/// A line of the listing read back: id, rule, matched, injected.
#[derive(Clone, Debug, PartialEq)]
pub struct ListingLine {
    pub id: u64,
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
    use super::*;

    #[test]
    fn commands_round_trip() {
        for line in [
            "del 3\n",
            "clear\n",
            "socket 12 slicer average_size=64 size_variation=32 delay=0\n",
        ] {
            let c = Command::parse(line).unwrap();
            assert_eq!(c.line(), line);
        }
        assert!(matches!(Command::parse("name x full"), Ok(Command::Add(_))));
        assert_eq!(
            Command::parse("del x"),
            Err("del: not a rule number: 'x'".into())
        );
        assert!(Command::parse("del").is_err());
        assert!(Command::parse("del 1 2").is_err());
        assert!(Command::parse("clear all").is_err());
        assert!(Command::parse("socket 1 latency jitter=y").is_err());
    }

    #[test]
    fn listing_lines_round_trip() {
        let l = Listed {
            id: 7,
            rule: Rule::parse("name run/db.sock down latency latency=100").unwrap(),
            owner: 0,
            matched: 12,
            injected: 5,
        };
        let text = listing_line(&l);
        assert_eq!(listing(&[l.clone(), l.clone()]), text.repeat(2));
        assert_eq!(
            text,
            "7\tname run/db.sock down latency latency=100 jitter=0\tmatched=12 injected=5\n"
        );
        let back = parse_listing_line(&text).unwrap();
        assert_eq!(
            (back.id, back.rule, back.matched, back.injected),
            (7, l.rule, 12, 5)
        );
        assert!(parse_listing_line("7 name x full").is_err());
        assert!(parse_listing_line("7\tname x full\tmatched=1").is_err());
    }
}

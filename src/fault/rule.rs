//! A rule: which messages (selector, direction), what to do to them (the
//! fault), how often (toxicity, seed) and when (after, times); its one-line
//! text form, parsed and formatted here.
//!
//! ```text
//! name run/db.sock down latency latency=100 jitter=10 toxicity=0.5 seed=7
//! socket 12 slicer average_size=64 size_variation=32
//! ```
//!
//! The form written to a socket's ctl file (`fault up latency latency=5`)
//! has no selector: the socket is the selector.

use std::fmt;

use super::glob::Glob;
use super::kind::{Fault, unknown_fault};
use super::message::SockType;

#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    /// `socket N`: messages to or from socket N.
    Socket(u64),
    /// `name GLOB`: messages to or from the socket bound to a matching name,
    /// or a connection made to it.
    Name(Glob),
    /// `pid P`: messages process P sends.
    Pid(u32),
    /// `uid U`: messages processes of user U send.
    Uid(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Towards the socket the selector names.
    Up,
    /// From it.
    Down,
}

/// When a rule starts to act: after so many messages, or bytes, it matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    Messages(u64),
    Bytes(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub selector: Selector,
    /// None: both ways.
    pub direction: Option<Direction>,
    pub fault: Fault,
    /// The probability that a matched message is hit, in [0, 1].
    pub toxicity: f64,
    /// The seed of the rule's dice; None: a different one each time.
    pub seed: Option<u64>,
    pub after: Option<After>,
    /// At most this many injections.
    pub times: Option<u64>,
}

/// Parameters every fault takes.
const COMMON_KEYS: [&str; 5] = ["toxicity", "seed", "after", "after_bytes", "times"];

impl Rule {
    /// Parses a line of `.udsfs/faults` (selector, direction, fault).
    pub fn parse(line: &str) -> Result<Rule, String> {
        let mut words = line.split_ascii_whitespace();
        let Some(what) = words.next() else {
            return Err("empty rule".into());
        };
        let mut arg = |what: &str| {
            words
                .next()
                .ok_or_else(|| format!("{what}: missing its argument"))
        };
        let selector = match what {
            "socket" => Selector::Socket(number(what, arg(what)?)?),
            "name" => Selector::Name(Glob::parse(arg(what)?).map_err(|e| format!("name: {e}"))?),
            "pid" => Selector::Pid(number(what, arg(what)?)?),
            "uid" => Selector::Uid(number(what, arg(what)?)?),
            _ => {
                return Err(format!(
                    "unknown selector '{what}' (socket, name, pid, uid)"
                ));
            }
        };
        let rest: Vec<&str> = words.collect();
        let rule = parse_body(selector, &rest)?;
        if rule.direction.is_some() && matches!(rule.selector, Selector::Pid(_) | Selector::Uid(_))
        {
            return Err(format!(
                "{what}: up and down are for socket and name selectors (pid and uid select senders)"
            ));
        }
        Ok(rule)
    }

    /// Parses the ctl form (`fault` already taken off): direction, fault,
    /// parameters; the rule is for socket `socket`.
    pub fn parse_ctl(text: &str, socket: u64) -> Result<Rule, String> {
        let words: Vec<&str> = text.split_ascii_whitespace().collect();
        parse_body(Selector::Socket(socket), &words)
    }

    /// The ctl form: the text without its selector.
    pub fn ctl_text(&self) -> String {
        let mut s = String::new();
        self.write_body(&mut s).expect("a String takes every write");
        s.trim_start().to_string()
    }

    fn write_body(&self, f: &mut impl fmt::Write) -> fmt::Result {
        match self.direction {
            Some(Direction::Up) => f.write_str(" up")?,
            Some(Direction::Down) => f.write_str(" down")?,
            None => {}
        }
        write!(f, " {}", self.fault)?;
        if self.toxicity != 1.0 {
            write!(f, " toxicity={}", self.toxicity)?;
        }
        if let Some(s) = self.seed {
            write!(f, " seed={s}")?;
        }
        match self.after {
            Some(After::Messages(n)) => write!(f, " after={n}")?,
            Some(After::Bytes(n)) => write!(f, " after_bytes={n}")?,
            None => {}
        }
        if let Some(t) = self.times {
            write!(f, " times={t}")?;
        }
        Ok(())
    }
}

/// Whether `rule` may be attached to a socket of type `ty` (the ctl form,
/// and names whose socket is known); the message says why not.
pub fn check_type(rule: &Rule, ty: SockType) -> Result<(), String> {
    rule.fault.fits(ty)
}

fn number<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what}: not a number: '{text}'"))
}

/// Direction, fault name and `key=value` parameters.
fn parse_body(selector: Selector, words: &[&str]) -> Result<Rule, String> {
    let mut words = words.iter().copied().peekable();
    let direction = match words.peek() {
        Some(&"up") => Some(Direction::Up),
        Some(&"down") => Some(Direction::Down),
        _ => None,
    };
    if direction.is_some() {
        words.next();
    }
    let Some(name) = words.next() else {
        let all: Vec<_> = Fault::names().collect();
        return Err(format!("missing the fault ({})", all.join(", ")));
    };
    let Some(keys) = Fault::keys(name) else {
        return Err(unknown_fault(name));
    };
    let mut own: Vec<(&str, &str)> = Vec::new();
    let mut common: Vec<(&str, &str)> = Vec::new();
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Err(format!("{name}: '{word}' is not key=value"));
        };
        if own.iter().chain(&common).any(|(k, _)| *k == key) {
            return Err(format!("{name}: {key}: given twice"));
        }
        if keys.contains(&key) {
            own.push((key, value));
        } else if COMMON_KEYS.contains(&key) {
            common.push((key, value));
        } else {
            let all: Vec<_> = keys.iter().chain(&COMMON_KEYS).copied().collect();
            return Err(format!(
                "{name}: unknown parameter '{key}' ({})",
                all.join(", ")
            ));
        }
    }
    let fault = Fault::build(name, &own)?;
    let mut rule = Rule {
        selector,
        direction,
        fault,
        toxicity: 1.0,
        seed: None,
        after: None,
        times: None,
    };
    let field = |key: &str| format!("{name}: {key}");
    for (key, value) in common {
        match key {
            "toxicity" => {
                rule.toxicity = value
                    .parse::<f64>()
                    .ok()
                    .filter(|t| (0.0..=1.0).contains(t))
                    .ok_or_else(|| {
                        format!("{}: not a number from 0 to 1: '{value}'", field(key))
                    })?;
            }
            "seed" => rule.seed = Some(number(&field(key), value)?),
            "after" | "after_bytes" => {
                if rule.after.is_some() {
                    return Err(format!(
                        "{}: after and after_bytes exclude each other",
                        field(key)
                    ));
                }
                let n = number(&field(key), value)?;
                rule.after = Some(if key == "after" {
                    After::Messages(n)
                } else {
                    After::Bytes(n)
                });
            }
            "times" => {
                let n: u64 = number(&field(key), value)?;
                if n == 0 {
                    return Err(format!("{}: must be at least 1", field(key)));
                }
                rule.times = Some(n);
            }
            _ => unreachable!("COMMON_KEYS are all handled"),
        }
    }
    Ok(rule)
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Socket(n) => write!(f, "socket {n}"),
            Selector::Name(g) => write!(f, "name {g}"),
            Selector::Pid(p) => write!(f, "pid {p}"),
            Selector::Uid(u) => write!(f, "uid {u}"),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.selector)?;
        self.write_body(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_parse() {
        let r =
            Rule::parse("name run/db.sock down latency latency=100 jitter=10 toxicity=0.5 seed=7")
                .unwrap();
        assert_eq!(
            r.selector,
            Selector::Name(Glob::parse("run/db.sock").unwrap())
        );
        assert_eq!(r.direction, Some(Direction::Down));
        assert_eq!(
            r.fault,
            Fault::Latency {
                latency_ms: 100,
                jitter_ms: 10
            }
        );
        assert_eq!(r.toxicity, 0.5);
        assert_eq!(r.seed, Some(7));
        let r = Rule::parse("socket 12 slicer average_size=64 size_variation=32").unwrap();
        assert_eq!(r.selector, Selector::Socket(12));
        assert_eq!(r.direction, None);
        assert_eq!(
            r.fault,
            Fault::Slicer {
                average_size: 64,
                size_variation: 32,
                delay_us: 0
            }
        );
        assert_eq!(r.toxicity, 1.0);
    }

    #[test]
    fn listed_rules_parse_back_to_themselves() {
        for line in [
            "name run/db.sock down latency latency=100 jitter=10 toxicity=0.5 seed=7",
            "socket 12 slicer average_size=64 size_variation=32",
            "pid 42 full times=3",
            "uid 1000 ctrunc toxicity=0.1 after=5",
            "name @bus up refuse errno=EAGAIN",
            "name run/*.sock bandwidth rate=100 after_bytes=4096",
            "socket 3 up die_after messages=2 seed=0",
            "socket 3 short_write bytes=1 toxicity=0",
            "name a\\*b reset_peer timeout=20",
        ] {
            let r = Rule::parse(line).unwrap();
            let text = r.to_string();
            assert_eq!(Rule::parse(&text).unwrap(), r, "{line} -> {text}");
        }
        // Defaults are spelt out, so the listing says exactly what acts.
        assert_eq!(
            Rule::parse("socket 12 slicer average_size=64")
                .unwrap()
                .to_string(),
            "socket 12 slicer average_size=64 size_variation=0 delay=0"
        );
        assert_eq!(
            Rule::parse("name @bus refuse").unwrap().to_string(),
            "name @bus refuse errno=ECONNREFUSED"
        );
    }

    #[test]
    fn malformed_lines_name_the_field() {
        let err = |line: &str| Rule::parse(line).unwrap_err();
        assert_eq!(
            err("name x latency jitter=x"),
            "latency: jitter: not a number: 'x'"
        );
        assert_eq!(err(""), "empty rule");
        assert!(err("port 80 latency").starts_with("unknown selector 'port'"));
        assert_eq!(err("socket x latency"), "socket: not a number: 'x'");
        assert_eq!(err("socket"), "socket: missing its argument");
        assert!(err("socket 1").starts_with("missing the fault"));
        assert!(err("socket 1 up").starts_with("missing the fault"));
        assert!(err("socket 1 jam").starts_with("unknown fault 'jam'"));
        assert!(
            err("socket 1 latency color=red")
                .starts_with("latency: unknown parameter 'color' (latency, jitter, toxicity")
        );
        assert_eq!(
            err("socket 1 latency 100"),
            "latency: '100' is not key=value"
        );
        assert_eq!(
            err("socket 1 latency latency=1 latency=2"),
            "latency: latency: given twice"
        );
        assert_eq!(
            err("socket 1 full toxicity=1.5"),
            "full: toxicity: not a number from 0 to 1: '1.5'"
        );
        assert!(err("socket 1 full toxicity=NaN").starts_with("full: toxicity:"));
        assert_eq!(
            err("socket 1 full after=1 after_bytes=2"),
            "full: after_bytes: after and after_bytes exclude each other"
        );
        assert_eq!(
            err("socket 1 full times=0"),
            "full: times: must be at least 1"
        );
        assert_eq!(
            err("socket 1 full seed=-1"),
            "full: seed: not a number: '-1'"
        );
        assert!(err("pid 1 up full").starts_with("pid: up and down are for"));
        assert!(err("name a\\q full").starts_with("name: bad escape"));
    }

    #[test]
    fn the_ctl_form_has_no_selector() {
        let r = Rule::parse_ctl("up latency latency=5", 9).unwrap();
        assert_eq!(r, Rule::parse("socket 9 up latency latency=5").unwrap());
        assert_eq!(r.ctl_text(), "up latency latency=5 jitter=0");
        assert_eq!(Rule::parse_ctl(&r.ctl_text(), 9).unwrap(), r);
        assert!(Rule::parse_ctl("socket 9 latency", 9).is_err());
    }

    #[test]
    fn check_type_refuses_stream_only_faults_on_message_sockets() {
        let r = Rule::parse_ctl("slicer average_size=4", 1).unwrap();
        assert!(check_type(&r, SockType::Stream).is_ok());
        let e = check_type(&r, SockType::Dgram).unwrap_err();
        assert!(e.contains("stream sockets only"), "{e}");
        let r = Rule::parse_ctl("latency latency=4", 1).unwrap();
        assert!(check_type(&r, SockType::Seqpacket).is_ok());
    }
}

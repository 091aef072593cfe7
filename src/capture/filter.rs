//! What a capture reader asks for, written to its handle before the first
//! read, one line each:
//!
//! ```text
//! socket N        conversations with socket N at either end
//! name GLOB       ... with an end bound at a name GLOB matches (`*` and `?`
//!                 within one path component); an accepted connection
//!                 carries its listener's name
//! pid P           ... in which process P sent, connected or accepted
//! uid U           ... in which user U sent, or owns an end
//! type T          stream, dgram or seqpacket
//! snaplen N       keep at most N payload bytes of each message
//! format F        upper-pdu (default) or tcp
//! proto NAME      the payload's protocol: dissector (upper-pdu) or port (tcp)
//! proto NAME GLOB the same for conversations with an end bound at a name
//!                 matching GLOB (the first such line wins over `proto NAME`)
//! buffer BYTES    what the reader's buffer holds before it drops (default 4 MiB)
//! ```
//!
//! Lines of one kind are alternatives; kinds combine with "and". A kind
//! that matched once in a conversation keeps matching in it, so `pid P`
//! keeps both directions of P's conversations.

use nix::errno::Errno;

use crate::engine::SockType;
use crate::wildcard::matches_bytes;

/// The two payload encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    UpperPdu,
    Tcp,
}

impl Format {
    pub fn from_name(s: &str) -> Option<Format> {
        match s {
            "upper-pdu" | "upper_pdu" => Some(Format::UpperPdu),
            "tcp" => Some(Format::Tcp),
            _ => None,
        }
    }
}

pub const DEFAULT_BUFFER: usize = 4 << 20;
/// A reader may ask for up to this much room.
pub const MAX_BUFFER: usize = 256 << 20;

#[derive(Clone, Debug)]
pub struct Filter {
    pub sockets: Vec<u64>,
    pub names: Vec<String>,
    pub pids: Vec<u32>,
    pub uids: Vec<u32>,
    pub types: Vec<SockType>,
    pub snaplen: Option<usize>,
    pub format: Format,
    pub proto: Option<String>,
    /// (glob, protocol): per-name payload protocols.
    pub protos: Vec<(String, String)>,
    pub buffer: usize,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            sockets: Vec::new(),
            names: Vec::new(),
            pids: Vec::new(),
            uids: Vec::new(),
            types: Vec::new(),
            snaplen: None,
            format: Format::UpperPdu,
            proto: None,
            protos: Vec::new(),
            buffer: DEFAULT_BUFFER,
        }
    }
}

/// Criteria kinds, as bits of a match mask.
pub const SOCKET: u8 = 1;
pub const NAME: u8 = 2;
pub const PID: u8 = 4;
pub const UID: u8 = 8;
pub const TYPE: u8 = 16;

/// What one record shows of its conversation.
#[derive(Default)]
pub struct Subject<'a> {
    pub ids: &'a [u64],
    pub names: &'a [&'a str],
    pub pids: &'a [u32],
    pub uids: &'a [u32],
    pub ty: Option<SockType>,
}

/// The longest glob a `name` or `proto` line may give: matching costs up
/// to its length times a name's on every message a capture looks at.
pub const MAX_GLOB: usize = 512;
/// The longest filter line (and unfinished line kept between writes).
pub const MAX_LINE: usize = 4096;
/// The most criteria (socket, name, pid, uid, type, proto lines) one
/// capture keeps: each message it sees is tested against all of them.
pub const MAX_CRITERIA: usize = 64;

/// `*` (any run without `/`) and `?` (one byte other than `/`): the
/// pattern and the name must have as many `/`-separated components, each
/// matched on its own, without recursion (a hostile pattern of a million
/// stars must neither overflow a worker's stack nor take exponential time).
pub fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let mut pat = pattern.split(|&b| b == b'/');
    let mut parts = name.split(|&b| b == b'/');
    loop {
        match (pat.next(), parts.next()) {
            (None, None) => return true,
            (Some(p), Some(n)) if matches_bytes(p, n) => {}
            _ => return false,
        }
    }
}

fn strip_slash(s: &str) -> &str {
    s.strip_prefix('/').unwrap_or(s)
}

impl Filter {
    /// Takes one line; EINVAL (with a log line) for one it does not know.
    pub fn line(&mut self, line: &str) -> Result<(), Errno> {
        if line.len() > MAX_LINE {
            log::info!(
                "capture: filter line of {} bytes (at most {MAX_LINE})",
                line.len()
            );
            return Err(Errno::EINVAL);
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let (key, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let value = value.trim();
        let bad = || {
            log::info!("capture: bad filter line {line:?}");
            Errno::EINVAL
        };
        let num = |v: &str| v.parse::<u64>().map_err(|_| bad());
        let criterion = matches!(key, "socket" | "name" | "pid" | "uid" | "type")
            || (key == "proto" && value.contains(char::is_whitespace));
        if criterion && self.criteria() >= MAX_CRITERIA {
            log::info!("capture: more than {MAX_CRITERIA} criteria: {line:?} refused");
            return Err(Errno::ENOSPC);
        }
        match key {
            "socket" => self.sockets.push(num(value)?),
            "name" if !value.is_empty() && value.len() <= MAX_GLOB => {
                self.names.push(strip_slash(value).to_string())
            }
            "pid" => self
                .pids
                .push(u32::try_from(num(value)?).map_err(|_| bad())?),
            "uid" => self
                .uids
                .push(u32::try_from(num(value)?).map_err(|_| bad())?),
            "type" => self.types.push(SockType::from_name(value).ok_or_else(bad)?),
            "snaplen" => self.snaplen = Some(num(value)? as usize),
            "format" => self.format = Format::from_name(value).ok_or_else(bad)?,
            "proto" if !value.is_empty() => match value.split_once(char::is_whitespace) {
                None if value.len() <= 64 => self.proto = Some(value.to_string()),
                Some((p, glob)) if p.len() <= 64 && glob.trim().len() <= MAX_GLOB => {
                    self.protos
                        .push((strip_slash(glob.trim()).to_string(), p.to_string()));
                }
                _ => return Err(bad()),
            },
            "buffer" => {
                let n = num(value)? as usize;
                if n == 0 || n > MAX_BUFFER {
                    return Err(bad());
                }
                self.buffer = n;
            }
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// The criteria kept so far (MAX_CRITERIA).
    pub fn criteria(&self) -> usize {
        self.sockets.len()
            + self.names.len()
            + self.pids.len()
            + self.uids.len()
            + self.types.len()
            + self.protos.len()
    }

    /// The payload protocol of a conversation whose ends are bound at `names`.
    pub fn proto_for(&self, names: &[&str]) -> Option<&str> {
        let rule = self.protos.iter().find(|(g, _)| {
            names
                .iter()
                .any(|n| glob(g.as_bytes(), strip_slash(n).as_bytes()))
        });
        rule.map(|(_, p)| p.as_str()).or(self.proto.as_deref())
    }

    /// Takes every line of `text`.
    pub fn lines(&mut self, text: &str) -> Result<(), Errno> {
        text.lines().try_for_each(|l| self.line(l))
    }

    /// The kinds a record must match (all of them).
    pub fn required(&self) -> u8 {
        let mut m = 0;
        for (on, bit) in [
            (!self.sockets.is_empty(), SOCKET),
            (!self.names.is_empty(), NAME),
            (!self.pids.is_empty(), PID),
            (!self.uids.is_empty(), UID),
            (!self.types.is_empty(), TYPE),
        ] {
            if on {
                m |= bit;
            }
        }
        m
    }

    /// The kinds `s` matches.
    pub fn matches(&self, s: &Subject<'_>) -> u8 {
        let mut m = 0;
        if self.sockets.iter().any(|n| s.ids.contains(n)) {
            m |= SOCKET;
        }
        let named = self.names.iter().any(|p| {
            s.names
                .iter()
                .any(|n| glob(p.as_bytes(), strip_slash(n).as_bytes()))
        });
        if named {
            m |= NAME;
        }
        if self.pids.iter().any(|p| s.pids.contains(p)) {
            m |= PID;
        }
        if self.uids.iter().any(|u| s.uids.contains(u)) {
            m |= UID;
        }
        if s.ty.is_some_and(|t| self.types.contains(&t)) {
            m |= TYPE;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_stay_within_a_component() {
        assert!(glob(b"run/*.sock", b"run/a.sock"));
        assert!(glob(b"run/*", b"run/"));
        assert!(!glob(b"run/*.sock", b"run/x/a.sock"));
        assert!(glob(b"*/*", b"a/b"));
        assert!(glob(b"r?n/a", b"run/a"));
        assert!(!glob(b"r?n/a", b"r/n/a"));
        assert!(!glob(b"run", b"runs"));
        assert!(glob(b"@srv*", b"@srv1"));
    }

    #[test]
    fn hostile_globs_end_quickly_and_long_ones_are_refused() {
        // A million stars once overflowed a worker's stack (recursion). The
        // matcher of one component is wildcard.rs's (its backtracking is
        // tested there); here, a glob of half a million components.
        assert!(glob(&vec![b'*'; 1_000_000], b"run"));
        assert!(!glob(&b"*/".repeat(500_000), b"run/a"));
        assert!(glob(&b"*a/".repeat(50)[..149], &b"aa/".repeat(50)[..149]));
        let mut f = Filter::default();
        let longest = format!("name {}", "*".repeat(MAX_GLOB));
        assert_eq!(f.line(&longest), Ok(()));
        let long = format!("name {}", "*".repeat(MAX_GLOB + 1));
        assert_eq!(f.line(&long), Err(Errno::EINVAL));
        let long = format!("proto http {}", "*".repeat(MAX_GLOB + 1));
        assert_eq!(f.line(&long), Err(Errno::EINVAL));
        let line = format!("# {}", "x".repeat(MAX_LINE));
        assert_eq!(f.line(&line), Err(Errno::EINVAL));
    }

    #[test]
    fn a_capture_keeps_at_most_max_criteria() {
        let mut f = Filter::default();
        for i in 0..MAX_CRITERIA / 2 {
            f.line(&format!("pid {i}")).unwrap();
            f.line(&format!("proto http run/{i}")).unwrap();
        }
        assert_eq!(f.criteria(), MAX_CRITERIA);
        for more in [
            "socket 1",
            "name x",
            "pid 1",
            "uid 1",
            "type dgram",
            "proto http y",
        ] {
            assert_eq!(f.line(more), Err(Errno::ENOSPC), "{more}");
        }
        // Settings that are not criteria still go in.
        assert_eq!(f.line("snaplen 5"), Ok(()));
        assert_eq!(f.line("proto http"), Ok(()));
    }

    #[test]
    fn lines_parse_and_bad_ones_are_refused() {
        let mut f = Filter::default();
        f.lines("socket 4\n# a comment\n\nname /run/*.sock\npid 77\ntype seqpacket\nsnaplen 10\nformat tcp\nproto http\nbuffer 1000\n")
            .unwrap();
        assert_eq!(f.sockets, [4]);
        assert_eq!(f.names, ["run/*.sock"]);
        assert_eq!(f.pids, [77]);
        assert_eq!(f.types, [SockType::Seqpacket]);
        assert_eq!(f.snaplen, Some(10));
        assert_eq!(f.format, Format::Tcp);
        assert_eq!(f.proto.as_deref(), Some("http"));
        f.line("proto dbus /run/bus").unwrap();
        assert_eq!(f.protos, [("run/bus".to_string(), "dbus".to_string())]);
        assert_eq!(f.proto_for(&["run/bus"]), Some("dbus"));
        assert_eq!(f.proto_for(&["run/other"]), Some("http"));
        assert_eq!(f.buffer, 1000);
        for bad in [
            "socket x",
            "pid -1",
            "type raw",
            "format pcap",
            "buffer 0",
            "color red",
            "name",
        ] {
            assert_eq!(Filter::default().line(bad), Err(Errno::EINVAL), "{bad}");
        }
    }

    #[test]
    fn kinds_combine_with_and_lines_with_or() {
        let mut f = Filter::default();
        f.lines("socket 1\nsocket 2\npid 9\n").unwrap();
        assert_eq!(f.required(), SOCKET | PID);
        let s = Subject {
            ids: &[2, 3],
            pids: &[9],
            ..Default::default()
        };
        assert_eq!(f.matches(&s), SOCKET | PID);
        let s = Subject {
            ids: &[5],
            pids: &[9],
            ..Default::default()
        };
        assert_eq!(f.matches(&s), PID);
        let names = ["run/a.sock"];
        let mut g = Filter::default();
        g.line("name run/*.sock").unwrap();
        let s = Subject {
            names: &names,
            ..Default::default()
        };
        assert_eq!(g.matches(&s), NAME);
        assert_eq!(Filter::default().required(), 0);
    }
}

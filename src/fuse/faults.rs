//! `.udsfs/faults` and a socket's ctl command `fault ...`: the file side of
//! the engine's fault rules (src/fault/file.rs defines what is written and
//! read). Each writer's rules are theirs: the rule set keeps a user's rules
//! to that user's own sockets. Every log line here is one a client can
//! repeat at will: each goes through the rate limiter (`limited!`).

use nix::errno::Errno;

use crate::engine::log_limit::limited;
use crate::engine::{Caller, Engine, SockType, Socket};
use crate::fault::{self, Command, Rule};

/// What reading the file gives `c`: the rules it may see, with counters.
pub(super) fn listing(eng: &Engine, c: &Caller) -> Vec<u8> {
    fault::listing(&eng.faults.list(c.fsuid), c.fsuid).into_bytes()
}

/// One write to `.udsfs/faults`: a command a line.
pub(super) fn write(eng: &Engine, data: &[u8], c: &Caller) -> Result<usize, Errno> {
    let text = std::str::from_utf8(data).map_err(|_| {
        limited!(unless c.fsuid == 0, info, "{}: not UTF-8", fault::FAULTS_FILE);
        Errno::EINVAL
    })?;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let cmd = Command::parse(line).map_err(|e| {
            limited!(unless c.fsuid == 0, info, "{}: uid {}: {e}", fault::FAULTS_FILE, c.fsuid);
            Errno::EINVAL
        })?;
        match cmd {
            Command::Add(rule) => add(eng, rule, c)?,
            Command::Del(id) => {
                eng.faults.del(id, c.fsuid).inspect_err(|e| {
                    limited!(
                        unless c.fsuid == 0,
                        info,
                        "{}: uid {}: del {id}: {}",
                        fault::FAULTS_FILE,
                        c.fsuid,
                        e.desc()
                    );
                })?;
                // What a deleted `timeout` held is delivered, in order.
                eng.release_held();
            }
            Command::Clear => {
                eng.faults.clear(c.fsuid);
                eng.release_held();
                limited!(unless c.fsuid == 0, info, "fault rules of uid {} cleared", c.fsuid);
            }
        }
    }
    Ok(data.len())
}

fn add(eng: &Engine, rule: Rule, c: &Caller) -> Result<(), Errno> {
    let text = rule.to_string();
    let id = eng.faults.try_add(rule, c.fsuid).inspect_err(|_| {
        limited!(
            unless c.fsuid == 0,
            info,
            "fault rule refused: uid {} has {} rules already: {text}",
            c.fsuid,
            fault::USER_RULES
        );
    })?;
    limited!(unless c.fsuid == 0, info, "fault rule {id} added: {text}");
    // A laned connection's bytes would pass the rule by: the lanes of the
    // connections it may select go down (src/engine/lane.rs).
    eng.lanes_observed_down();
    Ok(())
}

/// A ctl line `fault ...` on socket `s`: the rule without its selector,
/// refused (EINVAL) when its fault does not fit the socket's type. None:
/// the line is another command.
pub(super) fn ctl_line(
    eng: &Engine,
    s: &Socket,
    line: &[u8],
    c: &Caller,
) -> Option<Result<(), Errno>> {
    let rest = line.trim_ascii_start().strip_prefix(b"fault")?;
    if !rest.first().is_some_and(u8::is_ascii_whitespace) {
        return None;
    }
    Some(ctl_fault(eng, s, rest, c))
}

fn ctl_fault(eng: &Engine, s: &Socket, text: &[u8], c: &Caller) -> Result<(), Errno> {
    let refuse = |e: String| {
        limited!(unless c.fsuid == 0, info, "socket {}: fault: {e}", s.id);
        Errno::EINVAL
    };
    let text = std::str::from_utf8(text).map_err(|_| refuse("not UTF-8".into()))?;
    let rule = Rule::parse_ctl(text, s.id).map_err(refuse)?;
    let ty = match s.ty {
        SockType::Stream => fault::SockType::Stream,
        SockType::Dgram => fault::SockType::Dgram,
        SockType::Seqpacket => fault::SockType::Seqpacket,
    };
    fault::check_type(&rule, ty).map_err(refuse)?;
    add(eng, rule, c)
}

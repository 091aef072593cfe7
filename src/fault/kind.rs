//! The faults: their names and parameters (Toxiproxy's where a Toxiproxy
//! toxic fits, AF_UNIX's own otherwise), and which socket types each may
//! attach to.

use std::fmt;

use nix::errno::Errno;

use super::message::{Kind, SockType};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Hold each message `latency` ms, give or take up to `jitter` ms.
    Latency { latency_ms: u64, jitter_ms: u64 },
    /// Pace a connection's messages at `rate` KB/s (1 KB = 1000 bytes, as
    /// Toxiproxy).
    Bandwidth { rate_kb: u64 },
    /// Deliver a stream write in pieces of about `average_size` bytes, each
    /// within `size_variation`, `delay` µs apart.
    Slicer {
        average_size: u64,
        size_variation: u64,
        delay_us: u64,
    },
    /// Let `bytes` through a connection, then close it.
    LimitData { bytes: u64 },
    /// Deliver nothing; close the connection after `timeout` ms (0: never).
    Timeout { timeout_ms: u64 },
    /// Reset the connection `timeout` ms after its first message.
    ResetPeer { timeout_ms: u64 },
    /// Let the peer see a close `delay` ms late.
    SlowClose { delay_ms: u64 },
    /// Fail connect with ECONNREFUSED, or as a full backlog does (EAGAIN).
    Refuse { errno: Errno },
    /// The receiver's queue counts as full for a message hit, `timeout` ms
    /// (0: while the rule stands).
    Full { timeout_ms: u64 },
    /// A stream send queues at most `bytes` and returns that count.
    ShortWrite { bytes: u64 },
    /// Passed sockets and files are dropped, with MSG_CTRUNC.
    Ctrunc,
    /// The sender's end closes after message `messages`, as if its process
    /// died.
    DieAfter { messages: u64 },
}

/// A fault's parameters: key, default (None: required), least value.
type Spec = &'static [(&'static str, Option<u64>, u64)];

/// Every fault by name, with its numeric parameters (refuse's errno is the
/// one that is not a number).
const FAULTS: &[(&str, Spec)] = &[
    (
        "latency",
        &[("latency", Some(0), 0), ("jitter", Some(0), 0)],
    ),
    ("bandwidth", &[("rate", None, 1)]),
    (
        "slicer",
        &[
            ("average_size", None, 1),
            ("size_variation", Some(0), 0),
            ("delay", Some(0), 0),
        ],
    ),
    ("limit_data", &[("bytes", None, 1)]),
    ("timeout", &[("timeout", Some(0), 0)]),
    ("reset_peer", &[("timeout", Some(0), 0)]),
    ("slow_close", &[("delay", Some(0), 0)]),
    ("refuse", &[]),
    ("full", &[("timeout", Some(0), 0)]),
    ("short_write", &[("bytes", Some(1), 1)]),
    ("ctrunc", &[]),
    ("die_after", &[("messages", None, 1)]),
];

/// The errnos `refuse` can give.
const REFUSE_ERRNOS: &[(&str, Errno)] = &[
    ("ECONNREFUSED", Errno::ECONNREFUSED),
    ("EAGAIN", Errno::EAGAIN),
];

impl Fault {
    /// Every fault name, for error messages.
    pub fn names() -> impl Iterator<Item = &'static str> {
        FAULTS.iter().map(|(n, _)| *n)
    }

    /// The parameter keys of fault `name`, or None if there is no such fault.
    pub fn keys(name: &str) -> Option<Vec<&'static str>> {
        let (_, spec) = FAULTS.iter().find(|(n, _)| *n == name)?;
        let mut keys: Vec<_> = spec.iter().map(|(k, _, _)| *k).collect();
        if name == "refuse" {
            keys.push("errno");
        }
        Some(keys)
    }

    /// Builds fault `name` from its own `key=value` parameters (the caller
    /// has checked that every key is one of `keys(name)`, each once).
    pub fn build(name: &str, params: &[(&str, &str)]) -> Result<Fault, String> {
        let Some((name, spec)) = FAULTS.iter().find(|(n, _)| *n == name) else {
            return Err(unknown_fault(name));
        };
        let mut nums = Vec::with_capacity(spec.len());
        for &(key, default, least) in spec.iter() {
            let value = match params.iter().find(|(k, _)| *k == key) {
                Some((_, v)) => {
                    let n: u64 = v
                        .parse()
                        .map_err(|_| format!("{name}: {key}: not a number: '{v}'"))?;
                    if n < least {
                        return Err(format!("{name}: {key}: must be at least {least}"));
                    }
                    n
                }
                None => default.ok_or_else(|| format!("{name}: {key}: required"))?,
            };
            nums.push(value);
        }
        Ok(match *name {
            "latency" => Fault::Latency {
                latency_ms: nums[0],
                jitter_ms: nums[1],
            },
            "bandwidth" => Fault::Bandwidth { rate_kb: nums[0] },
            "slicer" => Fault::Slicer {
                average_size: nums[0],
                size_variation: nums[1],
                delay_us: nums[2],
            },
            "limit_data" => Fault::LimitData { bytes: nums[0] },
            "timeout" => Fault::Timeout {
                timeout_ms: nums[0],
            },
            "reset_peer" => Fault::ResetPeer {
                timeout_ms: nums[0],
            },
            "slow_close" => Fault::SlowClose { delay_ms: nums[0] },
            "refuse" => {
                let errno = match params.iter().find(|(k, _)| *k == "errno") {
                    None => Errno::ECONNREFUSED,
                    Some((_, v)) => REFUSE_ERRNOS
                        .iter()
                        .find(|(n, _)| n == v)
                        .map(|(_, e)| *e)
                        .ok_or_else(|| {
                            format!("refuse: errno: not ECONNREFUSED or EAGAIN: '{v}'")
                        })?,
                };
                Fault::Refuse { errno }
            }
            "full" => Fault::Full {
                timeout_ms: nums[0],
            },
            "short_write" => Fault::ShortWrite { bytes: nums[0] },
            "ctrunc" => Fault::Ctrunc,
            "die_after" => Fault::DieAfter { messages: nums[0] },
            _ => unreachable!("every name in FAULTS is built above"),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Fault::Latency { .. } => "latency",
            Fault::Bandwidth { .. } => "bandwidth",
            Fault::Slicer { .. } => "slicer",
            Fault::LimitData { .. } => "limit_data",
            Fault::Timeout { .. } => "timeout",
            Fault::ResetPeer { .. } => "reset_peer",
            Fault::SlowClose { .. } => "slow_close",
            Fault::Refuse { .. } => "refuse",
            Fault::Full { .. } => "full",
            Fault::ShortWrite { .. } => "short_write",
            Fault::Ctrunc => "ctrunc",
            Fault::DieAfter { .. } => "die_after",
        }
    }

    /// What a fault acts on: connect for refuse, close for slow_close,
    /// sends for every other.
    pub fn acts_on(&self) -> Kind {
        match self {
            Fault::Refuse { .. } => Kind::Connect,
            Fault::SlowClose { .. } => Kind::Close,
            _ => Kind::Send,
        }
    }

    /// Whether the fault may act on sockets of type `ty`, and why not.
    ///
    /// udsfs never moves a dgram or seqpacket boundary, so the faults that
    /// cut a send into parts (slicer, short_write, limit_data) are for
    /// streams only. The faults that end a connection (timeout, reset_peer,
    /// slow_close, die_after) need one, which dgram sockets do not have.
    /// latency, bandwidth, full and ctrunc only delay or hold a message, or
    /// drop its passed references, and fit every type.
    pub fn fits(&self, ty: SockType) -> Result<(), String> {
        if self.fits_type(ty) {
            return Ok(());
        }
        let name = self.name();
        match (self, ty) {
            (Fault::Slicer { .. } | Fault::ShortWrite { .. } | Fault::LimitData { .. }, t)
                if t != SockType::Stream =>
            {
                Err(format!(
                    "{name}: stream sockets only: a {} socket keeps its message boundaries",
                    t.name()
                ))
            }
            (
                Fault::Timeout { .. }
                | Fault::ResetPeer { .. }
                | Fault::SlowClose { .. }
                | Fault::DieAfter { .. },
                SockType::Dgram,
            ) => Err(format!(
                "{name}: stream and seqpacket sockets only: a dgram socket has no connection to end"
            )),
            (
                Fault::Refuse {
                    errno: Errno::EAGAIN,
                },
                SockType::Dgram,
            ) => Err(
                "refuse: errno=EAGAIN is a full listen backlog, which a dgram socket does not have"
                    .into(),
            ),
            _ => unreachable!("fits_type said no"),
        }
    }

    /// `fits` without the message, for the message path.
    pub fn fits_type(&self, ty: SockType) -> bool {
        match self {
            Fault::Slicer { .. } | Fault::ShortWrite { .. } | Fault::LimitData { .. } => {
                ty == SockType::Stream
            }
            Fault::Timeout { .. }
            | Fault::ResetPeer { .. }
            | Fault::SlowClose { .. }
            | Fault::DieAfter { .. } => ty != SockType::Dgram,
            Fault::Refuse { errno } => !(*errno == Errno::EAGAIN && ty == SockType::Dgram),
            Fault::Latency { .. }
            | Fault::Bandwidth { .. }
            | Fault::Full { .. }
            | Fault::Ctrunc => true,
        }
    }
}

pub fn unknown_fault(name: &str) -> String {
    let all: Vec<_> = Fault::names().collect();
    format!("unknown fault '{name}' ({})", all.join(", "))
}

impl fmt::Display for Fault {
    /// The name, then every parameter (defaults too), in the order of
    /// `keys`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let nums: &[u64] = match self {
            Fault::Latency {
                latency_ms,
                jitter_ms,
            } => &[*latency_ms, *jitter_ms],
            Fault::Bandwidth { rate_kb } => &[*rate_kb],
            Fault::Slicer {
                average_size,
                size_variation,
                delay_us,
            } => &[*average_size, *size_variation, *delay_us],
            Fault::LimitData { bytes } | Fault::ShortWrite { bytes } => &[*bytes],
            Fault::Timeout { timeout_ms }
            | Fault::ResetPeer { timeout_ms }
            | Fault::Full { timeout_ms } => &[*timeout_ms],
            Fault::SlowClose { delay_ms } => &[*delay_ms],
            Fault::DieAfter { messages } => &[*messages],
            // Errno's Debug is its name (ECONNREFUSED), as `build` reads it.
            Fault::Refuse { errno } => return write!(f, " errno={errno:?}"),
            Fault::Ctrunc => &[],
        };
        let keys = Fault::keys(self.name()).expect("a fault's own name");
        for (key, n) in keys.iter().zip(nums) {
            write!(f, " {key}={n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_required_and_least_values() {
        assert_eq!(
            Fault::build("latency", &[("latency", "100")]),
            Ok(Fault::Latency {
                latency_ms: 100,
                jitter_ms: 0
            })
        );
        assert_eq!(
            Fault::build("latency", &[("jitter", "x")]),
            Err("latency: jitter: not a number: 'x'".into())
        );
        assert_eq!(
            Fault::build("bandwidth", &[]),
            Err("bandwidth: rate: required".into())
        );
        assert_eq!(
            Fault::build("slicer", &[("average_size", "0")]),
            Err("slicer: average_size: must be at least 1".into())
        );
        assert_eq!(
            Fault::build("refuse", &[]),
            Ok(Fault::Refuse {
                errno: Errno::ECONNREFUSED
            })
        );
        assert!(Fault::build("refuse", &[("errno", "EPERM")]).is_err());
        assert!(
            Fault::build("nope", &[])
                .unwrap_err()
                .contains("unknown fault 'nope'")
        );
    }

    #[test]
    fn stream_only_and_connection_only_faults() {
        let slicer = Fault::build("slicer", &[("average_size", "8")]).unwrap();
        assert!(slicer.fits(SockType::Stream).is_ok());
        let e = slicer.fits(SockType::Dgram).unwrap_err();
        assert!(e.starts_with("slicer: stream sockets only"), "{e}");
        assert!(slicer.fits(SockType::Seqpacket).is_err());
        let die = Fault::DieAfter { messages: 1 };
        assert!(die.fits(SockType::Seqpacket).is_ok());
        assert!(die.fits(SockType::Dgram).is_err());
        assert!(Fault::Full { timeout_ms: 0 }.fits(SockType::Dgram).is_ok());
        let eagain = Fault::Refuse {
            errno: Errno::EAGAIN,
        };
        assert!(eagain.fits(SockType::Stream).is_ok());
        assert!(eagain.fits(SockType::Dgram).is_err());
        // The quick check agrees with the one that explains.
        for name in Fault::names() {
            let (f, _) = build_with_every_key(name);
            for ty in [SockType::Stream, SockType::Dgram, SockType::Seqpacket] {
                assert_eq!(f.fits(ty).is_ok(), f.fits_type(ty), "{name} {ty:?}");
            }
        }
    }

    /// Fault `name` with each of its keys given (errno EAGAIN, numbers 3),
    /// and the keys as given.
    fn build_with_every_key(name: &str) -> (Fault, Vec<(&str, &str)>) {
        let params: Vec<(&str, &str)> = Fault::keys(name)
            .unwrap()
            .into_iter()
            .map(|k| (k, if k == "errno" { "EAGAIN" } else { "3" }))
            .collect();
        (Fault::build(name, &params).unwrap(), params)
    }

    #[test]
    fn every_fault_displays_its_name_and_every_key() {
        for name in Fault::names() {
            let (fault, params) = build_with_every_key(name);
            let mut want = name.to_string();
            for (k, v) in &params {
                want += &format!(" {k}={v}");
            }
            assert_eq!(fault.to_string(), want);
        }
    }
}

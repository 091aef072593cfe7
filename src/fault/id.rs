//! How rules are named: each user numbers their own rules 1, 2, 3, ...,
//! so that no number a user sees counts what another user added.

use std::fmt;
use std::str::FromStr;

/// A rule's name: its owner and its number among that owner's rules,
/// written `OWNER:N` (the log, captures, and listings of others' rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId {
    pub owner: u32,
    pub n: u64,
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.owner, self.n)
    }
}

/// A rule as a user names it: `N`, their own rule N, or `OWNER:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleRef {
    pub owner: Option<u32>,
    pub n: u64,
}

impl RuleRef {
    /// The rule it names for `user`.
    pub fn of(self, user: u32) -> RuleId {
        RuleId {
            owner: self.owner.unwrap_or(user),
            n: self.n,
        }
    }

    /// How `viewer` is shown rule `id`: their own by number, others' as
    /// `OWNER:N`.
    pub fn seen_by(id: RuleId, viewer: u32) -> RuleRef {
        RuleRef {
            owner: (id.owner != viewer).then_some(id.owner),
            n: id.n,
        }
    }
}

impl From<RuleId> for RuleRef {
    fn from(id: RuleId) -> RuleRef {
        RuleRef {
            owner: Some(id.owner),
            n: id.n,
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.owner {
            Some(o) => write!(f, "{o}:{}", self.n),
            None => write!(f, "{}", self.n),
        }
    }
}

impl FromStr for RuleRef {
    type Err = ();
    fn from_str(s: &str) -> Result<RuleRef, ()> {
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        match s.split_once(':') {
            Some((o, n)) if digits(o) && digits(n) => Ok(RuleRef {
                owner: Some(o.parse().map_err(|_| ())?),
                n: n.parse().map_err(|_| ())?,
            }),
            None if digits(s) => Ok(RuleRef {
                owner: None,
                n: s.parse().map_err(|_| ())?,
            }),
            _ => Err(()),
        }
    }
}

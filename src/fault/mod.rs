//! Fault injection: rules that delay, cut, hold back or refuse AF_UNIX
//! messages the way the kernel could, so that programs can be tested off
//! the happy path. This module knows nothing of the engine or of FUSE: the
//! engine describes a message (`Message`), asks the rule set (`Rules::check`)
//! and applies the `Decision`. docs/faults.md describes each fault.

mod decision;
mod effect;
mod file;
mod glob;
mod id;
mod kind;
mod message;
mod prng;
mod rule;
mod rules;

#[cfg(test)]
mod tests;

pub use decision::{Decision, Injection};
pub use file::{Command, FAULTS_FILE, ListingLine, listing, listing_line, parse_listing_line};
pub use glob::Glob;
pub use id::{RuleId, RuleRef};
pub use kind::Fault;
pub use message::{End, Kind, Message, Name, Pid, SockType};
pub use prng::Prng;
pub use rule::{After, Direction, Rule, Selector, check_type};
pub use rules::{Listed, Rules, USER_RULES};

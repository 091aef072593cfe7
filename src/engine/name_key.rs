//! The key a socket is filed under in the name table: its number while
//! unbound, its tree node once bound to a path, or its abstract name.

use super::netns::NetNs;
use super::socktype::SockType;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NameKey {
    Unbound(u64),
    Path(u64),
    /// Abstract names live in the network namespace of the caller that
    /// bound them, one namespace per socket type.
    Abstract(NetNs, SockType, Vec<u8>),
}

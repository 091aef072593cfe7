//! The three AF_UNIX socket types: the protocol crate's, which the fault
//! rules use too.

pub use udsfs_proto::socktype::SockType;

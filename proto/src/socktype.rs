//! The three AF_UNIX socket types and their names, one type for the
//! engine and for the fault rules (which stay free of the engine).

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SockType {
    Stream,
    Dgram,
    Seqpacket,
}

impl SockType {
    pub fn name(self) -> &'static str {
        match self {
            SockType::Stream => "stream",
            SockType::Dgram => "dgram",
            SockType::Seqpacket => "seqpacket",
        }
    }

    pub fn from_name(s: &str) -> Option<SockType> {
        match s {
            "stream" => Some(SockType::Stream),
            "dgram" => Some(SockType::Dgram),
            "seqpacket" => Some(SockType::Seqpacket),
            _ => None,
        }
    }

    /// The SOCK_* number /proc/net/unix shows.
    pub fn number(self) -> u32 {
        match self {
            SockType::Stream => 1,
            SockType::Dgram => 2,
            SockType::Seqpacket => 5,
        }
    }

    pub fn connection_oriented(self) -> bool {
        self != SockType::Dgram
    }
}

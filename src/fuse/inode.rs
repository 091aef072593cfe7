//! Inode numbers of the mount. The namespace tree keeps its own numbers; the
//! control tree's nodes are encoded with a tag in the top byte.

use udsfs_proto::mount::{DATA_FILE_CODE, INO_TAG_SHIFT as TAG_SHIFT, INO_TAG_SOCK as TAG_SOCK};

use crate::engine::SockType;

const TAG_CTRL: u64 = 1;
const TAG_CONNECT: u64 = 3;
const TAG_ABSTRACT: u64 = 4;
const TAG_TICKET: u64 = 5;
const LOW: u64 = (1 << TAG_SHIFT) - 1;

/// Fixed nodes of `.udsfs/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctrl {
    Root,
    TypeDir(SockType),
    Clone(SockType),
    Pair(SockType),
    SockDir,
    AbstractDir,
    Unix,
    Gc,
    Graph,
    /// The fd channel's name (src/fdchannel.rs).
    FdChannel,
    /// The mount's live pcapng capture (src/capture).
    Capture,
    /// The mount-wide fault rules (src/fault/file.rs).
    Faults,
    /// `.udsfs/accept/`, whose entries are accept tickets
    /// (src/engine/tickets.rs).
    AcceptDir,
}

/// Files of `.udsfs/sock/N/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockFile {
    Dir,
    Ctl,
    Data,
    Msg,
    Accept,
    Status,
    /// The capture of this socket's conversations.
    Capture,
}

impl SockFile {
    pub const FILES: [(SockFile, &'static str); 6] = [
        (SockFile::Ctl, "ctl"),
        (SockFile::Data, "data"),
        (SockFile::Msg, "msg"),
        (SockFile::Accept, "accept"),
        (SockFile::Status, "status"),
        (SockFile::Capture, "capture"),
    ];

    pub fn from_name(name: &[u8]) -> Option<SockFile> {
        Self::FILES
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(f, _)| *f)
    }

    pub fn code(self) -> u64 {
        match self {
            SockFile::Dir => 0,
            SockFile::Ctl => 1,
            SockFile::Data => DATA_FILE_CODE,
            SockFile::Msg => 3,
            SockFile::Accept => 4,
            SockFile::Status => 5,
            SockFile::Capture => 6,
        }
    }

    fn from_code(c: u64) -> Option<SockFile> {
        Some(match c {
            0 => SockFile::Dir,
            1 => SockFile::Ctl,
            DATA_FILE_CODE => SockFile::Data,
            3 => SockFile::Msg,
            4 => SockFile::Accept,
            5 => SockFile::Status,
            6 => SockFile::Capture,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// A node of the namespace tree.
    Tree(u64),
    Ctrl(Ctrl),
    /// A file of `.udsfs/sock/N/`, by the directory's generation (numbers
    /// N are reused, generations never: an inode number is never reused).
    Sock(u64, SockFile),
    /// The namespace tree seen through `.udsfs/connect/` (the tree root is
    /// the connect directory itself).
    Connect(u64),
    /// An entry of `.udsfs/abstract/`, by the bound socket's generation.
    Abstract(u64),
    /// An entry of `.udsfs/accept/`, by the ticket's sequence number
    /// (never reused; its name is the ticket's secret number).
    Ticket(u64),
}

const TYPES: [SockType; 3] = [SockType::Stream, SockType::Dgram, SockType::Seqpacket];

fn type_code(t: SockType) -> u64 {
    TYPES.iter().position(|x| *x == t).unwrap() as u64
}

impl Node {
    pub fn ino(self) -> u64 {
        match self {
            Node::Tree(i) => i,
            Node::Ctrl(c) => {
                let n = match c {
                    Ctrl::Root => 1,
                    Ctrl::SockDir => 2,
                    Ctrl::AbstractDir => 3,
                    Ctrl::Unix => 4,
                    Ctrl::Gc => 5,
                    Ctrl::Graph => 6,
                    Ctrl::FdChannel => 7,
                    Ctrl::Capture => 8,
                    Ctrl::Faults => 9,
                    Ctrl::AcceptDir => 40,
                    Ctrl::TypeDir(t) => 10 + type_code(t),
                    Ctrl::Clone(t) => 20 + type_code(t),
                    Ctrl::Pair(t) => 30 + type_code(t),
                };
                (TAG_CTRL << TAG_SHIFT) | n
            }
            Node::Sock(id, f) => (TAG_SOCK << TAG_SHIFT) | (id << 4) | f.code(),
            Node::Connect(i) => (TAG_CONNECT << TAG_SHIFT) | i,
            Node::Abstract(id) => (TAG_ABSTRACT << TAG_SHIFT) | id,
            Node::Ticket(seq) => (TAG_TICKET << TAG_SHIFT) | seq,
        }
    }

    pub fn from_ino(ino: u64) -> Option<Node> {
        let low = ino & LOW;
        Some(match ino >> TAG_SHIFT {
            0 => Node::Tree(ino),
            TAG_CTRL => Node::Ctrl(match low {
                1 => Ctrl::Root,
                2 => Ctrl::SockDir,
                3 => Ctrl::AbstractDir,
                4 => Ctrl::Unix,
                5 => Ctrl::Gc,
                6 => Ctrl::Graph,
                7 => Ctrl::FdChannel,
                8 => Ctrl::Capture,
                9 => Ctrl::Faults,
                10..=12 => Ctrl::TypeDir(TYPES[(low - 10) as usize]),
                20..=22 => Ctrl::Clone(TYPES[(low - 20) as usize]),
                30..=32 => Ctrl::Pair(TYPES[(low - 30) as usize]),
                40 => Ctrl::AcceptDir,
                _ => return None,
            }),
            TAG_SOCK => Node::Sock(low >> 4, SockFile::from_code(low & 0xf)?),
            TAG_CONNECT => Node::Connect(low),
            TAG_ABSTRACT => Node::Abstract(low),
            TAG_TICKET => Node::Ticket(low),
            _ => return None,
        })
    }
}

pub const TYPE_NAMES: [(SockType, &str); 3] = [
    (SockType::Stream, "stream"),
    (SockType::Dgram, "dgram"),
    (SockType::Seqpacket, "seqpacket"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inodes_round_trip() {
        let nodes = [
            Node::Tree(1),
            Node::Tree(12345),
            Node::Ctrl(Ctrl::Root),
            Node::Ctrl(Ctrl::Clone(SockType::Seqpacket)),
            Node::Ctrl(Ctrl::TypeDir(SockType::Dgram)),
            Node::Sock(77, SockFile::Msg),
            Node::Sock(77, SockFile::Capture),
            Node::Ctrl(Ctrl::Capture),
            Node::Connect(1),
            Node::Abstract(9),
            Node::Ctrl(Ctrl::AcceptDir),
            Node::Ticket(5),
        ];
        for n in nodes {
            assert_eq!(Node::from_ino(n.ino()), Some(n));
        }
    }
}

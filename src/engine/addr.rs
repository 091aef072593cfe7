//! Socket addresses as the engine keys them. Their text and wire forms, and
//! the limits `struct sockaddr_un` puts on them, are `udsfs_proto::addr`'s;
//! this is the engine's own type, with the errno type of the daemon.

use nix::errno::Errno;
use udsfs_proto::addr as wire;

/// An address as a caller gives it (bind, connect, sendto).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// A path name, relative to the mount root or absolute inside the mount.
    Path(Vec<u8>),
    /// An abstract name (the bytes after the leading NUL).
    Abstract(Vec<u8>),
}

impl Addr {
    /// Parses `@name` (with `\xHH` escapes) or a path.
    pub fn parse(text: &[u8]) -> Result<Addr, Errno> {
        wire::Addr::parse(text)
            .map(Addr::from)
            .map_err(Errno::from_raw)
    }

    /// The address as status files and `.udsfs/unix` show it.
    pub fn display(&self) -> String {
        wire::Addr::from(self.clone()).display()
    }

    /// The wire form of the ioctls: a tree path, or NUL and the name.
    pub fn to_wire(&self) -> Vec<u8> {
        wire::Addr::from(self.clone()).to_wire()
    }
}

impl From<wire::Addr> for Addr {
    fn from(a: wire::Addr) -> Addr {
        match a {
            wire::Addr::Path(p) => Addr::Path(p),
            wire::Addr::Abstract(n) => Addr::Abstract(n),
        }
    }
}

impl From<Addr> for wire::Addr {
    fn from(a: Addr) -> wire::Addr {
        match a {
            Addr::Path(p) => wire::Addr::Path(p),
            Addr::Abstract(n) => wire::Addr::Abstract(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_names_round_trip_through_escapes() {
        let a = Addr::parse(b"@a\\x00b c\\\\").unwrap();
        assert_eq!(a, Addr::Abstract(b"a\0b c\\".to_vec()));
        assert_eq!(a.display(), "@a\\x00b\\x20c\\\\");
        assert_eq!(Addr::parse(a.display().as_bytes()).unwrap(), a);
    }

    #[test]
    fn limits_follow_sockaddr_un() {
        assert!(Addr::parse(&[b'a'; 108]).is_ok());
        assert_eq!(Addr::parse(&[b'a'; 109]), Err(Errno::EINVAL));
        let mut long = b"@".to_vec();
        long.extend([b'n'; 107]);
        assert!(Addr::parse(&long).is_ok());
        long.push(b'n');
        assert_eq!(Addr::parse(&long), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@\\x4"), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@\\x+1"), Err(Errno::EINVAL));
        // Paths round-trip through their display too.
        let p = Addr::Path(b"a b\\c\x01".to_vec());
        assert_eq!(Addr::parse(p.display().as_bytes()).unwrap(), p);
        assert_eq!(Addr::parse(b"a\\x00b"), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b""), Err(Errno::EINVAL));
        assert_eq!(Addr::parse(b"@"), Ok(Addr::Abstract(vec![])));
    }
}

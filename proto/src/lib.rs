//! udsfs-proto: every format the udsfs daemon speaks with the programs it
//! serves, defined once for the daemon (`src/`), the preload library
//! (`preload/`) and the seccomp supervisor (`src/supervisor/`).
//!
//! Errors are errno values, as each caller reports them; a caller with its
//! own errno type converts at the edge.

/// An enum of numbered variants (`#[repr(u32)]`) with its `TryFrom<u32>`,
/// which takes only those numbers (the error: the unknown one): each number
/// written once, beside its variant.
macro_rules! numbered {
    ($(#[$m:meta])* pub enum $name:ident {
        $($(#[$vm:meta])* $v:ident = $n:literal,)*
    }) => {
        $(#[$m])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $v = $n,)*
        }

        impl TryFrom<u32> for $name {
            /// The unknown number.
            type Error = u32;

            fn try_from(n: u32) -> Result<$name, u32> {
                match n {
                    $($n => Ok($name::$v),)*
                    _ => Err(n),
                }
            }
        }
    };
}

pub mod addr;
pub mod carry;
pub mod cmsg;
pub mod ctl;
pub mod exe;
pub mod fdchannel;
pub mod gadget;
pub mod ioctl;
pub mod lane;
pub mod mount;
pub mod passed;
pub mod record;
pub mod route;
pub mod skb;
pub mod sockopt;
pub mod socktype;
pub mod sysctl;
pub mod tstamp;
pub mod xorshift;

/// For the parsers' tests: each of `bad` is refused with EINVAL (the message
/// names the one that was not).
#[cfg(test)]
fn assert_all_einval<I: Copy + std::fmt::Debug, T: std::fmt::Debug>(
    parse: impl Fn(I) -> Result<T, Errno>,
    bad: &[I],
) {
    for &b in bad {
        assert_eq!(parse(b).map(|_| ()), Err(libc::EINVAL), "{b:?}");
    }
}

/// An errno value (libc's numbers).
pub type Errno = i32;
pub type Res<T> = Result<T, Errno>;

/// SCM_MAX_FD: the most descriptors one message may pass.
pub const SCM_MAX_FD: usize = 253;

/// Credentials as SCM_CREDENTIALS and SO_PEERCRED carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

impl Cred {
    /// What a message that carried no credentials shows (overflow uid/gid).
    pub const NONE: Cred = Cred {
        pid: 0,
        uid: 65534,
        gid: 65534,
    };

    /// As the three u32 of a `struct ucred` (the pid's bits kept).
    pub fn to_words(self) -> [u32; 3] {
        [self.pid as u32, self.uid, self.gid]
    }

    pub fn from_words([pid, uid, gid]: [u32; 3]) -> Cred {
        Cred {
            pid: pid as i32,
            uid,
            gid,
        }
    }
}

//! udsfs-proto: every format the udsfs daemon speaks with the programs it
//! serves, defined once for the daemon (`src/`), the preload library
//! (`preload/`) and the seccomp supervisor (`src/supervisor/`).
//!
//! Errors are errno values, as each caller reports them; a caller with its
//! own errno type converts at the edge.

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
pub mod sockopt;
pub mod socktype;
pub mod sysctl;
pub mod tstamp;
pub mod xorshift;

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

//! A socket's inode, as Linux's sockfs gives each socket one (sock_alloc):
//! what fstat of its descriptor shows and what fchmod and fchown of it
//! change. S_IFSOCK | 0777 at creation, owned by the creator's fsuid and
//! fsgid; accept makes a new one, the acceptor's; a socket passed with
//! SCM_RIGHTS keeps its own, so its receiver sees the sender's mode and
//! owner, and changes them only where Linux would let it (the kernel's
//! default_permissions check of the data file, whose attributes these are:
//! src/fuse/attr.rs). The bound name's node is another file with its own.

use parking_lot::Mutex;

/// The permission bits (with setuid, setgid and sticky) and the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inode {
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
}

/// What sock_alloc gives a new socket's inode: 0777.
const NEW_PERM: u32 = 0o777;
/// The bits chmod changes (S_IALLUGO).
const PERM_BITS: u32 = 0o7777;

pub struct SockInode(Mutex<Inode>);

impl SockInode {
    /// A new socket's inode, owned by (`uid`, `gid`).
    pub fn new(uid: u32, gid: u32) -> SockInode {
        SockInode(Mutex::new(Inode {
            perm: NEW_PERM,
            uid,
            gid,
        }))
    }

    pub fn get(&self) -> Inode {
        *self.0.lock()
    }

    /// chmod (`mode`: its permission bits; the file type is not the
    /// inode's to change) and chown (each id given), as the kernel asked
    /// after its checks; the inode as it is now.
    pub fn change(&self, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>) -> Inode {
        let mut i = self.0.lock();
        if let Some(m) = mode {
            i.perm = m & PERM_BITS;
        }
        i.uid = uid.unwrap_or(i.uid);
        i.gid = gid.unwrap_or(i.gid);
        *i
    }

    /// accept's new inode: the acceptor's, 0777.
    pub fn renew(&self, uid: u32, gid: u32) {
        *self.0.lock() = Inode {
            perm: NEW_PERM,
            uid,
            gid,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chmod_chown_and_accept() {
        let i = SockInode::new(1000, 1001);
        let want = |perm, uid, gid| Inode { perm, uid, gid };
        assert_eq!(i.get(), want(0o777, 1000, 1001));
        // The file type in a chmod's mode is not kept; setuid is.
        let got = i.change(Some(libc::S_IFREG | 0o4600), None, None);
        println!("chmod S_IFREG|04600 -> {got:?}");
        assert_eq!(got, want(0o4600, 1000, 1001));
        assert_eq!(i.change(None, None, Some(5)), want(0o4600, 1000, 5));
        assert_eq!(i.change(None, Some(1), Some(1)), want(0o4600, 1, 1));
        i.renew(7, 8);
        assert_eq!(i.get(), want(0o777, 7, 8));
    }
}

//! Network namespaces: abstract names (and autobinds) are filed per network
//! namespace, as Linux files them: in the namespace a socket was made in
//! (`Socket::netns`, Linux's sock_net). A namespace is known by the inode of
//! `/proc/<tid>/ns/net`, read when a socket is made (and for a lookup in
//! `.udsfs/abstract/`).

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A network namespace, by its nsfs inode number.
pub type NetNs = u64;

/// The namespace of thread `tid`, or None when it is gone (or not visible
/// from the daemon's pid namespace).
pub fn of_thread(tid: u32) -> Option<NetNs> {
    crate::procfs::ns_inode(tid, "net")
}

/// The namespace of thread `tid`, whose namespace link the daemon may not
/// read (`procfs::ns_link`: EACCES without CAP_SYS_PTRACE): the daemon's
/// when the thread is there (`is_daemons`), else an unknown one (fail
/// closed: filed in the daemon's, it would reach and squat that
/// namespace's names).
pub fn of_unreadable(tid: u32) -> NetNs {
    if is_daemons(tid) {
        return own();
    }
    super::log_limit::limited!(
        warn,
        "the daemon may not read /proc/{tid}/ns/net (CAP_SYS_PTRACE missing?) and the \
         thread is not in the daemon's network namespace: its netns is unknown, it \
         finds no abstract names"
    );
    unknown()
}

/// Whether thread `tid` is in the daemon's namespace, by its
/// `/proc/<tid>/net/unix` entry: one per namespace, readable by anyone.
fn is_daemons(tid: u32) -> bool {
    static OWN: OnceLock<Option<u64>> = OnceLock::new();
    let own = *OWN.get_or_init(|| crate::procfs::net_unix_inode("self"));
    own.is_some() && crate::procfs::net_unix_inode(&tid.to_string()) == own
}

/// Opens the held /proc descriptor now, so that it does not show up as a
/// new descriptor of the daemon on the first abstract name.
pub fn prepare() {
    crate::procfs::prepare();
    let _ = own();
}

/// A namespace no other caller is in, for a caller outside the daemon's
/// pid namespace (FUSE gives it pid 0, so its namespace cannot be read).
/// Filing it in the daemon's would let a process in any network namespace
/// reach (and squat) that namespace's abstract names; alone, it finds none.
pub fn unknown() -> NetNs {
    static NEXT: AtomicU64 = AtomicU64::new(UNKNOWN_FIRST);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Where `unknown`'s numbers start: far above any nsfs inode (32 bits).
const UNKNOWN_FIRST: NetNs = 1 << 63;

/// Whether `ns` is one of `unknown`'s numbers, which no namespace has and
/// none is ever given twice.
pub fn is_unknown(ns: NetNs) -> bool {
    ns >= UNKNOWN_FIRST
}

/// The daemon's own namespace: where a caller that vanished before its
/// namespace was read is filed (its call is moot anyway).
pub fn own() -> NetNs {
    static OWN: OnceLock<NetNs> = OnceLock::new();
    *OWN.get_or_init(|| {
        std::fs::metadata("/proc/self/ns/net")
            .map(|m| m.ino())
            .unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_is_in_the_daemons_namespace() {
        let tid = nix::unistd::gettid().as_raw() as u32;
        assert_eq!(of_thread(tid), Some(own()));
        assert_ne!(own(), 0);
        assert_eq!(of_thread(0), None);
        assert!(is_daemons(tid));
        assert!(!is_daemons(0));
    }
}

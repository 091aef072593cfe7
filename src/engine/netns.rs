//! Network namespaces: abstract names (and autobinds) are filed per network
//! namespace, as Linux files them. A namespace is known by the inode of
//! `/proc/<tid>/ns/net`, read only when a call names an abstract address.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

/// A network namespace, by its nsfs inode number.
pub type NetNs = u64;

/// The namespace of thread `tid`, or None when it is gone (or not visible
/// from the daemon's pid namespace).
pub fn of_thread(tid: u32) -> Option<NetNs> {
    if tid == 0 {
        return None;
    }
    // stat follows the magic link to the namespace's nsfs inode.
    std::fs::metadata(format!("/proc/{tid}/ns/net"))
        .ok()
        .map(|m| m.ino())
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
    }
}

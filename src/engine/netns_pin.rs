//! Network namespaces held open for their sockets, as Linux's socket holds
//! a reference on its namespace (sock_net). A namespace is known by its
//! nsfs inode number (netns.rs), and the kernel gives a freed namespace's
//! number to the next new one at once: a socket filed under the number of
//! a namespace that is gone would be found from that new namespace (its
//! name reached, and taken from it). So each namespace with a socket filed
//! under it stays open in the daemon, one descriptor for all its sockets,
//! closed when the last of them is freed (the `Pin` each holds).
//!
//! The descriptor is charged, on the daemon's descriptor quota, to the user
//! whose socket holds it (one user could otherwise make the daemon hold a
//! descriptor for each of countless namespaces of its own): one per
//! namespace and holding user, as a pidfd pin (pins.rs). An accepted
//! connection's, made in its client's namespace, becomes the acceptor's, as
//! the socket's own charge does (so that B's server keeping the connections
//! of A's namespaces does not hold A's share).
//! The daemon's own namespace needs no pin (the daemon is in it), nor does
//! an unknown one (`netns::unknown`: a number never given twice).

use std::sync::Arc;

use nix::errno::Errno;

use super::fds::ChargedFd;
use super::netns::{self, NetNs};
use super::pins::{PinTable, dup_for};
use super::quota::Quota;

/// A network namespace held open for one socket (shared by all of its
/// namespace's sockets: the last one's drop closes it).
pub type Pin = Arc<ChargedFd>;

#[derive(Default)]
pub struct NetnsPins {
    /// The open namespaces, by number and paying user.
    by_ns: PinTable<(NetNs, u32)>,
}

impl NetnsPins {
    /// Namespace `ns`, read from thread `tid` (which is in it and alive:
    /// it is the caller making a socket), held open for one more socket;
    /// a new descriptor is charged to `uid`. None: no pin needed (the
    /// daemon's namespace, an unknown one, or a number given with no
    /// thread: tests). ESRCH: `tid`'s namespace is no longer `ns` (the
    /// thread is gone); ENFILE/ETOOMANYREFS: past the descriptor quota.
    pub fn pin(
        &self,
        quota: &Arc<Quota>,
        ns: NetNs,
        tid: u32,
        uid: u32,
    ) -> Result<Option<Pin>, Errno> {
        if ns == netns::own() || netns::is_unknown(ns) {
            return Ok(None);
        }
        let entry = self.by_ns.entry((ns, uid));
        // A live pin holds the namespace with this number: the same one.
        if let Some((p, ())) = entry.held() {
            return Ok(Some(p));
        }
        if tid == 0 {
            return Ok(None);
        }
        entry
            .open(quota, uid, || match crate::procfs::hold_ns(tid, "net") {
                Ok((fd, ino)) if ino == ns => Ok((fd, ())),
                Ok((_, ino)) => {
                    log::debug!("thread {tid}: namespace {ino} now, {ns} when read");
                    Err(Errno::ESRCH)
                }
                Err(e) => {
                    log::debug!("/proc/{tid}/ns/net: {e}");
                    Err(match e.raw_os_error() {
                        Some(libc::EMFILE | libc::ENFILE) => Errno::ENFILE,
                        _ => Errno::ESRCH,
                    })
                }
            })
            .map(|(pin, ())| Some(pin))
    }

    /// `pin`, of namespace `ns`, charged to `holder`, the user whose socket
    /// keeps it (accept): itself when already theirs, else the holder's own
    /// pin of it (a live pin holds the namespace: the same one), else a copy
    /// charged to the holder, past its share if need be (the socket's own
    /// charge moves so at accept: a refusal would leave it on the client).
    /// ENFILE: the mount's total is held.
    pub fn for_holder(
        &self,
        quota: &Arc<Quota>,
        ns: NetNs,
        pin: &Pin,
        holder: u32,
    ) -> Result<Pin, Errno> {
        if pin.uid() == holder {
            return Ok(pin.clone());
        }
        let entry = self.by_ns.entry((ns, holder));
        if let Some((held, ())) = entry.held() {
            return Ok(held);
        }
        let copy = dup_for(quota, pin, holder, false)?;
        entry.fill(&copy, ());
        Ok(copy)
    }

    /// Namespaces held open (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_ns.count_held()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread in a network namespace of its own (unshare(CLONE_NEWNET)
    /// needs CAP_SYS_ADMIN: None without it), parked until `go` is dropped.
    fn thread_in_new_netns() -> Option<(u32, NetNs, std::sync::mpsc::Sender<()>)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            // SAFETY: unshare acts on this thread alone.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                let _ = tx.send(None);
                return;
            }
            let tid = nix::unistd::gettid().as_raw() as u32;
            let _ = tx.send(netns::of_thread(tid).map(|ns| (tid, ns)));
            let _ = wait.recv();
        });
        let (tid, ns) = rx.recv().ok()??;
        Some((tid, ns, go))
    }

    #[test]
    fn one_descriptor_per_namespace_while_its_sockets_live() {
        let q = Arc::new(Quota::new("descriptors"));
        let pins = NetnsPins::default();
        let me = nix::unistd::gettid().as_raw() as u32;
        assert!(pins.pin(&q, netns::own(), me, 0).unwrap().is_none());
        assert!(pins.pin(&q, netns::unknown(), me, 0).unwrap().is_none());
        assert_eq!(pins.pin(&q, 12345, me, 0).unwrap_err(), Errno::ESRCH);
        assert!(pins.pin(&q, 12345, 0, 0).unwrap().is_none(), "no thread");
        let Some((tid, ns, go)) = thread_in_new_netns() else {
            eprintln!("no CAP_SYS_ADMIN: a namespace of its own is not tried");
            return;
        };
        let a = pins.pin(&q, ns, tid, 1000).unwrap().unwrap();
        let b = pins.pin(&q, ns, 0, 1000).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the namespace's sockets share one");
        assert_eq!((q.used(), q.user_used(1000)), (1, 1));
        // Another user's socket keeping it (accept): its own copy, shared.
        let c = pins.for_holder(&q, ns, &a, 1001).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        let d = pins.pin(&q, ns, 0, 1001).unwrap().unwrap();
        assert!(Arc::ptr_eq(&pins.for_holder(&q, ns, &b, 1001).unwrap(), &d));
        assert!(Arc::ptr_eq(&c, &d));
        assert_eq!((q.used(), q.user_used(1001)), (2, 1));
        drop((c, d));
        drop(go);
        // The thread is gone; the pin still names its namespace.
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&*a));
        assert_eq!(
            std::fs::read_link(link).unwrap().to_str(),
            Some(&*format!("net:[{ns}]"))
        );
        drop((a, b));
        assert_eq!(crate::engine::fds::settled(&q, 0), 0);
        assert!(pins.is_empty());
        q.set_max(0);
        let Some((tid, ns, _go)) = thread_in_new_netns() else {
            panic!("a second namespace could not be made");
        };
        assert_eq!(pins.pin(&q, ns, tid, 1000).unwrap_err(), Errno::ENFILE);
    }
}

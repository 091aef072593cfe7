//! The engine: AF_UNIX sockets, their names, queues and credentials, with no
//! FUSE in it. Every operation either completes, fails with the errno Linux
//! gives, or fails with EAGAIN after leaving the given waiter where the state
//! change that lets it proceed will find it.

pub mod access;
pub mod addr;
pub use bufsize::Buf;
mod bind;
mod bufsize;
mod connect;
pub mod cred;
mod depot;
mod dequeue;
mod fault;
pub mod fds;
mod front;
pub mod gc;
mod graph;
mod introspect;
pub mod kernel_dirs;
mod lane;
mod lane_ready;
pub(crate) mod log_limit;
mod message;
mod msgpath;
mod name_key;
mod name_table;
pub mod netns;
mod netns_pin;
mod observe;
mod oob;
mod peer_close;
pub mod pidns;
pub mod pins;
mod poll;
pub mod quota;
mod release;
mod release_queue;
pub mod rights;
mod sigio;
mod skb;
mod sock_table;
pub mod socket;
pub mod sockflags;
pub mod sockinode;
mod sockopt;
pub mod socktype;
mod stream_read;
pub mod tap;
pub mod tickets;
pub mod timeo;
pub mod tree;
mod urg;
pub mod userns;
pub mod wait;
mod wakeups;
mod worker;

#[cfg(test)]
mod access_tests;
#[cfg(test)]
mod oob_tests;
#[cfg(test)]
mod tap_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tickets_tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use nix::errno::Errno;
use parking_lot::Mutex;

pub use access::Claim;
pub use addr::Addr;
pub use cred::{Caller, Ucred};
pub use front::Outgoing;
pub use message::{Limit, Received, RecvFlags, RightsRoom, SendMsg, Sent};
pub use name_key::NameKey;
pub use sock_table::SockDir;
pub use socket::{SockType, Socket};
pub use urg::UrgOwner;
pub use wait::{ThreadWaiter, Waiter, Wake};
pub use wakeups::Wakeups;

use name_table::NameTable;
use netns_pin::Pin as NetnsPin;
use quota::Quota;
use sock_table::SockTable;
use tree::Tree;

pub type Result<T> = std::result::Result<T, Errno>;

/// Largest message one FUSE write can carry whole: 1 MiB less a page.
pub const MAX_MSG: usize = 1024 * 1024 - 4096;
/// Kernel's net.core.somaxconn default.
pub const SOMAXCONN: usize = 4096;

#[derive(Clone, Debug)]
pub struct Config {
    /// Buckets per half of the name table (src/engine/name_table.rs).
    pub hash_buckets: usize,
    pub max_dgram_qlen: usize,
    pub sndbuf: usize,
    /// A new socket's SO_RCVBUF (the host's net.core.rmem_default).
    pub rcvbuf: usize,
    pub gc_trigger: usize,
    pub somaxconn: usize,
    /// Where the tree is mounted: absolute paths under it name tree paths.
    pub mountpoint: Option<PathBuf>,
    /// Nodes the namespace tree may hold.
    pub max_nodes: usize,
    /// Sockets clients of the mount may make (ENFILE beyond).
    pub max_sockets: u64,
    /// Bytes (as charged: skb truesize) all queues may hold at once, by
    /// sending user (ENOBUFS beyond); 0: not counted.
    pub max_queued_bytes: u64,
    /// On a shared mount, the share of each bound one user (not root) may
    /// take, in thousandths; 0: no shares.
    pub user_share_permille: u64,
    /// Other users may use the mount (`--allow-other`).
    pub allow_other: bool,
    /// Run the collector on its own thread (off only for deterministic tests).
    pub background_gc: bool,
    /// Fast lanes for connected stream pairs (`--lanes`, src/engine/lane.rs).
    pub lanes: bool,
    /// Owner of the tree root.
    pub root_uid: u32,
    pub root_gid: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hash_buckets: 256,
            max_dgram_qlen: host_max_dgram_qlen(),
            sndbuf: 212992,
            rcvbuf: bufsize::rcvbuf_default(),
            gc_trigger: 16000,
            somaxconn: SOMAXCONN,
            mountpoint: None,
            background_gc: true,
            max_nodes: 1 << 20,
            max_sockets: 1 << 20,
            max_queued_bytes: 1 << 30,
            user_share_permille: 0,
            allow_other: false,
            lanes: false,
            root_uid: 0,
            root_gid: 0,
        }
    }
}

impl Config {
    /// A small engine for tests and models: 4 hash buckets, no background
    /// collection thread (a test collects when it means to); the rest as
    /// `default`.
    pub fn small() -> Config {
        Config {
            hash_buckets: 4,
            background_gc: false,
            ..Config::default()
        }
    }
}

/// The host's net.unix.max_dgram_qlen, else Linux's default of 10.
pub fn host_max_dgram_qlen() -> usize {
    crate::procfs::sysctl("net.unix.max_dgram_qlen").map_or(10, |n| n as usize)
}

pub struct Engine {
    pub cfg: Config,
    pub tree: Tree,
    names: NameTable,
    socks: SockTable,
    generation: AtomicU64,
    live: AtomicUsize,
    /// Sockets by the user that made (or accepted) them.
    pub sockets: Quota,
    /// Received entries (`.udsfs/sock/H` aliases) by the receiving user.
    pub aliases: Quota,
    /// What every receive queue holds, charged as each sender's budget is
    /// (src/engine/skb.rs), by sending user: each socket's SO_SNDBUF bounds
    /// one socket, this bounds them all, as a memory cgroup does the
    /// kernel's (msgpath/enqueue.rs).
    pub queued: Arc<Quota>,
    pub gc: gc::Collector,
    /// Received sockets not yet opened, by their directory number.
    unopened: Mutex<std::collections::HashMap<u64, Arc<Socket>>>,
    /// Passed files that are not udsfs sockets, between the channel and a queue.
    pub depot: rights::Depot,
    /// Pidfds of senders and peers, made while they surely live.
    pub pins: pins::Pins,
    /// The network namespaces sockets are filed under, held open while
    /// they live (netns_pin.rs).
    netns_pins: netns_pin::NetnsPins,
    /// Observers of every message and connection event (tap.rs).
    pub taps: tap::Taps,
    /// The fault rules (src/fault/), asked where a message is queued, a
    /// connection made and a socket released (src/engine/fault/), only
    /// once `any()` says one stands.
    pub faults: crate::fault::Rules,
    /// Messages held back in time by faults and late closes
    /// (src/engine/fault/timer.rs).
    delays: fault::Deferred,
    /// References a release dropped past its budget (release_queue.rs).
    releases: release_queue::ReleaseQueue,
    /// Connections whose bytes go through shared memory (lane.rs).
    lanes: lane::Lanes,
    /// One-time accepts authorised by a listener's descriptor (tickets.rs).
    pub tickets: tickets::Tickets,
}

impl Engine {
    pub fn new(cfg: Config) -> Arc<Engine> {
        netns::prepare();
        let prefix = cfg
            .mountpoint
            .as_ref()
            .map(|p| p.as_os_str().as_encoded_bytes().to_vec());
        let eng = Arc::new(Engine {
            tree: Tree::new(cfg.hash_buckets, cfg.root_uid, cfg.root_gid, prefix),
            names: NameTable::new(cfg.hash_buckets),
            socks: SockTable::new(),
            generation: AtomicU64::new(1),
            live: AtomicUsize::new(0),
            sockets: Quota::new("sockets"),
            aliases: Quota::new("received socket entries"),
            queued: Arc::new(Quota::new("bytes queued at receivers")),
            gc: gc::Collector::new(),
            unopened: Mutex::new(Default::default()),
            depot: rights::Depot::new(Arc::new(quota::Quota::new("descriptors held for clients"))),
            pins: pins::Pins::default(),
            netns_pins: Default::default(),
            taps: tap::Taps::default(),
            faults: crate::fault::Rules::default(),
            delays: Default::default(),
            releases: Default::default(),
            lanes: lane::Lanes::new(cfg.user_share_permille),
            tickets: Default::default(),
            cfg,
        });
        eng.delays.attach(&eng);
        eng.releases.attach(&eng);
        eng.lanes.attach(&eng);
        eng.tree.set_max_nodes(eng.cfg.max_nodes);
        eng.sockets.set_max(eng.cfg.max_sockets);
        // An alias stands for a reference as a socket does: the same bound.
        eng.aliases.set_max(eng.cfg.max_sockets);
        eng.aliases.set_user_share(eng.cfg.user_share_permille);
        eng.tree.nodes.set_user_share(eng.cfg.user_share_permille);
        eng.sockets.set_user_share(eng.cfg.user_share_permille);
        eng.queued.set_max(eng.cfg.max_queued_bytes);
        eng.queued.set_user_share(eng.cfg.user_share_permille);
        eng.set_fd_budget();
        eng.depot.quota.set_user_share(eng.cfg.user_share_permille);
        if eng.cfg.background_gc {
            eng.spawn_collector();
        }
        eng
    }

    /// Sizes the descriptor quota from the daemon's RLIMIT_NOFILE (again
    /// once the fd channel has raised it).
    pub fn set_fd_budget(&self) {
        let limit = crate::procfs::own_nofile_limit();
        self.depot.quota.set_max(fds::client_budget(limit));
    }

    /// Makes a socket with no references yet, filed as unbound, owned by
    /// `uid`; `checked`: ENFILE past the bound or the user's share
    /// (Linux's unix_create1 past its socket limit).
    /// The socket is made in the caller's network namespace (one readlinkat
    /// of `/proc/<tid>/ns/net`, netns.rs).
    fn new_socket(&self, ty: SockType, caller: &Caller, checked: bool) -> Result<Arc<Socket>> {
        let uid = caller.fsuid;
        let ns = self.pin_netns(caller, checked)?;
        self.new_socket_for(ty, (uid, caller.fsgid), uid, ns, checked)
    }

    /// The caller's network namespace for a new socket, held open while
    /// the socket lives (netns_pin.rs). A caller whose namespace is no
    /// longer the one read (gone meanwhile) gets an unknown one: its call
    /// is moot, and the number may be another namespace's by now. Past the
    /// descriptor quota: ENFILE (`checked`), else unknown as well.
    fn pin_netns(
        &self,
        caller: &Caller,
        checked: bool,
    ) -> Result<(netns::NetNs, Option<NetnsPin>)> {
        let ns = caller.netns();
        let tid = caller.netns_thread();
        match self
            .netns_pins
            .pin(&self.depot.quota, ns, tid, caller.fsuid)
        {
            Ok(pin) => Ok((ns, pin)),
            Err(Errno::ESRCH) => Ok((netns::unknown(), None)),
            Err(_) if checked => Err(Errno::ENFILE),
            Err(e) => {
                log::warn!("network namespace {ns} not held open ({e}): its socket is filed apart");
                Ok((netns::unknown(), None))
            }
        }
    }

    /// `new_socket` owned by `owner` (uid, gid), counted against `charged`,
    /// made in network namespace `ns` (with its pin, if it needs one).
    pub(super) fn new_socket_for(
        &self,
        ty: SockType,
        (uid, gid): (u32, u32),
        charged: u32,
        (ns, pin): (netns::NetNs, Option<NetnsPin>),
        checked: bool,
    ) -> Result<Arc<Socket>> {
        if !checked {
            self.sockets.transfer_in(charged, 1);
        } else if self.sockets.take(charged, 1).is_err() {
            return Err(Errno::ENFILE);
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let defaults = socket::SockDefaults {
            sndbuf: self.cfg.sndbuf,
            rcvbuf: self.cfg.rcvbuf,
            max_dgram_qlen: self.cfg.max_dgram_qlen,
        };
        let (_, SockDir { sock, .. }) = self.socks.insert(|id| SockDir {
            sock: Arc::new(
                Socket::new(id, generation, ty, defaults)
                    .in_netns(ns, pin)
                    .owned_by(uid, gid),
            ),
            uid,
            gid,
            charged,
            generation,
            refs: Default::default(),
        });
        self.names.insert_unbound(&sock);
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(sock)
    }

    /// socket(): a new socket held by one reference (the caller's handle),
    /// for in-process users: never refused. Its directory keeps one claim
    /// for the socket's life, as such users hold it by the `Arc` alone.
    pub fn socket(&self, ty: SockType, caller: &Caller) -> Arc<Socket> {
        let s = self.new_socket(ty, caller, false);
        let s = s.expect("an unchecked socket is never refused");
        s.refs.store(1, Ordering::Release);
        let _held_for_good = self.first_claim(s.id);
        s
    }

    /// socket() for clients of the mount: ENFILE past `max_sockets` or the
    /// caller's share of it.
    pub fn try_socket(&self, ty: SockType, caller: &Caller) -> Result<Arc<Socket>> {
        let s = self.new_socket(ty, caller, true)?;
        s.refs.store(1, Ordering::Release);
        Ok(s)
    }

    /// socketpair(): two connected sockets, one reference each.
    pub fn socketpair(&self, ty: SockType, caller: &Caller) -> (Arc<Socket>, Arc<Socket>) {
        let a = self.socket(ty, caller);
        let b = self.socket(ty, caller);
        self.pair_up(a, b, caller)
    }

    /// socketpair() for clients of the mount (see `try_socket`).
    pub fn try_socketpair(
        &self,
        ty: SockType,
        caller: &Caller,
    ) -> Result<(Arc<Socket>, Arc<Socket>)> {
        let a = self.try_socket(ty, caller)?;
        let b = self.try_socket(ty, caller).inspect_err(|_| self.put(&a))?;
        Ok(self.pair_up(a, b, caller))
    }

    fn pair_up(
        &self,
        a: Arc<Socket>,
        b: Arc<Socket>,
        caller: &Caller,
    ) -> (Arc<Socket>, Arc<Socket>) {
        // socketpair() sets SO_PEERCRED on both ends, whatever the type.
        let cred = self.peer_cred(caller, caller.fsuid);
        // Two fresh sockets, distinct by construction: one lock at a time.
        for (s, peer) in [(&a, &b), (&b, &a)] {
            let mut st = s.lock();
            st.conn = socket::Conn::connected(peer.clone(), Some(cred.clone()));
            s.paired.store(true, Ordering::Release);
        }
        (a, b)
    }

    /// The caller's SO_PEERCRED for a socket charged to `payer`, its process
    /// pinned on `payer` while it makes its request; past the descriptor
    /// quota SO_PEERPIDFD will say ENODATA, never name another process.
    fn peer_cred(&self, caller: &Caller, payer: u32) -> socket::PeerCred {
        let cred = caller.peer_creds();
        let (pin, seen) = match self.pins.pin(&self.depot.quota, cred.pid, payer) {
            Ok((pin, seen)) => (Some(pin), seen),
            // Read anyway: the caller is in its request.
            Err(_) => (None, pidns::seen(cred.pid)),
        };
        socket::PeerCred {
            cred,
            seen,
            pin,
            groups: caller.peer_groups(),
        }
    }

    /// `pin`, of peer `cred`, charged to `holder`, the user whose socket or
    /// received file keeps it (src/engine/pins.rs `for_holder`); None past
    /// the holder's share (its SO_PEERPIDFD says ENODATA).
    pub(crate) fn pin_for(&self, cred: &socket::PeerCred, holder: u32) -> Option<pins::Pin> {
        let pin = cred.pin.as_ref()?;
        self.pins
            .for_holder(
                &self.depot.quota,
                (cred.cred.pid, Some(cred.seen)),
                pin,
                holder,
            )
            .ok()
    }

    /// The pin in `s`'s SO_PEERCRED charged to whoever the socket is
    /// charged to, once another user's socket keeps it (accept, connect).
    pub(crate) fn pin_to_holder(&self, s: &Arc<Socket>) {
        let Some(holder) = self.dir(s.id).map(|d| d.charged) else {
            return;
        };
        let Some(cred) = s.lock().conn.cred().cloned() else {
            return;
        };
        if cred.pin.as_ref().is_none_or(|p| p.uid() == holder) {
            return;
        }
        // Made outside the socket's lock; put only where the same pin still is.
        let pin = self.pin_for(&cred, holder);
        let mut st = s.lock();
        let now = match &mut st.conn {
            socket::Conn::Connected { cred: Some(c), .. }
            | socket::Conn::Unconnected { cred: Some(c) } => c,
            socket::Conn::Listening { cred: c, .. } => c,
            _ => return,
        };
        if let (Some(a), Some(b)) = (&now.pin, &cred.pin)
            && Arc::ptr_eq(a, b)
        {
            now.pin = pin;
        }
    }

    /// `s`'s network namespace pin charged to `holder`, who accepted it, as
    /// its socket's charge is (src/engine/netns_pin.rs `for_holder`); only a
    /// full mount leaves it on its opener.
    fn netns_to_holder(&self, s: &Arc<Socket>, holder: u32) {
        let q = &self.depot.quota;
        s.repin_netns(|pin| {
            let copy = self.netns_pins.for_holder(q, s.netns, pin, holder);
            // (The quota's refusal is logged, limited, where it is made.)
            copy.ok()
        });
    }

    /// SO_PEERCRED of `s` as task `viewer` sees it (read outside the
    /// socket's lock: it may read /proc).
    pub fn peer_cred_shown(&self, s: &Arc<Socket>, viewer: u32) -> Option<Ucred> {
        let cred = s.lock().conn.cred().cloned()?;
        Some(cred.shown_to(viewer))
    }

    /// SO_PEERPIDFD: the pinned peer as a pidfd tag to claim over the fd
    /// channel for the caller (ENODATA without a peer, as Linux).
    /// SO_PEERGROUPS: the peer's supplementary groups when SO_PEERCRED was
    /// taken; ENODATA without a peer credential, as Linux.
    pub fn peer_groups(&self, s: &Arc<Socket>) -> Result<Arc<[u32]>> {
        let groups = s.lock().conn.cred().map(|c| c.groups.clone());
        groups.ok_or(Errno::ENODATA)
    }

    pub fn peer_pidfd(&self, s: &Arc<Socket>, caller: &Caller) -> Result<u64> {
        let cred = s.lock().conn.cred().cloned();
        let pin = cred.and_then(|c| self.pin_for(&c, caller.fsuid));
        let pin = pin.ok_or(Errno::ENODATA)?;
        Ok(self.depot.keep_received_pidfd(s.id, caller.fsuid, pin))
    }

    /// The socket directory `.udsfs/sock/N`.
    pub fn dir(&self, id: u64) -> Option<SockDir> {
        self.socks.get(id)
    }

    /// Every socket directory, by number.
    pub fn dirs(&self) -> Vec<(u64, SockDir)> {
        self.socks.all()
    }

    /// What `f` makes of the `most` lowest-numbered socket directories
    /// above `after`.
    pub fn dirs_after<T>(
        &self,
        after: u64,
        most: usize,
        f: impl Fn(&SockDir) -> T,
    ) -> Vec<(u64, T)> {
        self.socks.after(after, most, f)
    }

    /// Gives the directory of `id` to a new owner (accept), and the socket
    /// a new inode of theirs, as do_accept's sock_alloc.
    pub fn set_owner(&self, id: u64, uid: u32, gid: u32) {
        self.socks.update(id, |d| {
            if d.sock.id == id {
                self.sockets.transfer(d.charged, uid, 1);
                d.sock.inode.renew(uid, gid);
            }
            d.uid = uid;
            d.charged = uid;
            d.gid = gid;
        });
        if let Some(d) = self.dir(id)
            && d.sock.id == id
        {
            self.pin_to_holder(&d.sock);
            self.netns_to_holder(&d.sock, uid);
        }
    }

    fn remove_dir(&self, id: u64) {
        // A socket's own directory counts as a socket, an alias as an alias.
        if let Some(d) = self.socks.remove(id) {
            if d.sock.id == id {
                self.sockets.give(d.charged, 1);
            } else {
                self.aliases.give(d.charged, 1);
            }
        }
    }

    /// The first claim on socket `id`'s own directory, for the handle that
    /// made the socket or accepted it (src/engine/access.rs).
    pub fn first_claim(&self, id: u64) -> Option<Claim> {
        let d = self.socks.get(id)?;
        d.refs.claim_first().then_some(Claim { id, refs: d.refs })
    }

    /// One more claim on directory `id` (`d`), while it has one already.
    pub fn more_claim(&self, id: u64, d: &SockDir) -> Option<Claim> {
        d.refs.claim_more().then(|| Claim {
            id,
            refs: d.refs.clone(),
        })
    }

    /// Gives a claim back; an alias whose last claim went is removed, as
    /// nothing can reach it any more (a socket's own directory stays,
    /// revoked, while the socket lives: its number names it elsewhere).
    pub fn release_claim(&self, c: Claim) {
        if !c.refs.release() {
            return;
        }
        if let Some(d) = self.socks.get(c.id)
            && Arc::ptr_eq(&d.refs, &c.refs)
        {
            d.sock.last_opener.store(d.uid, Ordering::Relaxed);
            if d.sock.id != c.id {
                self.remove_alias(&d.sock, c.id);
            }
        }
    }

    /// Sockets alive now.
    pub fn live_sockets(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Takes one more reference to `s`.
    pub fn hold(&self, s: &Socket) {
        s.refs.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes a reference for someone who names the socket by number: only
    /// while something outside the queues still holds it (a socket that
    /// lives only in flight can be had back only by receiving it), and
    /// never once the collector claimed it.
    pub fn try_hold(&self, s: &Socket) -> bool {
        let ok = s
            .refs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n > s.inflight()).then_some(n + 1)
            })
            .is_ok();
        if ok && s.gc_dead.load(Ordering::SeqCst) {
            // The collector owns it now; its purge drops the last references.
            s.refs.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        ok
    }

    /// Drops one reference; the last one closes the socket as Linux does.
    /// A socket left with only in-flight references may be garbage now.
    /// A put with no reference left is a bug elsewhere: it is logged and
    /// refused, never wrapped round to a count that keeps the socket forever.
    pub fn put(&self, s: &Arc<Socket>) {
        let Ok(before) = s
            .refs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        else {
            log::error!("socket {}: put without a reference, refused", s.id);
            return;
        };
        let left = before - 1;
        if left == 0 {
            self.release(s);
        } else if left == s.inflight() {
            self.gc.schedule();
        }
    }

    /// A new `.udsfs/sock/H` entry for a socket someone received.
    fn new_alias(&self, sock: &Arc<Socket>, uid: u32, gid: u32) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (id, d) = self.socks.insert(|_| SockDir {
            sock: sock.clone(),
            uid,
            gid,
            charged: uid,
            generation,
            refs: Default::default(),
        });
        // The unopened reference is its first claim.
        d.refs.claim_first();
        sock.aliases.lock().push(id);
        // A user who may open `sock` now may see its messages: its lane
        // goes down if that user's capture stands (lane.rs).
        self.lane_observed_down(sock);
        id
    }

    /// The socket directory whose generation is `generation`, with its number.
    pub fn dir_by_generation(&self, generation: u64) -> Option<(u64, SockDir)> {
        self.socks.by_generation(generation)
    }

    fn remove_alias(&self, sock: &Arc<Socket>, id: u64) {
        sock.aliases.lock().retain(|a| *a != id);
        self.remove_dir(id);
    }

    /// Turns a path given by a caller into a tree path: absolute paths must
    /// lie inside the mount.
    fn tree_path<'a>(&self, path: &'a [u8]) -> Result<&'a [u8]> {
        self.tree.strip_mount_prefix(path).ok_or_else(|| {
            log::info!(
                "path {:?} is outside the mount",
                String::from_utf8_lossy(path)
            );
            Errno::EXDEV
        })
    }
}

/// A random u32 from the kernel.
fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 4 {
        return std::process::id().wrapping_mul(2654435761);
    }
    u32::from_ne_bytes(b)
}

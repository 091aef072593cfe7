//! Sockets in flight and the collector that frees unreachable cycles of them
//! (Linux net/unix/garbage.c, the 6.10+ design).
//!
//! Vertices are sockets that some queue holds a copy of; each copy is an edge
//! from that socket to the socket whose queue holds it (an embryo's queue
//! counts as its listener's). A strongly connected component is dead when
//! every reference to each member is an in-flight copy inside the component:
//! nothing outside can ever receive them again. The collector purges dead
//! components' queues, which drops those copies and closes the sockets as
//! usual. It runs on its own thread, never on a sender's path.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::socket::{Conn, Socket};
use super::{Engine, Wakeups};

/// A sender waits for a running collection only past this many sockets of
/// its user in flight (SCM_MAX_FD * 8, Linux's UNIX_INFLIGHT_SANE_USER).
pub const INFLIGHT_SANE_USER: usize = 253 * 8;

struct Vertex {
    sock: Arc<Socket>,
    /// Receivers holding a copy, one entry per copy.
    edges: Vec<u64>,
}

#[derive(Default)]
struct Graph {
    vertices: HashMap<u64, Vertex>,
    /// Embryos holding in-flight copies, and their listeners.
    listener_of: HashMap<u64, u64>,
    user_inflight: HashMap<u32, usize>,
    total: usize,
    /// A cycle may exist: set when an edge points at an in-flight socket.
    maybe_cyclic: bool,
}

impl Graph {
    fn successor(&self, receiver: u64) -> u64 {
        self.listener_of.get(&receiver).copied().unwrap_or(receiver)
    }
}

#[derive(Default, Clone, Copy, Debug)]
pub struct GcStats {
    pub inflight: usize,
    pub collections: u64,
    pub freed: u64,
    pub last_duration: Duration,
    pub walks: u64,
}

#[derive(Default)]
struct Control {
    requested: bool,
    running: bool,
}

pub struct Collector {
    graph: Mutex<Graph>,
    /// Serialises walks (not the graph: closes go on during a walk).
    walk: Mutex<()>,
    /// Odd while a walk runs over its snapshot (tests count closes then).
    pub(crate) walk_phase: AtomicU64,
    /// Entries in the graph's `listener_of` (changed under the graph lock):
    /// while there are none, closes and accepts need not take the lock.
    embryo_entries: AtomicUsize,
    control: Mutex<Control>,
    /// Signals the worker (requests) and waiting senders (completions).
    cv: Condvar,
    stats: Mutex<GcStats>,
}

impl Collector {
    pub fn new() -> Collector {
        Collector {
            graph: Mutex::new(Graph::default()),
            walk: Mutex::new(()),
            walk_phase: AtomicU64::new(0),
            embryo_entries: AtomicUsize::new(0),
            control: Mutex::new(Control::default()),
            cv: Condvar::new(),
            stats: Mutex::new(GcStats::default()),
        }
    }

    pub fn total(&self) -> usize {
        self.graph.lock().total
    }

    pub fn user_inflight(&self, uid: u32) -> usize {
        self.graph
            .lock()
            .user_inflight
            .get(&uid)
            .copied()
            .unwrap_or(0)
    }

    /// Records copies of `rights` queued at `receiver` (the caller holds the
    /// receiver's lock; `listener` is set when the receiver is an embryo).
    pub(crate) fn add(
        &self,
        rights: &[Arc<Socket>],
        receiver: u64,
        listener: Option<u64>,
        uid: u32,
    ) {
        let mut g = self.graph.lock();
        if let Some(l) = listener
            && g.listener_of.insert(receiver, l).is_none()
        {
            self.embryo_entries.fetch_add(1, Ordering::SeqCst);
        }
        let succ = g.successor(receiver);
        for r in rights {
            r.inflight.fetch_add(1, Ordering::AcqRel);
            g.vertices
                .entry(r.id)
                .or_insert_with(|| Vertex {
                    sock: r.clone(),
                    edges: Vec::new(),
                })
                .edges
                .push(receiver);
        }
        if g.vertices.contains_key(&succ) {
            g.maybe_cyclic = true;
        }
        *g.user_inflight.entry(uid).or_default() += rights.len();
        g.total += rights.len();
    }

    /// Files that are not udsfs sockets went in flight: Linux charges them
    /// to the user (unix_inflight) but not to the collector's total.
    pub(crate) fn add_files(&self, n: usize, uid: u32) {
        if n > 0 {
            *self.graph.lock().user_inflight.entry(uid).or_default() += n;
        }
    }

    pub(crate) fn remove_files(&self, n: usize, uid: u32) {
        let mut g = self.graph.lock();
        if let Some(v) = g.user_inflight.get_mut(&uid) {
            *v = v.saturating_sub(n);
            if *v == 0 {
                g.user_inflight.remove(&uid);
            }
        }
    }

    /// Forgets copies of `rights` that left `receiver`'s queue.
    pub(crate) fn remove(&self, rights: &[Arc<Socket>], receiver: u64, uid: u32) {
        let mut g = self.graph.lock();
        for r in rights {
            r.inflight.fetch_sub(1, Ordering::AcqRel);
            if let Some(v) = g.vertices.get_mut(&r.id) {
                if let Some(i) = v.edges.iter().position(|e| *e == receiver) {
                    v.edges.swap_remove(i);
                }
                if v.edges.is_empty() {
                    g.vertices.remove(&r.id);
                }
            }
        }
        if let Some(n) = g.user_inflight.get_mut(&uid) {
            *n = n.saturating_sub(rights.len());
            if *n == 0 {
                g.user_inflight.remove(&uid);
            }
        }
        g.total = g.total.saturating_sub(rights.len());
    }

    /// An embryo was accepted: its queue is its own from now on.
    pub(crate) fn accepted(&self, embryo: u64) {
        self.drop_embryo_entry(embryo, true);
    }

    /// A socket closed: it holds nothing in flight any more.
    pub(crate) fn forget_receiver(&self, id: u64) {
        self.drop_embryo_entry(id, false);
    }

    /// Removes `id`'s entry as an embryo of a listener, if it has one;
    /// `may_close_a_cycle`: the next collection looks for cycles then.
    fn drop_embryo_entry(&self, id: u64, may_close_a_cycle: bool) {
        // An entry made for it was made under its lock, before accept
        // cleared its embryo flag: a zero here means there is none.
        if self.embryo_entries.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = self.graph.lock();
        if g.listener_of.remove(&id).is_some() {
            self.embryo_entries.fetch_sub(1, Ordering::SeqCst);
            if may_close_a_cycle {
                g.maybe_cyclic = true;
            }
        }
    }

    /// Asks the worker for a collection.
    pub fn schedule(&self) {
        let mut c = self.control.lock();
        if !c.requested {
            c.requested = true;
            self.cv.notify_all();
        }
    }

    /// Blocks until no collection is running (a heavy sender waits so, as
    /// in unix_schedule_gc).
    pub fn wait_idle(&self) {
        let mut c = self.control.lock();
        while c.running {
            self.cv.wait(&mut c);
        }
    }

    pub fn is_running(&self) -> bool {
        self.control.lock().running
    }

    pub fn stats(&self) -> GcStats {
        let mut s = *self.stats.lock();
        s.inflight = self.total();
        s
    }

    /// Finds the dead components and claims their members (marks them so
    /// that nobody can take a new reference). Returns the claimed sockets.
    ///
    /// The graph lock, which every close, accept and in-flight send takes,
    /// is held only to copy the graph and to re-check the few candidates:
    /// the Tarjan pass runs on the copy with the lock free.
    fn find_dead(&self) -> Vec<Arc<Socket>> {
        // One walk at a time: two walks would claim the same component.
        let _walk = self.walk.lock();
        let Some(snapshot) = self.snapshot() else {
            return Vec::new();
        };
        self.walk_phase.fetch_add(1, Ordering::SeqCst);
        let (candidates, mut cyclic) = snapshot.closed_cycles();
        self.walk_phase.fetch_add(1, Ordering::SeqCst);
        let mut dead = Vec::new();
        let mut g = self.graph.lock();
        for members in candidates {
            if g.still_dead(&members) {
                dead.extend(members);
            } else {
                cyclic = true;
            }
        }
        if cyclic {
            g.maybe_cyclic = true;
        }
        dead
    }

    /// A copy of the graph to walk, if a cycle may exist. The flag is
    /// cleared now: an edge added during the walk sets it again.
    fn snapshot(&self) -> Option<Snapshot> {
        let mut g = self.graph.lock();
        if !g.maybe_cyclic {
            return None;
        }
        g.maybe_cyclic = false;
        self.stats.lock().walks += 1;
        Some(g.snapshot())
    }
}

/// The in-flight graph as it was at one instant: each vertex's socket and
/// the successor (receiver, or an embryo's listener) of each of its copies.
struct Snapshot {
    socks: Vec<Arc<Socket>>,
    succ: Vec<Vec<u64>>,
}

impl Snapshot {
    /// The cycles that looked dead in the snapshot: every member's
    /// references are its copies, all queued inside the cycle. Also whether
    /// some other cycle exists (the next collection must look again).
    fn closed_cycles(&self) -> (Vec<Vec<Arc<Socket>>>, bool) {
        let index_of: HashMap<u64, usize> = self
            .socks
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id, i))
            .collect();
        // Successors by vertex index; None for an edge that leaves the graph.
        let succ: Vec<Vec<Option<usize>>> = self
            .succ
            .iter()
            .map(|edges| edges.iter().map(|r| index_of.get(r).copied()).collect())
            .collect();
        let sccs = tarjan(&succ);
        let mut scc_of = vec![0usize; succ.len()];
        for (n, scc) in sccs.iter().enumerate() {
            for &v in scc {
                scc_of[v] = n;
            }
        }
        let mut candidates = Vec::new();
        let mut cyclic = false;
        for (n, scc) in sccs.iter().enumerate() {
            let is_cycle = scc.len() > 1 || succ[scc[0]].contains(&Some(scc[0]));
            let closed = scc.iter().all(|&v| {
                self.socks[v].refs() == succ[v].len()
                    && succ[v].iter().all(|s| s.is_some_and(|s| scc_of[s] == n))
            });
            if is_cycle && closed {
                candidates.push(scc.iter().map(|&v| self.socks[v].clone()).collect());
            } else {
                cyclic |= is_cycle;
            }
        }
        (candidates, cyclic)
    }
}

impl Graph {
    /// A copy of the vertices and their successors, to walk unlocked.
    fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot {
            socks: Vec::with_capacity(self.vertices.len()),
            succ: Vec::with_capacity(self.vertices.len()),
        };
        for v in self.vertices.values() {
            snap.socks.push(v.sock.clone());
            snap.succ
                .push(v.edges.iter().map(|r| self.successor(*r)).collect());
        }
        snap
    }

    /// Whether `members` is still dead in the graph as it is now, and if so
    /// claims them. Dead: each member is in flight, each of its copies waits
    /// in a member's queue, and those copies are all its references.
    fn still_dead(&self, members: &[Arc<Socket>]) -> bool {
        let ids: HashSet<u64> = members.iter().map(|m| m.id).collect();
        let closed = |m: &Arc<Socket>| {
            self.vertices.get(&m.id).is_some_and(|v| {
                m.refs() == v.edges.len()
                    && v.edges.iter().all(|r| ids.contains(&self.successor(*r)))
            })
        };
        if !members.iter().all(closed) {
            return false;
        }
        // Claim, then look again: a concurrent try_hold either sees the
        // claim or is seen here (both use SeqCst).
        for m in members {
            m.gc_dead.store(true, Ordering::SeqCst);
        }
        if members.iter().all(closed) {
            return true;
        }
        for m in members {
            m.gc_dead.store(false, Ordering::SeqCst);
        }
        false
    }
}

/// What the collector sees, for `.udsfs/graph`: every socket in flight with
/// the receivers whose queues hold its copies (one entry per copy), and the
/// sockets it would free if it ran now.
pub struct GcView {
    pub inflight: Vec<(u64, Vec<u64>)>,
    pub dead: std::collections::HashSet<u64>,
}

impl Collector {
    /// A read-only look at the graph; claims nothing.
    pub fn view(&self) -> GcView {
        let (mut inflight, snap) = {
            let g = self.graph.lock();
            let inflight: Vec<(u64, Vec<u64>)> = g
                .vertices
                .iter()
                .map(|(id, v)| (*id, v.edges.clone()))
                .collect();
            (inflight, g.snapshot())
        };
        inflight.sort();
        let dead = snap
            .closed_cycles()
            .0
            .into_iter()
            .flatten()
            .map(|s| s.id)
            .collect();
        GcView { inflight, dead }
    }
}

impl Default for Collector {
    fn default() -> Self {
        Self::new()
    }
}

/// Tarjan's strongly connected components, iterative. `succ[v]` lists v's
/// successors (None = outside the graph). Returns the components.
fn tarjan(succ: &[Vec<Option<usize>>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = succ.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut sccs = Vec::new();
    let mut next = 0;
    // (vertex, next edge to look at)
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        call.push((root, 0));
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut ei)) = call.last_mut() {
            if let Some(&s) = succ[v].get(*ei) {
                *ei += 1;
                let Some(w) = s else { continue };
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(parent, _)) = call.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                loop {
                    let w = stack.pop().expect("on stack");
                    on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                sccs.push(scc);
            }
        }
    }
    sccs
}

impl Engine {
    /// One collection: find dead components, purge their queues.
    pub fn collect(&self) -> usize {
        let (n, wake) = self.collect_quietly();
        self.finish(wake);
        n
    }

    /// A collection whose wake-ups are left to the caller: the collector's
    /// thread runs them once it no longer counts as running, since a woken
    /// sender may wait for the collection to end (`wait_idle`), and on the
    /// collector's own thread that would be waiting on itself.
    fn collect_quietly(&self) -> (usize, Wakeups) {
        let start = Instant::now();
        let dead = self.gc.find_dead();
        let n = dead.len();
        let mut wake = Wakeups::new();
        for s in &dead {
            self.tap_event(None, || {
                let name = s.lock().name.clone();
                super::tap::Event::Collected {
                    sock: self.endpoint_gone(s, name.as_deref()),
                }
            });
            let (msgs, embryos) = {
                let mut st = s.lock();
                let embryos: Vec<Arc<Socket>> = match &st.conn {
                    Conn::Listening { pending, .. } => pending.iter().cloned().collect(),
                    _ => Vec::new(),
                };
                (st.queue.drain(), embryos)
            };
            for m in msgs {
                self.dequeued(s.id, m, &mut wake);
            }
            for e in embryos {
                let msgs = {
                    let mut et = e.lock();
                    et.queue.drain()
                };
                for m in msgs {
                    self.dequeued(e.id, m, &mut wake);
                }
            }
        }
        let mut st = self.gc.stats.lock();
        st.collections += 1;
        st.freed += n as u64;
        st.last_duration = start.elapsed();
        if n > 0 {
            log::debug!("gc freed {n} sockets in {:?}", st.last_duration);
        }
        (n, wake)
    }

    /// Starts the collector's thread.
    pub(crate) fn spawn_collector(self: &Arc<Self>) {
        let weak: Weak<Engine> = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("udsfs-gc".into())
            .spawn(move || {
                loop {
                    let Some(eng) = weak.upgrade() else { return };
                    {
                        let mut c = eng.gc.control.lock();
                        while !c.requested {
                            // Wake now and then to notice the engine going away.
                            if eng
                                .gc
                                .cv
                                .wait_for(&mut c, Duration::from_millis(500))
                                .timed_out()
                                && Arc::strong_count(&eng) == 1
                            {
                                return;
                            }
                        }
                        c.requested = false;
                        c.running = true;
                    }
                    let (_, wake) = eng.collect_quietly();
                    {
                        let mut c = eng.gc.control.lock();
                        c.running = false;
                        eng.gc.cv.notify_all();
                    }
                    eng.finish(wake);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::tarjan;
    use crate::engine::SendMsg;
    use crate::engine::{Addr, Caller, Config, Engine, SockType, Waiter, Wake};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Weak};
    use std::time::{Duration, Instant};

    /// A woken sender that, like a heavy sender's retry, waits for the
    /// running collection to end.
    struct WaitsForCollection(Weak<Engine>, Arc<AtomicBool>);

    impl Wake for WaitsForCollection {
        fn wake(self: Arc<Self>) {
            if let Some(eng) = self.0.upgrade() {
                eng.gc.wait_idle();
            }
            self.1.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_sender_woken_by_the_collector_does_not_wait_on_it() {
        let eng = Engine::new(Config::default());
        let c = Caller::current();
        let name = Addr::Abstract(b"gc-self-wait".to_vec());
        // `a` holds the only reference to itself, in its own queue: dead.
        let a = eng.socket(SockType::Dgram, &c);
        eng.bind(&a, &name, &c).unwrap();
        eng.hold(&a);
        let mut r = vec![a.clone()];
        eng.sendmsg(&a, SendMsg::new(b"x").to(&name).rights(&mut r), &c, None)
            .unwrap();
        // x's message waits in a's queue, charged to x; x's writer waits.
        let x = eng.socket(SockType::Dgram, &c);
        eng.sendmsg(&x, SendMsg::new(b"hi").to(&name), &c, None)
            .unwrap();
        let woken = Arc::new(AtomicBool::new(false));
        let w: Waiter = Arc::new(WaitsForCollection(Arc::downgrade(&eng), woken.clone()));
        eng.poll(&x, Some(&w));
        eng.put(&a);
        eng.gc.schedule();
        let start = Instant::now();
        while !woken.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            woken.load(Ordering::SeqCst),
            "the collector's wake-up of x's writer waits for the collector itself"
        );
        eng.put(&x);
    }

    #[test]
    fn tarjan_finds_components() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> outside, 4 -> 4
        let succ = vec![
            vec![Some(1)],
            vec![Some(2)],
            vec![Some(0), Some(3)],
            vec![None],
            vec![Some(4)],
        ];
        let mut sccs: Vec<Vec<usize>> = tarjan(&succ)
            .into_iter()
            .map(|mut s| {
                s.sort();
                s
            })
            .collect();
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3], vec![4]]);
    }
}

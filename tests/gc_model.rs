//! Property test of the in-flight garbage collector against a reference
//! model: random sends of sockets over sockets, receives and
//! closes; after every collection the engine's live sockets must be exactly
//! the model's reachable ones — nothing reachable freed, nothing
//! unreachable kept.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use proptest::prelude::*;
use udsfs::engine::{Caller, Config, Engine, RecvFlags, SendMsg, SockType, Socket};

#[derive(Clone, Debug)]
enum Op {
    /// Send socket `what` over socket `via` (it lands in via's peer's queue).
    Send { what: usize, via: usize },
    /// Receive one message at `at`; received sockets become handles.
    Recv { at: usize },
    /// Close one handle of `s`.
    Close { s: usize },
    /// Accept one pending connection on `l`.
    Accept { l: usize },
    /// Run the collector to the end and compare with the model.
    Collect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..64usize, 0..64usize).prop_map(|(what, via)| Op::Send { what, via }),
        2 => (0..64usize).prop_map(|at| Op::Recv { at }),
        3 => (0..64usize).prop_map(|s| Op::Close { s }),
        1 => (0..64usize).prop_map(|l| Op::Accept { l }),
        1 => Just(Op::Collect),
    ]
}

struct World {
    eng: Arc<Engine>,
    caller: Caller,
    socks: Vec<Arc<Socket>>,
    peer: Vec<usize>,
    /// Model: handles held per socket, and each socket's queue of passed sockets.
    handles: Vec<usize>,
    queue: Vec<VecDeque<usize>>,
    index: HashMap<u64, usize>,
}

impl World {
    fn new(pairs: &[SockType], listeners: &[(SockType, usize)]) -> World {
        let eng = Engine::new(Config {
            background_gc: false,
            ..Config::default()
        });
        let caller = Caller::current();
        let mut socks = Vec::new();
        let mut peer = Vec::new();
        for ty in pairs {
            let (a, b) = eng.socketpair(*ty, &caller);
            let n = socks.len();
            socks.push(a);
            socks.push(b);
            peer.push(n + 1);
            peer.push(n);
        }
        let mut handles = vec![1; socks.len()];
        let mut queue = vec![VecDeque::new(); socks.len()];
        // Listeners with clients not yet accepted: in the model an embryo
        // waits in its listener's queue, as a passed socket would.
        for (k, (ty, clients)) in listeners.iter().enumerate() {
            let l = eng.socket(*ty, &caller);
            let name = udsfs::engine::Addr::Abstract(format!("l{k}").into_bytes());
            eng.bind(&l, &name, &caller).unwrap();
            eng.listen(&l, 64, &caller).unwrap();
            let li = socks.len();
            socks.push(l);
            peer.push(li);
            handles.push(1);
            queue.push(VecDeque::new());
            for _ in 0..*clients {
                let c = eng.socket(*ty, &caller);
                eng.connect(&c, &name, &caller, None).unwrap();
                let e = Socket::peer(&c.lock()).unwrap().clone();
                let (ci, ei) = (socks.len(), socks.len() + 1);
                socks.push(c);
                socks.push(e);
                peer.push(ei);
                peer.push(ci);
                handles.push(1);
                handles.push(0);
                queue.push(VecDeque::new());
                queue.push(VecDeque::new());
                queue[li].push_back(ei);
            }
        }
        let index = socks.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        World {
            eng,
            caller,
            socks,
            peer,
            handles,
            queue,
            index,
        }
    }

    fn reachable(&self) -> BTreeSet<usize> {
        let mut seen: BTreeSet<usize> = (0..self.socks.len())
            .filter(|&i| self.handles[i] > 0)
            .collect();
        let mut todo: Vec<usize> = seen.iter().copied().collect();
        while let Some(r) = todo.pop() {
            for &x in &self.queue[r] {
                if seen.insert(x) {
                    todo.push(x);
                }
            }
        }
        seen
    }

    fn alive(&self) -> BTreeSet<usize> {
        (0..self.socks.len())
            .filter(|&i| !self.socks[i].lock().conn.is_closed())
            .collect()
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let n = self.socks.len();
        match *op {
            Op::Send { what, via } => {
                let (what, via) = (what % n, via % n);
                if self.handles[what] == 0 || self.handles[via] == 0 {
                    return Ok(());
                }
                self.eng.hold(&self.socks[what]);
                let mut rights = vec![self.socks[what].clone()];
                let sent = self.eng.sendmsg(
                    &self.socks[via],
                    SendMsg::new(b"x").rights(&mut rights),
                    &self.caller,
                    None,
                );
                for r in rights {
                    self.eng.put(&r);
                }
                match sent {
                    Ok(_) => {
                        let to = self.peer[via];
                        self.queue[to].push_back(what);
                    }
                    // A dgram socket that finds its peer dead is disconnected
                    // and its own queue purged (unix_dgram_disconnected).
                    Err(nix::errno::Errno::ECONNREFUSED) => self.queue[via].clear(),
                    Err(_) => {}
                }
            }
            Op::Recv { at } => {
                let at = at % n;
                if self.handles[at] == 0 {
                    return Ok(());
                }
                match self.eng.recvmsg(&self.socks[at], RecvFlags::new(1), None) {
                    Ok(got) => {
                        let expect = self.queue[at].pop_front();
                        let ids: Vec<usize> =
                            got.rights.iter().map(|s| self.index[&s.id]).collect();
                        prop_assert_eq!(ids, expect.into_iter().collect::<Vec<_>>());
                        for s in &got.rights {
                            self.handles[self.index[&s.id]] += 1;
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN) => {
                        prop_assert!(self.queue[at].is_empty(), "engine queue empty, model not")
                    }
                    // A pending error (ECONNRESET) is reported before the queue.
                    Err(_) => {}
                }
            }
            Op::Accept { l } => {
                let l = l % n;
                if self.handles[l] == 0 {
                    return Ok(());
                }
                if let Ok(e) = self.eng.accept(&self.socks[l], None) {
                    let expect = self.queue[l].pop_front();
                    prop_assert_eq!(Some(self.index[&e.id]), expect);
                    self.handles[self.index[&e.id]] += 1;
                }
            }
            Op::Close { s } => {
                let s = s % n;
                if self.handles[s] > 0 {
                    self.handles[s] -= 1;
                    self.eng.put(&self.socks[s]);
                }
            }
            Op::Collect => {
                while self.eng.collect() > 0 {}
                prop_assert_eq!(self.alive(), self.reachable());
            }
        }
        // Whatever happens, nothing reachable is ever freed.
        let alive = self.alive();
        for r in self.reachable() {
            prop_assert!(
                alive.contains(&r),
                "reachable socket {} was freed after {:?}",
                r,
                op
            );
        }
        Ok(())
    }

    fn close_all(&mut self) -> Result<(), TestCaseError> {
        for i in 0..self.socks.len() {
            while self.handles[i] > 0 {
                self.apply(&Op::Close { s: i })?;
            }
        }
        self.apply(&Op::Collect)?;
        prop_assert_eq!(self.eng.live_sockets(), 0);
        prop_assert_eq!(self.eng.gc.total(), 0);
        prop_assert_eq!(
            self.eng.queued.used(),
            0,
            "every queued message gave back its bytes"
        );
        Ok(())
    }
}

fn ty() -> impl Strategy<Value = SockType> {
    prop_oneof![
        Just(SockType::Stream),
        Just(SockType::Dgram),
        Just(SockType::Seqpacket)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn collector_frees_exactly_the_unreachable(
        pairs in prop::collection::vec(ty(), 1..6),
        listeners in prop::collection::vec((prop_oneof![Just(SockType::Stream), Just(SockType::Seqpacket)], 0..3usize), 0..3),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        let mut w = World::new(&pairs, &listeners);
        for op in &ops {
            w.apply(op)?;
        }
        w.apply(&Op::Collect)?;
        w.close_all()?;
    }
}

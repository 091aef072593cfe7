//! The fault timer: messages held back in time (latency, bandwidth,
//! slicer, timeout) and events that happen late (slow_close, timeout's
//! end). A held message is queued at its receiver but kept out of sight of
//! readers, poll and FIONREAD (held.rs); one timer thread per engine
//! sleeps until the next deadline of a binary heap and then makes what is
//! due visible, waking readers as a new message does. Nothing overtakes a
//! held message from the same sender, so no fault reorders a connection.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::held::Until;
use crate::engine::peer_close::Closing;
use crate::engine::socket::{Msg, RCV_SHUTDOWN, RecvQueue, SHUTDOWN_MASK, SockType, Socket, lock2};
use crate::engine::{Engine, Waiter, Wakeups};

/// What the timer does at a deadline.
enum Event {
    /// Show socket N's readers what of its held messages is due.
    Show(u64),
    /// A close reaches `peer` (slow_close, or a close behind held data).
    PeerClosed(Closing),
    /// `peer` may read no more from socket N (its shutdown of writing),
    /// once what N sent is no longer held.
    PeerShutdown(u64, Arc<Socket>),
    /// The connection between the two sockets ends with what is held
    /// (timeout): reads give EOF, writes EPIPE.
    End(Weak<Socket>, Weak<Socket>),
    /// A send from the first socket to the second (or a connect) that
    /// `full` (`refuse errno=EAGAIN`) held may go: their writers are woken,
    /// as when a reader makes room.
    LetGo(Weak<Socket>, Weak<Socket>),
    /// The connection from the first socket to the second is reset
    /// (reset_peer with a timeout), as `Engine::sever` resets it.
    Reset(Weak<Socket>, Weak<Socket>),
}

struct Entry {
    at: Instant,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Entry) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Entry) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Shared {
    heap: Mutex<BinaryHeap<Reverse<Entry>>>,
    wake: Condvar,
    stop: AtomicBool,
}

/// The engine's timer: deadlines in a heap, one thread started at the
/// first one.
#[derive(Default)]
pub struct Deferred {
    shared: Arc<Shared>,
    seq: AtomicU64,
    started: OnceLock<()>,
    engine: OnceLock<Weak<Engine>>,
    /// Sockets holding messages until their rule goes (weakly: a socket
    /// closed meanwhile frees what it held itself).
    held_forever: Mutex<Vec<Weak<Socket>>>,
    /// (sender, receiver) of sends (connects) that `full` (`refuse
    /// errno=EAGAIN`) holds while the rule stands: woken when rules go.
    let_go_with_rules: Mutex<Vec<(Weak<Socket>, Weak<Socket>)>>,
}

impl Drop for Deferred {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
    }
}

impl Deferred {
    /// Set once the engine is in its Arc (the thread holds it weakly).
    pub(crate) fn attach(&self, eng: &Arc<Engine>) {
        let _ = self.engine.set(Arc::downgrade(eng));
    }

    fn schedule(&self, at: Instant, event: Event) {
        self.started.get_or_init(|| {
            let shared = self.shared.clone();
            let eng = self.engine.get().cloned().unwrap_or_default();
            let spawned = std::thread::Builder::new()
                .name("udsfs-deferred".into())
                .spawn(move || run(&shared, &eng));
            if let Err(e) = spawned {
                log::error!("deferred faults: no timer thread: {e}");
            }
        });
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut heap = self.shared.heap.lock();
        let earliest = heap.peek().is_none_or(|Reverse(e)| at < e.at);
        heap.push(Reverse(Entry { at, seq, event }));
        drop(heap);
        if earliest {
            self.shared.wake.notify_one();
        }
    }

    /// Deadlines waiting (for tests).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.shared.heap.lock().len()
    }
}

/// The timer thread: sleeps until the earliest deadline (or a new earlier
/// one), then fires everything due.
fn run(shared: &Shared, eng: &Weak<Engine>) {
    loop {
        let due = {
            let mut heap = shared.heap.lock();
            loop {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                let now = Instant::now();
                match heap.peek() {
                    None => shared.wake.wait(&mut heap),
                    Some(Reverse(e)) if e.at <= now => break,
                    Some(Reverse(e)) => {
                        let at = e.at;
                        shared.wake.wait_until(&mut heap, at);
                    }
                }
            }
            let now = Instant::now();
            let mut due = Vec::new();
            while heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
                due.push(heap.pop().expect("peeked").0.event);
            }
            due
        };
        let Some(eng) = eng.upgrade() else {
            return;
        };
        for event in due {
            eng.fire(event);
        }
    }
}

impl Engine {
    /// Queues `m` at `rq`, the receive queue of socket `receiver`: visible
    /// now, or held until `until` (and behind any message of the same sender
    /// that is held). Returns the readers to wake.
    pub(crate) fn queue_timed(
        &self,
        receiver: u64,
        rq: &mut RecvQueue,
        m: Msg,
        stream: bool,
        until: Option<Until>,
    ) -> Vec<Waiter> {
        let behind = rq.holds_back_from(m.sender.id);
        if until.is_none() && !behind {
            return rq.push(m, stream);
        }
        let now = Instant::now();
        let until = match until {
            Some(Until::At(t)) if t <= now => None,
            u => u,
        };
        match until {
            None if !behind => return rq.push(m, stream),
            // Due now, it goes out with the message it waits behind.
            None => {
                rq.hold(m, Until::At(now));
                return Vec::new();
            }
            Some(Until::At(t)) => self.delays.schedule(t, Event::Show(receiver)),
            Some(Until::Released) => {
                if let Some(dir) = self.socks.get(receiver) {
                    let mut socks = self.delays.held_forever.lock();
                    if !socks.iter().any(|w| w.as_ptr() == Arc::as_ptr(&dir.sock)) {
                        // Closed sockets go when the list is full, so it
                        // holds about the live ones: a user's standing rule
                        // and pairs made and closed grew it for good.
                        if socks.len() == socks.capacity() {
                            socks.retain(|w| w.strong_count() > 0);
                        }
                        socks.push(Arc::downgrade(&dir.sock));
                    }
                }
            }
        }
        let until = until.expect("held");
        rq.hold(m, until);
        Vec::new()
    }

    /// The rules that hold messages until they go (timeout) went: what they
    /// held is delivered, in order.
    pub fn release_held(&self) {
        // Sends and connects held by full and refuse try again.
        let pairs = std::mem::take(&mut *self.delays.let_go_with_rules.lock());
        for (a, b) in pairs {
            self.fire(Event::LetGo(a, b));
        }
        let socks = std::mem::take(&mut *self.delays.held_forever.lock());
        let now = Instant::now();
        for sock in socks.iter().filter_map(Weak::upgrade) {
            let mut wake = Wakeups::new();
            {
                let mut st = sock.lock();
                st.queue.release_held(now);
                wake.extend(st.queue.show_due(now, sock.ty == SockType::Stream));
            }
            self.finish(wake);
        }
    }

    /// The peer's part of a close, `at` (slow_close): until then the peer
    /// reads what is queued and waits.
    pub(crate) fn close_later(&self, at: Instant, c: Closing) {
        self.delays.schedule(at, Event::PeerClosed(c));
    }

    /// `from`'s shutdown of writing reaches `peer` once what it sent is due.
    pub(crate) fn shutdown_later(&self, from: u64, peer: Arc<Socket>) {
        self.delays
            .schedule(Instant::now(), Event::PeerShutdown(from, peer));
    }

    /// Wakes the writers of `sender` and `receiver` (a send or connect
    /// blocked, a poll for POLLOUT) when what `full` or `refuse
    /// errno=EAGAIN` holds may go: at `until`, or (None) when rules go.
    pub(crate) fn wake_when_let_go(
        &self,
        sender: &Arc<Socket>,
        receiver: &Arc<Socket>,
        until: Option<Instant>,
    ) {
        let (a, b) = (Arc::downgrade(sender), Arc::downgrade(receiver));
        match until {
            Some(t) => self.delays.schedule(t, Event::LetGo(a, b)),
            None => {
                let mut pairs = self.delays.let_go_with_rules.lock();
                pairs.retain(|(a, b)| a.strong_count() > 0 && b.strong_count() > 0);
                if !pairs.iter().any(|(x, y)| x.ptr_eq(&a) && y.ptr_eq(&b)) {
                    pairs.push((a, b));
                }
            }
        }
    }

    /// The connection of `sender` and `receiver` is reset at `at`
    /// (reset_peer timeout=T). Held weakly, as for `end_later`.
    pub(crate) fn reset_later(&self, at: Instant, sender: &Arc<Socket>, receiver: &Arc<Socket>) {
        let (a, b) = (Arc::downgrade(sender), Arc::downgrade(receiver));
        self.delays.schedule(at, Event::Reset(a, b));
    }

    /// The connection of `a` and `b` ends at `at` (timeout).
    /// (Held weakly: a socket closed meanwhile ends nothing, and a new
    /// socket given its number is not touched.)
    pub(crate) fn end_later(&self, at: Instant, a: &Arc<Socket>, b: &Arc<Socket>) {
        let (a, b) = (Arc::downgrade(a), Arc::downgrade(b));
        self.delays.schedule(at, Event::End(a, b));
    }

    fn fire(&self, event: Event) {
        let mut wake = Wakeups::new();
        match event {
            Event::Show(id) => {
                if let Some(dir) = self.socks.get(id) {
                    let mut st = dir.sock.lock();
                    let stream = dir.sock.ty == SockType::Stream;
                    let shown = st.queue.msgs().len();
                    wake.extend(st.queue.show_due(Instant::now(), stream));
                    if st.queue.msgs().len() > shown {
                        wake.sigio(&st);
                    }
                }
            }
            Event::PeerClosed(c) => {
                // A close never overtakes the data sent before it: it
                // comes again once that data is due.
                let wait = c.peer.lock().queue.held().last_from(c.closed);
                match wait {
                    Some(until) => self.close_later(retry_at(until), c),
                    None => self.peer_closed(&c, &mut wake),
                }
            }
            Event::PeerShutdown(from, peer) => {
                let mut pt = peer.lock();
                match pt.queue.held().last_from(from) {
                    Some(until) => {
                        drop(pt);
                        self.delays
                            .schedule(retry_at(until), Event::PeerShutdown(from, peer));
                    }
                    None => {
                        pt.shutdown |= RCV_SHUTDOWN;
                        wake.sigio(&pt);
                        wake.extend(pt.queue.readers().take());
                        wake.extend(pt.queue.writers().take());
                    }
                }
            }
            Event::End(a, b) => {
                let (Some(a), Some(b)) = (a.upgrade(), b.upgrade()) else {
                    return;
                };
                let mut dropped = Vec::new();
                if let Ok((mut at, mut bt)) = lock2(&a, &b) {
                    for (st, id) in [(&mut at, a.id), (&mut bt, b.id)] {
                        if st.conn.is_closed() {
                            continue;
                        }
                        st.shutdown = SHUTDOWN_MASK;
                        dropped.extend(st.queue.drain_held().into_iter().map(|m| (id, m)));
                        wake.extend(st.queue.readers().take());
                        wake.extend(st.queue.writers().take());
                    }
                }
                for (id, m) in dropped {
                    self.dequeued(id, m, &mut wake);
                }
            }
            Event::Reset(a, b) => {
                let (Some(a), Some(b)) = (a.upgrade(), b.upgrade()) else {
                    return;
                };
                // Still each other's peer (a socket closed since is not).
                let peers = Socket::peer(&a.lock()).is_some_and(|p| p.id == b.id);
                if peers {
                    self.sever(&a, &b, true);
                }
            }
            Event::LetGo(a, b) => {
                for s in [a, b].iter().filter_map(Weak::upgrade) {
                    wake.extend(s.lock().queue.writers().take());
                }
            }
        }
        self.finish(wake);
    }
}

/// When to look again at a close or shutdown waiting behind held data:
/// when that data is due, or now and then while a rule holds it.
fn retry_at(until: Until) -> Instant {
    match until {
        Until::At(t) => t,
        Until::Released => Instant::now() + std::time::Duration::from_millis(50),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::SendMsg;
    use crate::engine::socket::SockType;
    use crate::engine::tests::{engine, root};

    fn pair(eng: &Engine, ty: SockType) -> (Arc<Socket>, Arc<Socket>) {
        eng.socketpair(ty, &root())
    }

    fn held_msg(sender: &Arc<Socket>, byte: u8) -> Msg {
        Msg {
            data: vec![byte],
            off: 0,
            from: None,
            creds: None,
            sender: sender.clone(),
            charge: 0,
            charged_uid: 0,
            rights: Vec::new(),
            rights_uid: 0,
            oob: false,
            files: Vec::new(),
            pidfd: None,
            ctrunc: false,
            piece_end: false,
            stamp: 0,
            msg_id: 0,
            origin: Default::default(),
        }
    }

    #[test]
    fn closed_sockets_leave_the_list_of_those_holding_until_rules_go() {
        // A user's standing `timeout` rule held one message of each of the
        // pairs it made and closed: the list kept every one for good (and
        // was scanned whole at each held message).
        let eng = engine();
        eng.faults.add(
            crate::fault::Rule::parse("uid 0 timeout timeout=0").unwrap(),
            0,
        );
        // Their closes reach the peers through the timer thread (data held):
        // four rounds, each let finish, so the sockets are gone.
        for _ in 0..4 {
            for _ in 0..1000 {
                let (a, b) = pair(&eng, SockType::Stream);
                assert_eq!(eng.sendmsg(&a, SendMsg::new(b"x"), &root(), None), Ok(1));
                eng.put(&a);
                eng.put(&b);
            }
            let t = std::time::Instant::now();
            let live = || {
                let socks = eng.delays.held_forever.lock();
                socks.iter().filter(|w| w.strong_count() > 0).count()
            };
            while live() > 0 && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let listed = eng.delays.held_forever.lock().len();
        assert!(listed <= 1024, "4000 closed sockets: {listed} listed");
    }

    #[test]
    fn later_messages_wait_behind_a_held_one_and_come_at_its_deadline() {
        let eng = engine();
        let (a, b) = pair(&eng, SockType::Stream);
        let t0 = Instant::now();
        let soon = Until::At(t0 + Duration::from_millis(80));
        {
            let mut st = b.lock();
            let m = held_msg(&a, 1);
            assert!(
                eng.queue_timed(b.id, &mut st.queue, m, true, Some(soon))
                    .is_empty()
            );
            // Due at once, but behind the held one.
            let m = held_msg(&a, 2);
            eng.queue_timed(b.id, &mut st.queue, m, true, None);
            assert_eq!(st.queue.msgs().len(), 0);
            assert_eq!(st.queue.bytes(), 0);
            assert_eq!(st.queue.held().len(), 2);
        }
        assert_eq!(eng.delays.pending(), 1);
        while b.lock().queue.msgs().len() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(2), "never shown");
            std::thread::sleep(Duration::from_millis(1));
        }
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(80), "{waited:?}");
        assert!(waited < Duration::from_millis(200), "{waited:?}");
        let st = b.lock();
        let order: Vec<u8> = st.queue.msgs().iter().map(|m| m.data[0]).collect();
        assert_eq!(order, [1, 2]);
        assert!(st.queue.held().is_empty());
    }

    #[test]
    fn an_earlier_deadline_wakes_the_sleeping_timer() {
        let eng = engine();
        let (a, b) = pair(&eng, SockType::Dgram);
        let (c, d) = pair(&eng, SockType::Dgram);
        let t0 = Instant::now();
        {
            let mut st = b.lock();
            let m = held_msg(&a, 1);
            let late = Until::At(t0 + Duration::from_secs(5));
            eng.queue_timed(b.id, &mut st.queue, m, false, Some(late));
        }
        std::thread::sleep(Duration::from_millis(20));
        {
            let mut st = d.lock();
            let m = held_msg(&c, 2);
            let soon = Until::At(t0 + Duration::from_millis(50));
            eng.queue_timed(d.id, &mut st.queue, m, false, Some(soon));
        }
        while d.lock().queue.msgs().is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(1), "timer overslept");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(b.lock().queue.held().len(), 1);
    }

    #[test]
    fn messages_held_until_released_come_in_order_when_the_rule_goes() {
        let eng = engine();
        let (a, b) = pair(&eng, SockType::Seqpacket);
        {
            let mut st = b.lock();
            for byte in 1..=3 {
                let m = held_msg(&a, byte);
                let until = (byte < 3).then_some(Until::Released);
                eng.queue_timed(b.id, &mut st.queue, m, false, until);
            }
            assert_eq!(st.queue.held().len(), 3);
        }
        std::thread::sleep(Duration::from_millis(30));
        assert!(b.lock().queue.msgs().is_empty());
        eng.release_held();
        let st = b.lock();
        let order: Vec<u8> = st.queue.msgs().iter().map(|m| m.data[0]).collect();
        assert_eq!(order, [1, 2, 3]);
    }

    #[test]
    fn closing_the_receiver_frees_what_it_held() {
        let eng = engine();
        let (a, b) = pair(&eng, SockType::Stream);
        let r = eng.sendmsg(&a, SendMsg::new(b"x"), &root(), None);
        assert_eq!(r, Ok(1));
        let charged = a.wmem();
        assert!(charged > 0);
        {
            let mut st = b.lock();
            let m = st.queue.pop().expect("queued");
            let until = Some(Until::At(Instant::now() + Duration::from_secs(60)));
            eng.queue_timed(b.id, &mut st.queue, m, true, until);
        }
        eng.put(&b);
        assert_eq!(a.wmem(), 0);
    }
}

//! The timed faults (latency, bandwidth, slicer, timeout, slow_close, and
//! the timers of reset_peer and full) on a real engine with real threads: what each does to the time a message
//! becomes readable, and that bytes and order never change.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use udsfs::engine::{Caller, Config, Engine, RecvFlags, SendMsg, SockType, Socket, ThreadWaiter};
use udsfs::engine::{Waiter, Wake};
use udsfs::fault::{Rule, RuleId};

fn engine() -> Arc<Engine> {
    Engine::new(Config::default())
}

fn me() -> Caller {
    Caller::current()
}

fn rule(eng: &Engine, line: &str) -> RuleId {
    eng.faults.add(Rule::parse(line).expect(line), 0)
}

/// A new engine with a socketpair of `ty` and one rule: `line` with `{a}` and `{b}`
/// made the pair's socket numbers.
fn faulted_pair(ty: SockType, line: &str) -> (Arc<Engine>, Arc<Socket>, Arc<Socket>, RuleId) {
    let eng = engine();
    let (a, b) = eng.socketpair(ty, &me());
    let line = line
        .replace("{a}", &a.id.to_string())
        .replace("{b}", &b.id.to_string());
    let id = rule(&eng, &line);
    (eng, a, b, id)
}

/// A blocking read, as a parked FUSE read retries on its wake-up.
fn recv(eng: &Engine, s: &Arc<Socket>, len: usize) -> Result<Vec<u8>, Errno> {
    let tw = ThreadWaiter::new();
    let w: Waiter = tw.clone();
    loop {
        match eng.recvmsg(s, RecvFlags::new(len), Some(&w)) {
            Err(Errno::EAGAIN) => tw.wait(),
            r => return r.map(|r| r.data),
        }
    }
}

/// A blocking send of all of `data`.
fn send_all(eng: &Engine, s: &Arc<Socket>, mut data: &[u8]) -> Result<(), Errno> {
    let tw = ThreadWaiter::new();
    let w: Waiter = tw.clone();
    while !data.is_empty() {
        match eng.sendmsg(s, SendMsg::new(data), &me(), Some(&w)) {
            Err(Errno::EAGAIN) => tw.wait(),
            Err(e) => return Err(e),
            Ok(n) => data = &data[n..],
        }
    }
    Ok(())
}

fn try_recv(eng: &Engine, s: &Arc<Socket>) -> Result<Vec<u8>, Errno> {
    eng.recvmsg(s, RecvFlags::new(65536), None).map(|r| r.data)
}

/// `data` sent from `from` is at `to` at once: no rule holds it.
fn passes_at_once(eng: &Engine, from: &Arc<Socket>, to: &Arc<Socket>, data: &[u8]) {
    send_all(eng, from, data).unwrap();
    assert_eq!(try_recv(eng, to).unwrap(), data);
}

#[test]
fn latency_delays_each_way_of_a_ping_pong() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up latency latency=40");
    let echo = {
        let (eng, b) = (eng.clone(), b.clone());
        std::thread::spawn(move || {
            for _ in 0..5 {
                let got = recv(&eng, &b, 100).unwrap();
                send_all(&eng, &b, &got).unwrap();
            }
        })
    };
    for i in 0..5u8 {
        let t = Instant::now();
        send_all(&eng, &a, &[i; 10]).unwrap();
        // Not readable before its time, by poll or FIONREAD either.
        let got = recv(&eng, &a, 100).unwrap();
        let rtt = t.elapsed();
        assert_eq!(got, [i; 10]);
        assert!(rtt >= Duration::from_millis(40), "round trip {rtt:?}");
        assert!(rtt < Duration::from_millis(60), "round trip {rtt:?}");
    }
    echo.join().unwrap();
}

#[test]
fn a_held_message_is_invisible_to_poll_and_fionread() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} latency latency=100");
    send_all(&eng, &a, b"hello").unwrap();
    let pollin = libc::POLLIN as u32;
    assert_eq!(eng.poll(&b, None) & pollin, 0);
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    // The sender is charged as for any unread data.
    assert!(a.wmem() > 0);
    let t = Instant::now();
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"hello");
    assert!(t.elapsed() >= Duration::from_millis(80));
    assert_ne!(eng.poll(&b, None) & libc::POLLOUT as u32, 0);
}

#[test]
fn jitter_never_reorders_a_stream() {
    let (eng, a, b, _) = faulted_pair(
        SockType::Stream,
        "socket {b} latency latency=20 jitter=19 seed=3",
    );
    let mut want = Vec::new();
    for i in 0..50u8 {
        send_all(&eng, &a, &[i; 3]).unwrap();
        want.extend([i; 3]);
    }
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend(recv(&eng, &b, 4096).unwrap());
    }
    assert_eq!(got, want);
}

#[test]
fn a_dgram_sender_not_hit_is_not_held_behind_another() {
    let eng = engine();
    let [a, b, c] = [(); 3].map(|_| eng.socket(SockType::Dgram, &me()));
    let addr = udsfs::engine::Addr::Abstract(b"fault_timed_dgram".to_vec());
    eng.bind(&b, &addr, &me()).unwrap();
    eng.connect(&a, &addr, &me(), None).unwrap();
    rule(&eng, &format!("socket {} down latency latency=200", a.id));
    eng.sendmsg(&a, SendMsg::new(b"slow"), &me(), None).unwrap();
    eng.sendmsg(&c, SendMsg::new(b"fast").to(&addr), &me(), None)
        .unwrap();
    assert_eq!(try_recv(&eng, &b).unwrap(), b"fast");
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"slow");
}

#[test]
fn bandwidth_paces_a_transfer_at_the_rate() {
    // 1000 KB/s: 1 MiB in about 1.05 s.
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up bandwidth rate=1000");
    let data: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    let t = Instant::now();
    let sender = {
        let (eng, a, data) = (eng.clone(), a.clone(), data.clone());
        std::thread::spawn(move || send_all(&eng, &a, &data).unwrap())
    };
    let mut got = Vec::new();
    while got.len() < data.len() {
        got.extend(recv(&eng, &b, 65536).unwrap());
    }
    let took = t.elapsed().as_secs_f64();
    sender.join().unwrap();
    assert!(got == data, "bytes changed");
    let want = data.len() as f64 / 1e6;
    assert!(
        (took - want).abs() < want * 0.2,
        "took {took} s, want {want} s"
    );
}

#[test]
fn slicer_delivers_a_write_in_pieces_in_time() {
    let (eng, a, b, _) = faulted_pair(
        SockType::Stream,
        "socket {b} up slicer average_size=64 size_variation=32 delay=10000 seed=5",
    );
    let data: Vec<u8> = (0..1500u32).map(|i| (i % 253) as u8).collect();
    let t = Instant::now();
    send_all(&eng, &a, &data).unwrap();
    let mut got = Vec::new();
    let mut reads = 0;
    while got.len() < data.len() {
        let piece = recv(&eng, &b, 65536).unwrap();
        assert!(piece.len() <= 96, "a read of {} bytes", piece.len());
        got.extend(piece);
        reads += 1;
    }
    assert!(got == data, "bytes changed");
    // At least 1500 / 96 pieces, 10 ms apart.
    assert!(reads >= 16, "{reads} reads");
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn timeout_holds_everything_then_ends_the_connection() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up timeout timeout=150");
    let t = Instant::now();
    send_all(&eng, &a, b"never").unwrap();
    send_all(&eng, &a, b"seen").unwrap();
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    // EOF once the connection ends, nothing of what was held.
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(took < Duration::from_millis(400), "{took:?}");
    assert_eq!(
        eng.sendmsg(&a, SendMsg::new(b"x"), &me(), None),
        Err(Errno::EPIPE)
    );
    assert_eq!(a.wmem(), 0, "the held data's charge went back");
}

#[test]
fn deleting_a_timeout_delivers_what_it_held_in_order() {
    let (eng, a, b, id) = faulted_pair(SockType::Seqpacket, "socket {b} up timeout");
    for m in [&b"one"[..], b"two"] {
        eng.sendmsg(&a, SendMsg::new(m), &me(), None).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    eng.faults.del(id, 0).unwrap();
    // Not yet queued: goes behind what was held.
    eng.sendmsg(&a, SendMsg::new(b"three"), &me(), None)
        .unwrap();
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    eng.release_held();
    for m in [&b"one"[..], b"two", b"three"] {
        assert_eq!(try_recv(&eng, &b).unwrap(), m);
    }
}

#[test]
fn deleting_a_latency_rule_restores_what_is_sent_next() {
    let (eng, a, b, id) = faulted_pair(SockType::Stream, "socket {b} latency latency=100");
    send_all(&eng, &a, b"late").unwrap();
    eng.faults.del(id, 0).unwrap();
    send_all(&eng, &a, b"+").unwrap();
    // Never before what was sent earlier.
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"late+");
    passes_at_once(&eng, &a, &b, b"now");
}

#[test]
fn slow_close_shows_eof_only_after_the_delay() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {a} slow_close delay=150");
    send_all(&eng, &a, b"bye").unwrap();
    let t = Instant::now();
    eng.put(&a);
    assert_eq!(try_recv(&eng, &b).unwrap(), b"bye");
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    // Its writes still succeed, as to a peer that is alive.
    assert_eq!(eng.sendmsg(&b, SendMsg::new(b"??"), &me(), None), Ok(2));
    assert!(b.wmem() > 0);
    assert_eq!(recv(&eng, &b, 100), Err(Errno::ECONNRESET));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(took < Duration::from_millis(400), "{took:?}");
    // What it wrote meanwhile went unread, as at a close with data unread.
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"");
    assert_eq!(b.wmem(), 0);
    assert_eq!(
        eng.sendmsg(&b, SendMsg::new(b"x"), &me(), None),
        Err(Errno::EPIPE)
    );
}

#[test]
fn slow_close_without_writes_is_a_plain_eof() {
    let (eng, a, b, _) = faulted_pair(SockType::Seqpacket, "socket {a} slow_close delay=100");
    let t = Instant::now();
    eng.put(&a);
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"");
    assert!(t.elapsed() >= Duration::from_millis(100));
}

#[test]
fn a_close_never_overtakes_held_data() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up latency latency=100");
    send_all(&eng, &a, b"last words").unwrap();
    eng.put(&a);
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"last words");
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"");
}

/// A reader that gives up (as a signalled one does) is not kept waiting
/// by a held message: its waiter is simply dropped at the wake-up.
#[test]
fn a_reader_that_stops_waiting_is_not_held() {
    struct Gone;
    impl Wake for Gone {
        fn wake(self: Arc<Self>) {}
        fn is_live(&self) -> bool {
            false
        }
    }
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} latency latency=50");
    send_all(&eng, &a, b"x").unwrap();
    let w: Waiter = Arc::new(Gone);
    assert_eq!(
        eng.recvmsg(&b, RecvFlags::new(10), Some(&w)).err(),
        Some(Errno::EAGAIN)
    );
    assert_eq!(recv(&eng, &b, 10).unwrap(), b"x");
}

#[test]
fn a_socket_rule_goes_with_its_socket() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} latency latency=1000");
    eng.put(&b);
    eng.put(&a);
    assert!(eng.faults.list(0).is_empty());
    // A new socket that may get the same number is not delayed.
    let (c, d) = eng.socketpair(SockType::Stream, &me());
    passes_at_once(&eng, &c, &d, b"now");
}

#[test]
fn a_name_rule_covers_the_connections_made_to_it() {
    let eng = engine();
    let srv = eng.socket(SockType::Stream, &me());
    let name = udsfs::engine::Addr::Abstract(b"fault_timed_srv".to_vec());
    eng.bind(&srv, &name, &me()).unwrap();
    eng.listen(&srv, 8, &me()).unwrap();
    rule(&eng, "name @fault_timed_srv up latency latency=60");
    let cli = eng.socket(SockType::Stream, &me());
    eng.connect(&cli, &name, &me(), None).unwrap();
    let conn = eng.accept(&srv, None).unwrap();
    let t = Instant::now();
    send_all(&eng, &cli, b"request").unwrap();
    assert_eq!(try_recv(&eng, &conn), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &conn, 100).unwrap(), b"request");
    assert!(
        t.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
    // Up only: the reply is not delayed.
    passes_at_once(&eng, &conn, &cli, b"reply");
}

#[test]
fn a_shutdown_never_overtakes_held_data() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up latency latency=80");
    send_all(&eng, &a, b"tail").unwrap();
    eng.shutdown(&a, udsfs::engine::socket::SEND_SHUTDOWN)
        .unwrap();
    assert_eq!(try_recv(&eng, &b), Err(Errno::EAGAIN));
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"tail");
    assert_eq!(recv(&eng, &b, 100).unwrap(), b"");
}

#[test]
fn reset_peer_with_a_timeout_delivers_then_resets_no_earlier_than_it() {
    let (eng, a, b, _) = faulted_pair(SockType::Stream, "socket {b} up reset_peer timeout=150");
    let t0 = Instant::now();
    send_all(&eng, &a, b"request").unwrap();
    // The message that starts the timer is delivered, and the connection
    // works until the timeout.
    assert_eq!(try_recv(&eng, &b), Ok(b"request".to_vec()));
    send_all(&eng, &b, b"reply").unwrap();
    assert_eq!(try_recv(&eng, &a), Ok(b"reply".to_vec()));
    send_all(&eng, &a, b"more").unwrap();
    let reset = loop {
        match try_recv(&eng, &a) {
            Err(Errno::EAGAIN) => {
                assert!(t0.elapsed() < Duration::from_secs(3), "never reset");
                std::thread::sleep(Duration::from_millis(1));
            }
            r => break r,
        }
    };
    assert_eq!(reset, Err(Errno::ECONNRESET));
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(150),
        "reset after {waited:?}"
    );
    assert_eq!(try_recv(&eng, &a), Ok(Vec::new()));
    assert_eq!(
        eng.sendmsg(&a, SendMsg::new(b"x"), &me(), None),
        Err(Errno::EPIPE)
    );
    assert_eq!(
        eng.sendmsg(&b, SendMsg::new(b"x"), &me(), None),
        Err(Errno::EPIPE)
    );
}

#[test]
fn full_with_a_timeout_holds_each_message_hit_then_wakes_its_sender() {
    let (eng, a, b, id) =
        faulted_pair(SockType::Seqpacket, "socket {b} up full timeout=80 times=2");
    let out = |s: &Arc<Socket>| eng.poll(s, None) & libc::POLLOUT as u32 != 0;
    assert!(!out(&a), "a sure hit: no POLLOUT before the first send");
    for i in 0..3u8 {
        let t = Instant::now();
        let mut tries = 0;
        send_all_counting(&eng, &a, &[i], &mut tries);
        let waited = t.elapsed();
        if i < 2 {
            assert_eq!(tries, 1, "message {i}: one EAGAIN, then woken once");
            assert!(
                waited >= Duration::from_millis(80),
                "message {i}: {waited:?}"
            );
        } else {
            assert_eq!(tries, 0, "message {i}: the rule is used up");
        }
    }
    assert!(out(&a), "used up: POLLOUT again");
    for i in 0..3u8 {
        assert_eq!(try_recv(&eng, &b), Ok(vec![i]));
    }
    let listed = eng.faults.list(0);
    let l = listed.iter().find(|l| l.id == id).unwrap();
    assert_eq!((l.matched, l.injected), (3, 2));
}

/// `send_all`, counting the sends that found no room.
fn send_all_counting(eng: &Engine, s: &Arc<Socket>, data: &[u8], tries: &mut u32) {
    let tw = ThreadWaiter::new();
    let w: Waiter = tw.clone();
    loop {
        match eng.sendmsg(s, SendMsg::new(data), &me(), Some(&w)) {
            Err(Errno::EAGAIN) => {
                *tries += 1;
                tw.wait();
            }
            r => {
                assert_eq!(r, Ok(data.len()));
                return;
            }
        }
    }
}

//! Many threads racing bind, connect, accept, send (with and without
//! passed sockets), receive, close and collections on one engine. It must
//! finish (no deadlock), and once every handle is closed and a collection
//! has run, no socket may be left. A worker that does not stop by the
//! deadline fails the test with what each stuck worker was doing, instead
//! of hanging in a join.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use udsfs::engine::{Addr, Caller, Config, Engine, RecvFlags, SendMsg, SockType, Socket};

/// A small deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

const TYPES: [SockType; 3] = [SockType::Stream, SockType::Dgram, SockType::Seqpacket];

const WORKERS: usize = 8;
/// How long the workers run.
const RUN: Duration = Duration::from_secs(3);
/// How long stopped workers may take to finish their last operation: far
/// beyond any operation's time on a loaded machine, so only a deadlock
/// reaches it.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// What each worker is doing, for the report when one is stuck.
const OP_NAMES: [&str; 12] = [
    "socket",
    "socket",
    "socketpair",
    "bind+listen",
    "connect",
    "accept",
    "send_msg",
    "send_msg",
    "recv",
    "put",
    "collect/shutdown",
    "idle",
];
const IDLE: usize = OP_NAMES.len() - 1;

#[test]
fn racing_operations_neither_deadlock_nor_leak() {
    let eng = Engine::new(Config {
        hash_buckets: 8,
        ..Config::default()
    });
    // Shared handles: any thread may use or close any of them.
    let pool: Arc<Mutex<Vec<Arc<Socket>>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let doing: Arc<Vec<AtomicUsize>> =
        Arc::new((0..WORKERS).map(|_| AtomicUsize::new(IDLE)).collect());
    let (done_tx, done_rx) = mpsc::channel::<(usize, Option<u64>)>();
    for t in 0..WORKERS {
        let (eng, pool, stop, doing, done_tx) = (
            eng.clone(),
            pool.clone(),
            stop.clone(),
            doing.clone(),
            done_tx.clone(),
        );
        std::thread::spawn(move || {
            // Reports a panic at once instead of leaving it to the deadline.
            struct Report(mpsc::Sender<(usize, Option<u64>)>, usize);
            impl Drop for Report {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        let _ = self.0.send((self.1, None));
                    }
                }
            }
            let report = Report(done_tx, t);
            let c = Caller::current();
            let mut rng = Rng(0x9e3779b97f4a7c15 ^ (t as u64 + 1));
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                ops += 1;
                let op = rng.next() % 11;
                doing[t].store(op, Ordering::Relaxed);
                let pick = |rng: &mut Rng, pool: &Mutex<Vec<Arc<Socket>>>| {
                    let p = pool.lock();
                    (!p.is_empty()).then(|| p[rng.next() % p.len()].clone())
                };
                let name = Addr::Abstract(format!("n{}", rng.next() % 16).into_bytes());
                match op {
                    0 | 1 => {
                        let s = eng.socket(TYPES[rng.next() % 3], &c);
                        pool.lock().push(s);
                    }
                    2 => {
                        let (a, b) = eng.socketpair(TYPES[rng.next() % 3], &c);
                        pool.lock().extend([a, b]);
                    }
                    3 => {
                        if let Some(s) = pick(&mut rng, &pool) {
                            let _ = eng.bind(&s, &name, &c);
                            let _ = eng.listen(&s, 4, &c);
                        }
                    }
                    4 => {
                        if let Some(s) = pick(&mut rng, &pool) {
                            let _ = eng.connect(&s, &name, &c, None);
                        }
                    }
                    5 => {
                        if let Some(s) = pick(&mut rng, &pool)
                            && let Ok(a) = eng.accept(&s, None)
                        {
                            pool.lock().push(a);
                        }
                    }
                    6 | 7 => {
                        if let (Some(s), Some(x)) = (pick(&mut rng, &pool), pick(&mut rng, &pool)) {
                            let mut rights = Vec::new();
                            if rng.next().is_multiple_of(2) && eng.try_hold(&x) {
                                rights.push(x);
                            }
                            let to = rng.next().is_multiple_of(4).then_some(&name);
                            let _ = eng.sendmsg(
                                &s,
                                SendMsg::new(b"payload").to_opt(to).rights(&mut rights),
                                &c,
                                None,
                            );
                            for r in rights {
                                eng.put(&r);
                            }
                        }
                    }
                    8 => {
                        if let Some(s) = pick(&mut rng, &pool)
                            && let Ok(got) = eng.recvmsg(&s, RecvFlags::new(64), None)
                        {
                            pool.lock().extend(got.rights);
                        }
                    }
                    9 => {
                        let victim = {
                            let mut p = pool.lock();
                            if p.is_empty() {
                                None
                            } else {
                                let i = rng.next() % p.len();
                                Some(p.swap_remove(i))
                            }
                        };
                        if let Some(s) = victim {
                            eng.put(&s);
                        }
                    }
                    _ => {
                        if rng.next().is_multiple_of(8) {
                            eng.collect();
                        } else if let Some(s) = pick(&mut rng, &pool) {
                            let _ = eng.shutdown(&s, 1 + (rng.next() % 3) as u8);
                        }
                    }
                }
            }
            doing[t].store(IDLE, Ordering::Relaxed);
            let _ = report.0.send((t, Some(ops)));
        });
    }
    drop(done_tx);
    std::thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + STOP_DEADLINE;
    let mut finished = [false; WORKERS];
    let mut total = 0;
    for _ in 0..WORKERS {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok((t, Some(ops))) => {
                finished[t] = true;
                total += ops;
            }
            Ok((t, None)) => panic!(
                "worker {t} panicked in {}",
                OP_NAMES[doing[t].load(Ordering::Relaxed)]
            ),
            Err(_) => {
                let stuck: Vec<String> = (0..WORKERS)
                    .filter(|&t| !finished[t])
                    .map(|t| {
                        format!(
                            "worker {t} in {}",
                            OP_NAMES[doing[t].load(Ordering::Relaxed)]
                        )
                    })
                    .collect();
                panic!(
                    "workers did not stop within {STOP_DEADLINE:?} (deadlock?): {}",
                    stuck.join(", ")
                );
            }
        }
    }
    for s in pool.lock().drain(..) {
        eng.put(&s);
    }
    while eng.collect() > 0 {}
    println!(
        "{total} operations by {WORKERS} threads; {} sockets left",
        eng.live_sockets()
    );
    assert_eq!(eng.live_sockets(), 0);
    assert_eq!(eng.sockets.used(), 0, "every socket gave back its count");
    assert_eq!(
        eng.queued.used(),
        0,
        "every queued message gave back its bytes"
    );
    assert_eq!(eng.gc.total(), 0);
}

//! Many threads racing bind, connect, accept, send (with and without
//! passed sockets), receive, close and collections on one engine. It must
//! finish (no deadlock), and once every handle is closed and a collection
//! has run, no socket may be left.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use udsfs::engine::{Addr, Caller, Config, Engine, SockType, Socket};

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

#[test]
fn racing_operations_neither_deadlock_nor_leak() {
    let eng = Engine::new(Config {
        hash_buckets: 8,
        ..Config::default()
    });
    // Shared handles: any thread may use or close any of them.
    let pool: Arc<Mutex<Vec<Arc<Socket>>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..8u64 {
        let (eng, pool, stop) = (eng.clone(), pool.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let c = Caller::current();
            let mut rng = Rng(0x9e3779b97f4a7c15 ^ (t + 1));
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                ops += 1;
                let pick = |rng: &mut Rng, pool: &Mutex<Vec<Arc<Socket>>>| {
                    let p = pool.lock();
                    (!p.is_empty()).then(|| p[rng.next() % p.len()].clone())
                };
                let name = Addr::Abstract(format!("n{}", rng.next() % 16).into_bytes());
                match rng.next() % 11 {
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
                            let _ = eng.send_msg(&s, b"payload", to, None, &mut rights, &c, None);
                            for r in rights {
                                eng.put(&r);
                            }
                        }
                    }
                    8 => {
                        if let Some(s) = pick(&mut rng, &pool)
                            && let Ok(got) = eng.recv(&s, 64, None)
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
            ops
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let mut total = 0;
    for th in threads {
        total += th.join().expect("worker panicked");
    }
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "workers did not stop: deadlock?"
    );
    for s in pool.lock().drain(..) {
        eng.put(&s);
    }
    while eng.collect() > 0 {}
    println!(
        "{total} operations by 8 threads; {} sockets left",
        eng.live_sockets()
    );
    assert_eq!(eng.live_sockets(), 0);
    assert_eq!(eng.sockets.used(), 0, "every socket gave back its count");
    assert_eq!(eng.gc.total(), 0);
}

//! Autobind exhaustion on the engine, in-process: every one of the
//! 2^20 names of one type can be taken, the next autobind gets ENOSPC, and
//! another type and another network namespace still have their own space. Also reports the engine's memory
//! per idle socket.

use std::sync::Arc;

use nix::errno::Errno;
use udsfs::engine::{Caller, Config, Engine, SockType, Socket};

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn autobind_takes_all_2_pow_20_names_then_enospc() {
    let e = Engine::new(Config {
        background_gc: false,
        ..Config::default()
    });
    let c = Caller::current();
    const N: usize = 1 << 20;
    let before = rss_bytes();
    let mut socks: Vec<Arc<Socket>> = Vec::with_capacity(N);
    for i in 0..N {
        let s = e.socket(SockType::Dgram, &c);
        if let Err(err) = e.autobind(&s, &c) {
            panic!("autobind {i} failed: {err}");
        }
        socks.push(s);
    }
    let after = rss_bytes();
    let extra = e.socket(SockType::Dgram, &c);
    assert_eq!(e.autobind(&extra, &c), Err(Errno::ENOSPC));
    // Another type has its own 2^20 names.
    let other = e.socket(SockType::Stream, &c);
    assert_eq!(e.autobind(&other, &c), Ok(()));
    // Another network namespace has its own 2^20 names of every type.
    let elsewhere = Caller::current().in_netns(1);
    let other_ns = e.socket(SockType::Dgram, &elsewhere);
    assert_eq!(e.autobind(&other_ns, &elsewhere), Ok(()));
    // Freeing one name makes exactly that one available again.
    let freed = socks.pop().unwrap();
    let name = e.status(&freed);
    e.put(&freed);
    assert_eq!(e.autobind(&extra, &c), Ok(()));
    let local = |st: &str| {
        st.lines()
            .find(|l| l.starts_with("local="))
            .map(str::to_owned)
    };
    assert_eq!(local(&e.status(&extra)), local(&name));
    println!(
        "engine memory per idle autobound socket: {} bytes ({} sockets, RSS {} -> {} MiB)",
        (after - before) / N,
        N,
        before >> 20,
        after >> 20
    );
    for s in socks.iter().chain([&extra, &other, &other_ns]) {
        e.put(s);
    }
    assert_eq!(e.live_sockets(), 0);
}

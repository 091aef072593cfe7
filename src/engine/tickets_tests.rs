//! Attacks on accept tickets (tickets.rs): each fails without its guard.

use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::tests::{engine, root};
use super::tickets::{Holder, MAX, PER_USER, Tickets};
use super::*;

fn holder(tid: u32, started: u64, uid: u32) -> Holder {
    Holder {
        tid,
        started: Some(started),
        uid,
    }
}

/// An engine (kept for the test's length), a listener root made, a ticket desk with
/// no tickets yet, and the moment the tickets are asked at.
fn desk() -> (Arc<Engine>, Arc<Socket>, Tickets, Instant) {
    let (e, c) = (engine(), root());
    let l = e.socket(SockType::Stream, &c);
    e.bind(&l, &Addr::Abstract(b"tickets".to_vec()), &c)
        .unwrap();
    e.listen(&l, 4, &c).unwrap();
    (e, l, Tickets::default(), Instant::now())
}

fn seq_of(t: &Tickets, secret: u64, h: Holder) -> u64 {
    t.find(secret, h).expect("the holder finds its ticket")
}

/// A ticket issued to `h` on `l`: its secret and the number its holder opens.
fn issued(t: &Tickets, l: &Arc<Socket>, h: Holder, now: Instant) -> (u64, u64) {
    let secret = t.issue(l, h, now).unwrap();
    (secret, seq_of(t, secret, h))
}

#[test]
fn another_user_or_thread_cannot_take_a_ticket_and_the_holder_still_can() {
    let (_e, l, t, now) = desk();
    let www = holder(100, 7, 33);
    let (secret, seq) = issued(&t, &l, www, now);
    // A second user who learnt the number (or guessed it).
    let nobody = holder(100, 7, 65534);
    println!("tried: lookup and open of www-data's ticket as uid 65534");
    assert_eq!(t.find(secret, nobody), None, "looked up by another user");
    assert_eq!(t.take(seq, nobody, now).err(), Some(Errno::ENOENT));
    // A forked child: same user, another thread.
    let child = holder(101, 9, 33);
    assert_eq!(t.find(secret, child), None, "looked up by a forked child");
    assert_eq!(t.take(seq, child, now).err(), Some(Errno::ENOENT));
    // A reused thread id: same id and user, another start time.
    let reused = holder(100, 8, 33);
    assert_eq!(
        t.take(seq, reused, now).err(),
        Some(Errno::ENOENT),
        "taken by a thread that reused the holder's id"
    );
    // None of them spent it: the holder takes it, once.
    let got = t.take(seq, www, now).expect("the holder's open");
    println!(
        "got: refused to all three, the holder's open gives socket {}",
        got.id
    );
    assert!(Arc::ptr_eq(&got, &l));
    assert_eq!(t.take(seq, www, now).err(), Some(Errno::ENOENT), "replayed");
    assert_eq!(t.find(secret, www), None, "looked up again after its use");
}

#[test]
fn guessed_numbers_find_nothing() {
    let (_e, l, t, now) = desk();
    let owner = holder(5, 1, 1000);
    let secret = t.issue(&l, owner, now).unwrap();
    let found = (1..=100_000u64)
        .chain([secret ^ 1, secret.wrapping_add(1), secret.wrapping_sub(1)])
        .filter(|g| *g != secret && t.find(*g, owner).is_some())
        .count();
    println!("tried: 100,003 guessed numbers by the holder itself; found {found}");
    assert_eq!(found, 0);
}

#[test]
fn an_expired_ticket_is_refused_and_dropped() {
    let (_e, l, t, then) = desk();
    let h = holder(5, 1, 1000);
    let (_, seq) = issued(&t, &l, h, then);
    let later = then + Duration::from_millis(udsfs_proto::mount::TICKET_TTL_MS + 1);
    assert_eq!(t.take(seq, h, later).err(), Some(Errno::ENOENT));
    assert!(t.is_empty(), "dropped at its refused open");
}

#[test]
fn no_ticket_for_a_socket_that_is_not_listening() {
    let (e, c) = (engine(), root());
    let t = Tickets::default();
    let h = holder(5, 1, 0);
    let s = e.socket(SockType::Stream, &c);
    assert_eq!(
        t.issue(&s, h, Instant::now()),
        Err(Errno::EINVAL),
        "unbound"
    );
    e.bind(&s, &Addr::Abstract(b"nl".to_vec()), &c).unwrap();
    assert_eq!(t.issue(&s, h, Instant::now()), Err(Errno::EINVAL), "bound");
    let d = e.socket(SockType::Dgram, &c);
    assert_eq!(
        t.issue(&d, h, Instant::now()),
        Err(Errno::EOPNOTSUPP),
        "dgram"
    );
    let (a, _b) = e.socketpair(SockType::Stream, &c);
    assert_eq!(
        t.issue(&a, h, Instant::now()),
        Err(Errno::EINVAL),
        "connected"
    );
    assert!(t.is_empty());
}

#[test]
fn sixty_thousand_requests_are_bounded_and_charged_to_the_asker() {
    let (_e, l, t, now) = desk();
    // Another user's ticket, asked first.
    let victim = holder(2, 1, 1001);
    let vs = t.issue(&l, victim, now).unwrap();
    // One thread asking 60,000 times holds one.
    let greedy = holder(3, 1, 1000);
    for _ in 0..60_000 {
        t.issue(&l, greedy, now).unwrap();
    }
    println!("one thread, 60,000 requests: {} held", t.held_by(1000));
    assert_eq!(t.held_by(1000), 1);
    // 60,000 threads of one user hold PER_USER; the oldest go first.
    for tid in 0..60_000u32 {
        t.issue(&l, holder(10 + tid, 1, 1000), now).unwrap();
    }
    println!("60,000 threads of uid 1000: {} held", t.held_by(1000));
    assert_eq!(t.held_by(1000), PER_USER);
    assert!(t.len() <= PER_USER + 1);
    let vseq = seq_of(&t, vs, victim);
    assert!(
        t.take(vseq, victim, now).is_ok(),
        "the other user's ticket survived uid 1000's requests"
    );
    // All users together: past MAX the request fails, nobody's is dropped.
    let users = (MAX / PER_USER) as u32 + 1;
    let mut refused = 0;
    for uid in 2000..2000 + users {
        for tid in 0..PER_USER as u32 {
            if t.issue(&l, holder(tid + 1, 1, uid), now) == Err(Errno::ENOBUFS) {
                refused += 1;
            }
        }
    }
    println!(
        "{users} users of {PER_USER} threads each: {} held, {refused} refused",
        t.len()
    );
    assert!(t.len() <= MAX);
    assert!(refused > 0);
}

#[test]
fn a_threads_new_request_replaces_its_old_ticket() {
    let (_e, l, t, now) = desk();
    let h = holder(5, 1, 1000);
    let first = t.issue(&l, h, now).unwrap();
    let second = t.issue(&l, h, now).unwrap();
    assert_ne!(first, second);
    assert_eq!(t.find(first, h), None, "the old one is gone");
    assert!(t.find(second, h).is_some());
    assert_eq!(t.len(), 1);
}

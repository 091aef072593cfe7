//! The rule set against message sequences: toxicity statistics,
//! reproducibility, limits, permissions and each fault's effect.

use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::*;

const USER: u32 = 1000;
const OTHER: u32 = 1001;

fn end(socket: u64, name: Option<Name<'static>>, owner_uid: u32) -> End<'static> {
    End {
        socket,
        name,
        owner_uid,
    }
}

/// A client (socket 1) talking to the server end (socket 2) of a
/// connection made to `run/db.sock`, both owned by USER.
fn send(len: usize) -> Message<'static> {
    Message {
        kind: Kind::Send,
        from: end(1, None, USER),
        to: end(2, Some(Name::Path(b"run/db.sock")), USER),
        pid: Pid::Known(100),
        uid: USER,
        ty: SockType::Stream,
        len,
        refs: 0,
        offset: 0,
        now: Instant::now(),
    }
}

/// `m` sent by socket `sock`.
fn from(sock: u64, mut m: Message<'static>) -> Message<'static> {
    m.from.socket = sock;
    m
}

fn reply(len: usize) -> Message<'static> {
    let mut m = send(len);
    std::mem::swap(&mut m.from, &mut m.to);
    m.pid = Pid::Known(200);
    m
}

fn rules_with(line: &str) -> Rules {
    let rules = Rules::default();
    rules.add(Rule::parse(line).unwrap(), 0);
    rules
}

/// The two-sided 99.9 % bounds of Binomial(n, p): the largest lo with
/// P(X < lo) ≤ 0.0005 and the smallest hi with P(X > hi) ≤ 0.0005, from the
/// probability mass function summed in log space.
fn binomial_bounds(n: u64, p: f64) -> (u64, u64) {
    let mut ln_pmf = Vec::with_capacity(n as usize + 1);
    let mut l = n as f64 * (1.0 - p).ln();
    ln_pmf.push(l);
    for k in 0..n {
        l += ((n - k) as f64 / (k + 1) as f64).ln() + (p / (1.0 - p)).ln();
        ln_pmf.push(l);
    }
    let top = ln_pmf.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let pmf: Vec<f64> = ln_pmf.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = pmf.iter().sum();
    let tail = 0.0005 * total;
    let (mut lo, mut below) = (0, 0.0);
    while below + pmf[lo] <= tail {
        below += pmf[lo];
        lo += 1;
    }
    let (mut hi, mut above) = (n as usize, 0.0);
    while above + pmf[hi] <= tail {
        above += pmf[hi];
        hi -= 1;
    }
    (lo as u64, hi as u64)
}

#[test]
fn the_binomial_bounds_are_the_known_ones() {
    // Mean 1000, sd 30: the normal approximation gives 1000 ± 98.7.
    let (lo, hi) = binomial_bounds(10_000, 0.1);
    assert!((895..=910).contains(&lo), "{lo}");
    assert!((1090..=1105).contains(&hi), "{hi}");
}

#[test]
fn toxicity_injects_within_the_binomial_bounds() {
    let (lo, hi) = binomial_bounds(10_000, 0.1);
    for seed in 1..=5 {
        let rules = rules_with(&format!("name run/db.sock full toxicity=0.1 seed={seed}"));
        // Each message from a connection of its own: `full` holds the
        // message it hits, and a second one from the same sender would
        // be taken for its retry.
        let hits = (0..10_000)
            .filter(|&i| rules.check(&from(10 + i, send(10))).full)
            .count() as u64;
        assert!(
            (lo..=hi).contains(&hits),
            "seed {seed}: {hits} not in [{lo}, {hi}]"
        );
        let listed = &rules.list(0)[0];
        assert_eq!((listed.matched, listed.injected), (10_000, hits));
    }
}

fn sequence(line: &str) -> Vec<Decision> {
    let rules = rules_with(line);
    (0..500).map(|i| rules.check(&send(100 + i))).collect()
}

#[test]
fn the_same_seed_gives_the_same_decisions() {
    let line = "name run/db.sock latency latency=50 jitter=20 toxicity=0.5 seed=7";
    let a = sequence(line);
    assert_eq!(a, sequence(line));
    assert_ne!(a, sequence(&line.replace("seed=7", "seed=8")));
    let slicer = "socket 2 slicer average_size=16 size_variation=8 toxicity=0.7 seed=3";
    assert_eq!(sequence(slicer), sequence(slicer));
    assert_ne!(
        sequence(slicer),
        sequence(&slicer.replace("seed=3", "seed=4"))
    );
}

#[test]
fn slicer_pieces_sum_to_the_write_and_stay_under_the_maximum() {
    let rules = rules_with("socket 2 slicer average_size=64 size_variation=32 delay=500 seed=1");
    for len in [1, 95, 96, 97, 1000, 65536, 100_003] {
        let d = rules.check(&send(len));
        match d.slice {
            None => assert!(len <= 96, "{len} not sliced"),
            Some(pieces) => {
                assert!(len > 96);
                assert_eq!(pieces.iter().sum::<usize>(), len);
                assert!(pieces.iter().all(|&p| (1..=96).contains(&p)), "{pieces:?}");
                assert_eq!(d.slice_delay, Duration::from_micros(500));
            }
        }
    }
    // A variation as large as the average still gives pieces of at least 1.
    let rules = rules_with("socket 2 slicer average_size=2 size_variation=5 seed=2");
    let pieces = rules.check(&send(1000)).slice.unwrap();
    assert_eq!(pieces.iter().sum::<usize>(), 1000);
    assert!(pieces.iter().all(|&p| (1..=7).contains(&p)));
}

#[test]
fn bandwidth_paces_a_connection() {
    // 100 KB/s: 1000 bytes take 10 ms.
    let rules = rules_with("socket 2 bandwidth rate=100");
    let t0 = Instant::now();
    let at = |ms: u64, len: usize| {
        let mut m = send(len);
        m.now = t0 + Duration::from_millis(ms);
        rules.check(&m).delay.unwrap()
    };
    assert_eq!(at(0, 1000), Duration::from_millis(10));
    // Queued right behind it: waits for the first, then its own 10 ms.
    assert_eq!(at(0, 1000), Duration::from_millis(20));
    // Long after: the line is free again.
    assert_eq!(at(1000, 500), Duration::from_millis(5));
    // 1 MiB at 100 KB/s: 10.48576 s.
    assert_eq!(at(5000, 1 << 20), Duration::from_micros(10_485_760));
}

#[test]
fn latency_and_jitter_stay_within_their_bounds() {
    let rules = rules_with("name run/db.sock latency latency=100 jitter=10 seed=9");
    let (mut least, mut most) = (Duration::MAX, Duration::ZERO);
    for _ in 0..2000 {
        let d = rules.check(&send(1)).delay.unwrap();
        least = least.min(d);
        most = most.max(d);
    }
    assert!(least >= Duration::from_millis(90) && most <= Duration::from_millis(110));
    assert!(least < Duration::from_millis(95) && most > Duration::from_millis(105));
    // Jitter larger than the latency never makes a delay negative.
    let rules = rules_with("name run/db.sock latency latency=1 jitter=50 seed=9");
    for _ in 0..200 {
        assert!(rules.check(&send(1)).delay.unwrap() <= Duration::from_millis(51));
    }
}

#[test]
fn after_and_times_limit_a_rule() {
    let rules = rules_with("socket 2 full after=3 times=2");
    // Each message from a sender of its own, as above.
    let hits: Vec<bool> = (0..8)
        .map(|i| rules.check(&from(10 + i, send(1))).full)
        .collect();
    assert_eq!(hits, [false, false, false, true, true, false, false, false]);
    let l = &rules.list(0)[0];
    assert_eq!((l.matched, l.injected), (8, 2));

    let rules = rules_with("socket 2 full after_bytes=250");
    let hits: Vec<bool> = (0..4)
        .map(|i| rules.check(&from(10 + i, send(100))).full)
        .collect();
    assert_eq!(hits, [false, false, false, true]);
}

#[test]
fn directions_follow_the_socket_named() {
    let up = rules_with("name run/db.sock up full");
    assert!(up.check(&send(1)).full);
    assert!(!up.check(&reply(1)).full);
    let down = rules_with("name run/db.sock down full");
    assert!(!down.check(&send(1)).full);
    assert!(down.check(&reply(1)).full);
    let both = rules_with("socket 2 full");
    assert!(both.check(&send(1)).full && both.check(&reply(1)).full);
    let other = rules_with("name run/other.sock full");
    assert!(other.check(&send(1)).is_none());
    let pid = rules_with("pid 200 full");
    assert!(!pid.check(&send(1)).full && pid.check(&reply(1)).full);
    let uid = rules_with("uid 1000 full");
    assert!(uid.check(&send(1)).full);
}

#[test]
fn a_users_rules_act_only_on_that_users_sockets() {
    let rules = Rules::default();
    let mine = rules.add(Rule::parse("name run/db.sock full").unwrap(), USER);
    assert!(rules.check(&send(1)).full);
    // A connection to another user's server: left alone.
    let mut theirs = send(1);
    theirs.to.owner_uid = OTHER;
    assert!(rules.check(&theirs).is_none());
    theirs = send(1);
    theirs.from.owner_uid = OTHER;
    assert!(rules.check(&theirs).is_none());
    // Root's rules act on everyone's.
    rules.add(Rule::parse("name run/db.sock ctrunc").unwrap(), 0);
    theirs.refs = 1;
    assert!(rules.check(&theirs).drop_refs);
    // Users see their own rules and root's, and delete only their own.
    let root_rule = rules.list(0)[1].id;
    assert_eq!(rules.list(OTHER).len(), 1);
    assert_eq!(rules.list(USER).len(), 2);
    assert_eq!(rules.del(mine, OTHER), Err(Errno::ENOENT));
    assert_eq!(rules.del(root_rule, USER), Err(Errno::EPERM));
    rules.clear(OTHER);
    assert_eq!(rules.list(0).len(), 2);
    rules.clear(USER);
    assert_eq!(rules.list(0).len(), 1);
    assert_eq!(rules.del(root_rule, 0), Ok(()));
    assert!(!rules.any());
}

#[test]
fn any_follows_the_rule_count() {
    let rules = Rules::default();
    assert!(!rules.any());
    let a = rules.add(Rule::parse("socket 2 full").unwrap(), 0);
    let b = rules.add(Rule::parse("socket 5 full").unwrap(), 0);
    assert!(rules.any());
    assert_eq!(rules.del(a, 0), Ok(()));
    assert!(rules.any());
    assert_eq!(rules.del(a, 0), Err(Errno::ENOENT));
    // A socket's rules go with it.
    rules.forget_socket(5);
    assert!(!rules.any());
    assert_eq!(rules.del(b, 0), Err(Errno::ENOENT));
    rules.add(Rule::parse("socket 2 full").unwrap(), 0);
    rules.clear(0);
    assert!(!rules.any());
}

#[test]
fn owners_are_needed_only_for_a_users_rules_and_uid_selectors() {
    let rules = Rules::default();
    let root = rules.add(Rule::parse("name run/x full").unwrap(), 0);
    assert!(
        !rules.needs_owners(),
        "root's name rule acts whoever owns the sockets"
    );
    let by_uid = rules.add(Rule::parse("uid 7 full").unwrap(), 0);
    assert!(
        rules.needs_owners(),
        "a close is matched by its socket owner's uid"
    );
    assert_eq!(rules.del(by_uid, 0), Ok(()));
    assert!(!rules.needs_owners());
    let users = rules.add(Rule::parse("name run/x full").unwrap(), 1000);
    assert!(
        rules.needs_owners(),
        "a user's rule acts only on that user's sockets"
    );
    assert_eq!(rules.del(users, 1000), Ok(()));
    assert_eq!(rules.del(root, 0), Ok(()));
    assert!(!rules.needs_owners() && !rules.any());
}

#[test]
fn limit_data_cuts_at_exactly_the_limit() {
    let rules = rules_with("socket 2 limit_data bytes=250");
    let d: Vec<Decision> = (0..3).map(|_| rules.check(&send(100))).collect();
    assert!(d[0].is_none() && d[1].is_none());
    assert_eq!(d[2].short, Some(50));
    assert!(d[2].close_after);
    // Another connection has its own count.
    let mut m = send(100);
    m.from.socket = 9;
    assert!(rules.check(&m).is_none());
    // A write that ends on the limit closes without a cut.
    let rules = rules_with("socket 2 limit_data bytes=200");
    rules.check(&send(100));
    let d = rules.check(&send(100));
    assert!(d.close_after && d.short.is_none());
}

#[test]
fn die_after_closes_after_message_k() {
    let rules = rules_with("socket 2 die_after messages=3");
    let closes: Vec<bool> = (0..5).map(|_| rules.check(&send(1)).close_after).collect();
    assert_eq!(closes, [false, false, true, false, false]);
    // The rule forgets a connection whose socket is gone: a new one on
    // the same numbers counts from 1 again.
    rules.forget_socket(1);
    let closes: Vec<bool> = (0..3).map(|_| rules.check(&send(1)).close_after).collect();
    assert_eq!(closes, [false, false, true]);
}

#[test]
fn timeout_holds_and_arms_one_close() {
    let rules = rules_with("socket 2 timeout timeout=300");
    let first = rules.check(&send(1));
    assert!(first.hold);
    assert_eq!(first.close_in, Some(Duration::from_millis(300)));
    let second = rules.check(&send(1));
    assert!(second.hold && second.close_in.is_none());
    let never = rules_with("socket 2 timeout");
    let d = never.check(&send(1));
    assert!(d.hold && d.close_in.is_none());
}

#[test]
fn reset_peer_arms_once_per_connection() {
    let rules = rules_with("socket 2 reset_peer timeout=40");
    assert_eq!(
        rules.check(&send(1)).reset_after,
        Some(Duration::from_millis(40))
    );
    assert!(rules.check(&send(1)).is_none());
}

#[test]
fn per_connection_toxicity_is_thrown_once() {
    let rules = rules_with("socket 2 die_after messages=2 toxicity=0.5 seed=11");
    let mut outcomes = Vec::new();
    for client in 0..200 {
        let mut m = send(1);
        m.from.socket = 100 + client;
        rules.check(&m);
        outcomes.push(rules.check(&m).close_after);
    }
    let hit = outcomes.iter().filter(|&&h| h).count();
    assert!((60..=140).contains(&hit), "{hit} of 200 connections");
}

#[test]
fn connect_and_close_faults() {
    let rules = rules_with("name run/db.sock refuse errno=EAGAIN");
    let mut connect = send(0);
    connect.kind = Kind::Connect;
    connect.to.name = Some(Name::Path(b"run/db.sock"));
    assert_eq!(rules.check(&connect).refuse, Some(Errno::EAGAIN));
    // refuse acts on connects only.
    assert!(rules.check(&send(5)).is_none());
    let rules = rules_with("name run/db.sock down slow_close delay=30");
    let mut close = reply(0);
    close.kind = Kind::Close;
    assert_eq!(
        rules.check(&close).close_delay,
        Some(Duration::from_millis(30))
    );
    assert!(rules.check(&reply(5)).is_none());
}

#[test]
fn short_write_and_ctrunc_act_only_when_they_change_something() {
    let rules = rules_with("socket 2 short_write bytes=10");
    assert_eq!(rules.check(&send(100)).short, Some(10));
    assert!(rules.check(&send(10)).is_none());
    let rules = rules_with("socket 2 ctrunc");
    assert!(rules.check(&send(10)).is_none());
    let mut m = send(10);
    m.refs = 2;
    assert!(rules.check(&m).drop_refs);
}

#[test]
fn stream_only_rules_pass_message_sockets_untouched() {
    let rules = rules_with("name run/db.sock slicer average_size=1");
    let mut m = send(100);
    m.ty = SockType::Seqpacket;
    assert!(rules.check(&m).is_none());
    assert_eq!(rules.list(0)[0].matched, 0);
    m.ty = SockType::Stream;
    assert!(rules.check(&m).slice.is_some());
}

#[test]
fn rules_combine() {
    let rules = Rules::default();
    rules.add(Rule::parse("socket 2 latency latency=10").unwrap(), 0);
    rules.add(Rule::parse("socket 2 latency latency=5").unwrap(), 0);
    rules.add(Rule::parse("socket 2 short_write bytes=100").unwrap(), 0);
    rules.add(Rule::parse("socket 2 slicer average_size=60").unwrap(), 0);
    let d = rules.check(&send(1000));
    assert_eq!(d.delay, Some(Duration::from_millis(15)));
    assert_eq!(d.short, Some(100));
    assert_eq!(d.slice.as_ref().unwrap().iter().sum::<usize>(), 100);
    let ids: Vec<u64> = d.injected.iter().map(|i| i.rule.n).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(d.injected[3].fault, "slicer");
}

#[test]
fn abstract_names_select() {
    let rules = rules_with("name @bus up full");
    let mut m = send(1);
    m.to.name = Some(Name::Abstract(b"bus"));
    assert!(rules.check(&m).full);
    m.to.name = Some(Name::Path(b"bus"));
    assert!(!rules.check(&m).full);
}

#[test]
fn full_holds_the_message_it_hits_and_times_counts_messages_not_retries() {
    let rules = rules_with("socket 2 full times=2");
    assert!(rules.holds_sends(&send(0)), "toxicity 1: sure to hit");
    assert!(rules.check(&send(1)).full);
    // Retries of the held message: still full, not counted again.
    for _ in 0..5 {
        let d = rules.check(&send(1));
        assert!(d.full && d.injected.is_empty());
    }
    assert!(rules.holds_sends(&send(0)));
    assert!(rules.check(&from(3, send(1))).full);
    // Two messages hit: a third sender's message goes, and poll says so.
    assert!(!rules.holds_sends(&from(4, send(0))));
    assert!(rules.check(&from(4, send(1))).is_none());
    // The first two stay held while the rule stands.
    assert!(rules.check(&send(1)).full && rules.holds_sends(&send(0)));
    let l = &rules.list(0)[0];
    assert_eq!((l.matched, l.injected), (3, 2));
}

#[test]
fn full_with_a_timeout_lets_the_retry_through_once_it_is_up() {
    let rules = rules_with("socket 2 full timeout=50");
    let t0 = Instant::now();
    let at = |ms, m: Message<'static>| Message {
        now: t0 + Duration::from_millis(ms),
        ..m
    };
    let d = rules.check(&at(0, send(1)));
    assert_eq!(d.hold_until, Some(t0 + Duration::from_millis(50)));
    let d = rules.check(&at(49, send(1)));
    assert!(d.full && d.hold_until.is_none());
    assert!(rules.holds_sends(&at(49, send(0))));
    assert!(!rules.holds_sends(&at(50, send(0))));
    assert!(rules.check(&at(50, send(1))).is_none(), "the retry goes");
    // The next message is a new one, hit again.
    assert!(rules.check(&at(51, send(1))).full);
    let l = &rules.list(0)[0];
    assert_eq!((l.matched, l.injected), (2, 2));
}

#[test]
fn poll_predicts_only_a_sure_hit() {
    assert!(!rules_with("socket 2 full toxicity=0.5").holds_sends(&send(0)));
    assert!(!rules_with("socket 2 full after=1").holds_sends(&send(0)));
    assert!(!rules_with("pid 100 full").holds_sends(&send(0)));
    assert!(!rules_with("socket 2 latency latency=5").holds_sends(&send(0)));
    assert!(rules_with("name run/db.sock up full").holds_sends(&send(0)));
}

#[test]
fn refuse_eagain_holds_the_connect_it_hits() {
    let rules = rules_with("socket 2 refuse errno=EAGAIN times=1");
    let connect = |from| Message {
        kind: Kind::Connect,
        ..self::from(from, send(0))
    };
    assert_eq!(rules.check(&connect(1)).refuse, Some(Errno::EAGAIN));
    for _ in 0..3 {
        let d = rules.check(&connect(1));
        assert_eq!(d.refuse, Some(Errno::EAGAIN));
        assert!(d.injected.is_empty());
    }
    assert!(rules.check(&connect(3)).is_none());
    assert_eq!(rules.check(&connect(1)).refuse, Some(Errno::EAGAIN));
    let l = &rules.list(0)[0];
    assert_eq!((l.matched, l.injected), (2, 1));
}

//! The lane's ring: against a model, across threads and processes, and
//! against a peer that scribbles over every shared word.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::region::{self, HEADER, OFF_FIN, OFF_HEAD, OFF_STATE, OFF_TAIL, dir_word};
use super::*;
use crate::xorshift::Rng;

/// A region with rings of `caps` bytes, its lane up (State::Direct); ready.rs's
/// tests use it too.
pub(super) fn direct(caps: [u32; 2]) -> (OwnedFd, Region) {
    let (fd, r) = Region::create(caps).expect("create");
    r.set_state(State::Direct);
    (fd, r)
}

/// End A's writer and end B's reader of a stream lane: A's bytes to B
/// (ready.rs's tests use it too).
pub(super) fn a_to_b(r: &Region) -> (Writer<'_>, Reader<'_>) {
    let (w, _) = r.end(Side::A, Framing::Stream);
    let (_, rd) = r.end(Side::B, Framing::Stream);
    (w, rd)
}

/// The byte at stream position `p` in the pattern tests.
fn pat(p: u64) -> u8 {
    (p ^ (p >> 8) ^ (p >> 16)).wrapping_mul(31) as u8
}

/// A region at positions `pos` (as if that many bytes went through each
/// ring): the shared words set as the two ends would have published them.
fn at_positions(r: &Region, pos: [u64; 2]) {
    for (d, p) in pos.into_iter().enumerate() {
        r.word(dir_word(d, OFF_TAIL))
            .store(p as u32, Ordering::SeqCst);
        r.word(dir_word(d, OFF_HEAD))
            .store(p as u32, Ordering::SeqCst);
    }
}

#[test]
fn map_refuses_unsealed_or_short_files_and_sealed_ones_cannot_shrink() {
    // SAFETY: plain calls; fds wrapped at once.
    let raw = unsafe { libc::syscall(libc::SYS_memfd_create, c"t".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0);
    let unsealed = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    unsafe { libc::ftruncate(unsealed.as_raw_fd(), 1 << 20) };
    let got = Region::map(unsealed.as_raw_fd(), [4096, 4096]).err();
    println!("map of an unsealed memfd: {got:?}");
    assert_eq!(got, Some(libc::EINVAL));

    let (fd, _r) = Region::create([4096, 4096]).expect("create");
    let got = Region::map(fd.as_raw_fd(), [4096, 8192]).err();
    println!("map asking for more than the file holds: {got:?}");
    assert_eq!(got, Some(libc::EINVAL));
    let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), 100) };
    let e = std::io::Error::last_os_error().raw_os_error();
    println!("ftruncate of a lane's memfd to 100 bytes: {rc} {e:?}");
    assert_eq!((rc, e), (-1, Some(libc::EPERM)));
    for caps in [
        [0, 4096],
        [4096, 63],
        [4098, 4096],
        [region::MAX_CAP + 4, 64],
    ] {
        assert_eq!(Region::create(caps).err(), Some(libc::EINVAL), "{caps:?}");
    }
    assert_eq!(region::cap_for_sndbuf(212992), 212992);
    assert_eq!(region::cap_for_sndbuf(1), region::MIN_CAP);
    assert_eq!(region::cap_for_sndbuf(u32::MAX), region::MAX_CAP);
}

/// Random interleavings of stream writes, reads and peeks of random sizes
/// against a VecDeque, from positions that make the 32-bit words wrap.
#[test]
fn stream_matches_a_model() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let cap = [64u32, 100, 4096][seed as usize % 3];
        let (_fd, r) = direct([cap, cap]);
        let start = [
            u64::from(u32::MAX) - rng.below(3 * cap as u64),
            rng.below(1 << 40),
        ];
        at_positions(&r, start);
        let (mut w, _) = r.end_at(Side::A, Framing::Stream, start);
        let (_, mut rd) = r.end_at(Side::B, Framing::Stream, start);
        let mut model = VecDeque::new();
        let mut next = 0u8;
        for step in 0..3000 {
            let ctx = format!("seed {seed} cap {cap} step {step}");
            match rng.below(4) {
                0 | 1 => {
                    let n = rng.below(cap as u64 * 3 / 2) as usize;
                    let data: Vec<u8> = (0..n)
                        .map(|_| {
                            next = next.wrapping_add(1);
                            next
                        })
                        .collect();
                    let got = w.write(&data);
                    let room = cap as usize - model.len();
                    // Whole, or the whole pieces that fit (Linux's skbs).
                    let piece = w.stream_piece();
                    let want = if n <= room { n } else { room - room % piece };
                    match got {
                        Ok(k) => {
                            assert_eq!(k, want, "{ctx}: write {n}");
                            model.extend(&data[..k]);
                        }
                        Err(LaneErr::WouldBlock) => assert!(n > 0 && want == 0, "{ctx}"),
                        Err(e) => panic!("{ctx}: write {n}: {e:?}"),
                    }
                    // unwritten bytes of this round are not sent: the next
                    // round's bytes continue the counter, the model follows
                    next = next.wrapping_sub((n - got.unwrap_or(0)) as u8);
                }
                k => {
                    let peek = k == 3 && rng.below(2) == 0;
                    let mut buf = vec![0u8; rng.below(cap as u64 * 3 / 2) as usize];
                    let got = rd.read(&mut buf, peek);
                    match got {
                        Ok(n) => {
                            assert_eq!(n, buf.len().min(model.len()), "{ctx}: read");
                            let want: Vec<u8> = if peek {
                                model.iter().take(n).copied().collect()
                            } else {
                                model.drain(..n).collect()
                            };
                            assert_eq!(&buf[..n], &want[..], "{ctx}: bytes");
                        }
                        Err(LaneErr::WouldBlock) => assert!(model.is_empty() && !buf.is_empty()),
                        Err(e) => panic!("{ctx}: read: {e:?}"),
                    }
                }
            }
            assert_eq!(w.queued().unwrap() as usize, model.len(), "{ctx}: SIOCOUTQ");
            assert_eq!(
                rd.available().unwrap() as usize,
                model.len(),
                "{ctx}: FIONREAD"
            );
        }
    }
}

/// The same for records: whole or nothing, truncation, peeks, empty records.
#[test]
fn records_match_a_model() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x51_7cc1_b727_220a) + 3);
        let cap = [64u32, 100, 4096][seed as usize % 3];
        let (_fd, r) = direct([cap, cap]);
        let start = [u64::from(u32::MAX) + 1 - 4 * rng.below(cap as u64), 0];
        at_positions(&r, start);
        let (mut w, _) = r.end_at(Side::A, Framing::Record, start);
        let (_, mut rd) = r.end_at(Side::B, Framing::Record, start);
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let size =
            |m: &VecDeque<Vec<u8>>| m.iter().map(|v| 4 + v.len().div_ceil(4) * 4).sum::<usize>();
        for step in 0..3000 {
            let ctx = format!("seed {seed} cap {cap} step {step}");
            if rng.below(2) == 0 {
                let n = rng.below(cap as u64 + 8) as usize;
                let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                let need = 4 + n.div_ceil(4) * 4;
                match w.write(&data) {
                    Ok(k) => {
                        assert_eq!(k, n, "{ctx}");
                        assert!(
                            size(&model) + need <= cap as usize,
                            "{ctx}: wrote past the room"
                        );
                        model.push_back(data);
                    }
                    Err(LaneErr::TooBig) => assert!(n > cap as usize - 4, "{ctx}: {n} too big?"),
                    Err(LaneErr::WouldBlock) => {
                        assert!(
                            size(&model) + need > cap as usize,
                            "{ctx}: blocked with room"
                        )
                    }
                    Err(e) => panic!("{ctx}: {e:?}"),
                }
            } else {
                let peek = rng.below(4) == 0;
                let mut buf = vec![0u8; rng.below(cap as u64) as usize];
                match rd.read_record(&mut buf, peek) {
                    Ok(Some(rec)) => {
                        let want = if peek {
                            model[0].clone()
                        } else {
                            model.pop_front().unwrap()
                        };
                        assert_eq!(rec.len, want.len(), "{ctx}");
                        assert_eq!(rec.copied, buf.len().min(want.len()), "{ctx}");
                        assert_eq!(&buf[..rec.copied], &want[..rec.copied], "{ctx}");
                    }
                    Ok(None) => panic!("{ctx}: end of records"),
                    Err(LaneErr::WouldBlock) => assert!(model.is_empty(), "{ctx}"),
                    Err(e) => panic!("{ctx}: {e:?}"),
                }
            }
            let next = model.front().map_or(0, |v| v.len());
            assert_eq!(rd.available().unwrap() as usize, next, "{ctx}: FIONREAD");
        }
    }
}

#[test]
fn end_of_stream_after_the_bytes_and_nothing_after_it() {
    let (_fd, r) = direct([64, 64]);
    let (mut w, mut rd) = a_to_b(&r);
    w.write(b"last").unwrap();
    w.shutdown();
    assert_eq!(w.write(b"x"), Err(LaneErr::Shut));
    let mut buf = [0u8; 16];
    assert_eq!(rd.read(&mut buf, false), Ok(4));
    assert_eq!(rd.read(&mut buf, false), Ok(0));
    assert!(rd.readable().unwrap());
    // A peer that writes after its end: the reader resets.
    r.word(dir_word(0, OFF_TAIL)).store(8, Ordering::SeqCst);
    let got = rd.read(&mut buf, false);
    println!("bytes published after the writer's end: {got:?}");
    assert!(matches!(got, Err(LaneErr::Corrupt(_))));
}

#[test]
fn a_write_wakes_only_a_sleeping_reader() {
    let (_fd, r) = direct([4096, 4096]);
    let (mut w, mut rd) = a_to_b(&r);
    let ev = r.word(dir_word(0, region::OFF_DATA_EV));
    let ev0 = ev.load(Ordering::SeqCst);
    w.write(b"abc").unwrap();
    println!(
        "data_ev after a write with no sleeper: {ev0} -> {}",
        ev.load(Ordering::SeqCst)
    );
    assert_eq!(
        ev.load(Ordering::SeqCst),
        ev0,
        "a wake-up without a sleeper"
    );
    let mut buf = [0u8; 8];
    rd.read(&mut buf, false).unwrap();
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            rd.wait_readable(0, Some(Duration::from_secs(20))).unwrap();
            rd.read(&mut buf, false).unwrap()
        });
        while !reader_asleep(&r, 0) {
            std::thread::yield_now();
        }
        w.write(b"wake").unwrap();
        assert_eq!(t.join().unwrap(), 4);
    });
    assert_eq!(
        ev.load(Ordering::SeqCst),
        ev0 + super::BUMP,
        "one wake-up for one sleeper"
    );
}

/// A reader woken and not running yet (its count still up) costs the
/// writes after the waking one nothing: the first disarmed the word as it
/// bumped it; the reader arms it again only when it goes back to sleep.
/// (Every write bumped it and made a FUTEX_WAKE before.)
#[test]
fn a_woken_sleeper_costs_the_writes_after_the_first_no_wake_up() {
    let (_fd, r) = direct([4096, 4096]);
    let (mut w, _rd) = a_to_b(&r);
    let ev = r.word(dir_word(0, region::OFF_DATA_EV));
    // A reader's sleep as wait_until makes it: its count, then the arm.
    r.word(dir_word(0, region::OFF_READER_SLEEPING))
        .fetch_add(1, Ordering::SeqCst);
    let armed = ev.fetch_or(ring::ARMED, Ordering::SeqCst) | ring::ARMED;
    let mut seen = vec![armed];
    for _ in 0..3 {
        w.write(b"x").unwrap();
        seen.push(ev.load(Ordering::SeqCst));
    }
    println!("data_ev: armed, then after each of 3 writes: {seen:?}");
    assert_ne!(seen[1], armed, "the first write wakes the sleeper");
    assert_eq!(seen[1] & ring::ARMED, 0, "and disarms the word");
    assert_eq!(
        seen[2..],
        [seen[1], seen[1]],
        "no wake-up for the next writes"
    );
}

#[test]
fn waits_time_out_and_the_daemon_wakes_sleepers_when_it_closes() {
    let (_fd, r) = direct([64, 64]);
    let (mut w, mut rd) = r.end(Side::A, Framing::Stream);
    let t = Instant::now();
    assert_eq!(
        rd.wait_readable(10, Some(Duration::from_millis(30))),
        Err(LaneErr::TimedOut)
    );
    assert!(t.elapsed() >= Duration::from_millis(30));
    w.write(&[1; 64]).unwrap();
    assert_eq!(
        w.wait_writable(1, 0, Some(Duration::from_millis(30))),
        Err(LaneErr::TimedOut)
    );
    std::thread::scope(|s| {
        let a = s.spawn(move || (rd.wait_readable(0, None), rd.read(&mut [0; 4], false)));
        let b = s.spawn(move || (w.wait_writable(1, 0, None), w.write(b"x")));
        std::thread::sleep(Duration::from_millis(50));
        r.set_state(State::Closed);
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        println!("sleepers after the daemon's close: reader {ra:?}, writer {rb:?}");
        assert_eq!(ra, (Ok(()), Err(LaneErr::NotDirect(State::Closed))));
        assert_eq!(rb, (Ok(()), Err(LaneErr::NotDirect(State::Closed))));
    });
}

/// Two threads move 4 MiB through a 100-byte ring in random pieces, each
/// sleeping on the other (futexes, then eventfds).
#[test]
fn threads_move_a_pattern_through_a_small_ring() {
    const TOTAL: u64 = 4 << 20;
    for efd in [false, true] {
        let (_fd, r) = direct([100, 100]);
        let (mut w, mut rd) = a_to_b(&r);
        let fds = efd.then(|| {
            let e = |_| unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            let f: Vec<i32> = (0..2).map(e).collect();
            w.set_notify(Notify::Eventfd {
                mine: f[0],
                peer: f[1],
                hup: -1,
            });
            rd.set_notify(Notify::Eventfd {
                mine: f[1],
                peer: f[0],
                hup: -1,
            });
            f
        });
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut rng = Rng(7);
                let mut p = 0u64;
                while p < TOTAL {
                    let n = (1 + rng.below(300)).min(TOTAL - p);
                    let data: Vec<u8> = (p..p + n).map(pat).collect();
                    w.write_all(&data, 0).unwrap();
                    p += n;
                }
                w.shutdown();
            });
            let mut rng = Rng(11);
            let mut p = 0u64;
            let mut buf = [0u8; 300];
            loop {
                let n = 1 + rng.below(300) as usize;
                match rd.read(&mut buf[..n], false) {
                    Ok(0) => break,
                    Ok(k) => {
                        for (i, b) in buf[..k].iter().enumerate() {
                            assert_eq!(
                                *b,
                                pat(p + i as u64),
                                "eventfd {efd}: byte {}",
                                p + i as u64
                            );
                        }
                        p += k as u64;
                    }
                    Err(LaneErr::WouldBlock) => rd.wait_readable(0, None).unwrap(),
                    Err(e) => panic!("{e:?}"),
                }
            }
            println!("eventfd {efd}: {p} bytes through a 100-byte ring");
            assert_eq!(p, TOTAL);
        });
        for f in fds.into_iter().flatten() {
            unsafe { libc::close(f) };
        }
    }
}

/// Runs `child` in a forked process (it may not allocate: the test harness
/// has threads) and returns its exit status.
fn in_child(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child runs only `child`, then _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = child();
        unsafe { libc::_exit(code) };
    }
    pid
}

fn status(pid: libc::pid_t) -> i32 {
    let mut st = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    st
}

/// Two processes: a stream pattern one way, then records ping-ponged back.
#[test]
fn two_processes_share_a_lane() {
    for framing in [Framing::Stream, Framing::Record] {
        let (_fd, r) = direct([4096, 256]);
        let pid = in_child(|| {
            let (mut w, mut rd) = r.end(Side::B, framing);
            let mut buf = [0u8; 1000];
            if framing == Framing::Stream {
                let mut p = 0u64;
                while p < 1 << 22 {
                    let n = match rd.read(&mut buf, false) {
                        Ok(0) => return 2,
                        Ok(n) => n,
                        Err(LaneErr::WouldBlock) => match rd.wait_readable(50, None) {
                            Ok(()) => continue,
                            Err(_) => return 3,
                        },
                        Err(_) => return 4,
                    };
                    for (i, b) in buf[..n].iter().enumerate() {
                        if *b != pat(p + i as u64) {
                            return 5;
                        }
                    }
                    p += n as u64;
                }
                0
            } else {
                for i in 0..20_000u32 {
                    let rec = loop {
                        match rd.read_record(&mut buf, false) {
                            Ok(Some(rec)) => break rec,
                            Err(LaneErr::WouldBlock) if rd.wait_readable(50, None).is_ok() => {}
                            _ => return 6,
                        }
                    };
                    if rec.len != (i % 200) as usize || buf[..rec.len].iter().any(|b| *b != i as u8)
                    {
                        return 7;
                    }
                    if w.write_all(&buf[..rec.len], 50).is_err() {
                        return 8;
                    }
                }
                0
            }
        });
        let (mut w, mut rd) = r.end(Side::A, framing);
        if framing == Framing::Stream {
            let data: Vec<u8> = (0..1u64 << 22).map(pat).collect();
            for c in data.chunks(777) {
                w.write_all(c, 50).unwrap();
            }
        } else {
            let mut buf = [0u8; 256];
            for i in 0..20_000u32 {
                let msg = vec![i as u8; (i % 200) as usize];
                w.write_all(&msg, 50).unwrap();
                loop {
                    match rd.read_record(&mut buf, false) {
                        Ok(Some(rec)) => {
                            assert_eq!(&buf[..rec.len], &msg[..], "record {i} back");
                            break;
                        }
                        Err(LaneErr::WouldBlock) => rd.wait_readable(50, None).unwrap(),
                        e => panic!("{e:?}"),
                    }
                }
            }
        }
        let st = status(pid);
        println!("{framing:?}: the child process ended with status {st:#x}");
        assert_eq!(st, 0, "{framing:?}: child's status");
    }
}

/// What an end does with the region as it is: every call of both halves,
/// bounded in time; returns the first corruption any of them reported.
fn victim_calls(w: &mut Writer, rd: &mut Reader, framing: Framing) -> Option<&'static str> {
    let mut bad = None;
    let mut note = |e: LaneErr| {
        if let LaneErr::Corrupt(why) = e {
            bad = bad.or(Some(why));
        }
    };
    let mut buf = [0u8; 300];
    let t = Instant::now();
    for _ in 0..3 {
        match rd.available() {
            Ok(n) => assert!(n <= 4096, "FIONREAD {n} past the ring"),
            Err(e) => note(e),
        }
        if let Err(e) = rd.readable() {
            note(e)
        }
        for peek in [true, false] {
            match framing {
                Framing::Stream => match rd.read(&mut buf, peek) {
                    Ok(n) => assert!(n <= buf.len()),
                    Err(e) => note(e),
                },
                Framing::Record => match rd.read_record(&mut buf, peek) {
                    Ok(Some(rec)) => assert!(rec.copied <= buf.len() && rec.len < 4096),
                    Ok(None) => {}
                    Err(e) => note(e),
                },
            }
        }
        match w.queued() {
            Ok(n) => assert!(n <= 4096, "SIOCOUTQ {n} past the ring"),
            Err(e) => note(e),
        }
        match w.write(&buf[..40]) {
            Ok(n) => assert!(n <= 40),
            Err(e) => note(e),
        }
        if let Err(e) = rd.wait_readable(3, Some(Duration::from_millis(2))) {
            note(e)
        }
        if let Err(e) = w.wait_writable(40, 3, Some(Duration::from_millis(2))) {
            note(e)
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the calls took {:?}",
        t.elapsed()
    );
    bad
}

/// The adversary (end B's process) scribbles one word of the header at a
/// time with values around and far from what it held; end A's calls stay
/// inside the region (guard pages would fault), end in bounded time, and
/// detect every value that breaks the protocol on a word A relies on.
#[test]
fn a_peer_scribbling_over_each_shared_word_is_detected() {
    let mut detected = 0;
    let mut cases = 0;
    for framing in [Framing::Stream, Framing::Record] {
        // every word up to the end of the two directions' blocks, then
        // a sample of the unused rest of the header page
        let words = (0..dir_word(2, 0))
            .step_by(4)
            .chain((dir_word(2, 0)..HEADER).step_by(252));
        for off in words {
            for k in 0..14u32 {
                let (_fd, r) = direct([4096, 4096]);
                // positions that wrap the 32-bit words soon; bytes queued
                // both ways (B has read some of A's, A some of B's)
                let base = u64::from(u32::MAX) - 4095;
                at_positions(&r, [base, base]);
                let (mut aw, mut ar) = r.end_at(Side::A, framing, [base, base]);
                let (mut bw, mut br) = r.end_at(Side::B, framing, [base, base]);
                for i in 0..30u8 {
                    aw.write(&[i; 37]).unwrap();
                    bw.write(&[i; 41]).unwrap();
                }
                let mut buf = [0u8; 100];
                for _ in 0..10 {
                    match framing {
                        Framing::Stream => {
                            ar.read(&mut buf[..41], false).unwrap();
                            br.read(&mut buf[..37], false).unwrap();
                        }
                        Framing::Record => {
                            ar.read_record(&mut buf, false).unwrap();
                            br.read_record(&mut buf, false).unwrap();
                        }
                    }
                }
                // A has seen where B's words stand
                aw.queued().unwrap();
                ar.available().unwrap();
                let word = r.word(off);
                let old = word.load(Ordering::SeqCst);
                let v = [
                    0,
                    1,
                    2,
                    3,
                    4,
                    0x7fff_ffff,
                    0x8000_0000,
                    u32::MAX,
                    old.wrapping_add(1),
                    old.wrapping_sub(1),
                    old.wrapping_add(4),
                    old.wrapping_sub(4),
                    old.wrapping_add(4097),
                    old.wrapping_add(1 << 20),
                ][k as usize];
                word.store(v, Ordering::SeqCst);
                // What A must detect: its incoming tail, fin and the state,
                // its outgoing ring's head, out of what the protocol allows.
                let must = if off == OFF_STATE {
                    v > 3
                } else if off == dir_word(1, OFF_FIN) {
                    v > 1
                } else if off == dir_word(1, OFF_TAIL) {
                    let moved = v.wrapping_sub(old);
                    let room = 4096 - (30 * 41 - 10 * 41); // bytes B may still add
                    let room = if framing == Framing::Record {
                        4096 - 20 * 48
                    } else {
                        room
                    };
                    moved > room || (framing == Framing::Record && moved % 4 != 0)
                } else if off == dir_word(0, OFF_HEAD) {
                    let moved = v.wrapping_sub(old);
                    let queued = if framing == Framing::Record {
                        20 * 44
                    } else {
                        20 * 37
                    };
                    moved > queued
                } else {
                    false
                };
                let state_ok = off != OFF_STATE || v == State::Direct as u32;
                let got = victim_calls(&mut aw, &mut ar, framing);
                cases += 1;
                if got.is_some() {
                    detected += 1;
                }
                if must {
                    assert!(
                        got.is_some(),
                        "{framing:?}: word {off} set from {old} to {v}: not detected"
                    );
                } else if state_ok && off != dir_word(1, OFF_TAIL) {
                    // a word A does not rely on, or a value the protocol
                    // allows: no reset for it (a moved record tail may show
                    // garbage records, which is detected or not)
                    assert_eq!(got, None, "{framing:?}: word {off} set from {old} to {v}");
                }
            }
        }
        // The record lengths in A's incoming ring, scribbled at its head.
        if framing == Framing::Record {
            for v in [5u32, 40, 41, 44, 45, 100, 1000, 4096, u32::MAX] {
                let (_fd, r) = direct([4096, 4096]);
                let (mut aw, mut ar) = r.end(Side::A, framing);
                let (mut bw, _) = r.end(Side::B, framing);
                bw.write(&[9; 41]).unwrap();
                let (off, _) = r.data_area(1);
                // SAFETY: the first record's header, inside the region.
                unsafe { (r.byte_ptr(off) as *mut u32).write_volatile(v) };
                let got = victim_calls(&mut aw, &mut ar, framing);
                println!("record length scribbled to {v}: {got:?}");
                // 41..=44 fit the record's 48 bytes (garbage padding read
                // as bytes); shorter lengths leave its bytes to be read as
                // the next header (0x09090909, or 9 past the end)
                assert_eq!(got.is_some(), !(41..=44).contains(&v), "length {v}");
            }
        }
    }
    println!("{cases} scribbles of a header word: {detected} detected as corruption");
}

/// The adversary in a process of its own writes random values into random
/// words of the whole region as fast as it can, while this process keeps
/// calling; it never strays, crashes or hangs, and sees the corruption.
#[test]
fn a_peer_process_scribbling_at_random_cannot_crash_or_hang_the_other() {
    // Rings of 4096 bytes: unbounded, and charged (the ledger and the
    // marks in use; 2048 bytes of SO_SNDBUF fit such a ring).
    let regions = [false, true].map(|c| {
        move |framing| match c {
            false => direct([4096, 4096]),
            true => {
                let bytes = region::ring_bytes_for(2048, framing).next_power_of_two() as u32;
                assert_eq!(bytes, 4096);
                charged(2048, framing)
            }
        }
    });
    for (framing, region) in [Framing::Stream, Framing::Record]
        .into_iter()
        .flat_map(|f| regions.iter().map(move |m| (f, m)))
    {
        let (_fd, r) = region(framing);
        let len = r.len();
        let stop = Instant::now() + Duration::from_millis(700);
        let pid = in_child(|| {
            let mut rng = Rng(0xdead_beef);
            while Instant::now() < stop {
                let off = (rng.below(len as u64) as usize) & !3;
                let v = match rng.below(4) {
                    0 => rng.next() as u32,
                    1 => rng.below(8) as u32,
                    _ => {
                        let p = r.byte_ptr(off) as *const u32;
                        // SAFETY: an aligned word inside the region.
                        unsafe { p.read_volatile() }.wrapping_add(rng.below(9000) as u32)
                    }
                };
                // SAFETY: as above.
                unsafe { (r.byte_ptr(off) as *mut u32).write_volatile(v) };
            }
            0
        });
        let mut rounds = 0;
        let mut resets = 0;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(700) {
            let (mut aw, mut ar) = r.end(Side::A, framing);
            if victim_calls(&mut aw, &mut ar, framing).is_some() {
                resets += 1;
            }
            // Poll's look walks the scribbled marks and ledger too.
            let _ = super::ready::look(&r, 0);
            rounds += 1;
        }
        assert_eq!(status(pid), 0);
        println!(
            "{framing:?} (charged: {:?}): {rounds} rounds of calls under a scribbling peer, {resets} detected corruption",
            r.budgets().is_some()
        );
        assert!(resets > 0, "no corruption detected");
    }
}

extern "C" fn nothing(_: i32) {}

/// A signal for a sleeping reader (a handler without SA_RESTART) ends its
/// wait with Interrupted, futex and eventfd alike: the library's restart
/// logic then decides, as for any blocking call.
#[test]
fn a_signal_interrupts_a_sleeping_wait() {
    // SAFETY: a handler that does nothing, for SIGUSR2, which no other test
    // of this crate uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as *const () as usize;
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
    for efd in [false, true] {
        let (_fd, r) = direct([64, 64]);
        let (_, mut rd) = r.end(Side::A, Framing::Stream);
        let e = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd {
            rd.set_notify(Notify::Eventfd {
                mine: e,
                peer: e,
                hup: -1,
            });
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            let t = s.spawn(move || {
                tx.send(unsafe { libc::pthread_self() }).unwrap();
                let t0 = Instant::now();
                (
                    rd.wait_readable(0, Some(Duration::from_secs(20))),
                    t0.elapsed(),
                )
            });
            let th = rx.recv().unwrap();
            while !reader_asleep(&r, 1) {
                std::thread::yield_now();
            }
            // again until it ends: a signal that came just before the
            // sleep itself began is handled and leaves it asleep
            while !t.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
                unsafe { libc::pthread_kill(th, libc::SIGUSR2) };
            }
            let (got, took) = t.join().unwrap();
            println!("eventfd {efd}: a SIGUSR2 to the sleeping reader: {got:?} after {took:?}");
            assert_eq!(got, Err(LaneErr::Interrupted));
            assert!(took < Duration::from_secs(10));
        });
        unsafe { libc::close(e) };
    }
}

/// The daemon's mover (pump.rs): end A's region (A on side A, the daemon
/// on B) into end B's region (B on side A): every byte once, in order,
/// each chunk seen on its way, a full destination holding the rest in
/// the source (never dropped), the end passed on after the last byte.
#[test]
fn the_pump_moves_every_byte_once_in_order_and_holds_back_on_a_full_ring() {
    use super::pump::{Pumped, pump};
    for framing in [Framing::Stream, Framing::Record] {
        let (_fa, ra) = direct([4096, 4096]);
        let (_fb, rb) = direct([4096, 256]);
        let (mut a_w, _a_r) = ra.end(Side::A, framing);
        let (_d_wa, mut d_ra) = ra.end(Side::B, framing);
        let (mut d_wb, _d_rb) = rb.end(Side::B, framing);
        let (_b_w, mut b_r) = rb.end(Side::A, framing);
        let mut sent = Vec::new();
        let mut seen = Vec::new();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        let mut p = 0u64;
        for round in 0..200u64 {
            let n = 1 + (round * 37 % 120) as usize;
            let msg: Vec<u8> = (0..n).map(|i| pat(p + i as u64)).collect();
            if a_w.write(&msg).is_ok() {
                p += n as u64;
                sent.push(msg);
            }
            let r = pump(&mut d_ra, &mut d_wb, framing, &mut buf, 1 << 20, |c| {
                seen.push(c.to_vec())
            })
            .expect("pump");
            assert!(!r.fin);
            // B reads only every third round: the 256-byte ring fills.
            if round % 3 == 0 {
                drain_into(&mut b_r, framing, &mut got);
            }
        }
        a_w.shutdown();
        let mut last = Pumped::default();
        for _ in 0..100 {
            last = pump(&mut d_ra, &mut d_wb, framing, &mut buf, 1 << 20, |c| {
                seen.push(c.to_vec())
            })
            .expect("pump");
            drain_into(&mut b_r, framing, &mut got);
            if last.fin {
                break;
            }
        }
        println!(
            "{framing:?}: {} messages sent, {} chunks seen, last {last:?}",
            sent.len(),
            seen.len()
        );
        assert!(last.fin, "the end passed on");
        let flat = |v: &[Vec<u8>]| v.concat();
        assert_eq!(
            flat(&seen),
            flat(&sent),
            "the taps saw every byte once, in order"
        );
        assert_eq!(flat(&got), flat(&sent), "B read every byte once, in order");
        if framing == Framing::Record {
            assert_eq!(seen, sent, "records whole");
            assert_eq!(got, sent, "records whole");
        }
        let mut one = [0u8; 8];
        match framing {
            Framing::Stream => assert_eq!(b_r.read(&mut one, false), Ok(0)),
            Framing::Record => assert_eq!(b_r.read_record(&mut one, false), Ok(None)),
        }
    }
}

fn drain_into(r: &mut Reader, framing: Framing, got: &mut Vec<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    loop {
        match framing {
            Framing::Stream => match r.read(&mut buf, false) {
                Ok(n) if n > 0 => got.push(buf[..n].to_vec()),
                _ => return,
            },
            Framing::Record => match r.read_record(&mut buf, false) {
                Ok(Some(rec)) => got.push(buf[..rec.copied].to_vec()),
                _ => return,
            },
        }
    }
}

/// A source whose writer lies (a tail past the ring, a record length past
/// its bytes) is the source's corruption: nothing of it reaches B.
#[test]
fn the_pump_reports_a_scribbled_source_and_moves_nothing_of_it() {
    use super::pump::{PumpErr, pump};
    for framing in [Framing::Stream, Framing::Record] {
        let (_fa, ra) = direct([4096, 4096]);
        let (_fb, rb) = direct([4096, 4096]);
        let (_d_wa, mut d_ra) = ra.end(Side::B, framing);
        let (mut d_wb, _d_rb) = rb.end(Side::B, framing);
        ra.word(dir_word(0, OFF_TAIL))
            .store(1 << 20, Ordering::SeqCst);
        let mut buf = vec![0u8; 4096];
        let mut seen = 0;
        let r = pump(&mut d_ra, &mut d_wb, framing, &mut buf, 1 << 20, |_| {
            seen += 1
        });
        println!("{framing:?}: a tail past the ring: {r:?}, {seen} chunks seen");
        assert!(
            matches!(r, Err(PumpErr::Source(LaneErr::Corrupt(_)))),
            "{r:?}"
        );
        assert_eq!(seen, 0);
        assert_eq!(d_wb.position(), 0, "nothing written on");
    }
}

/// A stream writer marks where each write ended (the way down splits the
/// unread bytes there, as Linux's skbs: bufs.sh's SIOCOUTQ); the last
/// `MARKS` writes are kept, and a record ring marks nothing.
#[test]
fn a_stream_writer_marks_its_last_writes_ends() {
    let (_fd, r) = direct([4096, 4096]);
    let (mut w, _) = r.end(Side::A, Framing::Stream);
    assert_eq!(w.write(b"12345"), Ok(5));
    assert_eq!(w.write(b"123"), Ok(3));
    let marks = |d| -> Vec<u32> {
        r.marks(d)
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .filter(|&m| m != 0)
            .collect()
    };
    println!("after 5 then 3 bytes: marks {:?}", marks(0));
    assert_eq!(marks(0), [5, 8]);
    for _ in 0..region::MARKS {
        w.write(b"x").expect("room");
    }
    let mut got = marks(0);
    got.sort_unstable();
    println!(
        "after {} more 1-byte writes: {} marks, {:?}..",
        region::MARKS,
        got.len(),
        &got[..3]
    );
    assert_eq!(got, (9..9 + region::MARKS as u32).collect::<Vec<_>>());
    let (_fd2, r2) = direct([4096, 4096]);
    let (mut w2, _) = r2.end(Side::B, Framing::Record);
    w2.write(b"rec").expect("room");
    assert!(
        r2.marks(1).iter().all(|m| m.load(Ordering::Relaxed) == 0),
        "a record ring marks nothing"
    );
}

/// An end's reader and writer threads asleep at once without a timeout
/// sleep on their futex words, not on the eventfd they share with the
/// end's pollers: the peer's wake-up for the reader reaches it, and no
/// sleep waits out a slice (ring.rs `SLICE`). Before, each wake-up on the
/// eventfd woke both, and the writer, draining it first, left the reader
/// asleep for the rest of its 100 ms slice: 200 rounds of one byte to the
/// sleeping reader, the writer asleep for room throughout, and the rounds
/// that took a slice or more counted.
#[test]
fn untimed_sleeps_of_an_ends_reader_and_writer_lose_no_wake_up() {
    const ROUNDS: u32 = 200;
    let (_fd, r) = direct([64, 64]);
    let (mut aw, mut ar) = r.end(Side::A, Framing::Stream);
    let (mut bw, mut br) = r.end(Side::B, Framing::Stream);
    let (f, [a, b]) = eventfd_notifies();
    aw.set_notify(a);
    ar.set_notify(a);
    bw.set_notify(b);
    br.set_notify(b);
    while aw.write(&[0u8; 16]).is_ok() {}
    let (tx, rx) = std::sync::mpsc::channel();
    let mut slow = 0;
    std::thread::scope(|s| {
        let writer = s.spawn(move || aw.wait_writable(16, 0, None));
        s.spawn(move || {
            let mut buf = [0u8; 8];
            for round in 0..ROUNDS {
                while ar.read(&mut buf, false) == Err(LaneErr::WouldBlock) {
                    ar.wait_readable(0, None).expect("reader");
                }
                tx.send(round).unwrap();
            }
        });
        while !reader_asleep(&r, 1) {
            std::thread::yield_now();
        }
        for round in 0..ROUNDS {
            let t = Instant::now();
            assert_eq!(bw.write(&[7]), Ok(1));
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(round));
            slow += usize::from(t.elapsed() >= Duration::from_millis(100));
            // (the reader back asleep before the next byte)
            while round + 1 < ROUNDS && !reader_asleep(&r, 1) {
                std::thread::yield_now();
            }
        }
        // Room for the writer, which wakes and ends.
        let mut buf = [0u8; 64];
        assert!(br.read(&mut buf, false).is_ok());
        assert_eq!(writer.join().unwrap(), Ok(()));
    });
    println!("rounds of a slice or more: {slow} of {ROUNDS}");
    assert!(slow <= 2, "{slow} of {ROUNDS} rounds waited out a slice");
    for fd in f {
        unsafe { libc::close(fd) };
    }
}

/// An end's reader and writer threads asleep at once share its eventfd:
/// the writer (its ring full) waking first and draining the eventfd must
/// not leave the reader asleep with a byte there for long. 500 rounds of
/// one byte each to the sleeping reader, the writer asleep throughout.
#[test]
fn an_ends_reader_and_writer_asleep_at_once_both_see_their_wake_ups() {
    const ROUNDS: u32 = 500;
    let (_fd, r) = direct([64, 64]);
    let (mut aw, mut ar) = r.end(Side::A, Framing::Stream);
    let (mut bw, _) = r.end(Side::B, Framing::Stream);
    let (f, [a, b]) = eventfd_notifies();
    aw.set_notify(a);
    ar.set_notify(a);
    bw.set_notify(b);
    // A's outgoing ring full: its writer sleeps for room nobody makes.
    while aw.write(&[0u8; 16]).is_ok() {}
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match aw.wait_writable(16, 0, Some(Duration::from_millis(50))) {
                    Ok(()) | Err(LaneErr::TimedOut) => {}
                    Err(e) => panic!("writer: {e:?}"),
                }
            }
        });
        s.spawn(move || {
            let mut buf = [0u8; 8];
            for round in 0..ROUNDS {
                loop {
                    match ar.read(&mut buf, false) {
                        Ok(1) => break,
                        Ok(n) => panic!("round {round}: {n} bytes"),
                        Err(LaneErr::WouldBlock) => {
                            match ar.wait_readable(0, Some(Duration::from_secs(2))) {
                                Ok(()) => {}
                                Err(e) => panic!(
                                    "round {round}: the reader slept on with a byte there ({e:?})"
                                ),
                            }
                        }
                        Err(e) => panic!("round {round}: {e:?}"),
                    }
                }
                tx.send(round).unwrap();
            }
        });
        let mut worst = Duration::ZERO;
        for round in 0..ROUNDS {
            let t = Instant::now();
            assert_eq!(bw.write(&[7]), Ok(1));
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(round));
            worst = worst.max(t.elapsed());
        }
        println!("worst round {worst:?}");
        // A wake-up lost slept out the reader's 2 s timeout; a slice of
        // the sleep (ring.rs `SLICE`) finds the byte at most 100 ms late.
        assert!(worst < Duration::from_secs(1), "a round took {worst:?}");
        stop.store(true, Ordering::Relaxed);
    });
    for fd in f {
        unsafe { libc::close(fd) };
    }
}

/// Whether direction `d`'s reader sleeps: a thread on the futex word, or
/// a sleep with a timeout on the end's eventfd (counted with the pollers).
fn reader_asleep(r: &Region, d: usize) -> bool {
    [region::OFF_READER_SLEEPING, region::OFF_READER_WAITING]
        .iter()
        .any(|&off| r.word(dir_word(d, off)).load(Ordering::SeqCst) != 0)
}

/// Two eventfds, end A's and end B's, as the library sets them (each end's
/// `mine`, the other's `peer`): the descriptors and each end's Notify.
fn eventfd_notifies() -> ([i32; 2], [Notify; 2]) {
    let e = || unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    let f = [e(), e()];
    let n = |i: usize| Notify::Eventfd {
        mine: f[i],
        peer: f[1 - i],
        hup: -1,
    };
    (f, [n(0), n(1)])
}

/// A region whose writers are charged as Linux's senders (`with_budgets`),
/// both with SO_SNDBUF `sndbuf`, rings sized as the daemon sizes them.
fn charged(sndbuf: u32, framing: Framing) -> (OwnedFd, Region) {
    let bytes = region::ring_bytes_for(sndbuf as usize, framing).next_power_of_two() as u32;
    let (fd, r) = Region::create([bytes, bytes]).expect("create");
    r.set_state(State::Direct);
    (fd, r.with_budgets([sndbuf, sndbuf], framing))
}

/// The kernel's counts (tests/conformance's stream_backpressure_by_size and
/// blocking scenarios, measured): 278 sends of 100 bytes fill the default
/// 212992, 44 of 4096 stream bytes, 26 records of 4096; a write's charge
/// comes back when it is read whole, not before; a sleeping writer is
/// writable again at a quarter.
#[test]
fn a_charged_writer_takes_what_linux_takes() {
    for (framing, size, linux) in [
        (Framing::Stream, 100, 278),
        (Framing::Stream, 4096, 44),
        (Framing::Record, 100, 278),
        (Framing::Record, 4096, 26),
    ] {
        let (_fd, r) = charged(212992, framing);
        let (mut w, _) = r.end(Side::A, framing);
        let (_, mut rd) = r.end(Side::B, framing);
        let data = vec![7u8; size];
        let mut n = 0;
        while w.write(&data) == Ok(size) {
            n += 1;
        }
        println!(
            "{framing:?} writes of {size}: {n} taken, charged {:?}",
            w.charge()
        );
        assert_eq!(n, linux, "{framing:?} {size}");
        assert_eq!(w.write(&data), Err(LaneErr::WouldBlock));
        assert!(!w.writable(size).unwrap());
        let mut buf = vec![0u8; size];
        if framing == Framing::Stream {
            // Part of the first write read: its skb is still queued.
            assert_eq!(rd.read(&mut buf[..size - 1], false), Ok(size - 1));
            assert_eq!(w.write(&data), Err(LaneErr::WouldBlock));
            assert_eq!(rd.read(&mut buf[..1], false), Ok(1));
        } else {
            assert_eq!(rd.read_record(&mut buf, false).unwrap().unwrap().len, size);
        }
        // The first write read whole: one more goes.
        assert_eq!(w.write(&data), Ok(size));
        assert_eq!(w.write(&data), Err(LaneErr::WouldBlock));
        // Writable (unix_writable) only once at most a quarter is charged.
        let mut read = 0;
        while w.charge().unwrap() * 4 > 212992 {
            assert!(!w.writable(1).unwrap());
            match framing {
                Framing::Stream => rd.read(&mut buf, false).map(|_| ()).unwrap(),
                Framing::Record => rd.read_record(&mut buf, false).map(|_| ()).unwrap(),
            }
            read += 1;
        }
        println!("  writable again after {read} more reads");
        assert!(w.writable(1).unwrap());
        assert_eq!(
            super::ready::look(&r, 0).unwrap().mask & super::ready::OUT,
            super::ready::OUT,
            "poll says so too"
        );
    }
    // A stream write is cut into skbs of stream_chunk_max, each taken while
    // less than SO_SNDBUF is charged: a 300000-byte write on an empty ring
    // takes 219264 (Linux: blocking_stream_write_drain_all's 6 skbs).
    let (_fd, r) = charged(212992, Framing::Stream);
    let (mut w, _) = r.end(Side::A, Framing::Stream);
    assert_eq!(w.write(&vec![1u8; 300000]), Ok(219264));
    // A record longer than SO_SNDBUF allows is the daemon's (EMSGSIZE).
    let (_fd, r) = charged(4608, Framing::Record);
    let (mut w, _) = r.end(Side::A, Framing::Record);
    assert_eq!(w.write(&[0; 4577]), Err(LaneErr::TooBig));
    assert_eq!(w.write(&[0; 4576]), Ok(4576));
}

/// Rings sized by `ring_bytes_for` never fill before the charges say so:
/// whatever the write sizes, a writer is refused only with its budget
/// spent, and every byte reads back in order.
#[test]
fn a_charged_ring_holds_whatever_the_budget_lets_in() {
    let mut rng = Rng(30);
    for sndbuf in [4608u32, 20000, 212992, 425984] {
        for framing in [Framing::Stream, Framing::Record] {
            let (_fd, r) = charged(sndbuf, framing);
            let (mut w, _) = r.end(Side::A, framing);
            let (_, mut rd) = r.end(Side::B, framing);
            let most = match framing {
                Framing::Stream => 3 * sndbuf as usize,
                Framing::Record => crate::skb::message_max(sndbuf as usize),
            };
            let mut sent = VecDeque::new();
            for round in 0..200 {
                let len = match rng.below(3) {
                    0 => rng.below(200) as usize,
                    _ => rng.below(most as u64 + 1) as usize,
                };
                let data: Vec<u8> = (0..len).map(|i| (i + round) as u8).collect();
                match w.write(&data) {
                    Ok(n) => sent.extend(std::iter::once(data[..n].to_vec())),
                    Err(LaneErr::WouldBlock) => {
                        let c = w.charge().unwrap();
                        assert!(c >= sndbuf as usize, "{framing:?} {sndbuf}: refused at {c}");
                    }
                    Err(e) => panic!("{framing:?} {sndbuf}: {e:?}"),
                }
                // Read some now and then, to wrap the ring.
                while rng.below(3) == 0 {
                    let Some(want) = sent.pop_front() else { break };
                    let mut buf = vec![0u8; want.len()];
                    match framing {
                        Framing::Stream => assert!(rd.read_exact(&mut buf, 0).unwrap()),
                        Framing::Record => {
                            let got = rd.read_record(&mut buf, false).unwrap().unwrap();
                            assert_eq!(got.len, want.len());
                        }
                    }
                    assert_eq!(buf, want);
                }
            }
        }
    }
}

/// A peer that scribbles a charged writer's marks, writes word or ledger:
/// the writer finds it (Corrupt) or is charged wrongly while bytes are
/// unread; once they are read it writes again; nothing strays or hangs,
/// and poll's look never says writable where the write then blocks.
#[test]
fn a_peer_scribbling_a_charged_writers_marks_spoils_only_that_connection() {
    #[derive(Clone, Copy, Debug)]
    enum Target {
        Mark(usize),
        Writes,
        /// The ledger's oldest write not given back (its low half).
        LedgerAt,
        /// What it owes (its high half).
        LedgerCharge,
    }
    // The first, the oldest unread's start, one between, the newest.
    let targets = [0usize, 1, 20, 42, 43, region::MARKS - 1]
        .map(Target::Mark)
        .into_iter()
        .chain([Target::Writes, Target::LedgerAt, Target::LedgerCharge]);
    let cases: Vec<_> = targets.flat_map(|t| (0..8).map(move |k| (t, k))).collect();
    for framing in [Framing::Stream, Framing::Record] {
        for &(target, k) in &cases {
            let (_fd, r) = charged(212992, framing);
            let (mut w, _) = r.end(Side::A, framing);
            let (_, mut rd) = r.end(Side::B, framing);
            // Full (44 stream writes of 4000, 26 records), the first
            // stream write read but a byte.
            while w.write(&[3; 4000]).is_ok() {}
            let mut buf = [0u8; 4000];
            if framing == Framing::Stream {
                assert_eq!(rd.read(&mut buf[..3999], false), Ok(3999));
            }
            let ledger = dir_word(0, region::OFF_LEDGER);
            let word = match target {
                Target::Mark(i) => &r.marks(0)[i],
                Target::Writes => r.word(dir_word(0, region::OFF_WRITES)),
                Target::LedgerAt => r.word(ledger),
                Target::LedgerCharge => r.word(ledger + 4),
            };
            let old = word.load(Ordering::SeqCst);
            let v = [
                0,
                1,
                4,
                u32::MAX,
                old.wrapping_add(4),
                old.wrapping_sub(4),
                1 << 20,
                9,
            ][k];
            word.store(v, Ordering::SeqCst);
            let poll_out = super::ready::look(&r, 0).unwrap().mask & super::ready::OUT != 0;
            let t = Instant::now();
            let wrote = w.write(&[4; 100]);
            let charge = w.charge();
            assert!(t.elapsed() < Duration::from_secs(1));
            let case = format!("{framing:?} {target:?} from {old} to {v}");
            println!("{case}: poll writable {poll_out}, write {wrote:?}");
            if poll_out {
                // Poll said writable: the write goes, or finds the lie.
                assert!(
                    !matches!(wrote, Err(LaneErr::WouldBlock)),
                    "{case}: poll says writable, write blocks"
                );
            }
            if matches!(wrote, Err(LaneErr::Corrupt(_))) {
                continue;
            }
            // Not found: the reader takes everything, and the writer
            // then owes nothing, whatever the marks say.
            while match framing {
                Framing::Stream => rd.read(&mut buf, false).is_ok_and(|n| n > 0),
                Framing::Record => rd.read_record(&mut buf, false).is_ok_and(|g| g.is_some()),
            } {}
            assert_eq!(w.charge(), Ok(0), "{case} (charged {charge:?})");
            assert_eq!(w.write(&[5; 10]), Ok(10));
        }
    }
}

/// A charged write looks only at the marks of the writes the reader
/// passed since the writer's last look (ring.rs `credit`), not at every
/// unread one's: a ring holding hundreds of small unread writes (hackbench
/// -T's 100-byte writes) costs each write a few loads, not hundreds. A
/// scribbled mark of an unread write is not seen by the writes after it;
/// it is once the reader passes that write (then Corrupt, or a charge that
/// is wrong until the ring is empty). Before, each write summed every
/// unread write's charge from the marks, and found the scribble at once.
#[test]
fn a_charged_write_looks_only_at_the_marks_the_reader_passed() {
    for framing in [Framing::Stream, Framing::Record] {
        let (_fd, r) = charged(212992, framing);
        let (mut w, _) = r.end(Side::A, framing);
        let (_, mut rd) = r.end(Side::B, framing);
        for _ in 0..200 {
            assert_eq!(w.write(&[1; 100]), Ok(100));
        }
        let mut buf = [0u8; 100];
        for _ in 0..10 {
            match framing {
                Framing::Stream => assert_eq!(rd.read(&mut buf, false), Ok(100)),
                Framing::Record => assert!(rd.read_record(&mut buf, false).unwrap().is_some()),
            }
        }
        // The 150th write's end, 140 writes after the reader's head.
        r.marks(0)[149].store(0xdead_beef, Ordering::SeqCst);
        let mut taken = 0;
        while w.write(&[2; 100]) == Ok(100) {
            taken += 1;
        }
        println!("{framing:?}: {taken} writes after the scribble");
        // 278 fill 212992; 10 were read: 88 more.
        assert_eq!(taken, 278 + 10 - 200, "{framing:?}");
        assert_eq!(w.write(&[2; 100]), Err(LaneErr::WouldBlock));
        let mut found = None;
        for _ in 0..278 {
            let got = match framing {
                Framing::Stream => rd.read(&mut buf, false).map(|_| ()),
                Framing::Record => rd.read_record(&mut buf, false).map(|_| ()),
            };
            assert_eq!(got, Ok(()));
            if let Err(e) = w.charge() {
                found = Some(e);
                break;
            }
        }
        println!("{framing:?}: once read past it: {found:?}");
        assert!(matches!(found, Some(LaneErr::Corrupt(_))), "{found:?}");
    }
}

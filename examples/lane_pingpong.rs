//! The fast lane's ceiling (issue 30 stage a; scripts/bench row 3l): a
//! 100-byte ping-pong between two processes (fork) over one lane region
//! (`udsfs_proto::lane`), against the same over a kernel AF_UNIX stream
//! socketpair. Prints `RESULT round_trips_per_s N` and
//! `RESULT cpu_us_per_round_trip N` (both processes' user+system time).
//!
//!     lane_pingpong --mode futex|eventfd|eventfd-level|kernel|kernel-timeo|kernel-poll|kernel-epoll [--iters N] [--spin S]
//!     lane_pingpong --mode connect --path P [--iters N]
//!
//! kernel: a socketpair, fork, write/read (through `udsfs run`, the library
//! makes it a udsfs pair). connect: the same over a connection made by
//! connect() and accept() on the stream socket bound at P (the child
//! connects, the client sends first, as redis's and pgbench's clients do).
//!
//! futex: a side waiting for the other's message sleeps on the region's
//! shared futex word (after S looks at the ring, a bounded spin).
//! eventfd: it sleeps in ppoll on its end's eventfd, which the other side
//! writes when it sees it asleep: the cost of readiness that poll/epoll can
//! watch (stage c) instead of a futex.
//! eventfd-level: each end's eventfd kept readable exactly while its ring
//! has bytes, as level-triggered epoll needs: the writer signals the peer's
//! eventfd on every message (in a ping-pong each one makes the ring
//! non-empty), the reader drains its own once it emptied the ring and looks
//! again after (re-signalling itself if bytes came meanwhile), and a waiting
//! side sleeps in ppoll on it.
//! kernel, kernel-poll, kernel-epoll: a socketpair and fork, write and
//! read; kernel-poll waits in poll before each read, kernel-epoll in a
//! level-triggered epoll set registered before the first byte (stage c's
//! readiness on the lane, through `udsfs run` on a `--lanes` mount).

use std::time::Instant;

use udsfs_proto::lane::{Framing, LaneErr, Notify, Reader, Region, Side, State, Writer, futex};

const SIZE: usize = 100;
const WARMUP: usize = 1000;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn cpu_us(who: i32) -> f64 {
    // SAFETY: a zeroed rusage filled by getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 * 1e6 + v.tv_usec as f64;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Forks; the child runs `child` then _exits. Returns in the parent.
fn fork_child(child: impl FnOnce()) -> libc::pid_t {
    // SAFETY: this process has one thread.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        child();
        // SAFETY: leaves without the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    pid
}

fn wait_child(pid: libc::pid_t) {
    let mut st = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    assert_eq!(st, 0, "the child's status");
}

/// How a side waits and wakes.
#[derive(Clone, Copy, PartialEq)]
enum Wake {
    Futex,
    Eventfd,
    Level,
}

/// One message out: the ring's own wake-up, or (Level) a signal on every one.
fn send(w: &mut Writer, msg: &[u8], spin: u32, wake: Wake, peer: i32) {
    w.write_all(msg, spin).expect("write");
    if wake == Wake::Level {
        futex::eventfd_signal(peer);
    }
}

/// One message in; Level: sleep in ppoll on `mine`, drain it once the ring
/// is empty, look again.
fn receive(r: &mut Reader, buf: &mut [u8], spin: u32, wake: Wake, mine: i32) {
    if wake != Wake::Level {
        assert!(r.read_exact(buf, spin).expect("read"));
        return;
    }
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..], false) {
            Ok(0) => panic!("end of stream"),
            Ok(n) => got += n,
            Err(LaneErr::WouldBlock) => futex::poll_in(mine, -1, None).expect("ppoll"),
            Err(e) => panic!("{e:?}"),
        }
    }
    if r.available().expect("look") == 0 {
        futex::eventfd_drain(mine);
        if r.available().expect("look") > 0 {
            futex::eventfd_signal(mine);
        }
    }
}

fn lane(iters: usize, spin: u32, wake: Wake) -> f64 {
    let eventfd = wake == Wake::Eventfd;
    // As a lane the daemon makes for the default SO_SNDBUF: each write
    // charged against it as Linux charges the sender, the rings sized for it.
    let sndbuf = 212_992;
    let cap = udsfs_proto::lane::region::ring_bytes_for(sndbuf as usize, Framing::Stream)
        .next_power_of_two() as u32;
    let (_fd, region) = Region::create([cap, cap]).expect("lane region");
    let region = region.with_budgets([sndbuf, sndbuf], Framing::Stream);
    region.set_state(State::Direct);
    let efd = |_| {
        // SAFETY: a new eventfd.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd");
        fd
    };
    let fds: Vec<i32> = (0..2).map(efd).collect();
    let notify = |me: usize| {
        if eventfd {
            Notify::Eventfd {
                mine: fds[me],
                peer: fds[1 - me],
                hup: -1,
            }
        } else {
            Notify::Futex
        }
    };
    let msg = [7u8; SIZE];
    let pid = fork_child(|| {
        let (mut w, mut r) = region.end(Side::B, Framing::Stream);
        w.set_notify(notify(1));
        r.set_notify(notify(1));
        let mut buf = [0u8; SIZE];
        for _ in 0..WARMUP + iters {
            receive(&mut r, &mut buf, spin, wake, fds[1]);
            send(&mut w, &buf, spin, wake, fds[0]);
        }
    });
    let (mut w, mut r) = region.end(Side::A, Framing::Stream);
    w.set_notify(notify(0));
    r.set_notify(notify(0));
    let mut buf = [0u8; SIZE];
    let mut start = Instant::now();
    for i in 0..WARMUP + iters {
        if i == WARMUP {
            start = Instant::now();
        }
        send(&mut w, &msg, spin, wake, fds[1]);
        receive(&mut r, &mut buf, spin, wake, fds[0]);
    }
    let rate = iters as f64 / start.elapsed().as_secs_f64();
    assert_eq!(buf, msg);
    wait_child(pid);
    rate
}

/// How `kernel` waits before each read: not at all (a blocking read), in
/// poll, or in a level-triggered epoll set registered before the first byte.
#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Read,
    Poll,
    Epoll,
}

/// Sleeps until `fd` is readable as `how` says (`ep`: its epoll set).
fn wait_in(how: Wait, fd: i32, ep: i32) {
    // SAFETY: a local pollfd / epoll_event.
    let n = unsafe {
        match how {
            Wait::Read => return,
            Wait::Poll => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                libc::poll(&mut p, 1, -1)
            }
            Wait::Epoll => {
                let mut e = libc::epoll_event { events: 0, u64: 0 };
                libc::epoll_wait(ep, &mut e, 1, -1)
            }
        }
    };
    assert_eq!(
        n,
        1,
        "{} of a ping-pong socket",
        if how == Wait::Poll {
            "poll"
        } else {
            "epoll_wait"
        }
    );
}

fn epoll_of(how: Wait, fd: i32) -> i32 {
    if how != Wait::Epoll {
        return -1;
    }
    // SAFETY: a new epoll set and a local epoll_event.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        let mut e = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        assert_eq!(
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut e),
            0,
            "epoll_ctl"
        );
        ep
    }
}

/// A sockaddr_un for `path`.
fn sun(path: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(path.len() < a.sun_path.len(), "--path too long");
    for (d, &b) in a.sun_path.iter_mut().zip(path.as_bytes()) {
        *d = b as libc::c_char;
    }
    (
        a,
        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
    )
}

/// A connection over the stream socket bound at `path`: [the accepted end,
/// the connecting end] (the child takes the second after the fork).
fn connected(path: &str) -> [i32; 2] {
    let (a, len) = sun(path);
    let _ = std::fs::remove_file(path);
    // SAFETY: plain socket calls on a local sockaddr_un.
    unsafe {
        let l = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        assert!(l >= 0, "socket");
        let p = &a as *const libc::sockaddr_un as *const libc::sockaddr;
        assert_eq!(libc::bind(l, p, len), 0, "bind {path}");
        assert_eq!(libc::listen(l, 1), 0, "listen");
        let c = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        assert_eq!(libc::connect(c, p, len), 0, "connect {path}");
        let s = libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut());
        assert!(s >= 0, "accept");
        libc::close(l);
        let _ = std::fs::remove_file(path);
        [s, c]
    }
}

fn kernel(iters: usize, how: Wait, path: Option<&str>, timeo: bool) -> f64 {
    let mut sv = [0i32; 2];
    if let Some(p) = path {
        sv = connected(p);
    } else {
        // SAFETY: fills two fds.
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
        assert_eq!(rc, 0, "socketpair");
    }
    if timeo {
        // A receive timeout on both ends (servers set one), never reached.
        let tv = libc::timeval {
            tv_sec: 30,
            tv_usec: 0,
        };
        for fd in sv {
            // SAFETY: a live timeval of the size given.
            let rc = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&tv as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0, "SO_RCVTIMEO");
        }
    }
    let io = |fd: i32, buf: &mut [u8], write: bool| {
        let mut done = 0;
        while done < buf.len() {
            // SAFETY: within buf.
            let n = unsafe {
                let p = buf.as_mut_ptr().add(done) as *mut libc::c_void;
                if write {
                    libc::write(fd, p, buf.len() - done)
                } else {
                    libc::read(fd, p, buf.len() - done)
                }
            };
            assert!(n > 0, "kernel socket i/o");
            done += n as usize;
        }
    };
    let pid = fork_child(|| {
        let mut buf = [0u8; SIZE];
        let ep = epoll_of(how, sv[1]);
        for _ in 0..WARMUP + iters {
            wait_in(how, sv[1], ep);
            io(sv[1], &mut buf, false);
            io(sv[1], &mut buf, true);
        }
    });
    let mut msg = [7u8; SIZE];
    let mut buf = [0u8; SIZE];
    let ep = epoll_of(how, sv[0]);
    let mut start = Instant::now();
    for i in 0..WARMUP + iters {
        if i == WARMUP {
            start = Instant::now();
        }
        io(sv[0], &mut msg, true);
        wait_in(how, sv[0], ep);
        io(sv[0], &mut buf, false);
    }
    let rate = iters as f64 / start.elapsed().as_secs_f64();
    wait_child(pid);
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = arg(&args, "--mode").unwrap_or_else(|| "futex".into());
    let iters: usize = arg(&args, "--iters").map_or(100_000, |v| v.parse().expect("--iters"));
    let spin: u32 = arg(&args, "--spin").map_or(0, |v| v.parse().expect("--spin"));
    let cpu0 = cpu_us(libc::RUSAGE_SELF) + cpu_us(libc::RUSAGE_CHILDREN);
    let rate = match mode.as_str() {
        "futex" => lane(iters, spin, Wake::Futex),
        "eventfd" => lane(iters, spin, Wake::Eventfd),
        "eventfd-level" => lane(iters, spin, Wake::Level),
        "kernel" => kernel(iters, Wait::Read, None, false),
        "kernel-timeo" => kernel(iters, Wait::Read, None, true),
        "kernel-poll" => kernel(iters, Wait::Poll, None, false),
        "kernel-epoll" => kernel(iters, Wait::Epoll, None, false),
        "connect" => kernel(
            iters,
            Wait::Read,
            Some(&arg(&args, "--path").expect("--path")),
            false,
        ),
        m => {
            eprintln!(
                "unknown --mode {m} (futex, eventfd, eventfd-level, kernel, kernel-timeo, kernel-poll, kernel-epoll, connect)"
            );
            std::process::exit(2);
        }
    };
    let cpu = cpu_us(libc::RUSAGE_SELF) + cpu_us(libc::RUSAGE_CHILDREN) - cpu0;
    println!("# {mode} spin {spin}: {iters} round trips of {SIZE} bytes");
    println!("RESULT round_trips_per_s {rate:.0}");
    println!(
        "RESULT cpu_us_per_round_trip {:.2}",
        cpu / (iters + WARMUP) as f64
    );
}

//! The measuring half of the benchmark suite; `scripts/bench` runs it and
//! prints the table. Each subcommand measures one thing and prints lines
//! `RESULT key value` (and free text the script passes through).
//!
//!     udsfs_bench hackbench-engine --groups G --loops L
//!     udsfs_bench message-cost --rule LINE|--stalled-capture --messages N --blocks B
//!     udsfs_bench hackbench-fs --dir MOUNT --mode udsfs|null --groups G --loops L [--passcred]
//!     udsfs_bench pingpong --mode udsfs|null|kernel [--dir MOUNT] --iters N
//!     udsfs_bench bind-scale --buckets B --threads T --per-thread 1024 --rounds R
//!     udsfs_bench gc-pressure --inflight 32000 --samples N
//!     udsfs_bench memory-engine --sockets N --messages N
//!     udsfs_bench memory-kernel --sockets N --messages N
//!     udsfs_bench memory-daemon --dir MOUNT --pid PID --sockets N
//!
//! The hackbench pattern is rt-tests' `hackbench -T`: G groups of 20 senders and
//! 20 receivers; each receiver owns a stream socketpair, each sender of the group
//! sends L messages of 100 bytes to every receiver of its group, a receiver reads
//! each message whole (looping on short reads). The clock runs from the moment
//! every thread is created and waiting until the last one is done.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use nix::errno::Errno;
use udsfs::engine::tap::Tap;
use udsfs::engine::{
    Addr, Caller, Config, Engine, RecvFlags, SendMsg, SockType, Socket, ThreadWaiter, Waiter,
};

const DATASIZE: usize = 100;
const GROUP: usize = 20;

#[derive(Parser)]
#[command(name = "udsfs_bench", about = "udsfs benchmarks; see scripts/bench")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Udsfs,
    /// The null FS; for ping-pong, two processes in lockstep.
    Null,
    /// Ping-pong only: one process making a round trip's four null requests.
    NullSerial,
    Kernel,
}

#[derive(Subcommand)]
enum Cmd {
    /// hackbench -T through the engine's in-process API (stream socketpairs).
    HackbenchEngine {
        #[arg(long, default_value_t = 4)]
        groups: usize,
        #[arg(long, default_value_t = 1000)]
        loops: usize,
    },
    /// hackbench -T through `data` files of a udsfs mount or of the null FS.
    HackbenchFs {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, value_enum)]
        mode: Mode,
        #[arg(long, default_value_t = 1)]
        groups: usize,
        #[arg(long, default_value_t = 100)]
        loops: usize,
        /// `passcred on` on every receiver (udsfs only).
        #[arg(long)]
        passcred: bool,
    },
    /// 100-byte stream round trips between two processes.
    Pingpong {
        #[arg(long, value_enum)]
        mode: Mode,
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        #[arg(long, default_value_t = 20000)]
        iters: usize,
    },
    /// Seed 003: threads creating and binding sockets in parallel.
    BindScale {
        #[arg(long, default_value_t = 256)]
        buckets: usize,
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 1024)]
        per_thread: usize,
        #[arg(long, default_value_t = 20)]
        rounds: usize,
    },
    /// Seed 004: 1-byte sends with no rights, with and without sockets in flight.
    GcPressure {
        #[arg(long, default_value_t = 32000)]
        inflight: usize,
        #[arg(long, default_value_t = 300000)]
        samples: usize,
    },
    /// Bytes per idle socket and per queued message in the engine (RSS delta).
    MemoryEngine {
        #[arg(long, default_value_t = 100000)]
        sockets: usize,
        #[arg(long, default_value_t = 100000)]
        messages: usize,
    },
    /// The kernel's slab growth for the same sockets and messages.
    MemoryKernel {
        #[arg(long, default_value_t = 100000)]
        sockets: usize,
        #[arg(long, default_value_t = 100000)]
        messages: usize,
    },
    /// What a fault rule, or a capture that stopped reading, costs the
    /// engine's message path: one thread sends and receives 100-byte
    /// messages on a stream socketpair, a new caller for each (as each FUSE
    /// request makes one), in blocks of N messages; the rule stands, or the
    /// capture is attached, in every other pair of blocks (off on on off ...).
    MessageCost {
        #[arg(long, required_unless_present_any = ["stalled_capture", "queued_bound"])]
        rule: Option<String>,
        /// A capture whose buffer is full (it drops) instead of a rule.
        #[arg(long, conflicts_with_all = ["rule", "queued_bound"])]
        stalled_capture: bool,
        /// The bound on all queues' bytes (--max-queued-bytes, default) vs
        /// none (0), instead of a rule.
        #[arg(long, conflicts_with = "rule")]
        queued_bound: bool,
        #[arg(long, default_value_t = 20000)]
        messages: usize,
        #[arg(long, default_value_t = 40)]
        blocks: usize,
    },
    /// The daemon's RSS growth with N sockets open through the mount.
    MemoryDaemon {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        pid: i32,
        #[arg(long, default_value_t = 100000)]
        sockets: usize,
    },
}

fn result(key: &str, value: impl std::fmt::Display) {
    println!("RESULT {key} {value}");
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::HackbenchEngine { groups, loops } => {
            let t = hackbench_engine(groups, loops);
            result("seconds", format!("{t:.4}"));
            result(
                "msgs_per_s",
                format!("{:.0}", (groups * GROUP * GROUP * loops) as f64 / t),
            );
        }
        Cmd::HackbenchFs {
            dir,
            mode,
            groups,
            loops,
            passcred,
        } => {
            let t = hackbench_fs(&dir, mode, groups, loops, passcred);
            result("seconds", format!("{t:.4}"));
            result(
                "msgs_per_s",
                format!("{:.0}", (groups * GROUP * GROUP * loops) as f64 / t),
            );
        }
        Cmd::Pingpong { mode, dir, iters } => {
            let (rate, worst) = pingpong(mode, &dir, iters);
            result("round_trips_per_s", format!("{rate:.0}"));
            if let Some(worst) = worst {
                result("worst_us", worst.as_micros());
            }
        }
        Cmd::BindScale {
            buckets,
            threads,
            per_thread,
            rounds,
        } => bind_scale(buckets, threads, per_thread, rounds),
        Cmd::GcPressure { inflight, samples } => gc_pressure(inflight, samples),
        Cmd::MemoryEngine { sockets, messages } => memory_engine(sockets, messages),
        Cmd::MemoryKernel { sockets, messages } => memory_kernel(sockets, messages),
        Cmd::MemoryDaemon { dir, pid, sockets } => memory_daemon(&dir, pid, sockets),
        Cmd::MessageCost {
            rule,
            stalled_capture,
            queued_bound,
            messages,
            blocks,
        } => message_cost(
            rule.as_deref(),
            stalled_capture,
            queued_bound,
            messages,
            blocks,
        ),
    }
}

// ---------------------------------------------------------------- engine hackbench

/// Sends all of `data` on `s`, parking on the waiter while the queue is full.
fn engine_send_all(eng: &Engine, s: &Arc<Socket>, data: &[u8], c: &Caller, w: &WaitPair) {
    let mut off = 0;
    while off < data.len() {
        match eng.sendmsg(s, SendMsg::new(&data[off..]), c, Some(&w.waiter)) {
            Ok(n) => off += n,
            Err(Errno::EAGAIN) => w.thread.wait(),
            Err(e) => panic!("send: {e}"),
        }
    }
}

/// Receives exactly `len` bytes from stream socket `s`.
fn engine_recv_exact(eng: &Engine, s: &Arc<Socket>, len: usize, w: &WaitPair) {
    let mut done = 0;
    while done < len {
        match eng.recvmsg(s, RecvFlags::new(len - done), Some(&w.waiter)) {
            Ok(r) if r.data.is_empty() => panic!("recv: unexpected EOF"),
            Ok(r) => done += r.data.len(),
            Err(Errno::EAGAIN) => w.thread.wait(),
            Err(e) => panic!("recv: {e}"),
        }
    }
}

struct WaitPair {
    thread: Arc<ThreadWaiter>,
    waiter: Waiter,
}

impl WaitPair {
    fn new() -> WaitPair {
        let thread = ThreadWaiter::new();
        let waiter: Waiter = thread.clone();
        WaitPair { thread, waiter }
    }
}

/// The barrier every reader and writer of `groups` groups and the timing thread
/// wait at before a hackbench round starts.
fn start_line(groups: usize) -> Arc<Barrier> {
    Arc::new(Barrier::new(groups * 2 * GROUP + 1))
}

/// Hackbench's shape: `groups` groups, each of GROUP pairs made by `pair`
/// with a reader thread on each pair's first end (`reader`), and GROUP writer
/// threads (`writer`) that write to the second end of every pair of the group.
/// Every thread waits at the start line; returns the seconds from there until
/// the last one ended.
fn hackbench_round<R, W>(
    groups: usize,
    mut pair: impl FnMut() -> (R, W),
    mut reader: impl FnMut(R, Arc<Barrier>) -> JoinHandle<()>,
    mut writer: impl FnMut(Arc<Vec<W>>, Arc<Barrier>) -> JoinHandle<()>,
) -> f64 {
    let barrier = start_line(groups);
    let mut handles = Vec::new();
    for _ in 0..groups {
        let mut writers = Vec::new();
        for _ in 0..GROUP {
            let (rd, wr) = pair();
            writers.push(wr);
            handles.push(reader(rd, barrier.clone()));
        }
        let writers = Arc::new(writers);
        for _ in 0..GROUP {
            handles.push(writer(writers.clone(), barrier.clone()));
        }
    }
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().expect("hackbench thread");
    }
    start.elapsed().as_secs_f64()
}

fn hackbench_engine(groups: usize, loops: usize) -> f64 {
    let eng = Engine::new(Config::default());
    let caller = Caller::current();
    let mut all = Vec::new();
    let pair = || {
        let (rd, wr) = eng.socketpair(SockType::Stream, &caller);
        all.push(rd.clone());
        all.push(wr.clone());
        (rd, wr)
    };
    let reader = |rd, barrier: Arc<Barrier>| {
        let eng = eng.clone();
        std::thread::spawn(move || {
            let w = WaitPair::new();
            barrier.wait();
            for _ in 0..GROUP * loops {
                engine_recv_exact(&eng, &rd, DATASIZE, &w);
            }
        })
    };
    let writer = |writers: Arc<Vec<_>>, barrier: Arc<Barrier>| {
        let eng = eng.clone();
        std::thread::spawn(move || {
            let c = Caller::current();
            let w = WaitPair::new();
            let msg = [0u8; DATASIZE];
            barrier.wait();
            for _ in 0..loops {
                for s in writers.iter() {
                    engine_send_all(&eng, s, &msg, &c, &w);
                }
            }
        })
    };
    let t = hackbench_round(groups, pair, reader, writer);
    for s in &all {
        eng.put(s);
    }
    t
}

// ---------------------------------------------------------------- message cost

/// What `message-cost` switches on and off between blocks.
enum Observer {
    Rule(udsfs::fault::Rule),
    Capture(Arc<dyn Tap>, Arc<udsfs::capture::Reader>),
    /// On: an engine that bounds its queues' bytes (the default); off: one
    /// that does not count them.
    QueuedBound(Arc<Engine>),
}

fn message_cost(
    rule: Option<&str>,
    stalled_capture: bool,
    queued_bound: bool,
    messages: usize,
    blocks: usize,
) {
    let unbounded = Config {
        max_queued_bytes: 0,
        ..Config::default()
    };
    let (observer, eng) = match rule {
        Some(r) => (
            Observer::Rule(udsfs::fault::Rule::parse(r).unwrap_or_else(|e| panic!("--rule: {e}"))),
            Engine::new(Config::default()),
        ),
        None if queued_bound => (
            Observer::QueuedBound(Engine::new(Config::default())),
            Engine::new(unbounded),
        ),
        None => {
            assert!(stalled_capture);
            let all = udsfs::capture::Access { uid: 0, all: true };
            let reader =
                udsfs::capture::Reader::new(all, None, Default::default()).expect("capture");
            let tap: Arc<dyn Tap> = reader.clone();
            (
                Observer::Capture(tap, reader),
                Engine::new(Config::default()),
            )
        }
    };
    let me = Caller::current();
    let (tid, uid, gid) = (me.tid, me.fsuid, me.fsgid);
    let pair = |e: &Arc<Engine>| {
        let (a, b) = e.socketpair(SockType::Stream, &me);
        (e.clone(), a, b)
    };
    let off_pair = pair(&eng);
    // The same pair but for the bound, which needs an engine of its own.
    let own_pair = match &observer {
        Observer::QueuedBound(bounded) => Some(pair(bounded)),
        _ => None,
    };
    let on_pair = own_pair.as_ref().unwrap_or(&off_pair);
    let msg = [0u8; DATASIZE];
    let block = |(e, a, b): &(Arc<Engine>, Arc<Socket>, Arc<Socket>)| {
        let t = Instant::now();
        for _ in 0..messages {
            let c = Caller::new(tid, uid, gid);
            assert_eq!(e.sendmsg(a, SendMsg::new(&msg), &c, None), Ok(DATASIZE));
            let got = e.recvmsg(b, RecvFlags::new(DATASIZE), None).expect("recv");
            assert_eq!(got.data.len(), DATASIZE);
        }
        t.elapsed().as_nanos() as f64 / messages as f64
    };
    // Warm up: the status cache, the allocator.
    block(&off_pair);
    block(on_pair);
    if let Observer::Capture(tap, reader) = &observer {
        // Fill the capture's buffer: from then on it drops.
        eng.taps.attach(tap.clone());
        while reader.counts().1 == 0 {
            block(&off_pair);
        }
        eng.taps.detach(tap);
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..blocks {
        if !(i % 4 == 1 || i % 4 == 2) {
            off.push(block(&off_pair));
            continue;
        }
        match &observer {
            Observer::Rule(rule) => {
                let id = eng.faults.add(rule.clone(), 0);
                on.push(block(on_pair));
                // A rule that acted would measure its fault, not the check.
                let acted = eng.faults.list(0).iter().any(|l| l.injected > 0);
                assert!(!acted, "--rule must match none of the messages");
                eng.faults.del(id, 0).expect("del");
            }
            Observer::Capture(tap, reader) => {
                eng.taps.attach(tap.clone());
                let kept = reader.counts().0;
                on.push(block(on_pair));
                eng.taps.detach(tap);
                assert_eq!(
                    reader.counts().0,
                    kept,
                    "the capture kept a record: it was not full"
                );
            }
            Observer::QueuedBound(bounded) => {
                on.push(block(on_pair));
                assert_eq!(
                    bounded.queued.used(),
                    0,
                    "the bound counted every byte back"
                );
            }
        }
    }
    for (e, a, b) in std::iter::once(&off_pair).chain(own_pair.as_ref()) {
        e.put(a);
        e.put(b);
    }
    let (off, on) = (median(&mut off), median(&mut on));
    result("ns_without", format!("{off:.1}"));
    result("ns_with", format!("{on:.1}"));
    result("ns_added", format!("{:.1}", on - off));
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

// ---------------------------------------------------------------- file hackbench

fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn open_mode(p: &Path, read: bool) -> File {
    OpenOptions::new()
        .read(read)
        .write(!read)
        .open(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Opens a udsfs stream pair: (control handle of N, N, M).
fn udsfs_pair(dir: &Path) -> (File, u64, u64) {
    let ctl = open_rw(&dir.join(".udsfs/stream/pair"));
    let mut buf = [0u8; 64];
    let n = (&ctl).read(&mut buf).expect("read pair handle");
    let text = String::from_utf8_lossy(&buf[..n]);
    let mut it = text
        .split_whitespace()
        .map(|x| x.parse::<u64>().expect("id"));
    let (a, b) = (it.next().expect("N"), it.next().expect("M"));
    (ctl, a, b)
}

fn data_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!(".udsfs/sock/{id}/data"))
}

fn write_all_fd(f: &File, data: &[u8]) {
    let mut off = 0;
    while off < data.len() {
        match (&*f).write(&data[off..]) {
            Ok(0) => panic!("write returned 0"),
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("write: {e}"),
        }
    }
}

fn read_exact_fd(f: &File, buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        match (&*f).read(&mut buf[done..]) {
            Ok(0) => panic!("read: unexpected EOF"),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn hackbench_fs(dir: &Path, mode: Mode, groups: usize, loops: usize, passcred: bool) -> f64 {
    let mut ctls = Vec::new();
    let pair = || match mode {
        Mode::Udsfs => {
            let (ctl, n, m) = udsfs_pair(dir);
            if passcred {
                write_all_fd(&ctl, b"passcred on\n");
            }
            let rd = open_mode(&data_path(dir, n), true);
            let wr = open_mode(&data_path(dir, m), false);
            ctls.push(ctl);
            (rd, wr)
        }
        Mode::Null => (
            open_mode(&dir.join("data"), true),
            open_mode(&dir.join("data"), false),
        ),
        Mode::Kernel | Mode::NullSerial => {
            panic!("hackbench-fs: modes udsfs and null only")
        }
    };
    let reader = |rd: File, barrier: Arc<Barrier>| {
        std::thread::spawn(move || {
            let mut buf = [0u8; DATASIZE];
            barrier.wait();
            for _ in 0..GROUP * loops {
                read_exact_fd(&rd, &mut buf);
            }
        })
    };
    let writer = |writers: Arc<Vec<File>>, barrier: Arc<Barrier>| {
        std::thread::spawn(move || {
            let msg = [0u8; DATASIZE];
            barrier.wait();
            for _ in 0..loops {
                for f in writers.iter() {
                    write_all_fd(f, &msg);
                }
            }
        })
    };
    let t = hackbench_round(groups, pair, reader, writer);
    drop(ctls);
    t
}

// ---------------------------------------------------------------- ping-pong

fn fork() -> bool {
    let _ = std::io::stdout().flush();
    // SAFETY: called while this process has one thread; the child only does
    // reads and writes on files it owns, then _exit.
    match unsafe { nix::unistd::fork() }.expect("fork") {
        nix::unistd::ForkResult::Child => true,
        nix::unistd::ForkResult::Parent { .. } => false,
    }
}

const WARMUP: usize = 500;

/// Round trips a second, and (lockstep modes) the slowest round trip measured.
fn pingpong(mode: Mode, dir: &Path, iters: usize) -> (f64, Option<Duration>) {
    let msg = [7u8; DATASIZE];
    let mut buf = [0u8; DATASIZE];
    let (mine, theirs): (File, Option<Box<dyn Fn() -> File>>) = match mode {
        Mode::NullSerial => {
            // The serial floor: the four requests of one round trip (write,
            // read on each side) made back to back by one process.
            let f = open_rw(&dir.join("data"));
            for _ in 0..WARMUP {
                write_all_fd(&f, &msg);
                read_exact_fd(&f, &mut buf);
            }
            let start = Instant::now();
            for _ in 0..iters {
                write_all_fd(&f, &msg);
                read_exact_fd(&f, &mut buf);
                write_all_fd(&f, &msg);
                read_exact_fd(&f, &mut buf);
            }
            return (iters as f64 / start.elapsed().as_secs_f64(), None);
        }
        Mode::Null => return (null_lockstep(dir, iters), None),
        Mode::Kernel => {
            let (a, b) = kernel_stream_pair();
            (a, Some(Box::new(move || b.try_clone().expect("dup"))))
        }
        Mode::Udsfs => {
            let (ctl, n, m) = udsfs_pair(dir);
            let a = open_rw(&data_path(dir, n));
            let p = data_path(dir, m);
            // The control handle keeps M until the child opens its data file.
            let keep = ctl.try_clone().expect("dup");
            (
                a,
                Some(Box::new(move || {
                    let _ = &keep;
                    open_rw(&p)
                })),
            )
        }
    };
    let theirs = theirs.expect("peer");
    if fork() {
        let f = theirs();
        for _ in 0..WARMUP + iters {
            read_exact_fd(&f, &mut buf);
            write_all_fd(&f, &msg);
        }
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut start = Instant::now();
    let mut worst = Duration::ZERO;
    for i in 0..WARMUP + iters {
        if i == WARMUP {
            start = Instant::now();
            worst = Duration::ZERO;
        }
        let t = Instant::now();
        write_all_fd(&mine, &msg);
        read_exact_fd(&mine, &mut buf);
        worst = worst.max(t.elapsed());
    }
    let rate = iters as f64 / start.elapsed().as_secs_f64();
    let _ = nix::sys::wait::wait();
    (rate, Some(worst))
}

/// A kernel AF_UNIX stream socketpair.
fn kernel_stream_pair() -> (File, File) {
    let (a, b) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::Stream,
        None,
        nix::sys::socket::SockFlag::empty(),
    )
    .expect("socketpair");
    (File::from(a), File::from(b))
}

/// The lockstep floor: two processes make the same four null requests per
/// round trip as over udsfs (A writes, B reads, B writes, A reads), and hand
/// the turn to each other over a kernel socketpair (1 byte), as a udsfs
/// round trip hands it over by answering the other side's parked read.
fn null_lockstep(dir: &Path, iters: usize) -> f64 {
    let msg = [7u8; DATASIZE];
    let mut buf = [0u8; DATASIZE];
    let (a, b) = kernel_stream_pair();
    let mut tok = [0u8; 1];
    if fork() {
        drop(a);
        let f = open_rw(&dir.join("data"));
        for _ in 0..WARMUP + iters {
            read_exact_fd(&b, &mut tok);
            read_exact_fd(&f, &mut buf);
            write_all_fd(&f, &msg);
            write_all_fd(&b, &tok);
        }
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    drop(b);
    let f = open_rw(&dir.join("data"));
    let mut start = Instant::now();
    for i in 0..WARMUP + iters {
        if i == WARMUP {
            start = Instant::now();
        }
        write_all_fd(&f, &msg);
        write_all_fd(&a, &tok);
        read_exact_fd(&a, &mut tok);
        read_exact_fd(&f, &mut buf);
    }
    let rate = iters as f64 / start.elapsed().as_secs_f64();
    let _ = nix::sys::wait::wait();
    rate
}

// ---------------------------------------------------------------- bind scaling

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn bind_scale(buckets: usize, threads: usize, per: usize, rounds: usize) {
    let eng = Engine::new(Config {
        hash_buckets: buckets.max(1),
        background_gc: false,
        ..Config::default()
    });
    let mut lat: Vec<u64> = Vec::with_capacity(threads * per * rounds);
    let mut busy = Duration::ZERO;
    for round in 0..rounds {
        let barrier = Arc::new(Barrier::new(threads + 1));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (eng, barrier) = (eng.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let c = Caller::current();
                    let names: Vec<Addr> = (0..per)
                        .map(|i| Addr::Abstract(format!("b{t}-{round}-{i}").into_bytes()))
                        .collect();
                    let mut socks = Vec::with_capacity(per);
                    let mut lat = Vec::with_capacity(per);
                    barrier.wait();
                    for (i, name) in names.iter().enumerate() {
                        let t0 = Instant::now();
                        // socket() files it as unbound (unix_insert_unbound_socket),
                        // bind moves it between buckets under both locks.
                        let s = eng.socket(SockType::Stream, &c);
                        if i % 2 == 0 {
                            eng.autobind(&s, &c).expect("autobind");
                        } else {
                            eng.bind(&s, name, &c).expect("bind");
                        }
                        lat.push(t0.elapsed().as_nanos() as u64);
                        socks.push(s);
                    }
                    for s in &socks {
                        eng.put(s);
                    }
                    lat
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            lat.extend(h.join().expect("bind thread"));
        }
        busy += start.elapsed();
    }
    let n = lat.len();
    lat.sort_unstable();
    result("ops_per_s", format!("{:.0}", n as f64 / busy.as_secs_f64()));
    result("p50_ns", percentile(&lat, 0.5));
    result("p99_ns", percentile(&lat, 0.99));
    result("samples", n);
    // The seed's histogram: 500 ns buckets, under 10 us only.
    let mut hist = [0usize; 21];
    for &l in &lat {
        let b = (l / 500) as usize;
        if b < hist.len() {
            hist[b] += 1;
        }
    }
    let max = hist.iter().copied().max().unwrap_or(1).max(1);
    println!(
        "hash_buckets={buckets}: latency of socket()+bind, {threads} threads x {per} sockets x {rounds} rounds"
    );
    println!("{:>10} : {:>8}  distribution", "nsec", "count");
    for (i, c) in hist.iter().enumerate() {
        let stars = (c * 40).div_ceil(max);
        println!("{:>10} : {:>8} |{:<40}|", i * 500, c, "*".repeat(stars));
    }
    let over = lat.iter().filter(|&&l| l >= 10500).count();
    println!("{:>10} : {:>8}", ">=10500", over);
}

// ---------------------------------------------------------------- GC pressure

/// Latencies of 1-byte dgram sends (no rights) from `a` to its peer `b`.
fn send_latencies(eng: &Engine, a: &Arc<Socket>, b: &Arc<Socket>, n: usize) -> Vec<u64> {
    let c = Caller::current();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        eng.sendmsg(a, SendMsg::new(b"x"), &c, None).expect("send");
        lat.push(t0.elapsed().as_nanos() as u64);
        eng.recvmsg(b, RecvFlags::new(16), None).expect("recv");
    }
    lat.sort_unstable();
    lat
}

fn gc_pressure(inflight: usize, samples: usize) {
    let eng = Engine::new(Config::default());
    let c = Caller::current();
    let (a, b) = eng.socketpair(SockType::Dgram, &c);
    send_latencies(&eng, &a, &b, samples / 10);
    let base = send_latencies(&eng, &a, &b, samples);

    // `inflight` sockets in a chain: pair i rides in a message queued at pair
    // i+1, the last pair is held here, so all are in flight and reachable.
    let build = Instant::now();
    let pairs = inflight / 2;
    let mut prev = eng.socketpair(SockType::Dgram, &c);
    for _ in 0..pairs {
        let next = eng.socketpair(SockType::Dgram, &c);
        let mut rights = vec![prev.0.clone(), prev.1.clone()];
        eng.sendmsg(&next.0, SendMsg::new(b"c").rights(&mut rights), &c, None)
            .expect("send rights");
        assert!(rights.is_empty());
        prev = next;
    }
    let head = prev;
    // A pressure thread that keeps the collector busy: p rides in x's queue
    // (so p is in flight and an edge into p makes the graph maybe-cyclic);
    // each round passes a fresh socket over q -> p, which schedules a
    // collection (more than gc_trigger in flight) and, as a heavy user,
    // waits for the running one. Then takes it back.
    let (x, y) = eng.socketpair(SockType::Dgram, &c);
    let (p, q) = eng.socketpair(SockType::Dgram, &c);
    eng.hold(&p);
    eng.sendmsg(
        &y,
        SendMsg::new(b"p").rights(&mut vec![p.clone()]),
        &c,
        None,
    )
    .expect("park p");
    let built = build.elapsed();
    let total = eng.gc.total();
    let stop = Arc::new(AtomicBool::new(false));
    let pressure = {
        let (eng, stop, p, q) = (eng.clone(), stop.clone(), p.clone(), q.clone());
        std::thread::spawn(move || {
            let c = Caller::current();
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let z = eng.socket(SockType::Dgram, &c);
                eng.sendmsg(&q, SendMsg::new(b"z").rights(&mut vec![z]), &c, None)
                    .expect("pass z");
                let got = eng.recvmsg(&p, RecvFlags::new(16), None).expect("recv z");
                for r in &got.rights {
                    eng.put(r);
                }
                rounds += 1;
            }
            rounds
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let before = eng.gc.stats();
    let t0 = Instant::now();
    let loaded = send_latencies(&eng, &a, &b, samples);
    let dt = t0.elapsed();
    let after = eng.gc.stats();
    stop.store(true, Ordering::Relaxed);
    let rounds = pressure.join().expect("pressure");
    let collections = after.collections - before.collections;
    println!(
        "gc-pressure: {total} sockets in flight (built in {built:.2?}); during the loaded run \
         ({dt:.2?}) the collector ran {collections} collections over them (last took {:.2?}), \
         the rights-passing thread made {rounds} rounds",
        after.last_duration
    );
    result("inflight", total);
    result("collections", collections);
    result(
        "gc_last_ms",
        format!("{:.2}", after.last_duration.as_secs_f64() * 1e3),
    );
    result("base_p50_ns", percentile(&base, 0.5));
    result("base_p99_ns", percentile(&base, 0.99));
    result("load_p50_ns", percentile(&loaded, 0.5));
    result("load_p99_ns", percentile(&loaded, 0.99));
    let _ = (head, x);
}

// ---------------------------------------------------------------- memory

fn rss_kb(pid: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn slab_kb() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("Slab:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn per(delta_kb: u64, n: usize) -> String {
    format!("{:.0}", delta_kb as f64 * 1024.0 / n.max(1) as f64)
}

fn memory_engine(sockets: usize, messages: usize) {
    let eng = Engine::new(Config {
        // One pair holds every message: no sender budget in the way.
        sndbuf: usize::MAX / 4,
        background_gc: false,
        ..Config::default()
    });
    let c = Caller::current();
    let r0 = rss_kb("self");
    let mut held: Vec<Arc<Socket>> = Vec::with_capacity(sockets);
    for _ in 0..sockets {
        held.push(eng.socket(SockType::Stream, &c));
    }
    let r1 = rss_kb("self");
    let (a, b) = eng.socketpair(SockType::Dgram, &c);
    let r2 = rss_kb("self");
    let msg = [1u8; DATASIZE];
    for _ in 0..messages {
        eng.sendmsg(&a, SendMsg::new(&msg), &c, None)
            .expect("queue");
    }
    let r3 = rss_kb("self");
    result("bytes_per_socket", per(r1 - r0, sockets));
    result("bytes_per_msg", per(r3 - r2, messages));
    for s in held.iter().chain([&a, &b]) {
        eng.put(s);
    }
}

/// The kernel's slab growth per socket and per queued 100-byte datagram.
/// RLIMIT_NOFILE's hard limit may be low (20000 here, and no CAP_SYS_RESOURCE),
/// so at most 18,000 sockets are made: slab cost per socket does not depend on
/// how many there are.
fn memory_kernel(sockets: usize, messages: usize) {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType as KType, socketpair};
    let sockets = sockets.min(nofile_limit().saturating_sub(2000)).min(18000);
    let s0 = slab_kb();
    let mut held: Vec<OwnedFd> = Vec::with_capacity(sockets);
    for _ in 0..sockets / 2 {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            KType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .expect("socketpair");
        held.push(a);
        held.push(b);
    }
    let s1 = slab_kb();
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    // Queued 100-byte datagrams over as many pairs as the send buffers need.
    let msg = [1u8; DATASIZE];
    let mut pairs = Vec::new();
    let mut queued = 0;
    let s2 = slab_kb();
    while queued < messages {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            KType::Datagram,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .expect("socketpair");
        while queued < messages {
            // SAFETY: a valid fd and a live buffer.
            let n = unsafe { libc::send(a.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
            if n < 0 {
                break;
            }
            queued += 1;
        }
        pairs.push((a, b));
    }
    let s3 = slab_kb();
    // The pairs that carry the messages cost sockets too: take them out.
    let pair_kb = (s1 - s0) as f64 * (2 * pairs.len()) as f64 / sockets.max(1) as f64;
    println!(
        "memory-kernel: slab +{} kB for {sockets} sockets; +{} kB for {queued} queued 100-byte \
         datagrams on {} pairs",
        s1 - s0,
        s3 - s2,
        pairs.len()
    );
    result("sockets", sockets);
    result("bytes_per_socket", per(s1 - s0, sockets));
    result(
        "bytes_per_msg",
        format!(
            "{:.0}",
            ((s3 - s2) as f64 - pair_kb).max(0.0) * 1024.0 / queued.max(1) as f64
        ),
    );
    drop(pairs);
}

fn nofile_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    lim.rlim_cur as usize
}

/// The daemon's RSS with `sockets` sockets alive, each pair held by one open
/// `.udsfs/stream/pair` handle (it holds N, and M until M is opened): the
/// cheapest way a client keeps sockets. RLIMIT_NOFILE (20000 hard here) caps
/// one process, so the handles are spread over forked children of at most
/// 9,000 handles each.
fn memory_daemon(dir: &Path, pid: i32, sockets: usize) {
    let pid = pid.to_string();
    let stream = File::open(dir.join(".udsfs/stream")).expect("open .udsfs/stream");
    let per_child = nofile_limit().saturating_sub(1000).clamp(100, 9000);
    let mut left = sockets / 2;
    let r0 = rss_kb(&pid);
    let start = Instant::now();
    let mut children = Vec::new();
    while left > 0 {
        let n = left.min(per_child);
        left -= n;
        let (ready_r, ready_w) = nix::unistd::pipe().expect("pipe");
        let (go_r, go_w) = nix::unistd::pipe().expect("pipe");
        if fork() {
            drop((ready_r, go_w));
            let mut fds: Vec<OwnedFd> = Vec::with_capacity(n);
            for _ in 0..n {
                // SAFETY: a valid directory fd and a NUL-terminated name.
                let fd =
                    unsafe { libc::openat(stream.as_raw_fd(), c"pair".as_ptr(), libc::O_RDWR) };
                if fd < 0 {
                    eprintln!("open pair: {}", std::io::Error::last_os_error());
                    // SAFETY: ends the child at once.
                    unsafe { libc::_exit(1) };
                }
                // SAFETY: a fresh fd nobody else owns.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            let _ = File::from(ready_w).write_all(b"r");
            let mut b = [0u8; 1];
            let _ = File::from(go_r).read(&mut b);
            drop(fds);
            // SAFETY: leaves the child without the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        drop((ready_w, go_r));
        let mut b = [0u8; 1];
        let _ = File::from(ready_r).read(&mut b);
        children.push(go_w);
    }
    let opened = start.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let r1 = rss_kb(&pid);
    let n = sockets / 2 * 2;
    let nchildren = children.len();
    drop(children);
    while nix::sys::wait::wait().is_ok() {}
    // Releases arrive asynchronously.
    std::thread::sleep(Duration::from_millis(1500));
    let r2 = rss_kb(&pid);
    println!(
        "memory-daemon: {n} sockets ({} pair handles in {nchildren} processes) opened in \
         {opened:.2?}; daemon RSS {r0} kB idle, {r1} kB with them, {r2} kB after closing",
        n / 2
    );
    result("rss_idle_kb", r0);
    result("rss_kb", r1);
    result("rss_after_close_kb", r2);
    result("bytes_per_socket", per(r1.saturating_sub(r0), n));
}

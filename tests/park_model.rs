//! Model-based test of the parking path, in-process (no mount): random
//! schedules of blocking and non-blocking sends and receives on `data` and
//! `msg` files (with passed sockets and credentials), accept, connect,
//! shutdown, close and signals (answered EINTR, as a FUSE_INTERRUPT is), run on
//! two threads against one `fuse::Inner`. Every request must be answered
//! once; every byte (stream) or message (dgram, seqpacket) a write reported
//! must arrive exactly once and in order, or the errno says why not; every
//! passed socket arrives at most once (exactly once when both ends stay
//! open), and nothing is left once every file is closed.
//!
//! `UDSFS_MODEL_SCHEDULES` sets the count (default 10,000); `UDSFS_MODEL_SEED`
//! replays one schedule.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use parking_lot::Mutex;
use udsfs::engine::{Config, Engine, SockType};
use udsfs::fuse::Inner;
use udsfs::fuse::inode::{Ctrl, Node, SockFile};
use udsfs::fuse::reply::{Opened, Sink};
use udsfs_proto::xorshift::Rng;

/// What the schedules went through, printed at the end (a model that never
/// parks or never splits a record would test little).
static PARKED: AtomicU64 = AtomicU64::new(0);
static PARTIAL: AtomicU64 = AtomicU64::new(0);
static EINTR: AtomicU64 = AtomicU64::new(0);
static PASSED: AtomicU64 = AtomicU64::new(0);

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Thread ids no process can have (above PID_MAX_LIMIT): a signal sent to
/// one (SIGPIPE) reaches nobody, and /proc has nothing for it.
const FAKE_TID: u32 = 1 << 23;
const SNDBUF: usize = 16384;

#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Data(Vec<u8>),
    Written(usize),
    Opened(u64),
    Error(Errno),
}

/// An in-process reply: the answer lands in a shared slot.
#[derive(Clone, Default)]
struct Slot(Arc<Mutex<Vec<Answer>>>);

impl Slot {
    fn sink(&self) -> Slot {
        self.clone()
    }
    /// The answer, once there is one; two answers fail the test.
    fn take(&self) -> Option<Answer> {
        let a = self.0.lock();
        assert!(a.len() <= 1, "a request answered twice: {a:?}");
        a.first().cloned()
    }
}

impl Sink<Vec<u8>> for Slot {
    fn send(self: Box<Self>, a: Result<Vec<u8>, Errno>) {
        self.0
            .lock()
            .push(a.map_or_else(Answer::Error, Answer::Data));
    }
}

impl Sink<u32> for Slot {
    fn send(self: Box<Self>, a: Result<u32, Errno>) {
        let a = a.map(|n| Answer::Written(n as usize));
        self.0.lock().push(a.unwrap_or_else(Answer::Error));
    }
}

impl Sink<Opened> for Slot {
    fn send(self: Box<Self>, a: Result<Opened, Errno>) {
        let a = a.map(|o| Answer::Opened(o.fh));
        self.0.lock().push(a.unwrap_or_else(Answer::Error));
    }
}

/// Root of this process with every capability: the model's callers are made-up
/// thread ids whose `/proc` status does not exist, and a caller whose status
/// cannot be read has none (so it could not name this process's pid in
/// SCM_CREDENTIALS, which the model's records do).
fn caller(tid: u32) -> udsfs::engine::Caller {
    udsfs::engine::Caller::with_status(
        tid,
        udsfs::engine::cred::ProcStatus {
            tgid: std::process::id() as i32,
            cap_eff: !0,
            umask: 0o022,
            ..Default::default()
        },
    )
}

/// Runs one request to its immediate answer (it must not park).
fn now(f: impl FnOnce(Slot)) -> Answer {
    let slot = Slot::default();
    f(slot.sink());
    slot.take()
        .expect("a request that cannot block was left unanswered")
}

/// Looks a socket file up as the kernel does before a path open (a socket's
/// files open only so, src/engine/access.rs).
fn looked_up(inner: &Inner, node: Node, tid: u32) -> Node {
    if let Node::Sock(g, f) = node
        && let Some((_, name)) = SockFile::FILES.iter().find(|(x, _)| *x == f)
    {
        let dir = Node::Sock(g, SockFile::Dir).ino();
        let ino = inner.lookup_ino(dir, name.as_bytes(), &caller(tid));
        assert_eq!(ino, Ok(node.ino()), "lookup of {node:?}");
    }
    node
}

fn open(inner: &Inner, node: Node) -> u64 {
    let node = looked_up(inner, node, FAKE_TID);
    match now(|r| inner.open(node.ino(), 0, caller(FAKE_TID), r)) {
        Answer::Opened(fh) => fh,
        a => panic!("open {node:?}: {a:?}"),
    }
}

fn read_text(inner: &Inner, fh: u64) -> String {
    match now(|r| inner.read(fh, 0, 4096, 0, caller(FAKE_TID), r)) {
        Answer::Data(d) => String::from_utf8(d).unwrap(),
        a => panic!("read: {a:?}"),
    }
}

fn ctl(inner: &Inner, fh: u64, cmd: &str) {
    let a = now(|r| inner.write(fh, cmd.as_bytes(), 0, caller(FAKE_TID), r));
    assert_eq!(a, Answer::Written(cmd.len()), "ctl {cmd:?}");
}

fn sock_node(eng: &Engine, id: u64, f: SockFile) -> Node {
    Node::Sock(eng.dir(id).expect("socket directory").generation, f)
}

/// One end of the connection: its files, owned by one thread.
struct Side {
    id: u64,
    data: u64,
    msg: u64,
    ctl: u64,
    closed: bool,
    /// The sender and receiver (fake thread ids) of this side.
    tx_tid: u32,
    rx_tid: u32,
    /// What this side sent that was reported written, in order.
    sent_bytes: Vec<u8>,
    sent_msgs: Vec<Vec<u8>>,
    /// Sockets passed from this side whose record was (partly) taken.
    passed: BTreeSet<String>,
    /// The unsent rest of a stream msg record (write(2) said it was partial).
    msg_rest: Option<Vec<u8>>,
    shut_wr: bool,
    /// Outstanding requests: (slot, what).
    tx: Option<(Slot, Sent)>,
    rx: Option<(Slot, bool)>,
    /// Received by this side.
    got_bytes: Vec<u8>,
    got_msgs: Vec<Vec<u8>>,
    got_passed: Vec<String>,
    /// Control handles of sockets being passed, closed once the send answers.
    passing: Vec<u64>,
    /// Whether this side reads its msg file (sockets passed to it arrive
    /// only there) or its data file.
    reads_msg: bool,
    /// Whether this side passes sockets (its peer reads msg).
    passes_rights: bool,
}

#[derive(Clone, Debug)]
struct Sent {
    buf: Vec<u8>,
    msg: bool,
    /// For a msg record: its header's length (0 for a continuation).
    header: usize,
    tag: Option<String>,
    nonblocking: bool,
}

struct Sched {
    inner: Arc<Inner>,
    ty: SockType,
    seed: u64,
    pid: i32,
}

impl Sched {
    fn stream(&self) -> bool {
        self.ty == SockType::Stream
    }

    /// Takes the answer of a finished send into the model.
    fn settle_tx(&self, side: &mut Side) {
        let Some((slot, sent)) = side.tx.take() else {
            return;
        };
        let Some(ans) = slot.take() else {
            side.tx = Some((slot, sent));
            return;
        };
        for fh in side.passing.drain(..) {
            self.inner.release(fh);
        }
        match ans {
            Answer::Written(n) => {
                assert!(
                    n <= sent.buf.len() && n > 0,
                    "{}: written {n} of {}",
                    self.seed,
                    sent.buf.len()
                );
                if !self.stream() {
                    assert_eq!(
                        n,
                        sent.buf.len(),
                        "seed {}: a message partly written",
                        self.seed
                    );
                    side.sent_msgs.push(sent.buf[sent.header..].to_vec());
                } else {
                    assert!(
                        n == sent.buf.len() || n > sent.header,
                        "seed {}: write reported {n} bytes, inside the header ({})",
                        self.seed,
                        sent.header
                    );
                    side.sent_bytes.extend_from_slice(&sent.buf[sent.header..n]);
                    if sent.msg && n < sent.buf.len() {
                        count(&PARTIAL);
                        side.msg_rest = Some(sent.buf[n..].to_vec());
                    }
                }
                if let Some(tag) = sent.tag {
                    side.passed.insert(tag);
                }
            }
            Answer::Error(e) => {
                if e == Errno::EINTR {
                    count(&EINTR);
                }
                let ok = match e {
                    Errno::EAGAIN => sent.nonblocking,
                    Errno::EINTR | Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN => true,
                    // A dgram peer that closed (unix_dgram_sendmsg).
                    Errno::ECONNREFUSED => !self.stream(),
                    _ => false,
                };
                assert!(
                    ok,
                    "seed {}: send of {} bytes: {e}: {:?}",
                    self.seed,
                    sent.buf.len(),
                    String::from_utf8_lossy(&sent.buf[..sent.buf.len().min(60)])
                );
                // A record begun keeps its rest unless the send failed.
                if sent.msg && sent.header == 0 && matches!(e, Errno::EAGAIN | Errno::EINTR) {
                    side.msg_rest = Some(sent.buf);
                }
            }
            a => panic!("seed {}: a send answered {a:?}", self.seed),
        }
    }

    /// Takes the answer of a finished receive; true if it brought payload
    /// (the model sends no empty messages: an empty one is end of file).
    fn settle_rx(&self, side: &mut Side) -> bool {
        let Some((slot, nonblocking)) = side.rx.take() else {
            return false;
        };
        let Some(ans) = slot.take() else {
            side.rx = Some((slot, nonblocking));
            return false;
        };
        match ans {
            Answer::Data(d) if d.is_empty() => {}
            Answer::Data(d) if side.reads_msg => return self.take_record(side, &d),
            Answer::Data(d) if self.stream() => {
                side.got_bytes.extend_from_slice(&d);
                return true;
            }
            Answer::Data(d) => {
                side.got_msgs.push(d);
                return true;
            }
            Answer::Error(e) => {
                let ok = match e {
                    Errno::EAGAIN => nonblocking,
                    Errno::EINTR | Errno::ECONNRESET | Errno::ENOTCONN => true,
                    _ => false,
                };
                assert!(ok, "seed {}: receive: {e}", self.seed);
            }
            a => panic!("seed {}: a receive answered {a:?}", self.seed),
        }
        false
    }

    /// One msg record, read whole: header, then exactly `len` bytes.
    fn take_record(&self, side: &mut Side, rec: &[u8]) -> bool {
        let nl = rec
            .iter()
            .position(|&b| b == b'\n')
            .expect("a record header");
        let head = std::str::from_utf8(&rec[..nl]).unwrap();
        let payload = &rec[nl + 1..];
        let mut len = None;
        for f in head.split(' ') {
            let (k, v) = f.split_once('=').expect("key=value");
            match k {
                "len" => len = Some(v.parse::<usize>().unwrap()),
                "rights" => {
                    for h in v.split(',') {
                        let id: u64 = h.parse().unwrap();
                        let st = self.status(id);
                        let local = st
                            .lines()
                            .find_map(|l| l.strip_prefix("local="))
                            .unwrap_or("")
                            .to_string();
                        side.got_passed.push(local);
                        count(&PASSED);
                    }
                }
                "creds" => {
                    let pid: i32 = v.split(':').next().unwrap().parse().unwrap();
                    assert!(
                        // Explicit creds are ours; implicit ones name the
                        // (fake) sending thread.
                        pid == self.pid || pid == 0 || pid >= FAKE_TID as i32,
                        "seed {}: creds {v} in a record",
                        self.seed
                    );
                }
                _ => {}
            }
        }
        assert_eq!(
            len,
            Some(payload.len()),
            "seed {}: record {head:?}",
            self.seed
        );
        if payload.is_empty() {
            return false;
        }
        if self.stream() {
            side.got_bytes.extend_from_slice(payload);
        } else {
            side.got_msgs.push(payload.to_vec());
        }
        true
    }

    fn status(&self, id: u64) -> String {
        let eng = &self.inner.eng;
        let fh = open(&self.inner, sock_node(eng, id, SockFile::Status));
        let t = read_text(&self.inner, fh);
        self.inner.release(fh);
        t
    }

    /// One random step of the thread that owns `side`; `k` numbers passed sockets.
    fn step(&self, side: &mut Side, rng: &mut Rng, k: &mut u32) {
        self.settle_tx(side);
        let _ = self.settle_rx(side);
        if side.closed {
            return;
        }
        let inner = &self.inner;
        match rng.below(100) {
            0..=44 if side.tx.is_none() => {
                let nonblocking = rng.chance(40);
                let flags = if nonblocking { libc::O_NONBLOCK } else { 0 };
                let size = if rng.chance(10) {
                    rng.below(3 * SNDBUF as u64) as usize + 1
                } else {
                    rng.below(3000) as usize + 1
                };
                let size = if self.stream() {
                    size
                } else {
                    size.min(SNDBUF - 64)
                };
                let payload: Vec<u8> = (0..size).map(|_| rng.below(256) as u8).collect();
                let slot = Slot::default();
                let use_msg = side.msg_rest.is_some() || rng.chance(50);
                let sent = if let Some(rest) = side.msg_rest.take() {
                    Sent {
                        buf: rest,
                        msg: true,
                        header: 0,
                        tag: None,
                        nonblocking,
                    }
                } else if use_msg {
                    let mut header = format!("len={size}");
                    let mut tag = None;
                    if rng.chance(30) {
                        let _ = write!(header, " creds={}:0:0", self.pid);
                    }
                    if side.passes_rights && rng.chance(40) {
                        let fh = open(inner, Node::Ctrl(Ctrl::Clone(SockType::Stream)));
                        let id: u64 = read_text(inner, fh).trim().parse().unwrap();
                        let name = format!("p{}s{}x{}", self.seed, side.id, *k);
                        *k += 1;
                        ctl(inner, fh, &format!("bind @{name}\n"));
                        side.passing.push(fh);
                        tag = Some(format!("@{name}"));
                        let _ = write!(header, " rights={id}");
                    }
                    header.push('\n');
                    let h = header.len();
                    let mut buf = header.into_bytes();
                    buf.extend_from_slice(&payload);
                    Sent {
                        buf,
                        msg: true,
                        header: h,
                        tag,
                        nonblocking,
                    }
                } else {
                    Sent {
                        buf: payload,
                        msg: false,
                        header: 0,
                        tag: None,
                        nonblocking,
                    }
                };
                let fh = if sent.msg { side.msg } else { side.data };
                inner.write(fh, &sent.buf, flags, caller(side.tx_tid), slot.sink());
                if slot.take().is_none() {
                    count(&PARKED);
                }
                side.tx = Some((slot, sent));
            }
            45..=84 if side.rx.is_none() => {
                let nonblocking = rng.chance(40);
                let flags = if nonblocking { libc::O_NONBLOCK } else { 0 };
                let fh = if side.reads_msg { side.msg } else { side.data };
                let size = if side.reads_msg || !self.stream() {
                    1 << 20
                } else {
                    rng.below(8000) as u32 + 1
                };
                let slot = Slot::default();
                inner.read(fh, 0, size, flags, caller(side.rx_tid), slot.sink());
                if slot.take().is_none() {
                    count(&PARKED);
                }
                side.rx = Some((slot, nonblocking));
            }
            85..=93 => {
                // A signal to one of this side's threads: EINTR, as an interrupt is answered.
                let tid = if rng.chance(50) {
                    side.tx_tid
                } else {
                    side.rx_tid
                };
                inner
                    .parks
                    .interrupt_threads(&HashSet::from([tid]), Errno::EINTR);
            }
            94..=96 if !side.shut_wr && self.stream() => {
                ctl(inner, side.ctl, "shutdown wr\n");
                side.shut_wr = true;
            }
            97 => self.close(side),
            _ => {}
        }
        self.settle_tx(side);
        self.settle_rx(side);
    }

    fn close(&self, side: &mut Side) {
        if side.closed {
            return;
        }
        side.closed = true;
        // The kernel releases a file only once no request on it is left:
        // what waits ends first, as a process killed by a signal does.
        for tid in [side.tx_tid, side.rx_tid] {
            self.inner
                .parks
                .interrupt_threads(&HashSet::from([tid]), Errno::EINTR);
        }
        self.settle_tx(side);
        self.settle_rx(side);
        for fh in [side.data, side.msg, side.ctl] {
            self.inner.release(fh);
        }
        for fh in side.passing.drain(..) {
            self.inner.release(fh);
        }
    }

    /// Reads without blocking until nothing comes; true if anything came.
    fn drain(&self, side: &mut Side) -> bool {
        let mut any = false;
        while !side.closed && side.rx.is_none() {
            let fh = if side.reads_msg { side.msg } else { side.data };
            let slot = Slot::default();
            self.inner.read(
                fh,
                0,
                1 << 20,
                libc::O_NONBLOCK,
                caller(side.rx_tid),
                slot.sink(),
            );
            side.rx = Some((slot, true));
            if !self.settle_rx(side) {
                break;
            }
            any = true;
        }
        any
    }
}

use std::fmt::Write as _;

/// Builds the connection: a socketpair, or (stream) a listener, a parked
/// accept woken by a connect through `.udsfs/abstract/`.
fn connect(s: &Sched, rng: &mut Rng) -> (u64, u64, Vec<u64>) {
    let inner = &s.inner;
    let eng = &inner.eng;
    if s.ty == SockType::Stream && rng.chance(30) {
        let lfh = open(inner, Node::Ctrl(Ctrl::Clone(SockType::Stream)));
        let lid: u64 = read_text(inner, lfh).trim().parse().unwrap();
        ctl(inner, lfh, &format!("bind @l{}\nlisten 0\n", s.seed));
        let accept = Slot::default();
        let acc_node = sock_node(eng, lid, SockFile::Accept);
        let acc = looked_up(inner, acc_node, FAKE_TID + 1).ino();
        inner.open(acc, 0, caller(FAKE_TID + 1), accept.sink());
        assert_eq!(
            accept.take(),
            None,
            "seed {}: accept on an empty backlog did not wait",
            s.seed
        );
        let target = eng.dir(lid).unwrap().generation;
        let conn = now(|r| inner.open(Node::Abstract(target).ino(), 0, caller(FAKE_TID), r));
        let Answer::Opened(cfh) = conn else {
            panic!("seed {}: connect: {conn:?}", s.seed)
        };
        let Some(Answer::Opened(afh)) = accept.take() else {
            panic!(
                "seed {}: the connect did not wake the parked accept",
                s.seed
            )
        };
        let aid: u64 = read_text(inner, afh).trim().parse().unwrap();
        // The connect view's file is the client's data; find its number.
        let cid = eng
            .dirs()
            .into_iter()
            .map(|(id, _)| id)
            .find(|&id| id != lid && id != aid)
            .expect("the client socket");
        // listen 0 takes one pending connection: a second connect waits
        // for an accept to make room, which wakes it.
        let connect = || {
            let slot = Slot::default();
            inner.open(
                Node::Abstract(target).ino(),
                0,
                caller(FAKE_TID + 2),
                slot.sink(),
            );
            slot
        };
        let first = connect();
        assert!(
            matches!(first.take(), Some(Answer::Opened(_))),
            "seed {}: {:?}",
            s.seed,
            first.take()
        );
        let second = connect();
        assert_eq!(
            second.take(),
            None,
            "seed {}: a connect past the backlog did not wait",
            s.seed
        );
        let mut extra = vec![lfh, afh, cfh];
        let acc = looked_up(inner, acc_node, FAKE_TID).ino();
        let Answer::Opened(fh) = now(|r| inner.open(acc, 0, caller(FAKE_TID), r)) else {
            panic!("seed {}: accept of a pending connection", s.seed)
        };
        extra.push(fh);
        let Some(Answer::Opened(fh)) = second.take() else {
            panic!(
                "seed {}: the accept did not wake the waiting connect",
                s.seed
            )
        };
        extra.push(fh);
        if let Some(Answer::Opened(fh)) = first.take() {
            extra.push(fh);
        }
        (cid, aid, extra)
    } else {
        let fh = open(inner, Node::Ctrl(Ctrl::Pair(s.ty)));
        let text = read_text(inner, fh);
        let mut it = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        (it.next().unwrap(), it.next().unwrap(), vec![fh])
    }
}

/// What arrived is what was sent, in order: all of it when `exact`, else
/// a prefix (the receiver or sender closed, or a record's rest is unsent).
fn arrived_once<T: PartialEq>(what: &str, unit: &str, got: &[T], sent: &[T], exact: bool) {
    let n = got.len();
    assert!(
        n <= sent.len(),
        "{what}: {n} {unit} received, {} sent",
        sent.len()
    );
    assert!(
        got == &sent[..n],
        "{what}: {unit} differ from what was sent"
    );
    if exact {
        assert_eq!(n, sent.len(), "{what}: {unit} lost");
    }
}

fn run_schedule(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1);
    let eng = Engine::new(Config {
        sndbuf: SNDBUF,
        ..Config::small()
    });
    let inner = Inner::new(eng.clone(), 0, 0);
    let ty = [SockType::Stream, SockType::Dgram, SockType::Seqpacket][rng.below(3) as usize];
    let sched = Arc::new(Sched {
        inner: inner.clone(),
        ty,
        seed,
        pid: std::process::id() as i32,
    });
    let (a, b, extra) = connect(&sched, &mut rng);
    let mut sides = Vec::new();
    for (n, id) in [a, b].into_iter().enumerate() {
        let side = Side {
            id,
            data: open(&inner, sock_node(&eng, id, SockFile::Data)),
            msg: open(&inner, sock_node(&eng, id, SockFile::Msg)),
            ctl: open(&inner, sock_node(&eng, id, SockFile::Ctl)),
            closed: false,
            tx_tid: FAKE_TID + 10 + 2 * n as u32,
            rx_tid: FAKE_TID + 11 + 2 * n as u32,
            sent_bytes: Vec::new(),
            sent_msgs: Vec::new(),
            passed: BTreeSet::new(),
            msg_rest: None,
            shut_wr: false,
            tx: None,
            rx: None,
            got_bytes: Vec::new(),
            got_msgs: Vec::new(),
            got_passed: Vec::new(),
            passing: Vec::new(),
            reads_msg: rng.chance(50),
            passes_rights: false,
        };
        if rng.chance(30) {
            ctl(&inner, side.ctl, "passcred on\n");
        }
        sides.push(side);
    }
    // Sockets go only where the receiver reads msg (a data read closes them).
    sides[0].passes_rights = sides[1].reads_msg;
    sides[1].passes_rights = sides[0].reads_msg;
    for fh in extra {
        inner.release(fh);
    }
    let steps = 8 + rng.below(16);
    let seeds = [rng.next(), rng.next()];
    let handles: Vec<_> = sides
        .into_iter()
        .zip(seeds)
        .map(|(mut side, s)| {
            let sched = sched.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(s | 1);
                let mut k = side.tx_tid;
                for _ in 0..steps {
                    sched.step(&mut side, &mut rng, &mut k);
                }
                side
            })
        })
        .collect();
    let mut sides: Vec<Side> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    // Let the readers take what is queued, which lets parked writers on.
    for _ in 0..64 {
        let mut progress = false;
        for side in sides.iter_mut() {
            progress |= sched.drain(side);
            sched.settle_tx(side);
            // A writer that was told "partial" writes the rest, as it must.
            if side.tx.is_none() && side.msg_rest.is_some() && !side.closed {
                let rest = side.msg_rest.take().unwrap();
                let slot = Slot::default();
                let tid = side.tx_tid;
                inner.write(side.msg, &rest, libc::O_NONBLOCK, caller(tid), slot.sink());
                side.tx = Some((
                    slot,
                    Sent {
                        buf: rest,
                        msg: true,
                        header: 0,
                        tag: None,
                        nonblocking: true,
                    },
                ));
                sched.settle_tx(side);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    // What still waits is interrupted, as a signal would.
    for side in sides.iter_mut() {
        for tid in [side.tx_tid, side.rx_tid] {
            inner
                .parks
                .interrupt_threads(&HashSet::from([tid]), Errno::EINTR);
        }
        sched.settle_tx(side);
        sched.settle_rx(side);
        assert!(
            side.tx.is_none() && side.rx.is_none(),
            "seed {seed}: a request left unanswered"
        );
    }
    for side in sides.iter_mut() {
        sched.drain(side);
    }

    for (from, to) in [(0, 1), (1, 0)] {
        let (s, r) = (&sides[from], &sides[to]);
        let exact = !s.closed && !r.closed && s.msg_rest.is_none();
        let what = format!("seed {seed} {ty:?} {} -> {}", s.id, r.id);
        if sched.stream() {
            arrived_once(&what, "bytes", &r.got_bytes, &s.sent_bytes, exact);
        } else {
            arrived_once(&what, "messages", &r.got_msgs, &s.sent_msgs, exact);
        }
        let mut seen = HashMap::new();
        for t in &r.got_passed {
            *seen.entry(t.clone()).or_insert(0) += 1;
            assert!(
                s.passed.contains(t),
                "{what}: socket {t} arrived but was not sent"
            );
        }
        assert!(
            seen.values().all(|&c| c == 1),
            "{what}: a socket arrived twice: {seen:?}"
        );
        if exact {
            assert_eq!(seen.len(), s.passed.len(), "{what}: passed sockets lost");
        }
    }
    for side in sides.iter_mut() {
        sched.close(side);
    }
    eng.collect();
    assert_eq!(
        eng.live_sockets(),
        0,
        "seed {seed}: sockets left after every file closed"
    );
    assert!(inner.parks.is_empty(), "seed {seed}: requests left parked");
}

#[test]
fn random_schedules_lose_and_duplicate_nothing() {
    if let Ok(seed) = std::env::var("UDSFS_MODEL_SEED") {
        run_schedule(seed.parse().expect("UDSFS_MODEL_SEED is a number"));
        return;
    }
    let n: u64 = std::env::var("UDSFS_MODEL_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let base = 0x5eed_0000_u64;
    // Two schedules at a time: the machine has two cores.
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            std::thread::spawn(move || {
                for i in (w..n).step_by(2) {
                    run_schedule(base + i);
                }
            })
        })
        .collect();
    for w in workers {
        w.join()
            .expect("a schedule failed (its seed is in the message above)");
    }
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "{n} schedules: {} requests parked, {} msg records partly written, {} EINTR \
         answers to sends, {} sockets passed and received",
        get(&PARKED),
        get(&PARTIAL),
        get(&EINTR),
        get(&PASSED)
    );
    if n >= 1000 {
        assert!(get(&PARKED) > 0 && get(&PARTIAL) > 0 && get(&PASSED) > 0 && get(&EINTR) > 0);
    }
}

/// Parked dgram readers are woken one per message, as Linux's exclusive
/// waits are: eight readers parked on one socket, then eight messages, run
/// eight retries, not one per reader per message; a reader woken for a
/// message but interrupted first passes the message on.
#[test]
fn one_message_wakes_one_parked_reader() {
    let (eng, inner, pair, ids) = pair_without_mount(SockType::Dgram);
    let tx = open(&inner, sock_node(&eng, ids[0], SockFile::Data));
    let rx = open(&inner, sock_node(&eng, ids[1], SockFile::Data));
    let readers: Vec<Slot> = (0..8)
        .map(|i| {
            let slot = Slot::default();
            inner.read(rx, 0, 100, 0, caller(FAKE_TID + 100 + i), slot.sink());
            slot
        })
        .collect();
    assert!(
        readers.iter().all(|r| r.take().is_none()),
        "the readers wait"
    );
    let before = inner.parks.retries();
    ctl_write(&inner, tx, b"m0");
    assert_eq!(inner.parks.retries() - before, 1, "one message, one retry");
    let answered = readers.iter().filter(|r| r.take().is_some()).count();
    assert_eq!(answered, 1);
    // The next reader in line is woken for m1 but interrupted before its
    // retry runs: m1 must still reach a reader.
    udsfs::fuse::park::deferring_wakeups(|| {
        ctl_write(&inner, tx, b"m1");
        inner
            .parks
            .interrupt_threads(&HashSet::from([FAKE_TID + 101]), Errno::EINTR);
    });
    assert_eq!(readers[1].take(), Some(Answer::Error(Errno::EINTR)));
    let answered = readers.iter().filter(|r| r.take().is_some()).count();
    assert_eq!(answered, 3, "m1 went to the next reader");
    for i in 2..7 {
        ctl_write(&inner, tx, format!("m{i}").as_bytes());
    }
    let got: Vec<Answer> = readers.iter().filter_map(|r| r.take()).collect();
    let data = got.iter().filter(|a| matches!(a, Answer::Data(_))).count();
    assert_eq!(data, 7, "seven messages, seven readers answered: {got:?}");
    assert_eq!(inner.parks.len(), 0);
    assert!(
        inner.parks.retries() - before <= 8,
        "{} retries for 7 messages and 8 readers",
        inner.parks.retries() - before
    );
    for fh in [tx, rx, pair] {
        inner.release(fh);
    }
}

/// An engine and FUSE layer without a mount, and a pair of type `ty`: the
/// pair file's handle and the two socket numbers.
fn pair_without_mount(ty: SockType) -> (Arc<Engine>, Arc<Inner>, u64, Vec<u64>) {
    let eng = Engine::new(Config::small());
    let inner = Inner::new(eng.clone(), 0, 0);
    let pair = open(&inner, Node::Ctrl(Ctrl::Pair(ty)));
    let ids = read_text(&inner, pair)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (eng, inner, pair, ids)
}

/// `pair_without_mount` of a stream pair with its first socket's ctl and
/// data files and its second's data file open.
fn stream_pair_opened() -> (Arc<Engine>, Arc<Inner>, u64, [u64; 3]) {
    let (eng, inner, pair, ids) = pair_without_mount(SockType::Stream);
    let a_ctl = open(&inner, sock_node(&eng, ids[0], SockFile::Ctl));
    let a = open(&inner, sock_node(&eng, ids[0], SockFile::Data));
    let b = open(&inner, sock_node(&eng, ids[1], SockFile::Data));
    (eng, inner, pair, [a_ctl, a, b])
}

fn ctl_write(inner: &Inner, fh: u64, data: &[u8]) {
    let a = now(|r| inner.write(fh, data, 0, caller(FAKE_TID), r));
    assert_eq!(a, Answer::Written(data.len()));
}

/// SO_RCVTIMEO / SO_SNDTIMEO: a parked request has a deadline, and
/// `expire` (the watchdog's call at each deadline) answers EAGAIN past it, or
/// the count a stream write got out; a request without one is left alone.
#[test]
fn deadlines_end_parked_requests() {
    use std::time::{Duration, Instant};
    let (_eng, inner, pair, [a_ctl, a, b]) = stream_pair_opened();
    ctl(&inner, a_ctl, "rcvtimeo 60000\n");
    ctl(&inner, a_ctl, "sndtimeo 60000\n");
    let later = Instant::now() + Duration::from_secs(61);

    let reader = Slot::default();
    inner.read(a, 0, 100, 0, caller(FAKE_TID + 1), reader.sink());
    // b has no timeout: its reader waits until the write below.
    let b_reader = Slot::default();
    inner.read(b, 0, 100, 0, caller(FAKE_TID + 2), b_reader.sink());
    let big = vec![7u8; 4 << 20];
    let writer = Slot::default();
    inner.write(a, &big, 0, caller(FAKE_TID + 3), writer.sink());
    // The writer got part out: b's reader took some of it.
    let got_by_b = match b_reader.take() {
        Some(Answer::Data(d)) => d.len(),
        x => panic!("b's reader: {x:?}"),
    };
    assert!(
        reader.take().is_none() && writer.take().is_none(),
        "both wait"
    );
    assert!(inner.parks.next_deadline().is_some());
    assert_eq!(inner.parks.expire(Instant::now()), 0, "not due yet");
    assert_eq!(inner.parks.len(), 2);

    assert_eq!(inner.parks.expire(later), 2);
    assert_eq!(reader.take(), Some(Answer::Error(Errno::EAGAIN)));
    match writer.take() {
        Some(Answer::Written(n)) => assert!(n > got_by_b && n < big.len(), "partial: {n}"),
        x => panic!("the writer: {x:?}"),
    }
    assert_eq!(inner.parks.next_deadline(), None);
    assert_eq!(inner.parks.len(), 0, "nothing left parked");

    // `rcvtimeo 0` clears the timeout: the read waits until interrupted.
    ctl(&inner, a_ctl, "rcvtimeo 0\n");
    let reader = Slot::default();
    inner.read(a, 0, 100, 0, caller(FAKE_TID + 5), reader.sink());
    assert_eq!(inner.parks.expire(later), 0);
    assert!(reader.take().is_none());
    inner
        .parks
        .interrupt_threads(&HashSet::from([FAKE_TID + 5]), Errno::EINTR);
    assert_eq!(reader.take(), Some(Answer::Error(Errno::EINTR)));
    for fh in [a, b, a_ctl, pair] {
        inner.release(fh);
    }
}

/// A write whose SO_SNDTIMEO runs out gets a last look, as Linux's sender
/// (sock_alloc_send_pskb): room a read made, too little to wake it (a
/// quarter of the budget), takes more of it, and a write that got further
/// waits its timeout afresh, as Linux waits per skb; a last look that gets
/// nowhere answers the count.
#[test]
fn a_timed_out_write_looks_once_more() {
    use std::time::{Duration, Instant};
    let (_eng, inner, pair, [a_ctl, a, b]) = stream_pair_opened();
    ctl(&inner, a_ctl, "sndtimeo 60000\n");
    let later = Instant::now() + Duration::from_secs(61);
    let big = vec![7u8; 4 << 20];
    let writer = Slot::default();
    inner.write(a, &big, 0, caller(FAKE_TID + 3), writer.sink());
    let first = inner.parks.next_deadline().expect("the writer's deadline");
    // 64 KiB read: room for skbs, not a quarter of the budget free.
    let reader = Slot::default();
    inner.read(b, 0, 1 << 16, 0, caller(FAKE_TID + 4), reader.sink());
    assert!(matches!(reader.take(), Some(Answer::Data(d)) if d.len() == 1 << 16));
    assert!(writer.take().is_none(), "not woken by that room");

    assert_eq!(inner.parks.expire(later), 1);
    assert!(writer.take().is_none(), "it got further: it waits again");
    let again = inner.parks.next_deadline().expect("a fresh deadline");
    assert!(again > first && again < later, "60 s from its last look");

    assert_eq!(inner.parks.expire(later), 1);
    match writer.take() {
        Some(Answer::Written(n)) => assert!(n > 0 && n < big.len(), "partial: {n}"),
        x => panic!("the writer: {x:?}"),
    }
    assert_eq!(inner.parks.len(), 0, "nothing left parked");
    for fh in [a, b, a_ctl, pair] {
        inner.release(fh);
    }
}

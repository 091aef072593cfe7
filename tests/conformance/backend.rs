//! The `Backend` trait shared by the kernel and the udsfs implementations, and the
//! trace every operation is recorded in.
//!
//! A backend implements the `raw_*` methods; scenarios call the provided methods
//! (`socket`, `bind`, ...), which run the raw operation and append one line
//! `(operation, result)` to the trace. Results are rendered to strings so that the
//! kernel trace and the udsfs trace can be compared line by line.

use super::front_programs::Prog;
use std::fmt::Write as _;

/// Socket types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Stream,
    Dgram,
    Seqpacket,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Stream => "stream",
            Ty::Dgram => "dgram",
            Ty::Seqpacket => "seqpacket",
        }
    }
}

/// `shutdown()` directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Rd,
    Wr,
    RdWr,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Rd => "rd",
            How::Wr => "wr",
            How::RdWr => "rdwr",
        }
    }
}

/// An address given to bind/connect/sendto.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    /// A path name relative to the scenario root.
    Path(String),
    /// An abstract name (the bytes after the leading NUL).
    Abstract(Vec<u8>),
}

/// A path-name address relative to the scenario root.
pub fn p(s: &str) -> Addr {
    Addr::Path(s.to_string())
}

/// An abstract address.
pub fn ab(b: &[u8]) -> Addr {
    Addr::Abstract(b.to_vec())
}

/// `call` on a new `ty` socket, then again once it is bound at the path `name`:
/// the answers a name must not change (or must). The socket, bound.
pub fn before_and_after_bind<R>(
    b: &mut dyn Backend,
    ty: Ty,
    name: &str,
    call: impl Fn(&mut dyn Backend, Sock) -> R,
) -> Sock {
    let s = b.socket(ty);
    call(b, s);
    b.bind(s, p(name));
    call(b, s);
    s
}

/// A name as returned by getsockname / getpeername / recvfrom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    Unnamed,
    /// Path relative to the scenario root, as given to bind.
    Path(Vec<u8>),
    Abstract(Vec<u8>),
}

impl Name {
    /// The address that reaches this name, if it has one.
    pub fn addr(&self) -> Option<Addr> {
        match self {
            Name::Unnamed => None,
            Name::Path(p) => Some(Addr::Path(String::from_utf8_lossy(p).into_owned())),
            Name::Abstract(a) => Some(Addr::Abstract(a.clone())),
        }
    }
}

/// A socket handle: an index into the backend's socket table, allocated in order of
/// creation, so that both backends number their sockets identically.
pub type Sock = usize;

/// Handle returned when socket creation failed; every op on it fails.
pub const BAD_SOCK: Sock = usize::MAX;

/// Ok value, or an errno name such as "ENOENT" (harness problems start with "HARNESS").
pub type Res<T> = Result<T, String>;

/// What ended a run of non-blocking calls (`sends_until_error`, `recvs_until_empty`).
pub enum Stop {
    /// A call failed with this errno name.
    Err(String),
    Eof,
    /// The most calls asked for were made.
    Cap,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Stop::Err(e) => write!(f, "ERR {e}"),
            Stop::Eof => write!(f, "EOF"),
            Stop::Cap => write!(f, "no end"),
        }
    }
}

/// Result of a recorded operation. Unlike `Result` it is not `must_use`: scenarios
/// record far more operations than they inspect.
#[derive(Debug)]
pub struct Out<T>(pub Res<T>);

impl<T> Out<T> {
    pub fn ok(self) -> Option<T> {
        self.0.ok()
    }
}

/// A received datagram together with the sender's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub data: Vec<u8>,
    pub from: Name,
}

/// Errno name of a raw errno value ("ENOENT").
pub fn errno_name(code: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(code))
}

/// Errno name of the current `errno`.
pub fn last_errno() -> String {
    errno_name(nix::errno::Errno::last_raw())
}

/// Errno name of an `io::Error`.
pub fn io_errno(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(c) => errno_name(c),
        None => format!("HARNESS io error without errno: {e}"),
    }
}

/// Escape bytes for display and for the udsfs control language: printable ASCII
/// other than backslash and space stays, everything else becomes `\xHH`.
pub fn escape(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        if c.is_ascii_graphic() && c != b'\\' {
            s.push(c as char);
        } else {
            let _ = write!(s, "\\x{c:02x}");
        }
    }
    s
}

/// Display form of bytes in traces: like `escape`, but spaces stay readable.
pub fn show_escape(b: &[u8]) -> String {
    escape(b).replace("\\x20", " ")
}

/// Inverse of `escape`: decodes `\xHH` (either case) and `\\`; any other byte
/// stands for itself.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
                continue;
            }
            if b.get(i + 1) == Some(&b'x')
                && let Some(v) = b
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// A deterministic payload of `n` bytes.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8 % 251).collect()
}

fn fnv(d: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &c in d {
        h ^= c as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Display form of a payload: short payloads verbatim, long ones by length and hash.
pub fn show_bytes(d: &[u8]) -> String {
    if d.len() <= 48 {
        format!("\"{}\"", show_escape(d))
    } else {
        format!("<{} bytes fnv={:016x}>", d.len(), fnv(d))
    }
}

fn is_autobind_name(b: &[u8]) -> bool {
    b.len() == 5 && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The recorded operations of one scenario run.
#[derive(Default)]
pub struct Trace {
    pub entries: Vec<(String, String)>,
    /// Autobound names seen so far, numbered by first appearance.
    autonames: Vec<Vec<u8>>,
}

impl Trace {
    pub fn push(&mut self, op: String, result: String) {
        self.entries.push((op, result));
    }

    /// Display form of an abstract name. A name of exactly 5 lowercase hex digits is
    /// an autobound one (`^@[0-9a-f]{5}$`): it is shown as `@<auto#k>`, k numbering
    /// distinct names in order of first appearance, so that equal names stay equal and
    /// different ones stay different while the random digits drop out.
    fn abstract_name(&mut self, b: &[u8]) -> String {
        if is_autobind_name(b) {
            let k = match self.autonames.iter().position(|n| n == b) {
                Some(k) => k,
                None => {
                    self.autonames.push(b.to_vec());
                    self.autonames.len() - 1
                }
            };
            format!("@<auto#{}>", k + 1)
        } else {
            format!("@{}", show_escape(b))
        }
    }

    pub fn addr(&mut self, a: &Addr) -> String {
        match a {
            Addr::Path(p) => p.clone(),
            Addr::Abstract(b) => self.abstract_name(b),
        }
    }

    pub fn name(&mut self, n: &Name) -> String {
        match n {
            Name::Unnamed => "(unnamed)".to_string(),
            Name::Path(p) => show_escape(p),
            Name::Abstract(b) => self.abstract_name(b),
        }
    }
}

fn show<T>(r: &Res<T>, f: impl FnOnce(&T) -> String) -> String {
    match r {
        Ok(v) => f(v),
        Err(e) => format!("ERR {e}"),
    }
}

fn unit(r: &Res<()>) -> String {
    show(r, |_| "ok".to_string())
}

pub fn sock_s(s: Sock) -> String {
    if s == BAD_SOCK {
        "s?".to_string()
    } else {
        format!("s{s}")
    }
}

/// What a recorded operation hands back of its raw twin's result: an `Out`, or a
/// socket (BAD_SOCK where the call failed, so the scenario goes on and the trace shows it).
trait Handed<T> {
    fn hand(r: Res<T>) -> Self;
}

impl<T> Handed<T> for Out<T> {
    fn hand(r: Res<T>) -> Self {
        Out(r)
    }
}

impl Handed<Sock> for Sock {
    fn hand(r: Res<Sock>) -> Self {
        r.unwrap_or(BAD_SOCK)
    }
}

impl Handed<(Sock, Sock)> for (Sock, Sock) {
    fn hand(r: Res<(Sock, Sock)>) -> Self {
        r.unwrap_or((BAD_SOCK, BAD_SOCK))
    }
}

/// Backend's recorded operations, each made from its signature: `fn name(args) -> Ret =
/// raw_name(call args) => |t, r| op, result;` calls the raw twin (its result `r`), pushes
/// `op` (a String; `t` is the trace, for naming addresses) with `result` (a String made
/// from `r`) on the trace, and hands `r` back (Handed).
macro_rules! traced {
    ($($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $raw:ident($($call:expr),*)
        => |$t:ident, $r:ident| $op:expr, $res:expr;)*) => {
        $($(#[$m])*
        fn $name(&mut self, $($arg: $ty),*) -> $ret {
            let $r = self.$raw($($call),*);
            let $t = self.trace();
            let op = $op;
            $t.push(op, $res);
            <$ret as Handed<_>>::hand($r)
        })*
    };
}

/// A socket implementation under test. Implement the `raw_*` methods; scenarios use
/// the provided, recording methods.
pub trait Backend {
    fn trace(&mut self) -> &mut Trace;

    fn raw_socket(&mut self, ty: Ty) -> Res<Sock>;
    fn raw_pair(&mut self, ty: Ty) -> Res<(Sock, Sock)>;
    fn raw_bind(&mut self, s: Sock, a: &Addr) -> Res<()>;
    fn raw_autobind(&mut self, s: Sock) -> Res<()>;
    fn raw_connect(&mut self, s: Sock, a: &Addr) -> Res<()>;
    fn raw_listen(&mut self, s: Sock, backlog: i32) -> Res<()>;
    fn raw_shutdown(&mut self, s: Sock, how: How) -> Res<()>;
    /// Non-blocking send; returns the byte count.
    fn raw_send(&mut self, s: Sock, d: &[u8]) -> Res<usize>;
    fn raw_sendto(&mut self, s: Sock, d: &[u8], a: &Addr) -> Res<usize>;
    /// Non-blocking receive into a buffer of `bufsize` bytes.
    fn raw_recv(&mut self, s: Sock, bufsize: usize) -> Res<Vec<u8>>;
    fn raw_recvfrom(&mut self, s: Sock, bufsize: usize) -> Res<Msg>;
    fn raw_getsockname(&mut self, s: Sock) -> Res<Name>;
    fn raw_getpeername(&mut self, s: Sock) -> Res<Name>;
    /// Close every handle of the socket; returns once the socket is gone.
    fn raw_close(&mut self, s: Sock) -> Res<()>;

    fn raw_mkdir(&mut self, path: &str) -> Res<()>;
    fn raw_rmdir(&mut self, path: &str) -> Res<()>;
    /// unlink(2) of a node (socket node or symlink).
    fn raw_rm(&mut self, path: &str) -> Res<()>;
    fn raw_rename(&mut self, from: &str, to: &str) -> Res<()>;
    fn raw_symlink(&mut self, target: &str, link: &str) -> Res<()>;
    /// lstat(2): "sock 755", "dir 755", "link", ...
    fn raw_stat(&mut self, path: &str) -> Res<String>;

    // ---- stream / seqpacket ----
    /// Non-blocking accept(); the new socket gets the next handle number.
    fn raw_accept(&mut self, s: Sock) -> Res<Sock>;
    /// poll() with a zero timeout asking for POLLIN|POLLPRI|POLLOUT|POLLRDHUP;
    /// returns revents.
    fn raw_poll(&mut self, s: Sock) -> Res<i16>;
    /// Non-blocking send that may raise SIGPIPE (no MSG_NOSIGNAL); returns the byte
    /// count and whether SIGPIPE was raised in the calling thread (`sigpipe_check`).
    fn raw_send_sig(&mut self, s: Sock, d: &[u8]) -> (Res<usize>, bool);

    // ---- names / permissions ----
    /// SO_PASSCRED on or off (setsockopt / ctl `passcred on|off`).
    fn raw_passcred(&mut self, s: Sock, on: bool) -> Res<()>;
    /// SO_SNDTIMEO of `ms` milliseconds (setsockopt / ctl `sndtimeo MS`).
    fn raw_sndtimeo(&mut self, s: Sock, ms: u32) -> Res<()>;
    /// A second handle on the same socket (dup(2) / opening `.udsfs/sock/N/ctl` again).
    fn raw_dup(&mut self, s: Sock) -> Res<Sock>;
    /// Close one handle of a socket that has another handle still open (no wait for
    /// the socket to go, since it does not).
    fn raw_drop_handle(&mut self, s: Sock) -> Res<()>;
    /// link(2): a hard link `to` of the node `from`.
    fn raw_link(&mut self, from: &str, to: &str) -> Res<()>;
    /// mknod(path, S_IFSOCK | 0666): a socket node with no socket behind it.
    fn raw_mknod_sock(&mut self, path: &str) -> Res<()>;
    fn raw_chmod(&mut self, path: &str, mode: u32) -> Res<()>;
    fn raw_chown(&mut self, path: &str, uid: u32, gid: u32) -> Res<()>;
    /// lstat(2) owner and group: "uid:gid".
    fn raw_owner(&mut self, path: &str) -> Res<String>;
    /// Make the scenario root usable by other users; call before anything else.
    /// Kernel: chmod 1777 of the scenario root (the mount root's mode); udsfs: a
    /// fresh mount with `--allow-other`.
    fn raw_multiuser(&mut self) -> Res<()>;
    /// bind / connect / sendto with raw sun_path bytes: abstract when the first byte
    /// is NUL; otherwise a path relative to the scenario root, passed relative (the
    /// kernel side runs with the scenario root as the thread's cwd), so that its
    /// length is the length the kernel sees. Paths get a terminating NUL when it
    /// fits (shorter than 108 bytes); addrlen is 2 + the bytes (+ the NUL).
    fn raw_bind_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()>;
    fn raw_connect_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()>;
    fn raw_sendto_sun(&mut self, s: Sock, d: &[u8], sun: &[u8]) -> Res<usize>;

    // ---- credentials, rights and GC ----
    /// getsockopt(SO_PASSCRED) / status `passcred=`.
    fn raw_get_passcred(&mut self, s: Sock) -> Res<bool>;
    /// SO_PEERCRED; None when unset (kernel: pid 0, uid = gid = -1; udsfs: an
    /// empty `peercred=`).
    fn raw_peercred(&mut self, s: Sock) -> Res<Option<Ucred>>;
    /// Non-blocking sendmsg() with an optional address, SCM_CREDENTIALS and
    /// SCM_RIGHTS (udsfs: one `msg` record).
    fn raw_sendmsg(&mut self, s: Sock, m: &SendMsg) -> Res<usize>;
    /// Non-blocking recvmsg() with room for credentials and SCM_MAX_FD sockets; each
    /// received socket becomes a new handle, in order (udsfs: the record's `rights=`
    /// entries are adopted by opening their `ctl`).
    fn raw_recvmsg(&mut self, s: Sock, bufsize: usize) -> Res<RecvMsg>;
    /// Run `ops` one after the other in a child process (see `run_in_child`); one
    /// result per op.
    fn raw_child(&mut self, c: &Child, ops: &[ChildOp]) -> Res<Vec<Res<usize>>>;
    /// Something that names the socket after its handles are gone (kernel: the
    /// socket inode; udsfs: the socket number).
    fn raw_ident(&mut self, s: Sock) -> Res<u64>;
    /// Whether the socket named by `raw_ident` still exists (kernel: listed in
    /// /proc/thread-self/net/unix; udsfs: `.udsfs/sock/N` exists).
    fn raw_alive(&mut self, id: u64) -> Res<bool>;
    /// Close every handle of a socket that may live on (in flight, or held by
    /// another handle); udsfs waits until the daemon has dropped the handles'
    /// references (`refs=` fell by their number, or the socket is gone).
    fn raw_close_ref(&mut self, s: Sock) -> Res<()>;
    /// Let the in-flight garbage collector run (kernel 6.18: release an unrelated
    /// AF_UNIX socket, which schedules it, and wait; udsfs: wait for the collector,
    /// which runs by itself when the last handle of an in-flight socket closes).
    fn raw_gc(&mut self) -> Res<()>;

    // ---- blocking calls (blocking.rs) ----
    /// Start `op` as a blocking call on a thread of its own (kernel: the socket's
    /// O_NONBLOCK is off until the call is joined; udsfs: a file of its own opened
    /// without O_NONBLOCK).
    fn raw_start(&mut self, op: &Blocking) -> Res<Job>;
    /// Wait until the call sleeps in the kernel (true) or has ended without
    /// blocking (false).
    fn raw_wait_blocked(&mut self, j: Job) -> Res<bool>;
    /// Whether the call has ended (now, without waiting).
    fn raw_ended(&mut self, j: Job) -> Res<bool>;
    /// Send `blocker::WAKE_SIGNAL` (handled, no SA_RESTART) to the blocked thread.
    fn raw_signal(&mut self, j: Job) -> Res<()>;
    /// Wait for the call to end; what it returned.
    fn raw_join(&mut self, j: Job) -> Res<Done>;

    /// A call the files have no form for (`FdCall`): only the kernel backend, and
    /// so the fronts, make it.
    fn raw_fd_call(&mut self, _s: Sock, _c: &FdCall) -> Res<String> {
        Err("HARNESS not on this backend".to_string())
    }

    /// A program's call (front_programs.rs: epoll, SIGIO, the C library's stat
    /// entry points, link and remove, SO_PEERGROUPS): as `raw_fd_call`.
    fn raw_prog(&mut self, _c: &Prog) -> Res<String> {
        Err("HARNESS not on this backend".to_string())
    }

    // ---- steps that many scenarios take, made of recorded operations ----

    /// A new socket bound to `a`.
    fn bound(&mut self, ty: Ty, a: Addr) -> Sock {
        let s = self.socket(ty);
        self.bind(s, a);
        s
    }

    /// A new socket bound to `a` and listening.
    fn listening(&mut self, ty: Ty, a: Addr, backlog: i32) -> Sock {
        let s = self.bound(ty, a);
        self.listen(s, backlog);
        s
    }

    /// A connection by the name `a`: the listener there (backlog 5), a new
    /// client connected to it and the end the listener accepted.
    fn connection(&mut self, ty: Ty, a: Addr) -> (Sock, Sock, Sock) {
        let l = self.listening(ty, a.clone(), 5);
        let c = self.connected(ty, a);
        let s = self.accept(l);
        (l, c, s)
    }

    /// A new socket with SO_PASSCRED on.
    fn passcred_socket(&mut self, ty: Ty) -> Sock {
        let s = self.socket(ty);
        self.passcred(s, true);
        s
    }

    /// A new socket connected to `a`.
    fn connected(&mut self, ty: Ty, a: Addr) -> Sock {
        let s = self.socket(ty);
        self.connect(s, a);
        s
    }

    /// Connects `s` to `a`, then asks its name (which a connect may have autobound).
    fn connect_then_name(&mut self, s: Sock, a: Addr) {
        self.connect(s, a);
        self.getsockname(s);
    }

    /// Sends `d` on `s`, then asks its name (which a send may have autobound).
    fn send_then_name(&mut self, s: Sock, d: &[u8]) {
        self.send(s, d);
        self.getsockname(s);
    }

    /// Sends `d` from `s` to `a`, then asks the name of `s`.
    fn sendto_then_name(&mut self, s: Sock, d: &[u8], a: Addr) {
        self.sendto(s, d, a);
        self.getsockname(s);
    }

    /// Closes each of `socks`, in order.
    fn close_refs(&mut self, socks: &[Sock]) {
        for &s in socks {
            self.close_ref(s);
        }
    }

    /// `times` receives of at most `bufsize` bytes each.
    fn recv_times(&mut self, s: Sock, bufsize: usize, times: usize) {
        for _ in 0..times {
            self.recv(s, bufsize);
        }
    }

    /// `times` recvmsg calls with room for `bufsize` bytes each.
    fn recvmsg_times(&mut self, s: Sock, bufsize: usize, times: usize) {
        for _ in 0..times {
            self.recvmsg(s, bufsize);
        }
    }

    /// `times` non-blocking accepts on the listener `l`.
    fn accept_times(&mut self, l: Sock, times: usize) {
        for _ in 0..times {
            self.accept(l);
        }
    }

    /// Non-blocking sends of `data` until the first error, `cap` at most: the bytes
    /// each took and what stopped them. Not recorded (a caller sums the run up).
    fn sends_until_error(&mut self, s: Sock, data: &[u8], cap: usize) -> (Vec<usize>, Stop) {
        let mut took = Vec::new();
        for _ in 0..cap {
            match self.raw_send(s, data) {
                Ok(k) => took.push(k),
                Err(e) => return (took, Stop::Err(e)),
            }
        }
        (took, Stop::Cap)
    }

    /// Non-blocking receives of up to `bufsize` bytes until the first error or EOF,
    /// `cap` at most: what each returned (EOF's empty one too) and what stopped them.
    /// Not recorded (a caller sums the run up).
    fn recvs_until_empty(&mut self, s: Sock, bufsize: usize, cap: usize) -> (Vec<Vec<u8>>, Stop) {
        let mut got = Vec::new();
        for _ in 0..cap {
            match self.raw_recv(s, bufsize) {
                Ok(d) => {
                    let eof = d.is_empty();
                    got.push(d);
                    if eof {
                        return (got, Stop::Eof);
                    }
                }
                Err(e) => return (got, Stop::Err(e)),
            }
        }
        (got, Stop::Cap)
    }

    /// Whether each of `ids` is still alive, in order.
    fn alive_all(&mut self, ids: &[Ident]) {
        for &i in ids {
            self.alive(i);
        }
    }

    // ---- recorded operations ----

    traced! {
        fn socket(ty: Ty) -> Sock = raw_socket(ty)
            => |t, r| format!("socket({})", ty.name()), show(&r, |s| sock_s(*s));
        fn pair(ty: Ty) -> (Sock, Sock) = raw_pair(ty)
            => |t, r| format!("socketpair({})", ty.name()), show(&r, |(a, b)| format!("{} {}", sock_s(*a), sock_s(*b)));
        fn bind(s: Sock, a: Addr) -> Out<()> = raw_bind(s, &a)
            => |t, r| format!("bind({}, {})", sock_s(s), t.addr(&a)), unit(&r);
        fn autobind(s: Sock) -> Out<()> = raw_autobind(s)
            => |t, r| format!("autobind({})", sock_s(s)), unit(&r);
        fn connect(s: Sock, a: Addr) -> Out<()> = raw_connect(s, &a)
            => |t, r| format!("connect({}, {})", sock_s(s), t.addr(&a)), unit(&r);
        fn listen(s: Sock, backlog: i32) -> Out<()> = raw_listen(s, backlog)
            => |t, r| format!("listen({}, {backlog})", sock_s(s)), unit(&r);
        fn shutdown(s: Sock, how: How) -> Out<()> = raw_shutdown(s, how)
            => |t, r| format!("shutdown({}, {})", sock_s(s), how.name()), unit(&r);
        fn send(s: Sock, d: &[u8]) -> Out<usize> = raw_send(s, d)
            => |t, r| format!("send({}, {})", sock_s(s), show_bytes(d)), show(&r, |n| format!("ok {n}"));
        fn sendto(s: Sock, d: &[u8], a: Addr) -> Out<usize> = raw_sendto(s, d, &a)
            => |t, r| format!("sendto({}, {}, {})", sock_s(s), show_bytes(d), t.addr(&a)), show(&r, |n| format!("ok {n}"));
        fn recv(s: Sock, bufsize: usize) -> Out<Vec<u8>> = raw_recv(s, bufsize)
            => |t, r| format!("recv({}, {bufsize})", sock_s(s)), show(&r, |d| format!("ok {}", show_bytes(d)));
    }

    fn recvfrom(&mut self, s: Sock, bufsize: usize) -> Out<Msg> {
        let r = self.raw_recvfrom(s, bufsize);
        let t = self.trace();
        let res = match &r {
            Ok(m) => format!("ok {} from={}", show_bytes(&m.data), t.name(&m.from)),
            Err(e) => format!("ERR {e}"),
        };
        t.push(format!("recvfrom({}, {bufsize})", sock_s(s)), res);
        Out(r)
    }

    fn getsockname(&mut self, s: Sock) -> Out<Name> {
        let r = self.raw_getsockname(s);
        self.record_name(format!("getsockname({})", sock_s(s)), &r);
        Out(r)
    }

    fn getpeername(&mut self, s: Sock) -> Out<Name> {
        let r = self.raw_getpeername(s);
        self.record_name(format!("getpeername({})", sock_s(s)), &r);
        Out(r)
    }

    /// Records `op` with the name it gave, or its errno.
    fn record_name(&mut self, op: String, r: &Res<Name>) {
        let t = self.trace();
        let res = match r {
            Ok(n) => format!("ok {}", t.name(n)),
            Err(e) => format!("ERR {e}"),
        };
        t.push(op, res);
    }

    traced! {
        fn close(s: Sock) -> Out<()> = raw_close(s) => |t, r| format!("close({})", sock_s(s)), unit(&r);
        fn mkdir(path: &str) -> Out<()> = raw_mkdir(path) => |t, r| format!("mkdir {path}"), unit(&r);
        fn rmdir(path: &str) -> Out<()> = raw_rmdir(path) => |t, r| format!("rmdir {path}"), unit(&r);
        fn rm(path: &str) -> Out<()> = raw_rm(path) => |t, r| format!("rm {path}"), unit(&r);
        fn rename(from: &str, to: &str) -> Out<()> = raw_rename(from, to)
            => |t, r| format!("mv {from} {to}"), unit(&r);
        fn symlink(target: &str, link: &str) -> Out<()> = raw_symlink(target, link)
            => |t, r| format!("ln -s {target} {link}"), unit(&r);
        fn stat(path: &str) -> Out<String> = raw_stat(path)
            => |t, r| format!("stat {path}"), show(&r, |s| format!("ok {s}"));
    }

    // ---- stream / seqpacket ----

    traced! {
        fn accept(s: Sock) -> Sock = raw_accept(s)
            => |t, r| format!("accept({})", sock_s(s)), show(&r, |n| sock_s(*n));
        fn poll(s: Sock) -> Out<i16> = raw_poll(s)
            => |t, r| format!("poll({})", sock_s(s)), show(&r, |m| format!("ok {}", poll_mask_name(*m)));
    }

    /// A send without MSG_NOSIGNAL; the trace notes a SIGPIPE raised by it.
    fn send_sig(&mut self, s: Sock, d: &[u8]) -> Out<usize> {
        let (r, raised) = self.raw_send_sig(s, d);
        let sig = if raised { " +SIGPIPE" } else { "" };
        self.trace().push(
            format!("send_sig({}, {})", sock_s(s), show_bytes(d)),
            format!("{}{sig}", show(&r, |n| format!("ok {n}"))),
        );
        Out(r)
    }
    // ---- names / permissions ----

    fn passcred(&mut self, s: Sock, on: bool) -> Out<()> {
        let r = self.raw_passcred(s, on);
        let v = if on { "on" } else { "off" };
        self.trace()
            .push(format!("passcred({}, {v})", sock_s(s)), unit(&r));
        Out(r)
    }

    fn sndtimeo(&mut self, s: Sock, ms: u32) -> Out<()> {
        let r = self.raw_sndtimeo(s, ms);
        self.trace()
            .push(format!("sndtimeo({}, {ms} ms)", sock_s(s)), unit(&r));
        Out(r)
    }

    traced! {
        fn dup(s: Sock) -> Sock = raw_dup(s)
            => |t, r| format!("dup({})", sock_s(s)), show(&r, |n| sock_s(*n));
        fn drop_handle(s: Sock) -> Out<()> = raw_drop_handle(s)
            => |t, r| format!("close-handle({})", sock_s(s)), unit(&r);
        fn link(from: &str, to: &str) -> Out<()> = raw_link(from, to)
            => |t, r| format!("ln {from} {to}"), unit(&r);
        fn mknod_sock(path: &str) -> Out<()> = raw_mknod_sock(path)
            => |t, r| format!("mknod {path} S_IFSOCK|0666"), unit(&r);
        fn chmod(path: &str, mode: u32) -> Out<()> = raw_chmod(path, mode)
            => |t, r| format!("chmod {mode:o} {path}"), unit(&r);
        fn chown(path: &str, uid: u32, gid: u32) -> Out<()> = raw_chown(path, uid, gid)
            => |t, r| format!("chown {uid}:{gid} {path}"), unit(&r);
        fn owner(path: &str) -> Out<String> = raw_owner(path)
            => |t, r| format!("owner {path}"), show(&r, |s| format!("ok {s}"));
        fn multiuser() -> Out<()> = raw_multiuser() => |t, r| "setup multiuser".to_string(), unit(&r);
        fn fd_call(s: Sock, c: FdCall) -> Out<String> = raw_fd_call(s, &c)
            => |t, r| c.show(t, s), show(&r, |v| { if v.is_empty() { "ok".to_string() } else { format!("ok {v}") } });
        fn prog(c: Prog) -> Out<String> = raw_prog(&c)
            => |t, r| c.show(), show(&r, |v| { if v.is_empty() { "ok".to_string() } else { format!("ok {v}") } });
        fn bind_sun(s: Sock, sun: &[u8]) -> Out<()> = raw_bind_sun(s, sun)
            => |t, r| format!("bind({}, {})", sock_s(s), t.sun(sun)), unit(&r);
        fn connect_sun(s: Sock, sun: &[u8]) -> Out<()> = raw_connect_sun(s, sun)
            => |t, r| format!("connect({}, {})", sock_s(s), t.sun(sun)), unit(&r);
        fn sendto_sun(s: Sock, d: &[u8], sun: &[u8]) -> Out<usize> = raw_sendto_sun(s, d, sun)
            => |t, r| format!("sendto({}, {}, {})", sock_s(s), show_bytes(d), t.sun(sun)), show(&r, |n| format!("ok {n}"));
    }

    /// From here on this thread acts as `uid`/`gid` (effective and fs ids, no
    /// supplementary groups); real and saved ids stay root, so `as_root` can return.
    /// Only the calling thread changes (raw syscalls, not glibc's process-wide ones).
    fn as_user(&mut self, uid: u32, gid: u32) -> Out<()> {
        let r = thread_as_user(uid, gid);
        let who = if uid >= SCRATCH_UID {
            "scratch".to_string()
        } else {
            format!("{uid}:{gid}")
        };
        self.trace().push(format!("as {who}"), unit(&r));
        Out(r)
    }

    /// Back to root (effective and fs ids 0, the groups from before `as_user`).
    fn as_root(&mut self) -> Out<()> {
        let r = thread_as_root();
        self.trace().push("as root".to_string(), unit(&r));
        Out(r)
    }

    /// Set this thread's umask (the thread first gets an fs_struct of its own, so
    /// other threads of the test process keep theirs).
    /// Returns the previous umask (not recorded), for restoring it.
    fn umask(&mut self, mask: u32) -> Out<u32> {
        let r = thread_umask(mask);
        self.trace()
            .push(format!("umask {mask:03o}"), show(&r, |_| "ok".to_string()));
        Out(r)
    }
    // ---- credentials, rights and GC ----

    traced! {
        fn get_passcred(s: Sock) -> Out<bool> = raw_get_passcred(s)
            => |t, r| format!("get_passcred({})", sock_s(s)), show(&r, |v| format!("ok {}", u8::from(*v)));
        fn peercred(s: Sock) -> Out<Option<Ucred>> = raw_peercred(s)
            => |t, r| format!("peercred({})", sock_s(s)), show(&r, |c| match c { Some(c) => format!("ok {}", show_ucred(c)), None => "ok unset".to_string(), });
        fn sendmsg(s: Sock, m: SendMsg) -> Out<usize> = raw_sendmsg(s, &m)
            => |t, r| format!("sendmsg({}, {})", sock_s(s), show_sendmsg(t, &m)), show(&r, |n| format!("ok {n}"));
    }

    fn recvmsg(&mut self, s: Sock, bufsize: usize) -> Out<RecvMsg> {
        let r = self.raw_recvmsg(s, bufsize);
        let t = self.trace();
        let res = match &r {
            Ok(m) => {
                let mut v = format!("ok {} from={}", show_bytes(&m.data), t.name(&m.from));
                if let Some(c) = &m.creds {
                    v.push_str(&format!(" creds={}", show_ucred(c)));
                }
                if !m.rights.is_empty() {
                    v.push_str(&format!(" rights={}", show_rights(&m.rights)));
                }
                v
            }
            Err(e) => format!("ERR {e}"),
        };
        t.push(format!("recvmsg({}, {bufsize})", sock_s(s)), res);
        Out(r)
    }

    traced! {
        fn child(c: Child, ops: &[ChildOp]) -> Out<Vec<Res<usize>>> = raw_child(&c, ops)
            => |t, r| format!("child{} {}", c.label(), show_child_ops(t, ops)), show(&r, |v| show_child_results(v));
    }

    /// Not recorded unless it fails: the value differs between the backends.
    fn ident(&mut self, s: Sock) -> Ident {
        let r = self.raw_ident(s);
        if let Err(e) = &r {
            self.trace()
                .push(format!("ident({})", sock_s(s)), format!("ERR {e}"));
        }
        Ident {
            sock: s,
            id: r.ok(),
        }
    }

    fn alive(&mut self, i: Ident) -> Out<bool> {
        let r = match i.id {
            Some(id) => self.raw_alive(id),
            None => Err("HARNESS no ident".to_string()),
        };
        self.trace().push(
            format!("alive({})", sock_s(i.sock)),
            show(&r, |v| if *v { "yes" } else { "no" }.to_string()),
        );
        Out(r)
    }

    traced! {
        fn close_ref(s: Sock) -> Out<()> = raw_close_ref(s)
            => |t, r| format!("close({})", sock_s(s)), unit(&r);
        fn gc() -> Out<()> = raw_gc() => |t, r| "gc".to_string(), unit(&r);
    }

    // ---- blocking calls (blocking.rs) ----

    /// Start a blocking call and wait until it blocks; the trace says whether it did.
    fn start(&mut self, op: Blocking) -> Job {
        let r = self.raw_start(&op).and_then(|j| {
            let blocked = self.raw_wait_blocked(j)?;
            Ok((j, blocked))
        });
        let t = self.trace();
        let desc = show_blocking(t, &op);
        let res = show(&r, |(_, b)| {
            if *b { "blocked" } else { "did not block" }.to_string()
        });
        let j = r.as_ref().map(|(j, _)| *j).unwrap_or(BAD_JOB);
        t.push(format!("start #{} {desc}", job_s(j)), res);
        j
    }

    /// Whether the call is still blocked after a moment (`blocker::SETTLE`) in
    /// which something that should not end it has had time to.
    fn still_blocked(&mut self, j: Job) -> Out<bool> {
        std::thread::sleep(super::blocker::SETTLE);
        let r = self.raw_ended(j).map(|e| !e);
        self.trace().push(
            format!("still blocked #{}?", job_s(j)),
            show(&r, |b| if *b { "yes" } else { "no" }.to_string()),
        );
        Out(r)
    }

    traced! {
        fn signal(j: Job) -> Out<()> = raw_signal(j) => |t, r| format!("signal #{}", job_s(j)), unit(&r);
    }

    fn join(&mut self, j: Job) -> Out<Done> {
        let r = self.raw_join(j);
        let t = self.trace();
        let res = show(&r, |d| show_done(t, d));
        t.push(format!("join #{}", job_s(j)), res);
        Out(r)
    }

    /// Join calls that race for the same thing: their results in sorted order, so
    /// that which thread won does not matter, only what was handed out.
    fn join_sorted(&mut self, jobs: &[Job]) -> Out<Vec<String>> {
        let mut v = Vec::new();
        for &j in jobs {
            let r = self.raw_join(j);
            let t = self.trace();
            v.push(show(&r, |d| show_done(t, d)));
        }
        v.sort();
        let names: Vec<String> = jobs.iter().map(|j| format!("#{}", job_s(*j))).collect();
        self.trace()
            .push(format!("join {} (sorted)", names.join(",")), v.join("; "));
        Out(Ok(v))
    }

    /// How many of `jobs` have ended: once `expect` have (or after
    /// `blocker::LIMIT`), and a moment more for any that should not.
    fn count_ended(&mut self, jobs: &[Job], expect: usize) -> Out<usize> {
        let count = |b: &mut Self| -> Res<usize> {
            let mut n = 0;
            for &j in jobs {
                n += usize::from(b.raw_ended(j)?);
            }
            Ok(n)
        };
        let start = std::time::Instant::now();
        while count(self).is_ok_and(|n| n < expect) && start.elapsed() < super::blocker::LIMIT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(super::blocker::SETTLE);
        let r = count(self);
        let names: Vec<String> = jobs.iter().map(|j| format!("#{}", job_s(*j))).collect();
        self.trace().push(
            format!("ended of {}", names.join(",")),
            show(&r, |n| n.to_string()),
        );
        Out(r)
    }
}

// ---- blocking calls (blocking.rs) ----

/// A blocking call started by `start`: an index into the backend's calls, in
/// order of starting.
pub type Job = usize;

/// Handle returned when a call could not be started.
pub const BAD_JOB: Job = usize::MAX;

fn job_s(j: Job) -> String {
    if j == BAD_JOB {
        "?".to_string()
    } else {
        j.to_string()
    }
}

/// A call that may block, run on a thread of its own.
#[derive(Clone, Debug)]
pub enum Blocking {
    /// recv() of up to n bytes (udsfs: a read of `data`).
    Recv(Sock, usize),
    /// recvmsg() (udsfs: a record from `msg`, its sockets adopted at the join).
    RecvMsg(Sock, usize),
    /// send() (udsfs: a write to `data`).
    Send(Sock, Vec<u8>),
    /// sendmsg() (udsfs: one `msg` record).
    SendMsg(Sock, SendMsg),
    /// accept() (udsfs: an open of `accept`); the new socket gets the next
    /// handle when the call is joined.
    Accept(Sock),
    /// connect() (udsfs: `connect` on a control handle).
    Connect(Sock, Addr),
}

impl Blocking {
    /// The socket the call blocks on.
    pub fn sock(&self) -> Sock {
        match self {
            Blocking::Recv(s, _)
            | Blocking::RecvMsg(s, _)
            | Blocking::Send(s, _)
            | Blocking::SendMsg(s, _)
            | Blocking::Accept(s)
            | Blocking::Connect(s, _) => *s,
        }
    }
}

/// What a blocking call returned.
#[derive(Debug)]
pub enum Done {
    /// Bytes sent.
    Count(usize),
    /// Bytes received.
    Data(Vec<u8>),
    Msg(RecvMsg),
    /// The accepted socket.
    Sock(Sock),
    Unit,
}

fn show_blocking(t: &mut Trace, op: &Blocking) -> String {
    match op {
        Blocking::Recv(s, n) => format!("recv({}, {n})", sock_s(*s)),
        Blocking::RecvMsg(s, n) => format!("recvmsg({}, {n})", sock_s(*s)),
        Blocking::Send(s, d) => format!("send({}, {})", sock_s(*s), show_bytes(d)),
        Blocking::SendMsg(s, m) => format!("sendmsg({}, {})", sock_s(*s), show_sendmsg(t, m)),
        Blocking::Accept(s) => format!("accept({})", sock_s(*s)),
        Blocking::Connect(s, a) => format!("connect({}, {})", sock_s(*s), t.addr(a)),
    }
}

fn show_done(t: &mut Trace, d: &Done) -> String {
    match d {
        Done::Count(n) => format!("ok {n}"),
        Done::Data(d) => format!("ok {}", show_bytes(d)),
        Done::Msg(m) => {
            let mut v = format!("ok {} from={}", show_bytes(&m.data), t.name(&m.from));
            if let Some(c) = &m.creds {
                v.push_str(&format!(" creds={}", show_ucred(c)));
            }
            if !m.rights.is_empty() {
                v.push_str(&format!(" rights={}", show_rights(&m.rights)));
            }
            v
        }
        Done::Sock(s) => sock_s(*s),
        Done::Unit => "ok".to_string(),
    }
}

/// Run `f` with SIGPIPE blocked in this thread and report whether a SIGPIPE became
/// pending for the thread meanwhile (consuming it). A blocked signal stays pending
/// even while its disposition is SIG_IGN, so this sees signals the process ignores
///.
pub fn sigpipe_check<T>(f: impl FnOnce() -> T) -> (T, bool) {
    // SAFETY: sigset manipulation on local values and thread-local signal masks.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        let r = f();
        let mut raised = false;
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) == libc::SIGPIPE {
            raised = true;
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (r, raised)
    }
}

/// The events every `raw_poll` asks for.
pub const POLL_EVENTS: i16 = libc::POLLIN | libc::POLLPRI | libc::POLLOUT | libc::POLLRDHUP;

/// Takes the blocking call `j` out of a backend's table: it is joined once.
pub fn take_job<T>(jobs: &mut [Option<T>], j: Job) -> Res<T> {
    jobs.get_mut(j)
        .and_then(Option::take)
        .ok_or_else(|| "HARNESS no such blocking call".to_string())
}

/// The events of `POLL_EVENTS` that `fd` has now (poll with a zero timeout).
pub fn poll_now(fd: libc::c_int) -> Res<i16> {
    let mut pfd = libc::pollfd {
        fd,
        events: POLL_EVENTS,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    if n < 0 {
        return Err(last_errno());
    }
    Ok(pfd.revents)
}

/// A msghdr over one iovec and the control buffer `ctl` (no control buffer when it is
/// empty), no name. It points into `iov` and `ctl`: they must outlive its use.
pub fn one_iov_msghdr(iov: &mut libc::iovec, ctl: &mut [u64]) -> libc::msghdr {
    // SAFETY: a zeroed msghdr is valid; its pointers are set to the buffers given.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov;
    m.msg_iovlen = 1;
    if !ctl.is_empty() {
        m.msg_control = ctl.as_mut_ptr().cast();
        m.msg_controllen = std::mem::size_of_val(ctl);
    }
    m
}

/// Display form of a poll revents mask: "IN|OUT|HUP", "0" when empty.
pub fn poll_mask_name(m: i16) -> String {
    const BITS: &[(u32, &str)] =
        bit_names! { POLLIN, POLLPRI, POLLOUT, POLLERR, POLLHUP, POLLRDHUP, POLLNVAL };
    mask_name(u32::from(m as u16), BITS)
}

/// `(libc::NAME as u32, "NAME")` for each NAME: the bits `mask_name` names.
macro_rules! bit_names {
    ($($bit:ident),*) => {
        &[$((libc::$bit as u32, stringify!($bit))),*]
    };
}
pub(crate) use bit_names;

/// A bit mask by its bits' names in the order of `names` (less their POLL or EPOLL),
/// "A|B", then the bits without a name in hex; "0" when empty (poll's and epoll's
/// event masks).
pub fn mask_name(m: u32, names: &[(u32, &str)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = m;
    for &(bit, name) in names {
        if m & bit != 0 {
            let short = name.strip_prefix('E').unwrap_or(name);
            parts.push(short.strip_prefix("POLL").unwrap_or(short).to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        parts.join("|")
    }
}

/// Describe an lstat result uniformly for both backends.
pub fn describe_metadata(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let ft = m.file_type();
    let mode = m.permissions().mode() & 0o7777;
    if ft.is_symlink() {
        "link".to_string()
    } else if ft.is_socket() {
        format!("sock {mode:o}")
    } else if ft.is_dir() {
        format!("dir {mode:o}")
    } else if ft.is_file() {
        format!("file {mode:o}")
    } else {
        format!("other {mode:o}")
    }
}

// ---- names / permissions ----

impl Trace {
    /// Display form of raw sun_path bytes: abstract names as `addr` shows
    /// them, paths as they are.
    pub fn sun(&mut self, sun: &[u8]) -> String {
        match sun.split_first() {
            Some((0, rest)) => self.addr(&Addr::Abstract(rest.to_vec())),
            _ => show_escape(sun),
        }
    }
}

thread_local! {
    /// Supplementary groups saved by `thread_as_user`, restored by `thread_as_root`.
    static SAVED_GROUPS: std::cell::RefCell<Option<Vec<libc::gid_t>>> =
        const { std::cell::RefCell::new(None) };
}

fn sys_res(r: libc::c_long) -> Res<()> {
    if r < 0 { Err(last_errno()) } else { Ok(()) }
}

/// Switch this thread's effective (and so fs) ids to uid/gid with no supplementary
/// groups. Raw syscalls: glibc's wrappers would change every thread of the process.
pub fn thread_as_user(uid: u32, gid: u32) -> Res<()> {
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the buffer holds 256 gids.
    let n = unsafe { libc::getgroups(256, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(last_errno());
    }
    groups.truncate(n as usize);
    SAVED_GROUPS.with(|g| {
        g.borrow_mut().get_or_insert(groups);
    });
    let keep: libc::c_long = -1;
    // SAFETY: plain per-thread syscalls.
    unsafe {
        sys_res(libc::syscall(
            libc::SYS_setgroups,
            0 as libc::c_long,
            std::ptr::null::<libc::gid_t>(),
        ))?;
        sys_res(libc::syscall(
            libc::SYS_setresgid,
            keep,
            gid as libc::c_long,
            keep,
        ))?;
        sys_res(libc::syscall(
            libc::SYS_setresuid,
            keep,
            uid as libc::c_long,
            keep,
        ))?;
    }
    Ok(())
}

/// Back to effective uid/gid 0 and the saved supplementary groups.
pub fn thread_as_root() -> Res<()> {
    let keep: libc::c_long = -1;
    // SAFETY: plain per-thread syscalls.
    unsafe {
        sys_res(libc::syscall(
            libc::SYS_setresuid,
            keep,
            0 as libc::c_long,
            keep,
        ))?;
        sys_res(libc::syscall(
            libc::SYS_setresgid,
            keep,
            0 as libc::c_long,
            keep,
        ))?;
    }
    if let Some(groups) = SAVED_GROUPS.with(|g| g.borrow_mut().take()) {
        // SAFETY: the slice holds groups.len() gids.
        sys_res(unsafe {
            libc::syscall(
                libc::SYS_setgroups,
                groups.len() as libc::c_long,
                groups.as_ptr(),
            )
        })?;
    }
    Ok(())
}

/// Give this thread an fs_struct of its own (cwd, root, umask), once per thread.
pub fn thread_private_fs() -> Res<()> {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|d| d.get()) {
        return Ok(());
    }
    // SAFETY: plain syscall; affects only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        return Err(format!("HARNESS unshare(CLONE_FS): {}", last_errno()));
    }
    DONE.with(|d| d.set(true));
    Ok(())
}

/// Set this thread's umask, in an fs_struct of its own; returns the old one.
pub fn thread_umask(mask: u32) -> Res<u32> {
    thread_private_fs()?;
    // SAFETY: plain syscall.
    Ok(unsafe { libc::umask(mask as libc::mode_t) } as u32)
}

// ---- credentials, rights and GC ----

/// Credentials as SCM_CREDENTIALS and SO_PEERCRED carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ucred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// A pid in `ChildOp` credentials that stands for the child's own pid; the child
/// fills it in (its pid is not known before it exists).
pub const OWN_PID: i32 = -2;

impl Ucred {
    pub fn new(pid: i32, uid: u32, gid: u32) -> Ucred {
        Ucred { pid, uid, gid }
    }

    /// This process: its pid with the real uid and gid.
    pub fn own() -> Ucred {
        // SAFETY: plain syscalls.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ucred::new(std::process::id() as i32, uid, gid)
    }
}

/// Display form of a pid: "self" for this test process, 0 and 1 as they are,
/// "own" for `OWN_PID`, any other pid (a child, a nonexistent one) "other".
pub fn pid_label(pid: i32) -> String {
    if pid == std::process::id() as i32 {
        "self".to_string()
    } else if pid == OWN_PID {
        "own".to_string()
    } else if pid == 0 || pid == 1 {
        pid.to_string()
    } else {
        "other".to_string()
    }
}

pub fn show_ucred(c: &Ucred) -> String {
    format!("{}:{}:{}", pid_label(c.pid), c.uid, c.gid)
}

/// Calls on a socket's descriptor that only a program makes (front_behaviours.rs):
/// the files have no address family, address length or socket inode.
#[derive(Clone, Debug)]
pub enum FdCall {
    /// bind(2) with this sun_family and path.
    BindFamily(u16, Addr),
    /// connect(2) with this sun_family and path.
    ConnectFamily(u16, Addr),
    /// sendto(2) with a zeroed sockaddr_un and an address length of 0.
    SendtoLen0(Vec<u8>),
    /// sendmsg(2) with msg_name a zeroed sockaddr_un and msg_namelen 0.
    SendmsgName0(SendMsg),
    /// fstat(2) through the C library: "TYPE MODE UID:GID".
    Fstat,
    /// statx(2) by `syscall(SYS_statx, fd, "", AT_EMPTY_PATH)`: as Fstat.
    SyscallStatx,
    Fchmod(u32),
    Fchown(u32, u32),
    /// setsockopt(SO_SNDBUFFORCE), then getsockopt(SO_SNDBUF): "SNDBUF".
    SndbufForce(i32),
}

impl FdCall {
    fn show(&self, t: &mut Trace, s: Sock) -> String {
        let s = sock_s(s);
        match self {
            FdCall::BindFamily(f, a) => format!("bind({s}, family={f} {})", t.addr(a)),
            FdCall::ConnectFamily(f, a) => format!("connect({s}, family={f} {})", t.addr(a)),
            FdCall::SendtoLen0(d) => format!("sendto({s}, {}, addrlen=0)", show_bytes(d)),
            FdCall::SendmsgName0(m) => {
                format!("sendmsg({s}, {} namelen=0)", show_sendmsg(t, m))
            }
            FdCall::Fstat => format!("fstat({s})"),
            FdCall::SyscallStatx => format!("syscall(SYS_statx, {s})"),
            FdCall::Fchmod(m) => format!("fchmod({s}, {m:o})"),
            FdCall::Fchown(u, g) => format!("fchown({s}, {u}, {g})"),
            FdCall::SndbufForce(n) => format!("setsockopt({s}, SO_SNDBUFFORCE, {n})"),
        }
    }
}

/// What `FdCall::Fstat` shows of a stat: the file type, permission bits and owner.
pub fn show_stat(mode: u32, uid: u32, gid: u32) -> String {
    let kind = match mode & libc::S_IFMT {
        libc::S_IFSOCK => "sock",
        libc::S_IFREG => "file",
        libc::S_IFDIR => "dir",
        libc::S_IFLNK => "link",
        _ => "other",
    };
    format!("{kind} {:o} {uid}:{gid}", mode & 0o7777)
}

/// A message for `sendmsg`.
#[derive(Clone, Debug, Default)]
pub struct SendMsg {
    pub data: Vec<u8>,
    pub to: Option<Addr>,
    pub creds: Option<Ucred>,
    pub rights: Vec<Sock>,
}

impl SendMsg {
    pub fn new(d: &[u8]) -> SendMsg {
        SendMsg {
            data: d.to_vec(),
            ..Default::default()
        }
    }

    pub fn to(mut self, a: Addr) -> SendMsg {
        self.to = Some(a);
        self
    }

    pub fn creds(mut self, c: Ucred) -> SendMsg {
        self.creds = Some(c);
        self
    }

    pub fn rights(mut self, r: &[Sock]) -> SendMsg {
        self.rights = r.to_vec();
        self
    }
}

/// What `recvmsg` returns.
#[derive(Clone, Debug)]
pub struct RecvMsg {
    pub data: Vec<u8>,
    pub from: Name,
    /// Present iff the receiver had SO_PASSCRED on.
    pub creds: Option<Ucred>,
    /// The received sockets, as new handles.
    pub rights: Vec<Sock>,
}

/// A socket's identity that outlives its handles (`ident`, `alive`).
#[derive(Clone, Copy, Debug)]
pub struct Ident {
    pub sock: Sock,
    pub id: Option<u64>,
}

/// The process `child` operations run in: a child process of the test
/// process, optionally with other real/effective/saved ids (and no supplementary
/// groups) and another RLIMIT_NOFILE.
#[derive(Clone, Copy, Debug, Default)]
pub struct Child {
    pub ids: Option<(u32, u32)>,
    pub nofile: Option<u64>,
}

impl Child {
    pub fn label(&self) -> String {
        let mut v = Vec::new();
        if let Some((u, g)) = self.ids {
            // Scratch users (64321 and up) change from run to run; traces
            // must not show which one a run took.
            if u >= SCRATCH_UID {
                v.push("ids=scratch".to_string());
            } else {
                v.push(format!("ids={u}:{g}"));
            }
        }
        if let Some(n) = self.nofile {
            v.push(format!("nofile={n}"));
        }
        format!("[{}]", v.join(" "))
    }
}

/// An operation run in a child process.
#[derive(Clone, Debug)]
pub enum ChildOp {
    /// send() (udsfs: a write to `data`).
    Send(Sock, Vec<u8>),
    SendMsg(Sock, SendMsg),
    Connect(Sock, Addr),
    Listen(Sock, i32),
}

pub fn show_rights(r: &[Sock]) -> String {
    if r.len() <= 8 {
        let v: Vec<String> = r.iter().map(|s| sock_s(*s)).collect();
        format!("[{}]", v.join(","))
    } else {
        format!(
            "[{} socks {}..{}]",
            r.len(),
            sock_s(r[0]),
            sock_s(r[r.len() - 1])
        )
    }
}

pub fn show_sendmsg(t: &mut Trace, m: &SendMsg) -> String {
    let mut v = show_bytes(&m.data);
    if let Some(a) = &m.to {
        v.push_str(&format!(" to={}", t.addr(a)));
    }
    if let Some(c) = &m.creds {
        v.push_str(&format!(" creds={}", show_ucred(c)));
    }
    if !m.rights.is_empty() {
        v.push_str(&format!(" rights={}", show_rights(&m.rights)));
    }
    v
}

fn show_child_op(t: &mut Trace, op: &ChildOp) -> String {
    match op {
        ChildOp::Send(s, d) => format!("send({}, {})", sock_s(*s), show_bytes(d)),
        ChildOp::SendMsg(s, m) => format!("sendmsg({}, {})", sock_s(*s), show_sendmsg(t, m)),
        ChildOp::Connect(s, a) => format!("connect({}, {})", sock_s(*s), t.addr(a)),
        ChildOp::Listen(s, n) => format!("listen({}, {n})", sock_s(*s)),
    }
}

/// Runs of equal consecutive items, as (count, item).
fn runs(v: Vec<String>) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for x in v {
        match out.last_mut() {
            Some((n, y)) if *y == x => *n += 1,
            _ => out.push((1, x)),
        }
    }
    out
}

pub fn show_runs(v: Vec<String>) -> String {
    runs(v)
        .into_iter()
        .map(|(n, x)| if n == 1 { x } else { format!("{n}x {x}") })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn show_child_ops(t: &mut Trace, ops: &[ChildOp]) -> String {
    let v: Vec<String> = ops.iter().map(|o| show_child_op(t, o)).collect();
    show_runs(v)
}

pub fn show_child_results(r: &[Res<usize>]) -> String {
    let v: Vec<String> = r.iter().map(|x| show(x, |n| format!("ok {n}"))).collect();
    show_runs(v)
}

/// The result a child op stores: bytes (>= 0) or -errno.
pub fn child_result(v: i64) -> Res<usize> {
    if v >= 0 {
        Ok(v as usize)
    } else if v == i64::MIN {
        Err("HARNESS child op did not run".to_string())
    } else {
        Err(errno_name((-v) as i32))
    }
}

/// Run `body` in a child process that shares the file descriptor table with this
/// process (clone(CLONE_FILES), so it holds no extra references to any open file:
/// a close elsewhere in the test process is still the last close) and has its own
/// ids and limits: first RLIMIT_NOFILE = `c.nofile`, then no supplementary groups
/// and real = effective = saved ids `c.ids`. `body` fills one i64 per result
/// (bytes, or -errno). It runs in a copy of this process after a raw clone, so it
/// must only make raw system calls: no allocation, no locks.
pub fn run_in_child(c: &Child, nres: usize, body: &mut dyn FnMut(&mut [i64])) -> Res<Vec<i64>> {
    let mut results = vec![i64::MIN; nres];
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: p has room for two descriptors.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("HARNESS pipe2: {}", last_errno()));
    }
    let (ids, nofile) = (c.ids, c.nofile);
    let flags = (libc::CLONE_FILES | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: a fork-like clone (no new stack: the child runs on a copy of this
    // one); the child only makes raw system calls and leaves with _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid == 0 {
        // SAFETY: raw system calls on values prepared before the clone.
        unsafe {
            if let Some(n) = nofile {
                let lim = libc::rlimit64 {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::syscall(
                    libc::SYS_prlimit64,
                    0 as libc::c_long,
                    libc::RLIMIT_NOFILE as libc::c_long,
                    &lim as *const libc::rlimit64,
                    std::ptr::null_mut::<libc::rlimit64>(),
                ) != 0
                {
                    libc::_exit(3);
                }
            }
            if let Some((uid, gid)) = ids {
                let (u, g) = (uid as libc::c_long, gid as libc::c_long);
                if libc::syscall(
                    libc::SYS_setgroups,
                    0 as libc::c_long,
                    std::ptr::null::<libc::gid_t>(),
                ) != 0
                    || libc::syscall(libc::SYS_setresgid, g, g, g) != 0
                    || libc::syscall(libc::SYS_setresuid, u, u, u) != 0
                {
                    libc::_exit(2);
                }
            }
            body(&mut results);
            let bytes = nres * 8;
            let w = libc::write(p[1], results.as_ptr().cast(), bytes);
            libc::_exit(if w == bytes as isize { 0 } else { 4 });
        }
    }
    let fail = |what: String| {
        // SAFETY: closing the pipe we made.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
        Err(what)
    };
    if pid < 0 {
        return fail(format!("HARNESS clone: {}", last_errno()));
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child we made.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL) };
        if r == pid as libc::pid_t {
            break;
        }
        if r < 0 && nix::errno::Errno::last() != nix::errno::Errno::EINTR {
            return fail(format!("HARNESS waitpid: {}", last_errno()));
        }
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return fail(format!("HARNESS child ended with wait status {status:#x}"));
    }
    let bytes = nres * 8;
    let mut got = 0;
    while got < bytes {
        // SAFETY: reading into the results buffer, within its size.
        let n = unsafe {
            libc::read(
                p[0],
                results.as_mut_ptr().cast::<u8>().add(got).cast(),
                bytes - got,
            )
        };
        if n <= 0 {
            return fail(format!("HARNESS reading child results: {}", last_errno()));
        }
        got += n as usize;
    }
    // SAFETY: closing the pipe we made.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
    }
    Ok(results)
}

/// `*libc::__errno_location()` as -errno, for child results.
pub fn neg_errno() -> i64 {
    // SAFETY: reads this thread's errno.
    -(unsafe { *libc::__errno_location() } as i64)
}

/// The first uid of the throw-away users some scenarios run as.
pub const SCRATCH_UID: u32 = 64321;

/// Held while the harness starts a process and while it closes a socket: a
/// fork copies every descriptor until its exec, so a close racing with a
/// spawn in another test thread would leave the socket open a moment longer
/// (the peer would see EAGAIN instead of EOF).
pub static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn spawn_guard() -> std::sync::MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|e| e.into_inner())
}

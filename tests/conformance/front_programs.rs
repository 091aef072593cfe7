//! Scenarios of what real programs do that the integration scripts checked before
//! (issue 29 items 2 and 3: nginx's epoll set and FIOASYNC, Node's `__fxstat64`,
//! supervisord's link and remove, dbus-daemon's SO_PEERGROUPS and quiet refusals),
//! run on the kernel and through the two fronts (fronts.rs), never on the files.
//!
//! Each call (`Prog`) goes to the C library's own entry point: the stat family, link,
//! linkat and remove are looked up by `dlsym(RTLD_DEFAULT)` as a program that links
//! them would find them (an interposer first), so a test does not depend on which
//! one the compiler picks. The trace shows what the program sees: the events and
//! data epoll_wait gives, the SIGIO received (how many, and si_code, si_band and
//! si_fd), the file type and mode each stat entry point reports, what stderr got.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use libc::{c_char, c_int, c_uint};

use super::backend::Ty::*;
use super::backend::*;

/// What the kernel backend lends `call`.
pub trait Fds {
    /// The descriptor of socket `s`.
    fn fd(&self, s: Sock) -> Res<c_int>;
    /// Path `p` of the scenario's root, absolute.
    fn abs(&self, p: &str) -> String;
    /// The socket whose descriptor is `fd`.
    fn sock_of(&self, fd: c_int) -> Option<Sock>;
}

/// Where a stat entry point looks.
#[derive(Clone, Debug)]
pub enum On {
    /// A path of the root (at AT_FDCWD, flags 0).
    Path(&'static str),
    /// As Path with AT_SYMLINK_NOFOLLOW (entry points that take flags).
    Nofollow(&'static str),
    /// A socket's descriptor (fstat and __fxstat).
    Fd(Sock),
    /// A socket's descriptor, path "" and AT_EMPTY_PATH.
    Empty(Sock),
}

/// A call of a program's.
#[derive(Clone, Debug)]
pub enum Prog {
    /// epoll_ctl(EPOLL_CTL_ADD) into the scenario's epoll set (made at first use).
    EpollAdd(Sock, u32, u64),
    EpollMod(Sock, u32, u64),
    EpollDel(Sock),
    /// epoll_wait until this many registrations (by data) reported, or 2 s; then
    /// what else comes within a moment. 0: whatever comes within 100 ms.
    EpollWait(usize),
    /// F_SETOWN of this process.
    SetOwn(Sock),
    /// F_GETOWN: "pid" for this process.
    GetOwn(Sock),
    /// F_SETFL with O_ASYNC on or off (the other flags kept).
    SetAsync(Sock, bool),
    /// Whether F_GETFL says O_ASYNC.
    GetAsync(Sock),
    /// ioctl(FIOASYNC) on or off.
    Fioasync(Sock, bool),
    /// F_SETSIG and F_GETSIG.
    SetSig(Sock, c_int),
    GetSig(Sock),
    /// How many SIGIO came since the last look (waits up to 2 s for one, then a
    /// moment for more).
    Sigio,
    /// As Sigio, and the last one's si_code, si_band and si_fd.
    SigioInfo,
    /// A stat entry point of the C library, by name.
    StatBy(&'static str, On),
    /// link(2), linkat(AT_FDCWD, .., AT_FDCWD, .., 0), remove(3) of the C library.
    Link(&'static str, &'static str),
    Linkat(&'static str, &'static str),
    Remove(&'static str),
    /// getsockopt(SO_PEERGROUPS): first with a length of 0 (ERANGE and the length
    /// needed), then with room; the groups.
    PeerGroups(Sock),
    /// The scenario thread's supplementary groups (setgroups(2) of this thread
    /// only, as the kernel keeps them: the C library's would set every thread's).
    SetGroups(&'static [u32]),
    /// getsockopt (false) or setsockopt (true) of (level, name) with fd 2 a pipe
    /// meanwhile: the answer and what was written on stderr.
    QuietRefusal(Sock, bool, c_int, c_int),
    /// A receive timestamp call (front_tstamp.rs).
    Tstamp(super::front_tstamp::Ts),
}

fn ev_names(e: u32) -> String {
    const NAMES: &[(u32, &str)] = bit_names! {
        EPOLLIN, EPOLLPRI, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDNORM, EPOLLWRNORM, EPOLLWRBAND,
        EPOLLRDHUP, EPOLLET, EPOLLONESHOT
    };
    mask_name(e, NAMES)
}

impl Prog {
    pub fn show(&self) -> String {
        let s = sock_s;
        match self {
            Prog::EpollAdd(k, e, d) => {
                format!("epoll_ctl(ADD, {}, {}, data={d:#x})", s(*k), ev_names(*e))
            }
            Prog::EpollMod(k, e, d) => {
                format!("epoll_ctl(MOD, {}, {}, data={d:#x})", s(*k), ev_names(*e))
            }
            Prog::EpollDel(k) => format!("epoll_ctl(DEL, {})", s(*k)),
            Prog::EpollWait(n) => format!("epoll_wait (for {n})"),
            Prog::SetOwn(k) => format!("fcntl({}, F_SETOWN, getpid())", s(*k)),
            Prog::GetOwn(k) => format!("fcntl({}, F_GETOWN)", s(*k)),
            Prog::SetAsync(k, on) => format!(
                "fcntl({}, F_SETFL, {}O_ASYNC)",
                s(*k),
                if *on { "+" } else { "-" }
            ),
            Prog::GetAsync(k) => format!("fcntl({}, F_GETFL) & O_ASYNC", s(*k)),
            Prog::Fioasync(k, on) => format!("ioctl({}, FIOASYNC, {})", s(*k), i32::from(*on)),
            Prog::SetSig(k, g) => format!("fcntl({}, F_SETSIG, {g})", s(*k)),
            Prog::GetSig(k) => format!("fcntl({}, F_GETSIG)", s(*k)),
            Prog::Sigio => "SIGIO received".to_string(),
            Prog::SigioInfo => "SIGIO received (siginfo)".to_string(),
            Prog::StatBy(n, on) => match on {
                On::Path(p) => format!("{n}({p})"),
                On::Nofollow(p) => format!("{n}({p}, AT_SYMLINK_NOFOLLOW)"),
                On::Fd(k) => format!("{n}({})", s(*k)),
                On::Empty(k) => format!("{n}({}, \"\", AT_EMPTY_PATH)", s(*k)),
            },
            Prog::Link(a, b) => format!("link({a}, {b})"),
            Prog::Linkat(a, b) => format!("linkat({a}, {b})"),
            Prog::Remove(a) => format!("remove({a})"),
            Prog::PeerGroups(k) => format!("getsockopt({}, SO_PEERGROUPS)", s(*k)),
            Prog::SetGroups(g) => format!("setgroups({g:?}) of this thread"),
            Prog::QuietRefusal(k, set, l, n) => format!(
                "{}({}, {l}, {n}), stderr",
                if *set { "setsockopt" } else { "getsockopt" },
                s(*k)
            ),
            Prog::Tstamp(t) => t.show(),
        }
    }
}

// ---- the kernel backend's side ----

thread_local! {
    /// The scenario's epoll set (a scenario runs on a thread of its own).
    static EPOLL: std::cell::RefCell<Option<OwnedFd>> = const { std::cell::RefCell::new(None) };
    /// SIGIO_ONE held while a scenario uses SIGIO.
    static SIGIO_HELD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, ()>>> =
        const { std::cell::RefCell::new(None) };
}

/// One scenario at a time takes SIGIO in this process (they go to the process).
static SIGIO_ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

static SIGIO_COUNT: AtomicUsize = AtomicUsize::new(0);
static SIGIO_CODE: AtomicI32 = AtomicI32::new(0);
static SIGIO_SIGNO: AtomicI32 = AtomicI32::new(0);
static SIGIO_BAND: AtomicI64 = AtomicI64::new(0);
static SIGIO_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigio(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo; for SIGPOLL codes si_band (a long)
    // is at offset 16 and si_fd (an int) at 24 on x86_64 and aarch64.
    unsafe {
        let base = info.cast::<u8>();
        SIGIO_SIGNO.store(sig, SeqCst);
        SIGIO_CODE.store((*info).si_code, SeqCst);
        SIGIO_BAND.store(base.add(16).cast::<i64>().read_unaligned(), SeqCst);
        SIGIO_FD.store(base.add(24).cast::<i32>().read_unaligned(), SeqCst);
    }
    SIGIO_COUNT.fetch_add(1, SeqCst);
}

/// Takes SIGIO for this scenario: a handler in the process (a stray SIGIO never
/// ends it) and the process's SIGIO to itself until the scenario's thread ends.
fn hold_sigio() {
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(|| {
        // SAFETY: installs a handler that only stores into atomics.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigio as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGIO, &sa, std::ptr::null_mut()), 0);
        }
    });
    SIGIO_HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            *h = Some(SIGIO_ONE.lock().unwrap_or_else(|e| e.into_inner()));
            SIGIO_COUNT.store(0, SeqCst);
        }
    });
}

/// The SIGIO that came: waits up to 2 s for the first (the daemon sends it a
/// moment after the event, later on a loaded machine), then 150 ms for more.
fn take_sigio(info: bool, k: &dyn Fds) -> String {
    let start = Instant::now();
    while SIGIO_COUNT.load(SeqCst) == 0 && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(150));
    let n = SIGIO_COUNT.swap(0, SeqCst);
    if !info || n == 0 {
        return n.to_string();
    }
    let code = SIGIO_CODE.load(SeqCst);
    let signo = match SIGIO_SIGNO.load(SeqCst) {
        libc::SIGIO => "SIGIO".to_string(),
        g => g.to_string(),
    };
    let poll = [
        "POLL_IN", "POLL_OUT", "POLL_MSG", "POLL_ERR", "POLL_PRI", "POLL_HUP",
    ];
    let name = match code {
        1..=6 => poll[code as usize - 1].to_string(),
        0x80 => "SI_KERNEL".to_string(),
        0 => "SI_USER".to_string(),
        -1 => "SI_QUEUE".to_string(),
        -5 => "SI_SIGIO".to_string(),
        -6 => "SI_TKILL".to_string(),
        c => c.to_string(),
    };
    if (1..=6).contains(&code) || code == -5 {
        let fd = SIGIO_FD.load(SeqCst);
        let on = k.sock_of(fd).map_or_else(|| format!("fd {fd}"), sock_s);
        format!(
            "{n} {signo} {name} band={:#x} fd={on}",
            SIGIO_BAND.load(SeqCst)
        )
    } else {
        format!("{n} {signo} {name}")
    }
}

fn cvt(r: c_int) -> Res<c_int> {
    if r < 0 { Err(last_errno()) } else { Ok(r) }
}

fn epoll_fd() -> Res<c_int> {
    EPOLL.with(|e| {
        let mut e = e.borrow_mut();
        if e.is_none() {
            // SAFETY: plain syscall.
            let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
            // SAFETY: a fresh descriptor we own.
            *e = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        Ok(e.as_ref().expect("made above").as_raw_fd())
    })
}

fn epoll_ctl(op: c_int, fd: c_int, events: u32, data: u64) -> Res<String> {
    let ep = epoll_fd()?;
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: ev is a valid event.
    cvt(unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) }).map(|_| String::new())
}

/// One epoll_wait of up to `ms`, its events merged into `got` (by data).
fn wait_once(ep: c_int, ms: c_int, got: &mut BTreeMap<u64, u32>) -> Res<()> {
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
    // SAFETY: evs has room for 16 events.
    let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 16, ms) };
    if n < 0 {
        let e = last_errno();
        return if e == "EINTR" { Ok(()) } else { Err(e) };
    }
    for e in &evs[..n as usize] {
        let (d, v) = (e.u64, e.events);
        *got.entry(d).or_default() |= v;
    }
    Ok(())
}

fn epoll_wait(want: usize) -> Res<String> {
    let ep = epoll_fd()?;
    let mut got = BTreeMap::new();
    let start = Instant::now();
    let limit = if want == 0 {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(2)
    };
    while (want == 0 || got.len() < want) && start.elapsed() < limit {
        let left = limit.saturating_sub(start.elapsed()).as_millis().max(1);
        wait_once(ep, left as c_int, &mut got)?;
    }
    if want > 0 {
        std::thread::sleep(Duration::from_millis(50));
        wait_once(ep, 0, &mut got)?;
    }
    let v: Vec<String> = got
        .iter()
        .map(|(d, e)| format!("{d:#x}:{}", ev_names(*e)))
        .collect();
    Ok(if v.is_empty() {
        "none".to_string()
    } else {
        v.join(" ")
    })
}

fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> Res<c_int> {
    // SAFETY: the commands used take an int (or nothing).
    cvt(unsafe { libc::fcntl(fd, cmd, arg) })
}

/// The C library's entry point `name`, as a program that links it finds it.
fn sym<T: Copy>(name: &str) -> Res<T> {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<usize>());
    let c = CString::new(name).expect("a name without NUL");
    // SAFETY: a lookup in the global scope.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("not exported ({name})"));
    }
    // SAFETY: T is the entry point's function pointer type (the caller's word).
    Ok(unsafe { std::mem::transmute_copy::<*mut libc::c_void, T>(&p) })
}

/// What a stat entry point reports: the file type and permission bits.
fn show_mode(mode: u32) -> String {
    let s = show_stat(mode, 0, 0);
    s.strip_suffix(" 0:0").unwrap_or(&s).to_string()
}

/// Not in the libc crate: F_SETSIG and F_GETSIG of <fcntl.h>.
const F_SETSIG: c_int = 10;
const F_GETSIG: c_int = 11;

/// _STAT_VER of the __xstat family (x86_64: _STAT_VER_LINUX).
const STAT_VER: c_int = 1;

type PathFn = unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int;
type XPathFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64) -> c_int;
type FdFn = unsafe extern "C" fn(c_int, *mut libc::stat64) -> c_int;
type XFdFn = unsafe extern "C" fn(c_int, c_int, *mut libc::stat64) -> c_int;
type AtFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64, c_int) -> c_int;
type XAtFn = unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat64, c_int) -> c_int;
type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int;

fn stat_by(k: &dyn Fds, name: &str, on: &On) -> Res<String> {
    // SAFETY: plain old data the call fills.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let (dirfd, path, flags) = match on {
        On::Path(p) => (libc::AT_FDCWD, k.abs(p), 0),
        On::Nofollow(p) => (libc::AT_FDCWD, k.abs(p), libc::AT_SYMLINK_NOFOLLOW),
        On::Fd(s) => (k.fd(*s)?, String::new(), 0),
        On::Empty(s) => (k.fd(*s)?, String::new(), libc::AT_EMPTY_PATH),
    };
    let c = CString::new(path).expect("a path without NUL");
    let st_p: *mut libc::stat64 = &mut st;
    // SAFETY: each entry point gets the arguments of its prototype, a valid path
    // and a buffer of its structure's size.
    let r = unsafe {
        match name {
            "stat" | "stat64" | "lstat" | "lstat64" => sym::<PathFn>(name)?(c.as_ptr(), st_p),
            "__xstat" | "__xstat64" | "__lxstat" | "__lxstat64" => {
                sym::<XPathFn>(name)?(STAT_VER, c.as_ptr(), st_p)
            }
            "fstat" | "fstat64" => sym::<FdFn>(name)?(dirfd, st_p),
            "__fxstat" | "__fxstat64" => sym::<XFdFn>(name)?(STAT_VER, dirfd, st_p),
            "fstatat" | "fstatat64" => sym::<AtFn>(name)?(dirfd, c.as_ptr(), st_p, flags),
            "__fxstatat" | "__fxstatat64" => {
                sym::<XAtFn>(name)?(STAT_VER, dirfd, c.as_ptr(), st_p, flags)
            }
            "statx" => {
                sym::<StatxFn>(name)?(dirfd, c.as_ptr(), flags, libc::STATX_BASIC_STATS, &mut stx)
            }
            _ => return Err(format!("HARNESS no entry point {name}")),
        }
    };
    cvt(r)?;
    Ok(if name == "statx" {
        show_mode(u32::from(stx.stx_mode))
    } else {
        show_mode(st.st_mode)
    })
}

fn peer_groups(fd: c_int) -> Res<String> {
    let mut gids = [0 as libc::gid_t; 256];
    let room = std::mem::size_of_val(&gids) as libc::socklen_t;
    let mut get = |len: &mut libc::socklen_t| {
        // SAFETY: gids has room for `len` bytes (0, then all of it).
        cvt(unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                gids.as_mut_ptr().cast(),
                len,
            )
        })
    };
    let mut len: libc::socklen_t = 0;
    let first = match get(&mut len) {
        Ok(_) => format!("len 0: ok {len}"),
        Err(e) => format!("len 0: {e} {len}"),
    };
    let mut len = room;
    get(&mut len).map_err(|e| format!("{e} ({first})"))?;
    let got = &gids[..len as usize / 4];
    Ok(format!("({first}) {got:?}"))
}

/// The call with fd 2 a pipe meanwhile: its answer and what stderr got.
fn quiet(fd: c_int, set: bool, level: c_int, name: c_int) -> Res<String> {
    let mut p = [0 as c_int; 2];
    // SAFETY: p has room for two descriptors.
    cvt(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    // SAFETY: fresh descriptors we own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    // SAFETY: plain syscalls on descriptors we hold; fd 2 is put back below.
    let saved = cvt(unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: as above.
    unsafe { libc::dup2(w.as_raw_fd(), 2) };
    let mut val = [0u8; 64];
    let mut len = 64 as libc::socklen_t;
    let one: c_int = 1;
    // SAFETY: val has `len` bytes; `one` is an int.
    let res = cvt(unsafe {
        if set {
            libc::setsockopt(fd, level, name, (&one as *const c_int).cast(), 4)
        } else {
            libc::getsockopt(fd, level, name, val.as_mut_ptr().cast(), &mut len)
        }
    });
    // SAFETY: puts fd 2 back.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    drop(w);
    let mut said = [0u8; 512];
    // SAFETY: said has 512 bytes.
    let n = unsafe { libc::read(r.as_raw_fd(), said.as_mut_ptr().cast(), said.len()) };
    let said = if n > 0 {
        let text = String::from_utf8_lossy(&said[..n as usize]).into_owned();
        // The writer's pid differs from run to run.
        let text = match text.split_once("]: ") {
            Some((_, t)) => t.to_string(),
            None => text,
        };
        format!("stderr {:?}", text.trim_end())
    } else {
        "stderr empty".to_string()
    };
    Ok(match res {
        Ok(_) if set => format!("(0), {said}"),
        Ok(_) => format!("(0, len {len}), {said}"),
        Err(e) => format!("({e}), {said}"),
    })
}

fn path_call(k: &dyn Fds, name: &str, a: &str, b: Option<&str>) -> Res<String> {
    let a = CString::new(k.abs(a)).expect("a path without NUL");
    let b = b.map(|b| CString::new(k.abs(b)).expect("a path without NUL"));
    type Link = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    type Linkat = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;
    type Remove = unsafe extern "C" fn(*const c_char) -> c_int;
    // SAFETY: valid C strings to the entry point of that prototype.
    let r = unsafe {
        match (name, &b) {
            ("link", Some(b)) => sym::<Link>("link")?(a.as_ptr(), b.as_ptr()),
            ("linkat", Some(b)) => {
                sym::<Linkat>("linkat")?(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), 0)
            }
            ("remove", None) => sym::<Remove>("remove")?(a.as_ptr()),
            _ => return Err(format!("HARNESS no call {name}")),
        }
    };
    cvt(r).map(|_| String::new())
}

/// The kernel backend's `raw_prog`.
pub fn call(k: &dyn Fds, c: &Prog) -> Res<String> {
    let none = |r: Res<c_int>| r.map(|_| String::new());
    match c {
        Prog::EpollAdd(s, e, d) => epoll_ctl(libc::EPOLL_CTL_ADD, k.fd(*s)?, *e, *d),
        Prog::EpollMod(s, e, d) => epoll_ctl(libc::EPOLL_CTL_MOD, k.fd(*s)?, *e, *d),
        Prog::EpollDel(s) => epoll_ctl(libc::EPOLL_CTL_DEL, k.fd(*s)?, 0, 0),
        Prog::EpollWait(n) => epoll_wait(*n),
        Prog::SetOwn(s) => {
            hold_sigio();
            // SAFETY: plain syscall.
            let pid = unsafe { libc::getpid() };
            none(fcntl(k.fd(*s)?, libc::F_SETOWN, pid.into()))
        }
        Prog::GetOwn(s) => {
            let v = fcntl(k.fd(*s)?, libc::F_GETOWN, 0)?;
            // SAFETY: plain syscall.
            Ok(if v == unsafe { libc::getpid() } {
                "pid".to_string()
            } else {
                v.to_string()
            })
        }
        Prog::SetAsync(s, on) => {
            let fd = k.fd(*s)?;
            let fl = fcntl(fd, libc::F_GETFL, 0)?;
            let fl = if *on {
                fl | libc::O_ASYNC
            } else {
                fl & !libc::O_ASYNC
            };
            none(fcntl(fd, libc::F_SETFL, fl.into()))
        }
        Prog::GetAsync(s) => {
            let fl = fcntl(k.fd(*s)?, libc::F_GETFL, 0)?;
            Ok(if fl & libc::O_ASYNC != 0 {
                "O_ASYNC"
            } else {
                "-"
            }
            .to_string())
        }
        Prog::Fioasync(s, on) => {
            let v: c_int = (*on).into();
            // SAFETY: FIOASYNC takes an int.
            none(cvt(unsafe { libc::ioctl(k.fd(*s)?, libc::FIOASYNC, &v) }))
        }
        Prog::SetSig(s, g) => none(fcntl(k.fd(*s)?, F_SETSIG, (*g).into())),
        Prog::GetSig(s) => fcntl(k.fd(*s)?, F_GETSIG, 0).map(|v| v.to_string()),
        Prog::Sigio => Ok(take_sigio(false, k)),
        Prog::SigioInfo => Ok(take_sigio(true, k)),
        Prog::StatBy(n, on) => stat_by(k, n, on),
        Prog::Link(a, b) => path_call(k, "link", a, Some(b)),
        Prog::Linkat(a, b) => path_call(k, "linkat", a, Some(b)),
        Prog::Remove(a) => path_call(k, "remove", a, None),
        Prog::PeerGroups(s) => peer_groups(k.fd(*s)?),
        Prog::SetGroups(g) => {
            // SAFETY: g is a valid array of g.len() groups.
            let r = unsafe { libc::syscall(libc::SYS_setgroups, g.len(), g.as_ptr()) };
            if r < 0 {
                Err(last_errno())
            } else {
                Ok(String::new())
            }
        }
        Prog::QuietRefusal(s, set, l, n) => quiet(k.fd(*s)?, *set, *l, *n),
        Prog::Tstamp(t) => super::front_tstamp::call(k, t),
    }
}

// ---- the scenarios ----

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;

/// nginx's upstream: a stream socket added to epoll before its connect; after it
/// the same registration reports the connection's events with the same data, and
/// MOD and DEL find it.
pub fn epoll_before_connect(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.socket(Stream);
    b.prog(Prog::EpollAdd(c, IN | OUT | RDHUP, 0x1122_3344_5566_0001));
    b.prog(Prog::EpollWait(1));
    b.connect(c, p("l.sock"));
    b.prog(Prog::EpollWait(1));
    let a = b.accept(l);
    b.send(a, b"reply");
    b.prog(Prog::EpollWait(1));
    b.recv(c, 100);
    b.prog(Prog::EpollMod(c, IN | RDHUP | ET, 0x2));
    b.prog(Prog::EpollWait(0));
    b.shutdown(a, How::Wr);
    b.prog(Prog::EpollWait(1));
    b.prog(Prog::EpollWait(0));
    b.prog(Prog::EpollDel(c));
    b.prog(Prog::EpollDel(c));
}

/// Datagram sockets added before their bind (one edge-triggered, one one-shot)
/// and before a sendto: the same events, flags and data after.
pub fn epoll_before_bind_and_sendto(b: &mut dyn Backend) {
    let r = b.socket(Dgram);
    let q = b.socket(Dgram);
    let s = b.socket(Dgram);
    b.prog(Prog::EpollAdd(r, IN | ET, 0x11));
    b.prog(Prog::EpollAdd(q, IN | ONESHOT, 0x12));
    b.prog(Prog::EpollAdd(s, OUT, 0x13));
    b.prog(Prog::EpollWait(1));
    b.bind(r, p("r.sock"));
    b.bind(q, p("q.sock"));
    b.sendto(s, b"one", p("r.sock"));
    b.prog(Prog::EpollWait(2));
    b.prog(Prog::EpollWait(1));
    b.sendto(s, b"two", p("r.sock"));
    b.prog(Prog::EpollWait(2));
    b.sendto(s, b"x", p("q.sock"));
    b.prog(Prog::EpollWait(2));
    b.sendto(s, b"y", p("q.sock"));
    b.prog(Prog::EpollWait(1));
    b.prog(Prog::EpollMod(q, IN, 0x14));
    b.prog(Prog::EpollWait(2));
    b.recvfrom(r, 100);
    b.recvfrom(r, 100);
    for k in [r, q, s] {
        b.prog(Prog::EpollDel(k));
    }
}

/// F_SETOWN and O_ASYNC set before connect and bind, and FIOASYNC on a pair:
/// F_GETOWN and F_GETFL answer as set, and each event gives the SIGIO Linux gives.
pub fn sigio(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.socket(Stream);
    b.prog(Prog::SetOwn(c));
    b.prog(Prog::SetAsync(c, true));
    b.connect(c, p("l.sock"));
    b.prog(Prog::Sigio);
    b.prog(Prog::GetOwn(c));
    b.prog(Prog::GetAsync(c));
    let a = b.accept(l);
    b.send(a, b"x");
    b.prog(Prog::Sigio);
    b.recv(c, 10);
    b.prog(Prog::Sigio);
    b.prog(Prog::SetAsync(c, false));
    b.prog(Prog::GetAsync(c));
    b.send(a, b"y");
    b.prog(Prog::Sigio);

    let r = b.socket(Dgram);
    b.prog(Prog::SetOwn(r));
    b.prog(Prog::Fioasync(r, true));
    b.prog(Prog::GetAsync(r));
    b.bind(r, p("r.sock"));
    b.prog(Prog::GetAsync(r));
    let s = b.socket(Dgram);
    b.sendto(s, b"d", p("r.sock"));
    b.prog(Prog::Sigio);

    let (x, y) = b.pair(Stream);
    b.prog(Prog::SetOwn(x));
    b.prog(Prog::Fioasync(x, true));
    b.prog(Prog::GetAsync(x));
    b.send(y, b"p");
    b.prog(Prog::Sigio);
    b.prog(Prog::Fioasync(x, false));
    b.prog(Prog::GetAsync(x));
    b.send(y, b"q");
    b.prog(Prog::Sigio);
    b.prog(Prog::Fioasync(x, true));
    b.close(y);
    b.prog(Prog::Sigio);
}

/// The SIGIO's siginfo: with F_SETSIG the reason (si_code POLL_IN, POLL_HUP),
/// si_band and si_fd; without, the plain SIGIO of the kernel (SI_KERNEL).
pub fn sigio_siginfo(b: &mut dyn Backend) {
    let (x, y) = b.pair(Dgram);
    b.prog(Prog::SetOwn(x));
    b.prog(Prog::SetSig(x, libc::SIGIO));
    b.prog(Prog::GetSig(x));
    b.prog(Prog::SetAsync(x, true));
    b.send(y, b"a");
    b.prog(Prog::SigioInfo);
    b.prog(Prog::SetSig(x, 0));
    b.send(y, b"b");
    b.prog(Prog::SigioInfo);

    let l = b.listening(Stream, p("l.sock"), 5);
    let c = b.socket(Stream);
    b.prog(Prog::SetOwn(c));
    b.prog(Prog::SetSig(c, libc::SIGIO));
    b.prog(Prog::SetAsync(c, true));
    b.connect(c, p("l.sock"));
    b.prog(Prog::SigioInfo);
    b.prog(Prog::GetSig(c));
    let a = b.accept(l);
    b.send(a, b"x");
    b.prog(Prog::SigioInfo);
    b.close(a);
    b.prog(Prog::SigioInfo);
}

const PATH_ENTRIES: &[&str] = &[
    "stat",
    "stat64",
    "lstat",
    "lstat64",
    "__xstat",
    "__xstat64",
    "__lxstat",
    "__lxstat64",
];
const FD_ENTRIES: &[&str] = &["fstat", "fstat64", "__fxstat", "__fxstat64"];
const AT_ENTRIES: &[&str] = &[
    "fstatat",
    "fstatat64",
    "__fxstatat",
    "__fxstatat64",
    "statx",
];

/// Every stat entry point the C library exports, on a bound socket's path (and a
/// symlink to it) and on socket descriptors: S_IFSOCK wherever Linux says it.
pub fn stat_entry_points(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("f.sock"), 5);
    b.symlink("f.sock", "f.link");
    let (x, _y) = b.pair(Dgram);
    let c = b.connected(Stream, p("f.sock"));
    let a = b.accept(l);
    for n in PATH_ENTRIES {
        b.prog(Prog::StatBy(n, On::Path("f.sock")));
        b.prog(Prog::StatBy(n, On::Path("f.link")));
    }
    for n in AT_ENTRIES {
        b.prog(Prog::StatBy(n, On::Path("f.sock")));
        b.prog(Prog::StatBy(n, On::Nofollow("f.sock")));
        b.prog(Prog::StatBy(n, On::Nofollow("f.link")));
        for s in [l, x, c, a] {
            b.prog(Prog::StatBy(n, On::Empty(s)));
        }
    }
    for n in FD_ENTRIES {
        for s in [l, x, c, a] {
            b.prog(Prog::StatBy(n, On::Fd(s)));
        }
    }
}

/// supervisord's socket: bound as NAME.PID, hard-linked as NAME, NAME.PID
/// removed; the second name reaches the same socket, remove() removes a name.
pub fn link_and_remove(b: &mut dyn Backend) {
    let l = b.listening(Stream, p("n.sock.1234"), 5);
    b.prog(Prog::Link("n.sock.1234", "n.sock"));
    b.prog(Prog::Remove("n.sock.1234"));
    b.stat("n.sock");
    b.stat("n.sock.1234");
    let c = b.connected(Stream, p("n.sock"));
    let a = b.accept(l);
    b.send(c, b"by the link");
    b.recv(a, 100);
    b.prog(Prog::Linkat("n.sock", "m.sock"));
    b.prog(Prog::Link("n.sock", "m.sock"));
    b.stat("m.sock");
    b.connected(Stream, p("m.sock"));
    b.accept(l);
    b.prog(Prog::Remove("n.sock"));
    b.prog(Prog::Remove("n.sock"));
    b.stat("m.sock");
    b.prog(Prog::Remove("m.sock"));
    let s = b.socket(Stream);
    b.connect(s, p("m.sock"));

    let r = b.bound(Dgram, p("d.sock"));
    b.prog(Prog::Link("d.sock", "e.sock"));
    let t = b.socket(Dgram);
    b.sendto(t, b"to e", p("e.sock"));
    b.recvfrom(r, 100);
    b.prog(Prog::Remove("d.sock"));
    b.sendto(t, b"to d", p("d.sock"));
    b.sendto(t, b"to e again", p("e.sock"));
    b.recvfrom(r, 100);
    b.prog(Prog::Remove("e.sock"));
}

/// SO_PEERGROUPS as Linux answers it (the peer's supplementary groups when it
/// listened, connected or made the pair, whatever they are now; ERANGE and the
/// length needed for too small a buffer; ENODATA unconnected), and options Linux
/// refuses too refused without a word on the program's stderr.
pub fn peergroups_and_refusals(b: &mut dyn Backend) {
    b.prog(Prog::SetGroups(&[5]));
    let l = b.listening(Stream, p("l.sock"), 5);
    b.prog(Prog::SetGroups(&[3, 7, 100]));
    let c = b.connected(Stream, p("l.sock"));
    b.prog(Prog::SetGroups(&[9]));
    let a = b.accept(l);
    let (x, y) = b.pair(Seqpacket);
    b.prog(Prog::SetGroups(&[]));
    let u = b.socket(Stream);
    let d = b.bound(Dgram, p("d.sock"));
    for s in [c, a, x, y, u, d, l] {
        b.prog(Prog::PeerGroups(s));
    }
    const SO_PEERSEC: c_int = 31;
    for s in [c, x, d] {
        b.prog(Prog::QuietRefusal(s, false, libc::SOL_SOCKET, SO_PEERSEC));
        b.prog(Prog::QuietRefusal(
            s,
            true,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
        ));
        b.prog(Prog::QuietRefusal(
            s,
            true,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
        ));
        b.prog(Prog::QuietRefusal(s, false, libc::SOL_SOCKET, 999));
        b.prog(Prog::QuietRefusal(s, true, libc::SOL_SOCKET, 999));
        b.prog(Prog::QuietRefusal(s, false, libc::SOL_IP, libc::IP_TTL));
        b.prog(Prog::QuietRefusal(
            s,
            true,
            libc::SOL_TCP,
            libc::TCP_NODELAY,
        ));
    }
}

//! The reference backend: real kernel AF_UNIX sockets.
//!
//! Path names are relative to a per-scenario temporary directory. The process never
//! changes directory (tests run in parallel threads): every path is made absolute by
//! prefixing the scenario root, and names read back (getsockname, getpeername,
//! recvfrom) have that prefix stripped again, so that they compare equal to the names
//! udsfs reports relative to its mount root.
//!
//! Abstract names live in a per-network-namespace table. `run_isolated` runs a
//! scenario on a fresh thread that first moves itself into a new network namespace
//! (unshare(CLONE_NEWNET) affects only the calling thread), so parallel tests, other
//! programs on the machine and the scenario's fixed abstract names never clash.
//!
//! The same backend runs under `udsfs run` (fronts.rs): then `MOUNT` is set, the
//! scenario roots are made in the mount, and the few things only the harness looks at
//! (a socket's identity and liveness, the collector, whether a call sleeps, a last
//! close) are read from the mount's `.udsfs` files for the sockets that became udsfs
//! sockets. The socket calls themselves are the same calls on both.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::backend::*;
use super::blocker::Blocker;

const SUN_PATH_LEN: usize = 108;

/// The udsfs mount this backend runs under (`udsfs run`, fronts.rs), if any.
pub static MOUNT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Under `MOUNT`: the directory every scenario's root is (the mount itself, or a
/// `--route` directory of the kernel's) and its mode before the first scenario.
pub static ROOT: std::sync::OnceLock<(std::path::PathBuf, u32)> = std::sync::OnceLock::new();

/// Scenarios that ended holding a udsfs socket (under `MOUNT`): that the front
/// carried the calls at all.
pub static ON_UDSFS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Scenarios that ended holding a udsfs socket whose status file says it has a fast
/// lane (`lane=direct` or `lane=through`): that a front on a mount with lanes (the
/// default, issue 30) ran the table on lanes, and one on a `--no-lanes` mount did not.
pub static ON_LANE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether udsfs socket `n` of mount `m` has a fast lane (its status file's `lane=`).
fn laned(m: &std::path::Path, n: u64) -> bool {
    std::fs::read_to_string(m.join(format!(".udsfs/sock/{n}/status")))
        .is_ok_and(|s| s.lines().any(|l| l == "lane=direct" || l == "lane=through"))
}

/// Identities (`raw_ident`) of udsfs sockets carry this bit above the socket number.
const UDSFS_ID: u64 = 1 << 63;

/// The udsfs socket number of descriptor `fd`, when it is a socket's data file of
/// the mount `m` (`m/.udsfs/sock/N/data`).
fn udsfs_number(m: &std::path::Path, fd: libc::c_int) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/thread-self/fd/{fd}")).ok()?;
    let rest = link.strip_prefix(m.join(".udsfs/sock")).ok()?;
    let mut parts = rest.iter();
    let n = parts.next()?.to_str()?.parse().ok()?;
    (parts.next()? == "data" && parts.next().is_none()).then_some(n)
}

/// Leaves `ROOT` as a scenario found it: its entries (but the mount's `.udsfs`)
/// removed, those the mount holds for a routed root too, and its mode as it was
/// (`multiuser` makes it 01777).
fn empty_root(m: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let (root, mode) = ROOT.get().expect("the root is set with the mount");
    let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(*mode));
    empty_dir(root);
    if root != m {
        let mirror = m.join(root.strip_prefix("/").expect("an absolute root"));
        if mirror.exists() {
            empty_dir(&mirror);
        }
    }
}

fn empty_dir(d: &std::path::Path) {
    for e in std::fs::read_dir(d)
        .unwrap_or_else(|e| panic!("HARNESS listing {}: {e}", d.display()))
        .flatten()
    {
        if e.file_name() == ".udsfs" {
            continue;
        }
        let p = e.path();
        let r = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        if let Err(err) = r
            && err.kind() != std::io::ErrorKind::NotFound
        {
            panic!("HARNESS removing {}: {err}", p.display());
        }
    }
}

/// The daemon's count of parked requests (`parked=` of `.udsfs/gc` in the mount `m`).
pub fn parked(m: &std::path::Path) -> Res<usize> {
    let text = std::fs::read_to_string(m.join(".udsfs/gc"))
        .map_err(|e| format!("HARNESS reading .udsfs/gc: {}", io_errno(&e)))?;
    text.lines()
        .find_map(|l| l.strip_prefix("parked="))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("HARNESS .udsfs/gc has no parked= line: {text:?}"))
}

/// The socket numbers the mount holds (`.udsfs/sock`), sorted.
fn udsfs_socks(m: &std::path::Path) -> Res<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(m.join(".udsfs/sock"))
        .map_err(|e| format!("HARNESS listing .udsfs/sock: {}", io_errno(&e)))?
        .filter_map(|e| e.ok())
        .map(|e| format!("udsfs {}", e.file_name().to_string_lossy()))
        .collect();
    v.sort();
    Ok(v)
}

pub struct Kernel {
    socks: Vec<Option<OwnedFd>>,
    /// Blocking calls by `Job`; None once joined.
    jobs: Vec<Option<KJob>>,
    /// Blocking calls not yet joined, per socket (its O_NONBLOCK is off meanwhile).
    blocking: std::collections::HashMap<Sock, usize>,
    /// Scenario root, absolute, without trailing slash.
    root: String,
    /// The scenario root's temporary directory; None under `udsfs run` (the mount).
    _dir: Option<tempfile::TempDir>,
    trace: Trace,
}

/// Raw socket address buffer, large enough for the 111-byte names Linux can return.
#[repr(C)]
struct SockAddrBuf {
    storage: libc::sockaddr_storage,
}

impl SockAddrBuf {
    fn new() -> Self {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        SockAddrBuf {
            storage: unsafe { std::mem::zeroed() },
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the storage is a plain byte buffer of its own size.
        unsafe {
            std::slice::from_raw_parts_mut(
                (&mut self.storage as *mut libc::sockaddr_storage).cast::<u8>(),
                std::mem::size_of::<libc::sockaddr_storage>(),
            )
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe {
            std::slice::from_raw_parts(
                (&self.storage as *const libc::sockaddr_storage).cast::<u8>(),
                std::mem::size_of::<libc::sockaddr_storage>(),
            )
        }
    }

    fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }

    fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }
}

fn cvt(r: libc::c_int) -> Res<()> {
    if r < 0 { Err(last_errno()) } else { Ok(()) }
}

fn cvt_len(r: isize) -> Res<usize> {
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(r as usize)
    }
}

fn sock_type(ty: Ty) -> libc::c_int {
    match ty {
        Ty::Stream => libc::SOCK_STREAM,
        Ty::Dgram => libc::SOCK_DGRAM,
        Ty::Seqpacket => libc::SOCK_SEQPACKET,
    }
}

impl Kernel {
    pub fn new() -> Kernel {
        // Under `udsfs run` the root is the mount's, as on the files (udsfs.rs): the
        // names a scenario binds are then the same names in the mount, up to 108
        // bytes; or a routed directory of the same length as a kernel scenario's.
        let (dir, root) = match ROOT.get() {
            Some((r, _)) => (None, r.to_str().expect("utf-8 root path").to_string()),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("uconf-k")
                    .tempdir()
                    .expect("create kernel scenario directory");
                let root = dir.path().to_str().expect("utf-8 temp path").to_string();
                (Some(dir), root)
            }
        };
        Kernel {
            socks: Vec::new(),
            jobs: Vec::new(),
            blocking: std::collections::HashMap::new(),
            root,
            _dir: dir,
            trace: Trace::default(),
        }
    }

    pub fn into_entries(mut self) -> Vec<(String, String)> {
        self.end_jobs();
        if let Some(m) = MOUNT.get()
            && self
                .socks
                .iter()
                .flatten()
                .any(|f| udsfs_number(m, f.as_raw_fd()).is_some())
        {
            ON_UDSFS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(m) = MOUNT.get()
            && self
                .socks
                .iter()
                .flatten()
                .filter_map(|f| udsfs_number(m, f.as_raw_fd()))
                .any(|n| laned(m, n))
        {
            ON_LANE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let socks = std::mem::take(&mut self.socks);
        {
            let _spawning = super::backend::spawn_guard();
            drop(socks);
        }
        if let Some(m) = MOUNT.get() {
            empty_root(m);
        }
        std::mem::take(&mut self.trace.entries)
    }

    fn fd(&self, s: Sock) -> Res<libc::c_int> {
        match self.socks.get(s) {
            Some(Some(fd)) => Ok(fd.as_raw_fd()),
            _ => Err("EBADF".to_string()),
        }
    }

    fn abs(&self, p: &str) -> String {
        format!("{}/{}", self.root, p)
    }

    fn cpath(&self, p: &str) -> CString {
        CString::new(self.abs(p)).expect("path without NUL")
    }

    /// The name getsockname(2) or getpeername(2) (`call`) gives for socket s.
    fn name_by(&self, s: Sock, call: NameCall) -> Res<Name> {
        let fd = self.fd(s)?;
        let mut buf = SockAddrBuf::new();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: buf is a valid buffer of `len` bytes.
        cvt(unsafe { call(fd, buf.as_mut_ptr(), &mut len) })?;
        Ok(self.name_of(&buf, len))
    }

    /// Build a sockaddr_un for `a`; returns the buffer and addrlen.
    fn sockaddr(&self, a: &Addr) -> Res<(SockAddrBuf, libc::socklen_t)> {
        let mut buf = SockAddrBuf::new();
        let family = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes();
        let bytes = buf.bytes_mut();
        bytes[..2].copy_from_slice(&family);
        let len = match a {
            Addr::Path(p) => {
                let full = self.abs(p);
                let fb = full.as_bytes();
                if fb.len() > SUN_PATH_LEN {
                    return Err(format!(
                        "HARNESS absolute path too long for sun_path ({} bytes)",
                        fb.len()
                    ));
                }
                bytes[2..2 + fb.len()].copy_from_slice(fb);
                // Include the terminating NUL when it fits, as libc users do.
                2 + fb.len() + usize::from(fb.len() < SUN_PATH_LEN)
            }
            Addr::Abstract(n) => {
                if n.len() + 1 > SUN_PATH_LEN {
                    return Err("HARNESS abstract name too long".to_string());
                }
                bytes[2] = 0;
                bytes[3..3 + n.len()].copy_from_slice(n);
                3 + n.len()
            }
        };
        Ok((buf, len as libc::socklen_t))
    }

    /// Decode a sockaddr returned by the kernel.
    fn name_of(&self, buf: &SockAddrBuf, len: libc::socklen_t) -> Name {
        let len = len as usize;
        if len <= 2 {
            return Name::Unnamed;
        }
        let bytes = buf.bytes();
        let path = &bytes[2..len.min(bytes.len())];
        if path[0] == 0 {
            return Name::Abstract(path[1..].to_vec());
        }
        let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
        let path = &path[..end];
        let prefix = format!("{}/", self.root);
        match path.strip_prefix(prefix.as_bytes()) {
            Some(rel) => Name::Path(rel.to_vec()),
            None => {
                let mut v = b"!outside-root:".to_vec();
                v.extend_from_slice(path);
                Name::Path(v)
            }
        }
    }
}

impl super::front_programs::Fds for Kernel {
    fn fd(&self, s: Sock) -> Res<libc::c_int> {
        Kernel::fd(self, s)
    }

    fn abs(&self, p: &str) -> String {
        Kernel::abs(self, p)
    }

    fn sock_of(&self, fd: libc::c_int) -> Option<Sock> {
        self.socks
            .iter()
            .position(|f| f.as_ref().is_some_and(|f| f.as_raw_fd() == fd))
    }
}

impl Default for Kernel {
    fn default() -> Self {
        Self::new()
    }
}

/// Gives this thread a descriptor table of its own, holding none of the test
/// process's descriptors. unshare copies the table, as a fork does: the copy
/// is made and emptied under the spawn guard, so it never holds the parent's
/// end of a pipe that a guarded spawn waits to see closed.
fn private_descriptor_table() {
    let _spawning = super::backend::spawn_guard();
    // SAFETY: plain syscalls; they change only this thread's table.
    unsafe {
        if libc::unshare(libc::CLONE_FILES) != 0 {
            panic!("unshare(CLONE_FILES): {}", last_errno());
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            panic!("close_range: {}", last_errno());
        }
    }
}

/// Run `f` on a fresh thread inside a new network namespace and return its trace.
pub fn run_isolated(f: fn(&mut dyn Backend)) -> Vec<(String, String)> {
    let qlen = std::fs::read_to_string("/proc/sys/net/unix/max_dgram_qlen").ok();
    std::thread::spawn(move || {
        // SAFETY: plain syscall; affects only this thread's namespace set.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            panic!(
                "unshare(CLONE_NEWNET) failed: {} (the kernel side needs its own network \
                 namespace for abstract names)",
                last_errno()
            );
        }
        // In the test process the scenario's descriptors go into a table of this
        // thread's own: a fork by another test thread (a spawn, gcc, a mount)
        // copies its caller's table until its exec, and held a socket this
        // scenario closed open (a stale name then answered connect). Under
        // `udsfs run` the fronts reach descriptors through the process, and the
        // child runs nothing alongside: it keeps the one table.
        if MOUNT.get().is_none() {
            private_descriptor_table();
        }
        // A new namespace starts with the default qlen; use the host's value, which
        // is also what udsfs defaults to.
        if let Some(q) = qlen {
            std::fs::write("/proc/sys/net/unix/max_dgram_qlen", q.trim())
                .expect("set max_dgram_qlen in the new network namespace");
        }
        let mut k = Kernel::new();
        f(&mut k);
        k.into_entries()
    })
    .join()
    .expect("kernel scenario thread panicked")
}

impl Backend for Kernel {
    fn trace(&mut self) -> &mut Trace {
        &mut self.trace
    }

    fn raw_socket(&mut self, ty: Ty) -> Res<Sock> {
        // SAFETY: plain syscall.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                sock_type(ty) | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: fd is a fresh descriptor we own.
        self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
        Ok(self.socks.len() - 1)
    }

    fn raw_pair(&mut self, ty: Ty) -> Res<(Sock, Sock)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for two descriptors.
        cvt(unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                sock_type(ty) | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
                fds.as_mut_ptr(),
            )
        })?;
        for fd in fds {
            // SAFETY: fresh descriptors we own.
            self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        Ok((self.socks.len() - 2, self.socks.len() - 1))
    }

    fn raw_bind(&mut self, s: Sock, a: &Addr) -> Res<()> {
        let fd = self.fd(s)?;
        bind_fd(fd, self.sockaddr(a)?)
    }

    fn raw_autobind(&mut self, s: Sock) -> Res<()> {
        let fd = self.fd(s)?;
        let mut buf = SockAddrBuf::new();
        buf.bytes_mut()[..2].copy_from_slice(&(libc::AF_UNIX as libc::sa_family_t).to_ne_bytes());
        // SAFETY: addrlen 2 = only the family: autobind.
        cvt(unsafe { libc::bind(fd, buf.as_ptr(), 2) })
    }

    fn raw_connect(&mut self, s: Sock, a: &Addr) -> Res<()> {
        let fd = self.fd(s)?;
        connect_fd(fd, self.sockaddr(a)?)
    }

    fn raw_listen(&mut self, s: Sock, backlog: i32) -> Res<()> {
        let fd = self.fd(s)?;
        // SAFETY: plain syscall.
        cvt(unsafe { libc::listen(fd, backlog) })
    }

    fn raw_shutdown(&mut self, s: Sock, how: How) -> Res<()> {
        let fd = self.fd(s)?;
        let how = match how {
            How::Rd => libc::SHUT_RD,
            How::Wr => libc::SHUT_WR,
            How::RdWr => libc::SHUT_RDWR,
        };
        // SAFETY: plain syscall.
        cvt(unsafe { libc::shutdown(fd, how) })
    }

    fn raw_send(&mut self, s: Sock, d: &[u8]) -> Res<usize> {
        let fd = self.fd(s)?;
        send_fd(fd, d, None)
    }

    fn raw_sendto(&mut self, s: Sock, d: &[u8], a: &Addr) -> Res<usize> {
        let fd = self.fd(s)?;
        send_fd(fd, d, Some(self.sockaddr(a)?))
    }

    fn raw_recv(&mut self, s: Sock, bufsize: usize) -> Res<Vec<u8>> {
        let fd = self.fd(s)?;
        let mut v = vec![0u8; bufsize];
        // SAFETY: v has bufsize bytes.
        let n =
            cvt_len(unsafe { libc::recv(fd, v.as_mut_ptr().cast(), bufsize, libc::MSG_DONTWAIT) })?;
        v.truncate(n);
        Ok(v)
    }

    fn raw_recvfrom(&mut self, s: Sock, bufsize: usize) -> Res<Msg> {
        let fd = self.fd(s)?;
        let mut v = vec![0u8; bufsize];
        let mut buf = SockAddrBuf::new();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: v and buf are valid buffers of the given sizes.
        let n = cvt_len(unsafe {
            libc::recvfrom(
                fd,
                v.as_mut_ptr().cast(),
                bufsize,
                libc::MSG_DONTWAIT,
                buf.as_mut_ptr(),
                &mut len,
            )
        })?;
        v.truncate(n);
        Ok(Msg {
            data: v,
            from: self.name_of(&buf, len),
        })
    }

    fn raw_getsockname(&mut self, s: Sock) -> Res<Name> {
        self.name_by(s, libc::getsockname)
    }

    fn raw_getpeername(&mut self, s: Sock) -> Res<Name> {
        self.name_by(s, libc::getpeername)
    }

    fn raw_close(&mut self, s: Sock) -> Res<()> {
        let fd = match self.socks.get_mut(s).and_then(Option::take) {
            Some(fd) => fd,
            None => return Err("EBADF".to_string()),
        };
        let udsfs = MOUNT
            .get()
            .and_then(|m| Some((m, udsfs_number(m, fd.as_raw_fd())?)));
        {
            let _spawning = super::backend::spawn_guard();
            drop(fd);
        }
        if let Some((m, n)) = udsfs {
            self.udsfs_released(m, n);
        }
        Ok(())
    }

    fn raw_mkdir(&mut self, path: &str) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: c is a valid C string.
        cvt(unsafe { libc::mkdir(c.as_ptr(), 0o777) })
    }

    fn raw_rmdir(&mut self, path: &str) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: c is a valid C string.
        cvt(unsafe { libc::rmdir(c.as_ptr()) })
    }

    fn raw_rm(&mut self, path: &str) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: c is a valid C string.
        cvt(unsafe { libc::unlink(c.as_ptr()) })
    }

    fn raw_rename(&mut self, from: &str, to: &str) -> Res<()> {
        let (a, b) = (self.cpath(from), self.cpath(to));
        // SAFETY: valid C strings.
        cvt(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
    }

    fn raw_symlink(&mut self, target: &str, link: &str) -> Res<()> {
        // The target is stored verbatim (relative targets resolve from the link's dir).
        let t = CString::new(target).expect("target without NUL");
        let l = self.cpath(link);
        // SAFETY: valid C strings.
        cvt(unsafe { libc::symlink(t.as_ptr(), l.as_ptr()) })
    }

    fn raw_stat(&mut self, path: &str) -> Res<String> {
        let full = self.abs(path);
        std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(full.as_bytes()))
            .map(|m| describe_metadata(&m))
            .map_err(|e| io_errno(&e))
    }

    // ---- stream / seqpacket ----

    fn raw_accept(&mut self, s: Sock) -> Res<Sock> {
        let nfd = accept_fd(self.fd(s)?)?;
        // SAFETY: nfd is a fresh descriptor we own.
        self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(nfd) }));
        Ok(self.socks.len() - 1)
    }

    fn raw_poll(&mut self, s: Sock) -> Res<i16> {
        poll_now(self.fd(s)?)
    }

    fn raw_send_sig(&mut self, s: Sock, d: &[u8]) -> (Res<usize>, bool) {
        let fd = match self.fd(s) {
            Ok(fd) => fd,
            Err(e) => return (Err(e), false),
        };
        sigpipe_check(|| {
            // SAFETY: d is a valid buffer.
            cvt_len(unsafe { libc::send(fd, d.as_ptr().cast(), d.len(), libc::MSG_DONTWAIT) })
        })
    }

    // ---- names / permissions ----

    fn raw_passcred(&mut self, s: Sock, on: bool) -> Res<()> {
        set_int_opt(self.fd(s)?, libc::SO_PASSCRED, on.into())
    }

    fn raw_sndtimeo(&mut self, s: Sock, ms: u32) -> Res<()> {
        let tv = libc::timeval {
            tv_sec: (ms / 1000).into(),
            tv_usec: ((ms % 1000) * 1000).into(),
        };
        let len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        // SAFETY: tv is a timeval of `len` bytes.
        cvt(unsafe {
            libc::setsockopt(
                self.fd(s)?,
                libc::SOL_SOCKET,
                libc::SO_SNDTIMEO,
                (&tv as *const libc::timeval).cast(),
                len,
            )
        })
    }

    fn raw_dup(&mut self, s: Sock) -> Res<Sock> {
        let fd = self.fd(s)?;
        // SAFETY: plain syscall.
        let nfd = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if nfd < 0 {
            return Err(last_errno());
        }
        // SAFETY: nfd is a fresh descriptor we own.
        self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(nfd) }));
        Ok(self.socks.len() - 1)
    }

    fn raw_drop_handle(&mut self, s: Sock) -> Res<()> {
        self.raw_close(s)
    }

    fn raw_link(&mut self, from: &str, to: &str) -> Res<()> {
        let (a, b) = (self.cpath(from), self.cpath(to));
        // SAFETY: valid C strings.
        cvt(unsafe { libc::link(a.as_ptr(), b.as_ptr()) })
    }

    fn raw_mknod_sock(&mut self, path: &str) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: valid C string.
        cvt(unsafe { libc::mknod(c.as_ptr(), libc::S_IFSOCK | 0o666, 0) })
    }

    fn raw_chmod(&mut self, path: &str, mode: u32) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: valid C string.
        cvt(unsafe { libc::chmod(c.as_ptr(), mode as libc::mode_t) })
    }

    fn raw_chown(&mut self, path: &str, uid: u32, gid: u32) -> Res<()> {
        let c = self.cpath(path);
        // SAFETY: valid C string.
        cvt(unsafe { libc::chown(c.as_ptr(), uid, gid) })
    }

    fn raw_owner(&mut self, path: &str) -> Res<String> {
        use std::os::unix::fs::MetadataExt;
        let full = self.abs(path);
        std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(full.as_bytes()))
            .map(|m| format!("{}:{}", m.uid(), m.gid()))
            .map_err(|e| io_errno(&e))
    }

    fn raw_multiuser(&mut self) -> Res<()> {
        let c = CString::new(self.root.clone()).expect("root without NUL");
        // SAFETY: valid C string.
        cvt(unsafe { libc::chmod(c.as_ptr(), 0o1777) })
    }

    fn raw_bind_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()> {
        let fd = self.fd(s)?;
        bind_fd(fd, self.sun_addr(sun)?)
    }

    fn raw_connect_sun(&mut self, s: Sock, sun: &[u8]) -> Res<()> {
        let fd = self.fd(s)?;
        connect_fd(fd, self.sun_addr(sun)?)
    }

    fn raw_sendto_sun(&mut self, s: Sock, d: &[u8], sun: &[u8]) -> Res<usize> {
        let fd = self.fd(s)?;
        send_fd(fd, d, Some(self.sun_addr(sun)?))
    }
    // ---- credentials, rights and GC ----

    fn raw_get_passcred(&mut self, s: Sock) -> Res<bool> {
        Ok(get_int_opt(self.fd(s)?, libc::SO_PASSCRED)? != 0)
    }

    fn raw_peercred(&mut self, s: Sock) -> Res<Option<Ucred>> {
        let fd = self.fd(s)?;
        let mut c = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: c is a ucred of `len` bytes.
        cvt(unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut c as *mut libc::ucred).cast(),
                &mut len,
            )
        })?;
        if c.pid == 0 && c.uid == u32::MAX && c.gid == u32::MAX {
            return Ok(None);
        }
        Ok(Some(Ucred::new(c.pid, c.uid, c.gid)))
    }

    fn raw_sendmsg(&mut self, s: Sock, m: &SendMsg) -> Res<usize> {
        let fd = self.fd(s)?;
        let p = self.prepare_sendmsg(m)?;
        // SAFETY: the msghdr points into buffers owned by `p`, alive until it drops.
        let r =
            cvt_len(unsafe { libc::sendmsg(fd, &p.hdr, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) });
        drop(p);
        r
    }

    fn raw_recvmsg(&mut self, s: Sock, bufsize: usize) -> Res<RecvMsg> {
        let fd = self.fd(s)?;
        let got = recvmsg_fd(fd, bufsize, libc::MSG_DONTWAIT)?;
        self.adopt_recv(got)
    }

    fn raw_child(&mut self, c: &Child, ops: &[ChildOp]) -> Res<Vec<Res<usize>>> {
        enum Prep {
            Send(libc::c_int, Vec<u8>),
            SendMsg(libc::c_int, KSendMsg),
            Connect(libc::c_int, SockAddrBuf, libc::socklen_t),
            Listen(libc::c_int, i32),
        }
        let mut preps = Vec::new();
        for op in ops {
            preps.push(match op {
                ChildOp::Send(s, d) => Prep::Send(self.fd(*s)?, d.clone()),
                ChildOp::SendMsg(s, m) => Prep::SendMsg(self.fd(*s)?, self.prepare_sendmsg(m)?),
                ChildOp::Connect(s, a) => {
                    let (buf, len) = self.sockaddr(a)?;
                    Prep::Connect(self.fd(*s)?, buf, len)
                }
                ChildOp::Listen(s, n) => Prep::Listen(self.fd(*s)?, *n),
            });
        }
        let mut body = |res: &mut [i64]| {
            // SAFETY: raw system calls on buffers prepared before the clone.
            unsafe {
                let me = libc::syscall(libc::SYS_getpid) as i32;
                for (i, p) in preps.iter_mut().enumerate() {
                    let r: i64 = match p {
                        Prep::Send(fd, d) => libc::send(
                            *fd,
                            d.as_ptr().cast(),
                            d.len(),
                            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                        ) as i64,
                        Prep::SendMsg(fd, m) => {
                            if let Some(pid) = m.own_pid {
                                std::ptr::write_unaligned(pid, me);
                            }
                            libc::sendmsg(*fd, &m.hdr, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                                as i64
                        }
                        Prep::Connect(fd, buf, len) => {
                            libc::connect(*fd, buf.as_ptr(), *len) as i64
                        }
                        Prep::Listen(fd, n) => libc::listen(*fd, *n) as i64,
                    };
                    res[i] = if r < 0 { neg_errno() } else { r };
                }
            }
        };
        let out = run_in_child(c, ops.len(), &mut body)?;
        Ok(out.into_iter().map(child_result).collect())
    }

    fn raw_ident(&mut self, s: Sock) -> Res<u64> {
        let fd = self.fd(s)?;
        if let Some(n) = MOUNT.get().and_then(|m| udsfs_number(m, fd)) {
            return Ok(UDSFS_ID | n);
        }
        // SAFETY: st is plain old data filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and buffer.
        cvt(unsafe { libc::fstat(fd, &mut st) })?;
        Ok(st.st_ino)
    }

    fn raw_alive(&mut self, id: u64) -> Res<bool> {
        if id & UDSFS_ID != 0 {
            let m = MOUNT.get().expect("udsfs identities only under a mount");
            let dir = m.join(format!(".udsfs/sock/{}", id & !UDSFS_ID));
            return match std::fs::symlink_metadata(&dir) {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(format!(
                    "HARNESS stat of {}: {}",
                    dir.display(),
                    io_errno(&e)
                )),
            };
        }
        // /proc/net is the netns of the thread group leader; this thread has its own.
        let text = std::fs::read_to_string("/proc/thread-self/net/unix")
            .map_err(|e| format!("HARNESS reading /proc/thread-self/net/unix: {e}"))?;
        Ok(text.lines().skip(1).any(|l| {
            l.split_whitespace()
                .nth(6)
                .and_then(|v| v.parse::<u64>().ok())
                == Some(id)
        }))
    }

    fn raw_close_ref(&mut self, s: Sock) -> Res<()> {
        self.raw_close(s)
    }

    fn raw_prog(&mut self, c: &super::front_programs::Prog) -> Res<String> {
        super::front_programs::call(self, c)
    }

    fn raw_fd_call(&mut self, s: Sock, c: &FdCall) -> Res<String> {
        let fd = self.fd(s)?;
        let with_family = |k: &Kernel, f: u16, a: &Addr| -> Res<(SockAddrBuf, libc::socklen_t)> {
            let (mut buf, len) = k.sockaddr(a)?;
            buf.bytes_mut()[..2].copy_from_slice(&f.to_ne_bytes());
            Ok((buf, len))
        };
        let done = |r: Res<()>| r.map(|()| String::new());
        match c {
            FdCall::BindFamily(f, a) => done(bind_fd(fd, with_family(self, *f, a)?)),
            FdCall::ConnectFamily(f, a) => done(connect_fd(fd, with_family(self, *f, a)?)),
            FdCall::SendtoLen0(d) => {
                // A zeroed sockaddr_un whose length says there is none.
                send_fd(fd, d, Some((SockAddrBuf::new(), 0))).map(|n| n.to_string())
            }
            FdCall::SendmsgName0(m) => {
                let mut p = self.prepare_sendmsg(m)?;
                let mut name = SockAddrBuf::new();
                p.hdr.msg_name = name.as_mut_ptr().cast();
                p.hdr.msg_namelen = 0;
                // SAFETY: the msghdr points into buffers owned by `p` and `name`.
                let r = cvt_len(unsafe {
                    libc::sendmsg(fd, &p.hdr, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                });
                drop(p);
                r.map(|n| n.to_string())
            }
            FdCall::Fstat => {
                // SAFETY: st is plain old data filled by fstat.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: valid fd and buffer.
                cvt(unsafe { libc::fstat(fd, &mut st) })?;
                Ok(show_stat(st.st_mode, st.st_uid, st.st_gid))
            }
            FdCall::SyscallStatx => {
                // SAFETY: stx is plain old data filled by statx.
                let mut stx: libc::statx = unsafe { std::mem::zeroed() };
                // SAFETY: valid fd, an empty C string and a buffer of statx's size.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_statx,
                        fd as libc::c_long,
                        c"".as_ptr(),
                        libc::AT_EMPTY_PATH as libc::c_long,
                        libc::STATX_BASIC_STATS as libc::c_long,
                        &mut stx as *mut libc::statx,
                    )
                };
                if r < 0 {
                    return Err(last_errno());
                }
                Ok(show_stat(u32::from(stx.stx_mode), stx.stx_uid, stx.stx_gid))
            }
            FdCall::Fchmod(m) => {
                // SAFETY: plain syscall.
                done(cvt(unsafe { libc::fchmod(fd, *m as libc::mode_t) }))
            }
            FdCall::Fchown(u, g) => {
                // SAFETY: plain syscall.
                done(cvt(unsafe { libc::fchown(fd, *u, *g) }))
            }
            FdCall::SndbufForce(n) => {
                set_int_opt(fd, libc::SO_SNDBUFFORCE, *n)?;
                Ok(get_int_opt(fd, libc::SO_SNDBUF)?.to_string())
            }
        }
    }

    fn raw_start(&mut self, op: &Blocking) -> Res<Job> {
        self.start_job(op)
    }

    fn raw_wait_blocked(&mut self, j: Job) -> Res<bool> {
        // Asleep in a socket call is blocked.
        if !self.job(j)?.call.wait_asleep()? {
            return Ok(false);
        }
        let Some(m) = MOUNT.get() else {
            return Ok(true);
        };
        // Under `udsfs run` a call sleeps in whatever the front makes of it (a FUSE
        // request, a seccomp notification) before the daemon parks it: wait until the
        // daemon has parked every call that has not ended, or, for the waits the
        // supervisor makes itself (accept, connect; it looks again every 100 ms), 2 s.
        let start = std::time::Instant::now();
        loop {
            let live = self
                .jobs
                .iter()
                .flatten()
                .filter(|k| !k.call.is_done())
                .count();
            if parked(m)? >= live
                || self.job(j)?.call.is_done()
                || start.elapsed() > std::time::Duration::from_secs(2)
            {
                return Ok(!self.job(j)?.call.is_done());
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn raw_ended(&mut self, j: Job) -> Res<bool> {
        Ok(self.job(j)?.call.is_done())
    }

    fn raw_signal(&mut self, j: Job) -> Res<()> {
        self.job(j)?.call.signal()
    }

    fn raw_join(&mut self, j: Job) -> Res<Done> {
        self.join_job(j)
    }

    fn raw_gc(&mut self) -> Res<()> {
        // 6.18 schedules the collector from unix_release_sock() while anything is in
        // flight: release an unrelated socket, give the work time, and repeat until
        // the table of sockets stops changing.
        gc_settle(|| {
            // SAFETY: plain syscalls on a descriptor we own.
            unsafe {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                if fd < 0 {
                    return Err(format!("HARNESS socket: {}", last_errno()));
                }
                libc::close(fd);
            }
            let text = std::fs::read_to_string("/proc/thread-self/net/unix")
                .map_err(|e| format!("HARNESS reading /proc/thread-self/net/unix: {e}"))?;
            let mut v: Vec<String> = text
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(6).map(str::to_string))
                .collect();
            if let Some(m) = MOUNT.get() {
                v.extend(udsfs_socks(m)?);
            }
            v.sort();
            Ok(v)
        })
    }
}

/// getsockname(2) or getpeername(2).
type NameCall =
    unsafe extern "C" fn(libc::c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> libc::c_int;

/// bind(2) to an address `sockaddr` or `sun_addr` built.
fn bind_fd(fd: libc::c_int, (buf, len): (SockAddrBuf, libc::socklen_t)) -> Res<()> {
    // SAFETY: buf holds `len` valid bytes.
    cvt(unsafe { libc::bind(fd, buf.as_ptr(), len) })
}

/// connect(2) to an address `sockaddr` or `sun_addr` built.
fn connect_fd(fd: libc::c_int, (buf, len): (SockAddrBuf, libc::socklen_t)) -> Res<()> {
    // SAFETY: buf holds `len` valid bytes.
    cvt(unsafe { libc::connect(fd, buf.as_ptr(), len) })
}

/// A non-blocking send without SIGPIPE: sendto(2) to an address `sockaddr` or
/// `sun_addr` built, or with none, which is send(2).
fn send_fd(fd: libc::c_int, d: &[u8], to: Option<(SockAddrBuf, libc::socklen_t)>) -> Res<usize> {
    let (addr, len) = match &to {
        Some((buf, len)) => (buf.as_ptr(), *len),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: d is a valid buffer, addr null or `len` valid bytes.
    cvt_len(unsafe {
        libc::sendto(
            fd,
            d.as_ptr().cast(),
            d.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            addr,
            len,
        )
    })
}

// ---- names / permissions ----

impl Kernel {
    /// A sockaddr_un with raw sun_path bytes (see `Backend::raw_bind_sun`). A path is
    /// passed relative: this thread gets an fs_struct of its own whose cwd is the
    /// scenario root.
    fn sun_addr(&self, sun: &[u8]) -> Res<(SockAddrBuf, libc::socklen_t)> {
        let mut buf = SockAddrBuf::new();
        let bytes = buf.bytes_mut();
        if 2 + sun.len() + 1 > bytes.len() {
            return Err(format!("HARNESS sun_path of {} bytes", sun.len()));
        }
        bytes[..2].copy_from_slice(&(libc::AF_UNIX as libc::sa_family_t).to_ne_bytes());
        bytes[2..2 + sun.len()].copy_from_slice(sun);
        let mut len = 2 + sun.len();
        if sun.first().is_some_and(|&c| c != 0) {
            thread_private_fs()?;
            let root = CString::new(self.root.clone()).expect("root without NUL");
            // SAFETY: valid C string; this thread's cwd only (private fs_struct).
            if unsafe { libc::chdir(root.as_ptr()) } != 0 {
                return Err(format!(
                    "HARNESS chdir to the scenario root: {}",
                    last_errno()
                ));
            }
            if sun.len() < SUN_PATH_LEN {
                len += 1;
            }
        }
        Ok((buf, len as libc::socklen_t))
    }
}

// ---- credentials, rights and GC ----

/// How long `gc` waits for the collector at least, on both backends.
pub const GC_WAIT_MS: u64 = 150;

/// Wait for the collector: at least GC_WAIT_MS, then until the snapshots of the
/// sockets that exist, taken 30 ms apart, stay equal for GC_WAIT_MS (at most 3 s). `snap` may also
/// trigger a collection.
pub fn gc_settle(mut snap: impl FnMut() -> Res<Vec<String>>) -> Res<()> {
    let start = std::time::Instant::now();
    let mut last = None;
    // Unchanged since: a loaded machine can leave the collector's work
    // queued past two looks 30 ms apart (the self-check once saw a cycle
    // not yet collected in one run and collected in the other).
    let mut same_since = start;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let now = snap()?;
        let waited = start.elapsed();
        if last.as_ref() != Some(&now) {
            same_since = std::time::Instant::now();
        }
        let quiet = same_since.elapsed() >= std::time::Duration::from_millis(GC_WAIT_MS);
        if (waited >= std::time::Duration::from_millis(GC_WAIT_MS) && quiet)
            || waited > std::time::Duration::from_secs(3)
        {
            return Ok(());
        }
        last = Some(now);
    }
}

/// A prepared sendmsg(): the msghdr and the buffers it points into.
struct KSendMsg {
    hdr: libc::msghdr,
    _data: Vec<u8>,
    _iov: Box<libc::iovec>,
    _name: Option<Box<SockAddrBuf>>,
    _ctl: Vec<u64>,
    /// Where the SCM_CREDENTIALS pid is, when it is `OWN_PID` (filled by a child).
    own_pid: Option<*mut i32>,
}

impl Kernel {
    fn prepare_sendmsg(&self, m: &SendMsg) -> Res<KSendMsg> {
        let mut fds = Vec::new();
        for r in &m.rights {
            fds.push(self.fd(*r)?);
        }
        let mut data = m.data.clone();
        let mut iov = Box::new(libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        });
        let mut name = match &m.to {
            Some(a) => {
                let (buf, len) = self.sockaddr(a)?;
                Some((Box::new(buf), len))
            }
            None => None,
        };
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe {
            m.creds
                .map(|_| libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32) as usize)
                .unwrap_or(0)
                + if fds.is_empty() {
                    0
                } else {
                    libc::CMSG_SPACE((fds.len() * 4) as u32) as usize
                }
        };
        let mut ctl = vec![0u64; space.div_ceil(8)];
        let mut hdr = one_iov_msghdr(&mut iov, &mut ctl);
        if let Some((buf, len)) = &mut name {
            hdr.msg_name = buf.as_mut_ptr().cast();
            hdr.msg_namelen = *len;
        }
        let mut own_pid = None;
        if space > 0 {
            // SAFETY: the control buffer holds `space` zeroed bytes, laid out by the
            // CMSG macros.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&hdr);
                if let Some(u) = m.creds {
                    (*c).cmsg_level = libc::SOL_SOCKET;
                    (*c).cmsg_type = libc::SCM_CREDENTIALS;
                    (*c).cmsg_len =
                        libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as usize;
                    let p = libc::CMSG_DATA(c).cast::<libc::ucred>();
                    std::ptr::write_unaligned(
                        p,
                        libc::ucred {
                            pid: u.pid,
                            uid: u.uid,
                            gid: u.gid,
                        },
                    );
                    if u.pid == OWN_PID {
                        own_pid = Some(p.cast::<i32>());
                    }
                    c = libc::CMSG_NXTHDR(&hdr, c);
                }
                if !fds.is_empty() {
                    (*c).cmsg_level = libc::SOL_SOCKET;
                    (*c).cmsg_type = libc::SCM_RIGHTS;
                    (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as usize;
                    let p = libc::CMSG_DATA(c).cast::<libc::c_int>();
                    for (i, f) in fds.iter().enumerate() {
                        std::ptr::write_unaligned(p.add(i), *f);
                    }
                }
            }
        }
        Ok(KSendMsg {
            hdr,
            _data: data,
            _iov: iov,
            _name: name.map(|(b, _)| b),
            _ctl: ctl,
            own_pid,
        })
    }
}

/// accept4() of a non-blocking, close-on-exec socket; no address is asked for.
fn accept_fd(fd: libc::c_int) -> Res<libc::c_int> {
    // SAFETY: plain syscall.
    let nfd = unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if nfd < 0 { Err(last_errno()) } else { Ok(nfd) }
}

/// What one recvmsg() returned, before its descriptors get handles.
struct KRecv {
    data: Vec<u8>,
    name: SockAddrBuf,
    namelen: libc::socklen_t,
    creds: Option<Ucred>,
    fds: Vec<libc::c_int>,
    ctrunc: bool,
}

/// recvmsg() with room for credentials and SCM_MAX_FD descriptors (installed
/// close-on-exec).
fn recvmsg_fd(fd: libc::c_int, bufsize: usize, flags: libc::c_int) -> Res<KRecv> {
    let mut data = vec![0u8; bufsize];
    let mut name = SockAddrBuf::new();
    // Room for one ucred and SCM_MAX_FD descriptors, and some slack.
    let mut ctl = vec![0u64; 256];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: bufsize,
    };
    let mut hdr = one_iov_msghdr(&mut iov, &mut ctl);
    hdr.msg_name = name.as_mut_ptr().cast();
    hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: hdr describes valid buffers.
    let n = cvt_len(unsafe { libc::recvmsg(fd, &mut hdr, flags | libc::MSG_CMSG_CLOEXEC) })?;
    data.truncate(n);
    let mut creds = None;
    let mut fds: Vec<libc::c_int> = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `ctl`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&hdr);
        while !c.is_null() {
            let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
            let p = libc::CMSG_DATA(c);
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let u = std::ptr::read_unaligned(p.cast::<libc::ucred>());
                creds = Some(Ucred::new(u.pid, u.uid, u.gid));
            } else if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                for i in 0..len / 4 {
                    fds.push(std::ptr::read_unaligned(p.cast::<libc::c_int>().add(i)));
                }
            }
            c = libc::CMSG_NXTHDR(&hdr, c);
        }
    }
    Ok(KRecv {
        data,
        name,
        namelen: hdr.msg_namelen,
        creds,
        fds,
        ctrunc: hdr.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

impl Kernel {
    /// Gives each received descriptor the next handle and decodes the sender.
    fn adopt_recv(&mut self, got: KRecv) -> Res<RecvMsg> {
        let mut rights = Vec::new();
        for f in got.fds {
            // SAFETY: a descriptor the kernel just installed for us.
            self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(f) }));
            rights.push(self.socks.len() - 1);
        }
        if got.ctrunc {
            return Err("HARNESS recvmsg: MSG_CTRUNC".to_string());
        }
        let from = self.name_of(&got.name, got.namelen);
        Ok(RecvMsg {
            data: got.data,
            from,
            creds: got.creds,
            rights,
        })
    }
}

// ---- blocking calls (blocking.rs) ----

/// What a blocking call on a kernel socket returned.
enum KOut {
    Count(usize),
    Data(Vec<u8>),
    Msg(KRecv),
    Fd(libc::c_int),
    Unit,
}

/// A prepared sendmsg() moved to the calling thread.
struct SendableMsg(KSendMsg);

// SAFETY: the msghdr's pointers point into buffers the struct owns; the thread that
// gets it is the only user.
unsafe impl Send for SendableMsg {}

/// A blocking call and the socket whose O_NONBLOCK it turned off.
struct KJob {
    call: Blocker<Res<KOut>>,
    sock: Sock,
}

/// setsockopt(SOL_SOCKET, `opt`) with an int value.
fn set_int_opt(fd: libc::c_int, opt: libc::c_int, v: libc::c_int) -> Res<()> {
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is an int of `len` bytes.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            len,
        )
    })
}

/// getsockopt(SOL_SOCKET, `opt`) of an int option.
fn get_int_opt(fd: libc::c_int, opt: libc::c_int) -> Res<libc::c_int> {
    let (mut v, mut len) = (0, std::mem::size_of::<libc::c_int>() as libc::socklen_t);
    // SAFETY: v is an int of `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

fn set_nonblock(fd: libc::c_int, on: bool) -> Res<()> {
    // SAFETY: plain fcntl calls.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 {
            return Err(last_errno());
        }
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        cvt(libc::fcntl(fd, libc::F_SETFL, fl))
    }
}

/// The system call a blocking `call` sleeps in: itself on the kernel; under `udsfs
/// run` whatever the front makes of it (-1: any).
fn sleeps_in(call: libc::c_long) -> libc::c_long {
    if MOUNT.get().is_some() { -1 } else { call }
}

impl Kernel {
    /// After the last close of udsfs socket `n`: the daemon hears of it by a FUSE
    /// release the close does not wait for, so wait (as udsfs.rs's close does, 5 s
    /// at most) until the socket is gone or held only in flight (`inflight=` of
    /// its status as large as `refs=`), unless another handle here still holds it.
    fn udsfs_released(&self, m: &std::path::Path, n: u64) {
        let held = self
            .socks
            .iter()
            .flatten()
            .any(|f| udsfs_number(m, f.as_raw_fd()) == Some(n));
        if held {
            return;
        }
        let status = m.join(format!(".udsfs/sock/{n}/status"));
        let field = |t: &str, k: &str| -> Option<u64> {
            t.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.parse().ok())
        };
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(5) {
            let Ok(t) = std::fs::read_to_string(&status) else {
                return;
            };
            if let (Some(refs), Some(inflight)) = (field(&t, "refs="), field(&t, "inflight="))
                && refs <= inflight
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    fn job(&mut self, j: Job) -> Res<&mut KJob> {
        match self.jobs.get_mut(j) {
            Some(Some(k)) => Ok(k),
            _ => Err("HARNESS no such blocking call".to_string()),
        }
    }

    fn spawn_call(&mut self, op: &Blocking) -> Res<Blocker<Res<KOut>>> {
        let fd = self.fd(op.sock())?;
        match op {
            Blocking::Recv(_, n) => {
                let n = *n;
                Blocker::spawn(sleeps_in(libc::SYS_recvfrom), move || {
                    let mut v = vec![0u8; n];
                    // SAFETY: v has n bytes; no address is asked for.
                    let r = cvt_len(unsafe {
                        libc::recvfrom(
                            fd,
                            v.as_mut_ptr().cast(),
                            n,
                            0,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                    })?;
                    v.truncate(r);
                    Ok(KOut::Data(v))
                })
            }
            Blocking::RecvMsg(_, n) => {
                let n = *n;
                Blocker::spawn(sleeps_in(libc::SYS_recvmsg), move || {
                    recvmsg_fd(fd, n, 0).map(KOut::Msg)
                })
            }
            Blocking::Send(_, d) => {
                let d = d.clone();
                Blocker::spawn(sleeps_in(libc::SYS_sendto), move || {
                    // SAFETY: d is a valid buffer; no address.
                    cvt_len(unsafe {
                        libc::sendto(
                            fd,
                            d.as_ptr().cast(),
                            d.len(),
                            libc::MSG_NOSIGNAL,
                            std::ptr::null(),
                            0,
                        )
                    })
                    .map(KOut::Count)
                })
            }
            Blocking::SendMsg(_, m) => {
                let msg = SendableMsg(self.prepare_sendmsg(m)?);
                Blocker::spawn(sleeps_in(libc::SYS_sendmsg), move || {
                    let msg = msg;
                    // SAFETY: the msghdr points into buffers owned by `msg`.
                    cvt_len(unsafe { libc::sendmsg(fd, &msg.0.hdr, libc::MSG_NOSIGNAL) })
                        .map(KOut::Count)
                })
            }
            Blocking::Accept(_) => Blocker::spawn(sleeps_in(libc::SYS_accept4), move || {
                accept_fd(fd).map(KOut::Fd)
            }),
            Blocking::Connect(_, a) => {
                let (buf, len) = self.sockaddr(a)?;
                Blocker::spawn(sleeps_in(libc::SYS_connect), move || {
                    // SAFETY: buf holds `len` valid bytes.
                    cvt(unsafe { libc::connect(fd, buf.as_ptr(), len) }).map(|_| KOut::Unit)
                })
            }
        }
    }

    /// Signals and joins calls a scenario left blocked, so no thread stays behind.
    fn end_jobs(&mut self) {
        for j in 0..self.jobs.len() {
            if self.jobs[j].is_some() {
                let _ = self.raw_join(j);
            }
        }
    }
}

impl Kernel {
    fn start_job(&mut self, op: &Blocking) -> Res<Job> {
        let s = op.sock();
        let fd = self.fd(s)?;
        if self.blocking.get(&s).copied().unwrap_or(0) == 0 {
            set_nonblock(fd, false)?;
        }
        *self.blocking.entry(s).or_insert(0) += 1;
        let call = match self.spawn_call(op) {
            Ok(c) => c,
            Err(e) => {
                self.unblock_sock(s);
                return Err(e);
            }
        };
        self.jobs.push(Some(KJob { call, sock: s }));
        Ok(self.jobs.len() - 1)
    }

    /// One call on `s` fewer; the last one gives the socket its O_NONBLOCK back.
    fn unblock_sock(&mut self, s: Sock) {
        let n = self.blocking.entry(s).or_insert(1);
        *n -= 1;
        if *n == 0
            && let Ok(fd) = self.fd(s)
        {
            let _ = set_nonblock(fd, true);
        }
    }

    fn join_job(&mut self, j: Job) -> Res<Done> {
        let job = take_job(&mut self.jobs, j)?;
        let r = job.call.join();
        self.unblock_sock(job.sock);
        match r?? {
            KOut::Count(n) => Ok(Done::Count(n)),
            KOut::Data(d) => Ok(Done::Data(d)),
            KOut::Msg(m) => self.adopt_recv(m).map(Done::Msg),
            KOut::Fd(fd) => {
                // SAFETY: a descriptor accept just gave us.
                self.socks.push(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
                Ok(Done::Sock(self.socks.len() - 1))
            }
            KOut::Unit => Ok(Done::Unit),
        }
    }
}

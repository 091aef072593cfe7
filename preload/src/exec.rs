//! exec of a program the library cannot reach: a static or Go binary
//! (`udsfs_proto::exe`, the check `udsfs run` makes for CMD; `#!` scripts by
//! their interpreter). Under `udsfs run` (UDSFS_SUPERVISOR and UDSFS_EXE in
//! the new program's environment) such an exec becomes one of `udsfs run
//! --in-place`, which puts this same process under the run's seccomp
//! supervisor and then execs the program (src/supervisor/adopt.rs): pid,
//! parent, descriptors and environment stay. Nothing here allocates with
//! malloc (an exec may follow a fork of a threaded program): paths live in
//! fixed buffers, the new argument vector on the stack or in an anonymous
//! mapping.

use std::ffi::CStr;
use std::sync::OnceLock;

use libc::{c_char, c_int};
use udsfs_proto::exe::{self, Head};

use crate::real;

const PATH_LEN: usize = libc::PATH_MAX as usize;

/// A NUL-terminated path in a fixed buffer.
pub struct Path {
    b: [u8; PATH_LEN],
    len: usize,
}

impl Path {
    fn of(parts: &[&[u8]]) -> Option<Path> {
        let mut p = Path {
            b: [0; PATH_LEN],
            len: 0,
        };
        for part in parts {
            let end = p.len.checked_add(part.len())?;
            if end >= PATH_LEN || part.contains(&0) {
                return None;
            }
            p.b[p.len..end].copy_from_slice(part);
            p.len = end;
        }
        Some(p)
    }

    fn bytes(&self) -> &[u8] {
        &self.b[..self.len]
    }

    pub fn as_ptr(&self) -> *const c_char {
        self.b.as_ptr().cast()
    }
}

/// `NAME=` in a NULL-terminated environment vector (NULL: none).
///
/// # Safety
/// `envp` is NULL or a NULL-terminated vector of C strings.
unsafe fn env_in(envp: *const *const c_char, name: &[u8]) -> Option<&'static [u8]> {
    if envp.is_null() {
        return None;
    }
    let mut i = 0;
    loop {
        // SAFETY: as the caller promised.
        let e = unsafe { *envp.add(i) };
        if e.is_null() {
            return None;
        }
        // SAFETY: a C string of the vector.
        let b = unsafe { CStr::from_ptr(e) }.to_bytes();
        if let Some(v) = b.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")) {
            return Some(v);
        }
        i += 1;
    }
}

fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv reads the environment; the value lives while it is unchanged.
    let v = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: a NUL-terminated string from getenv.
    (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) }.to_bytes())
}

/// An executable regular file `name` in $PATH (execvp's default when it is
/// unset), as execvp looks for one.
pub fn search(name: &[u8]) -> Option<Path> {
    let dirs = env(c"PATH").unwrap_or(b"/bin:/usr/bin");
    for dir in dirs.split(|&b| b == b':') {
        let dir = if dir.is_empty() { b".".as_slice() } else { dir };
        let Some(p) = Path::of(&[dir, b"/", name]) else {
            continue;
        };
        // SAFETY: a NUL-terminated path; stat fills the zeroed struct.
        let ok = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::stat(p.as_ptr(), &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
                && libc::access(p.as_ptr(), libc::X_OK) == 0
        };
        if ok {
            return Some(p);
        }
    }
    None
}

/// Would the kernel's exec accept the file open at `fd` (at `path`): a
/// regular file this process may execute, on a mount that allows it? When
/// not, the exec is left to the kernel, whose errno the caller then gets
/// (`udsfs run --in-place` could only exit with 126).
fn may_exec(fd: c_int, path: &Path, st: &libc::stat) -> bool {
    // SAFETY: a NUL-terminated path; fstatvfs fills the zeroed struct.
    unsafe {
        let mut vfs: libc::statvfs = std::mem::zeroed();
        st.st_mode & libc::S_IFMT == libc::S_IFREG
            && libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0
            && libc::fstatvfs(fd, &mut vfs) == 0
            && vfs.f_flag & libc::ST_NOEXEC == 0
    }
}

/// Would running the file open at `fd` change this process's credentials
/// (set-user-ID, set-group-ID, file capabilities)? Such an exec is left to
/// the kernel, as the dynamic loader leaves LD_PRELOAD out of it: the
/// filter `udsfs run` put on the whole tree carries its socket calls (in a
/// root run, which installs it without no_new_privs; otherwise `refused`).
fn privileged(fd: c_int, st: &libc::stat) -> bool {
    // SAFETY: fstatvfs fills the zeroed struct; the ids calls have no
    // preconditions; fgetxattr with size 0 only asks for the length.
    unsafe {
        let mut vfs: libc::statvfs = std::mem::zeroed();
        if libc::fstatvfs(fd, &mut vfs) == 0 && vfs.f_flag & libc::ST_NOSUID != 0 {
            return false;
        }
        let caps =
            libc::fgetxattr(fd, c"security.capability".as_ptr(), std::ptr::null_mut(), 0) >= 0;
        raises_privilege(st, caps)
    }
}

/// `exe::raises_privilege` for this process's effective ids.
fn raises_privilege(st: &libc::stat, caps: bool) -> bool {
    // SAFETY: the ids calls have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    exe::raises_privilege(st.st_mode, st.st_uid, st.st_gid, uid, gid, caps)
}

/// Under a `udsfs run` that is not root's, the tree has no_new_privs (the
/// filter needs it): a privileged program would run without its privilege,
/// silently. Such an exec is refused (EPERM) with a line naming the file.
/// A `#!` script's own set-ID bits mean nothing to Linux: not refused.
fn refused(file: Option<&Path>) -> bool {
    let Some(file) = file else {
        return false;
    };
    // SAFETY: prctl reads this thread's flag.
    if unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } != 1
        || env(c"UDSFS_MOUNT").is_none()
    {
        return false;
    }
    // O_PATH: an execute-only file (mode 4711) opens too; its head is read
    // through a second, plain open when it can be.
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(file.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    // SAFETY: fstat fills the zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFREG
        && set_ids(file, &st);
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    if !ok {
        return false;
    }
    let parts: [&[u8]; 3] = [
        b"udsfs-preload: refused to exec ",
        file.bytes(),
        b": it is set-user-ID, set-group-ID or has file capabilities, and a udsfs run that is \
          not root's runs every program with no_new_privs (its seccomp filter needs it), so it \
          would run without its privilege (EPERM; run it in a root udsfs run)\n",
    ];
    for p in parts {
        // SAFETY: writes a valid buffer to fd 2; a failure is ignored.
        unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
    }
    true
}

/// `privileged` by path, for an ELF file (or one that cannot be read).
fn set_ids(file: &Path, st: &libc::stat) -> bool {
    // SAFETY: a NUL-terminated path; reads into a local buffer.
    let fd = unsafe {
        libc::open(
            file.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd >= 0 {
        let mut head = [0u8; 2];
        // SAFETY: reads into a local buffer of that size.
        let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), 2, 0) };
        let script = n == 2 && &head == b"#!";
        let r = !script && privileged(fd, st);
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        return r;
    }
    // Execute-only: no capabilities readable, the mode bits say.
    raises_privilege(st, false)
}

/// Sets errno to EPERM and returns -1: an exec `refused` refused.
fn eperm() -> c_int {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::EPERM };
    -1
}

/// Does the program the kernel would run for `path` need the supervisor?
/// Scripts are followed to their interpreter (`env NAME` to NAME in $PATH),
/// four levels as the kernel does; what cannot be read, what the kernel
/// would refuse to run (`may_exec`) and a privileged program do not.
fn needs_supervisor(path: &[u8]) -> bool {
    let Some(mut cur) = Path::of(&[path]) else {
        return false;
    };
    let mut head = [0u8; exe::HEAD_LEN];
    for _ in 0..5 {
        // Not blocking (a FIFO's open waits for a writer) and no terminal
        // taken as the controlling one: the kernel opens neither.
        let how = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(cur.as_ptr(), how) };
        if fd < 0 {
            return false;
        }
        // SAFETY: fstat fills the zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || !may_exec(fd, &cur, &st) {
            // SAFETY: our descriptor.
            unsafe { libc::close(fd) };
            return false;
        }
        // SAFETY: reads into a local buffer of that size.
        let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), head.len(), 0) };
        let next = match exe::parse(&head[..n.max(0) as usize]) {
            Some(Head::Elf { interp, note }) => {
                let mut seg = [0u8; 512];
                let go = note.map(|(off, len)| {
                    let want = (len as usize).min(seg.len());
                    // SAFETY: reads into a local buffer of at least `want` bytes.
                    let k = unsafe { libc::pread(fd, seg.as_mut_ptr().cast(), want, off as i64) };
                    &seg[..k.max(0) as usize]
                });
                let r = exe::needs_supervisor(interp, go) && !privileged(fd, &st);
                // SAFETY: our descriptor.
                unsafe { libc::close(fd) };
                return r;
            }
            Some(Head::Script { interp, env_prog }) => match env_prog {
                Some(p) if !p.contains(&b'/') => search(p),
                Some(p) => Path::of(&[p]),
                None => Path::of(&[interp]),
            },
            None => None,
        };
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        match next {
            Some(p) => cur = p,
            None => return false,
        }
    }
    false
}

/// This library's own file, as LD_PRELOAD named it (found at load time):
/// `udsfs run --in-place` takes it out of LD_PRELOAD.
static LIBRARY: OnceLock<Option<std::ffi::CString>> = OnceLock::new();

pub fn init() {
    LIBRARY.get_or_init(|| {
        // SAFETY: dladdr fills the struct for an address in this library.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let here = init as *const libc::c_void;
            if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
                return None;
            }
            Some(CStr::from_ptr(info.dli_fname).to_owned())
        }
    });
}

/// The argument vector of `udsfs run --in-place` for an exec of `file`
/// with `argv`: in the caller's scratch space on its stack when it fits (a
/// vfork child shares its parent's mappings, so a mapping made there would
/// stay behind in the parent), else in a mapping of its own, freed if the
/// exec fails.
pub struct Redirect {
    at: *mut libc::c_void,
    /// The size of our mapping; 0: the vector is in the caller's scratch.
    mapped: usize,
    pub exe: &'static [u8],
}

/// Stack space for the new vector and its strings (most execs fit).
pub type Scratch = [usize; 1024];

impl Redirect {
    pub fn argv(&self) -> *const *const c_char {
        self.at as *const *const c_char
    }

    pub fn exe_ptr(&self) -> *const c_char {
        self.exe.as_ptr().cast()
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        if self.mapped > 0 {
            // SAFETY: our mapping of that size.
            unsafe { libc::munmap(self.at, self.mapped) };
        }
    }
}

/// Some: the exec of `file` (as the kernel would open it) with `argv` must go
/// through `udsfs run --in-place` (Redirect::exe with Redirect::argv).
///
/// The run to ask is the one the new program's environment `envp` names: a
/// `udsfs run` started under another sets its own (or, with the supervisor
/// for its CMD, none).
///
/// # Safety
/// `argv` and `envp` are NULL-terminated vectors of C strings (or NULL);
/// `scratch` outlives the exec made with the result.
pub unsafe fn redirect(
    file: &[u8],
    argv: *const *const c_char,
    envp: *const *const c_char,
    scratch: &mut Scratch,
) -> Option<Redirect> {
    // SAFETY: as the caller promised.
    let (sock, exe_path) = unsafe {
        (
            env_in(envp, b"UDSFS_SUPERVISOR")?,
            env_in(envp, b"UDSFS_EXE")?,
        )
    };
    // SAFETY: as the caller promised.
    if argv.is_null() || unsafe { (*argv).is_null() } || !needs_supervisor(file) {
        return None;
    }
    let mut argc = 0;
    // SAFETY: as the caller promised: NULL-terminated.
    while unsafe { !(*argv.add(argc)).is_null() } {
        argc += 1;
    }
    let lib = LIBRARY.get().and_then(|l| l.as_deref()).map(CStr::to_bytes);
    let mut sigpipe_ignored = false;
    // SAFETY: a query of the current action only.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if crate::real::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0 {
            sigpipe_ignored = old.sa_sigaction == libc::SIG_IGN;
        }
    }
    // Every string is copied after the pointer vector (the environment may
    // change between here and the exec); the program's own arguments are not.
    let words: [&[u8]; 6] = [
        b"run\0",
        b"--in-place\0",
        b"--exec-file\0",
        b"--preloaded\0",
        b"--sigpipe-ignored\0",
        b"--\0",
    ];
    let strings = file.len()
        + 1
        + lib.map_or(0, |l| l.len() + 1)
        + words.iter().map(|w| w.len()).sum::<usize>()
        + sock.len()
        + 1
        + exe_path.len()
        + 1;
    let ptrs = argc + 12;
    let size = ptrs * std::mem::size_of::<*const c_char>() + strings;
    let (at, mapped) = if size <= std::mem::size_of::<Scratch>() {
        (scratch.as_mut_ptr().cast::<libc::c_void>(), 0)
    } else {
        // SAFETY: a fresh anonymous mapping.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        (map, size)
    };
    let r = Redirect {
        at,
        mapped,
        exe: exe_path,
    };
    let vec = at as *mut *const c_char;
    // SAFETY: the space holds `ptrs` pointers and then `strings` bytes;
    // each string is copied with its NUL.
    unsafe {
        let mut at = (at as *mut u8).add(ptrs * std::mem::size_of::<*const c_char>());
        let mut put = |s: &[u8], nul: bool| -> *const c_char {
            let p = at;
            std::ptr::copy_nonoverlapping(s.as_ptr(), at, s.len());
            at = at.add(s.len());
            if nul {
                *at = 0;
                at = at.add(1);
            }
            p as *const c_char
        };
        let mut n = 0;
        let mut push = |p: *const c_char| {
            *vec.add(n) = p;
            n += 1;
        };
        push(put(exe_path, true));
        push(put(words[0], false));
        push(put(words[1], false));
        push(put(sock, true));
        push(put(words[2], false));
        push(put(file, true));
        if let Some(l) = lib {
            push(put(words[3], false));
            push(put(l, true));
        }
        if sigpipe_ignored {
            push(put(words[4], false));
        }
        push(put(words[5], false));
        for i in 0..argc {
            push(*argv.add(i));
        }
        push(std::ptr::null());
    }
    Some(r)
}

/// The path of the file open at `fd` (fexecve, execveat with AT_EMPTY_PATH),
/// followed by `rest` when given; None for a deleted file.
pub fn fd_path(fd: c_int, rest: Option<&[u8]>) -> Option<Path> {
    let link = Path::of(&[b"/proc/self/fd/", itoa(fd as u32, &mut [0; 10])])?;
    let mut buf = [0u8; PATH_LEN];
    // SAFETY: readlink writes at most buf.len() bytes into the local buffer.
    let n = unsafe { libc::readlink(link.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 || n as usize >= buf.len() {
        return None;
    }
    let target = &buf[..n as usize];
    if !target.starts_with(b"/") || target.ends_with(b" (deleted)") {
        return None;
    }
    match rest {
        Some(r) => Path::of(&[target, b"/", r]),
        None => Path::of(&[target]),
    }
}

/// `v` in decimal, at the end of `buf` (no allocation).
pub fn itoa(mut v: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Said when `udsfs run --in-place` could not be executed; the program then
/// runs as asked (on kernel sockets). No allocation: a fixed line.
pub fn say_not_supervised(exe: &[u8]) {
    let parts: [&[u8]; 3] = [
        b"udsfs-preload: cannot exec ",
        exe,
        b" to supervise a static program: it runs on kernel sockets\n",
    ];
    for p in parts {
        // SAFETY: writes a valid buffer to fd 2; a failure is ignored.
        unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
    }
}

/// Runs `exec` on `udsfs run --in-place` when `file` needs the supervisor;
/// back (it failed) or not needed: None, and the caller execs as asked.
///
/// # Safety
/// `argv` as for execve(2).
unsafe fn via_udsfs(
    file: Option<Path>,
    argv: *const *const c_char,
    envp: *const *const c_char,
    exec: impl FnOnce(*const c_char, *const *const c_char) -> c_int,
) -> Option<c_int> {
    let mut scratch: Scratch = [0; 1024];
    // SAFETY: as the caller promised; `scratch` lives past the exec.
    let r = unsafe { redirect(file?.bytes(), argv, envp, &mut scratch) }?;
    let got = exec(r.exe_ptr(), r.argv());
    if got == 0 {
        // posix_spawn: the child runs.
        return Some(0);
    }
    say_not_supervised(r.exe);
    None
}

/// The exec family's course: a refused `file` gets EPERM; one to run under a supervisor is
/// executed through `udsfs run` (an exec that returns only when it failed); otherwise,
/// or when that failed, `exec` makes the call as asked.
///
/// # Safety
/// As for `via_udsfs`; `exec` is the C library's contract for the call.
unsafe fn exec_via(
    file: Option<Path>,
    argv: *const *const c_char,
    envp: *const *const c_char,
    exec: impl FnOnce() -> c_int,
) -> c_int {
    if refused(file.as_ref()) {
        return eperm();
    }
    // SAFETY: as the caller promised.
    unsafe { via_udsfs(file, argv, envp, |e, a| real::execve(e, a, envp)) };
    exec()
}

/// posix_spawn's course: as `exec_via`, its errors returned, not set: the child of a
/// program to supervise is spawned through `udsfs run`; `plain` spawns as asked.
///
/// # Safety
/// The C library's contract for posix_spawn; `plain` is the call as asked.
unsafe fn spawn_via(
    pid: *mut libc::pid_t,
    file: Option<Path>,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
    plain: impl FnOnce() -> c_int,
) -> c_int {
    if refused(file.as_ref()) {
        return libc::EPERM;
    }
    // SAFETY: as the caller promised.
    unsafe {
        let spawn = |e, a| real::posix_spawn(pid, e, actions, attr, a, envp);
        if let Some(r) = via_udsfs(file, argv, envp, spawn) {
            return r;
        }
    }
    plain()
}

/// The file execve would run for `path`.
///
/// # Safety
/// `path` is NULL or a C string.
unsafe fn path_of(path: *const c_char) -> Option<Path> {
    // SAFETY: as the caller promised.
    (!path.is_null()).then(|| Path::of(&[unsafe { CStr::from_ptr(path) }.to_bytes()]))?
}

/// The file execvp would run for `file`: with a slash as it is, else found in $PATH.
///
/// # Safety
/// `file` is NULL or a C string.
unsafe fn file_of(file: *const c_char) -> Option<Path> {
    if file.is_null() {
        return None;
    }
    // SAFETY: as the caller promised.
    let f = unsafe { CStr::from_ptr(file) }.to_bytes();
    if f.is_empty() {
        return None;
    }
    if f.contains(&b'/') {
        Path::of(&[f])
    } else {
        search(f)
    }
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

/// execve and execvpe (with `envp`), execv and execvp (the environment):
/// the file `$find` says (the path as it is, or found as execvp finds it)
/// run through udsfs, else the C library's call.
macro_rules! exec_entry {
    ($name:ident, $find:ident, envp) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            path: *const c_char,
            argv: *const *const c_char,
            envp: *const *const c_char,
        ) -> c_int {
            // SAFETY: the C library's contract for this call.
            unsafe { exec_via($find(path), argv, envp, || real::$name(path, argv, envp)) }
        }
    };
    ($name:ident, $find:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, argv: *const *const c_char) -> c_int {
            // SAFETY: the C library's contract for this call.
            unsafe { exec_via($find(path), argv, environ, || real::$name(path, argv)) }
        }
    };
}

exec_entry!(execve, path_of, envp);
exec_entry!(execv, path_of);
exec_entry!(execvpe, file_of, envp);
exec_entry!(execvp, file_of);

#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: as for execve.
    unsafe {
        exec_via(fd_path(fd, None), argv, envp, || {
            real::fexecve(fd, argv, envp)
        })
    }
}

/// execveat(2), made as the system call when no supervisor is wanted (the
/// C library's wrapper is newer than some C libraries this loads under).
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: as for execve.
    unsafe {
        let plain = || libc::syscall(libc::SYS_execveat, dirfd, path, argv, envp, flags) as c_int;
        if !path.is_null() && flags & libc::AT_SYMLINK_NOFOLLOW == 0 {
            let p = CStr::from_ptr(path).to_bytes();
            let file = if p.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
                fd_path(dirfd, None)
            } else if p.starts_with(b"/") || dirfd == libc::AT_FDCWD {
                Path::of(&[p])
            } else {
                fd_path(dirfd, Some(p))
            };
            return exec_via(file, argv, envp, plain);
        }
        plain()
    }
}

/// posix_spawn and posix_spawnp: the file `$find` says (as execve or execvp
/// would run it) spawned through udsfs, else the C library's call.
macro_rules! spawn_entry {
    ($name:ident, $find:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            pid: *mut libc::pid_t,
            path: *const c_char,
            actions: *const libc::posix_spawn_file_actions_t,
            attr: *const libc::posix_spawnattr_t,
            argv: *const *const c_char,
            envp: *const *const c_char,
        ) -> c_int {
            // SAFETY: the C library's contract for this call.
            unsafe {
                let plain = || real::$name(pid, path, actions, attr, argv, envp);
                spawn_via(pid, $find(path), actions, attr, argv, envp, plain)
            }
        }
    };
}

spawn_entry!(posix_spawn, path_of);
spawn_entry!(posix_spawnp, file_of);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_paths() {
        assert_eq!(itoa(0, &mut [0; 10]), b"0");
        assert_eq!(itoa(4294967295, &mut [0; 10]), b"4294967295");
        assert_eq!(Path::of(&[b"/a", b"/b"]).unwrap().bytes(), b"/a/b");
        assert!(Path::of(&[&[b'x'; PATH_LEN]]).is_none());
        assert!(Path::of(&[b"a\0b"]).is_none());
        // The test binary is dynamic (cargo's default on glibc).
        assert!(!needs_supervisor(b"/proc/self/exe"));
        assert!(!needs_supervisor(b"/nonexistent"));
        assert!(search(b"sh").is_some());
    }
}

//! `udsfs run [--front F] [--mount M] [--route PREFIX]... -- CMD [ARGS]`: runs
//! CMD with the preload library or the seccomp supervisor (`src/supervisor/`), on mount M or on a private mount made for CMD and
//! removed once CMD and every descendant it left behind are gone. It returns
//! when CMD exits (`front.rs`); what serves CMD's descendants stays behind.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Args;

mod forward;
mod front;

/// The library's file name, looked for next to the udsfs binary.
const LIBRARY: &str = "libudsfs_preload.so";

#[derive(Args, Clone)]
pub struct RunArgs {
    /// An existing udsfs mount to use (default: a private one for CMD).
    #[arg(long)]
    mount: Option<PathBuf>,
    /// An absolute path prefix whose socket names live in the mount (at
    /// the same path below it), e.g. /var/run/app.
    #[arg(long)]
    route: Vec<PathBuf>,
    /// How CMD's socket calls reach udsfs: `preload`, the library
    /// (dynamically linked programs), or `seccomp`, a supervisor that traps
    /// the calls (Go, static binaries, raw system calls). Default: chosen
    /// by CMD's executable (`front_for`).
    #[arg(long, value_enum)]
    front: Option<Front>,
    /// Capture the mount's messages while CMD runs, as pcapng, to FILE.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// The capture's payload encoding: upper-pdu or tcp.
    #[arg(long, value_name = "FORMAT", value_parser = ["upper-pdu", "tcp"], requires = "capture")]
    capture_format: Option<String>,
    /// The payload protocol of the sockets captured (http, ...); NAME=GLOB
    /// for those bound at names matching GLOB (repeatable).
    #[arg(long, value_name = "NAME[=GLOB]", requires = "capture")]
    capture_proto: Vec<String>,
    /// Where the private mount's daemon logs (default: nowhere).
    #[arg(long)]
    log_file: Option<PathBuf>,
    /// Internal (preload/src/exec.rs): exec `--exec-file` in this process,
    /// with CMD as its argv, under the supervisor of the `udsfs run`
    /// listening at SOCK (`supervisor::exec_in_place`).
    #[arg(long, hide = true, value_name = "SOCK", requires = "exec_file")]
    in_place: Option<PathBuf>,
    #[arg(long, hide = true, requires = "in_place")]
    exec_file: Option<PathBuf>,
    /// The preload library to take out of LD_PRELOAD (with `--in-place`).
    #[arg(long, hide = true, requires = "in_place")]
    preloaded: Option<OsString>,
    /// SIGPIPE was ignored by the caller of the exec (with `--in-place`).
    #[arg(long, hide = true, requires = "in_place")]
    sigpipe_ignored: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<OsString>,
}

/// Set for CMD under the library: where a static or Go binary it execs
/// asks to be supervised (`supervisor::Requests`), and the udsfs binary
/// that does it (preload/src/exec.rs reads both).
const SUPERVISOR_ENV: &str = "UDSFS_SUPERVISOR";
const EXE_ENV: &str = "UDSFS_EXE";

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    Preload,
    Seccomp,
}

/// CMD resolved as execvp would: a name with a slash as it is, else the
/// first executable regular file of that name in $PATH (execvp's default
/// path when it is unset).
fn resolve(cmd: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if cmd.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path).map(|d| d.join(cmd)).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether the program the kernel would run for `file` needs the
/// supervisor (`udsfs_proto::exe`: static or Go). `#!` scripts are followed
/// to their interpreter (and `env NAME` to NAME), a few levels as the kernel
/// does. None: unreadable or not an ELF.
fn needs_supervisor(file: &Path, depth: u32) -> Option<bool> {
    use std::io::{Read, Seek};
    use udsfs_proto::exe::{self, Head};
    let mut f = std::fs::File::open(file).ok()?;
    let mut head = Vec::new();
    (&mut f)
        .take(exe::HEAD_LEN as u64)
        .read_to_end(&mut head)
        .ok()?;
    match exe::parse(&head)? {
        Head::Script { .. } if depth >= 4 => None,
        Head::Script { interp, env_prog } => {
            if let Some(p) = env_prog.and_then(|p| resolve(std::ffi::OsStr::from_bytes(p))) {
                return needs_supervisor(&p, depth + 1);
            }
            needs_supervisor(Path::new(std::ffi::OsStr::from_bytes(interp)), depth + 1)
        }
        Head::Elf { interp, note } => {
            let mut seg = Vec::new();
            if let Some((off, len)) = note {
                f.seek(std::io::SeekFrom::Start(off)).ok()?;
                f.take(len.min(exe::HEAD_LEN as u64))
                    .read_to_end(&mut seg)
                    .ok()?;
            }
            Some(exe::needs_supervisor(interp, note.map(|_| seg.as_slice())))
        }
    }
}

/// Would CMD (`file`, as execvp finds it) run set-user-ID, set-group-ID or
/// with file capabilities (`udsfs_proto::exe::raises_privilege`)? A `#!`
/// script's own bits mean nothing to Linux; a mount with nosuid neither.
fn privileged(file: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(file) else {
        return false;
    };
    let mut head = [0u8; 2];
    let script = std::fs::File::open(file)
        .is_ok_and(|mut f| f.read_exact(&mut head).is_ok() && &head == b"#!");
    let Ok(c) = std::ffi::CString::new(file.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; statvfs fills the zeroed struct;
    // getxattr with size 0 only asks for the length.
    let (nosuid, caps) = unsafe {
        let mut vfs: libc::statvfs = std::mem::zeroed();
        let nosuid = libc::statvfs(c.as_ptr(), &mut vfs) == 0 && vfs.f_flag & libc::ST_NOSUID != 0;
        let caps = libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        ) >= 0;
        (nosuid, caps)
    };
    let (euid, egid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    !script
        && !nosuid
        && udsfs_proto::exe::raises_privilege(meta.mode(), meta.uid(), meta.gid(), euid, egid, caps)
}

/// The front for CMD when `--front` is not given: the supervisor for an
/// executable without a program interpreter (static) or built by Go, else
/// the library (also for what cannot be read: the kernel or the shell will
/// say why).
fn front_for(cmd: &std::ffi::OsStr) -> Front {
    match resolve(cmd).and_then(|p| needs_supervisor(&p, 0)) {
        Some(true) => Front::Seccomp,
        _ => Front::Preload,
    }
}

/// The preload library: $UDSFS_PRELOAD, else next to this binary (in a
/// cargo target directory also its `deps/` copy, which `cargo test` keeps
/// fresh: the newer of the two).
fn library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("UDSFS_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the udsfs binary: {e}"))?;
    let next_to = exe.with_file_name(LIBRARY);
    let in_deps = exe.with_file_name("deps").join(LIBRARY);
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    [next_to.clone(), in_deps]
        .into_iter()
        .filter_map(|p| Some((modified(&p)?, p)))
        .max()
        .map(|(_, p)| p)
        .ok_or_else(|| {
            format!(
                "{} not found (build the workspace: cargo build)",
                next_to.display()
            )
        })
}

/// A private mount: a fresh directory with a background daemon on it.
struct Private {
    dir: PathBuf,
}

impl Private {
    fn start(log_file: Option<&Path>) -> Result<Private, String> {
        let base = std::env::temp_dir();
        let dir = (0..100)
            .map(|i| base.join(format!("udsfs-run-{}-{i}", std::process::id())))
            .find(|d| std::fs::create_dir(d).is_ok())
            .ok_or("cannot make a directory for the private mount")?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        // A `udsfs run` inside another one: the daemon must not run on the
        // outer mount's sockets (fusermount3 passes the FUSE fd over a pair).
        cmd.env_remove("LD_PRELOAD")
            .env_remove("UDSFS_MOUNT")
            .env_remove("UDSFS_ROUTES");
        cmd.arg("mount").arg("--background");
        // Root's commands often switch users (a database server, su):
        // they must reach the mount too.
        if nix::unistd::geteuid().is_root() {
            cmd.arg("--allow-other");
        }
        if let Some(f) = log_file {
            cmd.arg("--log-file").arg(f);
        }
        let out = cmd
            .arg(&dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start the daemon: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err("the private mount did not come up".into());
        }
        Ok(Private { dir })
    }

    fn stop(self) {
        let st = Command::new(std::env::current_exe().unwrap_or_else(|_| "udsfs".into()))
            .arg("umount")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
        if !st.is_ok_and(|s| s.success()) {
            eprintln!("udsfs run: unmounting {} failed", self.dir.display());
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Waits for every remaining descendant (orphans reparent to us, the
/// subreaper), so that the mount outlives all of them.
fn reap_all() {
    loop {
        // SAFETY: waitpid on any child; we only collect statuses.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
}

/// Tells the daemon that `route` is a route root (the xattr
/// `udsfs_proto::mount::ROUTE_XATTR` on the mount's dgram clone file, which
/// anyone may write): the mount's directories at, above and below it are
/// then copies of the kernel's for this user's requests (root's and the
/// mount owner's declarations: for everyone's), which the daemon gives the
/// kernel's owners and modes (src/engine/tree/routes.rs, mirror.rs). A route of `/` routes nothing
/// (`udsfs_proto::route`): nothing to declare.
fn declare_route(mount: &Path, route: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    let value = route.as_os_str().as_bytes();
    if value.iter().all(|&b| b == b'/') {
        return Ok(());
    }
    let file = mount
        .join(".udsfs")
        .join(udsfs_proto::mount::type_dir(libc::SOCK_DGRAM).unwrap_or("dgram"))
        .join("clone");
    let file = CString::new(file.as_os_str().as_bytes())?;
    let name = CString::new(udsfs_proto::mount::ROUTE_XATTR)?;
    // SAFETY: NUL-terminated path and name; the value is the route's bytes.
    let r = unsafe {
        libc::setxattr(
            file.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Routed names live at the same path below the mount point: makes the
/// route's directories there with the modes and owners of the kernel's
/// (a server that runs as another user binds in them), as far as the
/// runner may; the daemon gives them the kernel's owners and modes anyway.
fn mirror_dirs(mount: &Path, route: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let mut kernel = PathBuf::from("/");
    for part in route.strip_prefix("/").unwrap_or(route).components() {
        kernel.push(part);
        let inside = mount.join(kernel.strip_prefix("/").unwrap_or(&kernel));
        let meta = std::fs::metadata(&kernel).ok();
        let mode = meta.as_ref().map_or(0o755, |m| m.mode() & 0o7777);
        match std::fs::DirBuilder::new().mode(mode).create(&inside) {
            Ok(()) => {
                // The umask may have taken bits off; ownership as far as allowed
                // (a copy of a kernel directory is made with its owner and
                // mode by the daemon, src/engine/bind.rs `Engine::mkdir`).
                let _ = std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(mode));
                if let Some(m) = meta {
                    let _ = std::os::unix::fs::chown(&inside, Some(m.uid()), Some(m.gid()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            // A copy that carries the kernel directory's owner, which the
            // runner may not write (the copy of root's /home): the daemon
            // makes the ones below at the first bind there
            // (src/engine/kernel_dirs.rs).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn main(a: RunArgs) -> i32 {
    if let (Some(sock), Some(file)) = (&a.in_place, &a.exec_file) {
        return crate::supervisor::exec_in_place(
            sock,
            file,
            &a.cmd,
            a.preloaded.as_deref(),
            a.sigpipe_ignored,
        );
    }
    front::split();
    let code = run(a);
    front::report(code);
    code
}

/// `udsfs run` proper (below the front): CMD's exit status.
fn run(mut a: RunArgs) -> i32 {
    let front = *a.front.get_or_insert_with(|| front_for(&a.cmd[0]));
    let lib = match library() {
        Ok(l) => l,
        // The supervisor needs no library.
        Err(_) if front == Front::Seccomp => PathBuf::new(),
        Err(e) => {
            eprintln!("udsfs run: {e}");
            return 127;
        }
    };
    let private = match &a.mount {
        Some(_) => None,
        None => match Private::start(a.log_file.as_deref()) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("udsfs run: {e}");
                return 127;
            }
        },
    };
    let mount = a
        .mount
        .clone()
        .unwrap_or_else(|| private.as_ref().map(|p| p.dir.clone()).unwrap_or_default());
    let code = run_in(&mount, &lib, &a);
    if let Some(p) = private {
        p.stop();
    }
    code
}

fn run_in(mount: &Path, lib: &Path, a: &RunArgs) -> i32 {
    // Another user's run puts CMD under no_new_privs (the filter needs it):
    // a privileged CMD would run without its privilege, silently.
    if !nix::unistd::geteuid().is_root()
        && let Some(file) = resolve(&a.cmd[0]).filter(|f| privileged(f))
    {
        eprintln!(
            "udsfs run: refused to run {}: it is set-user-ID, set-group-ID or has file \
             capabilities, and a udsfs run that is not root's runs it with no_new_privs (its \
             seccomp filter needs it), without its privilege; run it in a root udsfs run",
            file.display()
        );
        return 126;
    }
    let mount = match std::fs::canonicalize(mount) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("udsfs run: {}: {e}", mount.display());
            return 127;
        }
    };
    let mut routes = Vec::new();
    for r in &a.route {
        if !r.is_absolute() {
            eprintln!(
                "udsfs run: --route {}: must be an absolute path",
                r.display()
            );
            return 2;
        }
        if let Err(e) = declare_route(&mount, r).and_then(|()| mirror_dirs(&mount, r)) {
            eprintln!("udsfs run: --route {}: {e}", r.display());
            return 127;
        }
        routes.push(r.as_os_str().as_bytes().to_vec());
    }
    let mut preload = lib.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let routes = OsString::from(std::ffi::OsStr::from_bytes(&routes.join(&b':')));
    // SAFETY: prctl on this process only; orphans of CMD come to us.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // udsfs run must outlive CMD to unmount: it takes the signals it passes on
    // on a thread (forward.rs) and CMD gets them unblocked.
    let signals = forward::set();
    let _ = signals.thread_block();
    let mut cmd = Command::new(&a.cmd[0]);
    cmd.args(&a.cmd[1..])
        .env("UDSFS_MOUNT", &mount)
        .env("UDSFS_ROUTES", routes);
    // Under the library, an exec of a static or Go binary comes under the
    // supervisor: both fronts in one tree.
    let mut requests = None;
    if a.front != Some(Front::Seccomp) {
        cmd.env("LD_PRELOAD", preload);
        let routes: Vec<Vec<u8>> = a
            .route
            .iter()
            .map(|r| r.as_os_str().as_bytes().to_vec())
            .collect();
        match (
            crate::supervisor::Requests::start(&mount, &routes),
            std::env::current_exe(),
        ) {
            (Ok(r), Ok(exe)) => {
                cmd.env(SUPERVISOR_ENV, r.socket()).env(EXE_ENV, exe);
                requests = Some(r);
            }
            (Err(e), _) => {
                eprintln!("udsfs run: static programs CMD runs stay on kernel sockets: {e}")
            }
            (_, Err(e)) => {
                eprintln!("udsfs run: static programs CMD runs stay on kernel sockets: {e}")
            }
        }
    } else {
        cmd.env_remove(SUPERVISOR_ENV).env_remove(EXE_ENV);
    }
    // SAFETY: sigprocmask is async-signal-safe and touches only the child.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            signals.thread_unblock().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    // Under --front seccomp the supervisor carries every call; under the library
    // (the default) it takes what the library does not carry (a raw system call, a
    // child exec'd without the library, a setgid program the loader runs without it).
    let under_library = a.front.unwrap_or(Front::Preload) == Front::Preload;
    let routes: Vec<Vec<u8>> = a
        .route
        .iter()
        .map(|r| r.as_os_str().as_bytes().to_vec())
        .collect();
    let supervisor = match crate::supervisor::prepare(&mut cmd, &mount, &routes, under_library) {
        Ok(s) => Some(s),
        Err(e) => {
            let which = if under_library {
                "the supervisor under the library"
            } else {
                "--front seccomp"
            };
            eprintln!("udsfs run: {which}: {e}");
            return 127;
        }
    };
    let capture = match &a.capture {
        None => None,
        Some(file) => {
            let args = crate::cli::capture::CaptureArgs::for_run(
                a.capture_format.clone(),
                a.capture_proto.clone(),
            );
            let live = crate::cli::capture::output(Some(file))
                .and_then(|out| crate::cli::capture::start(&mount, &args, out));
            match live {
                Ok(l) => Some(l),
                Err(e) => {
                    eprintln!("udsfs run: --capture: {e}");
                    return 127;
                }
            }
        }
    };
    let child = cmd.spawn();
    match supervisor.map(|s| s.start()) {
        // A run inside a run on the same mount: the enclosing one carries it.
        Some(Err(e))
            if e == crate::supervisor::ALREADY
                && std::env::var_os("UDSFS_MOUNT").is_some_and(|m| Path::new(&m) == mount) => {}
        // A command that never started has said why already.
        Some(Err(e)) if child.is_ok() => eprintln!("udsfs run: the supervisor: {e}"),
        _ => {}
    }
    if let Ok(c) = &child {
        forward::to_child(c.id() as i32, front::pid());
    }
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("udsfs run: {}: {e}", a.cmd[0].to_string_lossy());
            return 127;
        }
    };
    let status = child.wait();
    let code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    };
    if front::descendants_remain() {
        front::go_to_background(code);
    }
    reap_all();
    drop(requests);
    if let Some(Err(e)) = capture.map(|c| c.stop()) {
        eprintln!("udsfs run: --capture: {e}");
    }
    if let Err(e) = status {
        eprintln!("udsfs run: {e}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_of_real_and_bad_files() {
        use udsfs_proto::exe::{Head, parse};
        // The test binary is linked dynamically (cargo's default on glibc).
        assert_eq!(
            needs_supervisor(Path::new("/proc/self/exe"), 0),
            Some(false)
        );
        let exe = std::fs::read("/proc/self/exe").unwrap();
        // Cut anywhere in the headers or garbled: an answer or None, never a panic.
        for n in [0, 3, 4, 5, 6, 0x30, 0x3a, 0x40, 0x100] {
            let _ = parse(&exe[..n.min(exe.len())]);
        }
        let mut bad = exe[..0x40].to_vec();
        bad[0x20..0x28].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(parse(&bad), None);
        assert_eq!(parse(b"not an elf"), None);
        // Its program headers with PT_INTERP turned into PT_NULL: static.
        let mut stat = exe.clone();
        let phoff = u64::from_le_bytes(stat[0x20..0x28].try_into().unwrap()) as usize;
        let (sz, n) = (stat[0x36] as usize, stat[0x38] as usize);
        for i in 0..n {
            let at = phoff + i * sz;
            if stat[at..at + 4] == 3u32.to_le_bytes() {
                stat[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
        }
        assert!(matches!(
            parse(&stat),
            Some(Head::Elf { interp: false, .. })
        ));
    }
}

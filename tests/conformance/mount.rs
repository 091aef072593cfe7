//! A private udsfs mount per test: `udsfs mount --background` on a fresh temporary
//! directory; dropping the guard runs `udsfs umount`, waits for the daemon to exit,
//! kills it if it does not, and detaches the mount if it is still there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Mount {
    mnt: PathBuf,
    log: PathBuf,
    pid: i32,
    /// Removed (after the unmount in `drop`) when the guard goes.
    _base: tempfile::TempDir,
}

/// The udsfs binary: cargo names it to a test; examples/show_traces.rs, built into
/// target/<profile>/examples, finds it one directory up.
pub fn udsfs_binary() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_udsfs") {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe().expect("current_exe");
            exe.parent()
                .and_then(Path::parent)
                .expect("target/<profile>/examples/")
                .join("udsfs")
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    // A zombie (already exited, not yet reaped by whoever is its parent) is dead for us.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

impl Mount {
    pub fn new() -> Mount {
        Self::new_with_args(&[])
    }

    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// The daemon's process id.
    pub fn daemon_pid(&self) -> i32 {
        self.pid
    }

    /// The last `n` lines of the daemon log, leaving out fuser's per-request lines.
    pub fn log_tail(&self, n: usize) -> String {
        match std::fs::read_to_string(&self.log) {
            Ok(s) => {
                let lines: Vec<&str> = s
                    .lines()
                    .filter(|l| !l.contains("fuser::request"))
                    .collect();
                lines[lines.len().saturating_sub(n)..].join("\n")
            }
            Err(e) => format!("(no daemon log at {}: {e})", self.log.display()),
        }
    }

    /// Copy the daemon log somewhere that survives the test, and return that path.
    pub fn keep_log(&self, scenario: &str) -> Option<PathBuf> {
        let dst = std::env::temp_dir().join(format!("udsfs-conformance-{scenario}.log"));
        std::fs::copy(&self.log, &dst).ok().map(|_| dst)
    }
}

impl Default for Mount {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = {
            let _spawning = super::backend::spawn_guard();
            Command::new(udsfs_binary())
                .arg("umount")
                .arg(&self.mnt)
                .output()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive(self.pid) {
            eprintln!(
                "udsfs daemon {} still alive 5 s after `udsfs umount`; killing it",
                self.pid
            );
            // SAFETY: plain syscall on the daemon this guard started.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        // If anything is still mounted there, detach it so the directory can go.
        if let Ok(c) = std::ffi::CString::new(self.mnt.as_os_str().as_encoded_bytes()) {
            // SAFETY: valid C string; failure (not mounted) is fine.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

// ---- names / permissions ----

impl Mount {
    /// Like `new`, with extra `udsfs mount` arguments (such as `--allow-other`). The
    /// temporary directory above the mount point is made searchable by everyone, so
    /// that other users can reach an `--allow-other` mount.
    pub fn new_with_args(args: &[&str]) -> Mount {
        Self::new_logging(args, "debug")
    }

    /// `new_with_args`, the daemon logging at `level` unless RUST_LOG says.
    pub fn new_logging(args: &[&str], level: &str) -> Mount {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::Builder::new()
            .prefix("uconf-u")
            .tempdir()
            .expect("create udsfs scenario directory");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod 755 the udsfs scenario directory");
        let mnt = base.path().join("mnt");
        std::fs::create_dir(&mnt).expect("create mount point");
        let log = base.path().join("daemon.log");
        let mut cmd = Command::new(udsfs_binary());
        cmd.arg("mount")
            .arg("--background")
            .args(args)
            .arg("--log-file")
            .arg(&log)
            .arg(&mnt);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", level);
        }
        let out = {
            let _spawning = super::backend::spawn_guard();
            cmd.output().expect("run `udsfs mount --background`")
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            panic!(
                "`udsfs mount --background {args:?} {}` failed ({}):\nstdout: {}\nstderr: {}",
                mnt.display(),
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let pid: i32 = stdout.trim().parse().unwrap_or_else(|_| {
            panic!("`udsfs mount --background` printed {stdout:?}, expected the daemon PID")
        });
        Mount {
            mnt,
            log,
            pid,
            _base: base,
        }
    }
}

//! Whole programs as differential scenarios, for features that have no file
//! form: a small program in `tests/conformance/programs/` runs once on kernel
//! sockets and once through `udsfs run` on a private mount; its outputs must
//! be equal, and the daemon must hold no more descriptors afterwards than
//! before (nothing it held in flight leaks).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::mount::{Mount, udsfs_binary};

fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/programs")
        .join(name)
}

/// The preload library next to the udsfs binary, which must be newer than
/// its sources: a stale one would test old code.
fn preload_library() -> PathBuf {
    let lib = udsfs_binary().with_file_name("libudsfs_preload.so");
    let built = std::fs::metadata(&lib)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}: build it with `cargo build`", lib.display()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("preload/src");
    for f in std::fs::read_dir(&src).expect("preload/src").flatten() {
        let changed = f.metadata().and_then(|m| m.modified()).expect("mtime");
        assert!(
            changed <= built,
            "{} is older than {}: rebuild it with `cargo build`",
            lib.display(),
            f.path().display()
        );
    }
    lib
}

fn text(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn daemon_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Runs `cmd` (a program and its arguments) on the kernel and through
/// `udsfs run`, and compares.
pub fn differential_program(cmd: &[&str]) {
    differential_program_on(Mount::new(), cmd)
}

/// `differential_program` on a given mount (one with `--allow-other` for a
/// program that drops root).
pub fn differential_program_on(m: Mount, cmd: &[&str]) {
    super::require_root();
    let lib = preload_library();
    // Under the spawn guard, as every spawn of this binary: a fork while another
    // test closes a kernel socket would keep that socket open in the child.
    let kernel = {
        let _spawning = super::backend::spawn_guard();
        Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .expect("run the program on kernel sockets")
    };
    assert!(kernel.status.success(), "on the kernel:\n{}", text(&kernel));
    let before = daemon_fds(m.daemon_pid());
    let udsfs = {
        let _spawning = super::backend::spawn_guard();
        Command::new(udsfs_binary())
            .env("UDSFS_PRELOAD", &lib)
            .arg("run")
            .arg("--mount")
            .arg(m.path())
            .arg("--")
            .args(cmd)
            .output()
            .expect("run the program through udsfs run")
    };
    // The daemon notices closed connections and closes clients' files on
    // threads of its own (src/engine/fds.rs): give it a moment.
    let mut after = daemon_fds(m.daemon_pid());
    for _ in 0..100 {
        if after <= before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = daemon_fds(m.daemon_pid());
    }
    assert_eq!(
        String::from_utf8_lossy(&kernel.stdout),
        String::from_utf8_lossy(&udsfs.stdout),
        "{cmd:?}: udsfs differs from the kernel\n--- through udsfs run:\n{}\n--- daemon log:\n{}",
        text(&udsfs),
        m.log_tail(40)
    );
    assert!(
        udsfs.status.success(),
        "through udsfs run:\n{}",
        text(&udsfs)
    );
    assert_eq!(
        before,
        after,
        "the daemon holds {} descriptors after the program, {before} before\n{}",
        after,
        m.log_tail(40)
    );
}

pub fn pass_any_fd() {
    let p = program("pass_fds.py");
    differential_program(&["python3", p.to_str().expect("utf-8 path")]);
}

pub fn inflight_limit() {
    let p = program("inflight_limit.py");
    differential_program_on(
        Mount::new_with_args(&["--allow-other"]),
        &["python3", p.to_str().expect("utf-8 path")],
    );
}

pub fn pidfds() {
    let p = program("pidfds.py");
    differential_program(&["python3", p.to_str().expect("utf-8 path")]);
}

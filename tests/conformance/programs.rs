//! Whole programs as differential scenarios, for features that have no file
//! form: a small program in `tests/conformance/programs/` runs once on kernel
//! sockets and once through `udsfs run` on a private mount; its outputs must
//! be equal, and the daemon must hold no more descriptors afterwards than
//! before (nothing it held in flight leaks). Each scenario has a C twin
//! (`NAME.c`), built `gcc -static` here, which `udsfs run` runs under the
//! seccomp supervisor (src/supervisor/): the same comparison, with the
//! differences it may show named line by line in `static_exceptions.txt`.

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
pub fn preload_library() -> PathBuf {
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
    let runs = run_twice(&m, cmd);
    assert_eq!(
        String::from_utf8_lossy(&runs.kernel.stdout),
        String::from_utf8_lossy(&runs.udsfs.stdout),
        "{cmd:?}: udsfs differs from the kernel\n--- through udsfs run:\n{}\n--- daemon log:\n{}",
        text(&runs.udsfs),
        m.log_tail(40)
    );
    runs.check_status_and_fds(&m);
}

/// One program's two runs, and the daemon's descriptors around the second.
struct Runs {
    kernel: Output,
    udsfs: Output,
    before: usize,
    after: usize,
}

/// Runs `cmd` on kernel sockets (which must succeed) and through `udsfs run`
/// on mount `m`, with the front `udsfs run` chooses for it.
fn run_twice(m: &Mount, cmd: &[&str]) -> Runs {
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
    Runs {
        kernel,
        udsfs,
        before,
        after,
    }
}

impl Runs {
    fn check_status_and_fds(&self, m: &Mount) {
        assert!(
            self.udsfs.status.success(),
            "through udsfs run:\n{}",
            text(&self.udsfs)
        );
        assert_eq!(
            self.before,
            self.after,
            "the daemon holds {} descriptors after the program, {} before\n{}",
            self.after,
            self.before,
            m.log_tail(40)
        );
    }
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

/// The C twin `NAME.c` of scenario NAME.py, built `gcc -static` into `dir`:
/// no program interpreter, so no preload library can reach it.
fn build_static(name: &str, dir: &Path) -> PathBuf {
    let src = program(&format!("{name}.c"));
    let out = dir.join(name);
    // Only the start holds the guard (the fork's copy of every descriptor lasts
    // until gcc's exec), not the build.
    let gcc = {
        let _spawning = super::backend::spawn_guard();
        Command::new("gcc")
            .args(["-static", "-O1", "-Wall", "-Werror", "-pthread", "-o"])
            .arg(&out)
            .arg(&src)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
    };
    let built = gcc.and_then(|c| c.wait_with_output()).unwrap_or_else(|e| {
        panic!("gcc: {e}: install gcc and libc6-dev (static libc; .ci/run lists them)")
    });
    assert!(
        built.status.success(),
        "gcc -static {}:\n{}",
        src.display(),
        text(&built)
    );
    out
}

/// One line of `static_exceptions.txt`: where the C twin of a scenario,
/// through `udsfs run`, prints `udsfs` where the kernel prints `kernel`.
struct Exception {
    program: String,
    kernel: String,
    udsfs: String,
}

fn exceptions() -> Vec<Exception> {
    let path = program("static_exceptions.txt");
    let text = std::fs::read_to_string(&path).expect("static_exceptions.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let parts: Vec<&str> = l.splitn(4, " | ").map(str::trim).collect();
            assert!(
                parts.len() == 4 && !parts[3].is_empty(),
                "{}: not PROGRAM | KERNEL LINE | UDSFS LINE | WHY: {l}",
                path.display()
            );
            Exception {
                program: parts[0].into(),
                kernel: parts[1].into(),
                udsfs: parts[2].into(),
            }
        })
        .collect()
}

/// The C twin of scenario `name` (static, so `udsfs run` gives it the
/// seccomp supervisor, src/supervisor/) on the kernel and through `udsfs
/// run`: its `where:` line says its sockets were kernel sockets, then udsfs
/// sockets (the mount's data files: the supervisor did reach it); every
/// other line is equal or a difference `static_exceptions.txt` names, and
/// every exception there for it still happens.
fn static_twin(m: Mount, name: &str) {
    let dir = tempfile::tempdir().expect("a directory for the static build");
    let exe = build_static(name, dir.path());
    let runs = run_twice(&m, &[exe.to_str().expect("utf-8 path")]);
    let (k, u) = (
        String::from_utf8_lossy(&runs.kernel.stdout).into_owned(),
        String::from_utf8_lossy(&runs.udsfs.stdout).into_owned(),
    );
    let report = || {
        format!(
            "--- on the kernel:\n{}\n--- through udsfs run:\n{}\n--- daemon log:\n{}",
            text(&runs.kernel),
            text(&runs.udsfs),
            m.log_tail(40)
        )
    };
    let wheres = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("where: "))
            .map(String::from)
            .collect()
    };
    assert_eq!(wheres(&k), ["where: kernel"], "{name}: {}", report());
    assert_eq!(
        wheres(&u),
        ["where: udsfs"],
        "{name}: not a udsfs socket through udsfs run (the supervisor did not reach it)\n{}",
        report()
    );
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.starts_with("where: "))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let (kl, ul) = (lines(&k), lines(&u));
    assert_eq!(
        kl.len(),
        ul.len(),
        "{name}: line counts differ\n{}",
        report()
    );
    let known: Vec<Exception> = exceptions()
        .into_iter()
        .filter(|e| e.program == name)
        .collect();
    let mut used = vec![false; known.len()];
    let mut unexplained = Vec::new();
    for (a, b) in kl.iter().zip(&ul) {
        if a == b {
            continue;
        }
        match known.iter().position(|e| &e.kernel == a && &e.udsfs == b) {
            Some(i) => used[i] = true,
            None => unexplained.push(format!("{name} | {a} | {b}")),
        }
    }
    assert!(
        unexplained.is_empty(),
        "{name}: differences from the kernel that static_exceptions.txt does not name:\n{}\n{}",
        unexplained.join("\n"),
        report()
    );
    let stale: Vec<String> = known
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| format!("{} | {} | {}", e.program, e.kernel, e.udsfs))
        .collect();
    assert!(
        stale.is_empty(),
        "{name}: static_exceptions.txt names differences that no longer happen (remove them):\n{}",
        stale.join("\n")
    );
    runs.check_status_and_fds(&m);
}

pub fn static_pass_any_fd() {
    static_twin(Mount::new(), "pass_fds");
}

pub fn static_inflight_limit() {
    static_twin(Mount::new_with_args(&["--allow-other"]), "inflight_limit");
}

pub fn static_pidfds() {
    static_twin(Mount::new(), "pidfds");
}

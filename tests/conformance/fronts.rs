//! The scenario table through the two fronts that carry real programs: the kernel
//! backend is a program making real socket calls, so it runs, as a child process,
//! under `udsfs run --front preload` (the library) and `udsfs run --front seccomp`
//! (the supervisor), with its scenario roots in the private mount; each scenario's
//! trace is compared with the kernel's (run here, as `differential` does).
//!
//! The child is this test binary itself, running only the test `fronts_child`, which
//! does nothing unless `CHILD_OUT` names the file for the traces: every scenario in one
//! child, one after another, each in a network namespace of its own as on the kernel
//! (abstract names are the mount's, filed per network namespace). A scenario whose
//! trace differs fails the test unless its front's exceptions file lists it with a
//! reason; a listed scenario that no longer differs fails it too, so the lists only
//! shrink. Every difference is reported, not just the first.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::backend::{escape, unescape};
use super::{ALL, Entries, FRONT_ONLY, Scenario, kernel, side_by_side};

/// Where the child writes its traces (set by `check`).
const CHILD_OUT: &str = "UCONF_FRONT_OUT";

/// How long the child may take for every scenario.
const CHILD_LIMIT: Duration = Duration::from_secs(900);

#[derive(Clone, Copy)]
pub enum Front {
    Library,
    Supervisor,
}

impl Front {
    fn name(self) -> &'static str {
        match self {
            Front::Library => "library",
            Front::Supervisor => "supervisor",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Front::Library => "preload",
            Front::Supervisor => "seccomp",
        }
    }
}

/// Where the child's scenario roots are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The private mount's root, as the files' scenarios (udsfs.rs).
    Mount,
    /// A directory of the kernel's given to `udsfs run --route`: the fronts route
    /// its names into the mount.
    Route,
    /// The mount's root, as `Mount`, on a `--no-lanes` mount made here and given
    /// to `udsfs run --mount` (the private mount has lanes, the default): every
    /// byte through the daemon (issue 30: "the differential scenarios pass with
    /// lanes off too").
    NoLanes,
}

fn label(front: Front, place: Place) -> String {
    match place {
        Place::Mount => front.name().to_string(),
        Place::Route => format!("{}_routed", front.name()),
        Place::NoLanes => format!("{}_nolanes", front.name()),
    }
}

fn exceptions_file(front: Front, place: Place) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/conformance/front_exceptions_{}.txt",
        label(front, place)
    ))
}

/// The one scenario the child runs (unset or "all": every one).
const CHILD_WANT: &str = "UCONF_FRONT_WANT";

/// The routed root the child is told of (unset: the mount's root).
const CHILD_ROOT: &str = "UCONF_FRONT_ROOT";

/// The child's side (test `fronts_child`): under `udsfs run`, every scenario on the
/// kernel backend with its root in the mount, each trace written as
/// `=== NAME`, one `OP RESULT` line per entry (both escaped), `--- end`.
pub fn child() {
    let Ok(out) = std::env::var(CHILD_OUT) else {
        return;
    };
    let mount = std::env::var("UDSFS_MOUNT").expect("UDSFS_MOUNT (set by udsfs run)");
    let root = PathBuf::from(std::env::var(CHILD_ROOT).unwrap_or_else(|_| mount.clone()));
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&root)
            .expect("stat the root")
            .permissions()
            .mode()
            & 0o7777
    };
    kernel::ROOT
        .set((root, mode))
        .expect("the root is set once");
    kernel::MOUNT
        .set(PathBuf::from(mount))
        .expect("the mount is set once");
    let mut f = std::fs::File::create(&out).expect("create the traces file");
    let want = std::env::var(CHILD_WANT).unwrap_or_else(|_| "all".to_string());
    for (name, scenario) in every().filter(|(n, _)| want == "all" || *n == want) {
        writeln!(f, "=== {name}").expect("write traces");
        let s = *scenario;
        let t = std::panic::catch_unwind(move || kernel::run_isolated(s))
            .unwrap_or_else(|_| vec![("(scenario)".to_string(), "HARNESS panicked".to_string())]);
        let mut text = String::new();
        for (op, res) in t {
            text.push_str(&format!(
                "{} {}\n",
                escape(op.as_bytes()),
                escape(res.as_bytes())
            ));
        }
        text.push_str("--- end\n");
        f.write_all(text.as_bytes()).expect("write traces");
    }
    let n = kernel::ON_UDSFS.load(std::sync::atomic::Ordering::SeqCst);
    writeln!(f, "{ON_UDSFS_LINE}{n}").expect("write traces");
    let n = kernel::ON_LANE.load(std::sync::atomic::Ordering::SeqCst);
    writeln!(f, "{ON_LANE_LINE}{n}").expect("write traces");
}

/// The child's next to last line: how many scenarios ended holding a udsfs socket.
const ON_UDSFS_LINE: &str = "+++ scenarios ending with udsfs sockets: ";

/// The child's last line: how many scenarios ended holding a laned udsfs socket.
const ON_LANE_LINE: &str = "+++ scenarios ending with laned udsfs sockets: ";

/// The table's scenarios, then those only the fronts run.
fn every() -> impl Iterator<Item = &'static (&'static str, Scenario)> {
    ALL.iter().chain(FRONT_ONLY)
}

/// The traces a child wrote, by scenario; one it started and did not end gets
/// the entry `(not finished)`.
fn parse(text: &str) -> BTreeMap<String, Entries> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Entries)> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("=== ") {
            cur = Some((name.to_string(), Vec::new()));
        } else if line == "--- end" {
            if let Some((n, e)) = cur.take() {
                out.insert(n, e);
            }
        } else if let Some((_, e)) = &mut cur {
            let (op, res) = line.split_once(' ').unwrap_or((line, ""));
            let s = |v: &str| String::from_utf8_lossy(&unescape(v)).into_owned();
            e.push((s(op), s(res)));
        }
    }
    if let Some((n, mut e)) = cur {
        e.push(("(not finished)".to_string(), String::new()));
        out.insert(n, e);
    }
    out
}

/// The exceptions file: `NAME reason...` lines, `~NAME reason...` for a scenario
/// that differs in some runs only (its reason then starts with `~`); `#` comments
/// and blank lines.
fn exceptions(front: Front, place: Place) -> BTreeMap<String, String> {
    let path = exceptions_file(front, place);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (n, r) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            match n.strip_prefix('~') {
                Some(n) => (n.to_string(), format!("~{}", r.trim())),
                None => (n.to_string(), r.trim().to_string()),
            }
        })
        .collect()
}

/// Runs the child's scenario `want` ("all": every one) under `udsfs run --front
/// F` with its roots at `place` (on the mount `place` asks for, else on the
/// run's private mount) and returns what it wrote, its exit and the tail of
/// the daemon's log.
fn run_child(front: Front, place: Place, want: &str) -> (String, String, String) {
    let (dir, route) = dirs(place);
    let mount = mount_for(place);
    let out = dir.path().join("traces");
    let log = dir.path().join("daemon.log");
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = {
        let mut c = Command::new(super::mount::udsfs_binary());
        c.env(CHILD_OUT, &out)
            .env(CHILD_WANT, want)
            .env("UDSFS_PRELOAD", super::programs::preload_library())
            .arg("run")
            .arg("--front")
            .arg(front.arg());
        match &mount {
            Some(m) => c.arg("--mount").arg(m.path()),
            None => c.arg("--log-file").arg(&log),
        };
        if let Some(r) = &route {
            c.env(CHILD_ROOT, r.path()).arg("--route").arg(r.path());
        }
        let _spawning = super::backend::spawn_guard();
        c.arg("--")
            .arg(exe)
            .args([
                "--exact",
                "fronts_child",
                "--test-threads=1",
                "--nocapture",
                "-q",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start udsfs run")
    };
    // Read its output on threads, so a full pipe never stops it.
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let ro = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let re = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for udsfs run") {
            break format!("{st}");
        }
        if start.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break format!("killed after {CHILD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = format!(
        "udsfs run: {status}\n--- stdout (last 20 lines) ---\n{}\n--- stderr (last 20 lines) ---\n{}",
        tail(&ro.join().unwrap_or_default(), 20),
        tail(&re.join().unwrap_or_default(), 20)
    );
    let traces = std::fs::read_to_string(&out).unwrap_or_default();
    let log = match &mount {
        Some(m) => m.log_tail(40),
        None => tail(&std::fs::read_to_string(&log).unwrap_or_default(), 40),
    };
    (traces, output, log)
}

fn tail(s: &str, n: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(n)..].join("\n")
}

/// The `--no-lanes` mount `place` asks for (the daemon logging at info, as the
/// private mount's does by default: debug would log every request).
fn mount_for(place: Place) -> Option<super::mount::Mount> {
    (place == Place::NoLanes)
        .then(|| super::mount::Mount::new_logging(&["--no-lanes", "--allow-other"], "info"))
}

/// A directory for the child's traces and log, and the routed root for `place`
/// (one as long as a kernel scenario's: kernel.rs makes "uconf-k").
fn dirs(place: Place) -> (tempfile::TempDir, Option<tempfile::TempDir>) {
    let dir = tempfile::Builder::new()
        .prefix("uconf-front")
        .tempdir()
        .expect("temp dir");
    let route = (place == Place::Route).then(|| {
        tempfile::Builder::new()
            .prefix("uconf-r")
            .tempdir()
            .expect("routed root")
    });
    (dir, route)
}

/// Prints the kernel's and `front`'s traces of scenario `want` (or of every one,
/// "all") side by side (examples/show_traces.rs).
pub fn show(front: Front, place: Place, want: &str) {
    super::require_root();
    let (traces, output, _) = run_child(front, place, want);
    let got = parse(&traces);
    let label = label(front, place);
    for (name, f) in every().filter(|(n, _)| want == "all" || *n == want) {
        let k = kernel::run_isolated(*f);
        match got.get(*name) {
            Some(t) => println!("=== {name}\n{}", side_by_side("kernel", &k, &label, t)),
            None => println!("=== {name}: the child did not run it\n{output}"),
        }
    }
}

/// One `fronts_*` test at a time: each child keeps a core busy besides its test
/// thread, and the other tests of this binary (the collector's scenarios above all)
/// compare what happens within their waits.
static ONE_CHILD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every scenario through `front`, its roots at `place`, compared with the kernel.
pub fn check(front: Front, place: Place) {
    super::require_root();
    let _one = ONE_CHILD.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    // The kernel's traces meanwhile, on this process's threads.
    let kernel_side = std::thread::spawn(|| {
        every()
            .map(|(n, f)| (n.to_string(), kernel::run_isolated(*f)))
            .collect::<BTreeMap<_, _>>()
    });
    let (traces, output, log) = run_child(front, place, "all");
    let front_took = started.elapsed();
    let k = kernel_side.join().expect("kernel traces");
    let got = parse(&traces);
    let listed = exceptions(front, place);
    let label = label(front, place);
    let name = label.as_str();
    let mut failures = Vec::new();
    let mut differ = 0;
    let mut sometimes = Vec::new();
    for (scenario, _) in every() {
        let kt = &k[*scenario];
        let Some(ft) = got.get(*scenario) else {
            failures.push(format!("scenario {scenario}: the child never ran it"));
            continue;
        };
        let same = kt == ft;
        differ += usize::from(!same);
        match (same, listed.get(*scenario)) {
            // `~NAME`: differs in some runs only; either way passes, and says so.
            (false, Some(reason)) if reason.starts_with('~') => {
                sometimes.push(scenario.to_string())
            }
            (true, Some(reason)) if reason.starts_with('~') => {}
            (true, Some(reason)) => failures.push(format!(
                "scenario {scenario}: listed in {} ({reason}) but gives the kernel's trace \
                 now: take it off the list",
                exceptions_file(front, place).display()
            )),
            (false, None) => failures.push(format!(
                "scenario {scenario}: the {name} differs from the kernel\n{}",
                side_by_side("kernel", kt, name, ft)
            )),
            _ => {}
        }
    }
    // The front must have carried the calls: most scenarios end holding a socket.
    let on_udsfs: usize = traces
        .lines()
        .find_map(|l| l.strip_prefix(ON_UDSFS_LINE))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let total = ALL.len() + FRONT_ONLY.len();
    if on_udsfs < total / 2 {
        failures.push(format!(
            "only {on_udsfs} of {total} scenarios ended holding a udsfs socket: the {name} did not \
             carry the child's calls"
        ));
    }
    // Lanes are the mount's default (issue 30): through the library some scenarios must
    // end on a lane (each scenario's network namespace reaches the fd channel by its
    // path), so a table that passes only because lanes never came up fails; on the
    // `--no-lanes` mount none may.
    let on_lane: usize = traces
        .lines()
        .find_map(|l| l.strip_prefix(ON_LANE_LINE))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    match (front, place) {
        (Front::Library, Place::Mount | Place::Route) if on_lane == 0 => failures.push(format!(
            "no scenario ended holding a laned socket (status lane=direct or through): the \
             {name} ran the table without lanes, which are the mount's default"
        )),
        (_, Place::NoLanes) if on_lane > 0 => failures.push(format!(
            "{on_lane} scenarios ended holding a laned socket on the --no-lanes mount"
        )),
        _ => {}
    }
    for n in listed.keys() {
        if !every().any(|(s, _)| s == n) {
            failures.push(format!(
                "exceptions list a scenario that does not exist: {n}"
            ));
        }
    }
    println!(
        "{name}: {} scenarios, {} as on the kernel, {differ} differ ({} listed), {on_udsfs} \
         ended holding a udsfs socket, {on_lane} a laned one; the child took {front_took:.1?}, everything {:.1?}",
        total,
        total - differ,
        listed.len(),
        started.elapsed()
    );
    if !sometimes.is_empty() {
        println!(
            "{name}: listed as differing in some runs, and did in this one: {}",
            sometimes.join(" ")
        );
    }
    assert!(
        failures.is_empty(),
        "{} problems through the {name}:\n{}\n{output}\n--- last daemon log lines ---\n{log}",
        failures.len(),
        failures.join("\n")
    );
}

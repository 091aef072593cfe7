//! Runs the shell scripts in `integration/` (all but `lib.sh`), one `#[test]` each.
//!
//! Each script mounts udsfs on its own temporary directory, using the binary cargo built
//! for this test run (`UDSFS_BIN`). The scripts need root (they mount FUSE without
//! fusermount3). They run one at a time, even when the harness runs tests in parallel,
//! because several of them measure latencies in milliseconds. A script that runs past
//! its timeout gets SIGTERM (its cleanup trap unmounts), then SIGKILL, to its whole
//! process group.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long one script may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Scripts that run a long suite twice (kernel, then udsfs), or make 60,000
/// sockets through the library (adversarial_sigio), get longer.
fn timeout_of(name: &str) -> Duration {
    match name {
        "run_cpython_multiprocessing" => Duration::from_secs(360),
        // Three CPython suites, each on the kernel and through udsfs (lanes off): 73 s at load ~20.
        "run_cpython_nolanes" => Duration::from_secs(240),
        // 30 POSTs through nginx twice (a stalled one waits 5 s), 600 connections twice: 40 s at load ~20.
        "lanes_programs" => Duration::from_secs(240),
        // Its flooders' 60,000 sockets (made once, for both floods): over 100 s at load ~25.
        "adversarial_sigio" => Duration::from_secs(360),
        // Another user's 10,000 threads blocked through its supervisor.
        "adversarial_pool" => Duration::from_secs(360),
        // Another user's 32 ways down held 500 ms each (16 s on one worker), 4096 lanes.
        "adversarial_lanes" => Duration::from_secs(240),
        // Ten connections closed 1.5-2.5 s apart twice (hup_drained: its three drained
        // runs at once), four `udsfs run`s each side of the routed cases, a 2 s CPU look
        // twice: about 60 s alone.
        "adversarial_lanes2" => Duration::from_secs(300),
        "adversarial_lanes3" => Duration::from_secs(300),
        // Two 400-connection churns (kernel, lanes): about 12 s of its 40 alone.
        "adversarial_lanes4" => Duration::from_secs(300),
        // Nine cases twice (kernel, lanes), each with 1000 ways down in a row: 70 s alone.
        "adversarial_lanes8" => Duration::from_secs(240),
        // Every case three times (kernel, lanes, the --no-lanes remount), each with
        // 6000 pairs made by 20 processes: 108-113 s alone at load 24 on 2 cores.
        "lanes" => Duration::from_secs(240),
        // Four runs (root's pool and the www-data pool, kernel and udsfs).
        "run_php_fpm" => Duration::from_secs(240),
        // Three runs of Dovecot and its clients (kernel, library, seccomp): 41 s at load ~10.
        "run_dovecot" => Duration::from_secs(240),
        // Three runs of mosquitto and its 40 clients (kernel, library, seccomp), each
        // client its own `udsfs run`: 85 s at load ~20.
        "run_mosquitto" => Duration::from_secs(240),
        // Three Postfix instances (kernel, library, seccomp), each mail through
        // sendmail's postdrop, smtpd or LMTP, `postfix stop` waiting up to 5 s: 30 s alone.
        "run_postfix" => Duration::from_secs(180),
        // Three runs of PulseAudio and its clients (kernel, library, seccomp), each with
        // 3 s of sound played in real time: 38 s alone on 2 cores.
        "run_pulseaudio" => Duration::from_secs(180),
        // Three runs of gunicorn's three instances (kernel, library, seccomp), each
        // arbiter and re-exec'd arbiter booting Python and its workers: 48 s alone.
        "run_gunicorn" => Duration::from_secs(180),
        // Go's net and syscall tests built (a cold Go cache compiles them), then seven
        // passes: the kernel's three, four through udsfs (TestSplice waits 10 s in one).
        "run_go_tests" => Duration::from_secs(180),
        // libuv fetched (pip, uvloop's sdist) and built with gcc (cold: 1-2.5 min on 2
        // loaded cores), then 105 tests one by one in four passes (about 2.5 min warm).
        "run_libuv_tests" => Duration::from_secs(420),
        // tokio's tests built (a cold build: about 2 min at load ~10 on 2 cores), then
        // four passes; the lanes pass's listed tests hang 15 s per test file.
        "run_tokio_tests" => Duration::from_secs(420),
        _ => TIMEOUT,
    }
}
/// After SIGTERM on timeout, how long the script's cleanup may take before SIGKILL.
const GRACE: Duration = Duration::from_secs(15);

/// Scripts run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn integration_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("integration")
}

fn require_root() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "the integration tests need root (euid is {euid}): they mount FUSE without \
         fusermount3. Run `cargo test` as root, or `bash .ci/run`."
    );
}

fn kill_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), signal);
    }
}

fn run_script(name: &str, threads: Option<&str>, lanes: Option<&str>) {
    require_root();
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = integration_dir().join(format!("{name}.sh"));
    assert!(path.is_file(), "{} is missing", path.display());

    // stdout and stderr share one file, so the output keeps its order.
    let mut output = tempfile::tempfile().expect("create a temporary file for the output");
    let out = output.try_clone().expect("clone the output file");
    let err = output.try_clone().expect("clone the output file");
    let started = Instant::now();
    let mut child = Command::new("bash")
        .arg(&path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("UDSFS_BIN", env!("CARGO_BIN_EXE_udsfs"))
        .env("UDSFS_THREADS", threads.unwrap_or(""))
        .env("UDSFS_LANES", lanes.unwrap_or(""))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start bash {}: {e}", path.display()));
    let pgid = child.id();

    let limit = timeout_of(name);
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            break status;
        }
        let elapsed = started.elapsed();
        if !timed_out && elapsed > limit {
            timed_out = true;
            kill_group(pgid, libc::SIGTERM);
        } else if timed_out && elapsed > limit + GRACE {
            kill_group(pgid, libc::SIGKILL);
            break child.wait().expect("wait for the killed script");
        }
        sleep(Duration::from_millis(20));
    };
    // Nothing of the script may outlive it (a reader left in the background, say).
    kill_group(pgid, libc::SIGKILL);
    let secs = started.elapsed().as_secs_f64();
    note_time(name, threads, lanes, secs);

    output.seek(SeekFrom::Start(0)).expect("rewind the output");
    let mut bytes = Vec::new();
    output.read_to_end(&mut bytes).expect("read the output");
    let text = String::from_utf8_lossy(&bytes);

    let how = match (timed_out, status.code(), status.signal()) {
        (true, _, _) => format!("timed out after {}s", limit.as_secs()),
        (false, Some(0), _) => String::new(),
        (false, Some(code), _) => format!("exit status {code}"),
        (false, None, Some(sig)) => format!("killed by signal {sig}"),
        (false, None, None) => format!("{status}"),
    };
    if how.is_empty() {
        println!("integration/{name}.sh: PASS ({secs:.1}s)\n{text}");
    } else {
        panic!(
            "integration/{name}.sh: FAIL ({how}, {secs:.1}s)\n----- output -----\n{text}----- end -----"
        );
    }
}

/// Where each script's run time is added (`.ci/run` empties it first and prints
/// the slowest at the end: the whole run must stay under 60 minutes).
const TIMES: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/integration-times.txt");

fn note_time(name: &str, threads: Option<&str>, lanes: Option<&str>, secs: f64) {
    use std::io::Write;
    let threads = threads.map_or(String::new(), |t| format!(" threads={t}"));
    let lanes = lanes.map_or(String::new(), |l| format!(" lanes={l}"));
    let line = format!("{secs:.1} {name}{threads}{lanes}\n");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(TIMES);
    if let Ok(mut f) = file {
        let _ = f.write_all(line.as_bytes());
    }
}

macro_rules! scripts {
    ($($name:ident),* $(,)? ; once: $($once:ident),* $(,)?) => {
        /// Every script the tests below run, by file stem.
        const SCRIPTS: &[&str] = &[$(stringify!($name),)* $(stringify!($once)),*];
        $(
            #[test]
            fn $name() {
                run_script(stringify!($name), None, None);
            }
        )*
        $(
            #[test]
            fn $once() {
                run_script(stringify!($once), None, None);
            }
        )*
        /// The same scripts on a daemon with one FUSE worker thread: as no
        /// worker ever waits, everything must pass just the same.
        mod with_one_thread {
            use super::run_script;
            $(
                #[test]
                fn $name() {
                    run_script(stringify!($name), Some("1"), None);
                }
            )*
        }
    };
}

scripts!(
    abstract_netns,
    abstract_private,
    actfor_pidns,
    adversarial_access,
    adversarial_actfor,
    adversarial_actfor2,
    adversarial_efault,
    adversarial_exhaust,
    adversarial_fds,
    adversarial_netns_caps,
    adversarial_pool,
    adversarial_root_run,
    adversarial_run,
    adversarial_userns,
    api_diffs,
    behaviours,
    blocked_reader,
    bounds,
    bufs,
    capture,
    capture_users,
    close_order,
    devfuse,
    dgram_limits,
    dgram_server,
    escapes,
    fault_postgres,
    fault_timed,
    faults,
    fd_numbers,
    fstat_mode,
    given_names,
    graph,
    held_bytes,
    isolation,
    lanes_live_capture,
    lanes_services,
    lanes_syscalls,
    mount_helper,
    mount_path_escapes,
    mount_state,
    msg_creds,
    msg_partial,
    msgcalls,
    namespace,
    nonblock,
    oob_peek,
    timeo,
    parked_bound,
    parked_rights,
    pass_files,
    pass_socket,
    poll_idle,
    poll_socat,
    readdir_stable,
    run_background,
    run_chrony,
    run_cpython_asyncio,
    run_cpython_logging,
    run_cpython_paths,
    run_cpython_socketserver,
    run_cpython_suite,
    run_exec_static,
    run_curl,
    run_dbus,
    run_filter,
    run_haproxy,
    run_inherit,
    run_lighttpd,
    run_mariadb,
    run_nginx,
    run_node,
    run_php_fpm,
    run_postgres,
    run_python,
    run_rsyslog,
    run_seccomp,
    run_seccomp_blocking,
    run_seccomp_gonet,
    run_seccomp_passfd,
    run_socket_activate,
    run_ssh_agent,
    run_socat_nc,
    run_supervisord,
    run_tmux,
    run_uwsgi,
    run_varnish,
    run_xvfb,
    signal_send,
    soak,
    splice,
    signals,
    ss_compare,
    stream_echo,
    stream_signals,
    threads1,
    unmount,
    user_shares,
    watchdog_signals;
    // Run once, not again on one worker thread: others' whole suites, each minutes long,
    // whose one-thread pass the same suites' other scripts make already (run_cpython_suite,
    // run_socketserver, run_cpython_asyncio on the plain mount; libuv's calls are those
    // run_node's and the pipe scripts' one-thread passes make) and CI's 60 minutes cannot
    // hold twice; and the programs added late (gpg-agent, git's credential cache, slapd,
    // Dovecot, PulseAudio, mosquitto, Postfix, Apache httpd, gunicorn), whose second pass is the lanes_off one below; CPython's multiprocessing suite and
    // tokio's tests (minutes each; their calls are the asyncio and socketserver suites' and
    // the tokio pipe scripts' in the one-thread pass), so CI stays inside its 60 minutes.
    // The lane scripts whose bytes go between the programs without the daemon's workers
    // (a minute or more each: adversarial_lanes2/3, lanes_connect, lanes_threads), and the
    // JVM's four runs (run_java). The SIGIO scripts (15-50 s each, most of it the waits
    // for a signal that must not come, 0.2-0.5 s a case, the cases at once): the request
    // that queues an event sends its SIGIO in its own thread (through the setter's
    // signaller process, src/engine/urg.rs, which needs no FUSE worker), so one worker
    // has nothing to block. lanes.sh (100 s a pass: its three runs, kernel, lanes and
    // --no-lanes; its daemon cases park as timeo.sh's, whose one-thread pass stays) and
    // the supervisor's race scripts (adversarial_close_race/exec_race: one call held in
    // a stopped daemon, a thread count changes nothing), so CI stays inside its 60 minutes
    // (57.4 min with them twice, a local run of 48a4c78). And, at 3467 s with them
    // twice (the official CI of the twenty-ninth session's tree), the attacks of another user on
    // the mount's bounds, shares, observers and routes (adversarial_floods, _lanes,
    // _more, _observers, _pins, _routed_dirs: 20-41 s each; their bounds are the
    // daemon's counts, not its workers'), lanes_ready (the lanes' readiness, no worker
    // in it), and suites and floods whose calls the one-thread pass makes in the
    // smaller scripts (run_glib_tests, run_nix_tests, run_faults, run_seccomp_flood).
    // Then, at 60.5 min for the whole local run of that (integration 2974 s), the
    // programs and attacks whose one-thread pass made no call the blocking scripts
    // (close_order, timeo, signals, soak, poll_idle, adversarial_pool, run_seccomp*,
    // run_cpython_suite, msgcalls) do not make: 7-21 s each, 197 s in all.
    once:
    accept_after_setuid,
    adversarial_capture,
    adversarial_close_race,
    adversarial_exec_race,
    adversarial_fdpath,
    adversarial_floods,
    adversarial_lanes,
    adversarial_lanes2,
    adversarial_lanes3,
    adversarial_lanes4,
    adversarial_lanes5,
    adversarial_lanes6,
    adversarial_lanes7,
    adversarial_lanes8,
    adversarial_more,
    adversarial_netns_reuse,
    adversarial_observers,
    adversarial_pins,
    adversarial_routed_dirs,
    adversarial_sigio,
    adversarial_through,
    fault_immediate,
    hostile_files,
    kernel_selftests,
    lanes,
    lanes_connect,
    lanes_programs,
    lanes_ready,
    lanes_threads,
    lanes_tokio_bugs,
    run_apache,
    run_cpython_multiprocessing,
    run_cpython_nolanes,
    run_dovecot,
    run_faults,
    run_git_credential,
    run_glib_tests,
    run_go_tests,
    run_gpg_agent,
    run_gunicorn,
    run_hackbench,
    run_java,
    run_libuv_tests,
    run_memcached,
    run_mosquitto,
    run_nix_tests,
    run_postfix,
    run_postgres_lanes,
    run_postgres_live_capture,
    run_pulseaudio,
    run_redis,
    run_redis_lanes,
    run_seccomp_flood,
    run_slapd,
    run_ssh_mux,
    run_tokio_tests,
    sigio,
    supervisor_sigio,
);

/// Real-program scripts, and the integration scripts that compare a program's results
/// with the kernel's (lib.sh's `kernel_vs_udsfs`, `kernel_vs_fronts`: about 2 min for
/// the twelve), again on mounts without lanes (issue 30: the same results with lanes off
/// as on, the default). `UDSFS_LANES=off` makes lib.sh's `udsfs_mount` add
/// `--no-lanes`, and its exit trap fails the script unless a socketpair made through
/// `udsfs run` on the mount says `lane=none` (so a switch that is ignored fails here).
mod lanes_off {
    use super::run_script;

    macro_rules! lanes_off {
        ($($name:ident),* $(,)?) => {
            $(
                #[test]
                fn $name() {
                    run_script(stringify!($name), None, Some("off"));
                }
            )*
        };
    }

    lanes_off!(
        abstract_netns,
        accept_after_setuid,
        api_diffs,
        behaviours,
        bufs,
        close_order,
        escapes,
        fstat_mode,
        given_names,
        msgcalls,
        oob_peek,
        run_apache,
        run_chrony,
        run_dbus,
        run_dovecot,
        run_git_credential,
        run_glib_tests,
        run_gpg_agent,
        run_gunicorn,
        run_haproxy,
        run_memcached,
        run_mosquitto,
        run_nginx,
        run_node,
        run_php_fpm,
        run_postfix,
        run_pulseaudio,
        run_slapd,
        run_tmux,
        timeo,
    );
}

/// Every `integration/*.sh` but `lib.sh` has a test above, and every test has its script:
/// nothing is skipped silently.
#[test]
fn every_script_has_a_test() {
    let mut on_disk: Vec<String> = std::fs::read_dir(integration_dir())
        .expect("list integration/")
        .map(|entry| entry.expect("read integration/").file_name())
        .filter_map(|name| name.to_str()?.strip_suffix(".sh").map(str::to_owned))
        .filter(|stem| stem != "lib")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = SCRIPTS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    let unlisted: Vec<_> = on_disk.iter().filter(|s| !listed.contains(s)).collect();
    let missing: Vec<_> = listed.iter().filter(|s| !on_disk.contains(s)).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "tests/integration.rs and integration/ disagree: scripts without a test \
         (add them to scripts!): {unlisted:?}; tests without a script: {missing:?}"
    );
}

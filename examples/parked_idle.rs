//! The cost of parked callers (issues 11, 17): the daemon's CPU while N
//! threads of one process are parked reading N idle stream sockets, and how
//! soon a signalled caller among them ends. Prints `RESULT key value` lines for
//! scripts/bench.
//!
//!     parked_idle --dir MOUNT --pid DAEMON_PID --callers 1000 --seconds 3
//!
//! Signals measured: SIGUSR1 (caught, no SA_RESTART) sent with tgkill to a few
//! of the N threads (time until that thread's read() returns EINTR), and
//! SIGINT, SIGTERM, SIGKILL sent to separate `cat` processes parked on their
//! own sockets (time until waitpid() sees them gone). With `--processes` the
//! N callers are `cat` processes, and the signalled cats are among them.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;

#[derive(Parser)]
struct Cli {
    /// The udsfs mount.
    #[arg(long)]
    dir: PathBuf,
    /// The daemon serving it.
    #[arg(long)]
    pid: i32,
    #[arg(long, default_value_t = 1000)]
    callers: usize,
    /// How long to watch the idle daemon's CPU.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Signalled callers of each kind (tgkill'd threads; cat processes).
    #[arg(long, default_value_t = 3)]
    signals: usize,
    /// The callers are `cat` processes (one single-threaded process each)
    /// instead of threads of this one; the signalled ones are among them.
    #[arg(long)]
    processes: bool,
}

fn result(key: &str, value: impl std::fmt::Display) {
    println!("RESULT {key} {value}");
}

/// Opens a file of the mount for reading and writing.
fn open_rdwr(p: &Path) -> File {
    let opened = OpenOptions::new().read(true).write(true).open(p);
    opened.unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A stream pair: its handle (which keeps both ends) and N's data file.
fn pair(dir: &Path) -> (File, PathBuf) {
    let ctl = open_rdwr(&dir.join(".udsfs/stream/pair"));
    let mut buf = [0u8; 64];
    let n = (&ctl).read(&mut buf).expect("read pair handle");
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let id = text.split_whitespace().next().expect("N");
    (ctl, dir.join(format!(".udsfs/sock/{id}/data")))
}

/// `parked=` of `.udsfs/gc`.
fn parked(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join(".udsfs/gc")).expect("read .udsfs/gc");
    text.lines()
        .find_map(|l| l.strip_prefix("parked="))
        .and_then(|v| v.parse().ok())
        .expect("parked= in .udsfs/gc")
}

fn wait_parked(dir: &Path, n: usize) {
    let start = Instant::now();
    while parked(dir) < n {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "only {} of {n} requests parked",
            parked(dir)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("daemon stat");
    let rest = &text[text.rfind(')').expect("stat comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat; `rest` starts at field 3.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a system value.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

extern "C" fn on_usr1(_: libc::c_int) {}

fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain rlimit calls on a struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() - 1])
}

/// A `cat` parked reading a new pair's socket (whose handle `keep` holds),
/// with SIGINT and SIGTERM at their defaults.
fn spawn_cat(dir: &Path, keep: &mut Vec<File>) -> std::process::Child {
    let (ctl, data) = pair(dir);
    keep.push(ctl);
    let mut cmd = Command::new("cat");
    cmd.arg(&data).stdout(Stdio::null());
    // SAFETY: only resets signal dispositions before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.spawn().expect("spawn cat")
}

/// Sends SIGINT, SIGTERM, SIGKILL in turn to `cats`: how long each took to go.
fn signal_cats(cats: Vec<std::process::Child>) -> Vec<f64> {
    let mut lat = Vec::new();
    for (k, mut cat) in cats.into_iter().enumerate() {
        let sig = [libc::SIGINT, libc::SIGTERM, libc::SIGKILL][k % 3];
        let sent = Instant::now();
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(cat.id() as i32, sig) };
        cat.wait().expect("wait cat");
        let ms = sent.elapsed().as_secs_f64() * 1000.0;
        eprintln!("signal {sig} to parked cat: gone after {ms:.1} ms");
        lat.push(ms);
    }
    lat
}

/// Once all callers are parked (and a moment later), the daemon's CPU in %
/// of a core over `--seconds`.
fn measure_idle(cli: &Cli, base: usize, what: &str) -> f64 {
    wait_parked(&cli.dir, base + cli.callers);
    std::thread::sleep(Duration::from_millis(500));
    let c0 = cpu_seconds(cli.pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(cli.seconds));
    let cpu = (cpu_seconds(cli.pid) - c0) / t0.elapsed().as_secs_f64() * 100.0;
    eprintln!(
        "{} {what} parked: daemon used {cpu:.2} % of a core",
        cli.callers
    );
    cpu
}

fn report(cpu: f64, lat: Vec<f64>) {
    result("idle_cpu_percent", format!("{cpu:.2}"));
    let (med, max) = median_max(lat);
    result("signal_median_ms", format!("{med:.1}"));
    result("signal_max_ms", format!("{max:.1}"));
}

/// N `cat` processes parked; the signalled ones among them.
fn processes(cli: &Cli) {
    let base = parked(&cli.dir);
    let mut keep = Vec::new();
    let mut cats: Vec<_> = (0..cli.callers)
        .map(|_| spawn_cat(&cli.dir, &mut keep))
        .collect();
    let cpu = measure_idle(cli, base, "single-threaded processes");
    let step = (cli.callers / cli.signals.max(1)).max(1);
    let mut signalled = Vec::new();
    let mut k = cats.len();
    while k > 0 && signalled.len() < cli.signals {
        k = k.saturating_sub(step);
        signalled.push(cats.remove(k));
    }
    let lat = signal_cats(signalled);
    for cat in &mut cats {
        let _ = cat.kill();
    }
    for cat in &mut cats {
        let _ = cat.wait();
    }
    report(cpu, lat);
}

fn main() {
    let cli = Cli::parse();
    raise_nofile();
    if cli.processes {
        return processes(&cli);
    }
    // SAFETY: installs a handler that does nothing, without SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let base = parked(&cli.dir);

    // N threads, each parked reading its own idle socket; each reports its
    // tid, and later when its read ended with EINTR.
    let (tid_tx, tid_rx) = mpsc::channel();
    let mut ended = Vec::new();
    for i in 0..cli.callers {
        let (ctl, data) = pair(&cli.dir);
        let f = open_rdwr(&data);
        let (end_tx, end_rx) = mpsc::channel();
        ended.push(end_rx);
        let tid_tx = tid_tx.clone();
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let _keep = ctl;
                tid_tx.send((i, nix::unistd::gettid().as_raw())).unwrap();
                let mut b = [0u8; 16];
                let r = (&f).read(&mut b);
                match r {
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                        let _ = end_tx.send(Instant::now());
                    }
                    other => panic!("parked read ended with {other:?}"),
                }
            })
            .expect("spawn caller");
    }
    let mut tids = vec![0; cli.callers];
    for _ in 0..cli.callers {
        let (i, t) = tid_rx.recv().unwrap();
        tids[i] = t;
    }
    let cpu = measure_idle(&cli, base, "callers");

    // Thread-directed caught signals.
    let mut lat = Vec::new();
    for k in 0..cli.signals.min(cli.callers) {
        let i = k * cli.callers / cli.signals;
        let sent = Instant::now();
        // SAFETY: tgkill only sends a signal.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                std::process::id() as i32,
                tids[i],
                libc::SIGUSR1,
            )
        };
        let at = ended[i]
            .recv_timeout(Duration::from_secs(10))
            .expect("tgkill'd caller still parked after 10 s");
        let ms = at.duration_since(sent).as_secs_f64() * 1000.0;
        eprintln!(
            "tgkill SIGUSR1 to thread {}: read ended after {ms:.1} ms",
            tids[i]
        );
        lat.push(ms);
    }

    // Process-directed signals to parked cats.
    let mut keep = Vec::new();
    let parked_now = parked(&cli.dir);
    let cats: Vec<_> = (0..cli.signals)
        .map(|_| spawn_cat(&cli.dir, &mut keep))
        .collect();
    wait_parked(&cli.dir, parked_now + cli.signals);
    lat.extend(signal_cats(cats));
    report(cpu, lat);
    // The remaining callers end with the process.
    std::process::exit(0);
}

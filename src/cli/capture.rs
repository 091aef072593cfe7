//! `udsfs capture`: a mount's messages as a live pcapng stream (its
//! `.udsfs/capture` with the filter lines the options stand for), to a file
//! or to standard output (`udsfs capture | wireshark -k -i -`). Also the
//! capture `udsfs run --capture FILE` keeps while its command runs.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Args;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

#[derive(Args, Clone, Default)]
pub struct CaptureArgs {
    /// Write the capture to FILE (default: standard output).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<PathBuf>,
    /// Only the conversations of socket N (repeatable).
    #[arg(long, value_name = "N")]
    socket: Vec<u64>,
    /// Only conversations with an end bound at a name matching GLOB, as the
    /// mount shows it (run/*.sock; repeatable).
    #[arg(long, value_name = "GLOB")]
    name: Vec<String>,
    /// Only conversations in which process P sent, connected or accepted.
    #[arg(long, value_name = "P")]
    pid: Vec<u32>,
    /// Only conversations of user U.
    #[arg(long, value_name = "U")]
    uid: Vec<u32>,
    /// Only sockets of this type (stream, dgram, seqpacket).
    #[arg(long = "type", value_name = "TYPE")]
    ty: Vec<String>,
    /// Payload bytes kept of each message.
    #[arg(long, value_name = "N")]
    snaplen: Option<usize>,
    /// How payloads are encoded: upper-pdu (exact message boundaries) or tcp
    /// (a synthetic TCP connection per socket pair, for stream reassembly).
    #[arg(long, value_name = "FORMAT", value_parser = ["upper-pdu", "tcp"])]
    format: Option<String>,
    /// The payload protocol (http, dbus, json, ...): the dissector name in
    /// upper-pdu, the synthetic server port in tcp; NAME=GLOB for the
    /// conversations with an end bound at a name matching GLOB only
    /// (repeatable; the first match wins over a plain NAME).
    #[arg(long, value_name = "NAME[=GLOB]")]
    proto: Vec<String>,
    /// Bytes the daemon buffers for this capture before it drops records.
    #[arg(long, value_name = "BYTES")]
    buffer: Option<usize>,
    /// The mount.
    #[arg(default_value = "mountpoints/default")]
    mountpoint: PathBuf,
}

impl CaptureArgs {
    /// The options as `.udsfs/capture` filter lines.
    pub fn filter_lines(&self) -> String {
        let mut s = String::new();
        let mut line = |k: &str, v: &dyn std::fmt::Display| s.push_str(&format!("{k} {v}\n"));
        self.socket.iter().for_each(|n| line("socket", n));
        self.name.iter().for_each(|n| line("name", n));
        self.pid.iter().for_each(|n| line("pid", n));
        self.uid.iter().for_each(|n| line("uid", n));
        self.ty.iter().for_each(|n| line("type", n));
        if let Some(n) = self.snaplen {
            line("snaplen", &n);
        }
        if let Some(f) = &self.format {
            line("format", f);
        }
        for p in &self.proto {
            match p.split_once('=') {
                Some((name, glob)) => line("proto", &format!("{name} {glob}")),
                None => line("proto", p),
            }
        }
        if let Some(b) = self.buffer {
            line("buffer", &b);
        }
        s
    }

    /// The capture `udsfs run --capture` keeps.
    pub fn for_run(format: Option<String>, proto: Vec<String>) -> CaptureArgs {
        CaptureArgs {
            format,
            proto,
            ..Default::default()
        }
    }
}

/// A capture being copied out on a thread of its own.
pub struct Live {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), String>>,
}

/// How long a stopping capture waits for late records (closes are
/// reported when the kernel releases the files, just after a process ends).
const SETTLE: Duration = Duration::from_millis(300);

/// Reads shorter than this wait `GATHER` before the next one.
const BATCH: usize = 64 << 10;
const GATHER: Duration = Duration::from_millis(10);

fn open(mount: &Path, lines: &str) -> Result<File, String> {
    let path = mount.join(".udsfs/capture");
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !lines.is_empty() {
        f.write_all(lines.as_bytes())
            .map_err(|e| format!("{}: filter refused: {e}", path.display()))?;
    }
    Ok(f)
}

/// Copies the capture to `out` until `stop` is set and nothing came for
/// `SETTLE`.
fn copy(mut f: File, out: &mut dyn Write, stop: &AtomicBool) -> Result<(), String> {
    let mut buf = vec![0u8; 1 << 20];
    let mut quiet_since: Option<Instant> = None;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                out.write_all(&buf[..n])
                    .and_then(|_| out.flush())
                    .map_err(|e| format!("writing the capture: {e}"))?;
                quiet_since = None;
                // A short read: let records gather for a moment rather than
                // make a FUSE round trip (and a wake-up) per message.
                if n < BATCH {
                    std::thread::sleep(GATHER);
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the capture: {e}")),
        }
        if stop.load(Ordering::Relaxed) {
            let t = *quiet_since.get_or_insert_with(Instant::now);
            if t.elapsed() >= SETTLE {
                return Ok(());
            }
        }
        let mut fds = [PollFd::new(f.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(50u16));
    }
}

/// Starts copying the capture of `mount` (with the filter `a` stands for)
/// to `out`; ready to see messages once this returns.
pub fn start(
    mount: &Path,
    a: &CaptureArgs,
    mut out: Box<dyn Write + Send>,
) -> Result<Live, String> {
    let f = open(mount, &a.filter_lines())?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("udsfs-capture".into())
        .spawn(move || copy(f, &mut *out, &s))
        .map_err(|e| format!("cannot start the capture thread: {e}"))?;
    Ok(Live { stop, thread })
}

impl Live {
    /// Copies what is still buffered, then ends.
    pub fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the capture thread panicked".into()))
    }
}

/// Where a capture goes: FILE, or standard output.
pub fn output(path: Option<&Path>) -> Result<Box<dyn Write + Send>, String> {
    Ok(match path {
        Some(p) => Box::new(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => Box::new(std::io::stdout()),
    })
}

pub fn main(a: &CaptureArgs) -> Result<(), String> {
    // SIGINT, SIGTERM and SIGHUP end the capture cleanly, after what the
    // daemon still buffers.
    let mut set = nix::sys::signal::SigSet::empty();
    for s in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
    ] {
        set.add(s);
    }
    let _ = set.thread_block();
    let live = start(&a.mountpoint, a, output(a.write.as_deref())?)?;
    let stop = live.stop.clone();
    let _ = std::thread::Builder::new()
        .name("udsfs-capture-signals".into())
        .spawn(move || {
            if set.wait().is_ok() {
                stop.store(true, Ordering::Relaxed);
            }
        });
    live.stop_when_told()
}

impl Live {
    /// Waits for the copy to end (a signal sets `stop`; a reader of the
    /// output that went away ends it too).
    fn stop_when_told(self) -> Result<(), String> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the capture thread panicked".into()))
    }
}

//! udsfs_probe: run_tokio_tests.sh's lanes guard, built beside tokio's tests. Through
//! `udsfs run` on a `--lanes` mount (UDSFS_PROBE_MNT set), a `UnixStream::pair()` and a
//! connection made by `UnixListener::bind`, `connect` and `accept` (in TMPDIR, a
//! directory in the mount) pass a byte each way; then each end's udsfs status file
//! (found through /proc/self/fd) must say `lane=direct` within 2 s: the mount gives
//! this binary's sockets their lanes, so the lanes pass is not the preload pass again.
//! std's blocking sockets, not tokio's: tokio's reactor on a laned socket is what the
//! lanes pass's exceptions are about (run_tokio_tests_exceptions.txt). Prints `probe:
//! WHAT lane=...` a socket.
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// The `lane=` line of fd's udsfs status file (None: fd is not a udsfs socket).
fn lane_of(fd: i32) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let link = link.to_str()?.to_owned();
    if !link.contains("/.udsfs/sock/") {
        return None;
    }
    let status = std::path::Path::new(&link).with_file_name("status");
    let text = std::fs::read_to_string(status).ok()?;
    text.lines()
        .find(|l| l.starts_with("lane="))
        .map(str::to_owned)
}

/// A byte each way until both ends say lane=direct (2 s at most); prints what they said.
fn both_laned(what: &str, a: &mut UnixStream, b: &mut UnixStream) {
    let mut buf = [0u8; 1];
    let start = Instant::now();
    let (mut la, mut lb);
    loop {
        a.write_all(b"a").unwrap();
        b.read_exact(&mut buf).unwrap();
        b.write_all(b"b").unwrap();
        a.read_exact(&mut buf).unwrap();
        la = lane_of(a.as_raw_fd());
        lb = lane_of(b.as_raw_fd());
        let direct = |l: &Option<String>| l.as_deref() == Some("lane=direct");
        if (direct(&la) && direct(&lb)) || start.elapsed() > Duration::from_secs(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("probe: {what} first end {la:?}");
    println!("probe: {what} second end {lb:?}");
    assert_eq!(la.as_deref(), Some("lane=direct"), "{what}: the first end");
    assert_eq!(lb.as_deref(), Some("lane=direct"), "{what}: the second end");
}

#[test]
fn pair_and_connection_are_laned() {
    if std::env::var_os("UDSFS_PROBE_MNT").is_none() {
        println!("probe: not through udsfs (UDSFS_PROBE_MNT unset): nothing to look at");
        return;
    }
    let (mut a, mut b) = UnixStream::pair().unwrap();
    both_laned("UnixStream::pair", &mut a, &mut b);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let mut c = UnixStream::connect(&path).unwrap();
    let (mut s, _) = listener.accept().unwrap();
    both_laned("connect/accept", &mut c, &mut s);
}

//! Checks that compare no traces: `.udsfs/unix` against `/proc/net/unix` with one
//! parser, and the connect view and abstract directory used from the shell.

use super::backend::Ty::{Dgram, Seqpacket, Stream};
use super::backend::*;

/// One row of /proc/net/unix (or `.udsfs/unix`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnixRow {
    pub flags: u32,
    pub ty: u16,
    pub st: u8,
    pub path: Option<String>,
    pub refcount: u32,
    pub inode: u64,
}

/// The header line of /proc/net/unix.
const UNIX_HEADER: &str = "Num       RefCount Protocol Flags    Type St Inode Path";

/// Parses the /proc/net/unix format strictly (the kernel's `unix_seq_show`):
/// `%pK: %08X %08X %08X %04X %02X %5lu` and, for a named socket, a space and the
/// path (abstract names as `@name`).
pub fn parse_unix_table(text: &str) -> Result<Vec<UnixRow>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim_end() == UNIX_HEADER => {}
        other => return Err(format!("header {other:?}, expected {UNIX_HEADER:?}")),
    }
    let hex = |s: &str, width: usize, what: &str, line: &str| -> Result<u64, String> {
        if s.len() != width || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{what} {s:?} is not {width} hex digits in {line:?}"
            ));
        }
        u64::from_str_radix(s, 16).map_err(|e| format!("{what} {s:?}: {e}"))
    };
    let mut rows = Vec::new();
    for line in lines {
        let (num, rest) = line
            .split_once(": ")
            .ok_or_else(|| format!("no \"Num: \" in {line:?}"))?;
        if num.is_empty() || !num.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("Num {num:?} is not hex in {line:?}"));
        }
        let field = |a: usize, b: usize| rest.get(a..b).unwrap_or("");
        let refcount = hex(field(0, 8), 8, "RefCount", line)? as u32;
        let protocol = hex(field(9, 17), 8, "Protocol", line)?;
        let flags = hex(field(18, 26), 8, "Flags", line)? as u32;
        let ty = hex(field(27, 31), 4, "Type", line)? as u16;
        let st = hex(field(32, 34), 2, "St", line)? as u8;
        for i in [8, 17, 26, 31, 34] {
            if rest.as_bytes().get(i) != Some(&b' ') {
                return Err(format!(
                    "no space at column {i} after \"Num: \" in {line:?}"
                ));
            }
        }
        if protocol != 0 {
            return Err(format!("Protocol {protocol} in {line:?}"));
        }
        let tail = rest.get(35..).unwrap_or("");
        // %5lu: at least 5 characters, right-aligned.
        let digits_end = tail
            .find(|c: char| c != ' ' && !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let inode_field = match tail[..digits_end].rfind(|c: char| c.is_ascii_digit()) {
            Some(end) => &tail[..=end],
            None => return Err(format!("no Inode in {line:?}")),
        };
        if inode_field.len() < 5 || inode_field.trim_start().contains(' ') {
            return Err(format!("Inode {inode_field:?} is not %5lu in {line:?}"));
        }
        let inode: u64 = inode_field
            .trim_start()
            .parse()
            .map_err(|e| format!("Inode {inode_field:?}: {e}"))?;
        let after = &tail[inode_field.len()..];
        let path = if after.is_empty() {
            None
        } else if let Some(p) = after.strip_prefix(' ') {
            Some(p.to_string())
        } else {
            return Err(format!("no space before Path in {line:?}"));
        };
        rows.push(UnixRow {
            flags,
            ty,
            st,
            path,
            refcount,
            inode,
        });
    }
    Ok(rows)
}

/// The sockets both tables are made of: a stream listener on an abstract name with
/// a NUL inside, one client accepted and one not (an embryo), a dgram socket on a
/// path, a seqpacket listener, an unbound dgram socket. Returns nothing: the table
/// is read afterwards, while `b` still holds the sockets.
fn unix_table_setup(b: &mut dyn Backend) {
    let l = b.listening(Stream, ab(b"lis\0x"), 5);
    let _c1 = b.connected(Stream, ab(b"lis\0x"));
    let _c2 = b.connected(Stream, ab(b"lis\0x"));
    b.accept(l);
    let _d = b.bound(Dgram, p("d.sock"));
    let _q = b.listening(Seqpacket, ab(b"sq"), 1);
    b.socket(Dgram);
    assert!(
        !b.trace()
            .entries
            .iter()
            .any(|(_, r)| r.starts_with("ERR") || r.contains("HARNESS")),
        "setup failed: {:?}",
        b.trace().entries
    );
}

/// (flags, type, state, path) of every row, sorted, with absolute paths cut to
/// their last component (the kernel shows the full path, udsfs the mount-relative
/// one).
fn unix_table_summary(rows: &[UnixRow]) -> Vec<(u32, u16, u8, Option<String>)> {
    let mut v: Vec<_> = rows
        .iter()
        .map(|r| {
            let path = r.path.as_ref().map(|p| {
                if p.starts_with('/') {
                    p.rsplit('/').next().unwrap_or(p).to_string()
                } else {
                    p.clone()
                }
            });
            (r.flags, r.ty, r.st, path)
        })
        .collect();
    v.sort();
    v
}

fn check_unix_rows(side: &str, rows: &[UnixRow]) {
    let s = unix_table_summary(rows);
    let lis = Some("@lis@x".to_string());
    let count = |want: (u32, u16, u8, Option<String>)| s.iter().filter(|r| **r == want).count();
    // The listener.
    assert_eq!(
        count((0x10000, 1, 1, lis.clone())),
        1,
        "{side}: listener row in {s:?}"
    );
    // The embryo (connected, not accepted), listed under the listener's name.
    assert_eq!(
        count((0, 1, 2, lis.clone())),
        1,
        "{side}: embryo row in {s:?}"
    );
    // The accepted socket shows the listener's name.
    assert_eq!(count((0, 1, 3, lis)), 1, "{side}: accepted row in {s:?}");
    // The two clients: connected, unnamed.
    assert_eq!(count((0, 1, 3, None)), 2, "{side}: client rows in {s:?}");
    assert_eq!(
        count((0, 2, 1, Some("d.sock".to_string()))),
        1,
        "{side}: dgram row in {s:?}"
    );
    assert_eq!(
        count((0x10000, 5, 1, Some("@sq".to_string()))),
        1,
        "{side}: seqpacket listener row in {s:?}"
    );
    assert_eq!(
        count((0, 2, 1, None)),
        1,
        "{side}: unbound dgram row in {s:?}"
    );
    assert_eq!(s.len(), 8, "{side}: rows {s:?}");
}

/// `.udsfs/unix` parses with the same parser as /proc/net/unix and, for the same
/// sockets, gives the same rows (flags, type, state, path).
#[test]
fn unix_table_matches_proc_net_unix() {
    super::require_root();
    let kernel_text = std::thread::spawn(|| {
        // SAFETY: plain syscall; this thread only.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let mut k = super::kernel::Kernel::new();
        unix_table_setup(&mut k);
        // /proc/net is the thread-group leader's namespace; thread-self is ours.
        std::fs::read_to_string("/proc/thread-self/net/unix").expect("read /proc/net/unix")
    })
    .join()
    .expect("kernel side");
    let mount = super::mount::Mount::new();
    let table = mount.path().join(".udsfs/unix");
    let mut u = super::udsfs::Udsfs::new(mount);
    unix_table_setup(&mut u);
    let udsfs_text = std::fs::read_to_string(&table).expect("read .udsfs/unix");
    let k = parse_unix_table(&kernel_text)
        .unwrap_or_else(|e| panic!("/proc/net/unix: {e}\n{kernel_text}"));
    let uu =
        parse_unix_table(&udsfs_text).unwrap_or_else(|e| panic!(".udsfs/unix: {e}\n{udsfs_text}"));
    check_unix_rows("kernel", &k);
    check_unix_rows("udsfs", &uu);
    assert_eq!(
        unix_table_summary(&k),
        unix_table_summary(&uu),
        "kernel:\n{kernel_text}\nudsfs:\n{udsfs_text}"
    );
    // Inodes: distinct for live sockets, 0 only for the embryo (as the kernel).
    for (side, rows) in [("kernel", &k), ("udsfs", &uu)] {
        let zero: Vec<_> = rows.iter().filter(|r| r.inode == 0).collect();
        assert!(
            zero.len() <= 1 && zero.iter().all(|r| r.st == 2),
            "{side}: inode 0 rows {zero:?}"
        );
        for r in rows {
            assert!(r.refcount >= 1, "{side}: refcount of {r:?}");
        }
    }
    drop(u);
}

fn sh(cmd: &str) -> std::process::Output {
    let _spawning = super::backend::spawn_guard();
    std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("run sh")
}

/// Non-blocking accept, retried for up to 5 s.
fn accept_within(b: &mut dyn Backend, l: Sock) -> Sock {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match b.raw_accept(l) {
            Ok(a) => return a,
            Err(e) if e == "EAGAIN" && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Receive on a stream socket until EOF (non-blocking reads, retried for 5 s).
fn recv_to_eof(b: &mut dyn Backend, s: Sock) -> Vec<u8> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        match b.raw_recv(s, 4096) {
            Ok(d) if d.is_empty() => return out,
            Ok(d) => out.extend_from_slice(&d),
            Err(e) if e == "EAGAIN" && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => panic!("recv: {e} after {out:?}"),
        }
    }
}

/// The short way: `echo` into a connect-view node sends a datagram or
/// a stream connection's bytes, `cat` prints what a stream server sends until EOF,
/// an `.udsfs/abstract/NAME` entry opened O_RDWR is a two-way connection; many
/// openers of one name at once all get through quickly, also while another opener
/// is blocked on a full backlog.
#[test]
fn connect_view_one_liners() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    super::require_root();
    let mount = super::mount::Mount::new();
    let mnt = mount.path().to_path_buf();
    let cv = |rel: &str| mnt.join(".udsfs/connect").join(rel);
    let mut u = super::udsfs::Udsfs::new(mount);
    let b: &mut dyn Backend = &mut u;

    // echo > dgram node: one datagram.
    b.mkdir("run");
    let log = b.bound(Dgram, p("run/log.sock"));
    let out = sh(&format!("echo hi > '{}'", cv("run/log.sock").display()));
    assert!(out.status.success(), "echo to dgram: {out:?}");
    assert_eq!(b.recv(log, 100).ok(), Some(b"hi\n".to_vec()));
    assert_eq!(b.recv(log, 100).0, Err("EAGAIN".to_string()));

    // echo > stream node: a connection carrying "hi\n", then EOF.
    let x = b.listening(Stream, p("x"), 5);
    let out = sh(&format!("echo hi > '{}'", cv("x").display()));
    assert!(out.status.success(), "echo to stream: {out:?}");
    let a = accept_within(b, x);
    assert_eq!(recv_to_eof(b, a), b"hi\n");
    b.close(a);

    // cat < stream node: what the server sends, until EOF.
    let child = {
        let _spawning = super::backend::spawn_guard();
        std::process::Command::new("cat")
            .arg(cv("x"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn cat")
    };
    let a = accept_within(b, x);
    assert_eq!(b.send(a, b"hello from x\n").ok(), Some(13));
    b.close(a);
    let out = child.wait_with_output().expect("cat");
    assert!(out.status.success(), "cat: {out:?}");
    assert_eq!(out.stdout, b"hello from x\n");

    // .udsfs/abstract/echo opened O_RDWR: a two-way connection.
    let e = b.listening(Stream, ab(b"echo"), 5);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join(".udsfs/abstract/echo"))
        .expect("open .udsfs/abstract/echo");
    let a = accept_within(b, e);
    f.write_all(b"ping").expect("write ping");
    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        match b.raw_recv(a, 100) {
            Ok(d) => break d,
            Err(err) if err == "EAGAIN" && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(err) => panic!("server recv: {err}"),
        }
    };
    assert_eq!(got, b"ping");
    assert_eq!(b.send(a, b"pong").ok(), Some(4));
    let mut buf = [0u8; 16];
    let n = f.read(&mut buf).expect("read pong");
    assert_eq!(&buf[..n], b"pong");
    drop(f);
    assert_eq!(recv_to_eof(b, a), b"");
    b.close(a);

    // A blocked opener (backlog 0, already one connection queued) ...
    let full = b.listening(Stream, p("full.sock"), 0);
    let first = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(cv("full.sock"))
        .expect("first open of full.sock");
    let blocked_path = cv("full.sock");
    let blocked = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(blocked_path)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !blocked.is_finished(),
        "open of a full listener did not block"
    );

    // ... does not hold up 50 concurrent openers of another name (backlog 64).
    let many = b.listening(Stream, p("many.sock"), 64);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(50));
    let t0 = Instant::now();
    let openers: Vec<_> = (0..50)
        .map(|_| {
            let path = cv("many.sock");
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let t = Instant::now();
                let r = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path);
                (r.map_err(|e| e.to_string()), t.elapsed())
            })
        })
        .collect();
    let mut files = Vec::new();
    for h in openers {
        let (r, took) = h.join().expect("opener thread");
        files.push(r.expect("concurrent open of many.sock"));
        assert!(took < Duration::from_secs(2), "one open took {took:?}");
    }
    let all = t0.elapsed();
    assert!(
        all < Duration::from_secs(3),
        "50 concurrent opens took {all:?}"
    );
    let mut accepted = 0;
    while b.raw_accept(many).is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 50);
    assert!(
        !blocked.is_finished(),
        "the blocked opener finished by itself"
    );

    // Accepting on the full listener lets the blocked opener through.
    accept_within(b, full);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !blocked.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        blocked.is_finished(),
        "accept did not release the blocked opener"
    );
    assert_eq!(blocked.join().expect("blocked opener"), Ok(()));
    drop(first);
    drop(files);
    drop(u);
}

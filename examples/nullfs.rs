//! A null FUSE filesystem: the floor under udsfs's figures.
//!
//!     nullfs MOUNTPOINT [--threads N]
//!
//! The root holds one regular file, `data`, opened with the same flags udsfs
//! gives its socket files (DIRECT_IO | STREAM | PARALLEL_DIRECT_WRITES) and the
//! same large `st_size`. Every request is answered at once with no work: a
//! write is "written" in full, a read returns as many zero bytes as asked (at
//! most 64 KiB), open/flush/release succeed. The bench client drives it with
//! the same code it drives udsfs with, so the difference is udsfs's own work.
//!
//! It runs in the foreground; SIGINT or SIGTERM unmounts it and exits. Once the
//! mount answers, it prints `ready` on stdout.

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

const ROOT: u64 = 1;
const DATA: u64 = 2;
/// As udsfs's socket files: PARALLEL_DIRECT_WRITES needs pos + len <= i_size.
const FILE_SIZE: u64 = 1 << 30;
static ZEROS: [u8; 65536] = [0; 65536];

struct NullFs {
    uid: u32,
    gid: u32,
}

impl NullFs {
    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm, size) = match ino {
            ROOT => (FileType::Directory, 0o777, 0),
            DATA => (FileType::RegularFile, 0o666, FILE_SIZE),
            _ => return None,
        };
        Some(udsfs::fuse::synthetic(
            ino, kind, perm, self.uid, self.gid, size,
        ))
    }
}

/// udsfs answers with TTL 0; so does the floor.
const TTL: Duration = Duration::ZERO;

impl Filesystem for NullFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT && name == "data" {
            reply.entry(&TTL, &self.attr(DATA).expect("data"), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 != DATA {
            return reply.error(Errno::EISDIR);
        }
        reply.opened(
            FileHandle(1),
            FopenFlags::FOPEN_DIRECT_IO
                | FopenFlags::FOPEN_STREAM
                | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
        );
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        reply.data(&ZEROS[..(size as usize).min(ZEROS.len())]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.written(data.len() as u32);
    }

    fn flush(&self, _: &Request, _: INodeNo, _: FileHandle, _: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (DATA, FileType::RegularFile, "data"),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut mountpoint = None;
    let mut threads = 2usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().and_then(|v| v.parse().ok()).unwrap_or(2),
            _ => mountpoint = Some(PathBuf::from(a)),
        }
    }
    let Some(mountpoint) = mountpoint else {
        eprintln!("usage: nullfs MOUNTPOINT [--threads N]");
        std::process::exit(2);
    };
    let mountpoint = std::fs::canonicalize(&mountpoint)?;
    // Signals go to one thread with sigwait; block them before any thread starts.
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    set.add(nix::sys::signal::Signal::SIGTERM);
    let _ = set.thread_block();
    let fs = NullFs {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("nullfs".into()),
        MountOption::Subtype("nullfs".into()),
        MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(threads.max(1));
    let mut session = fuser::Session::new(fs, &mountpoint, &config)?;
    let unmounter = Arc::new(parking_lot::Mutex::new(session.unmount_callable()));
    {
        let unmounter = unmounter.clone();
        std::thread::spawn(move || {
            let _ = set.wait();
            let _ = unmounter.lock().unmount();
            std::thread::sleep(Duration::from_millis(300));
            std::process::exit(0);
        });
    }
    {
        let mp = mountpoint.clone();
        std::thread::spawn(move || {
            if std::fs::metadata(mp.join("data")).is_ok() {
                let mut out = std::io::stdout();
                let _ = writeln!(out, "ready");
                let _ = out.flush();
            }
        });
    }
    session.run()
}

//! The FUSE front end: a thin map from files to engine calls. Requests that
//! would block are parked (see `park`), never held on a worker thread.

mod files;
pub mod inode;
mod ioctl;
pub mod ioctl_abi;
pub mod park;
mod watchdog;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno as FErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyPoll, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nix::errno::Errno;
use parking_lot::Mutex;

use crate::engine::tree::{self, Kind, ROOT_INO};
use crate::engine::{Caller, Engine, Socket, Waiter, Wake, addr};
use files::{FileKind, Files, MsgReader, MsgWriter, OpenFile};
use inode::{Ctrl, Node, SockFile, TYPE_NAMES};
use park::{OpenOp, Outcome, ParkTable, Parked, Pending, Retry};

const TTL: Duration = Duration::ZERO;
/// Socket files claim a large size so the kernel lets writers run in
/// parallel (PARALLEL_DIRECT_WRITES needs pos + len <= i_size).
const SOCKET_FILE_SIZE: u64 = 1 << 30;

fn ferr(e: Errno) -> FErrno {
    FErrno::from_i32(e as i32)
}

fn socket_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO
        | FopenFlags::FOPEN_STREAM
        | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

/// Control handles keep file offsets (a read gives "N\n" once, then EOF)
/// but, like data files, must let writers in parallel: a connect parked on
/// a full backlog would otherwise hold the inode lock of every handle made
/// from the same clone file, unkillably (the files claim a large size too).
fn ctl_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

fn nonblocking(flags: i32) -> bool {
    flags & libc::O_NONBLOCK != 0
}

pub struct Inner {
    pub eng: Arc<Engine>,
    files: Files,
    pub parks: Arc<ParkTable>,
    /// Owner of the control tree.
    uid: u32,
    gid: u32,
    /// socketpair() second halves not yet opened, by socket number.
    held_pairs: Mutex<std::collections::HashMap<u64, Arc<Socket>>>,
}

pub struct UdsFs {
    inner: Arc<Inner>,
}

/// Retries parked requests on behalf of the park table.
struct Retrier(Weak<Inner>);

impl Retry for Retrier {
    fn attempt(&self, p: Pending, tid: u32, uid: u32, gid: u32, waiter: &Arc<Parked>) -> Outcome {
        let Some(inner) = self.0.upgrade() else {
            p.fail(FErrno::ENOTCONN);
            return Outcome::Done;
        };
        let w: Waiter = waiter.clone();
        inner.attempt(p, &Caller::new(tid, uid, gid), Some(&w))
    }

    fn cleanup_open(&self, op: OpenOp) {
        if let Some(inner) = self.0.upgrade()
            && let OpenOp::Connect { client, .. } = op
        {
            inner.eng.put(&client);
        }
    }
}

/// A poll registration: tells the kernel to poll again at the next change.
struct PollWaiter(Mutex<Option<PollNotifier>>);

impl Wake for PollWaiter {
    fn wake(&self) {
        if let Some(n) = self.0.lock().take() {
            let _ = n.notify();
        }
    }
    fn is_live(&self) -> bool {
        self.0.lock().is_some()
    }
}

impl UdsFs {
    pub fn new(eng: Arc<Engine>, uid: u32, gid: u32) -> UdsFs {
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            eng,
            files: Files::new(),
            parks: ParkTable::new(Box::new(Retrier(weak.clone()))),
            uid,
            gid,
            held_pairs: Mutex::new(Default::default()),
        });
        watchdog::spawn(Arc::downgrade(&inner.parks));
        UdsFs { inner }
    }

    pub fn inner(&self) -> Arc<Inner> {
        self.inner.clone()
    }
}

impl Inner {
    fn attr_of(&self, node: Node) -> Result<FileAttr, Errno> {
        let now = SystemTime::now();
        let mk = |ino: u64, kind: FileType, perm: u32, uid: u32, gid: u32, size: u64| FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind,
            perm: perm as u16,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid,
            gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        Ok(match node {
            Node::Tree(ino) | Node::Connect(ino) => {
                let a = self.eng.tree.getattr(ino)?;
                let connect_view = matches!(node, Node::Connect(_));
                let (kind, size) = match a.kind {
                    Kind::Dir => (FileType::Directory, a.size),
                    Kind::Symlink => (FileType::Symlink, a.size),
                    Kind::Socket if connect_view => (FileType::RegularFile, SOCKET_FILE_SIZE),
                    Kind::Socket => (FileType::Socket, 0),
                };
                FileAttr {
                    ino: INodeNo(node.ino()),
                    size,
                    blocks: size.div_ceil(512),
                    atime: a.atime,
                    mtime: a.mtime,
                    ctime: a.ctime,
                    crtime: a.ctime,
                    kind,
                    perm: a.perm as u16,
                    nlink: a.nlink,
                    uid: a.uid,
                    gid: a.gid,
                    rdev: 0,
                    blksize: 4096,
                    flags: 0,
                }
            }
            Node::Ctrl(c) => {
                let (kind, perm) = match c {
                    Ctrl::Root | Ctrl::TypeDir(_) | Ctrl::SockDir | Ctrl::AbstractDir => {
                        (FileType::Directory, 0o555)
                    }
                    Ctrl::Clone(_) | Ctrl::Pair(_) => (FileType::RegularFile, 0o666),
                    Ctrl::Unix | Ctrl::Graph => (FileType::RegularFile, 0o444),
                    Ctrl::Gc => (FileType::RegularFile, 0o644),
                };
                // Clone and pair files are control handles once open.
                let size = match c {
                    Ctrl::Clone(_) | Ctrl::Pair(_) => SOCKET_FILE_SIZE,
                    _ => 0,
                };
                mk(node.ino(), kind, perm, self.uid, self.gid, size)
            }
            Node::Sock(generation, f) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                let (kind, perm, size) = match f {
                    SockFile::Dir => (FileType::Directory, 0o700, 0),
                    SockFile::Status => (FileType::RegularFile, 0o400, 0),
                    SockFile::Ctl | SockFile::Accept => {
                        (FileType::RegularFile, 0o600, SOCKET_FILE_SIZE)
                    }
                    SockFile::Data | SockFile::Msg => {
                        (FileType::RegularFile, 0o600, SOCKET_FILE_SIZE)
                    }
                };
                mk(node.ino(), kind, perm, d.uid, d.gid, size)
            }
            Node::Abstract(generation) => {
                let (_, d) = self
                    .eng
                    .dir_by_generation(generation)
                    .ok_or(Errno::ENOENT)?;
                mk(
                    node.ino(),
                    FileType::RegularFile,
                    0o666,
                    d.uid,
                    d.gid,
                    SOCKET_FILE_SIZE,
                )
            }
        })
    }

    /// FUSE generation: inode numbers of socket files are made from
    /// generations already, so they are never reused.
    fn generation(&self, node: Node) -> u64 {
        match node {
            Node::Sock(generation, _) | Node::Abstract(generation) => generation,
            _ => 0,
        }
    }

    fn lookup_node(&self, parent: Node, name: &[u8], c: &Caller) -> Result<Node, Errno> {
        match parent {
            Node::Tree(ROOT_INO) if name == tree::CONTROL_NAME => Ok(Node::Ctrl(Ctrl::Root)),
            Node::Tree(p) => Ok(Node::Tree(self.eng.tree.lookup(p, name)?.ino)),
            Node::Connect(p) => Ok(Node::Connect(self.eng.tree.lookup(p, name)?.ino)),
            Node::Ctrl(Ctrl::Root) => match name {
                b"sock" => Ok(Node::Ctrl(Ctrl::SockDir)),
                b"abstract" => Ok(Node::Ctrl(Ctrl::AbstractDir)),
                b"connect" => Ok(Node::Connect(ROOT_INO)),
                b"unix" => Ok(Node::Ctrl(Ctrl::Unix)),
                b"graph" => Ok(Node::Ctrl(Ctrl::Graph)),
                b"gc" => Ok(Node::Ctrl(Ctrl::Gc)),
                _ => TYPE_NAMES
                    .iter()
                    .find(|(_, n)| n.as_bytes() == name)
                    .map(|(t, _)| Node::Ctrl(Ctrl::TypeDir(*t)))
                    .ok_or(Errno::ENOENT),
            },
            Node::Ctrl(Ctrl::TypeDir(t)) => match name {
                b"clone" => Ok(Node::Ctrl(Ctrl::Clone(t))),
                b"pair" => Ok(Node::Ctrl(Ctrl::Pair(t))),
                _ => Err(Errno::ENOENT),
            },
            Node::Ctrl(Ctrl::SockDir) => {
                // Only the number as it is listed: not "01", "+1" or " 1".
                let id: u64 = std::str::from_utf8(name)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|n: &u64| n.to_string().as_bytes() == name)
                    .ok_or(Errno::ENOENT)?;
                let d = self.eng.dir(id).ok_or(Errno::ENOENT)?;
                Ok(Node::Sock(d.generation, SockFile::Dir))
            }
            Node::Sock(generation, SockFile::Dir) => SockFile::from_name(name)
                .map(|f| Node::Sock(generation, f))
                .ok_or(Errno::ENOENT),
            Node::Ctrl(Ctrl::AbstractDir) => {
                let raw = addr::unescape(name).map_err(|_| Errno::ENOENT)?;
                let s = self.eng.find_abstract_any(&raw, c).ok_or(Errno::ENOENT)?;
                Ok(Node::Abstract(s.generation))
            }
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn entries(&self, node: Node) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        let dir = FileType::Directory;
        let reg = FileType::RegularFile;
        let mut out = Vec::new();
        match node {
            Node::Tree(ino) | Node::Connect(ino) => {
                let view = matches!(node, Node::Connect(_));
                for (child, kind, name) in self.eng.tree.readdir(ino)? {
                    let ft = match kind {
                        Kind::Dir => dir,
                        Kind::Symlink => FileType::Symlink,
                        Kind::Socket if view => reg,
                        Kind::Socket => FileType::Socket,
                    };
                    let ino = if view {
                        Node::Connect(child).ino()
                    } else {
                        child
                    };
                    out.push((ino, ft, name));
                }
                if ino == ROOT_INO && !view {
                    out.push((
                        Node::Ctrl(Ctrl::Root).ino(),
                        dir,
                        tree::CONTROL_NAME.to_vec(),
                    ));
                }
            }
            Node::Ctrl(Ctrl::Root) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((ROOT_INO, dir, b"..".to_vec()));
                for (t, n) in TYPE_NAMES {
                    out.push((
                        Node::Ctrl(Ctrl::TypeDir(t)).ino(),
                        dir,
                        n.as_bytes().to_vec(),
                    ));
                }
                out.push((Node::Ctrl(Ctrl::SockDir).ino(), dir, b"sock".to_vec()));
                out.push((
                    Node::Ctrl(Ctrl::AbstractDir).ino(),
                    dir,
                    b"abstract".to_vec(),
                ));
                out.push((Node::Connect(ROOT_INO).ino(), dir, b"connect".to_vec()));
                out.push((Node::Ctrl(Ctrl::Unix).ino(), reg, b"unix".to_vec()));
                out.push((Node::Ctrl(Ctrl::Graph).ino(), reg, b"graph".to_vec()));
                out.push((Node::Ctrl(Ctrl::Gc).ino(), reg, b"gc".to_vec()));
            }
            Node::Ctrl(Ctrl::TypeDir(t)) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                out.push((Node::Ctrl(Ctrl::Clone(t)).ino(), reg, b"clone".to_vec()));
                out.push((Node::Ctrl(Ctrl::Pair(t)).ino(), reg, b"pair".to_vec()));
            }
            Node::Ctrl(Ctrl::SockDir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                for (id, d) in self.eng.dirs() {
                    out.push((
                        Node::Sock(d.generation, SockFile::Dir).ino(),
                        dir,
                        id.to_string().into_bytes(),
                    ));
                }
            }
            Node::Sock(generation, SockFile::Dir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::SockDir).ino(), dir, b"..".to_vec()));
                for (f, n) in SockFile::FILES {
                    out.push((Node::Sock(generation, f).ino(), reg, n.as_bytes().to_vec()));
                }
            }
            Node::Ctrl(Ctrl::AbstractDir) => {
                out.push((node.ino(), dir, b".".to_vec()));
                out.push((Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()));
                let mut seen = std::collections::HashSet::new();
                for (_, _, name, s) in self.eng.abstract_names() {
                    let shown = addr::escape(&name).into_bytes();
                    if seen.insert(shown.clone()) {
                        out.push((Node::Abstract(s.generation).ino(), reg, shown));
                    }
                }
            }
            _ => return Err(Errno::ENOTDIR),
        }
        Ok(out)
    }

    /// The socket behind `.udsfs/sock/N`, with one more reference for a new
    /// handle; opening a held socketpair half or received socket adopts it.
    fn hold_sock(&self, generation: u64, adopt: bool) -> Result<Arc<Socket>, Errno> {
        let (id, d) = self
            .eng
            .dir_by_generation(generation)
            .ok_or(Errno::ENOENT)?;
        if !self.eng.try_hold(&d.sock) {
            return Err(Errno::ENOENT);
        }
        if adopt {
            self.eng.adopt(id);
            if let Some(held) = self.held_pairs.lock().remove(&d.sock.id) {
                self.eng.put(&held);
            }
        }
        Ok(d.sock)
    }

    fn ctl_handle(&self, s: Arc<Socket>, text: String) -> u64 {
        self.files.insert(OpenFile {
            sock: Some(s),
            kind: FileKind::Ctl {
                text: text.into_bytes(),
            },
            held: Mutex::new(None),
        })
    }

    fn data_handle(&self, s: Arc<Socket>) -> u64 {
        self.files.insert(OpenFile {
            sock: Some(s),
            kind: FileKind::Data,
            held: Mutex::new(None),
        })
    }

    fn snapshot(&self, text: String) -> u64 {
        self.files.insert(OpenFile {
            sock: None,
            kind: FileKind::Snapshot(text.into_bytes()),
            held: Mutex::new(None),
        })
    }

    fn gc_text(&self) -> String {
        let g = self.eng.gc.stats();
        format!(
            "inflight={}\ncollections={}\nfreed={}\nlast_duration_us={}\nwalks={}\nsockets={}\nparked={}\n",
            g.inflight,
            g.collections,
            g.freed,
            g.last_duration.as_micros(),
            g.walks,
            self.eng.live_sockets(),
            self.parks.len()
        )
    }

    /// Opens that may block: accept and the connect views.
    fn open_blocking(
        &self,
        op: OpenOp,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<(u64, FopenFlags), (Errno, Option<OpenOp>)> {
        match op {
            OpenOp::Accept { sock, uid, gid } => match self.eng.accept(&sock, w) {
                Ok(new) => {
                    self.eng.set_owner(new.id, uid, gid);
                    let text = format!("{}\n", new.id);
                    Ok((self.ctl_handle(new, text), ctl_open_flags()))
                }
                Err(e) => Err((e, Some(OpenOp::Accept { sock, uid, gid }))),
            },
            OpenOp::Connect { client, target } => {
                match self.eng.connect_to(&client, target.clone(), caller, w) {
                    Ok(()) => Ok((self.data_handle(client), socket_open_flags())),
                    Err(e) => Err((e, Some(OpenOp::Connect { client, target }))),
                }
            }
        }
    }

    /// Retries a parked request (see `park`).
    fn attempt(&self, p: Pending, caller: &Caller, w: Option<&Waiter>) -> Outcome {
        match p {
            Pending::Read { fh, size, reply } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(FErrno::EBADF);
                    return Outcome::Done;
                };
                match f.read(&self.eng, 0, size, caller, w) {
                    Ok(d) => reply.data(&d),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Read { fh, size, reply });
                    }
                    Err(e) => reply.error(ferr(e)),
                }
                Outcome::Done
            }
            Pending::Write {
                fh,
                data,
                mut done,
                report,
                reply,
            } => {
                let Some(f) = self.files.get(fh) else {
                    reply.error(FErrno::EBADF);
                    return Outcome::Done;
                };
                match f.write(&self.eng, &data, &mut done, caller, w) {
                    Ok(n) => reply.written(report.unwrap_or(n) as u32),
                    Err(Errno::EAGAIN) => {
                        return Outcome::Blocked(Pending::Write {
                            fh,
                            data,
                            done,
                            report,
                            reply,
                        });
                    }
                    Err(e) => {
                        if e == Errno::EPIPE && f.is_stream_data() {
                            sigpipe(caller.tid);
                        }
                        reply.error(ferr(e))
                    }
                }
                Outcome::Done
            }
            Pending::Open { op, reply } => match self.open_blocking(op, caller, w) {
                Ok((fh, flags)) => {
                    reply.opened(FileHandle(fh), flags);
                    Outcome::Done
                }
                Err((Errno::EAGAIN, Some(op))) => Outcome::Blocked(Pending::Open { op, reply }),
                Err((e, op)) => {
                    if let Some(OpenOp::Connect { client, .. }) = op {
                        self.eng.put(&client);
                    }
                    reply.error(ferr(e));
                    Outcome::Done
                }
            },
        }
    }

    fn park(&self, p: Pending, req: &Request) {
        self.parks.park(p, req.pid(), req.uid(), req.gid());
    }

    /// Answers every parked request and stops parking new ones (unmount).
    pub fn shutdown(&self) {
        self.parks.fail_all(FErrno::ENOTCONN);
    }
}

/// Stream sends to a closed peer raise SIGPIPE in the sending thread, as
/// unix_stream_sendmsg does.
fn sigpipe(tid: u32) {
    let Ok(tgid) = crate::procfs::Status::read(tid).map(|s| s.tgid) else {
        return;
    };
    // SAFETY: tgkill only sends a signal.
    unsafe {
        libc::syscall(libc::SYS_tgkill, tgid, tid as i32, libc::SIGPIPE);
    }
}

/// Answers a lookup-like request with the new tree node's attributes.
fn reply_entry(inner: &Inner, res: Result<tree::Attr, Errno>, reply: ReplyEntry) {
    match res.and_then(|a| inner.attr_of(Node::Tree(a.ino))) {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(ferr(e)),
    }
}

/// The tree directory a request names, or EPERM for the control tree.
fn tree_dir(ino: INodeNo) -> Result<u64, Errno> {
    match Node::from_ino(ino.0) {
        Some(Node::Tree(p)) => Ok(p),
        _ => Err(Errno::EPERM),
    }
}

fn caller(req: &Request) -> Caller {
    Caller::new(req.pid(), req.uid(), req.gid())
}

impl Filesystem for UdsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        self.inner.shutdown();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let i = &self.inner;
        let res = Node::from_ino(parent.0)
            .ok_or(Errno::ENOENT)
            .and_then(|p| i.lookup_node(p, name.as_bytes(), &caller(req)))
            .and_then(|n| Ok((i.attr_of(n)?, i.generation(n))));
        match res {
            Ok((attr, generation)) => reply.entry(&TTL, &attr, Generation(generation)),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match Node::from_ino(ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|n| self.inner.attr_of(n))
        {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let i = &self.inner;
        let Some(node) = Node::from_ino(ino.0) else {
            return reply.error(FErrno::ENOENT);
        };
        let t = |x: Option<TimeOrNow>| {
            x.map(|v| match v {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            })
        };
        let res = match node {
            Node::Tree(ino) => {
                let a = i.eng.tree.getattr(ino);
                match (size, a) {
                    (Some(_), Ok(a)) if a.kind == Kind::Dir => Err(Errno::EISDIR),
                    (Some(_), Ok(_)) => Err(Errno::EINVAL),
                    (_, Err(e)) => Err(e),
                    _ => i
                        .eng
                        .tree
                        .setattr(ino, mode, uid, gid, t(atime), t(mtime))
                        .and_then(|_| i.attr_of(node)),
                }
            }
            // Truncating a socket file (shell `>`) is allowed and does nothing.
            _ if mode.is_none() && uid.is_none() && gid.is_none() => i.attr_of(node),
            _ => Err(Errno::EPERM),
        };
        match res {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let res = match Node::from_ino(ino.0) {
            Some(Node::Tree(i)) | Some(Node::Connect(i)) => self.inner.eng.tree.readlink(i),
            _ => Err(Errno::EINVAL),
        };
        match res {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let p = match tree_dir(parent) {
            Ok(p) => p,
            Err(e) => return reply.error(ferr(e)),
        };
        if mode & libc::S_IFMT != libc::S_IFSOCK {
            log::info!("mknod of {:?}: only socket nodes may be made", name);
            return reply.error(FErrno::EPERM);
        }
        let t = &self.inner.eng.tree;
        let res = t.mknod_socket(p, name.as_bytes(), mode, req.uid(), req.gid());
        reply_entry(&self.inner, res, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let res = tree_dir(parent).and_then(|p| {
            let t = &self.inner.eng.tree;
            t.mkdir(p, name.as_bytes(), mode, req.uid(), req.gid())
        });
        reply_entry(&self.inner, res, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let res = tree_dir(parent);
        match res.and_then(|p| self.inner.eng.tree.unlink(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let res = tree_dir(parent);
        match res.and_then(|p| self.inner.eng.tree.rmdir(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        let res = tree_dir(parent).and_then(|p| {
            let t = &self.inner.eng.tree;
            t.symlink(p, link_name.as_bytes(), target, req.uid(), req.gid())
        });
        reply_entry(&self.inner, res, reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (Some(Node::Tree(p)), Some(Node::Tree(np))) =
            (Node::from_ino(parent.0), Node::from_ino(newparent.0))
        else {
            return reply.error(FErrno::EXDEV);
        };
        match self
            .inner
            .eng
            .tree
            .rename(p, name.as_bytes(), np, newname.as_bytes(), flags.bits())
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (Some(Node::Tree(i)), Some(Node::Tree(np))) =
            (Node::from_ino(ino.0), Node::from_ino(newparent.0))
        else {
            return reply.error(FErrno::EXDEV);
        };
        let res = self.inner.eng.tree.link(i, np, newname.as_bytes());
        reply_entry(&self.inner, res, reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let i = &self.inner;
        let c = caller(req);
        let Some(node) = Node::from_ino(ino.0) else {
            return reply.error(FErrno::ENOENT);
        };
        let direct = FopenFlags::FOPEN_DIRECT_IO;
        let res: Result<(u64, FopenFlags), Errno> = match node {
            Node::Ctrl(Ctrl::Clone(t)) => i.eng.try_socket(t, &c).map(|s| {
                let text = format!("{}\n", s.id);
                (i.ctl_handle(s, text), ctl_open_flags())
            }),
            Node::Ctrl(Ctrl::Pair(t)) => i.eng.try_socketpair(t, &c).map(|(a, b)| {
                let text = format!("{} {}\n", a.id, b.id);
                i.held_pairs.lock().insert(b.id, b.clone());
                let fh = i.ctl_handle(a, text);
                if let Some(f) = i.files.get(fh) {
                    *f.held.lock() = Some(b);
                }
                (fh, ctl_open_flags())
            }),
            Node::Ctrl(Ctrl::Unix) => Ok((i.snapshot(i.eng.proc_net_unix()), direct)),
            Node::Ctrl(Ctrl::Graph) => Ok((i.snapshot(i.eng.graph_dot()), direct)),
            Node::Ctrl(Ctrl::Gc) => Ok((
                i.files.insert(OpenFile {
                    sock: None,
                    kind: FileKind::Gc(i.gc_text().into_bytes()),
                    held: Mutex::new(None),
                }),
                direct,
            )),
            Node::Sock(generation, f) => {
                let id = i
                    .eng
                    .dir_by_generation(generation)
                    .map(|(id, _)| id)
                    .unwrap_or(0);
                let s = match f {
                    SockFile::Dir => Err(Errno::EISDIR),
                    SockFile::Status => i
                        .eng
                        .dir_by_generation(generation)
                        .map(|(_, d)| d.sock)
                        .ok_or(Errno::ENOENT),
                    // accept holds the listener only while it tries, so it
                    // does not adopt: that would leave nothing holding it.
                    SockFile::Accept => i.hold_sock(generation, false),
                    _ => i.hold_sock(generation, true),
                };
                match (f, s) {
                    (_, Err(e)) => Err(e),
                    (SockFile::Status, Ok(s)) => Ok((i.snapshot(i.eng.status(&s)), direct)),
                    (SockFile::Ctl, Ok(s)) => {
                        let text = format!("{id}\n");
                        Ok((i.ctl_handle(s, text), ctl_open_flags()))
                    }
                    (SockFile::Data, Ok(s)) => Ok((i.data_handle(s), socket_open_flags())),
                    (SockFile::Msg, Ok(s)) => Ok((
                        i.files.insert(OpenFile {
                            sock: Some(s),
                            kind: FileKind::Msg(
                                Mutex::new(MsgReader::default()),
                                Mutex::new(MsgWriter::new(i.parks.held.clone())),
                            ),
                            held: Mutex::new(None),
                        }),
                        socket_open_flags(),
                    )),
                    (SockFile::Accept, Ok(s)) => {
                        // The handle's reference is not kept: accept makes its own.
                        let op = OpenOp::Accept {
                            sock: s.clone(),
                            uid: req.uid(),
                            gid: req.gid(),
                        };
                        let r = i.open_blocking(op, &c, None);
                        i.eng.put(&s);
                        match r {
                            Ok(x) => Ok(x),
                            Err((Errno::EAGAIN, Some(op))) if !nonblocking(flags.0) => {
                                return i.park(Pending::Open { op, reply }, req);
                            }
                            Err((e, _)) => Err(e),
                        }
                    }
                    (SockFile::Dir, Ok(_)) => Err(Errno::EISDIR),
                }
            }
            Node::Connect(ino) | Node::Abstract(ino) => {
                let target = match node {
                    Node::Connect(_) => i.eng.find_by_node(ino, &c),
                    _ => i
                        .eng
                        .dir_by_generation(ino)
                        .map(|(_, d)| d.sock)
                        .ok_or(Errno::ECONNREFUSED),
                };
                match target {
                    Err(e) => Err(e),
                    Ok(target) => {
                        let client = match i.eng.try_socket(target.ty, &c) {
                            Ok(client) => client,
                            Err(e) => return reply.error(ferr(e)),
                        };
                        let op = OpenOp::Connect { client, target };
                        match i.open_blocking(op, &c, None) {
                            Ok(x) => Ok(x),
                            Err((Errno::EAGAIN, Some(op))) if !nonblocking(flags.0) => {
                                return i.park(Pending::Open { op, reply }, req);
                            }
                            Err((e, op)) => {
                                if let Some(OpenOp::Connect { client, .. }) = op {
                                    i.eng.put(&client);
                                }
                                Err(e)
                            }
                        }
                    }
                }
            }
            Node::Tree(_) => Err(Errno::ENXIO),
            Node::Ctrl(_) => Err(Errno::EISDIR),
        };
        match res {
            Ok((fh, fl)) => reply.opened(FileHandle(fh), fl),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        log::info!(
            "create {:?}: only directories, socket nodes and symlinks live here",
            name
        );
        reply.error(FErrno::EPERM);
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let i = &self.inner;
        let Some(f) = i.files.get(fh.0) else {
            return reply.error(FErrno::EBADF);
        };
        match f.read(&i.eng, offset, size, &caller(req), None) {
            Ok(d) => reply.data(&d),
            Err(Errno::EAGAIN) if !nonblocking(flags.0) => i.park(
                Pending::Read {
                    fh: fh.0,
                    size,
                    reply,
                },
                req,
            ),
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let i = &self.inner;
        let Some(f) = i.files.get(fh.0) else {
            return reply.error(FErrno::EBADF);
        };
        // msg files send whole records, however the writer split them.
        let (data, report) = match f.assemble(data, req.uid()) {
            None => (std::borrow::Cow::Borrowed(data), None),
            Some(Ok(recs)) if recs.is_empty() => return reply.written(data.len() as u32),
            Some(Ok(recs)) => (std::borrow::Cow::Owned(recs), Some(data.len())),
            Some(Err(e)) => {
                log::info!("msg write refused: {}", e.desc());
                return reply.error(ferr(e));
            }
        };
        let mut done = 0;
        match f.write(&i.eng, &data, &mut done, &caller(req), None) {
            Ok(n) => reply.written(report.unwrap_or(n) as u32),
            Err(Errno::EAGAIN) if !nonblocking(flags.0) => i.park(
                Pending::Write {
                    fh: fh.0,
                    data: data.into_owned(),
                    done,
                    report,
                    reply,
                },
                req,
            ),
            Err(Errno::EAGAIN) if done > 0 && report.is_none() => reply.written(done as u32),
            Err(e) => {
                if e == Errno::EPIPE && f.is_stream_data() {
                    sigpipe(req.pid());
                }
                reply.error(ferr(e))
            }
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let i = &self.inner;
        if let Some(f) = i.files.remove(fh.0) {
            if let Some(b) = f.held.lock().take()
                && let Some(held) = i.held_pairs.lock().remove(&b.id)
            {
                i.eng.put(&held);
            }
            if let Some(s) = &f.sock {
                i.eng.put(s);
            }
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
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
        let res = Node::from_ino(ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|n| self.inner.entries(n));
        match res {
            Ok(entries) => {
                for (idx, (ino, kind, name)) in
                    entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(
                        INodeNo(ino),
                        (idx + 1) as u64,
                        kind,
                        OsStr::from_bytes(&name),
                    ) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(ferr(e)),
        }
    }

    fn ioctl(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        ioctl::ioctl(&self.inner, req, fh, cmd, in_data, reply);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        // No extended attributes here; ENOSYS makes the kernel stop asking.
        reply.error(FErrno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(FErrno::ENOSYS);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        _events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let i = &self.inner;
        let Some(f) = i.files.get(fh.0) else {
            return reply.error(FErrno::EBADF);
        };
        let mask = match (&f.kind, &f.sock) {
            (FileKind::Snapshot(_) | FileKind::Gc(_), _) | (_, None) => {
                (libc::POLLIN | libc::POLLOUT) as u32
            }
            (_, Some(s)) => {
                let w: Option<Waiter> = flags
                    .contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY)
                    .then(|| Arc::new(PollWaiter(Mutex::new(Some(ph)))) as Waiter);
                i.eng.poll(s, w.as_ref())
            }
        };
        reply.poll(PollEvents::from_bits_retain(mask));
    }
}

//! The FUSE front end: a thin map from files to engine calls. Requests that
//! would block are parked (see `park`), never held on a worker thread.
//!
//! This file holds the `Filesystem` impl, which only delegates: `attr`
//! (attributes), `nodes` (lookup), `entries` (readdir), `namespace` (tree
//! changes), `open` (open dispatch and blocking opens), `io` (read, write,
//! retries), `poll`, `ioctl`.

pub mod actfor;
mod attr;
mod entries;
mod files;
pub mod inode;
mod io;
mod ioctl;
mod namespace;
mod nodes;
mod open;
mod outgoing;
pub mod park;
mod poll;
pub mod reply;
mod watchdog;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use fuser::{
    Errno as FErrno, FileHandle, Filesystem, INodeNo, KernelConfig, LockOwner, OpenFlags,
    PollEvents, PollFlags, PollNotifier, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyPoll, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use nix::errno::Errno;
use parking_lot::Mutex;

use crate::engine::{Caller, Claim, Engine, Socket};
use attr::AttrChange;
use files::Files;
use io::Retrier;
use namespace::Maker;
use park::ParkTable;
use reply::FuseReply;

fn ferr(e: Errno) -> FErrno {
    FErrno::from_i32(e as i32)
}

fn nonblocking(flags: i32) -> bool {
    flags & libc::O_NONBLOCK != 0
}

fn caller(req: &Request) -> Caller {
    let (tid, uid, gid, status) = actfor::caller_of(req.pid(), req.uid(), req.gid());
    let mut c = Caller::again(tid, uid, gid, status.map(Into::into));
    c.unique = req.unique().0;
    c
}

/// Everything the mount holds: the engine, the open files, the parked requests.
pub struct Inner {
    pub eng: Arc<Engine>,
    files: Files,
    pub parks: Arc<ParkTable>,
    /// Owner of the control tree.
    uid: u32,
    gid: u32,
    /// socketpair() second halves not yet opened, by socket number, each
    /// with the claim that keeps its directory open to its owner.
    held_pairs: Mutex<std::collections::HashMap<u64, (Arc<Socket>, Claim)>>,
}

impl Inner {
    /// The open-file layer and park table over `eng`, with no mount and no
    /// watchdog (in-process callers interrupt with `ParkTable::interrupt_threads`
    /// and time out with `ParkTable::expire`).
    pub fn new(eng: Arc<Engine>, uid: u32, gid: u32) -> Arc<Inner> {
        Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            eng,
            files: Files::default(),
            parks: ParkTable::new(Box::new(Retrier(weak.clone()))),
            uid,
            gid,
            held_pairs: Mutex::new(Default::default()),
        })
    }

    /// Answers every parked request and stops parking new ones (unmount).
    pub fn shutdown(&self) {
        self.parks.fail_all(Errno::ENOTCONN);
    }
}

pub struct UdsFs {
    inner: Arc<Inner>,
}

impl UdsFs {
    pub fn new(eng: Arc<Engine>, uid: u32, gid: u32) -> UdsFs {
        let inner = Inner::new(eng, uid, gid);
        watchdog::spawn(Arc::downgrade(&inner.parks));
        UdsFs { inner }
    }

    pub fn inner(&self) -> Arc<Inner> {
        self.inner.clone()
    }
}

fn maker(req: &Request, mode: u32) -> Maker {
    Maker {
        uid: req.uid(),
        gid: req.gid(),
        mode,
    }
}

impl Filesystem for UdsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        self.inner.shutdown();
    }

    /// A signal for the caller of request `unique`: it is answered now if
    /// parked, else as soon as it parks (it may still be on another worker
    /// thread). No EAGAIN: the kernel would send the interrupt again at once,
    /// and a worker would spin on it for as long as the request is in hand.
    fn interrupt(&self, _req: &Request, unique: fuser::RequestId) -> Result<(), FErrno> {
        self.inner.parks.interrupt_request(unique.0);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.inner
            .lookup(parent.0, name.as_bytes(), &caller(req), reply);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.inner.getattr(ino.0, &caller(req), reply);
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
        let ch = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        self.inner.setattr(ino.0, ch, reply);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.inner.readlink(ino.0, reply);
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
        let m = maker(req, mode);
        self.inner.mknod(parent.0, name.as_bytes(), m, reply);
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
        let m = maker(req, mode);
        self.inner.mkdir(parent.0, name.as_bytes(), m, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.inner.unlink(parent.0, name.as_bytes(), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.inner.rmdir(parent.0, name.as_bytes(), reply);
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
        let m = maker(req, 0);
        self.inner
            .symlink(parent.0, link_name.as_bytes(), target, m, reply);
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
        let from = (parent.0, name.as_bytes());
        let to = (newparent.0, newname.as_bytes());
        self.inner.rename(from, to, flags.bits(), reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.inner
            .link(ino.0, newparent.0, newname.as_bytes(), reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let reply = Box::new(FuseReply::Open(reply));
        self.inner.open(ino.0, flags.0, caller(req), reply);
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
        let reply = Box::new(FuseReply::Data(reply));
        self.inner
            .read(fh.0, offset, size, flags.0, caller(req), reply);
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
        let reply = Box::new(FuseReply::Write(reply));
        self.inner.write(fh.0, data, flags.0, caller(req), reply);
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
        self.inner.release(fh.0);
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

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let fh = self.inner.opendir(ino.0);
        reply.opened(FileHandle(fh), fuser::FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.inner.readdir(ino.0, fh.0, offset, &caller(req), reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.inner.release(fh.0);
        reply.ok();
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

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // Only the mount root's act_for (supervisors, fuse/actfor.rs).
        if ino.0 != fuser::INodeNo::ROOT.0 || name != actfor::XATTR {
            return reply.error(FErrno::from_i32(libc::ENOTSUP));
        }
        match actfor::set(req.pid(), req.uid(), value) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(FErrno::from_i32(e)),
        }
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
        self.inner.poll(fh.0, ph, flags, reply);
    }
}

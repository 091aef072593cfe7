//! The adapter between fuser and the front end (`front.rs`): the
//! `fuser::Filesystem` impl. The only file that sees fuser's reply types:
//! each operation turns the front end's value into its reply, and an errno
//! into `reply.error`, here and nowhere else.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno as FErrno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyOpen, ReplyPoll, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nix::errno::Errno;

use super::actfor;
use super::attr::{AttrChange, Entry};
use super::front::Inner;
use super::reply::{IoctlOut, Opened, Sink};
use super::watchdog;
use crate::engine::tree::Maker;
use crate::engine::{Caller, Engine};

/// How long the kernel may keep attributes and entries: not at all, since
/// sockets and the tree change under it.
const TTL: Duration = Duration::ZERO;

fn ferr(e: Errno) -> FErrno {
    FErrno::from_i32(e as i32)
}

fn caller(req: &Request) -> Caller {
    caller_as(req, actfor::caller_of(req.pid(), req.uid(), req.gid()))
}

fn caller_as(req: &Request, who: actfor::ActFor) -> Caller {
    let mut c = Caller::again(who.tid, who.uid, who.gid, who.status).with_checked(who.checked);
    if let Some((ns, granter)) = who.netns {
        c = c.in_netns_of(ns, granter);
    }
    c.unique = req.unique().0;
    c
}

fn maker(req: &Request, mode: u32) -> Maker {
    Maker {
        uid: req.uid(),
        gid: req.gid(),
        mode,
    }
}

fn attr(res: Result<FileAttr, Errno>, reply: ReplyAttr) {
    match res {
        Ok(a) => reply.attr(&TTL, &a),
        Err(e) => reply.error(ferr(e)),
    }
}

fn entry(res: Result<Entry, Errno>, reply: ReplyEntry) {
    match res {
        Ok(e) => reply.entry_of_node(INodeNo(e.node), &TTL, &e.attr, Generation(e.generation)),
        Err(e) => reply.error(ferr(e)),
    }
}

fn empty(res: Result<(), Errno>, reply: ReplyEmpty) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(ferr(e)),
    }
}

// The replies of the requests that may wait, as the front end's sinks.

impl Sink<Vec<u8>> for ReplyData {
    fn send(self: Box<Self>, answer: Result<Vec<u8>, Errno>) {
        match answer {
            Ok(d) => self.data(&d),
            Err(e) => self.error(ferr(e)),
        }
    }
}

impl Sink<u32> for ReplyWrite {
    fn send(self: Box<Self>, answer: Result<u32, Errno>) {
        match answer {
            Ok(n) => self.written(n),
            Err(e) => self.error(ferr(e)),
        }
    }
}

impl Sink<Opened> for ReplyOpen {
    fn send(self: Box<Self>, answer: Result<Opened, Errno>) {
        match answer {
            Ok(o) => self.opened(FileHandle(o.fh), FopenFlags::from_bits_retain(o.flags)),
            Err(e) => self.error(ferr(e)),
        }
    }
}

impl Sink<IoctlOut> for ReplyIoctl {
    fn send(self: Box<Self>, answer: Result<IoctlOut, Errno>) {
        match answer {
            Ok(IoctlOut(out)) => self.ioctl(0, &out),
            Err(e) => self.error(ferr(e)),
        }
    }
}

/// The mounted filesystem: the front end, and its watchdog running.
pub struct UdsFs {
    inner: Arc<Inner>,
}

impl UdsFs {
    pub fn new(eng: Arc<Engine>, uid: u32, gid: u32) -> UdsFs {
        actfor::start();
        let inner = Inner::new(eng, uid, gid);
        watchdog::spawn(Arc::downgrade(&inner.parks));
        UdsFs { inner }
    }

    pub fn inner(&self) -> Arc<Inner> {
        self.inner.clone()
    }
}

impl Filesystem for UdsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(udsfs_proto::record::MAX_IO as u32);
        // Releases are background requests: past this many unanswered, the
        // kernel keeps the next one back and later calls overtake it, so a
        // close would not be done when close(2) returns (fuser asks for 16;
        // the kernel caps it at max_user_bgreq for a mount by a user).
        let _ = config.set_max_background(1024);
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
        entry(
            self.inner.lookup(parent.0, name.as_bytes(), &caller(req)),
            reply,
        );
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        attr(self.inner.getattr(ino.0, &caller(req)), reply);
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
        attr(self.inner.setattr(ino.0, ch), reply);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.inner.readlink(ino.0) {
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
        let m = maker(req, mode);
        entry(self.inner.mknod(parent.0, name.as_bytes(), m), reply);
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
        let tid = caller(req).tid;
        entry(self.inner.mkdir(parent.0, name.as_bytes(), m, tid), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.inner.unlink(parent.0, name.as_bytes()), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.inner.rmdir(parent.0, name.as_bytes()), reply);
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
        let made = self
            .inner
            .symlink(parent.0, link_name.as_bytes(), target, m);
        entry(made, reply);
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
        empty(self.inner.rename(from, to, flags.bits()), reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        entry(
            self.inner.link(ino.0, newparent.0, newname.as_bytes()),
            reply,
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
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
        // Nothing to do at a close that is not the last (release is):
        // ENOSYS makes the kernel stop sending FLUSH for this mount, a round
        // trip at every close of a copy of a data file (the supervisor's
        // pidfd_getfd copies, a dup of the program's) otherwise.
        reply.error(ferr(Errno::ENOSYS));
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
        mut reply: ReplyDirectory,
    ) {
        match self.inner.readdir(ino.0, fh.0, offset, &caller(req)) {
            Ok(entries) => {
                for e in entries {
                    let name = OsStr::from_bytes(&e.name);
                    if reply.add(INodeNo(e.ino), e.cookie, e.kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(ferr(e)),
        }
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
        // A send that names the thread it is made for (a supervisor's,
        // src/fuse/actfor.rs `caller_named`): that thread's, or EPERM.
        let named = (cmd == udsfs_proto::ioctl::UDSFS_IOC_MSG)
            .then(|| udsfs_proto::ioctl::MsgHead::read_from(in_data).ok())
            .flatten()
            .and_then(|h| h.act_for());
        let c = match named {
            None => caller(req),
            Some(target) => match actfor::caller_named(req.pid(), req.uid(), req.gid(), target) {
                Ok(who) => caller_as(req, who),
                Err(e) => {
                    // (A supervisor's first send for a target comes here
                    // too, before its setxattr: debug, not info.)
                    crate::engine::log_limit::limited!(
                        debug,
                        "act_for: thread {} named thread {target} in a send without a checked grant for it: EPERM",
                        req.pid()
                    );
                    return reply.error(FErrno::from_i32(e));
                }
            },
        };
        self.inner.ioctl(fh.0, cmd, in_data, c, reply);
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
        if name.as_bytes() == udsfs_proto::mount::ROUTE_XATTR.as_bytes() {
            return empty(self.inner.eng.declare_route(value, &caller(req)), reply);
        }
        let fds = &self.inner.eng.depot.quota;
        let set = actfor::set_xattr(fds, ino.0, name.as_bytes(), req.pid(), req.uid(), value);
        empty(set, reply);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(FErrno::ENOSYS);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn poll(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        _events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let notify = flags
            .contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY)
            .then_some(ph);
        match self.inner.poll(fh.0, notify, req.pid()) {
            Ok(mask) => reply.poll(PollEvents::from_bits_retain(mask)),
            Err(e) => reply.error(ferr(e)),
        }
    }
}

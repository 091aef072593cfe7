//! Opening files: new sockets from clone and pair, the files of
//! `.udsfs/sock/N/`, and the opens that may block (accept, connect views).

use std::sync::Arc;
use std::time::Instant;

use fuser::FopenFlags;
use nix::errno::Errno;
use parking_lot::Mutex;

use super::files::{FileKind, MsgReader, MsgWriter, OpenFile};
use super::front::{Inner, nonblocking};
use super::inode::{Ctrl, Node, SockFile};
use super::park::deferring_wakeups;
use super::pending::{OpenOp, Pending};
use super::reply::{OpenReply, Opened, Sink};
use crate::engine::quota::Charge;
use crate::engine::tickets::Holder;
use crate::engine::{Addr, Caller, Claim, SockDir, Socket, Waiter};

pub(super) fn socket_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO
        | FopenFlags::FOPEN_STREAM
        | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

/// Control handles keep file offsets (a read gives "N\n" once, then EOF)
/// but, like data files, must let writers in parallel: a connect parked on
/// a full backlog would otherwise hold the inode lock of every handle made
/// from the same clone file, unkillably (the files claim a large size too).
pub(super) fn ctl_open_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

impl Inner {
    /// Gives up a socketpair's unopened half: it was opened, or its pair
    /// handle closed.
    fn drop_unopened_half(&self, id: u64) {
        let half = self.unopened_halves.lock().remove(&id);
        if let Some((s, claim)) = half {
            self.eng.release_claim(claim);
            self.eng.put(&s);
        }
    }

    /// The socket behind a file of `.udsfs/sock/N`, with one more reference
    /// for a new handle and, when its owner opens it, a claim on the
    /// directory (src/engine/access.rs); the owner's open adopts an unopened
    /// socketpair half or a received socket.
    fn hold_sock(
        &self,
        generation: u64,
        f: SockFile,
        c: &Caller,
    ) -> Result<(Arc<Socket>, Option<Claim>), Errno> {
        let (id, d) = self
            .eng
            .dir_by_generation(generation)
            .ok_or(Errno::ENOENT)?;
        if !d.refs.live() {
            return Err(if c.is_root() {
                Errno::EACCES
            } else {
                Errno::ENOENT
            });
        }
        // A path open looks the file up first; a reopen through
        // /proc/PID/fd does not, and Linux refuses it so.
        if !d.refs.take_lookup(c.tid, f.code() as u8) {
            log::debug!("socket directory {id}: open without a lookup (a reopen): ENXIO");
            return Err(Errno::ENXIO);
        }
        // accept holds the listener only while it tries: no claim, no
        // adoption (that would leave nothing holding it).
        let claim = match f {
            SockFile::Accept => None,
            _ if c.fsuid == d.uid => Some(self.eng.more_claim(id, &d).ok_or(Errno::ENOENT)?),
            _ => None,
        };
        if !self.eng.try_hold(&d.sock) {
            if let Some(cl) = claim {
                self.eng.release_claim(cl);
            }
            return Err(Errno::ENOENT);
        }
        if claim.is_some() {
            self.eng.adopt(id);
            if id == d.sock.id {
                self.drop_unopened_half(id);
            }
        }
        Ok((d.sock, claim))
    }

    fn handle(&self, s: Arc<Socket>, kind: FileKind, claim: Option<Claim>) -> u64 {
        let f = OpenFile::new(Some(s), kind);
        *f.claim.lock() = claim;
        self.files.insert(f)
    }

    fn ctl_handle(&self, s: Arc<Socket>, text: String, claim: Option<Claim>) -> u64 {
        let text = text.into_bytes();
        self.handle(s, FileKind::Ctl { text }, claim)
    }

    fn data_handle(&self, s: Arc<Socket>, claim: Option<Claim>) -> u64 {
        // Another opener of a laned socket cannot use its lane (its calls
        // on the handle wait for the way down, io.rs).
        let _ = self.eng.lane_down(&s, None);
        self.handle(s, FileKind::Data, claim)
    }

    fn msg_handle(&self, s: Arc<Socket>, claim: Option<Claim>) -> u64 {
        let _ = self.eng.lane_down(&s, None);
        let kind = FileKind::Msg(
            Mutex::new(MsgReader::new(self.listings.clone())),
            Mutex::new(MsgWriter::new(self.parks.held.clone())),
        );
        self.handle(s, kind, claim)
    }

    /// A handle on text made at open, charged to the opener until it is
    /// closed; ENOMEM past the opener's share of `listings`.
    fn listing(
        &self,
        kind: impl FnOnce(Vec<u8>) -> FileKind,
        text: Vec<u8>,
        c: &Caller,
    ) -> Result<u64, Errno> {
        let charge = self.charge_listing(text.len(), c)?;
        let mut f = OpenFile::new(None, kind(text));
        f.listing = Some(charge);
        Ok(self.files.insert(f))
    }

    /// `bytes` of listing text (a snapshot, or the entries an open
    /// `.udsfs/abstract` keeps), charged to `c` while the charge lives;
    /// ENOMEM past its share of `listings` (the quota logs the refusal).
    pub(super) fn charge_listing(&self, bytes: usize, c: &Caller) -> Result<Charge, Errno> {
        let mut charge = Charge::new(self.listings.clone());
        charge
            .set(c.fsuid, bytes as u64)
            .map_err(|_| Errno::ENOMEM)?;
        Ok(charge)
    }

    fn snapshot(&self, text: String, c: &Caller) -> Result<u64, Errno> {
        self.listing(FileKind::Snapshot, text.into_bytes(), c)
    }

    /// Whether `c` sees socket directory `d`: while its owner holds it
    /// (the kernel's permission check picks who else), and always for root,
    /// who may read any socket's status as `ss` does. Others get ENOENT, so
    /// a listing never shows what cannot be looked up.
    pub(super) fn visible(&self, d: &SockDir, c: &Caller) -> bool {
        d.refs.live() || c.is_root()
    }

    /// The socket an abstract view file stands for, if it is the one bound
    /// at its name in the caller's network namespace: a reopen through
    /// /proc/PID/fd of another namespace's file does no lookup there.
    fn abstract_target(&self, s: Arc<Socket>, c: &Caller) -> Result<Arc<Socket>, Errno> {
        let name = match s.lock().name.as_ref().map(|n| &n.addr) {
            Some(a @ Addr::Abstract(_)) => a.clone(),
            _ => return Err(Errno::ECONNREFUSED),
        };
        match self.eng.find(&name, s.ty, c.netns(), c) {
            Ok(found) if Arc::ptr_eq(&found, &s) => Ok(s),
            _ => Err(Errno::ECONNREFUSED),
        }
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
    pub(super) fn open_blocking(
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
                    let claim = self.eng.first_claim(new.id);
                    Ok((self.ctl_handle(new, text, claim), ctl_open_flags()))
                }
                Err(e) => Err((e, Some(OpenOp::Accept { sock, uid, gid }))),
            },
            OpenOp::Connect { client, target } => {
                match self.eng.connect_to(&client, target.clone(), caller, w) {
                    Ok(()) => {
                        let claim = self.eng.first_claim(client.id);
                        Ok((self.data_handle(client, claim), socket_open_flags()))
                    }
                    Err(e) => Err((e, Some(OpenOp::Connect { client, target }))),
                }
            }
        }
    }

    /// An accept on listener `s` by `c` (the open of its `accept` file or
    /// of a ticket), answered: the new socket's control handle, an error,
    /// or parked until a connection comes (a blocking open). Gives back the
    /// reference `s` came with: accept makes its own.
    fn accept_on(&self, s: Arc<Socket>, flags: i32, c: &Caller, reply: OpenReply) {
        let op = OpenOp::Accept {
            sock: s.clone(),
            uid: c.fsuid,
            gid: c.fsgid,
        };
        let r = self.open_blocking(op, c, None);
        self.eng.put(&s);
        match r {
            Ok((fh, fl)) => reply.opened(fh, fl.bits()),
            Err((Errno::EAGAIN, Some(op))) if !nonblocking(flags) => {
                self.park(Pending::Open { op, reply }, c)
            }
            Err((e, _)) => reply.error(e),
        }
    }

    /// open(2) of a file of the control tree or of the connect views.
    pub fn open(&self, ino: u64, flags: i32, c: Caller, reply: impl Sink<Opened>) {
        let reply = OpenReply::new(reply);
        deferring_wakeups(|| self.open_now(ino, flags, c, reply))
    }

    fn open_now(&self, ino: u64, flags: i32, c: Caller, reply: OpenReply) {
        let i = self;
        let Some(node) = Node::from_ino(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let direct = FopenFlags::FOPEN_DIRECT_IO;
        let res: Result<(u64, FopenFlags), Errno> = match node {
            Node::Ctrl(Ctrl::Clone(t)) => i.eng.try_socket(t, &c).map(|s| {
                let text = format!("{}\n", s.id);
                let claim = i.eng.first_claim(s.id);
                (i.ctl_handle(s, text, claim), ctl_open_flags())
            }),
            Node::Ctrl(Ctrl::Pair(t)) => i.eng.try_socketpair(t, &c).map(|(a, b)| {
                let text = format!("{} {}\n", a.id, b.id);
                // The unopened half's directory is open to its owner while
                // the pair handle holds it.
                if let Some(claim) = i.eng.first_claim(b.id) {
                    i.unopened_halves.lock().insert(b.id, (b.clone(), claim));
                } else {
                    i.eng.put(&b);
                }
                let claim = i.eng.first_claim(a.id);
                let fh = i.ctl_handle(a, text, claim);
                if let Some(f) = i.files.get(fh) {
                    *f.pair_half.lock() = Some(b);
                }
                (fh, ctl_open_flags())
            }),
            Node::Ctrl(Ctrl::Unix) => {
                let text = i.eng.proc_net_unix(c.netns());
                i.snapshot(text, &c).map(|fh| (fh, direct))
            }
            Node::Ctrl(Ctrl::Capture) => {
                i.open_capture(None, &c).map(|fh| (fh, socket_open_flags()))
            }
            Node::Sock(generation, SockFile::Capture) => i
                .open_capture(Some(generation), &c)
                .map(|fh| (fh, socket_open_flags())),
            Node::Ctrl(Ctrl::Graph) => i
                .snapshot(
                    i.eng
                        .graph_dot_for(c.is_root(), (!c.is_root()).then(|| c.netns())),
                    &c,
                )
                .map(|fh| (fh, direct)),
            Node::Ctrl(Ctrl::FdChannel) => i
                .snapshot(crate::fdchannel::published_name(), &c)
                .map(|fh| (fh, direct)),
            Node::Ctrl(Ctrl::Faults) => i
                .listing(FileKind::Faults, super::faults::listing(&i.eng, &c), &c)
                .map(|fh| (fh, direct)),
            Node::Ctrl(Ctrl::Gc) => i
                .listing(FileKind::Gc, i.gc_text().into_bytes(), &c)
                .map(|fh| (fh, direct)),
            Node::Sock(generation, f) => {
                let id = i
                    .eng
                    .dir_by_generation(generation)
                    .map(|(id, _)| id)
                    .unwrap_or(0);
                let s = match f {
                    SockFile::Dir => Err(Errno::EISDIR),
                    // A snapshot holds nothing: root may read it as `ss`
                    // reads any socket; others while the directory is theirs.
                    SockFile::Status => i
                        .eng
                        .dir_by_generation(generation)
                        .filter(|(_, d)| i.visible(d, &c))
                        .map(|(_, d)| (d.sock, None))
                        .ok_or(Errno::ENOENT),
                    _ => i.hold_sock(generation, f, &c),
                };
                match (f, s) {
                    (_, Err(e)) => Err(e),
                    (SockFile::Status, Ok((s, _))) => i
                        .snapshot(i.eng.status_for(&s, Some(c.tid)), &c)
                        .map(|fh| (fh, direct)),
                    (SockFile::Ctl, Ok((s, claim))) => {
                        let text = format!("{id}\n");
                        Ok((i.ctl_handle(s, text, claim), ctl_open_flags()))
                    }
                    (SockFile::Data, Ok((s, claim))) => {
                        Ok((i.data_handle(s, claim), socket_open_flags()))
                    }
                    (SockFile::Msg, Ok((s, claim))) => {
                        Ok((i.msg_handle(s, claim), socket_open_flags()))
                    }
                    (SockFile::Accept, Ok((s, _))) => return i.accept_on(s, flags, &c, reply),
                    (SockFile::Dir, Ok(_)) => Err(Errno::EISDIR),
                    // Opened above, without a socket reference.
                    (SockFile::Capture, Ok(_)) => Err(Errno::ENOENT),
                }
            }
            Node::Connect(ino) | Node::Abstract(ino) => {
                let target = match node {
                    Node::Connect(_) => i.eng.find_by_node(ino, &c),
                    _ => i
                        .eng
                        .dir_by_generation(ino)
                        .map(|(_, d)| d.sock)
                        .ok_or(Errno::ECONNREFUSED)
                        .and_then(|s| i.abstract_target(s, &c)),
                };
                match target {
                    Err(e) => Err(e),
                    Ok(target) => {
                        let client = match i.eng.try_socket(target.ty, &c) {
                            Ok(client) => client,
                            Err(e) => return reply.error(e),
                        };
                        let op = OpenOp::Connect { client, target };
                        match i.open_blocking(op, &c, None) {
                            Ok(x) => Ok(x),
                            Err((Errno::EAGAIN, Some(op))) if !nonblocking(flags) => {
                                return i.park(Pending::Open { op, reply }, &c);
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
            // The accept a listener's descriptor authorised, once, for the
            // thread it was given to (src/engine/tickets.rs).
            Node::Ticket(seq) => {
                let h = Holder::of(&c);
                let held = i.eng.tickets.take(seq, h, Instant::now());
                match held {
                    Ok(s) if i.eng.try_hold(&s) => return i.accept_on(s, flags, &c, reply),
                    // Closed since the ticket was given: as accept on it.
                    Ok(_) => Err(Errno::EINVAL),
                    Err(e) => Err(e),
                }
            }
            Node::Tree(_) => Err(Errno::ENXIO),
            Node::Ctrl(_) => Err(Errno::EISDIR),
        };
        match res {
            Ok((fh, fl)) => reply.opened(fh, fl.bits()),
            Err(e) => reply.error(e),
        }
    }

    /// Closing a file: drops its socket reference (and a pair's unopened half).
    pub fn release(&self, fh: u64) {
        deferring_wakeups(|| self.release_now(fh))
    }

    fn release_now(&self, fh: u64) {
        if let Some(f) = self.files.remove(fh) {
            if let Some(p) = f.poller.get() {
                p.disarm();
            }
            if let Some(b) = f.pair_half.lock().take() {
                self.drop_unopened_half(b.id);
            }
            if let Some(claim) = f.claim.lock().take() {
                self.eng.release_claim(claim);
            }
            if let Some(s) = &f.sock {
                // A data or msg file's close may be the last holder's: the
                // lane goes (a control or status handle moves no bytes; an
                // accept's control handle is released while the other end
                // may already use the lane).
                // The socket is let go after the ring's bytes are queued:
                // at once, or when a way down that waits for a busy word is
                // done (`PutAfterLane`).
                if f.byte_sock().is_some() {
                    let w: Waiter = Arc::new(PutAfterLane(self.eng.clone(), s.clone()));
                    if self.eng.lane_down(s, Some(&w)).is_err() {
                        return;
                    }
                }
                self.eng.put(s);
            }
        }
    }
}

/// A released socket's reference, let go once its lane's way down is done
/// (`Inner::release`): the ring's bytes are queued from it first.
struct PutAfterLane(Arc<crate::engine::Engine>, Arc<Socket>);

impl crate::engine::Wake for PutAfterLane {
    fn wake(self: Arc<Self>) {
        self.0.put(&self.1);
    }
}

//! Opening files: new sockets from clone and pair, the files of
//! `.udsfs/sock/N/`, and the opens that may block (accept, connect views).

use std::sync::Arc;

use fuser::FopenFlags;
use nix::errno::Errno;
use parking_lot::Mutex;

use super::files::{FileKind, MsgReader, MsgWriter, OpenFile};
use super::inode::{Ctrl, Node, SockFile};
use super::park::{OpenOp, Pending, deferring_wakeups};
use super::reply::ReplySink;
use super::{Inner, nonblocking};
use crate::engine::{Caller, Socket, Waiter};

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
        self.files.insert(OpenFile::new(
            Some(s),
            FileKind::Ctl {
                text: text.into_bytes(),
            },
        ))
    }

    fn data_handle(&self, s: Arc<Socket>) -> u64 {
        self.files.insert(OpenFile::new(Some(s), FileKind::Data))
    }

    fn msg_handle(&self, s: Arc<Socket>) -> u64 {
        self.files.insert(OpenFile::new(
            Some(s),
            FileKind::Msg(
                Mutex::new(MsgReader::default()),
                Mutex::new(MsgWriter::new(self.parks.held.clone())),
            ),
        ))
    }

    fn snapshot(&self, text: String) -> u64 {
        self.files
            .insert(OpenFile::new(None, FileKind::Snapshot(text.into_bytes())))
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

    /// open(2) of a file of the control tree or of the connect views.
    pub fn open(&self, ino: u64, flags: i32, c: Caller, reply: ReplySink) {
        deferring_wakeups(|| self.open_now(ino, flags, c, reply))
    }

    fn open_now(&self, ino: u64, flags: i32, c: Caller, reply: ReplySink) {
        let i = self;
        let Some(node) = Node::from_ino(ino) else {
            return reply.error(Errno::ENOENT);
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
            Node::Ctrl(Ctrl::FdChannel) => {
                Ok((i.snapshot(crate::fdchannel::published_name()), direct))
            }
            Node::Ctrl(Ctrl::Gc) => Ok((
                i.files
                    .insert(OpenFile::new(None, FileKind::Gc(i.gc_text().into_bytes()))),
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
                    (SockFile::Msg, Ok(s)) => Ok((i.msg_handle(s), socket_open_flags())),
                    (SockFile::Accept, Ok(s)) => {
                        // The handle's reference is not kept: accept makes its own.
                        let op = OpenOp::Accept {
                            sock: s.clone(),
                            uid: c.fsuid,
                            gid: c.fsgid,
                        };
                        let r = i.open_blocking(op, &c, None);
                        i.eng.put(&s);
                        match r {
                            Ok(x) => Ok(x),
                            Err((Errno::EAGAIN, Some(op))) if !nonblocking(flags) => {
                                return i.park(Pending::Open { op, reply }, &c);
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
            if let Some(b) = f.held.lock().take()
                && let Some(held) = self.held_pairs.lock().remove(&b.id)
            {
                self.eng.put(&held);
            }
            if let Some(s) = &f.sock {
                self.eng.put(s);
            }
        }
    }
}

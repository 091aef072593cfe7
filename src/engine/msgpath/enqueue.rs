//! The one place a message (dgram, seqpacket) or a stream chunk enters its
//! receiver's queue, for every socket type under the same rules: the
//! sender's budget is charged, passed sockets and files go in flight, the
//! taps see it, a reader is woken. A decision about a message about to be
//! queued (fault injection: refuse it, report the queue full, queue part
//! of it, drop what it passes, hold it back) is asked for in
//! `Engine::enqueue`, only when a rule stands, and made in
//! src/engine/fault/.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use crate::engine::depot::PassedFile;
use crate::engine::fault::{Outbound, SendFault};
use crate::engine::pins::Pin;
use crate::engine::skb::{message_truesize, sliced_truesize};
use crate::engine::socket::{BoundName, Msg, SockState, SockType, Socket};
use crate::engine::tap::{Origin, PassedSocket, Queued};
use crate::engine::{Caller, Engine, Result, Ucred, Waiter, Wakeups};

/// Sockets and files a message passes, checked and charged to the sending
/// user; they move into the queue with the first piece queued.
pub(crate) struct Pass<'a> {
    rights: Option<&'a mut Vec<Arc<Socket>>>,
    nonblock: Option<&'a mut Vec<bool>>,
    files: Option<&'a mut Vec<PassedFile>>,
    pub(crate) uid: u32,
    /// What the taps are told it carries (only with a tap attached).
    tap: Option<(Vec<PassedSocket>, Vec<&'static str>)>,
}

impl<'a> Pass<'a> {
    /// Linux's checks on the sending side: ETOOMANYREFS past the user's
    /// RLIMIT_NOFILE (root exempt); a heavy user waits for a running
    /// collection and many sockets in flight schedule one (both as
    /// unix_schedule_gc does).
    pub(crate) fn new(
        eng: &Engine,
        rights: Option<&'a mut Vec<Arc<Socket>>>,
        nonblock: Option<&'a mut Vec<bool>>,
        files: Option<&'a mut Vec<PassedFile>>,
        caller: &Caller,
    ) -> Result<Pass<'a>> {
        let empty = rights.as_ref().is_none_or(|r| r.is_empty())
            && files.as_ref().is_none_or(|f| f.is_empty());
        if empty {
            return Ok(Pass {
                rights: None,
                nonblock: None,
                files: None,
                uid: 0,
                tap: None,
            });
        }
        let uid = caller.scm_creds().uid;
        let user = eng.gc.user_inflight(uid);
        if !caller.is_root() && user > caller.nofile_limit() {
            return Err(Errno::ETOOMANYREFS);
        }
        if user > crate::engine::gc::INFLIGHT_SANE_USER && eng.gc.is_running() {
            eng.gc.wait_idle();
        }
        if eng.gc.total() > eng.cfg.gc_trigger {
            eng.gc.schedule();
        }
        // Their names are read now, before the receiver's lock is taken.
        let tap = eng.taps.any().then(|| {
            let socks = rights.as_deref().map_or(Vec::new(), |r| {
                r.iter()
                    .map(|s| PassedSocket {
                        id: s.id,
                        ty: s.ty,
                        name: s.lock().name.as_ref().map(|n| n.addr.clone()),
                    })
                    .collect()
            });
            let files = files
                .as_deref()
                .map_or(Vec::new(), |f| f.iter().map(PassedFile::kind).collect());
            (socks, files)
        });
        Ok(Pass {
            rights,
            nonblock,
            files,
            uid,
            tap,
        })
    }

    /// How many sockets and files it passes.
    fn count(&self) -> usize {
        self.rights.as_ref().map_or(0, |r| r.len()) + self.files.as_ref().map_or(0, |f| f.len())
    }

    /// Drops what it passes, as a receiver that can take no more
    /// descriptors does (a fault: ctrunc).
    fn drop_all(&mut self, wake: &mut Wakeups) {
        if let Some(r) = self.rights.take() {
            std::mem::take(r).into_iter().for_each(|s| wake.drop_ref(s));
        }
        if let Some(n) = self.nonblock.take() {
            n.clear();
        }
        if let Some(f) = self.files.take() {
            drop(std::mem::take(f));
        }
    }

    /// Moves the sockets and files into a message queued at `receiver`
    /// (whose lock the caller holds) and records them as in flight. Files
    /// count against the user's in-flight figure only: they cannot be part
    /// of a udsfs cycle.
    fn queue_at(
        &mut self,
        eng: &Engine,
        receiver: u64,
        st: &mut SockState,
    ) -> (Vec<(Arc<Socket>, bool)>, Vec<PassedFile>) {
        let rights = self.rights.take().map(std::mem::take).unwrap_or_default();
        let nonblock = self.nonblock.take().map(std::mem::take).unwrap_or_default();
        let files = self.files.take().map(std::mem::take).unwrap_or_default();
        let listener = st.conn.embryo_of();
        if !rights.is_empty() {
            eng.gc.add(&rights, receiver, listener, self.uid);
        }
        if !files.is_empty() {
            eng.gc.add_files(files.len(), self.uid);
        }
        let nb = nonblock.into_iter().chain(std::iter::repeat(false));
        (rights.into_iter().zip(nb).collect(), files)
    }
}

/// One send on its way: who sends, what every piece of it shares besides
/// its bytes, and the waiter to leave where room will appear.
pub(crate) struct Sending<'a> {
    pub sock: &'a Arc<Socket>,
    pub from: Option<Arc<BoundName>>,
    pub creds: Option<Ucred>,
    /// The sender's pinned pidfd for a reader with SO_PASSPIDFD; every piece
    /// shares it, so a read starting anywhere in a stream send gets it.
    pub pidfd: Option<Pin>,
    pub pass: Pass<'a>,
    pub w: Option<&'a Waiter>,
    /// Bytes of this send queued before the piece being queued (a stream
    /// send goes in pieces; the fault rules count across them).
    pub sent: usize,
    /// Where in its skb the stream piece being queued begins: 0 for a new
    /// skb; past 0 the piece fills an skb an earlier ioctl of the same call
    /// began (`SendMsg::call_off`), and is charged what the skb grew by.
    pub chunk_at: usize,
    /// The user its queued bytes count for (`Engine::queued`).
    uid: u32,
    /// Counted but never refused by `--max-queued-bytes` (`SendMsg::past_bound`).
    pub past_bound: bool,
    /// The caller as the taps see it (only with a tap attached).
    origin: Option<Origin>,
    /// The caller as the fault rules see it (only with a rule standing:
    /// without one a send never calls into src/engine/fault/).
    fault: Option<SendFault<'a>>,
}

impl<'a> Sending<'a> {
    /// No tap hears of this send (its bytes were reported already: a
    /// lane through the daemon's way down, src/engine/lane/through.rs).
    pub(crate) fn untapped(&mut self) {
        self.origin = None;
    }

    pub(crate) fn new(
        eng: &'a Engine,
        sock: &'a Arc<Socket>,
        pass: Pass<'a>,
        caller: &'a Caller,
        w: Option<&'a Waiter>,
        cut: Option<&'a Cell<bool>>,
    ) -> Sending<'a> {
        let origin = eng.taps.any().then(|| eng.origin(caller));
        Sending {
            sock,
            from: None,
            creds: None,
            pidfd: None,
            pass,
            w,
            sent: 0,
            chunk_at: 0,
            uid: caller.fsuid,
            past_bound: false,
            origin,
            fault: eng.faults.any().then(|| eng.send_fault(caller, cut)),
        }
    }
}

impl Engine {
    /// Queues `data` from `tx.sock` at `receiver` (locked as `rt`; the
    /// sender's own state when it sends to itself). `oob`: the stream's new
    /// out-of-band byte. Returns the bytes queued, which a stream sender
    /// counts as sent; a dgram or seqpacket message goes whole or not at
    /// all. An error leaves nothing charged and the passed references with
    /// the sender; EAGAIN leaves `tx.w` waiting with `rt`'s writers.
    ///
    /// The taps hear of the message here, under the receiver's lock, so
    /// its `queued` always comes before its `delivered`; a tap must not
    /// call back into the engine.
    pub(crate) fn enqueue(
        &self,
        tx: &mut Sending<'_>,
        receiver: &Socket,
        rt: &mut SockState,
        data: &[u8],
        oob: bool,
        wake: &mut Wakeups,
    ) -> Result<usize> {
        let s = tx.sock;
        let receiver_sock = receiver;
        let receiver = receiver_sock.id;
        let mut data = data;
        let mut ctrunc = false;
        let mut timed = None;
        let mut drop_passed = false;
        if self.faults.any() {
            let out = Outbound {
                sock: s,
                from: tx.from.as_deref(),
                receiver,
                len: data.len(),
                offset: tx.sent,
                refs: tx.pass.count(),
                w: tx.w,
            };
            // A rule added since the send began: asked without the caller.
            let tf = tx.fault.get_or_insert_with(SendFault::default);
            let plan = self.fault_send(tf, &out, rt)?;
            if plan.swallow {
                return Ok(data.len());
            }
            data = &data[..plan.len];
            timed = plan.timed;
            drop_passed = plan.ctrunc;
        }
        // A slicer's pieces are queued messages each: they are charged too.
        let pieces = timed
            .as_ref()
            .and_then(|(d, _)| d.slice.as_ref())
            .map_or(1, |sizes| sizes.len());
        let charge = match s.ty {
            SockType::Stream => sliced_truesize(tx.chunk_at, data.len(), pieces),
            _ => message_truesize(data.len()),
        };
        // All queues together, as memory the daemon holds: past the bound
        // (or the user's share of it) a send fails as one whose skb could
        // not be allocated does, with ENOBUFS (a stream send that queued
        // part reports that part).
        if self.cfg.max_queued_bytes != 0 {
            if tx.past_bound {
                self.queued.transfer_in(tx.uid, charge as u64);
            } else if self.queued.take(tx.uid, charge as u64).is_err() {
                return Err(Errno::ENOBUFS);
            }
        }
        if drop_passed {
            tx.pass.drop_all(wake);
            ctrunc = true;
        }
        s.wmem.fetch_add(charge, Ordering::AcqRel);
        let (rights, files) = tx.pass.queue_at(self, receiver, rt);
        let mut msg_id = 0;
        if self.taps.any()
            && let Some(origin) = tx.origin
        {
            msg_id = self.taps.next_msg_id();
            let what = (s.ty, s.id, receiver, data.len());
            // Who may open each end now: the taps that may see it.
            let openers = || [self.openers(s), self.openers_by_id(receiver)];
            self.taps.report_queued(what, openers, |[fo, to], report| {
                let from = self.endpoint_with(s.id, s.ty, tx.from.as_deref(), fo);
                let to = self.endpoint_with(receiver, s.ty, rt.name.as_deref(), to);
                // Passed references travel with the first piece only.
                let carries = !rights.is_empty() || !files.is_empty();
                let (socks, kinds) = match &tx.pass.tap {
                    Some((socks, kinds)) if carries => (&socks[..], &kinds[..]),
                    _ => (&[][..], &[][..]),
                };
                report(&Queued {
                    msg_id,
                    from: &from,
                    to: &to,
                    origin,
                    creds: tx.creds,
                    sockets: socks,
                    files: kinds,
                    oob,
                    data,
                });
            });
        }
        let msg = Msg {
            data: data.to_vec(),
            off: 0,
            from: tx.from.clone(),
            creds: tx.creds,
            sender: s.clone(),
            charge,
            charged_uid: tx.uid,
            rights,
            rights_uid: tx.pass.uid,
            oob,
            files,
            pidfd: tx.pidfd.clone(),
            msg_id,
            origin: tx.origin.unwrap_or_default(),
            ctrunc,
            piece_end: false,
            // unix_dgram_sendmsg: stamped if the receiver asks now; a
            // stream is never stamped (unix_stream_read_generic gives none).
            stamp: if s.ty != SockType::Stream && receiver_sock.options.tstamp().wanted() {
                super::stamp_now()
            } else {
                0
            },
        };
        let stream = s.ty == SockType::Stream;
        // The plain path: no rule decided on it, and nothing held back
        // that it must wait behind.
        let shown = rt.queue.msgs().len();
        let readers = if timed.is_none() && !rt.queue.holds_back() {
            rt.queue.push(msg, stream)
        } else {
            self.queue_decided(receiver, rt, msg, stream, timed)
        };
        wake.extend(readers);
        // sock_def_readable: SIGIO for each message a reader can read now
        // (a held one signals when the fault timer shows it).
        if rt.queue.msgs().len() > shown {
            wake.sigio(rt);
        }
        Ok(data.len())
    }
}

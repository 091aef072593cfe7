//! send and receive: dgram and seqpacket messages, stream chunks, the queue
//! limits and the sender budget Linux applies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::held::HeldFile;
use super::socket::{
    BoundName, Conn, Msg, RCV_SHUTDOWN, SEND_SHUTDOWN, SockState, SockType, Socket, pollbits,
};
use super::{Addr, Caller, Engine, MAX_MSG, Result, Ucred, Waiter, Wakeups};

/// What one receive returns.
#[derive(Debug, Default)]
pub struct Received {
    pub data: Vec<u8>,
    /// The message's whole length (dgram, seqpacket): more than `data` when truncated.
    pub full_len: usize,
    pub from: Option<Arc<BoundName>>,
    /// Credentials, present iff the receiver has passcred on.
    pub creds: Option<Ucred>,
    /// The sender's pid for SCM_PIDFD, present iff the receiver has passpidfd on.
    pub pidfd: Option<i32>,
    /// The sender's pinned pidfd, when it was pinned at send time (see pins.rs).
    pub pidfd_file: Option<super::pins::Pin>,
    /// That pidfd's depot tag, once delivered (`deliver_passed`).
    pub pidfd_tag: Option<u64>,
    /// Sockets received with it, each holding one reference.
    pub rights: Vec<Arc<Socket>>,
    /// Other files received with it (see held.rs).
    pub files: Vec<HeldFile>,
}

/// Room for data in a one-page skb head: SKB_MAX_HEAD(0).
const SKB_MAX_HEAD: usize = 4096 - 320;
/// Largest stream skb: one page of head plus UNIX_SKB_FRAGS_SZ (32 KiB).
const STREAM_SKB_MAX: usize = SKB_MAX_HEAD + 32768;
/// Largest linear dgram skb: SKB_MAX_ALLOC (order-2 pages less overhead).
const SKB_MAX_ALLOC: usize = 16384 - 320;
/// MAX_SKB_FRAGS pages.
const MAX_FRAG_BYTES: usize = 17 * 4096;

/// The memory an skb is charged (its truesize), which the sender's budget
/// counts: the kmalloc size class of the head (data aligned to 64 plus 320
/// bytes of shared info), 256 for the sk_buff itself, and whole pages for
/// the fragments. A small message costs 768: 278 fill 212992.
fn skb_truesize(head: usize, frags: usize) -> usize {
    (head.next_multiple_of(64) + 320).next_power_of_two() + 256 + frags.next_multiple_of(4096)
}

/// A dgram or seqpacket message: linear up to SKB_MAX_ALLOC, paged beyond.
fn message_truesize(len: usize) -> usize {
    let frags = len.saturating_sub(SKB_MAX_ALLOC).min(MAX_FRAG_BYTES);
    skb_truesize(len - frags, frags)
}

/// A stream chunk: past one page of head, the rest goes to fragments.
fn stream_truesize(size: usize) -> usize {
    let frags = if size > SKB_MAX_HEAD {
        size.min((size - SKB_MAX_HEAD).next_multiple_of(4096))
    } else {
        0
    };
    skb_truesize(size - frags, frags)
}

/// Sockets and files a message passes, checked and charged to the sending user.
pub(crate) struct Pass<'a> {
    rights: Option<(&'a mut Vec<Arc<Socket>>, &'a mut Vec<HeldFile>)>,
    pub(crate) uid: u32,
}

impl<'a> Pass<'a> {
    /// Linux's checks on the sending side: ETOOMANYREFS past the user's
    /// RLIMIT_NOFILE (root exempt); a heavy user waits for a running
    /// collection (seed 004); many sockets in flight schedule one.
    pub(crate) fn new(
        eng: &Engine,
        rights: &'a mut Vec<Arc<Socket>>,
        files: &'a mut Vec<HeldFile>,
        caller: &Caller,
    ) -> Result<Pass<'a>> {
        if rights.is_empty() && files.is_empty() {
            return Ok(Pass {
                rights: None,
                uid: 0,
            });
        }
        let uid = caller.scm_creds().uid;
        let user = eng.gc.user_inflight(uid);
        if !caller.is_root() && user > caller.nofile_limit() {
            return Err(Errno::ETOOMANYREFS);
        }
        if user > super::gc::INFLIGHT_SANE_USER && eng.gc.is_running() {
            eng.gc.wait_idle();
        }
        if eng.gc.total() > eng.cfg.gc_trigger {
            eng.gc.schedule();
        }
        Ok(Pass {
            rights: Some((rights, files)),
            uid,
        })
    }

    /// Moves the sockets and files into a message queued at `receiver`
    /// (whose lock the caller holds) and records them as in flight. Files
    /// count against the user's in-flight figure only: they cannot be part
    /// of a udsfs cycle.
    pub(crate) fn queue_at(
        &mut self,
        eng: &Engine,
        receiver: u64,
        st: &mut SockState,
    ) -> (Vec<Arc<Socket>>, Vec<HeldFile>) {
        let Some((r, f)) = self.rights.take() else {
            return Default::default();
        };
        let rights = std::mem::take(r);
        let files = std::mem::take(f);
        let listener = st.embryo.then_some(st.listener_id).flatten();
        if !rights.is_empty() {
            eng.gc.add(&rights, receiver, listener, self.uid);
        }
        eng.gc.add_files(files.len(), self.uid);
        (rights, files)
    }
}

/// Who the chunks of one stream send are from.
pub(crate) struct ChunkOrigin {
    pub from: Option<Arc<BoundName>>,
    pub creds: Option<Ucred>,
    /// The sender's pinned pidfd for a reader with SO_PASSPIDFD; every chunk
    /// shares it, so a read starting anywhere in the send gets it.
    pub pidfd: Option<super::pins::Pin>,
}

impl Engine {
    /// Queues one stream chunk at the peer (`peer_id`, locked as `pt`),
    /// charged to the sender `s`; sockets to pass go with the first.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queue_chunk(
        &self,
        s: &Arc<Socket>,
        peer_id: u64,
        pt: &mut SockState,
        data: Vec<u8>,
        origin: &ChunkOrigin,
        pass: &mut Pass<'_>,
        oob: bool,
    ) {
        let charge = stream_truesize(data.len());
        s.wmem.fetch_add(charge, Ordering::AcqRel);
        pt.rcvq_bytes += data.len();
        let (rights, files) = pass.queue_at(self, peer_id, pt);
        pt.rcvq.push_back(Msg {
            data,
            off: 0,
            from: origin.from.clone(),
            creds: origin.creds,
            sender: s.clone(),
            charge,
            rights,
            rights_uid: pass.uid,
            files,
            pidfd: origin.pidfd.clone(),
            oob,
        });
    }

    /// send(), sendto(): `send_msg` without sockets to pass.
    pub fn send(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        creds: Option<Ucred>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        self.send_msg(s, data, to, creds, &mut Vec::new(), caller, w)
    }

    /// sendmsg() passing sockets and other files: what was not queued stays
    /// in `rights` and `files`.
    #[allow(clippy::too_many_arguments)]
    pub fn send_passing(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        creds: Option<Ucred>,
        rights: &mut Vec<Arc<Socket>>,
        files: &mut Vec<HeldFile>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        let out = Pass::new(self, rights, files, caller)?;
        match s.ty {
            SockType::Stream => self.stream_send(s, data, to, creds, out, caller, w, false),
            SockType::Dgram => self.dgram_send(s, data, to, creds, out, caller, w),
            SockType::Seqpacket => {
                let peer = {
                    let mut st = s.lock();
                    if let Some(e) = st.err.take() {
                        return Err(e);
                    }
                    match &st.conn {
                        Conn::Connected(p) => p.clone(),
                        _ => return Err(Errno::ENOTCONN),
                    }
                };
                // From here seqpacket takes the dgram path, which autobinds.
                self.autobind_if_passcred(s, caller)?;
                self.message_send(s, data, Some(peer), creds, out, caller, w)
            }
        }
    }

    /// sendmsg(). Stream sends may be partial; EAGAIN means nothing was sent
    /// and `w` waits for room. `rights` (references the caller holds) move
    /// into the queue when the message is queued; otherwise they stay.
    #[allow(clippy::too_many_arguments)]
    pub fn send_msg(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        creds: Option<Ucred>,
        rights: &mut Vec<Arc<Socket>>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        self.send_passing(s, data, to, creds, rights, &mut Vec::new(), caller, w)
    }

    fn max_message(&self, sndbuf: usize) -> usize {
        sndbuf.saturating_sub(32).min(MAX_MSG)
    }

    #[allow(clippy::too_many_arguments)]
    fn dgram_send(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        creds: Option<Ucred>,
        pass: Pass<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        self.autobind_if_passcred(s, caller)?;
        let sndbuf = s.lock().sndbuf;
        if data.len() > self.max_message(sndbuf) {
            return Err(Errno::EMSGSIZE);
        }
        let other = match to {
            Some(a) => Some(self.find(a, SockType::Dgram, caller)?),
            None => None,
        };
        self.message_send(s, data, other, creds, pass, caller, w)
    }

    /// The dgram/seqpacket path (unix_dgram_sendmsg). `other` is the target;
    /// None means the connected peer.
    #[allow(clippy::too_many_arguments)]
    fn message_send(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        other: Option<Arc<Socket>>,
        explicit: Option<Ucred>,
        pass: Pass<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        let (other, from, sender_passcred) = {
            let mut st = s.lock();
            if data.len() > self.max_message(st.sndbuf) {
                return Err(Errno::EMSGSIZE);
            }
            if let Some(e) = st.err.take() {
                return Err(e);
            }
            if st.shutdown & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            if s.wmem() >= st.sndbuf {
                if let Some(w) = w {
                    st.writers.add(w.clone());
                }
                return Err(Errno::EAGAIN);
            }
            let other = match other {
                Some(o) => o,
                None => Socket::peer(&st).cloned().ok_or(Errno::ENOTCONN)?,
            };
            (other, st.name.clone(), st.may_passcred())
        };
        let creds = self.creds_for(explicit, sender_passcred, &other, caller);
        let pidfd = self.sender_pidfd(creds, &other)?;
        let charge = message_truesize(data.len());
        let mut wake = Wakeups::new();
        {
            let mut ot = if other.id == s.id {
                None
            } else {
                Some(other.lock())
            };
            let dead = ot.as_ref().is_some_and(|o| o.dead);
            if dead {
                drop(ot);
                return Err(self.peer_died(s, &other));
            }
            let mut own = None;
            let ot_ref: &mut SockState = match &mut ot {
                Some(g) => g,
                None => &mut *own.insert(s.lock()),
            };
            let other_peer_is_us = Socket::peer(ot_ref).map(|p| p.id == s.id);
            if other_peer_is_us == Some(false) {
                return Err(Errno::EPERM);
            }
            if ot_ref.shutdown & RCV_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            if s.ty == SockType::Dgram
                && other_peer_is_us != Some(true)
                && ot_ref.rcvq.len() > ot_ref.max_dgram_qlen
            {
                if let Some(w) = w {
                    ot_ref.writers.add(w.clone());
                }
                return Err(Errno::EAGAIN);
            }
            s.wmem.fetch_add(charge, Ordering::AcqRel);
            ot_ref.rcvq_bytes += data.len();
            let mut pass = pass;
            let (rights, files) = pass.queue_at(self, other.id, ot_ref);
            ot_ref.rcvq.push_back(Msg {
                data: data.to_vec(),
                off: 0,
                from,
                creds,
                sender: s.clone(),
                charge,
                rights,
                rights_uid: pass.uid,
                oob: false,
                files,
                pidfd,
            });
            // One message, one parked reader (no thundering herd).
            wake.extend(ot_ref.readers.take_for_one());
        }
        self.finish(wake);
        Ok(data.len())
    }

    /// A send found its target dead: a dgram socket connected to it is
    /// disconnected (ECONNREFUSED, later sends ENOTCONN); seqpacket sees EPIPE.
    fn peer_died(&self, s: &Arc<Socket>, other: &Arc<Socket>) -> Errno {
        if s.ty == SockType::Seqpacket {
            return Errno::EPIPE;
        }
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            if Socket::peer(&st).is_some_and(|p| p.id == other.id) {
                st.conn = Conn::Unconnected;
                self.dgram_disconnected(s.id, &mut st, &mut wake);
            }
        }
        self.finish(wake);
        Errno::ECONNREFUSED
    }

    /// The seed-002 rule: credentials travel only if someone asked for them.
    fn creds_for(
        &self,
        explicit: Option<Ucred>,
        sender_passcred: bool,
        other: &Socket,
        caller: &Caller,
    ) -> Option<Ucred> {
        if explicit.is_some() {
            return explicit;
        }
        let wanted = sender_passcred || {
            let ot = other.lock();
            ot.may_passcred() || ot.embryo
        };
        wanted.then(|| caller.scm_creds())
    }

    /// unix_stream_sendmsg; with `oob` the last byte of `data` goes in a
    /// chunk of its own, the receiver's OOB byte (queue_oob).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn stream_send(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        explicit: Option<Ucred>,
        mut pass: Pass<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
        oob: bool,
    ) -> Result<usize> {
        let (peer, sndbuf, from, sender_passcred) = {
            let mut st = s.lock();
            if to.is_some() {
                return Err(match st.conn {
                    Conn::Connected(_) => Errno::EISCONN,
                    _ => Errno::EOPNOTSUPP,
                });
            }
            let peer = Socket::peer(&st).cloned().ok_or(Errno::ENOTCONN)?;
            // A writer that already waited for room is inside
            // sock_alloc_send_pskb, which reports a pending error (a reader
            // that closed with data unread: ECONNRESET) before the shutdown.
            if w.is_some()
                && let Some(e) = st.err.take()
            {
                return Err(e);
            }
            if st.shutdown & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            (peer, st.sndbuf, st.name.clone(), st.may_passcred())
        };
        let (data, oob_byte) = match data.split_last() {
            Some((last, body)) if oob => (body, Some(*last)),
            _ if oob => return Err(Errno::EOPNOTSUPP),
            _ => (data, None),
        };
        if data.is_empty() && oob_byte.is_none() {
            return Ok(0);
        }
        let creds = self.creds_for(explicit, sender_passcred, &peer, caller);
        let origin = ChunkOrigin {
            from,
            creds,
            pidfd: self.sender_pidfd(creds, &peer)?,
        };
        // unix_stream_sendmsg: at most half the send buffer per skb, and at
        // most one page of head plus 32 KiB of fragments.
        let max_chunk = (sndbuf >> 1).saturating_sub(64).clamp(1, STREAM_SKB_MAX);
        let mut sent = 0;
        let mut wake = Wakeups::new();
        while sent < data.len() {
            {
                let mut st = s.lock();
                if s.wmem() >= st.sndbuf {
                    if sent == 0 {
                        if let Some(w) = w {
                            st.writers.add(w.clone());
                        }
                        drop(st);
                        self.finish(wake);
                        return Err(Errno::EAGAIN);
                    }
                    break;
                }
            }
            let n = (data.len() - sent).min(max_chunk);
            let mut pt = peer.lock();
            if pt.dead || pt.shutdown & RCV_SHUTDOWN != 0 {
                drop(pt);
                self.finish(wake);
                return if sent > 0 {
                    Ok(sent)
                } else {
                    Err(Errno::EPIPE)
                };
            }
            // Passed sockets travel with the first chunk.
            let chunk = data[sent..sent + n].to_vec();
            self.queue_chunk(s, peer.id, &mut pt, chunk, &origin, &mut pass, false);
            wake.extend(pt.readers.take());
            sent += n;
        }
        if let Some(b) = oob_byte.filter(|_| sent == data.len()) {
            match self.queue_oob(s, &peer, b, &origin, &mut pass, &mut wake) {
                Ok(()) => sent += 1,
                Err(e) if sent == 0 => {
                    self.finish(wake);
                    return Err(e);
                }
                Err(_) => {}
            }
        }
        self.finish(wake);
        Ok(sent)
    }

    /// recv(): one message (dgram, seqpacket; truncated to `maxlen`) or up to
    /// `maxlen` stream bytes. EAGAIN means nothing is there and `w` waits.
    pub fn recv(&self, s: &Arc<Socket>, maxlen: usize, w: Option<&Waiter>) -> Result<Received> {
        let mut wake = Wakeups::new();
        let res = {
            let mut st = s.lock();
            match s.ty {
                SockType::Stream => self.stream_read(s.id, &mut st, maxlen, false, &mut wake),
                _ => self.message_recv(s.ty, s.id, &mut st, maxlen, w.is_some(), &mut wake),
            }
            .inspect_err(|e| {
                if *e == Errno::EAGAIN
                    && let Some(w) = w
                {
                    st.readers.add(w.clone());
                }
            })
        };
        self.finish(wake);
        res
    }

    fn message_recv(
        &self,
        ty: SockType,
        receiver: u64,
        st: &mut SockState,
        maxlen: usize,
        blocking: bool,
        wake: &mut Wakeups,
    ) -> Result<Received> {
        if ty == SockType::Seqpacket && !matches!(st.conn, Conn::Connected(_)) {
            return Err(Errno::ENOTCONN);
        }
        if let Some(e) = st.err.take() {
            return Err(e);
        }
        let Some(m) = st.rcvq.pop_front() else {
            // A shut-down seqpacket reads EOF; a dgram reader only once it
            // would wait (__skb_wait_for_more_packets), never when non-blocking.
            if st.shutdown & RCV_SHUTDOWN != 0 && (ty == SockType::Seqpacket || blocking) {
                return Ok(Received::default());
            }
            return Err(Errno::EAGAIN);
        };
        let mut m = m;
        st.rcvq_bytes -= m.data.len();
        super::stream_read::peek_off_back(st, m.data.len());
        wake.extend(st.writers.take());
        self.uncharge(&m, wake);
        let rights = self.take_rights(receiver, &mut m);
        let files = self.take_files(&mut m);
        let full_len = m.data.len();
        let mut data = m.data;
        data.truncate(maxlen);
        Ok(Received {
            data,
            full_len,
            from: m.from,
            creds: st.passcred.then(|| m.creds.unwrap_or(Ucred::NONE)),
            pidfd: st.passpidfd.then(|| m.creds.unwrap_or(Ucred::NONE).pid),
            pidfd_file: m.pidfd.take().filter(|_| st.passpidfd),
            pidfd_tag: None,
            rights,
            files,
        })
    }

    /// A parked reader of `s` was answered another way (a signal): if it
    /// was the one woken for a message still queued, wake the next one.
    pub fn pass_wakeup(&self, s: &Arc<Socket>) {
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            if !st.rcvq.is_empty() {
                wake.extend(st.readers.take_for_one());
            }
        }
        self.finish(wake);
    }

    /// The poll mask of `s` (unix_poll, unix_dgram_poll); `w` is woken at the
    /// next change that may alter it.
    pub fn poll(&self, s: &Arc<Socket>, w: Option<&Waiter>) -> u32 {
        let (mut mask, full_peer) = {
            let mut st = s.lock();
            let mut mask = 0;
            if st.err.is_some() {
                mask |= pollbits::ERR;
            }
            if st.shutdown == super::socket::SHUTDOWN_MASK {
                mask |= pollbits::HUP;
            }
            if st.shutdown & RCV_SHUTDOWN != 0 {
                mask |= pollbits::RDHUP | pollbits::IN;
            }
            let readable = match &st.conn {
                Conn::Listening { pending, .. } => !pending.is_empty(),
                _ => !st.rcvq.is_empty(),
            };
            if readable {
                mask |= pollbits::IN;
            }
            if st.oob_pending() {
                mask |= pollbits::PRI;
            }
            if s.ty.connection_oriented() && matches!(st.conn, Conn::Unconnected) {
                mask |= pollbits::HUP;
            }
            if s.writable(&st) {
                mask |= pollbits::OUT;
            }
            if let Some(w) = w {
                st.readers.add(w.clone());
                st.writers.add(w.clone());
            }
            let peer = (s.ty == SockType::Dgram)
                .then(|| Socket::peer(&st).cloned())
                .flatten();
            (mask, peer)
        };
        // A dgram socket is not writable while its one-way peer's queue is full.
        if let Some(p) = full_peer.filter(|p| p.id != s.id) {
            let mut pt = p.lock();
            let mutual = Socket::peer(&pt).is_some_and(|x| x.id == s.id);
            if !mutual && pt.rcvq.len() > pt.max_dgram_qlen {
                mask &= !pollbits::OUT;
                if let Some(w) = w {
                    pt.writers.add(w.clone());
                }
            }
        }
        mask
    }
}

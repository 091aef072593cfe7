//! send and receive: dgram and seqpacket messages, stream chunks, the queue
//! limits and the sender budget Linux applies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

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
    /// Sockets received with it, each holding one reference.
    pub rights: Vec<Arc<Socket>>,
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

/// Sockets a message passes, checked and charged to the sending user.
pub(crate) struct Pass<'a> {
    rights: Option<&'a mut Vec<Arc<Socket>>>,
    uid: u32,
}

impl<'a> Pass<'a> {
    /// Linux's checks on the sending side: ETOOMANYREFS past the user's
    /// RLIMIT_NOFILE (root exempt); a heavy user waits for a running
    /// collection (seed 004); many sockets in flight schedule one.
    fn new(eng: &Engine, rights: &'a mut Vec<Arc<Socket>>, caller: &Caller) -> Result<Pass<'a>> {
        if rights.is_empty() {
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
            rights: Some(rights),
            uid,
        })
    }

    /// Moves the sockets into a message queued at `receiver` (whose lock
    /// the caller holds) and records them as in flight.
    fn queue_at(&mut self, eng: &Engine, receiver: u64, st: &mut SockState) -> Vec<Arc<Socket>> {
        let Some(r) = self.rights.take() else {
            return Vec::new();
        };
        let rights = std::mem::take(r);
        let listener = st.embryo.then_some(st.listener_id).flatten();
        eng.gc.add(&rights, receiver, listener, self.uid);
        rights
    }
}

impl Engine {
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
        let out = Pass::new(self, rights, caller)?;
        match s.ty {
            SockType::Stream => self.stream_send(s, data, to, creds, out, caller, w),
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
                self.autobind_if_passcred(s)?;
                self.message_send(s, data, Some(peer), creds, out, caller, w)
            }
        }
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
        self.autobind_if_passcred(s)?;
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
            (other, st.name.clone(), st.passcred)
        };
        let creds = self.creds_for(explicit, sender_passcred, &other, caller);
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
            let rights = pass.queue_at(self, other.id, ot_ref);
            ot_ref.rcvq.push_back(Msg {
                data: data.to_vec(),
                off: 0,
                from,
                creds,
                sender: s.clone(),
                charge,
                rights,
                rights_uid: pass.uid,
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
            ot.passcred || ot.embryo
        };
        wanted.then(|| caller.scm_creds())
    }

    #[allow(clippy::too_many_arguments)]
    fn stream_send(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        explicit: Option<Ucred>,
        mut pass: Pass<'_>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<usize> {
        let (peer, sndbuf, from, sender_passcred) = {
            let st = s.lock();
            if to.is_some() {
                return Err(match st.conn {
                    Conn::Connected(_) => Errno::EISCONN,
                    _ => Errno::EOPNOTSUPP,
                });
            }
            let peer = Socket::peer(&st).cloned().ok_or(Errno::ENOTCONN)?;
            if st.shutdown & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            (peer, st.sndbuf, st.name.clone(), st.passcred)
        };
        if data.is_empty() {
            return Ok(0);
        }
        let creds = self.creds_for(explicit, sender_passcred, &peer, caller);
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
            let charge = stream_truesize(n);
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
            s.wmem.fetch_add(charge, Ordering::AcqRel);
            pt.rcvq_bytes += n;
            // Passed sockets travel with the first chunk.
            let rights = pass.queue_at(self, peer.id, &mut pt);
            pt.rcvq.push_back(Msg {
                data: data[sent..sent + n].to_vec(),
                off: 0,
                from: from.clone(),
                creds,
                sender: s.clone(),
                charge,
                rights,
                rights_uid: pass.uid,
            });
            wake.extend(pt.readers.take());
            sent += n;
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
                SockType::Stream => self.stream_recv(s.id, &mut st, maxlen, &mut wake),
                _ => self.message_recv(s.ty, s.id, &mut st, maxlen, &mut wake),
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
        wake: &mut Wakeups,
    ) -> Result<Received> {
        if ty == SockType::Seqpacket && !matches!(st.conn, Conn::Connected(_)) {
            return Err(Errno::ENOTCONN);
        }
        if let Some(e) = st.err.take() {
            return Err(e);
        }
        let Some(m) = st.rcvq.pop_front() else {
            if ty == SockType::Seqpacket && st.shutdown & RCV_SHUTDOWN != 0 {
                return Ok(Received::default());
            }
            return Err(Errno::EAGAIN);
        };
        let mut m = m;
        st.rcvq_bytes -= m.data.len();
        wake.extend(st.writers.take());
        self.uncharge(&m, wake);
        let rights = self.take_rights(receiver, &mut m);
        let full_len = m.data.len();
        let mut data = m.data;
        data.truncate(maxlen);
        Ok(Received {
            data,
            full_len,
            from: m.from,
            creds: st.passcred.then(|| m.creds.unwrap_or(Ucred::NONE)),
            rights,
        })
    }

    fn stream_recv(
        &self,
        receiver: u64,
        st: &mut SockState,
        maxlen: usize,
        wake: &mut Wakeups,
    ) -> Result<Received> {
        match st.conn {
            Conn::Connected(_) => {}
            _ => return Err(Errno::EINVAL),
        }
        let mut out = Received::default();
        let mut first_creds = None;
        while out.data.len() < maxlen {
            let Some(m) = st.rcvq.front_mut() else { break };
            if out.data.is_empty() {
                first_creds = Some(m.creds);
                out.from = m.from.clone();
            } else if st.passcred && first_creds != Some(m.creds) {
                // With passcred on, one read never spans different credentials.
                break;
            }
            let carries = !m.rights.is_empty();
            if carries && !out.rights.is_empty() {
                break;
            }
            let n = (maxlen - out.data.len()).min(m.remaining());
            out.data.extend_from_slice(&m.data[m.off..m.off + n]);
            m.off += n;
            st.rcvq_bytes -= n;
            // Passed sockets come with the first read that touches their chunk.
            out.rights.extend(self.take_rights(receiver, m));
            if m.remaining() == 0 {
                // The sender's budget grows; the receiver's own writability
                // does not change (its budget is its own sends).
                let m = st.rcvq.pop_front().expect("front exists");
                self.uncharge(&m, wake);
            }
            if carries {
                // Nothing after a chunk that carried sockets joins this read.
                break;
            }
        }
        if out.data.is_empty() && maxlen > 0 {
            if let Some(e) = st.err.take() {
                return Err(e);
            }
            if st.shutdown & RCV_SHUTDOWN == 0 {
                return Err(Errno::EAGAIN);
            }
        }
        out.full_len = out.data.len();
        if st.passcred {
            out.creds = Some(first_creds.flatten().unwrap_or(Ucred::NONE));
        }
        Ok(out)
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

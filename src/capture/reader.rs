//! One capture reader: a tap on the engine that keeps what its reader may
//! see in a bounded buffer, and the pcapng stream it reads. The tap side
//! never waits for the reader: a full buffer drops the record and counts it
//! against its conversation, reported with the next record of it (or alone,
//! once the buffer is empty) as a drop count and interface statistics.
//!
//! What a reader is shown is what its user may see and nothing else: the
//! messages and events of sockets its user may open when they happen
//! (`Endpoint::openers`, decided in src/engine/access.rs), numbered by the
//! reader itself (packet ids, the ids in its notes), with drop counts and
//! interface statistics counting only those; so no number in the stream
//! counts another user's traffic.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;

use nix::errno::Errno;
use parking_lot::Mutex;

use super::budget::Share;
use super::convs::Convs;
use super::encode::Encoder;
use super::filter::{Filter, MAX_LINE, Subject};
use super::record::{Body, Conv, Meta, NoteKind, Passed, Record, Side, now_ns};
use crate::engine::SockType;
use crate::engine::tap::{Delivered, Endpoint, Event, Origin, Queued, Tap};
use crate::engine::wait::{WaitList, Waiter};

/// Whose messages a reader may see.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub uid: u32,
    /// Root: everything.
    pub all: bool,
}

impl Access {
    /// A message is visible if the reader's user may open its sending or
    /// its receiving socket when it is sent (the engine's decision,
    /// `Engine::openers`), an event if they may open its socket.
    fn sees(&self, ends: &[&Endpoint]) -> bool {
        self.all || ends.iter().any(|e| e.openers.contains(&self.uid))
    }
}

/// Message ids of the last this many messages shown are remembered, for
/// the notes of their reads; a read of an older one is noted without it.
const RECENT_IDS: usize = 1024;

struct TapSide {
    filter: Arc<Filter>,
    required: u8,
    convs: Convs,
    queue: VecDeque<Record>,
    bytes: usize,
    /// Records lost and not yet reported, by conversation.
    lost: HashMap<u64, (Arc<Conv>, u64)>,
    lost_total: u64,
    kept_total: u64,
    /// A parked read or a poll waiting for the buffer to fill.
    waiters: WaitList,
    /// A record was lost since the reader last took the buffer.
    full: bool,
    /// Messages this reader was shown (kept or lost): its own ids.
    numbered: u64,
    /// The engine's ids of the last RECENT_IDS messages kept, with ours.
    ids: HashMap<u64, u64>,
    recent: VecDeque<u64>,
}

impl TapSide {
    /// Our id for the next message shown, remembered against the engine's
    /// `msg_id` when `keep`.
    fn number(&mut self, msg_id: u64, keep: bool) -> u64 {
        self.numbered += 1;
        if keep && msg_id != 0 {
            if self.recent.len() >= RECENT_IDS
                && let Some(old) = self.recent.pop_front()
            {
                self.ids.remove(&old);
            }
            self.recent.push_back(msg_id);
            self.ids.insert(msg_id, self.numbered);
        }
        self.numbered
    }
}

struct Output {
    /// Made at the first read, from the filter then set.
    encoder: Option<Encoder>,
    buf: Vec<u8>,
    pos: usize,
    /// Filter text written without its newline yet.
    partial: String,
}

pub struct Reader {
    access: Access,
    /// `.udsfs/sock/N/capture`: socket N's conversations only.
    only: Option<u64>,
    tap: Mutex<TapSide>,
    out: Mutex<Output>,
    /// The buffer's part of its user's share; locked after `out`.
    share: Mutex<Share>,
}

impl Reader {
    /// ENOBUFS: the user's captures hold all they may (`Share`).
    pub fn new(access: Access, only: Option<u64>, defaults: Filter) -> Result<Arc<Reader>, Errno> {
        let mut filter = defaults;
        filter.sockets.extend(only);
        let mut share = Share::new((!access.all).then_some(access.uid))?;
        share.hold(filter.buffer)?;
        Ok(Arc::new(Reader {
            access,
            only,
            tap: Mutex::new(TapSide {
                required: filter.required(),
                filter: Arc::new(filter),
                convs: Convs::default(),
                queue: VecDeque::new(),
                bytes: 0,
                lost: HashMap::new(),
                lost_total: 0,
                kept_total: 0,
                waiters: WaitList::default(),
                full: false,
                numbered: 0,
                ids: HashMap::new(),
                recent: VecDeque::new(),
            }),
            out: Mutex::new(Output {
                encoder: None,
                buf: Vec::new(),
                pos: 0,
                partial: String::new(),
            }),
            share: Mutex::new(share),
        }))
    }

    /// Filter lines written before the first read (filter.rs). The capture
    /// starts again with them: what was buffered before is dropped.
    /// EBUSY once reading began; EINVAL for a line it does not know.
    pub fn configure(&self, data: &[u8]) -> Result<usize, Errno> {
        let mut o = self.out.lock();
        if o.encoder.is_some() {
            return Err(Errno::EBUSY);
        }
        let text = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
        // A refused write leaves what earlier writes left unfinished.
        let mut all = o.partial.clone();
        all.push_str(text);
        let (whole, rest) = match all.rfind('\n') {
            Some(i) => (&all[..=i], &all[i + 1..]),
            None => ("", &all[..]),
        };
        // Text without a newline waits for the rest of its line; it may not
        // grow without bound.
        if rest.len() > MAX_LINE {
            log::info!(
                "capture: unfinished filter line of {} bytes (at most {MAX_LINE})",
                rest.len()
            );
            return Err(Errno::EINVAL);
        }
        let mut f = (*self.tap.lock().filter).clone();
        f.lines(whole)?;
        self.share.lock().hold(f.buffer)?;
        o.partial = rest.to_string();
        drop(o);
        self.set_filter(f);
        Ok(data.len())
    }

    fn set_filter(&self, mut f: Filter) {
        if let Some(n) = self.only
            && !f.sockets.contains(&n)
        {
            f.sockets.push(n);
        }
        let mut t = self.tap.lock();
        t.required = f.required();
        t.filter = Arc::new(f);
        t.convs = Convs::default();
        t.queue.clear();
        t.bytes = 0;
        t.lost.clear();
        t.full = false;
        t.numbered = 0;
        t.ids.clear();
        t.recent.clear();
    }

    /// Records kept and lost so far.
    pub fn counts(&self) -> (u64, u64) {
        let t = self.tap.lock();
        (t.kept_total, t.lost_total)
    }

    fn start(&self, o: &mut Output) {
        if o.encoder.is_some() {
            return;
        }
        let rest = std::mem::take(&mut o.partial);
        if !rest.trim().is_empty() {
            let mut f = (*self.tap.lock().filter).clone();
            match f
                .lines(&rest)
                .and_then(|()| self.share.lock().hold(f.buffer))
            {
                Ok(()) => self.set_filter(f),
                Err(_) => log::info!("capture: unfinished filter line ignored"),
            }
        }
        let f = self.tap.lock().filter.clone();
        o.encoder = Some(Encoder::new(f));
    }

    /// Up to `size` bytes of the stream. EAGAIN when nothing is there; `w`
    /// is woken when something comes. The first read gives the section
    /// header at once, so a live reader knows the stream began.
    pub fn read(&self, size: usize, w: Option<&Waiter>) -> Result<Vec<u8>, Errno> {
        let mut o = self.out.lock();
        self.start(&mut o);
        if o.pos >= o.buf.len() {
            o.buf.clear();
            o.pos = 0;
            let (records, lost) = {
                let mut t = self.tap.lock();
                if t.queue.is_empty()
                    && t.lost.is_empty()
                    && o.encoder.as_ref().is_some_and(|e| e.started())
                {
                    if let Some(w) = w {
                        t.waiters.add(w.clone());
                    }
                    return Err(Errno::EAGAIN);
                }
                t.bytes = 0;
                t.full = false;
                (std::mem::take(&mut t.queue), std::mem::take(&mut t.lost))
            };
            let Output { encoder, buf, .. } = &mut *o;
            let enc = encoder.as_mut().expect("started above");
            enc.begin(buf);
            for r in &records {
                enc.encode(r, buf);
            }
            let ts_ns = now_ns();
            let mut lost: Vec<_> = lost.into_values().collect();
            lost.sort_by_key(|(c, _)| c.number);
            for (conv, drops) in lost {
                let r = Record {
                    ts_ns,
                    conv,
                    msg_id: 0,
                    drops,
                    body: Body::Drops,
                };
                enc.encode(&r, buf);
            }
        }
        let end = o.pos.saturating_add(size).min(o.buf.len());
        let out = o.buf[o.pos..end].to_vec();
        o.pos = end;
        Ok(out)
    }

    /// Whether a read would return at once; `w` is woken when that changes.
    pub fn readable(&self, w: Option<&Waiter>) -> bool {
        let o = self.out.lock();
        if o.pos < o.buf.len() || o.encoder.as_ref().is_none_or(|e| !e.started()) {
            return true;
        }
        let mut t = self.tap.lock();
        let ready = !t.queue.is_empty() || !t.lost.is_empty();
        if !ready && let Some(w) = w {
            t.waiters.add(w.clone());
        }
        ready
    }

    /// Keeps `r`, or counts it lost when the buffer is full; the waiters
    /// to wake once the lock is gone.
    fn keep(t: &mut TapSide, mut r: Record) -> Vec<Waiter> {
        let cost = r.cost();
        if t.bytes + cost > t.filter.buffer {
            return Self::lose(t, &r.conv);
        }
        r.drops = t.lost.remove(&r.conv.number).map_or(0, |(_, n)| n);
        t.kept_total += 1;
        t.bytes += cost;
        let was_empty = t.queue.is_empty();
        t.queue.push_back(r);
        if was_empty {
            t.waiters.take()
        } else {
            Vec::new()
        }
    }

    /// Counts a record of `conv` lost; the waiters to wake.
    fn lose(t: &mut TapSide, conv: &Arc<Conv>) -> Vec<Waiter> {
        t.full = true;
        t.lost_total += 1;
        let e = t.lost.entry(conv.number).or_insert((conv.clone(), 0));
        e.1 += 1;
        // A record larger than the whole buffer: the drop is news too.
        if t.queue.is_empty() {
            t.waiters.take()
        } else {
            Vec::new()
        }
    }

    /// Whether the filter lets a record of `conv` through.
    fn admits(t: &mut TapSide, conv: &Conv, ends: &[&Endpoint], origin: &Origin) -> bool {
        if t.required == 0 {
            return true;
        }
        let mut ids: Vec<u64> = ends.iter().map(|e| e.id).collect();
        ids.push(conv.server.id);
        ids.extend(conv.client.as_ref().map(|c| c.id));
        let mut names: Vec<String> = ends
            .iter()
            .filter_map(|e| e.name.as_ref().map(|a| a.display()))
            .collect();
        names.extend(conv.server.name.clone());
        names.extend(conv.client.as_ref().and_then(|c| c.name.clone()));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut uids: Vec<u32> = ends.iter().map(|e| e.owner_uid).collect();
        uids.push(origin.uid);
        let s = Subject {
            ids: &ids,
            names: &names,
            pids: &[origin.pid],
            uids: &uids,
            ty: Some(conv.ty),
        };
        let kinds = t.filter.matches(&s);
        let m = t.convs.matched(conv.number, kinds);
        m & t.required == t.required
    }

    fn note(
        &self,
        origin: Origin,
        conv_of: ConvOf<'_>,
        kind: NoteKind,
        sock: u64,
        text: impl FnOnce(&TapSide) -> String,
    ) {
        let ends = conv_of.ends();
        if !self.access.sees(&ends) {
            return;
        }
        let ts_ns = now_ns();
        let wake = {
            let mut t = self.tap.lock();
            let conv = match conv_of {
                ConvOf::Existing(s) => match t.convs.of(s.id) {
                    Some(c) => c,
                    None => return,
                },
                ConvOf::Connection(c, s) => t.convs.connection(c, s, origin.pid),
                ConvOf::Receiver(_, s) => t.convs.dgram_of(s, origin.pid),
            };
            if !Self::admits(&mut t, &conv, &ends, &origin) {
                return;
            }
            let text = text(&t);
            let r = Record {
                ts_ns,
                conv,
                msg_id: 0,
                drops: 0,
                body: Body::Note { kind, sock, text },
            };
            let w = Self::keep(&mut t, r);
            if matches!(kind, NoteKind::Close | NoteKind::Collect) {
                t.convs.closed(sock);
            }
            w
        };
        wake.into_iter().for_each(|w| w.wake());
    }
}

/// Where an event goes.
enum ConvOf<'a> {
    /// The conversation the socket is in already (none: nowhere).
    Existing(&'a Endpoint),
    /// A new connection, client and server end.
    Connection(&'a Endpoint, &'a Endpoint),
    /// A dgram connect: the receiver's conversation.
    Receiver(&'a Endpoint, &'a Endpoint),
}

impl ConvOf<'_> {
    fn ends(&self) -> Vec<&Endpoint> {
        match *self {
            ConvOf::Existing(s) => vec![s],
            ConvOf::Connection(a, b) | ConvOf::Receiver(a, b) => vec![a, b],
        }
    }
}

fn shut_name(how: u8) -> &'static str {
    match how {
        1 => "SHUT_RD",
        2 => "SHUT_WR",
        _ => "SHUT_RDWR",
    }
}

impl Tap for Reader {
    fn viewer(&self) -> Option<u32> {
        (!self.access.all).then_some(self.access.uid)
    }

    /// Root's capture with a full buffer counts a message of a known
    /// conversation lost without its details: exactly what `queued` would
    /// do with them. (A user's capture takes the whole path: it must see
    /// the ends' owners.)
    fn lost_undescribed(&self, ty: SockType, from: u64, to: u64, len: usize) -> bool {
        if !self.access.all {
            return false;
        }
        let wake = {
            let mut t = self.tap.lock();
            if !t.full {
                return false;
            }
            let Some((conv, kinds)) = t.convs.known(ty, from, to) else {
                return false;
            };
            let snap = t.filter.snaplen.unwrap_or(usize::MAX).min(len);
            if kinds & t.required != t.required
                || t.bytes + Record::message_cost(snap, 0, 0) <= t.filter.buffer
            {
                return false;
            }
            t.number(0, false);
            Self::lose(&mut t, &conv)
        };
        wake.into_iter().for_each(|w| w.wake());
        true
    }

    fn queued(&self, q: &Queued<'_>) {
        if !self.access.sees(&[q.from, q.to]) {
            return;
        }
        let ts_ns = now_ns();
        let wake = {
            let mut t = self.tap.lock();
            let conv = t.convs.for_message(q.from, q.to, q.origin.pid);
            if !Self::admits(&mut t, &conv, &[q.from, q.to], &q.origin) {
                return;
            }
            let snap = t.filter.snaplen.unwrap_or(usize::MAX).min(q.data.len());
            // A reader that stopped reading costs its writers as little as can
            // be: a record that cannot fit is counted before it is built.
            if t.bytes + Record::message_cost(snap, q.sockets.len(), q.files.len())
                > t.filter.buffer
            {
                t.number(0, false);
                Self::lose(&mut t, &conv)
            } else {
                let msg_id = t.number(q.msg_id, true);
                let meta = Meta {
                    from: q.from.id,
                    to: q.to.id,
                    origin: q.origin,
                    creds: q.creds,
                    sockets: q
                        .sockets
                        .iter()
                        .map(|p| Passed {
                            id: p.id,
                            ty: p.ty,
                            name: p.name.as_ref().map(|a| a.display()),
                        })
                        .collect(),
                    files: q.files.to_vec(),
                    oob: q.oob,
                };
                let r = Record {
                    ts_ns,
                    conv,
                    msg_id,
                    drops: 0,
                    body: Body::Message {
                        data: q.data[..snap].to_vec(),
                        len: q.data.len(),
                        meta: Box::new(meta),
                    },
                };
                Self::keep(&mut t, r)
            }
        };
        wake.into_iter().for_each(|w| w.wake());
    }

    /// Only reads that cut something are news in a capture.
    fn wants_delivery(&self, truncated: bool, ctrunc: bool) -> bool {
        truncated || ctrunc
    }

    fn delivered(&self, d: &Delivered<'_>) {
        if !self.wants_delivery(d.truncated, d.ctrunc) {
            return;
        }
        // The message by this reader's own id, if it was shown lately.
        let text = |t: &TapSide| {
            let mut text = match t.ids.get(&d.msg_id) {
                Some(id) => format!("message {id}"),
                None => "a message".to_string(),
            };
            let _ = write!(
                text,
                " read by socket {} (pid {}): {} bytes",
                d.reader.id, d.origin.pid, d.len
            );
            if d.truncated {
                text.push_str("; MSG_TRUNC");
            }
            if d.ctrunc {
                text.push_str("; MSG_CTRUNC");
            }
            if d.peek {
                text.push_str("; MSG_PEEK");
            }
            text
        };
        self.note(
            d.origin,
            ConvOf::Existing(d.reader),
            NoteKind::Delivery,
            d.reader.id,
            text,
        );
    }

    fn event(&self, origin: Origin, e: &Event) {
        let side = |e: &Endpoint| Side::from(e).label();
        // Every event but a connect is a note on the socket's conversation.
        let (sock, kind, text) = match e {
            Event::Connected {
                client,
                server,
                accepted,
            } => {
                let text = format!("connect: {} to {}", side(client), side(server));
                let to = match (client.ty, accepted) {
                    (SockType::Dgram, _) => ConvOf::Receiver(client, server),
                    (_, Some(a)) => ConvOf::Connection(client, a),
                    (_, None) => ConvOf::Connection(client, server),
                };
                self.note(origin, to, NoteKind::Connect, client.id, |_| text);
                return;
            }
            Event::Accepted { listener, sock } => {
                let text = format!("accept: {} from listener {}", side(sock), side(listener));
                (sock, NoteKind::Accept, text)
            }
            Event::Shutdown { sock, how } => {
                let text = format!("shutdown({}): {}", shut_name(*how), side(sock));
                (sock, NoteKind::Shutdown(*how), text)
            }
            Event::Closed { sock } => (sock, NoteKind::Close, format!("close: {}", side(sock))),
            Event::Reset { sock } => {
                let text = format!("ECONNRESET: {}", side(sock));
                (sock, NoteKind::Reset, text)
            }
            Event::Collected { sock } => {
                let text = format!("collected (unreachable in flight): {}", side(sock));
                (sock, NoteKind::Collect, text)
            }
            Event::Fault { sock, rule, what } => {
                let text = format!("fault rule {rule}: {what}: {}", side(sock));
                (sock, NoteKind::Fault, text)
            }
        };
        self.note(origin, ConvOf::Existing(sock), kind, sock.id, |_| text);
    }
}

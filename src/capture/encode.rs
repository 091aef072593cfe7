//! Records into pcapng, on the reader's side: an interface description the
//! first time a conversation shows up, an enhanced packet per record in the
//! chosen encoding, interface statistics where records were lost.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use super::filter::{Filter, Format};
use super::pcapng::{self, INBOUND, OUTBOUND, Packet};
use super::record::{Body, Conv, Meta, NoteKind, Record};
use super::tcp_synth::{self, Flow};
use super::upper_pdu;

struct Interface {
    index: u32,
    /// Its payload protocol: the dissector (upper-pdu), the server port (tcp).
    dissector: String,
    port: u16,
    /// Records of it seen and lost so far.
    seen: u64,
    lost: u64,
}

pub struct Encoder {
    format: Format,
    /// Who picks each conversation's payload protocol.
    filter: Arc<Filter>,
    started: bool,
    interfaces: HashMap<u64, Interface>,
    /// Synthetic TCP connections, by conversation and (dgram) sender.
    flows: HashMap<(u64, u64), Flow>,
    /// A dgram conversation's latest sender: its notes go on that flow.
    last_sender: HashMap<u64, u64>,
    next_flow: u64,
}

/// The comment of a message: who sent it and what it carried.
pub fn message_comment(m: &Meta) -> String {
    let o = &m.origin;
    let mut s = format!(
        "socket {} -> socket {}; pid {} tid {} uid {} gid {}",
        m.from, m.to, o.pid, o.tid, o.uid, o.gid
    );
    if let Some(c) = m.creds {
        let _ = write!(
            s,
            "; SCM_CREDENTIALS pid {} uid {} gid {}",
            c.pid, c.uid, c.gid
        );
    }
    if !m.sockets.is_empty() || !m.files.is_empty() {
        s.push_str("; SCM_RIGHTS");
        let mut sep = " ";
        for p in &m.sockets {
            let _ = write!(s, "{sep}socket {} {}", p.id, p.ty.name());
            if let Some(n) = &p.name {
                let _ = write!(s, " {n}");
            }
            sep = ", ";
        }
        for f in &m.files {
            let _ = write!(s, "{sep}file {f}");
            sep = ", ";
        }
    }
    if m.oob {
        s.push_str("; MSG_OOB");
    }
    s
}

/// Record `r`'s packet on interface `index`, without data (the caller
/// gives it, or the TCP segments do).
fn record_packet<'a>(
    index: u32,
    r: &Record,
    flags: u32,
    process: Option<(u32, u32)>,
    comment: &'a str,
) -> Packet<'a> {
    Packet {
        interface: index,
        ts_ns: r.ts_ns,
        data: &[],
        orig_len: 0,
        flags,
        drops: r.drops,
        packet_id: r.msg_id,
        process,
        comment,
    }
}

fn interface_name(c: &Conv) -> String {
    let bound = c
        .server
        .name
        .as_ref()
        .or(c.client.as_ref().and_then(|s| s.name.as_ref()));
    match (&c.client, bound) {
        (_, Some(n)) => n.clone(),
        (Some(cl), None) => format!("socket {}-{}", cl.id, c.server.id),
        (None, None) => format!("socket {}", c.server.id),
    }
}

fn interface_description(c: &Conv) -> String {
    match &c.client {
        Some(cl) => format!(
            "{} connection: client {} (pid {}), server {}",
            c.ty.name(),
            cl.label(),
            c.first_pid,
            c.server.label()
        ),
        None => format!("dgram receiver {}", c.server.label()),
    }
}

impl Encoder {
    pub fn new(filter: Arc<Filter>) -> Encoder {
        Encoder {
            format: filter.format,
            filter,
            started: false,
            interfaces: HashMap::new(),
            flows: HashMap::new(),
            last_sender: HashMap::new(),
            next_flow: 0,
        }
    }

    fn linktype(&self) -> u16 {
        match self.format {
            Format::UpperPdu => pcapng::LINKTYPE_UPPER_PDU,
            Format::Tcp => pcapng::LINKTYPE_RAW,
        }
    }

    /// The interface of `c`, described in `out` the first time.
    fn interface(&mut self, c: &Conv, out: &mut Vec<u8>) -> u32 {
        if let Some(i) = self.interfaces.get(&c.number) {
            return i.index;
        }
        let index = self.interfaces.len() as u32;
        let (name, desc) = (interface_name(c), interface_description(c));
        pcapng::interface(out, self.linktype(), pcapng::MAX_SNAPLEN, &name, &desc);
        let names: Vec<&str> = [Some(&c.server), c.client.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|s| s.name.as_deref())
            .collect();
        // The socket's own protocol wins: the server end's, then the client's.
        let own = [Some(&c.server), c.client.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|s| s.proto.as_deref());
        let proto = own.or_else(|| self.filter.proto_for(&names));
        self.interfaces.insert(
            c.number,
            Interface {
                index,
                dissector: proto.unwrap_or("data").to_string(),
                port: proto.and_then(tcp_synth::port_of).unwrap_or(9),
                seen: 0,
                lost: 0,
            },
        );
        index
    }

    /// Whether the section header went out.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The section header, first of all.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            pcapng::section_header(out, "udsfs capture");
        }
    }

    /// Appends the blocks for `r`.
    pub fn encode(&mut self, r: &Record, out: &mut Vec<u8>) {
        self.begin(out);
        let index = self.interface(&r.conv, out);
        match &r.body {
            Body::Message { data, len, meta } => self.message(index, r, data, *len, meta, out),
            Body::Note { kind, sock, text } => self.note(index, r, *kind, *sock, text, out),
            Body::Drops => {}
        }
        let i = self
            .interfaces
            .get_mut(&r.conv.number)
            .expect("described above");
        i.lost += r.drops;
        if !matches!(r.body, Body::Drops) {
            i.seen += 1;
        }
        if r.drops > 0 {
            pcapng::statistics(out, index, r.ts_ns, i.seen + i.lost, i.lost);
        }
    }

    fn flow(&mut self, c: &Conv, sender: u64) -> &mut Flow {
        let key = (c.number, if c.client.is_some() { 0 } else { sender });
        if c.client.is_none() {
            self.last_sender.insert(c.number, sender);
        }
        let port = self.interfaces.get(&c.number).map_or(9, |i| i.port);
        let next = &mut self.next_flow;
        self.flows.entry(key).or_insert_with(|| {
            *next += 1;
            Flow::new(*next, port)
        })
    }

    fn message(
        &mut self,
        index: u32,
        r: &Record,
        data: &[u8],
        len: usize,
        meta: &Meta,
        out: &mut Vec<u8>,
    ) {
        let c = &r.conv;
        // A dgram receiver's interface sees everything come in.
        let outbound = c.outbound(meta.from);
        let flags = if outbound { OUTBOUND } else { INBOUND };
        let comment = message_comment(meta);
        let process = Some((meta.origin.pid, meta.origin.tid));
        match self.format {
            Format::UpperPdu => {
                let dir = if outbound {
                    upper_pdu::SENT
                } else {
                    upper_pdu::RECEIVED
                };
                let info = format!("socket {} -> {} ({} bytes)", meta.from, meta.to, len);
                let dissector = &self.interfaces[&c.number].dissector;
                let mut bytes = upper_pdu::header(dissector, Some(dir), &info);
                let head = bytes.len();
                bytes.extend_from_slice(data);
                let p = Packet {
                    data: &bytes,
                    orig_len: head + len,
                    ..record_packet(index, r, flags, process, &comment)
                };
                pcapng::packet(out, &p);
            }
            Format::Tcp => {
                let from_client = outbound || c.client.is_none();
                let segs = self
                    .flow(c, meta.from)
                    .send(from_client, data, len, meta.oob);
                let last = record_packet(index, r, flags, process, &comment);
                Self::segments(&last, segs, out);
            }
        }
    }

    /// Writes segments; the last carries `last`'s comment, id, drops and
    /// process (its data and length are the segment's).
    fn segments(last: &Packet<'_>, segs: Vec<tcp_synth::Segment>, out: &mut Vec<u8>) {
        let n = segs.len();
        for (i, s) in segs.into_iter().enumerate() {
            let is_last = i + 1 == n;
            let p = Packet {
                data: &s.bytes,
                orig_len: s.orig_len,
                drops: if is_last { last.drops } else { 0 },
                packet_id: if is_last { last.packet_id } else { 0 },
                process: last.process.filter(|_| is_last),
                comment: if is_last {
                    last.comment
                } else {
                    "synthetic TCP"
                },
                ..*last
            };
            pcapng::packet(out, &p);
        }
    }

    fn note(
        &mut self,
        index: u32,
        r: &Record,
        kind: NoteKind,
        sock: u64,
        text: &str,
        out: &mut Vec<u8>,
    ) {
        let c = &r.conv;
        // A dgram receiver is the server end of each of its flows.
        let from_client = match &c.client {
            Some(_) => c.outbound(sock),
            None => sock != c.server.id,
        };
        let flags = if from_client { OUTBOUND } else { INBOUND };
        match self.format {
            Format::UpperPdu => {
                let bytes = upper_pdu::header("data", None, text);
                let p = Packet {
                    data: &bytes,
                    orig_len: bytes.len(),
                    ..record_packet(index, r, flags, None, text)
                };
                pcapng::packet(out, &p);
            }
            Format::Tcp => {
                // A dgram receiver's note goes on the flow it heard from last.
                let sender = match c.client {
                    None if sock == c.server.id => {
                        self.last_sender.get(&c.number).copied().unwrap_or(sock)
                    }
                    _ => sock,
                };
                let flow = self.flow(c, sender);
                let segs = match kind {
                    NoteKind::Connect if !flow.is_open() => flow.open(),
                    NoteKind::Shutdown(how) if how & 2 != 0 => {
                        flow.control(from_client, tcp_synth::FIN)
                    }
                    NoteKind::Close => flow.control(from_client, tcp_synth::FIN),
                    // The end that got ECONNRESET hears it from the other.
                    NoteKind::Reset => flow.control(!from_client, tcp_synth::RST),
                    _ => flow.control(from_client, 0),
                };
                Self::segments(&record_packet(index, r, flags, None, text), segs, out);
            }
        }
    }
}

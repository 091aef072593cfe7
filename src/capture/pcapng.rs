//! The pcapng blocks a capture is made of, written by hand (little-endian):
//! the section header, one interface description per conversation, enhanced
//! packets and interface statistics. Only the options udsfs uses.
//! Block layouts: draft-ietf-opsawg-pcapng, sections 4.1 to 4.6.

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const ISB: u32 = 5;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;
const EPB_DROPCOUNT: u16 = 4;
const EPB_PACKETID: u16 = 5;
/// The sending process and thread (two u32); readers that do not know it
/// skip it (tshark 4.0 does).
const EPB_PROCESSID_THREADID: u16 = 8;
const ISB_IFRECV: u16 = 4;
const ISB_IFDROP: u16 = 5;

/// LINKTYPE_WIRESHARK_UPPER_PDU: each packet starts with exported-PDU tags.
pub const LINKTYPE_UPPER_PDU: u16 = 252;
/// LINKTYPE_RAW: each packet is an IPv4 (or IPv6) packet.
pub const LINKTYPE_RAW: u16 = 101;

/// epb_flags direction bits.
pub const INBOUND: u32 = 1;
pub const OUTBOUND: u32 = 2;

/// Largest packet an interface announces (snaplen 0 means none in pcapng,
/// but older readers want a number).
pub const MAX_SNAPLEN: u32 = 0x0010_0000;

/// A block's options, appended one at a time.
#[derive(Default)]
struct Options(Vec<u8>);

impl Options {
    fn add(&mut self, code: u16, value: &[u8]) {
        self.0.extend_from_slice(&code.to_le_bytes());
        self.0
            .extend_from_slice(&(value.len() as u16).to_le_bytes());
        self.0.extend_from_slice(value);
        pad4(&mut self.0);
    }

    /// Option values are at most 65535 bytes: a longer text is cut.
    fn text(&mut self, code: u16, s: &str) {
        let end = s.floor_char_boundary(u16::MAX as usize - 3);
        self.add(code, &s.as_bytes()[..end]);
    }

    fn finish(mut self) -> Vec<u8> {
        if !self.0.is_empty() {
            self.add(OPT_END, &[]);
        }
        self.0
    }
}

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

/// Frames a block: type, total length, body (padded), options, length again.
fn block(out: &mut Vec<u8>, ty: u32, body: &[u8], opts: Options) {
    let opts = opts.finish();
    let padded = body.len().next_multiple_of(4);
    let total = (12 + padded + opts.len()) as u32;
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(body);
    out.resize(out.len() + padded - body.len(), 0);
    out.extend_from_slice(&opts);
    out.extend_from_slice(&total.to_le_bytes());
}

/// The Section Header Block a stream starts with (section length unknown).
pub fn section_header(out: &mut Vec<u8>, application: &str) {
    let mut body = Vec::with_capacity(16);
    body.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    let mut o = Options::default();
    o.text(SHB_USERAPPL, application);
    block(out, SHB, &body, o);
}

/// An Interface Description Block, timestamps in nanoseconds.
pub fn interface(out: &mut Vec<u8>, linktype: u16, snaplen: u32, name: &str, description: &str) {
    let mut body = Vec::with_capacity(8);
    body.extend_from_slice(&linktype.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&snaplen.to_le_bytes());
    let mut o = Options::default();
    o.text(IF_NAME, name);
    o.text(IF_DESCRIPTION, description);
    o.add(IF_TSRESOL, &[9]);
    block(out, IDB, &body, o);
}

/// One Enhanced Packet Block.
pub struct Packet<'a> {
    pub interface: u32,
    /// Nanoseconds since the epoch.
    pub ts_ns: u64,
    /// What is captured: the link-layer header and the (snapped) payload.
    pub data: &'a [u8],
    /// The length on the "wire": header plus the whole payload.
    pub orig_len: usize,
    pub flags: u32,
    pub drops: u64,
    pub packet_id: u64,
    /// The sender's (pid, tid).
    pub process: Option<(u32, u32)>,
    pub comment: &'a str,
}

pub fn packet(out: &mut Vec<u8>, p: &Packet<'_>) {
    let mut body = Vec::with_capacity(20 + p.data.len());
    body.extend_from_slice(&p.interface.to_le_bytes());
    body.extend_from_slice(&((p.ts_ns >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(p.ts_ns as u32).to_le_bytes());
    body.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
    body.extend_from_slice(&(p.orig_len.min(u32::MAX as usize) as u32).to_le_bytes());
    body.extend_from_slice(p.data);
    let mut o = Options::default();
    if !p.comment.is_empty() {
        o.text(OPT_COMMENT, p.comment);
    }
    if p.flags != 0 {
        o.add(EPB_FLAGS, &p.flags.to_le_bytes());
    }
    if p.drops != 0 {
        o.add(EPB_DROPCOUNT, &p.drops.to_le_bytes());
    }
    if p.packet_id != 0 {
        o.add(EPB_PACKETID, &p.packet_id.to_le_bytes());
    }
    if let Some((pid, tid)) = p.process {
        let mut v = [0u8; 8];
        v[..4].copy_from_slice(&pid.to_le_bytes());
        v[4..].copy_from_slice(&tid.to_le_bytes());
        o.add(EPB_PROCESSID_THREADID, &v);
    }
    block(out, EPB, &body, o);
}

/// An Interface Statistics Block: packets seen and lost for one interface
/// since the capture began.
pub fn statistics(out: &mut Vec<u8>, interface: u32, ts_ns: u64, received: u64, dropped: u64) {
    let mut body = Vec::with_capacity(12);
    body.extend_from_slice(&interface.to_le_bytes());
    body.extend_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ts_ns as u32).to_le_bytes());
    let mut o = Options::default();
    o.add(ISB_IFRECV, &received.to_le_bytes());
    o.add(ISB_IFDROP, &dropped.to_le_bytes());
    block(out, ISB, &body, o);
}

/// A block read back (tests and `udsfs capture`'s checks).
#[derive(Debug)]
pub struct Parsed<'a> {
    pub ty: u32,
    pub body: &'a [u8],
    /// (code, value) of each option.
    pub options: Vec<(u16, &'a [u8])>,
}

/// Fixed body lengths before the options start, by block type (EPB: plus
/// the captured data).
fn fixed_len(ty: u32, body: &[u8]) -> Option<usize> {
    Some(match ty {
        SHB => 16,
        IDB => 8,
        ISB => 12,
        EPB => {
            20 + (u32::from_le_bytes(body.get(12..16)?.try_into().ok()?) as usize)
                .next_multiple_of(4)
        }
        _ => body.len(),
    })
}

/// Splits `bytes` into blocks; None if they are not well-formed pcapng.
pub fn parse(mut bytes: &[u8]) -> Option<Vec<Parsed<'_>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let ty = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?);
        let total = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
        if total < 12 || !total.is_multiple_of(4) || total > bytes.len() {
            return None;
        }
        let trailer = u32::from_le_bytes(bytes[total - 4..total].try_into().ok()?) as usize;
        if trailer != total {
            return None;
        }
        let inner = &bytes[8..total - 4];
        let fixed = fixed_len(ty, inner)?;
        let (body, mut rest) = (inner.get(..fixed)?, &inner[fixed..]);
        let mut options = Vec::new();
        while rest.len() >= 4 {
            let code = u16::from_le_bytes([rest[0], rest[1]]);
            let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
            if code == OPT_END {
                break;
            }
            let value = rest.get(4..4 + len)?;
            options.push((code, value));
            rest = rest.get(4 + len.next_multiple_of(4)..)?;
        }
        out.push(Parsed { ty, body, options });
        bytes = &bytes[total..];
    }
    Some(out)
}

impl Parsed<'_> {
    pub fn option(&self, code: u16) -> Option<&[u8]> {
        self.options
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| *v)
    }

    pub fn u64_option(&self, code: u16) -> Option<u64> {
        Some(u64::from_le_bytes(self.option(code)?.try_into().ok()?))
    }

    /// An EPB's captured data.
    pub fn packet_data(&self) -> &[u8] {
        let n = u32::from_le_bytes(self.body[12..16].try_into().unwrap()) as usize;
        &self.body[20..20 + n]
    }

    pub fn comment(&self) -> Option<&str> {
        std::str::from_utf8(self.option(OPT_COMMENT)?).ok()
    }
}

/// Option codes and block types for readers of `parse`'s output.
pub mod codes {
    pub const SHB: u32 = super::SHB;
    pub const IDB: u32 = super::IDB;
    pub const ISB: u32 = super::ISB;
    pub const EPB: u32 = super::EPB;
    pub const IF_NAME: u16 = super::IF_NAME;
    pub const EPB_FLAGS: u16 = super::EPB_FLAGS;
    pub const EPB_DROPCOUNT: u16 = super::EPB_DROPCOUNT;
    pub const EPB_PACKETID: u16 = super::EPB_PACKETID;
    pub const ISB_IFRECV: u16 = super::ISB_IFRECV;
    pub const ISB_IFDROP: u16 = super::ISB_IFDROP;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_back() {
        let mut out = Vec::new();
        section_header(&mut out, "udsfs test");
        interface(
            &mut out,
            LINKTYPE_UPPER_PDU,
            MAX_SNAPLEN,
            "run/a.sock",
            "stream 1 <-> 2",
        );
        packet(
            &mut out,
            &Packet {
                interface: 0,
                ts_ns: (7 << 32) | 9,
                data: b"hello",
                orig_len: 8,
                flags: OUTBOUND,
                drops: 3,
                packet_id: 42,
                process: Some((7, 8)),
                comment: "pid 1",
            },
        );
        statistics(&mut out, 0, 5, 10, 3);
        let blocks = parse(&out).expect("well-formed");
        assert_eq!(
            blocks.iter().map(|b| b.ty).collect::<Vec<_>>(),
            [SHB, IDB, EPB, ISB]
        );
        assert_eq!(blocks[0].option(SHB_USERAPPL), Some(&b"udsfs test"[..]));
        assert_eq!(&blocks[1].body[..2], &LINKTYPE_UPPER_PDU.to_le_bytes());
        assert_eq!(blocks[1].option(IF_NAME), Some(&b"run/a.sock"[..]));
        assert_eq!(blocks[1].option(IF_TSRESOL), Some(&[9u8][..]));
        let p = &blocks[2];
        assert_eq!(p.packet_data(), b"hello");
        assert_eq!(u32::from_le_bytes(p.body[16..20].try_into().unwrap()), 8);
        assert_eq!(u32::from_le_bytes(p.body[4..8].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(p.body[8..12].try_into().unwrap()), 9);
        assert_eq!(p.comment(), Some("pid 1"));
        assert_eq!(p.option(EPB_FLAGS), Some(&OUTBOUND.to_le_bytes()[..]));
        assert_eq!(p.u64_option(EPB_DROPCOUNT), Some(3));
        assert_eq!(p.u64_option(EPB_PACKETID), Some(42));
        assert_eq!(p.u64_option(EPB_PROCESSID_THREADID), Some((8 << 32) | 7));
        assert_eq!(blocks[3].u64_option(ISB_IFRECV), Some(10));
        assert_eq!(blocks[3].u64_option(ISB_IFDROP), Some(3));
    }

    #[test]
    fn a_packet_without_options_has_none() {
        let mut out = Vec::new();
        let p = Packet {
            interface: 1,
            ts_ns: 0,
            data: &[1, 2, 3, 4],
            orig_len: 4,
            flags: 0,
            drops: 0,
            packet_id: 0,
            process: None,
            comment: "",
        };
        packet(&mut out, &p);
        assert_eq!(out.len(), 12 + 20 + 4);
        let b = parse(&out).unwrap();
        assert!(b[0].options.is_empty());
    }

    #[test]
    fn long_comments_are_cut_at_a_char_boundary() {
        let mut out = Vec::new();
        let text = "é".repeat(40000);
        let p = Packet {
            interface: 0,
            ts_ns: 0,
            data: &[],
            orig_len: 0,
            flags: 0,
            drops: 0,
            packet_id: 0,
            process: None,
            comment: &text,
        };
        packet(&mut out, &p);
        let b = parse(&out).unwrap();
        let c = b[0].comment().expect("valid UTF-8");
        assert!(c.len() <= u16::MAX as usize && c.len() > 60000);
    }

    #[test]
    fn truncated_input_is_refused() {
        let mut out = Vec::new();
        section_header(&mut out, "x");
        assert!(parse(&out[..out.len() - 1]).is_none());
    }
}

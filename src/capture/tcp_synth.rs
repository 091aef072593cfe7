//! The `tcp` encoding: each captured socket pair becomes a synthetic IPv4/TCP
//! connection (LINKTYPE_RAW), so that Wireshark's stream reassembly and
//! Follow TCP Stream work on AF_UNIX byte streams. Nothing of it is real:
//! the client end is 10.x.y.z, x.y.z the flow's number, port 50000; the
//! server end 172.16.0.1, port the payload protocol's (http: 80). Sequence
//! and acknowledgement numbers count the bytes each side sent, so the
//! segments line up.

/// TCP header flags.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const URG: u8 = 0x20;

const CLIENT_PORT: u16 = 50000;
const SERVER_IP: [u8; 4] = [172, 16, 0, 1];
const HEADERS: usize = 40;
/// Most payload one IPv4 packet holds.
const MAX_SEGMENT: usize = 65535 - HEADERS;
/// Initial sequence numbers (any will do; fixed keeps captures comparable).
const CLIENT_ISN: u32 = 1000;
const SERVER_ISN: u32 = 5000;

/// The port a payload protocol's server listens on, by its name (or a number).
pub fn port_of(proto: &str) -> Option<u16> {
    if let Ok(n) = proto.parse::<u16>() {
        return Some(n);
    }
    Some(match proto {
        "http" => 80,
        "tls" | "https" => 443,
        "dns" => 53,
        "smtp" => 25,
        "ftp" => 21,
        "ldap" => 389,
        "imap" => 143,
        "pop" => 110,
        "redis" => 6379,
        "mqtt" => 1883,
        "amqp" => 5672,
        "pgsql" => 5432,
        "mysql" => 3306,
        "memcache" => 11211,
        "data" => 9,
        _ => return None,
    })
}

/// One synthetic connection.
pub struct Flow {
    client: [u8; 4],
    server_port: u16,
    /// Next sequence number of each side: [client, server].
    next: [u32; 2],
    ip_id: u16,
    opened: bool,
    /// Each side's FIN went: [client, server].
    fin: [bool; 2],
}

/// One packet made: the captured bytes and the length it stands for.
pub struct Segment {
    pub bytes: Vec<u8>,
    pub orig_len: usize,
}

fn checksum_add(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

fn checksum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Flow {
    pub fn new(number: u64, server_port: u16) -> Flow {
        let n = number & 0xff_ffff;
        Flow {
            client: [10, (n >> 16) as u8, (n >> 8) as u8, n as u8],
            server_port,
            next: [CLIENT_ISN, SERVER_ISN],
            ip_id: 0,
            opened: false,
            fin: [false; 2],
        }
    }

    /// The three-way handshake, once: before the flow's first segment.
    pub fn open(&mut self) -> Vec<Segment> {
        if self.opened {
            return Vec::new();
        }
        self.opened = true;
        let syn = self.packet(true, SYN, &[], 0, 0);
        self.next[0] += 1;
        let synack = self.packet(false, SYN | ACK, &[], 0, 0);
        self.next[1] += 1;
        let ack = self.packet(true, ACK, &[], 0, 0);
        vec![syn, synack, ack]
    }

    pub fn is_open(&self) -> bool {
        self.opened
    }

    /// `full_len` bytes sent by one side, of which `data` were captured;
    /// cut into segments an IPv4 packet holds. `urgent`: the last byte is
    /// MSG_OOB's.
    pub fn send(
        &mut self,
        from_client: bool,
        data: &[u8],
        full_len: usize,
        urgent: bool,
    ) -> Vec<Segment> {
        let mut out = self.open();
        let mut done = 0;
        loop {
            let n = (full_len - done).min(MAX_SEGMENT);
            let last = done + n == full_len;
            let captured = &data[done.min(data.len())..(done + n).min(data.len())];
            let mut flags = ACK | if last { PSH } else { 0 };
            let mut urg = 0;
            if urgent && last {
                flags |= URG;
                urg = n as u16;
            }
            out.push(self.packet(from_client, flags, captured, n, urg));
            let side = usize::from(!from_client);
            self.next[side] = self.next[side].wrapping_add(n as u32);
            done += n;
            if last {
                return out;
            }
        }
    }

    /// A segment without payload (FIN, RST or a bare ACK carrying an event).
    /// A second FIN of one side (shutdown, then close) goes as a bare ACK.
    pub fn control(&mut self, from_client: bool, mut flags: u8) -> Vec<Segment> {
        let mut out = self.open();
        let side = usize::from(!from_client);
        if flags & FIN != 0 && std::mem::replace(&mut self.fin[side], true) {
            flags &= !FIN;
        }
        out.push(self.packet(from_client, flags | ACK, &[], 0, 0));
        if flags & FIN != 0 {
            self.next[side] = self.next[side].wrapping_add(1);
        }
        out
    }

    fn packet(
        &mut self,
        from_client: bool,
        flags: u8,
        captured: &[u8],
        len: usize,
        urgent: u16,
    ) -> Segment {
        let (src, dst) = if from_client {
            (self.client, SERVER_IP)
        } else {
            (SERVER_IP, self.client)
        };
        let (sport, dport) = if from_client {
            (CLIENT_PORT, self.server_port)
        } else {
            (self.server_port, CLIENT_PORT)
        };
        let (mine, theirs) = if from_client { (0, 1) } else { (1, 0) };
        let seq = self.next[mine];
        let ack = if flags & ACK != 0 {
            self.next[theirs]
        } else {
            0
        };
        let total = HEADERS + len;
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut p = Vec::with_capacity(HEADERS + captured.len());
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&(total as u16).to_be_bytes());
        p.extend_from_slice(&self.ip_id.to_be_bytes());
        p.extend_from_slice(&0x4000u16.to_be_bytes());
        p.extend_from_slice(&[64, 6, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        let ip_sum = checksum_fold(checksum_add(0, &p[..20]));
        p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&ack.to_be_bytes());
        p.extend_from_slice(&[5 << 4, flags]);
        p.extend_from_slice(&65535u16.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&urgent.to_be_bytes());
        p.extend_from_slice(captured);
        // The checksum needs the whole payload: a snapped one is left 0.
        if captured.len() == len {
            let mut pseudo = Vec::with_capacity(12);
            pseudo.extend_from_slice(&src);
            pseudo.extend_from_slice(&dst);
            pseudo.extend_from_slice(&[0, 6]);
            pseudo.extend_from_slice(&((20 + len) as u16).to_be_bytes());
            let sum = checksum_add(checksum_add(0, &pseudo), &p[20..]);
            p[36..38].copy_from_slice(&checksum_fold(sum).to_be_bytes());
        }
        Segment {
            bytes: p,
            orig_len: total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(p: &[u8]) -> u32 {
        u32::from_be_bytes(p[24..28].try_into().unwrap())
    }
    fn ack(p: &[u8]) -> u32 {
        u32::from_be_bytes(p[28..32].try_into().unwrap())
    }

    #[test]
    fn sequence_numbers_follow_the_bytes() {
        let mut f = Flow::new(3, 80);
        let s = f.send(true, b"GET /", 5, false);
        assert_eq!(s.len(), 4, "handshake, then the data");
        assert_eq!(s[0].bytes[33], SYN);
        assert_eq!(s[1].bytes[33], SYN | ACK);
        assert_eq!(&s[3].bytes[40..], b"GET /");
        assert_eq!(seq(&s[3].bytes), CLIENT_ISN + 1);
        assert_eq!(ack(&s[3].bytes), SERVER_ISN + 1);
        let r = f.send(false, b"200", 3, false);
        assert_eq!(r.len(), 1);
        assert_eq!(seq(&r[0].bytes), SERVER_ISN + 1);
        assert_eq!(ack(&r[0].bytes), CLIENT_ISN + 6);
        assert_eq!(&r[0].bytes[12..16], &SERVER_IP);
        assert_eq!(&r[0].bytes[16..20], &[10, 0, 0, 3]);
        let fin = f.control(true, FIN);
        assert_eq!(seq(&fin[0].bytes), CLIENT_ISN + 6);
        let after = f.control(false, 0);
        assert_eq!(ack(&after[0].bytes), CLIENT_ISN + 7, "a FIN counts one");
        let again = f.control(true, FIN);
        assert_eq!(again[0].bytes[33], ACK, "one FIN per side");
        assert_eq!(seq(&again[0].bytes), CLIENT_ISN + 7);
    }

    #[test]
    fn checksums_verify() {
        let mut f = Flow::new(1, 80);
        let s = f.send(true, b"abc", 3, false).pop().unwrap().bytes;
        assert_eq!(checksum_fold(checksum_add(0, &s[..20])), 0);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&s[12..20]);
        pseudo.extend_from_slice(&[0, 6, 0, 23]);
        assert_eq!(
            checksum_fold(checksum_add(checksum_add(0, &pseudo), &s[20..])),
            0
        );
    }

    #[test]
    fn big_sends_are_cut_and_snapped_ones_keep_their_length() {
        let mut f = Flow::new(1, 80);
        f.open();
        let s = f.send(true, &[7u8; 10], 100_000, false);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].orig_len, 65535);
        assert_eq!(s[0].bytes.len(), 50);
        assert_eq!(s[1].bytes.len(), 40);
        assert_eq!(seq(&s[1].bytes), CLIENT_ISN + 1 + MAX_SEGMENT as u32);
    }

    #[test]
    fn ports_by_name() {
        assert_eq!(port_of("http"), Some(80));
        assert_eq!(port_of("8080"), Some(8080));
        assert_eq!(port_of("nonsense"), None);
    }
}

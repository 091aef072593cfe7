//! The records of a socket's `msg` file: a header line of `key=value`
//! fields, then exactly `len` payload bytes. A writer sends `SendHeader`
//! records (`len= to= creds= rights= oob=`); a reader gets `RecvHeader`
//! ones (`len= from= creds= pidfd= rights= flags=ctrunc`). A record always
//! holds the whole message, so MSG_TRUNC has no place in it.

use crate::addr::Addr;
use crate::passed::{self, digits};
use crate::{Cred, Res};

/// Longest header line accepted on a write.
pub const MAX_HEADER: usize = 4096;

/// The largest dgram or seqpacket message, as Linux allocates one on
/// x86_64: an skb's linear part is at most KMALLOC_MAX_SIZE (4 MiB) less
/// skb_shared_info (320 bytes), and MAX_SKB_FRAGS (17) pages more go in
/// fragments. Past it a send that SO_SNDBUF allows fails with ENOBUFS, as
/// on Linux. It reaches the daemon as one `msg` record.
pub const MAX_DGRAM: usize = 4 * 1024 * 1024 - 320 + 17 * 4096;

/// The most one FUSE request carries (the mount's max_write, and its
/// max_pages for reads): a larger read(2) or write(2) is cut into requests
/// of this size.
pub const MAX_IO: usize = 1 << 20;

/// What a write of a whole `msg` record (`total` bytes, header included)
/// that returned `written` means: the file reports the bytes of the record
/// it took, and a datagram goes whole or not at all, so anything short of
/// it was not sent (EAGAIN: the queue filled while its pieces came).
pub fn record_written(written: usize, total: usize) -> Res<()> {
    if written < total {
        return Err(libc::EAGAIN);
    }
    Ok(())
}

/// Room for a received record's header line.
const HEADER_ROOM: usize = 8192;

/// Reads the record at the head of a `msg` file, `want` payload bytes of it
/// at most, with `read` (one read(2) of the open file). The first read asks
/// for at most one FUSE request, so that it never runs past the record into
/// the next one; the rest of a longer record is asked for exactly. EIO when
/// what was read is not a record the daemon writes. Both fronts read
/// records so.
pub fn read_record(
    mut read: impl FnMut(&mut [u8]) -> Res<usize>,
    want: usize,
) -> Res<(RecvHeader, Vec<u8>)> {
    let mut buf = vec![0u8; want.saturating_add(HEADER_ROOM).min(MAX_IO)];
    let n = read(&mut buf)?;
    buf.truncate(n);
    let nl = buf.iter().position(|&b| b == b'\n').ok_or(libc::EIO)?;
    let h = RecvHeader::parse(&buf[..nl]).map_err(|_| libc::EIO)?;
    let total = nl + 1 + h.len.min(want);
    let mut at = buf.len();
    if at < total {
        buf.resize(total, 0);
        while at < total {
            match read(&mut buf[at..total])? {
                0 => break,
                k => at += k,
            }
        }
        buf.truncate(at);
    }
    let mut payload = buf.split_off(nl + 1);
    payload.truncate(h.len.min(want));
    Ok((h, payload))
}

/// The header of a record written. The type of its address (`A`) is a
/// parameter, so that the daemon reads it in its engine's terms
/// (`SendHeader::map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendHeader<A = Addr> {
    pub len: usize,
    pub to: Option<A>,
    pub creds: Option<Cred>,
    /// Passed sockets and files (`passed`).
    pub rights: Vec<u64>,
    /// `oob=1`: the payload's last byte is out-of-band (send with MSG_OOB).
    pub oob: bool,
}

impl<A> Default for SendHeader<A> {
    fn default() -> Self {
        SendHeader {
            len: 0,
            to: None,
            creds: None,
            rights: Vec::new(),
            oob: false,
        }
    }
}

impl<A> SendHeader<A> {
    /// The same header with the address in other terms.
    pub fn map<A2>(self, addr: impl Fn(A) -> A2) -> SendHeader<A2> {
        SendHeader {
            len: self.len,
            to: self.to.map(addr),
            creds: self.creds,
            rights: self.rights,
            oob: self.oob,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecvHeader {
    pub len: usize,
    pub from: Option<Addr>,
    pub creds: Option<Cred>,
    /// The sender's pid (SO_PASSPIDFD): `pidfd=PID`.
    pub pidfd: Option<i32>,
    pub rights: Vec<u64>,
    /// Passed sockets were dropped (MSG_CTRUNC): `flags=ctrunc`.
    pub ctrunc: bool,
    /// The receive timestamp (SO_TIMESTAMP and its kin): ns since the
    /// epoch and the reader's timestamp state (`sockopt::Tstamp`), shown
    /// `tstamp=SEC.NSEC/STATE`.
    pub stamp: Option<(u64, crate::tstamp::Tstamp)>,
}

/// `SEC.NSEC/STATE`: nine digits of ns.
fn parse_stamp(v: &str) -> Res<(u64, crate::tstamp::Tstamp)> {
    let (t, state) = v.split_once('/').ok_or(libc::EINVAL)?;
    let (sec, nsec) = t.split_once('.').ok_or(libc::EINVAL)?;
    if nsec.len() != 9 {
        return Err(libc::EINVAL);
    }
    let ns = digits::<u64>(sec)?
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(digits::<u64>(nsec).ok()?))
        .filter(|&n| n != 0)
        .ok_or(libc::EINVAL)?;
    Ok((ns, crate::tstamp::Tstamp(digits::<u32>(state)?)))
}

/// The fields of a header line, each at most once (a record must not mean
/// two things); `len` must be there.
fn fields(line: &[u8], mut each: impl FnMut(&str, &str) -> Res<()>) -> Res<usize> {
    let text = std::str::from_utf8(line).map_err(|_| libc::EINVAL)?;
    let mut seen: Vec<&str> = Vec::with_capacity(4);
    let mut len = None;
    for field in text.split_ascii_whitespace() {
        let (k, v) = field.split_once('=').ok_or(libc::EINVAL)?;
        if seen.contains(&k) {
            return Err(libc::EINVAL);
        }
        seen.push(k);
        if k == "len" {
            len = Some(digits(v)?);
        } else {
            each(k, v)?;
        }
    }
    len.ok_or(libc::EINVAL)
}

fn flag(v: &str) -> Res<bool> {
    match v {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(libc::EINVAL),
    }
}

/// A pid: digits, maybe after a minus sign.
fn signed(v: &str) -> Res<i32> {
    match v.strip_prefix('-') {
        Some(abs) => Ok(-digits::<i32>(abs)?),
        None => digits::<i32>(v),
    }
}

fn parse_creds(v: &str) -> Res<Cred> {
    let mut it = v.split(':');
    let mut next = || it.next().ok_or(libc::EINVAL);
    let pid = signed(next()?)?;
    let uid = digits::<u32>(next()?)?;
    let gid = digits::<u32>(next()?)?;
    if it.next().is_some() || uid == u32::MAX || gid == u32::MAX {
        return Err(libc::EINVAL);
    }
    Ok(Cred { pid, uid, gid })
}

fn push_addr(s: &mut String, key: &str, addr: &Option<Addr>) {
    if let Some(a) = addr {
        s.push_str(&format!(" {key}={}", a.display()));
    }
}

fn push_creds(s: &mut String, creds: Option<Cred>) {
    if let Some(c) = creds {
        s.push_str(&format!(" creds={}:{}:{}", c.pid, c.uid, c.gid));
    }
}

fn push_rights(s: &mut String, rights: &[u64]) {
    if !rights.is_empty() {
        s.push_str(" rights=");
        s.push_str(&passed::format_list(rights));
    }
}

/// A header read from its line: `parse_header` reads `len` and hands it
/// every other field.
trait HeaderFields: Default {
    /// One `key=value` field other than `len`; EINVAL for a key the header
    /// has not.
    fn set(&mut self, key: &str, v: &str) -> Res<()>;
    fn set_len(&mut self, len: usize);
}

fn parse_header<H: HeaderFields>(line: &[u8]) -> Res<H> {
    let mut h = H::default();
    let len = fields(line, |k, v| h.set(k, v))?;
    h.set_len(len);
    Ok(h)
}

impl HeaderFields for SendHeader {
    fn set(&mut self, key: &str, v: &str) -> Res<()> {
        match key {
            "to" => self.to = Some(Addr::parse(v.as_bytes())?),
            "creds" => self.creds = Some(parse_creds(v)?),
            "oob" => self.oob = flag(v)?,
            "rights" => self.rights = passed::parse_list(v)?,
            _ => return Err(libc::EINVAL),
        }
        Ok(())
    }

    fn set_len(&mut self, len: usize) {
        self.len = len;
    }
}

impl HeaderFields for RecvHeader {
    fn set(&mut self, key: &str, v: &str) -> Res<()> {
        match key {
            "from" => self.from = Some(Addr::parse(v.as_bytes())?),
            "creds" => self.creds = Some(parse_creds(v)?),
            "pidfd" => self.pidfd = Some(signed(v)?),
            "tstamp" => self.stamp = Some(parse_stamp(v)?),
            "rights" => self.rights = passed::parse_list(v)?,
            "flags" => {
                for f in v.split(',') {
                    match f {
                        "ctrunc" => self.ctrunc = true,
                        _ => return Err(libc::EINVAL),
                    }
                }
            }
            _ => return Err(libc::EINVAL),
        }
        Ok(())
    }

    fn set_len(&mut self, len: usize) {
        self.len = len;
    }
}

impl SendHeader {
    /// Parses one header line (without its newline).
    pub fn parse(line: &[u8]) -> Res<SendHeader> {
        parse_header(line)
    }

    /// The header line, with its newline.
    pub fn format(&self) -> String {
        let mut s = format!("len={}", self.len);
        push_addr(&mut s, "to", &self.to);
        push_creds(&mut s, self.creds);
        push_rights(&mut s, &self.rights);
        if self.oob {
            s.push_str(" oob=1");
        }
        s.push('\n');
        s
    }
}

impl RecvHeader {
    /// The header line, with its newline.
    pub fn format(&self) -> String {
        let mut s = format!("len={}", self.len);
        push_addr(&mut s, "from", &self.from);
        push_creds(&mut s, self.creds);
        if let Some(pid) = self.pidfd {
            s.push_str(&format!(" pidfd={pid}"));
        }
        if let Some((ns, t)) = self.stamp {
            s.push_str(&format!(
                " tstamp={}.{:09}/{}",
                ns / 1_000_000_000,
                ns % 1_000_000_000,
                t.0
            ));
        }
        push_rights(&mut s, &self.rights);
        if self.ctrunc {
            s.push_str(" flags=ctrunc");
        }
        s.push('\n');
        s
    }

    /// Parses one header line (without its newline).
    pub fn parse(line: &[u8]) -> Res<RecvHeader> {
        parse_header(line)
    }

    /// A record as read from a `msg` file: its header and the payload bytes
    /// that came (at most `len`: a reader may ask for less).
    pub fn split(record: &[u8]) -> Res<(RecvHeader, &[u8])> {
        let nl = record
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(libc::EINVAL)?;
        let h = RecvHeader::parse(&record[..nl])?;
        let payload = &record[nl + 1..];
        let n = payload.len().min(h.len);
        Ok((h, &payload[..n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passed::FILE_TAG;

    #[test]
    fn send_headers_round_trip() {
        let h = SendHeader {
            len: 5,
            to: Some(Addr::Abstract(b"s v".to_vec())),
            creds: Some(Cred {
                pid: -1,
                uid: 2,
                gid: 3,
            }),
            rights: vec![7, FILE_TAG | 9],
            oob: true,
        };
        let line = h.format();
        assert_eq!(
            line,
            "len=5 to=@s\\x20v creds=-1:2:3 rights=7,file:9 oob=1\n"
        );
        assert_eq!(SendHeader::parse(line.trim_end().as_bytes()), Ok(h));
        let bare = SendHeader::default();
        assert_eq!(bare.format(), "len=0\n");
        assert_eq!(SendHeader::parse(b"len=0"), Ok(bare));
    }

    #[test]
    fn bad_send_headers_are_einval() {
        crate::assert_all_einval(
            SendHeader::parse,
            &[
                b"to=@x".as_slice(),
                b"len=0 bogus=1",
                b"len=+1",
                b"len=1 len=1",
                b"len=0 oob=2",
                b"len=0 creds=1:2",
                b"len=0 creds=1:2:3:4",
                b"len=0 creds=1:4294967295:3",
                b"len=0 to=@\\x4",
                b"len=0 rights=9223372036854775813",
                b"len",
                b"len=0 \xff",
                b"",
            ],
        );
    }

    #[test]
    fn received_headers_round_trip() {
        let h = RecvHeader {
            len: 3,
            from: Some(Addr::Abstract(b"00001".to_vec())),
            creds: Some(Cred {
                pid: 0,
                uid: 65534,
                gid: 65534,
            }),
            pidfd: Some(12),
            rights: vec![4, FILE_TAG | 5],
            ctrunc: true,
            stamp: Some((1_796_444_175_000_000_042, crate::tstamp::Tstamp(3))),
        };
        let line = h.format();
        assert_eq!(
            line,
            "len=3 from=@00001 creds=0:65534:65534 pidfd=12 tstamp=1796444175.000000042/3 rights=4,file:5 flags=ctrunc\n"
        );
        let rec = [line.as_bytes(), b"abcdef"].concat();
        let (back, payload) = RecvHeader::split(&rec).unwrap();
        assert_eq!((back, payload), (h, &b"abc"[..]));
        let (short, p) = RecvHeader::split(b"len=4 from=run/x\nab").unwrap();
        assert_eq!(short.from, Some(Addr::Path(b"run/x".to_vec())));
        assert_eq!(p, b"ab");
    }

    #[test]
    fn bad_received_headers_are_einval() {
        crate::assert_all_einval(
            RecvHeader::split,
            &[
                b"len=1 flags=odd\nx".as_slice(),
                b"len=1 from=@\\q\nx",
                b"len=1 pidfd=-\nx",
                b"len=1 tstamp=1.5/1\nx",
                b"len=1 tstamp=0.000000000/1\nx",
                b"len=1 tstamp=1.000000000\nx",
                b"len=1 to=@x\nx",
                b"len=1",
                b"from=@x\n",
            ],
        );
    }
}

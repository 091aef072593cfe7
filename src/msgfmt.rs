//! The text framing of `msg` files (SPEC §5): a header line of key=value
//! fields, then exactly `len` payload bytes.

use nix::errno::Errno;

use crate::engine::{Addr, Ucred};

/// Longest header line accepted on a write.
pub const MAX_HEADER: usize = 4096;
/// SCM_MAX_FD: sockets one message may pass.
pub const SCM_MAX_FD: usize = 253;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SendHeader {
    pub len: usize,
    pub to: Option<Addr>,
    pub creds: Option<Ucred>,
    pub rights: Vec<u64>,
    /// `oob=1`: the payload's last byte is out-of-band (send with MSG_OOB).
    pub oob: bool,
}

pub fn parse_header(line: &[u8]) -> Result<SendHeader, Errno> {
    let text = std::str::from_utf8(line).map_err(|_| Errno::EINVAL)?;
    let mut h = SendHeader::default();
    let mut have_len = false;
    let mut seen: Vec<&str> = Vec::with_capacity(4);
    for field in text.split_ascii_whitespace() {
        let (k, v) = field.split_once('=').ok_or(Errno::EINVAL)?;
        // Each field at most once: a record must not mean two things.
        if seen.contains(&k) {
            return Err(Errno::EINVAL);
        }
        seen.push(k);
        match k {
            "len" => {
                h.len = number(v)?;
                have_len = true;
            }
            "to" => h.to = Some(Addr::parse(v.as_bytes())?),
            "creds" => h.creds = Some(parse_creds(v)?),
            "oob" => {
                h.oob = match v {
                    "1" => true,
                    "0" => false,
                    _ => return Err(Errno::EINVAL),
                }
            }
            "rights" => {
                h.rights = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(passed_item)
                    .collect::<Result<_, _>>()?;
                if h.rights.len() > SCM_MAX_FD {
                    return Err(Errno::EINVAL);
                }
            }
            _ => return Err(Errno::EINVAL),
        }
    }
    if !have_len {
        return Err(Errno::EINVAL);
    }
    Ok(h)
}

/// One item of `rights=`: a socket number, or `file:T` for a file held by
/// the daemon (its depot tag without the tag bit, see engine/held.rs).
fn passed_item(v: &str) -> Result<u64, Errno> {
    use crate::engine::held::FILE_TAG;
    match v.strip_prefix("file:") {
        Some(t) => {
            let t = number::<u64>(t)?;
            if t & FILE_TAG != 0 {
                return Err(Errno::EINVAL);
            }
            Ok(t | FILE_TAG)
        }
        None => {
            let n = number::<u64>(v)?;
            if n & FILE_TAG != 0 {
                return Err(Errno::EINVAL);
            }
            Ok(n)
        }
    }
}

fn format_passed_item(id: u64) -> String {
    use crate::engine::held::FILE_TAG;
    if id & FILE_TAG != 0 {
        format!("file:{}", id & !FILE_TAG)
    } else {
        id.to_string()
    }
}

/// A decimal number written as digits only (no sign, no spaces).
fn number<T: std::str::FromStr>(v: &str) -> Result<T, Errno> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Errno::EINVAL);
    }
    v.parse().map_err(|_| Errno::EINVAL)
}

fn parse_creds(v: &str) -> Result<Ucred, Errno> {
    let mut it = v.split(':');
    let mut next = || it.next().ok_or(Errno::EINVAL);
    let pid = next()?;
    let pid = match pid.strip_prefix('-') {
        Some(abs) => -number::<i32>(abs)?,
        None => number::<i32>(pid)?,
    };
    let uid = number::<u32>(next()?)?;
    let gid = number::<u32>(next()?)?;
    if it.next().is_some() || uid == u32::MAX || gid == u32::MAX {
        return Err(Errno::EINVAL);
    }
    Ok(Ucred { pid, uid, gid })
}

/// What a received record's header shows besides the length.
pub struct Received<'a> {
    pub from: Option<&'a Addr>,
    pub creds: Option<Ucred>,
    /// The sender's pid (SO_PASSPIDFD): `pidfd=PID`.
    pub pidfd: Option<i32>,
    /// Passed sockets, and files as `file:T`.
    pub rights: &'a [u64],
    /// Passed sockets were dropped (MSG_CTRUNC): `flags=ctrunc`.
    pub ctrunc: bool,
}

/// The header of a received record. A record always holds the whole
/// message, so MSG_TRUNC has no place in it.
pub fn format_header(len: usize, r: &Received) -> String {
    let Received {
        from,
        creds,
        pidfd,
        rights,
        ctrunc,
    } = *r;
    let mut s = format!("len={len}");
    if let Some(a) = from {
        s.push_str(" from=");
        s.push_str(&a.display());
    }
    if let Some(c) = creds {
        s.push_str(&format!(" creds={}:{}:{}", c.pid, c.uid, c.gid));
    }
    if let Some(pid) = pidfd {
        s.push_str(&format!(" pidfd={pid}"));
    }
    if !rights.is_empty() {
        let list: Vec<String> = rights.iter().map(|r| format_passed_item(*r)).collect();
        s.push_str(" rights=");
        s.push_str(&list.join(","));
    }
    if ctrunc {
        s.push_str(" flags=ctrunc");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `buf` as exactly one record: its header and payload.
    fn parse_record(buf: &[u8]) -> Result<(SendHeader, &[u8]), Errno> {
        let (h, start, end) = record_at(buf, 0)?;
        if end != buf.len() {
            return Err(Errno::EINVAL);
        }
        Ok((h, &buf[start..end]))
    }

    #[test]
    fn records_parse_and_format() {
        let (h, p) = parse_record(b"len=5 to=@srv creds=1:2:3 rights=7,9\nhello").unwrap();
        assert_eq!(h.len, 5);
        assert_eq!(h.to, Some(Addr::Abstract(b"srv".to_vec())));
        assert_eq!(
            h.creds,
            Some(Ucred {
                pid: 1,
                uid: 2,
                gid: 3
            })
        );
        assert_eq!(h.rights, vec![7, 9]);
        let (h, _) = parse_record(b"len=0 rights=file:5,3\n").unwrap();
        assert_eq!(h.rights, vec![5 | crate::engine::held::FILE_TAG, 3]);
        let r = Received {
            from: None,
            creds: None,
            pidfd: Some(12),
            rights: &h.rights,
            ctrunc: false,
        };
        assert_eq!(format_header(0, &r), "len=0 pidfd=12 rights=file:5,3\n");
        assert_eq!(
            parse_record(b"len=0 rights=9223372036854775813\n"),
            Err(Errno::EINVAL)
        );
        assert_eq!(p, b"hello");
        assert_eq!(parse_record(b"len=4\nhello"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"to=@x\n"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=0 bogus=1\n"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=+1\nx"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=1 len=1\nx"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=0"), Err(Errno::EINVAL));
        let many: Vec<String> = (0..254).map(|i| i.to_string()).collect();
        let rec = format!("len=0 rights={}\n", many.join(","));
        assert_eq!(parse_record(rec.as_bytes()), Err(Errno::EINVAL));
        let from = Addr::Abstract(b"00001".to_vec());
        let mut r = Received {
            from: Some(&from),
            creds: Some(Ucred::NONE),
            pidfd: None,
            rights: &[],
            ctrunc: false,
        };
        assert_eq!(
            format_header(3, &r),
            "len=3 from=@00001 creds=0:65534:65534
"
        );
        (r.from, r.creds, r.rights, r.ctrunc) = (None, None, &[4, 5], true);
        assert_eq!(format_header(0, &r), "len=0 rights=4,5 flags=ctrunc\n");
    }
}

/// Collects what a writer sends to a `msg` file until records are whole:
/// a shell's `printf` may split one record over several writes.
#[derive(Default)]
pub struct Assembler {
    buf: Vec<u8>,
}

impl Assembler {
    /// Bytes waiting for the rest of their record.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Adds `data`; returns the records now complete (possibly none). A
    /// malformed header fails with EINVAL and drops what was buffered.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<u8>, Errno> {
        self.buf.extend_from_slice(data);
        let mut end = 0;
        loop {
            let rest = &self.buf[end..];
            let Some(nl) = rest.iter().take(MAX_HEADER).position(|&b| b == b'\n') else {
                if rest.len() >= MAX_HEADER {
                    self.buf.clear();
                    return Err(Errno::EINVAL);
                }
                break;
            };
            let h = match parse_header(&rest[..nl]) {
                Ok(h) => h,
                Err(e) => {
                    self.buf.clear();
                    return Err(e);
                }
            };
            if h.len > crate::engine::MAX_MSG {
                self.buf.clear();
                return Err(Errno::EMSGSIZE);
            }
            if rest.len() < nl + 1 + h.len {
                break;
            }
            end += nl + 1 + h.len;
        }
        let rest = self.buf.split_off(end);
        Ok(std::mem::replace(&mut self.buf, rest))
    }
}

/// One whole record inside `buf` at `at`: its header, and where its payload
/// starts and ends.
pub fn record_at(buf: &[u8], at: usize) -> Result<(SendHeader, usize, usize), Errno> {
    let rest = &buf[at..];
    let nl = rest.iter().position(|&b| b == b'\n').ok_or(Errno::EINVAL)?;
    let h = parse_header(&rest[..nl])?;
    let start = at + nl + 1;
    let end = start + h.len;
    if end > buf.len() {
        return Err(Errno::EINVAL);
    }
    Ok((h, start, end))
}

#[cfg(test)]
mod assembler_tests {
    use super::*;

    #[test]
    fn records_split_over_writes_are_joined() {
        let mut a = Assembler::default();
        assert_eq!(a.push(b"len=5 to=@x\n").unwrap(), b"");
        assert_eq!(a.push(b"hel").unwrap(), b"");
        assert_eq!(
            a.push(b"lolen=0\nlen=2\nz").unwrap(),
            b"len=5 to=@x\nhellolen=0\n"
        );
        assert_eq!(a.push(b"z").unwrap(), b"len=2\nzz");
        assert_eq!(a.push(b"bogus\n"), Err(Errno::EINVAL));
        assert_eq!(a.push(b"len=1\n!").unwrap(), b"len=1\n!");
        let (h, s, e) = record_at(b"len=5 to=@x\nhellolen=0\n", 0).unwrap();
        assert_eq!((h.len, s, e), (5, 12, 17));
    }
}

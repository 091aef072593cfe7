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
}

/// Splits a write into its header and payload; EINVAL unless it is exactly
/// one well-formed record.
pub fn parse_record(buf: &[u8]) -> Result<(SendHeader, &[u8]), Errno> {
    let nl = buf
        .iter()
        .take(MAX_HEADER)
        .position(|&b| b == b'\n')
        .ok_or(Errno::EINVAL)?;
    let header = parse_header(&buf[..nl])?;
    let payload = &buf[nl + 1..];
    if payload.len() != header.len {
        return Err(Errno::EINVAL);
    }
    Ok((header, payload))
}

pub fn parse_header(line: &[u8]) -> Result<SendHeader, Errno> {
    let text = std::str::from_utf8(line).map_err(|_| Errno::EINVAL)?;
    let mut h = SendHeader::default();
    let mut have_len = false;
    for field in text.split_ascii_whitespace() {
        let (k, v) = field.split_once('=').ok_or(Errno::EINVAL)?;
        match k {
            "len" => {
                h.len = v.parse().map_err(|_| Errno::EINVAL)?;
                have_len = true;
            }
            "to" => h.to = Some(Addr::parse(v.as_bytes())?),
            "creds" => h.creds = Some(parse_creds(v)?),
            "rights" => {
                h.rights = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|n| n.parse::<u64>().map_err(|_| Errno::EINVAL))
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

fn parse_creds(v: &str) -> Result<Ucred, Errno> {
    let mut it = v.split(':');
    let mut next = || it.next().ok_or(Errno::EINVAL);
    let pid = next()?.parse::<i32>().map_err(|_| Errno::EINVAL)?;
    let uid = next()?.parse::<u32>().map_err(|_| Errno::EINVAL)?;
    let gid = next()?.parse::<u32>().map_err(|_| Errno::EINVAL)?;
    if it.next().is_some() || uid == u32::MAX || gid == u32::MAX {
        return Err(Errno::EINVAL);
    }
    Ok(Ucred { pid, uid, gid })
}

/// The header of a received record.
pub fn format_header(
    len: usize,
    from: Option<&Addr>,
    creds: Option<Ucred>,
    rights: &[u64],
) -> String {
    let mut s = format!("len={len}");
    if let Some(a) = from {
        s.push_str(" from=");
        s.push_str(&a.display());
    }
    if let Some(c) = creds {
        s.push_str(&format!(" creds={}:{}:{}", c.pid, c.uid, c.gid));
    }
    if !rights.is_empty() {
        let list: Vec<String> = rights.iter().map(|r| r.to_string()).collect();
        s.push_str(" rights=");
        s.push_str(&list.join(","));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(p, b"hello");
        assert_eq!(parse_record(b"len=4\nhello"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"to=@x\n"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=0 bogus=1\n"), Err(Errno::EINVAL));
        assert_eq!(parse_record(b"len=0"), Err(Errno::EINVAL));
        let many: Vec<String> = (0..254).map(|i| i.to_string()).collect();
        let rec = format!("len=0 rights={}\n", many.join(","));
        assert_eq!(parse_record(rec.as_bytes()), Err(Errno::EINVAL));
        let hdr = format_header(
            3,
            Some(&Addr::Abstract(b"00001".to_vec())),
            Some(Ucred::NONE),
            &[],
        );
        assert_eq!(hdr, "len=3 from=@00001 creds=0:65534:65534\n");
    }
}

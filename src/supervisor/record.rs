//! Datagrams too large for one message ioctl go through the socket's `msg`
//! file as one record, a header line and the payload, as the library
//! writes and reads them (preload/src/msg.rs send_record, recv_record;
//! the format is src/engine/addr.rs's escape). Opened with O_NONBLOCK: the
//! supervisor never parks in the daemon, its caller polls and retries.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;

use super::daemon::{Daemon, Got, Meta, Res};

const FILE_TAG: u64 = 1 << 63;

fn escape(wire: &[u8]) -> String {
    let (mut s, bytes) = match wire.first() {
        Some(0) => ("@".to_string(), &wire[1..]),
        _ => (String::new(), wire),
    };
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x21..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

fn unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match (text[i], text.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) => {
                let hex = text
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok());
                out.push(
                    hex.and_then(|h| u8::from_str_radix(h, 16).ok())
                        .unwrap_or(b'?'),
                );
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn open(d: &Daemon, id: u64, write: bool) -> Res<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(d.mount.join(format!(".udsfs/sock/{id}/msg")))
        .map_err(errno)
}

/// Sends `data` as one record of socket `id`; EAGAIN when the queue is full.
pub fn send(d: &Daemon, id: u64, data: &[u8], meta: &Meta) -> Res<usize> {
    let mut head = format!("len={}", data.len());
    if let Some(to) = meta.to {
        head.push_str(" to=");
        head.push_str(&escape(to));
    }
    if let Some([p, u, g]) = meta.creds {
        head.push_str(&format!(" creds={}:{u}:{g}", p as i32));
    }
    if !meta.rights.is_empty() {
        let ids: Vec<String> = meta.rights.iter().map(|r| r.to_string()).collect();
        head.push_str(&format!(" rights={}", ids.join(",")));
    }
    head.push('\n');
    let mut rec = head.into_bytes();
    rec.extend_from_slice(data);
    open(d, id, true)?.write(&rec).map_err(errno)?;
    Ok(data.len())
}

/// Reads the record at the head of socket `id`'s queue, `want` bytes of
/// its payload at most.
pub fn recv(d: &Daemon, id: u64, want: usize) -> Res<Got> {
    let mut buf = vec![0u8; want.min(super::mem::MAX_COPY) + 8192];
    let n = open(d, id, false)?.read(&mut buf).map_err(errno)?;
    buf.truncate(n);
    let nl = buf.iter().position(|&b| b == b'\n').ok_or(libc::EIO)?;
    let mut got = Got {
        data: Vec::new(),
        full_len: 0,
        from: Vec::new(),
        // Records name the sender in the mount's terms.
        from_as_given: false,
        too_big: false,
        creds: None,
        rights: Vec::new(),
        ctrunc: false,
        oob: false,
        timeo_left: crate::fuse::ioctl_abi::TIMEO_NONE,
    };
    for field in buf[..nl].split(|&b| b == b' ') {
        let Some(eq) = field.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (k, raw) = (&field[..eq], &field[eq + 1..]);
        let v = String::from_utf8_lossy(raw);
        match k {
            b"len" => got.full_len = v.parse().map_err(|_| libc::EIO)?,
            b"from" => {
                got.from = match raw.strip_prefix(b"@") {
                    Some(name) => std::iter::once(0).chain(unescape(name)).collect(),
                    None => unescape(raw),
                }
            }
            b"creds" => {
                let p: Vec<i64> = v.split(':').filter_map(|x| x.parse().ok()).collect();
                if let [pid, uid, gid] = p[..] {
                    got.creds = Some([pid as u32, uid as u32, gid as u32]);
                }
            }
            b"rights" => {
                got.rights = v
                    .split(',')
                    .filter_map(|r| match r.strip_prefix("file:") {
                        Some(t) => t.parse::<u64>().ok().map(|t| t | FILE_TAG),
                        None => r.parse().ok(),
                    })
                    .collect()
            }
            b"flags" => got.ctrunc = v.split(',').any(|f| f == "ctrunc"),
            _ => {}
        }
    }
    let payload = &buf[nl + 1..];
    got.data = payload[..payload.len().min(want).min(got.full_len)].to_vec();
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_addresses_escape_and_come_back() {
        for wire in [&b"run/x.sock"[..], b"\0abs name", b"a\\b", b"\xff/\x01"] {
            let e = escape(wire);
            assert!(!e.contains(' ') && !e.contains('\n'), "{e}");
            let back: Vec<u8> = match e.as_bytes().strip_prefix(b"@") {
                Some(n) => std::iter::once(0).chain(unescape(n)).collect(),
                None => unescape(e.as_bytes()),
            };
            assert_eq!(back, wire);
        }
        assert_eq!(unescape(b"\\x4"), b"?".to_vec(), "cut short: no panic");
    }
}

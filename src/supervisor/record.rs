//! Datagrams too large for one message ioctl go through the socket's `msg`
//! file as one record (`udsfs_proto::record`), as the library sends and
//! reads them. A blocking send's write parks in the daemon until the record
//! fits (under SO_SNDTIMEO); reads never wait (the record is there).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;

use udsfs_proto::Cred;
use udsfs_proto::addr::Addr;
use udsfs_proto::ioctl::TIMEO_NONE;
use udsfs_proto::record::{self, MAX_DGRAM, SendHeader};

use super::daemon::{Daemon, Got, Meta, Res};

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn open(d: &Daemon, id: u64, write: bool, wait: bool) -> Res<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(if wait { 0 } else { libc::O_NONBLOCK })
        .open(d.mount.join(format!(".udsfs/sock/{id}/msg")))
        .map_err(errno)
}

/// Sends `data` as one record of socket `id`; EAGAIN when the queue is
/// full, or with `wait` parked until it is not (EINTR when interrupted).
pub fn send(d: &Daemon, id: u64, data: &[u8], meta: &Meta, wait: bool) -> Res<usize> {
    let head = SendHeader {
        len: data.len(),
        to: meta.to.map(Addr::from_wire).transpose()?.flatten(),
        creds: meta.creds.map(Cred::from_words),
        rights: meta.rights.to_vec(),
        oob: false,
    };
    let mut rec = head.format().into_bytes();
    rec.extend_from_slice(data);
    let n = open(d, id, true, wait)?.write(&rec).map_err(errno)?;
    record::record_written(n, rec.len())?;
    Ok(data.len())
}

/// Reads the record at the head of socket `id`'s queue, `want` bytes of
/// its payload at most.
pub fn recv(d: &Daemon, id: u64, want: usize) -> Res<Got> {
    let mut f = open(d, id, false, false)?;
    // The daemon wrote it: one it cannot have written is an I/O error.
    let (h, data) = record::read_record(|b| f.read(b).map_err(errno), want.min(MAX_DGRAM))?;
    Ok(Got {
        data,
        full_len: h.len,
        // Records name the sender in the mount's terms.
        from: h.from.map(|a| a.to_wire()).unwrap_or_default(),
        from_as_given: false,
        too_big: false,
        creds: h.creds.map(Cred::to_words),
        // A record names the sender's pid only (`pidfd=`): no pinned pidfd.
        pidfd: h.pidfd,
        pidfd_tag: None,
        rights: h.rights,
        ctrunc: h.ctrunc,
        oob: false,
        timeo_left: TIMEO_NONE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use udsfs_proto::record::RecvHeader;

    #[test]
    fn record_addresses_escape_and_come_back() {
        for wire in [&b"run/x.sock"[..], b"\0abs name", b"a\\b", b"\xff/\x01"] {
            let to = Addr::from_wire(wire).unwrap();
            let e = to.as_ref().unwrap().display();
            assert!(!e.contains(' ') && !e.contains('\n'), "{e}");
            let line = format!("len=0 from={e}");
            let back = RecvHeader::parse(line.as_bytes()).unwrap().from;
            assert_eq!(back.map(|a| a.to_wire()).as_deref(), Some(wire));
        }
        // Cut short: refused, as the daemon refuses it, and no panic.
        assert_eq!(RecvHeader::parse(b"len=0 from=@\\x4"), Err(libc::EINVAL));
    }
}

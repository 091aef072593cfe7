//! The `msg` files' records (their grammar is `udsfs_proto::record`) in
//! the engine's terms, and the assembly of records written in pieces.

use nix::errno::Errno;
use udsfs_proto::record::{self, RecvHeader};

use crate::engine::{Addr, Ucred};

pub use udsfs_proto::SCM_MAX_FD;
pub use udsfs_proto::record::MAX_HEADER;

/// A written record's header in the engine's terms.
pub type SendHeader = record::SendHeader<Addr>;

pub fn parse_header(line: &[u8]) -> Result<SendHeader, Errno> {
    let h: record::SendHeader = record::SendHeader::parse(line).map_err(Errno::from_raw)?;
    Ok(h.map(Addr::from))
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
    /// The receive timestamp and the reader's state: `tstamp=`.
    pub stamp: Option<(u64, udsfs_proto::sockopt::Tstamp)>,
}

/// The header of a received record.
pub fn format_header(len: usize, r: &Received) -> String {
    RecvHeader {
        len,
        from: r.from.cloned().map(Into::into),
        creds: r.creds,
        pidfd: r.pidfd,
        rights: r.rights.to_vec(),
        ctrunc: r.ctrunc,
        stamp: r.stamp,
    }
    .format()
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
        assert_eq!(h.rights, vec![5 | crate::engine::rights::FILE_TAG, 3]);
        let r = Received {
            from: None,
            creds: None,
            pidfd: Some(12),
            rights: &h.rights,
            ctrunc: false,
            stamp: None,
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
            stamp: None,
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

/// Collects what a writer sends to a `msg` file until records are whole
/// (a shell's `printf` may split one record over several writes), and
/// remembers a stream record only partly sent: write(2) reports the header
/// and payload bytes queued, so the next bytes written are the rest of that
/// record's payload, with no new header. A writer that follows write(2)'s
/// count thus sends every byte exactly once.
#[derive(Default)]
pub struct Assembler {
    /// Bytes taken (reported written) but not sent: the start of a record
    /// whose end has not come yet, or the unsent rest of a started one.
    pending: Vec<u8>,
    /// The record whose payload continues with `pending` and the next writes.
    continued: Option<Continued>,
}

/// A record partly sent: its header (without the sockets, which went with
/// the first piece) and the payload bytes still to come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continued {
    pub header: SendHeader,
    pub owed: usize,
}

/// One record, or the part of one, ready to send.
#[derive(Debug)]
pub struct Segment {
    pub header: SendHeader,
    /// Where the record begins in the batch's input; for the rest of a
    /// record begun earlier, where its payload resumes.
    pub at: usize,
    pub payload: std::ops::Range<usize>,
    /// The rest of a record begun earlier: its credentials were checked and
    /// its sockets sent already.
    pub begun: bool,
    /// Payload bytes of this record that come after this batch.
    pub more: usize,
}

/// What one write adds up to: the bytes kept before it and the write itself,
/// and the segments in them that can be sent.
#[derive(Debug)]
pub struct Batch {
    pub input: Vec<u8>,
    /// How many leading bytes of `input` were taken by earlier writes.
    pub prior: usize,
    pub segments: Vec<Segment>,
    /// Where the last whole segment ends; what follows is an unfinished record.
    pub whole: usize,
    /// The payload length of that unfinished record, once its header is
    /// here: a datagram too large for its socket is refused at its first
    /// piece, before the rest is written.
    pub unfinished: Option<usize>,
}

/// Most bytes one read or write moves on Linux (MAX_RW_COUNT: INT_MAX
/// rounded down to a page): the longest record.
pub const MAX_RW_COUNT: usize = 0x7fff_f000;

/// How sending a batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Everything up to `whole` was sent.
    Sent,
    /// It stopped for a while (EAGAIN, a signal): what was not sent is kept.
    Paused,
    /// It failed (EPIPE, EMSGSIZE, ...): a record not begun is dropped.
    Failed,
    /// A fault rule cut a stream send short (short_write, limit_data) past
    /// the bytes earlier writes gave: what was queued is reported, and, as
    /// after a pause, nothing else is kept and the rest of the record is
    /// the next bytes written.
    Cut,
}

impl Assembler {
    /// Bytes taken (reported written) but not sent yet.
    pub fn buffered(&self) -> usize {
        self.pending.len()
    }

    /// Adds `data` to what is kept and returns the segments now ready. A
    /// malformed header fails with EINVAL (a too long record with EMSGSIZE)
    /// and drops what was kept.
    pub fn take(&mut self, data: &[u8]) -> Result<Batch, Errno> {
        let prior = self.pending.len();
        let mut input = std::mem::take(&mut self.pending);
        input.extend_from_slice(data);
        let mut segments = Vec::new();
        let mut end = 0;
        let mut unfinished = None;
        if let Some(c) = self.continued.take() {
            let n = c.owed.min(input.len());
            segments.push(Segment {
                header: c.header,
                at: 0,
                payload: 0..n,
                begun: true,
                more: c.owed - n,
            });
            end = n;
        }
        loop {
            let rest = &input[end..];
            let Some(nl) = rest.iter().take(MAX_HEADER).position(|&b| b == b'\n') else {
                if rest.len() >= MAX_HEADER {
                    return Err(Errno::EINVAL);
                }
                break;
            };
            let header = parse_header(&rest[..nl])?;
            // A datagram too large for its socket is refused by the engine
            // (EMSGSIZE, ENOBUFS) at its first piece (`Engine::record_fits`);
            // a stream takes any, up to what one Linux call transfers.
            if header.len > MAX_RW_COUNT {
                return Err(Errno::EMSGSIZE);
            }
            if rest.len() < nl + 1 + header.len {
                unfinished = Some(header.len);
                break;
            }
            let start = end + nl + 1;
            let stop = start + header.len;
            segments.push(Segment {
                header,
                at: end,
                payload: start..stop,
                begun: false,
                more: 0,
            });
            end = stop;
        }
        Ok(Batch {
            input,
            prior,
            segments,
            whole: end,
            unfinished,
        })
    }

    /// Drops what is kept: a record refused before its payload is all here
    /// (the next bytes written begin a new record).
    pub fn discard(&mut self) {
        self.pending.clear();
        self.continued = None;
    }

    /// Records how far sending `b` got (`done`, an offset into its input:
    /// a segment's `at` while nothing of it is queued, inside its payload
    /// once part is) and returns how many bytes of the write to report.
    /// Zero means none: the caller reports the error (or waits) instead.
    pub fn settle(&mut self, b: &Batch, done: usize, how: Ending) -> usize {
        let written = b.input.len() - b.prior;
        if how == Ending::Sent || done >= b.whole {
            self.pending = b.input[b.whole..].to_vec();
            self.continued = b.segments.last().filter(|s| s.more > 0).map(|s| Continued {
                header: s.header.clone(),
                owed: s.more,
            });
            return written;
        }
        self.pending.clear();
        self.continued = None;
        if how == Ending::Failed && done <= b.prior {
            // Nothing of this write is reported: the failing record goes.
            return 0;
        }
        // Paused, cut, or failed after part of the write was taken: that
        // part is reported, and the rest of a record begun is still its
        // payload (the writer that goes on gets the error again, not EINVAL).
        let inside = b
            .segments
            .iter()
            .find(|s| s.payload.contains(&done) && (s.begun || done > s.at));
        self.continued = inside.map(|s| Continued {
            header: SendHeader {
                rights: Vec::new(),
                ..s.header.clone()
            },
            owed: s.payload.end - done + s.more,
        });
        if done >= b.prior {
            done - b.prior
        } else {
            self.pending = b.input[done..b.prior].to_vec();
            0
        }
    }

    /// Adds `data`; returns the whole records now complete (possibly none),
    /// as if each were sent at once.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<u8>, Errno> {
        let b = self.take(data)?;
        self.settle(&b, b.whole, Ending::Sent);
        let mut out = b.input;
        out.truncate(b.whole);
        Ok(out)
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

#[cfg(test)]
mod continuation_tests {
    use super::*;

    #[test]
    fn a_record_partly_sent_takes_the_next_bytes_as_its_payload() {
        let mut a = Assembler::default();
        let b = a.take(b"len=10\n0123456789len=1\nz").unwrap();
        assert_eq!(b.segments.len(), 2);
        // 4 payload bytes queued: the header and those 4 count as written.
        assert_eq!(a.settle(&b, 7 + 4, Ending::Paused), 11);
        let b = a.take(b"456789len=1\nz").unwrap();
        let first = &b.segments[0];
        assert!(first.begun);
        assert_eq!((first.payload.clone(), first.more), (0..6, 0));
        assert_eq!(b.segments[1].header.len, 1);
        assert_eq!(a.settle(&b, b.whole, Ending::Sent), 13);
        assert_eq!(a.push(b"len=2\nok").unwrap(), b"len=2\nok");
    }

    #[test]
    fn a_cut_record_reports_what_was_queued_and_drops_the_records_after_it() {
        let mut a = Assembler::default();
        let b = a.take(b"len=10\n0123456789len=1\nz").unwrap();
        // A rule let 4 payload bytes through: the header and those count.
        assert_eq!(a.settle(&b, 7 + 4, Ending::Cut), 11);
        assert_eq!(a.buffered(), 0);
        // The writer goes on from there: the rest of the payload, then the
        // second record, now read afresh.
        let b = a.take(b"456789len=1\nz").unwrap();
        assert!(b.segments[0].begun);
        assert_eq!(&b.input[b.segments[0].payload.clone()], b"456789");
        assert_eq!(&b.input[b.segments[1].payload.clone()], b"z");
        assert_eq!(a.settle(&b, b.whole, Ending::Sent), 13);
        assert_eq!(a.push(b"len=2\nok").unwrap(), b"len=2\nok");
    }

    #[test]
    fn nothing_queued_keeps_what_earlier_writes_gave() {
        let mut a = Assembler::default();
        assert_eq!(a.push(b"len=3 rights=4\nab").unwrap(), b"");
        let b = a.take(b"c").unwrap();
        assert_eq!(b.prior, 17);
        assert_eq!(a.settle(&b, 0, Ending::Paused), 0);
        // The same byte written again completes the same record, rights and all.
        let b = a.take(b"c").unwrap();
        assert_eq!(b.segments[0].header.rights, vec![4]);
        assert_eq!(&b.input[b.segments[0].payload.clone()], b"abc");
    }

    #[test]
    fn a_continued_record_spans_several_writes_and_a_failure_drops_it() {
        let mut a = Assembler::default();
        let b = a.take(b"len=8 rights=3\nab").unwrap();
        assert!(b.segments.is_empty());
        assert_eq!(a.settle(&b, 0, Ending::Sent), 17);
        let b = a.take(b"cdefgh").unwrap();
        assert_eq!(a.settle(&b, 15 + 3, Ending::Paused), 1);
        let b = a.take(b"def").unwrap();
        let c = &b.segments[0];
        assert!(c.begun && c.header.rights.is_empty());
        assert_eq!((c.payload.clone(), c.more), (0..3, 2));
        assert_eq!(a.settle(&b, 1, Ending::Failed), 1);
        // Failed after a partial count: the rest is still that record's.
        let b = a.take(b"efgh").unwrap();
        assert_eq!(b.segments[0].payload, 0..4);
        assert_eq!(a.settle(&b, 0, Ending::Failed), 0);
        assert_eq!(a.push(b"len=1\nx").unwrap(), b"len=1\nx");
    }
}

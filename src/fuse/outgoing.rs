//! A write in progress: what it took and how far sending got, kept across
//! the retries of a parked write so that nothing is sent twice or lost.

use std::borrow::Cow;
use std::sync::Arc;

use nix::errno::Errno;

use crate::engine::{Caller, Engine, Outgoing, SendMsg, SockType, Socket, Waiter};
use crate::msgfmt::{Batch, Segment};

pub enum WriteJob<'a> {
    /// ctl, data and gc files: the bytes of the write, `done` of them taken.
    Plain { data: Cow<'a, [u8]>, done: usize },
    /// msg files: the segments of the write (see `msgfmt::Assembler`), how
    /// far into the batch's input sending got, and the sockets and files
    /// passed by the record being sent.
    Msg {
        batch: Batch,
        done: usize,
        held: Held,
    },
}

impl WriteJob<'_> {
    /// The bytes the job holds while it waits (charged to the mount's
    /// bytes held when it parks).
    pub fn held_bytes(&self) -> u64 {
        match self {
            WriteJob::Plain { data, done } => data.len().saturating_sub(*done) as u64,
            WriteJob::Msg { batch, done, .. } => batch.whole.saturating_sub(*done) as u64,
        }
    }

    /// The job with its own copy of the bytes, to outlive the request.
    pub fn into_owned(self) -> WriteJob<'static> {
        match self {
            WriteJob::Plain { data, done } => WriteJob::Plain {
                data: Cow::Owned(data.into_owned()),
                done,
            },
            WriteJob::Msg { batch, done, held } => WriteJob::Msg { batch, done, held },
        }
    }
}

/// Sockets and files a record passes, held from its first try until it is
/// queued (as sendmsg holds its fds while it waits); let go if it never is.
pub struct Held {
    eng: Arc<Engine>,
    /// The segment they were taken for.
    seg: Option<usize>,
    out: Outgoing,
}

impl Held {
    pub fn new(eng: Arc<Engine>) -> Held {
        Held {
            eng,
            seg: None,
            out: Outgoing::default(),
        }
    }

    fn release(&mut self) {
        // Files not sent go back to their deposit (while its connection lives).
        self.eng.put_back(std::mem::take(&mut self.out));
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Sends the segments of `batch` from `*done` on. `*done` stays at a
/// segment's `at` until part of it is queued, so a retry starts it afresh.
/// True when a fault rule cut a stream send short (`Sent::cut`): sending
/// stopped at `*done`, which is past the bytes earlier writes gave.
pub fn send_batch(
    s: &Arc<Socket>,
    batch: &Batch,
    done: &mut usize,
    held: &mut Held,
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<bool, Errno> {
    for (i, seg) in batch.segments.iter().enumerate() {
        if (*done < seg.payload.end || (*done == seg.at && !seg.begun))
            && send_segment(s, batch, i, done, held, caller, w)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Sends segment `i` of `batch`; true when a rule cut it short.
fn send_segment(
    s: &Arc<Socket>,
    batch: &Batch,
    i: usize,
    done: &mut usize,
    held: &mut Held,
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<bool, Errno> {
    let seg: &Segment = &batch.segments[i];
    let h = &seg.header;
    let fresh = !seg.begun && *done <= seg.at;
    let eng = held.eng.clone();
    if fresh && held.seg != Some(i) {
        held.release();
        held.out = eng
            .prepare_send(h.creds, &h.rights, caller, true)
            .inspect_err(|e| {
                log::info!(
                    "socket {}: creds={:?} rights={:?} refused: {}",
                    s.id,
                    h.creds,
                    h.rights,
                    e.desc()
                );
            })?;
        held.seg = Some(i);
    }
    let (start, end) = (seg.payload.start, seg.payload.end);
    let stream = s.ty == SockType::Stream;
    // `oob=1`: the record's last byte goes alone, as the OOB byte, after
    // the rest (a segment followed by more of its record has no last byte).
    if h.oob && (!stream || (start == end && !seg.begun)) {
        held.release();
        return Err(Errno::EOPNOTSUPP);
    }
    let oob = stream && h.oob && seg.more == 0 && end > start;
    let body_end = if oob { end - 1 } else { end };
    let mut from = if fresh { start } else { *done };
    // A record begun by an earlier write was checked then.
    let creds = eng.sender_creds(h.creds, caller, false)?;
    // A datagram goes whole, once, even empty; a stream record may go in
    // pieces. Sockets and files move into the queue with the first piece
    // queued (they stay held while nothing is), so later pieces carry none.
    while from < body_end || !stream {
        let msg = SendMsg::new(&batch.input[from..body_end])
            .to_opt(h.to.as_ref())
            .creds(creds)
            .rights(&mut held.out.rights)
            .nonblock(&mut held.out.nonblock)
            .files(&mut held.out.files);
        let sent = eng.send(s, msg, caller, w)?;
        from += sent.len;
        *done = from;
        if !stream {
            break;
        }
        // The write reports what a rule let through, as a data file's
        // does, once that holds bytes of this write: those earlier writes
        // gave were reported already and still go.
        if sent.cut && from > batch.prior {
            held.release();
            return Ok(true);
        }
    }
    if oob {
        let msg = SendMsg::new(&batch.input[body_end..end])
            .to_opt(h.to.as_ref())
            .creds(creds)
            .rights(&mut held.out.rights)
            .nonblock(&mut held.out.nonblock)
            .files(&mut held.out.files)
            .oob();
        eng.sendmsg(s, msg, caller, None)?;
    }
    // A zero-length stream message sends nothing and drops what it passes,
    // as Linux does.
    *done = end;
    held.release();
    Ok(false)
}

//! A write in progress: what it took and how far sending got, kept across
//! the retries of a parked write so that nothing is sent twice or lost.

use std::borrow::Cow;
use std::sync::Arc;

use nix::errno::Errno;

use crate::engine::{Caller, Engine, SockType, Socket, Ucred, Waiter};
use crate::msgfmt::{Batch, Segment};

pub enum WriteJob<'a> {
    /// ctl, data and gc files: the bytes of the write, `done` of them taken.
    Plain { data: Cow<'a, [u8]>, done: usize },
    /// msg files: the segments of the write (see `msgfmt::Assembler`), how
    /// far into the batch's input sending got, and the sockets passed by the
    /// record being sent.
    Msg {
        batch: Batch,
        done: usize,
        held: Held,
    },
}

impl WriteJob<'_> {
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

/// Sockets a record passes, held from its first try until it is queued (as
/// sendmsg holds its fds while it waits); let go if it never is.
pub struct Held {
    eng: Arc<Engine>,
    /// The segment they were taken for.
    seg: Option<usize>,
    socks: Vec<Arc<Socket>>,
}

impl Held {
    pub fn new(eng: Arc<Engine>) -> Held {
        Held {
            eng,
            seg: None,
            socks: Vec::new(),
        }
    }

    fn release(&mut self) {
        for s in self.socks.drain(..) {
            self.eng.put(&s);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Explicit credentials are the caller's own unless it is root (scm_check_creds).
fn check_creds(c: &Ucred, caller: &Caller) -> Result<(), Errno> {
    if !caller.is_root() {
        let st = caller.status();
        let pid_ok = c.pid == st.tgid;
        let uid_ok = st.uids[..3].contains(&c.uid);
        let gid_ok = st.gids[..3].contains(&c.gid);
        if !(pid_ok && uid_ok && gid_ok) {
            return Err(Errno::EPERM);
        }
    }
    if c.pid <= 0 || !std::path::Path::new(&format!("/proc/{}", c.pid)).exists() {
        return Err(if caller.is_root() {
            Errno::ESRCH
        } else {
            Errno::EPERM
        });
    }
    Ok(())
}

/// Sends the segments of `batch` from `*done` on. `*done` stays at a
/// segment's `at` until part of it is queued, so a retry starts it afresh.
pub fn send_batch(
    s: &Arc<Socket>,
    batch: &Batch,
    done: &mut usize,
    held: &mut Held,
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<(), Errno> {
    for (i, seg) in batch.segments.iter().enumerate() {
        if *done < seg.payload.end || (*done == seg.at && !seg.begun) {
            send_segment(s, batch, i, seg, done, held, caller, w)?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn send_segment(
    s: &Arc<Socket>,
    batch: &Batch,
    i: usize,
    seg: &Segment,
    done: &mut usize,
    held: &mut Held,
    caller: &Caller,
    w: Option<&Waiter>,
) -> Result<(), Errno> {
    let h = &seg.header;
    let fresh = !seg.begun && *done <= seg.at;
    if fresh && held.seg != Some(i) {
        if let Some(c) = &h.creds {
            check_creds(c, caller)?;
        }
        held.release();
        held.socks = held
            .eng
            .hold_for_passing(&h.rights, caller)
            .inspect_err(|e| {
                log::info!(
                    "socket {}: rights={:?} refused: {}",
                    s.id,
                    h.rights,
                    e.desc()
                );
            })?;
        held.seg = Some(i);
    }
    let eng = held.eng.clone();
    let end = seg.payload.end;
    if s.ty != SockType::Stream {
        let payload = &batch.input[seg.payload.clone()];
        eng.send_msg(
            s,
            payload,
            h.to.as_ref(),
            h.creds,
            &mut held.socks,
            caller,
            w,
        )?;
        *done = end;
        held.release();
        return Ok(());
    }
    let mut from = if fresh { seg.payload.start } else { *done };
    while from < end {
        // Sockets go with the first piece of the payload only.
        let mut none = Vec::new();
        let rights = if fresh && from == seg.payload.start {
            &mut held.socks
        } else {
            &mut none
        };
        from += eng.send_msg(
            s,
            &batch.input[from..end],
            h.to.as_ref(),
            h.creds,
            rights,
            caller,
            w,
        )?;
        *done = from;
    }
    // A zero-length stream message sends nothing and drops its sockets, as
    // Linux does.
    *done = end;
    held.release();
    Ok(())
}

//! MSG_PEEK: what a receive would return, left in the queue, starting at
//! SO_PEEK_OFF when it is set (which then moves past what was peeked).

use std::sync::Arc;

use nix::errno::Errno;

use super::socket::{Conn, RCV_SHUTDOWN, SockState, SockType, Socket};
use super::stream_read::peek_off_forward;
use super::{Engine, Received, Result, Ucred, Wakeups};

impl Engine {
    /// Passed sockets come with a peek too (each a new reference, left in
    /// flight in the queue); other passed files do not.
    pub fn peek(&self, s: &Arc<Socket>, maxlen: usize) -> Result<Received> {
        self.peek_waiting(s, maxlen, None)
    }

    /// `peek`; on EAGAIN `w` waits with the readers for the queue to change.
    pub fn peek_waiting(
        &self,
        s: &Arc<Socket>,
        maxlen: usize,
        w: Option<&super::Waiter>,
    ) -> Result<Received> {
        let mut wake = Wakeups::new();
        let res = {
            let mut st = s.lock();
            let r = match s.ty {
                SockType::Stream => self.stream_read(s.id, &mut st, maxlen, true, &mut wake),
                _ => message_peek(s.ty, &mut st, maxlen),
            };
            if let (Err(Errno::EAGAIN), Some(w)) = (&r, w) {
                st.readers.add(w.clone());
            }
            // The peeked sockets stay queued; the reader gets references
            // of its own, as scm_fp_dup gives it new descriptors.
            if let Ok(g) = &r {
                g.rights.iter().for_each(|s| self.hold(s));
            }
            r
        };
        self.finish(wake);
        res
    }

    /// SO_PEEK_OFF: any negative value turns it off (and reads back as given).
    pub fn set_peek_off(&self, s: &Arc<Socket>, off: i32) {
        s.lock().peek_off = off;
    }
}

/// A dgram or seqpacket peek (unix_dgram_recvmsg with MSG_PEEK): the peek
/// offset skips whole messages, then starts inside the one it reaches.
fn message_peek(ty: SockType, st: &mut SockState, maxlen: usize) -> Result<Received> {
    if ty == SockType::Seqpacket && !matches!(st.conn, Conn::Connected(_)) {
        return Err(Errno::ENOTCONN);
    }
    if let Some(e) = st.err.take() {
        return Err(e);
    }
    let mut skip = st.peek_off.max(0) as usize;
    let Some(m) = st.rcvq.iter().find(|m| {
        if skip > 0 && skip >= m.data.len() {
            skip -= m.data.len();
            return false;
        }
        true
    }) else {
        if st.rcvq.is_empty() && ty == SockType::Seqpacket && st.shutdown & RCV_SHUTDOWN != 0 {
            return Ok(Received::default());
        }
        return Err(Errno::EAGAIN);
    };
    let full_len = m.data.len() - skip;
    let data = m.data[skip..skip + full_len.min(maxlen)].to_vec();
    let creds = m.creds.unwrap_or(Ucred::NONE);
    let got = Received {
        full_len,
        from: m.from.clone(),
        creds: st.passcred.then_some(creds),
        pidfd: st.passpidfd.then_some(creds.pid),
        // The pin, shared: the message keeps its own.
        pidfd_file: m.pidfd.clone().filter(|_| st.passpidfd),
        data,
        rights: m.rights.clone(),
        ..Default::default()
    };
    peek_off_forward(st, got.data.len());
    Ok(got)
}

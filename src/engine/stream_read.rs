//! Reading a stream socket as Linux's unix_stream_read_generic does: plain
//! reads, MSG_PEEK starting at SO_PEEK_OFF, and the out-of-band byte's
//! marks (a read stops before the OOB byte; a read that reaches an unread
//! OOB byte first drops it, unless SO_OOBINLINE).

use nix::errno::Errno;

use super::message::{Piece, Received, RecvFlags};
use super::socket::{RCV_SHUTDOWN, SockState};
use super::{Engine, Result, Ucred, Wakeups};

impl Engine {
    /// Up to `f.len` bytes from the queue; `f.peek` leaves them queued (only
    /// SO_PEEK_OFF moves); `f.limit`, `f.after` as RecvFlags says. EAGAIN
    /// when nothing is readable.
    pub(crate) fn stream_read(
        &self,
        receiver: u64,
        st: &mut SockState,
        f: &RecvFlags<'_>,
        wake: &mut Wakeups,
    ) -> Result<Received> {
        let (maxlen, peek, limit) = (f.len, f.peek, f.limit);
        if !st.conn.is_connected() {
            return Err(Errno::EINVAL);
        }
        let mut out = Received::default();
        if maxlen == 0 {
            // unix_stream_read_generic with size 0 waits as for one byte;
            // the first chunk gives up its passed files (its bytes stay).
            let Some(m) = st.queue.get_mut(0) else {
                if let Some(e) = st.err.take() {
                    return Err(e);
                }
                if st.shutdown & RCV_SHUTDOWN == 0 {
                    return Err(Errno::EAGAIN);
                }
                out.creds = st.passcred.then_some(Ucred::NONE);
                return Ok(out);
            };
            let creds = m.creds.unwrap_or(Ucred::NONE);
            if !peek {
                (out.rights, out.nonblock) = self.take_rights(receiver, m);
                out.files = self.take_files(m);
            }
            out.creds = st.passcred.then_some(creds);
            return Ok(out);
        }
        let mut skip = if peek {
            st.queue.peek_off().max(0) as usize
        } else {
            0
        };
        let mut first_creds: Option<Option<Ucred>> = f.after;
        let mut at = (!st.queue.msgs().is_empty()).then_some(0);
        // With passcred or passpidfd on, one read never spans two senders.
        let span_check = st.may_passcred();
        loop {
            let copied = !out.data.is_empty();
            if let Some(i) = at {
                at = self.manage_oob(receiver, st, i, peek, copied, wake);
                if at.is_none() && copied {
                    break;
                }
            }
            let Some(mut i) = at else {
                if copied {
                    break;
                }
                if let Some(e) = st.err.take() {
                    return Err(e);
                }
                if st.shutdown & RCV_SHUTDOWN != 0 {
                    break;
                }
                return Err(Errno::EAGAIN);
            };
            // Whole chunks the peek offset passes over.
            while skip >= st.queue.msgs()[i].remaining() {
                skip -= st.queue.msgs()[i].remaining();
                i += 1;
                if i >= st.queue.msgs().len() {
                    break;
                }
            }
            if i >= st.queue.msgs().len() {
                at = None;
                continue;
            }
            // Buffers that end inside this chunk (as Linux copies it: what
            // is left of it, up to what the call asked) fail its copy.
            if let Some(l) = limit {
                let copied = out.data.len();
                let chunk =
                    (st.queue.msgs()[i].remaining() - skip).min(l.asked.saturating_sub(copied));
                if copied + chunk > l.writable {
                    if copied == 0 {
                        return Err(Errno::EFAULT);
                    }
                    break;
                }
            }
            let want_pidfd = st.passpidfd;
            let m = st.queue.get_mut(i).expect("chunk exists");
            match first_creds {
                None => {
                    first_creds = Some(m.creds);
                    out.from = m.from.clone();
                    // A peek gets a copy of the pin, as Linux gives MSG_PEEK a pidfd.
                    out.pidfd_file = if peek {
                        m.pidfd.clone()
                    } else {
                        m.pidfd.take()
                    }
                    .filter(|_| want_pidfd);
                }
                Some(c) if span_check && c != m.creds => break,
                Some(_) => {}
            }
            let carries = !m.rights.is_empty() || !m.files.is_empty();
            if carries && !(out.rights.is_empty() && out.files.is_empty()) {
                break;
            }
            let n = (m.remaining() - skip).min(maxlen - out.data.len());
            if m.msg_id != 0 {
                out.pieces.push(Piece {
                    msg_id: m.msg_id,
                    origin: m.origin,
                    len: n,
                });
            }
            let from = m.off + skip;
            out.data.extend_from_slice(&m.data[from..from + n]);
            if peek {
                // A peek gives the chunk's passed sockets as new references
                // (held by the caller, `recvmsg`) and stops there.
                let passed = &st.queue.msgs()[i].rights;
                out.rights.extend(passed.iter().map(|(r, _)| r.clone()));
                out.nonblock.extend(passed.iter().map(|(_, nb)| *nb));
                st.queue.peek_off_forward(n);
                let piece_end =
                    st.queue.msgs()[i].piece_end && n == st.queue.msgs()[i].remaining() - skip;
                if carries
                    || piece_end
                    || out.data.len() >= maxlen
                    || i + 1 >= st.queue.msgs().len()
                {
                    break;
                }
                skip = 0;
                at = Some(i + 1);
                continue;
            }
            let m = st.queue.consume(i, n);
            // Passed sockets come with the first read that touches their chunk.
            // (A chunk that passes is read alone: `carries`.)
            let (rights, nonblock) = self.take_rights(receiver, m);
            out.rights.extend(rights);
            out.nonblock.extend(nonblock);
            out.files.extend(self.take_files(m));
            out.ctrunc |= std::mem::take(&mut m.ctrunc);
            if m.remaining() > 0 {
                break;
            }
            // The sender's budget grows; the receiver's own writability does
            // not change (its budget is its own sends).
            let m = st.queue.remove(i).expect("chunk exists");
            self.uncharge(&m, wake);
            if carries || m.piece_end || out.data.len() >= maxlen {
                break;
            }
            at = (!st.queue.msgs().is_empty()).then_some(0);
        }
        out.full_len = out.data.len();
        out.sender = first_creds;
        if st.passcred {
            out.creds = Some(first_creds.flatten().unwrap_or(Ucred::NONE));
        }
        if st.passpidfd {
            out.pidfd = Some(first_creds.flatten().unwrap_or(Ucred::NONE).pid);
        }
        Ok(out)
    }

    /// Linux's manage_oob: what a read at chunk `i` really starts with, given
    /// the OOB byte. None: nothing to read here (or stop, when `copied`).
    fn manage_oob(
        &self,
        receiver: u64,
        st: &mut SockState,
        mut i: usize,
        peek: bool,
        copied: bool,
        wake: &mut Wakeups,
    ) -> Option<usize> {
        let m = &st.queue.msgs()[i];
        if m.remaining() > 0 && !m.oob {
            return Some(i);
        }
        if m.remaining() == 0 {
            // An OOB byte already taken with MSG_OOB leaves an empty chunk.
            let oob_pending = st.queue.oob_pending();
            if copied && (!oob_pending || st.queue.msgs()[i].oob) {
                return None;
            }
            if peek {
                i += 1;
            } else {
                self.discard_chunk(receiver, st, i, wake);
            }
            if i >= st.queue.msgs().len() {
                return None;
            }
        }
        if !st.queue.msgs()[i].oob {
            return Some(i);
        }
        if copied {
            return None;
        }
        if peek {
            return if st.oob_inline {
                Some(i)
            } else {
                (i + 1 < st.queue.msgs().len()).then_some(i + 1)
            };
        }
        st.queue.clear_oob(i);
        if st.oob_inline {
            return Some(i);
        }
        // A read passing an unread OOB byte drops it.
        self.discard_chunk(receiver, st, i, wake);
        (!st.queue.msgs().is_empty()).then_some(0)
    }

    /// Removes chunk `i` unread (what is left of it).
    fn discard_chunk(&self, receiver: u64, st: &mut SockState, i: usize, wake: &mut Wakeups) {
        let m = st.queue.remove(i).expect("chunk exists");
        self.dequeued(receiver, m, wake);
    }
}

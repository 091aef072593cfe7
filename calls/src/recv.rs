//! A receive's later ioctls, decided once for both fronts: one ioctl brings
//! at most MSG_ROOM bytes, and a receive that asked for more goes on as
//! unix_stream_read_generic and a datagram peek would have given it in one
//! call. The front makes each ioctl and places its payload (`more`).

use udsfs_proto::Res;
use udsfs_proto::ioctl::MSG_ROOM;

use crate::client::{Ask, Got, Wait};

/// What a receive that brought `got` (after `rest`, whose answer is
/// `stream`) returns, and the msg_flags it reports but MSG_CTRUNC
/// (`control::put`'s): MSG_OOB for the OOB byte; MSG_TRUNC for a datagram
/// or record cut to the buffers, never for a stream (`is_stream` is asked
/// only when it might be one, and `rest` did not tell); the caller's
/// MSG_CMSG_CLOEXEC echoed, as ____sys_recvmsg starts msg_flags with it.
/// With MSG_TRUNC asked for, a cut message returns its full length.
pub fn report(
    got: &Got,
    flags: i32,
    stream: Option<bool>,
    is_stream: impl FnOnce() -> Res<bool>,
) -> Res<(usize, i32)> {
    let cut = got.full_len > got.len
        && !match stream {
            Some(s) => s,
            None => is_stream()?,
        };
    let mut msg_flags = flags & libc::MSG_CMSG_CLOEXEC;
    if got.oob {
        msg_flags |= libc::MSG_OOB;
    }
    if cut {
        msg_flags |= libc::MSG_TRUNC;
    }
    let ret = if cut && flags & libc::MSG_TRUNC != 0 {
        got.full_len
    } else {
        got.len
    };
    Ok((ret, msg_flags))
}

/// The rest of a receive whose first ioctl brought `got` (its payload placed
/// from 0), for a caller whose buffers hold `want` bytes (or can take only
/// that many). While each ioctl brought a full MSG_ROOM and more is wanted:
/// a stream receive takes what else is queued without waiting (Linux fills
/// the buffer from the queue), with MSG_WAITALL (not peeking, blocking)
/// waiting for it under what the daemon left of SO_RCVTIMEO (MSGF_CONT); a
/// peek of a datagram goes on into the message (`skip`). `more(at, ask)`
/// makes one ioctl for the bytes from `at` on and places its payload there
/// (`stream`: the socket is one); None when the front's buffers take
/// nothing there. A piece's error ends
/// the call with what came. `stream` is asked only when the call could go
/// on (the type costs a round trip); its answer is returned (None: not
/// asked).
pub fn rest(
    got: &mut Got,
    want: usize,
    flags: i32,
    nonblock: bool,
    stream: impl FnOnce() -> bool,
    mut more: impl FnMut(usize, Ask, bool) -> Option<Res<Got>>,
) -> Option<bool> {
    let peek = flags & libc::MSG_PEEK != 0;
    let mut stream = Some(stream);
    let mut is_stream = None;
    while want > got.len && got.len >= MSG_ROOM && got.len.is_multiple_of(MSG_ROOM) {
        let s = *is_stream.get_or_insert_with(|| stream.take().is_some_and(|f| f()));
        // A datagram: only a peek goes on, while the message has more.
        if !(s || peek && got.len < got.full_len) {
            break;
        }
        // A stream receive ends with the chunk that passed files
        // (unix_stream_read_generic: `if (scm.fp) break`).
        if s && !peek && (!got.rights.is_empty() || got.ctrunc) {
            break;
        }
        let waitall = s && !peek && flags & libc::MSG_WAITALL != 0;
        let ask = Ask {
            want: want - got.len,
            peek,
            skip: if peek { got.len } else { 0 },
            waitall: flags & libc::MSG_WAITALL != 0,
            wait: (waitall && !nonblock).then_some(Wait {
                waitall: true,
                cont: Some(got.timeo_left),
                ..Wait::default()
            }),
            ..Ask::default()
        };
        match more(got.len, ask, s) {
            Some(Ok(g)) if g.len > 0 => {
                got.len += g.len;
                got.rights.extend_from_slice(&g.rights);
                got.ctrunc |= g.ctrunc;
                got.timeo_left = g.timeo_left;
            }
            _ => break,
        }
    }
    is_stream
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(len: usize, full_len: usize) -> Got {
        Got {
            len,
            full_len,
            ..Got::default()
        }
    }

    /// Runs `rest` over a queue of `queued` stream bytes (or one datagram of
    /// that length); the asks made.
    fn run(
        queued: usize,
        want: usize,
        flags: i32,
        stream: bool,
    ) -> (usize, Vec<(usize, usize, bool)>) {
        let mut g = got(queued.min(MSG_ROOM).min(want), queued);
        let mut asks = Vec::new();
        let mut left = queued - g.len;
        rest(
            &mut g,
            want,
            flags,
            false,
            || stream,
            |at, a, _| {
                asks.push((at, a.want, a.wait.is_some()));
                let n = if stream {
                    left.min(a.want).min(MSG_ROOM)
                } else {
                    (queued - a.skip).min(a.want).min(MSG_ROOM)
                };
                left -= n.min(left);
                Some(Ok(got(n, queued)))
            },
        );
        (g.len, asks)
    }

    #[test]
    fn a_stream_receive_fills_the_buffer_from_the_queue() {
        let (n, asks) = run(65536, 65536, 0, true);
        println!(
            "64 KiB queued, 64 KiB asked: {n} in {} more ioctls {asks:?}",
            asks.len()
        );
        assert_eq!(n, 65536);
        assert!(
            asks.iter().all(|a| !a.2),
            "a plain receive never waits for more"
        );
        let (n, _) = run(20000, 65536, 0, true);
        assert_eq!(n, 20000);
        let (_, asks) = run(65536, 65536, libc::MSG_WAITALL, true);
        assert!(asks.iter().all(|a| a.2), "MSG_WAITALL waits for the rest");
    }

    #[test]
    fn a_stream_receive_ends_with_the_piece_that_passed_files() {
        for (rights, ctrunc) in [(vec![7], false), (vec![], true)] {
            let mut g = got(MSG_ROOM, MSG_ROOM);
            (g.rights, g.ctrunc) = (rights.clone(), ctrunc);
            let mut asks = 0;
            rest(
                &mut g,
                4 * MSG_ROOM,
                libc::MSG_WAITALL,
                false,
                || true,
                |_, _, _| {
                    asks += 1;
                    Some(Ok(got(MSG_ROOM, MSG_ROOM)))
                },
            );
            assert_eq!(
                (g.len, asks),
                (MSG_ROOM, 0),
                "rights {rights:?}, ctrunc {ctrunc}"
            );
        }
    }

    #[test]
    fn a_datagram_goes_on_only_when_peeked() {
        let (n, asks) = run(40000, 65536, 0, false);
        assert_eq!((n, asks.len()), (MSG_ROOM, 0));
        let (n, asks) = run(40000, 65536, libc::MSG_PEEK, false);
        println!("a 40000-byte datagram peeked: {n} {asks:?}");
        assert_eq!(n, 40000);
        assert_eq!(asks[0].0, MSG_ROOM);
    }
}

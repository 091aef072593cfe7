//! The faults that act at once: a send, a connect or a poll described to
//! the rules (src/fault/) and what they decide applied, each fault in a way
//! the kernel could act itself (refuse, full, short_write, limit_data,
//! ctrunc, reset_peer, close_after). Called only once `Engine::faults.any()`
//! said some rule stands.
//!
//! The faults that hold a message back in time (latency, bandwidth, slicer,
//! timeout, slow_close) are timed.rs's.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use crate::engine::addr::Addr;
use crate::engine::log_limit::limited;
use crate::engine::socket::{BoundName, SockState, Socket};
use crate::engine::tap::Event;
use crate::engine::{Caller, Engine, Result, Waiter};
use crate::fault::{self, Decision, Kind};

/// What one send carries for the rules: who makes it, and the end of the
/// connection a rule decided, done once the send lets go of its locks
/// (when the send is dropped: the sender's lock may not be taken while
/// the receiver's is held).
#[derive(Default)]
pub(crate) struct SendFault<'a> {
    eng: Option<&'a Engine>,
    /// The caller, asked for its process id only by a rule that needs it.
    caller: Option<&'a Caller>,
    uid: u32,
    /// (sender, receiver's number, reset): the connection ends after
    /// this send.
    end: Option<(Arc<Socket>, u64, bool)>,
    /// Set when a rule cut the send short (short_write, limit_data): the
    /// front end returns the count instead of sending the rest.
    cut: Option<&'a Cell<bool>>,
}

/// What `Engine::fault_send` leaves the queue to do.
/// One piece of a send as the rules are asked about it: from `sock`
/// (named `from`) to `receiver`, `len` bytes passing `refs` references,
/// with `w` waiting if it may.
#[derive(Clone, Copy)]
pub(crate) struct Outbound<'a> {
    pub sock: &'a Arc<Socket>,
    pub from: Option<&'a BoundName>,
    pub receiver: u64,
    pub len: usize,
    /// Bytes of the same send queued before this piece.
    pub offset: usize,
    pub refs: usize,
    pub w: Option<&'a Waiter>,
}

pub(crate) struct SendPlan {
    /// Queue only this many bytes of the data.
    pub len: usize,
    /// Drop the passed sockets and files; the receiver gets MSG_CTRUNC.
    pub ctrunc: bool,
    /// Queue nothing, report the whole send done: the receiver is gone.
    pub swallow: bool,
    /// The decision and when it was made, for the timed faults
    /// (timed.rs: delays, slices, holds).
    pub timed: Option<(fault::Decision, Instant)>,
}

impl Drop for SendFault<'_> {
    fn drop(&mut self) {
        let (Some(eng), Some((s, receiver, reset))) = (self.eng, self.end.take()) else {
            return;
        };
        // The receiver is the sender's peer: a connection's sends go there.
        let peer = Socket::peer(&s.lock())
            .filter(|p| p.id == receiver)
            .cloned();
        if let Some(peer) = peer {
            eng.sever(&s, &peer, reset);
        }
    }
}

fn name_of(n: Option<&BoundName>) -> Option<fault::Name<'_>> {
    n.map(|n| match &n.addr {
        Addr::Path(p) => fault::Name::Path(p),
        Addr::Abstract(a) => fault::Name::Abstract(a),
    })
}

impl Engine {
    /// The caller as the rules see it (made only when a rule stands);
    /// `cut` is told when a rule cuts the send short.
    pub(crate) fn send_fault<'a>(
        &'a self,
        caller: &'a Caller,
        cut: Option<&'a Cell<bool>>,
    ) -> SendFault<'a> {
        SendFault {
            eng: Some(self),
            caller: Some(caller),
            uid: caller.fsuid,
            end: None,
            cut,
        }
    }

    pub(crate) fn fault_end<'n>(&self, id: u64, name: Option<&'n BoundName>) -> fault::End<'n> {
        fault::End {
            socket: id,
            name: name_of(name),
            // u32::MAX (nobody) where no rule asks: a user's rule could never act.
            owner_uid: if self.faults.needs_owners() {
                self.dir(id).map_or(0, |d| d.uid)
            } else {
                u32::MAX
            },
        }
    }

    /// Asks the rules about `data` on its way from `sock` (named `from`) to
    /// `receiver` (locked as `rt`) and applies what needs no timer:
    /// `full` leaves `w` waiting with the receiver's writers (EAGAIN), a
    /// cut queues a prefix, `ctrunc` drops what it passes, and a
    /// connection's end is set up for when the send lets go of its locks.
    pub(crate) fn fault_send(
        &self,
        tf: &mut SendFault<'_>,
        out: &Outbound<'_>,
        rt: &mut SockState,
    ) -> Result<SendPlan> {
        let Outbound {
            sock,
            from,
            receiver,
            len,
            offset,
            refs,
            w,
        } = *out;
        let mut plan = SendPlan {
            len,
            ctrunc: false,
            swallow: false,
            timed: None,
        };
        if tf.end.is_some() {
            // A rule ended the connection at an earlier piece of this send.
            return Err(Errno::EPIPE);
        }
        let caller = tf.caller;
        let ask_pid = || caller.map_or(0, Caller::tgid);
        let msg = fault::Message {
            kind: Kind::Send,
            from: self.fault_end(sock.id, from),
            to: self.fault_end(receiver, rt.name.as_deref()),
            pid: fault::Pid::Ask(&ask_pid),
            uid: tf.uid,
            ty: sock.ty,
            len,
            refs,
            offset,
            now: Instant::now(),
        };
        let d = self.faults.check(&msg);
        if d.is_none() {
            return Ok(plan);
        }
        self.tap_faults(sock, from, &d, &msg);
        if d.full {
            if let Some(w) = w {
                rt.queue.writers().add(w.clone());
            }
            if let Some(r) = self.socks.get(receiver) {
                self.wake_when_let_go(sock, &r.sock, d.hold_until);
            }
            return Err(Errno::EAGAIN);
        }
        if let Some(short) = d.short.filter(|&n| n < len) {
            plan.len = short;
            if let Some(cut) = tf.cut {
                cut.set(true);
            }
        }
        plan.ctrunc = d.drop_refs;
        if d.reset_after == Some(Duration::ZERO) {
            // The receiver is gone as if its process died with this
            // message unread.
            plan.swallow = true;
            tf.end = Some((sock.clone(), receiver, true));
        } else if let Some(after) = d.reset_after
            && let Some(r) = self.socks.get(receiver)
        {
            // This message is delivered; the timer resets the connection.
            self.reset_later(msg.now + after, sock, &r.sock);
        }
        if d.close_after && tf.end.is_none() {
            tf.end = Some((sock.clone(), receiver, false));
        }
        plan.timed = Some((d, msg.now));
        Ok(plan)
    }

    /// connect() from `s` to `other`: `refuse` fails it, with EAGAIN as a
    /// full backlog does (a blocking connect waits, `w` on the listener's
    /// writers).
    pub(crate) fn fault_connect(
        &self,
        s: &Arc<Socket>,
        other: &Arc<Socket>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<()> {
        let (sname, oname) = (s.lock().name.clone(), other.lock().name.clone());
        let msg = fault::Message {
            kind: Kind::Connect,
            from: self.fault_end(s.id, sname.as_deref()),
            to: self.fault_end(other.id, oname.as_deref()),
            pid: fault::Pid::Ask(&|| caller.tgid()),
            uid: caller.fsuid,
            ty: s.ty,
            len: 0,
            refs: 0,
            offset: 0,
            now: Instant::now(),
        };
        let d = self.faults.check(&msg);
        if d.is_none() {
            return Ok(());
        }
        self.tap_faults(s, sname.as_deref(), &d, &msg);
        match d.refuse {
            Some(Errno::EAGAIN) => {
                if let Some(w) = w {
                    other.lock().queue.writers().add(w.clone());
                }
                self.wake_when_let_go(s, other, d.hold_until);
                Err(Errno::EAGAIN)
            }
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether a send from `s` (named `name`) to `peer` would meet a full
    /// queue now (a `full` rule), for poll.
    pub(crate) fn fault_holds_sends(
        &self,
        s: &Socket,
        name: Option<&BoundName>,
        peer: &Socket,
    ) -> bool {
        let pname = peer.lock().name.clone();
        self.faults.holds_sends(&fault::Message {
            kind: Kind::Send,
            from: self.fault_end(s.id, name),
            to: self.fault_end(peer.id, pname.as_deref()),
            pid: fault::Pid::Known(0),
            uid: 0,
            ty: s.ty,
            len: 0,
            refs: 0,
            offset: 0,
            now: Instant::now(),
        })
    }

    /// Socket `s` is released: the rules forget it.
    pub(crate) fn fault_forget(&self, s: &Socket) {
        self.faults.forget_socket(s.id);
    }

    /// Logs each injection (at most a line a second but for root's own
    /// messages: a sender in a loop under a rule of its own would fill the
    /// log) and marks it in an attached capture.
    fn tap_faults(
        &self,
        s: &Socket,
        name: Option<&BoundName>,
        d: &Decision,
        msg: &fault::Message<'_>,
    ) {
        for i in &d.injected {
            let rule = || self.faults.describe(i.rule).unwrap_or_default();
            limited!(unless msg.uid == 0, info, "fault rule {} ({}): {msg}", i.rule, rule());
            self.tap_event(None, || Event::Fault {
                sock: self.endpoint(s, name),
                rule: i.rule,
                what: format!("{} {msg}", i.fault),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cred::ProcStatus;
    use crate::engine::tests::{engine, root};
    use crate::engine::{RecvFlags, SendMsg};
    use crate::fault::Rule;

    /// An engine, root and a stream socketpair whose second end has the rule
    /// `socket N up FAULT`.
    fn pair_under(
        fault: &str,
    ) -> (
        std::sync::Arc<crate::engine::Engine>,
        crate::engine::Caller,
        std::sync::Arc<crate::engine::Socket>,
        std::sync::Arc<crate::engine::Socket>,
    ) {
        let e = engine();
        let c = root();
        let (a, b) = e.socketpair(crate::engine::SockType::Stream, &c);
        let line = format!("socket {} up {fault}", b.id);
        e.faults.add(Rule::parse(&line).unwrap(), 0);
        (e, c, a, b)
    }

    #[test]
    fn a_cut_send_returns_its_count_and_a_full_queue_refuses() {
        let e = engine();
        let c = root();
        let (a, b) = e.socketpair(crate::engine::SockType::Stream, &c);
        let rule = |text: &str| e.faults.add(Rule::parse(text).unwrap(), 0);
        let cut = rule(&format!("socket {} up short_write bytes=3", b.id));
        assert_eq!(e.sendmsg(&a, SendMsg::new(b"hello"), &c, None), Ok(3));
        // The other way is not selected.
        assert_eq!(e.sendmsg(&b, SendMsg::new(b"hello"), &c, None), Ok(5));
        e.faults.del(cut, 0).unwrap();
        let full = rule(&format!("socket {} full", b.id));
        assert_eq!(
            e.sendmsg(&a, SendMsg::new(b"x"), &c, None),
            Err(Errno::EAGAIN)
        );
        e.faults.del(full, 0).unwrap();
        assert_eq!(e.sendmsg(&a, SendMsg::new(b"x"), &c, None), Ok(1));
        let got = e.recvmsg(&b, RecvFlags::new(10), None).unwrap();
        assert_eq!(got.data, b"helx");
    }

    #[test]
    fn short_write_cuts_a_send_at_its_bytes_in_whichever_piece_they_end() {
        // 100000 bytes end in the third piece of at most 36544 (stream.rs).
        let (e, c, a, b) = pair_under("short_write bytes=100000");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(e.sendmsg(&a, SendMsg::new(&data), &c, None), Ok(100_000));
        let mut got = Vec::new();
        while let Ok(r) = e.recvmsg(&b, RecvFlags::new(1 << 20), None) {
            if r.data.is_empty() {
                break;
            }
            got.extend_from_slice(&r.data);
        }
        assert_eq!(got, data[..100_000]);
        // A send of the rest's first part is cut again from its own start.
        assert_eq!(
            e.sendmsg(&a, SendMsg::new(&data[..40_000]), &c, None),
            Ok(40_000)
        );
    }

    #[test]
    fn a_pid_rule_asks_the_sender_for_its_process() {
        let e = engine();
        let (c, other) = (
            root(),
            Caller::with_status(
                2,
                ProcStatus {
                    tgid: 7,
                    ..root().status().clone()
                },
            ),
        );
        let (a, b) = e.socketpair(crate::engine::SockType::Stream, &c);
        e.faults.add(Rule::parse("pid 7 full").unwrap(), 0);
        // The rule stands, yet a sender of another process passes.
        assert_eq!(e.sendmsg(&a, SendMsg::new(b"x"), &c, None), Ok(1));
        assert_eq!(
            e.sendmsg(&a, SendMsg::new(b"x"), &other, None),
            Err(Errno::EAGAIN)
        );
        assert_eq!(e.faults.list(0)[0].injected, 1);
        assert_eq!(e.recvmsg(&b, RecvFlags::new(10), None).unwrap().data, b"x");
    }

    #[test]
    fn limit_data_ends_the_connection_after_exactly_its_bytes() {
        let (e, c, a, b) = pair_under("limit_data bytes=4");
        assert_eq!(e.sendmsg(&a, SendMsg::new(b"abc"), &c, None), Ok(3));
        assert_eq!(e.sendmsg(&a, SendMsg::new(b"defg"), &c, None), Ok(1));
        assert_eq!(
            e.sendmsg(&a, SendMsg::new(b"h"), &c, None),
            Err(Errno::EPIPE)
        );
        assert_eq!(
            e.recvmsg(&b, RecvFlags::new(10), None).unwrap().data,
            b"abcd"
        );
        assert_eq!(e.recvmsg(&b, RecvFlags::new(10), None).unwrap().data, b"");
        assert_eq!(
            e.sendmsg(&b, SendMsg::new(b"z"), &c, None),
            Err(Errno::EPIPE)
        );
    }
}

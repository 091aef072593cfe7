//! SOCK_SEQPACKET (unix_seqpacket_ops): connected like a stream, whole
//! messages like a dgram; the message paths are dgram.rs's.

use nix::errno::Errno;

use super::ProtoOps;
use super::dgram::{message_recv, message_send};
use super::queue::Sending;
use crate::engine::message::{Received, RecvFlags, SendMsg};
use crate::engine::socket::{Conn, SockState, Socket};
use crate::engine::{Caller, Engine, Result, Wakeups};

pub(super) struct Seqpacket;

impl ProtoOps for Seqpacket {
    fn sendmsg(
        &self,
        eng: &Engine,
        tx: Sending<'_>,
        msg: &SendMsg<'_>,
        caller: &Caller,
    ) -> Result<usize> {
        if msg.oob {
            return Err(Errno::EOPNOTSUPP);
        }
        let s = tx.sock;
        let peer = {
            let mut st = s.lock();
            if let Some(e) = st.err.take() {
                return Err(e);
            }
            match &st.conn {
                Conn::Connected { peer, .. } => peer.clone(),
                _ => return Err(Errno::ENOTCONN),
            }
        };
        // unix_seqpacket_sendmsg ignores an address; from here the message
        // takes the dgram path, which autobinds.
        eng.autobind_if_passcred(s, caller)?;
        message_send(eng, tx, msg, Some(peer), caller)
    }

    fn recvmsg(
        &self,
        eng: &Engine,
        s: &Socket,
        st: &mut SockState,
        f: &RecvFlags<'_>,
        blocking: bool,
        wake: &mut Wakeups,
    ) -> Result<Received> {
        message_recv(eng, s, st, f, blocking, wake)
    }
}

//! SOCK_SEQPACKET (unix_seqpacket_ops): connected like a stream, whole
//! messages like a dgram; the message paths are dgram.rs's.

use nix::errno::Errno;

use super::dgram::{message_recv, message_send};
use super::{ProtoOps, RecvOp, SendOp};
use crate::engine::Result;
use crate::engine::message::Received;
use crate::engine::socket::Conn;

pub(super) struct Seqpacket;

impl ProtoOps for Seqpacket {
    fn sendmsg(&self, op: SendOp<'_>) -> Result<usize> {
        let (eng, tx, msg, caller) = (op.eng, op.tx, op.msg, op.caller);
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

    fn recvmsg(&self, op: RecvOp<'_>) -> Result<Received> {
        message_recv(op)
    }
}

//! Out-of-band data on stream sockets, as Linux >= 5.15 has it: the last
//! byte of a send with MSG_OOB becomes the receiver's one OOB byte (a newer
//! one turns the older into ordinary data), read with MSG_OOB, marked for
//! SIOCATMARK, announced by POLLPRI and by SIGURG to the socket's owner.

use std::sync::Arc;

use nix::errno::Errno;

use super::socket::{SockType, Socket};
use super::urg::UrgOwner;
use super::{Caller, Engine, Result};

impl Engine {
    /// SIOCATMARK: is the next byte read the OOB mark?
    pub fn at_oob_mark(&self, s: &Arc<Socket>) -> Result<bool> {
        if s.ty != SockType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let st = s.lock();
        let Some(head) = st.queue.msgs().front() else {
            return Ok(false);
        };
        let next_is_oob = st.queue.msgs().get(1).is_some_and(|m| m.oob);
        Ok(head.oob || (head.remaining() == 0 && (!st.queue.oob_pending() || next_is_oob)))
    }

    /// SO_OOBINLINE.
    pub fn set_oob_inline(&self, s: &Arc<Socket>, on: bool) {
        s.lock().oob_inline = on;
    }

    /// F_SETOWN, FIOSETOWN, SIOCSPGRP: `target` a pid (> 0), a process
    /// group (< 0), or 0 for nobody.
    pub fn set_urg_owner(&self, s: &Arc<Socket>, target: i32, caller: &Caller) {
        let target = super::pidns::owner_from_sender(target, caller).unwrap_or(0);
        let owner = (target != 0).then(|| UrgOwner::new(target, caller.fsuid));
        s.lock().urg_owner = owner;
    }

    /// O_ASYNC on or off (F_SETFL, FIOASYNC).
    pub fn set_fasync(&self, s: &Arc<Socket>, on: bool) {
        s.lock().fasync = on;
    }

    /// SO_OOBINLINE, SO_PEEK_OFF, the owner and O_ASYNC, for getsockopt,
    /// F_GETFL and status.
    pub fn oob_options(&self, s: &Arc<Socket>) -> (bool, i32, i32, bool) {
        let st = s.lock();
        (
            st.oob_inline,
            st.queue.peek_off(),
            st.urg_owner.map_or(0, |o| o.target),
            st.fasync,
        )
    }

    /// The status file's lines about OOB data and peeking.
    pub(crate) fn oob_status(&self, s: &Arc<Socket>) -> String {
        let mark = self.at_oob_mark(s).unwrap_or(false);
        let st = s.lock();
        format!(
            "oob_pending={}\noob_mark={}\noobinline={}\npeek_off={}\nurg_owner={}\n",
            st.queue.oob_pending() as u8,
            mark as u8,
            st.oob_inline as u8,
            st.queue.peek_off(),
            st.urg_owner.map_or(0, |o| o.target),
        )
    }
}

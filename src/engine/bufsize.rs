//! SO_SNDBUF and SO_RCVBUF (and their FORCE forms) as sock_setsockopt sets
//! them: the value is doubled (room for the kernel's bookkeeping), capped by
//! net.core.wmem_max / rmem_max unless forced, and never below the minimum.
//! The send buffer bounds what a socket may have queued at receivers and the
//! largest dgram/seqpacket message; AF_UNIX ignores the receive buffer (the
//! kernel measured: a receiver's SO_RCVBUF changes no limit), so it is kept
//! only to be read back.

use std::sync::{Arc, OnceLock};

use nix::errno::Errno;

use super::cred::Caller;
use super::socket::Socket;
use super::wakeups::Wakeups;
use super::{Engine, Result};

/// SOCK_MIN_SNDBUF: 2 * (2048 + SKB_TRUESIZE(1)), as Linux on x86_64.
pub const MIN_SNDBUF: usize = 4608;
/// SOCK_MIN_RCVBUF: 2048 + SKB_TRUESIZE(1).
pub const MIN_RCVBUF: usize = 2304;

/// Which buffer an option sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
}

fn sysctl(name: &str, fallback: usize) -> usize {
    crate::procfs::sysctl(&format!("net.core.{name}")).map_or(fallback, |v| v as usize)
}

/// net.core.rmem_default: a new socket's SO_RCVBUF (read once).
pub fn rcvbuf_default() -> usize {
    static V: OnceLock<usize> = OnceLock::new();
    *V.get_or_init(|| sysctl("rmem_default", 212992))
}

/// The value SO_SNDBUF/SO_RCVBUF (`force`: the FORCE forms) leave, from the
/// int the caller passed. The plain forms compare as unsigned, so a negative
/// value means "the maximum"; the forced ones treat it as 0.
pub fn buffer_size(buf: Buf, val: i32, force: bool) -> usize {
    let (max, min) = match buf {
        Buf::Send => (sysctl("wmem_max", 212992), MIN_SNDBUF),
        Buf::Recv => (sysctl("rmem_max", 212992), MIN_RCVBUF),
    };
    let v = if force {
        val.max(0) as usize
    } else {
        (val as u32 as usize).min(max)
    };
    // val * 2 must fit an int.
    (v.min(i32::MAX as usize / 2) * 2).max(min)
}

impl Engine {
    /// setsockopt(SO_SNDBUF/SO_RCVBUF[FORCE]); the FORCE forms need
    /// CAP_NET_ADMIN (EPERM). A larger send buffer wakes blocked senders.
    pub fn set_buffer(
        &self,
        s: &Arc<Socket>,
        buf: Buf,
        val: i32,
        force: bool,
        caller: &Caller,
    ) -> Result<()> {
        if force && !caller.has_cap_net_admin() {
            let name = match buf {
                Buf::Send => "SO_SNDBUFFORCE",
                Buf::Recv => "SO_RCVBUFFORCE",
            };
            log::info!("socket {}: {name} without CAP_NET_ADMIN (EPERM)", s.id);
            return Err(Errno::EPERM);
        }
        let size = buffer_size(buf, val, force);
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            match buf {
                Buf::Send => {
                    st.sndbuf = size;
                    wake.extend(st.queue.writers().take());
                }
                Buf::Recv => st.rcvbuf = size,
            }
        }
        wake.run();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::SockType;
    use super::super::tests::root_pair;
    use super::*;
    use crate::engine::SendMsg;
    use crate::engine::cred::ProcStatus;

    #[test]
    fn force_needs_cap_net_admin_and_a_larger_buffer_lets_senders_on() {
        let (e, c, a, _b) = root_pair(SockType::Dgram);
        let nobody = Caller::with_status(2, ProcStatus::default());
        assert_eq!(
            e.set_buffer(&a, Buf::Send, 1, true, &nobody),
            Err(Errno::EPERM)
        );
        e.set_buffer(&a, Buf::Send, 1, false, &nobody).unwrap();
        assert_eq!(e.info(&a).sndbuf, MIN_SNDBUF as i64);
        // 4608 bytes of budget: a 1000-byte datagram is charged 2304 (as
        // the kernel's SIOCOUTQ shows), so the third one waits.
        e.sendmsg(&a, SendMsg::new(&[0; 1000]), &c, None).unwrap();
        e.sendmsg(&a, SendMsg::new(&[0; 1000]), &c, None).unwrap();
        let full = e.sendmsg(&a, SendMsg::new(&[0; 1000]), &c, None);
        assert_eq!(full.unwrap_err(), Errno::EAGAIN);
        e.set_buffer(&a, Buf::Send, 100_000_000, true, &c).unwrap();
        assert_eq!(e.info(&a).sndbuf, 200_000_000);
        e.sendmsg(&a, SendMsg::new(&[0; 1000]), &c, None).unwrap();
    }

    #[test]
    fn sizes_follow_sock_setsockopt() {
        let wmax = sysctl("wmem_max", 212992);
        assert_eq!(
            buffer_size(Buf::Send, 65536.min(wmax as i32), false),
            2 * 65536.min(wmax)
        );
        assert_eq!(buffer_size(Buf::Send, 1, false), MIN_SNDBUF);
        assert_eq!(buffer_size(Buf::Send, 0, false), MIN_SNDBUF);
        assert_eq!(
            buffer_size(Buf::Send, -1, false),
            2 * wmax,
            "negative: the maximum"
        );
        assert_eq!(
            buffer_size(Buf::Send, -5, true),
            MIN_SNDBUF,
            "forced negative: 0"
        );
        assert_eq!(buffer_size(Buf::Recv, 1, false), MIN_RCVBUF);
        assert_eq!(buffer_size(Buf::Recv, 100_000_000, true), 200_000_000);
        assert_eq!(buffer_size(Buf::Recv, i32::MAX, true), 2147483646);
    }
}

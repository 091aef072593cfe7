//! Out-of-band data on stream sockets, as Linux >= 5.15 has it: the last
//! byte of a send with MSG_OOB becomes the receiver's one OOB byte (a newer
//! one turns the older into ordinary data), read with MSG_OOB, marked for
//! SIOCATMARK, announced by POLLPRI and by SIGURG to the socket's owner.

use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::data::{ChunkOrigin, Pass};
use super::held::HeldFile;
use super::socket::{Conn, RCV_SHUTDOWN, SockType, Socket};
use super::{Addr, Caller, Engine, Result, Ucred, Wakeups};

/// Who gets SIGURG: a process (`target` > 0) or a process group (< 0), as
/// F_SETOWN takes it, and the user who set it (for the permission check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UrgOwner {
    pub target: i32,
    pub setter_uid: u32,
}

impl UrgOwner {
    /// send_sigurg: the signal goes only where the setter could send it
    /// (sigio_perm: root, or the target's real or saved uid is the setter's),
    /// checked for each process of a group.
    fn signal(self) {
        if self.target < 0 && self.setter_uid == 0 {
            let res = killpg(Pid::from_raw(-self.target), Signal::SIGURG);
            if let Err(e) = res {
                log::debug!("SIGURG to process group {}: {}", -self.target, e.desc());
            }
            return;
        }
        let pids = if self.target > 0 {
            vec![self.target]
        } else {
            group_members(-self.target)
        };
        for pid in pids {
            if self.setter_uid != 0 && !uid_may_signal(self.setter_uid, pid) {
                log::info!(
                    "SIGURG to {pid} not sent: its owner was set by uid {}, who may not signal it",
                    self.setter_uid
                );
                continue;
            }
            if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGURG) {
                log::debug!("SIGURG to {pid}: {}", e.desc());
            }
        }
    }
}

/// The processes of process group `pgrp` (field 5 of /proc/PID/stat).
fn group_members(pgrp: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the command name in parentheses: state, ppid, pgrp.
            let after = stat.rsplit_once(") ").map_or("", |(_, a)| a);
            after.split(' ').nth(2).and_then(|g| g.parse().ok()) == Some(pgrp)
        })
        .collect()
}

/// Does process `pid` run with real or saved uid `uid`?
fn uid_may_signal(uid: u32, pid: i32) -> bool {
    // uids: real, effective, saved, filesystem
    u32::try_from(pid)
        .ok()
        .and_then(|p| crate::procfs::Status::read(p).ok())
        .is_some_and(|st| st.uids[0] == uid || st.uids[2] == uid)
}

impl Engine {
    /// send(MSG_OOB): stream sockets only (EOPNOTSUPP otherwise, and for an
    /// empty send, as Linux).
    #[allow(clippy::too_many_arguments)]
    pub fn send_oob(
        &self,
        s: &Arc<Socket>,
        data: &[u8],
        to: Option<&Addr>,
        creds: Option<Ucred>,
        rights: &mut Vec<Arc<Socket>>,
        files: &mut Vec<HeldFile>,
        caller: &Caller,
    ) -> Result<usize> {
        if s.ty != SockType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let pass = Pass::new(self, rights, files, caller)?;
        self.stream_send(s, data, to, creds, pass, caller, None, true)
    }

    /// queue_oob: the byte is queued as a chunk of its own and becomes the
    /// peer's OOB byte; its owner gets SIGURG before the send returns.
    pub(crate) fn queue_oob(
        &self,
        s: &Arc<Socket>,
        peer: &Arc<Socket>,
        byte: u8,
        origin: &ChunkOrigin,
        pass: &mut Pass<'_>,
        wake: &mut Wakeups,
    ) -> Result<()> {
        let owner = {
            let mut pt = peer.lock();
            if pt.dead || pt.shutdown & RCV_SHUTDOWN != 0 {
                return Err(Errno::EPIPE);
            }
            // The older OOB byte, if any, becomes ordinary data.
            for m in pt.rcvq.iter_mut() {
                m.oob = false;
            }
            self.queue_chunk(s, peer.id, &mut pt, vec![byte], origin, pass, true);
            pt.oob_queued = true;
            wake.extend(pt.readers.take());
            pt.urg_owner
        };
        if let Some(o) = owner {
            o.signal();
        }
        Ok(())
    }

    /// recv(MSG_OOB): the OOB byte; EINVAL when there is none or
    /// SO_OOBINLINE is on. Taking it leaves an empty chunk at its place,
    /// which keeps the mark (SIOCATMARK) and stops the next read there.
    pub fn recv_oob(&self, s: &Arc<Socket>, peek: bool) -> Result<u8> {
        if s.ty != SockType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut st = s.lock();
        if !matches!(st.conn, Conn::Connected(_)) || st.oob_inline {
            return Err(Errno::EINVAL);
        }
        let at = if st.oob_queued {
            st.rcvq.iter().position(|m| m.oob)
        } else {
            None
        };
        let i = at.ok_or(Errno::EINVAL)?;
        let m = &mut st.rcvq[i];
        let byte = m.data[m.off];
        if !peek {
            m.off += 1;
            m.oob = false;
            st.oob_queued = false;
            st.rcvq_bytes -= 1;
        }
        Ok(byte)
    }

    /// SIOCATMARK: is the next byte read the OOB mark?
    pub fn at_oob_mark(&self, s: &Arc<Socket>) -> Result<bool> {
        if s.ty != SockType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let st = s.lock();
        let Some(head) = st.rcvq.front() else {
            return Ok(false);
        };
        let next_is_oob = st.rcvq.get(1).is_some_and(|m| m.oob);
        Ok(head.oob || (head.remaining() == 0 && (!st.oob_pending() || next_is_oob)))
    }

    /// SO_OOBINLINE.
    pub fn set_oob_inline(&self, s: &Arc<Socket>, on: bool) {
        s.lock().oob_inline = on;
    }

    /// F_SETOWN, FIOSETOWN, SIOCSPGRP: `target` a pid (> 0), a process
    /// group (< 0), or 0 for nobody.
    pub fn set_urg_owner(&self, s: &Arc<Socket>, target: i32, caller: &Caller) {
        let target = super::pidns::owner_from_sender(target, caller).unwrap_or(0);
        s.lock().urg_owner = (target != 0).then_some(UrgOwner {
            target,
            setter_uid: caller.fsuid,
        });
    }

    /// SO_OOBINLINE, SO_PEEK_OFF and the owner, for getsockopt and status.
    pub fn oob_options(&self, s: &Arc<Socket>) -> (bool, i32, i32) {
        let st = s.lock();
        (
            st.oob_inline,
            st.peek_off,
            st.urg_owner.map_or(0, |o| o.target),
        )
    }

    /// The status file's lines about OOB data and peeking.
    pub(crate) fn oob_status(&self, s: &Arc<Socket>) -> String {
        let mark = self.at_oob_mark(s).unwrap_or(false);
        let st = s.lock();
        format!(
            "oob_pending={}\noob_mark={}\noobinline={}\npeek_off={}\nurg_owner={}\n",
            st.oob_pending() as u8,
            mark as u8,
            st.oob_inline as u8,
            st.peek_off,
            st.urg_owner.map_or(0, |o| o.target),
        )
    }
}

//! Taking what a sendmsg passes: the sockets it names by number (only the
//! caller's own, alive, not embryos) and the files it deposited, and the
//! sender's pidfd for a receiver with SO_PASSPIDFD.

use std::sync::Arc;

use nix::errno::Errno;

use crate::engine::depot::{PassedFile, is_file_tag};
use crate::engine::fds::ChargedFd;
use crate::engine::{Caller, Engine, Result, Socket, Ucred};

impl Engine {
    /// A pidfd of the sender (`creds.pid`) for a receiver with SO_PASSPIDFD,
    /// pinned now while the sender surely lives (src/engine/pins.rs): Linux
    /// keeps the sender's `struct pid` with the message and gives a pidfd
    /// even after it exited. Past the descriptor quota the send fails
    /// (ENOBUFS, as an skb that cannot be allocated) rather than carry a pid
    /// the reader would have to trust.
    pub(crate) fn sender_pidfd(
        &self,
        creds: Option<Ucred>,
        receiver: &Socket,
    ) -> Result<Option<Arc<ChargedFd>>> {
        let Some(cr) = creds else { return Ok(None) };
        if cr.pid <= 0 || !receiver.lock().passpidfd {
            return Ok(None);
        }
        match self.pins.pin(&self.depot.quota, cr.pid, cr.uid) {
            Ok((p, _)) => Ok(Some(p)),
            Err(Errno::ENFILE | Errno::ETOOMANYREFS) => Err(Errno::ENOBUFS),
            // Gone already (forged credentials of an exited pid): no pidfd.
            Err(_) => Ok(None),
        }
    }

    /// What a sendmsg names, held for passing: sockets by number (see
    /// `hold_for_passing`) and the caller's deposited files by tag, each
    /// file with its place in the list.
    pub fn hold_passed(
        &self,
        ids: &[u64],
        caller: &Caller,
    ) -> Result<(Vec<Arc<Socket>>, Vec<PassedFile>)> {
        // A socket's number without its NONBLOCK_TAG (`Engine::prepare_send`
        // keeps that for the receiver).
        let socks: Vec<u64> = ids
            .iter()
            .filter(|i| !is_file_tag(**i))
            .map(|&i| udsfs_proto::passed::socket_of(i).0)
            .collect();
        let tags: Vec<(usize, u64)> = ids
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, i)| is_file_tag(*i))
            .collect();
        let files = if tags.is_empty() {
            Vec::new()
        } else {
            let uid = if caller.is_root() { 0 } else { caller.fsuid };
            self.depot.take_deposits(&tags, uid)?
        };
        match self.hold_for_passing(&socks, caller) {
            Ok(held) => Ok((held, files)),
            Err(e) => {
                self.depot.put_back(files);
                Err(e)
            }
        }
    }

    /// Sockets `caller` may pass: its own (or any, for root), alive.
    pub fn hold_for_passing(&self, ids: &[u64], caller: &Caller) -> Result<Vec<Arc<Socket>>> {
        let mut held: Vec<Arc<Socket>> = Vec::with_capacity(ids.len());
        let undo = |held: &Vec<Arc<Socket>>| held.iter().for_each(|s| self.put(s));
        for &id in ids {
            let Some(d) = self.dir(id) else {
                undo(&held);
                return Err(Errno::EBADF);
            };
            if !caller.is_root() && d.uid != caller.fsuid {
                undo(&held);
                return Err(Errno::EACCES);
            }
            // Only what its owner still holds, as only held fds pass.
            if !d.refs.live() {
                undo(&held);
                return Err(Errno::EBADF);
            }
            if d.sock.lock().conn.is_embryo() || !self.try_hold(&d.sock) {
                undo(&held);
                return Err(Errno::EBADF);
            }
            held.push(d.sock);
        }
        Ok(held)
    }
}

//! Handing what a message passed to its reader: each socket becomes a
//! received entry (`.udsfs/sock/H`) holding its reference until it is
//! opened (`adopt`), each file a depot tag to claim over the fd channel,
//! within the reader's RLIMIT_NOFILE (past it they close: MSG_CTRUNC).

use std::sync::Arc;

use udsfs_proto::passed::NONBLOCK_TAG;

use crate::engine::{Caller, Claim, Engine, Received, Socket};

impl Engine {
    /// Hands sockets received by `receiver` to the reading user: each gets
    /// a directory of its own, holding the reference until it is opened.
    pub fn deliver_rights(
        &self,
        receiver: &Arc<Socket>,
        rights: Vec<Arc<Socket>>,
        uid: u32,
        gid: u32,
        limit: usize,
    ) -> Vec<u64> {
        self.deliver_flagged(receiver, rights, &[], uid, gid, limit)
    }

    /// `deliver_rights`, each entry's number with NONBLOCK_TAG
    /// (udsfs_proto::passed) where `nonblock` says it was passed from an
    /// O_NONBLOCK descriptor: the receiver opens it nonblocking.
    fn deliver_flagged(
        &self,
        receiver: &Arc<Socket>,
        rights: Vec<Arc<Socket>>,
        nonblock: &[bool],
        uid: u32,
        gid: u32,
        limit: usize,
    ) -> Vec<u64> {
        let mut tagged = Vec::with_capacity(rights.len().min(limit));
        // Like file descriptors past the reader's RLIMIT_NOFILE (MSG_CTRUNC),
        // received entries past `limit` unopened ones are closed: a reader
        // that never opens them cannot make the daemon grow without bound.
        let room = {
            let mut st = receiver.lock();
            let unopened = self.unopened.lock();
            st.received.retain(|id| unopened.contains_key(id));
            limit.saturating_sub(st.received.len())
        };
        let mut ids = Vec::with_capacity(rights.len().min(room));
        for (i, r) in rights.into_iter().enumerate() {
            if i >= room {
                log::info!(
                    "socket {}: received socket {} dropped: {limit} unopened already",
                    receiver.id,
                    r.id
                );
                self.put(&r);
                continue;
            }
            // Past the reader's share of entries it is closed the same way.
            if self.aliases.take(uid, 1).is_err() {
                self.put(&r);
                continue;
            }
            let id = self.new_alias(&r, uid, gid);
            self.unopened.lock().insert(id, r);
            ids.push(id);
            let nb = nonblock.get(i).copied().unwrap_or(false);
            tagged.push(if nb { id | NONBLOCK_TAG } else { id });
        }
        let dead = {
            let mut st = receiver.lock();
            st.received.extend(&ids);
            st.conn.is_closed()
        };
        if dead {
            // The receiver closed meanwhile: nobody can open them through it.
            for id in &ids {
                let r = self.unopened.lock().remove(id);
                if let Some(r) = r {
                    self.remove_alias(&r, *id);
                    self.put(&r);
                }
            }
        }
        tagged
    }

    /// Opening a file of `.udsfs/sock/H` adopts a received socket: the
    /// caller's handle (already held) replaces the entry's reference.
    pub fn adopt(&self, id: u64) {
        let r = self.unopened.lock().remove(&id);
        if let Some(r) = r {
            self.release_delivery(id);
            self.put(&r);
        }
    }

    /// Whether directory `id` is a received entry not opened yet.
    pub fn unopened_entry(&self, id: u64) -> bool {
        self.unopened.lock().contains_key(&id)
    }

    /// Gives back the claim a received entry holds until it is opened.
    fn release_delivery(&self, id: u64) {
        if let Some(d) = self.socks.get(id) {
            self.release_claim(Claim { id, refs: d.refs });
        }
    }

    /// Hands received sockets and files to the reading user: sockets as new
    /// `.udsfs/sock/H/` entries (`deliver_rights`), files as depot tags to
    /// claim over the fd channel, all in the order they were sent. A pidfd
    /// of the sender made at send time becomes a tag too (`got.pidfd_tag`).
    pub fn deliver_passed(
        &self,
        receiver: &Arc<Socket>,
        got: &mut Received,
        caller: &Caller,
    ) -> Vec<u64> {
        let rights = std::mem::take(&mut got.rights);
        let nonblock = std::mem::take(&mut got.nonblock);
        let limit = if rights.is_empty() {
            0
        } else {
            caller.nofile_limit()
        };
        let ids = self.deliver_flagged(
            receiver,
            rights,
            &nonblock,
            caller.fsuid,
            caller.fsgid,
            limit,
        );
        // As installing descriptors stops at the reader's RLIMIT_NOFILE
        // (MSG_CTRUNC), a reader that never claims cannot make the daemon
        // hold files without bound: past it they close here.
        let mut room = if got.files.is_empty() {
            0
        } else {
            caller
                .nofile_limit()
                .saturating_sub(self.depot.pickups_of(receiver.id))
        };
        let files: Vec<(usize, u64)> = std::mem::take(&mut got.files)
            .into_iter()
            .filter_map(|f| {
                if room == 0 {
                    log::info!("socket {}: a received file closed: unclaimed ones fill the reader's RLIMIT_NOFILE", receiver.id);
                    return None;
                }
                room -= 1;
                let tag = self.depot.keep_received(receiver.id, caller.fsuid, f.fd)?;
                Some((f.slot, tag))
            })
            .collect();
        // The sender's pin, the reader's to keep now (src/engine/pins.rs).
        // Past the reader's share no SCM_PIDFD and MSG_CTRUNC, as Linux's
        // scm_pidfd_recv when no descriptor can be installed (the library's
        // pidfd made from the pid could name whoever reused it).
        let pid = got.pidfd.unwrap_or(0);
        let pidfd = got.pidfd_file.take().and_then(|pin| {
            let mine = self
                .pins
                .for_holder(&self.depot.quota, (pid, None), &pin, caller.fsuid);
            if mine.is_err() {
                (got.pidfd, got.ctrunc) = (None, true);
            }
            mine.ok()
        });
        got.pidfd_tag = pidfd.map(|fd| {
            self.depot
                .keep_received_pidfd(receiver.id, caller.fsuid, fd)
        });
        if (!files.is_empty() || got.pidfd_tag.is_some()) && receiver.lock().conn.is_closed() {
            // Closed meanwhile: nobody can claim them.
            self.depot.socket_closed(receiver.id);
        }
        merge_in_order(&ids, &files)
    }
}

/// Puts received sockets (numbers) and files (tags) back in the order they
/// were sent: each file knows its slot, sockets fill the others.
pub fn merge_in_order(socks: &[u64], files: &[(usize, u64)]) -> Vec<u64> {
    let mut out = Vec::with_capacity(socks.len() + files.len());
    let mut s = socks.iter();
    let mut f = files.iter().peekable();
    while out.len() < socks.len() + files.len() {
        match f.peek() {
            Some((slot, tag)) if *slot <= out.len() => {
                out.push(*tag);
                f.next();
            }
            _ => match s.next() {
                Some(id) => out.push(*id),
                None => out.extend(f.by_ref().map(|(_, t)| *t)),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rights::FILE_TAG;

    #[test]
    fn order_is_restored() {
        let t = |n| FILE_TAG | n;
        assert_eq!(
            merge_in_order(&[3, 4], &[(0, t(1)), (2, t(2))]),
            vec![t(1), 3, t(2), 4]
        );
        assert_eq!(merge_in_order(&[], &[(5, t(1))]), vec![t(1)]);
        assert_eq!(merge_in_order(&[3], &[]), vec![3]);
    }
}

//! listen, connect, accept, shutdown: the operations that make and end
//! connections, and the dgram default peer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::socket::{Conn, PeerCred, RCV_SHUTDOWN, SEND_SHUTDOWN, SockType, Socket, lock2};
use super::tap::Event;
use super::{Addr, Caller, Engine, Result, Waiter, Wakeups};

impl Engine {
    pub fn listen(&self, s: &Arc<Socket>, backlog: i64, caller: &Caller) -> Result<()> {
        if s.ty == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        let backlog = if backlog < 0 || backlog as usize > self.cfg.somaxconn {
            self.cfg.somaxconn
        } else {
            backlog as usize
        };
        let payer = self.dir(s.id).map_or(caller.fsuid, |d| d.charged);
        let cred = self.peer_cred(caller, payer);
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            if st.name.is_none() {
                return Err(Errno::EINVAL);
            }
            // Listening again takes the caller's credentials again.
            match &mut st.conn {
                Conn::Connected { .. } | Conn::Closed => return Err(Errno::EINVAL),
                Conn::Listening {
                    backlog: b,
                    cred: c,
                    ..
                } => {
                    // A larger backlog takes effect at once.
                    *b = backlog;
                    *c = cred;
                    wake.extend(st.queue.writers().take());
                }
                Conn::Unconnected { .. } => {
                    st.conn = Conn::Listening {
                        backlog,
                        pending: VecDeque::new(),
                        cred,
                    };
                }
            }
        }
        self.finish(wake);
        Ok(())
    }

    /// connect(): stream and seqpacket connect to a listener (EAGAIN with the
    /// waiter left on the listener when its backlog is full); dgram sets the
    /// default peer.
    pub fn connect(
        &self,
        s: &Arc<Socket>,
        addr: &Addr,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<()> {
        // Linux autobinds before it looks the target up: a failed connect
        // still leaves the socket named.
        self.autobind_if_passcred(s, caller)?;
        let other = self.find(addr, s.ty, s.netns, caller)?;
        self.connect_to(s, other, caller, w)
    }

    /// connect() to a socket already found (the connect view finds it by node).
    pub fn connect_to(
        &self,
        s: &Arc<Socket>,
        other: Arc<Socket>,
        caller: &Caller,
        w: Option<&Waiter>,
    ) -> Result<()> {
        if other.ty != s.ty {
            return Err(Errno::EPROTOTYPE);
        }
        self.autobind_if_passcred(s, caller)?;
        if self.faults.any() {
            self.fault_connect(s, &other, caller, w)?;
        }
        if s.ty == SockType::Dgram {
            self.dgram_connect(s, &other)?;
            self.tap_connected(s, &other, None, caller);
            return Ok(());
        }
        // Everything the new connection needs is made before taking locks.
        // The server end is the listener's side: its owner's, never the
        // client's to open before accept (Linux: an embryo has no fd until
        // accept). The client pays for it until then, so connecting cannot
        // spend the listener owner's share (integration/adversarial_access.sh §6).
        let (uid, gid) = self
            .dir(other.id)
            .map_or((caller.fsuid, caller.fsgid), |d| (d.uid, d.gid));
        // Made in the client's socket's namespace (unix_create1(sock_net(sk))).
        let embryo = self.new_socket_for(s.ty, (uid, gid), caller.fsuid, s.netns_held(), true)?;
        embryo.refs.store(1, Ordering::Release);
        let client = self.peer_cred(caller, caller.fsuid);
        let res = self.stream_connect(s, &other, &embryo, client, w);
        match res {
            Ok(()) => {
                // The listener's pin, kept now by the client's socket.
                self.pin_to_holder(s);
                self.tap_connected(s, &other, Some(&embryo), caller)
            }
            Err(_) => self.put(&embryo),
        }
        res
    }

    fn stream_connect(
        &self,
        s: &Arc<Socket>,
        other: &Arc<Socket>,
        embryo: &Arc<Socket>,
        client: PeerCred,
        w: Option<&Waiter>,
    ) -> Result<()> {
        // unix_stream_connect checks the target first (refused, full), then
        // the caller's own state (EISCONN, EINVAL).
        if s.id == other.id {
            let mut st = s.lock();
            listener_ready(&mut st, w)?;
            return Err(own_state(&st).err().unwrap_or(Errno::EINVAL));
        }
        let mut wake = Wakeups::new();
        {
            let (mut st, mut ot) = lock2(s, other)?;
            listener_ready(&mut ot, w)?;
            own_state(&st)?;
            let listener_name = ot.name.clone();
            let listener_passcred = (ot.passcred, ot.passpidfd);
            let Conn::Listening { pending, cred, .. } = &mut ot.conn else {
                return Err(Errno::ECONNREFUSED);
            };
            let listener_cred = cred.clone();
            {
                let mut et = embryo.lock();
                et.conn = Conn::Connected {
                    peer: s.clone(),
                    cred: Some(client),
                    peer_gone: false,
                    listener: Some(other.id),
                };
                et.name = listener_name;
                (et.passcred, et.passpidfd) = listener_passcred;
            }
            *embryo.capture_proto.lock() = other.capture_proto.lock().clone();
            pending.push_back(embryo.clone());
            st.conn = Conn::connected(embryo.clone(), Some(listener_cred));
            wake.extend(ot.queue.readers().take());
            // The listener's sk_data_ready: SIGIO to its owner.
            wake.sigio(&ot);
        }
        self.finish(wake);
        Ok(())
    }

    fn dgram_connect(&self, s: &Arc<Socket>, other: &Arc<Socket>) -> Result<()> {
        let mut wake = Wakeups::new();
        let old = {
            let (mut st, ot) = if s.id == other.id {
                (s.lock(), None)
            } else {
                let (a, b) = lock2(s, other)?;
                (a, Some(b))
            };
            if let Some(ot) = &ot {
                if ot.conn.is_closed() {
                    return Err(Errno::ECONNREFUSED);
                }
                if let Some(p) = super::socket::Socket::peer(ot)
                    && p.id != s.id
                {
                    return Err(Errno::EPERM);
                }
            }
            let kept = st.conn.kept_cred();
            let old = std::mem::replace(&mut st.conn, Conn::connected(other.clone(), kept));
            match old {
                Conn::Connected { peer: o, .. } if o.id != other.id => {
                    self.dgram_disconnected(s.id, &mut st, &mut wake);
                    Some(o)
                }
                _ => None,
            }
        };
        if let Some(o) = old {
            self.reset_if_peer_of(&o, s, &mut wake);
        }
        self.finish(wake);
        Ok(())
    }

    /// Drops the default peer of a dgram socket (connect to AF_UNSPEC).
    pub fn disconnect(&self, s: &Arc<Socket>) -> Result<()> {
        if s.ty != SockType::Dgram {
            return Err(Errno::EINVAL);
        }
        let mut wake = Wakeups::new();
        let old = {
            let mut st = s.lock();
            let cred = st.conn.kept_cred();
            match std::mem::replace(&mut st.conn, Conn::Unconnected { cred }) {
                Conn::Connected { peer: o, .. } => {
                    self.dgram_disconnected(s.id, &mut st, &mut wake);
                    Some(o)
                }
                other => {
                    st.conn = other;
                    None
                }
            }
        };
        if let Some(o) = old {
            self.reset_if_peer_of(&o, s, &mut wake);
        }
        self.finish(wake);
        Ok(())
    }

    /// unix_dgram_disconnected, own half: the queue is purged.
    pub(crate) fn dgram_disconnected(
        &self,
        id: u64,
        st: &mut super::socket::SockState,
        wake: &mut Wakeups,
    ) -> bool {
        if st.queue.msgs().is_empty() {
            return false;
        }
        let msgs = st.queue.drain();
        wake.extend(st.queue.writers().take());
        for m in msgs {
            self.dequeued(id, m, wake);
        }
        true
    }

    /// unix_dgram_disconnected, the old peer's half: if it pointed back at
    /// us, its next send sees ECONNRESET once.
    fn reset_if_peer_of(&self, old: &Arc<Socket>, s: &Arc<Socket>, wake: &mut Wakeups) {
        let reset = {
            let mut ot = old.lock();
            let reset = !ot.conn.is_closed()
                && super::socket::Socket::peer(&ot).is_some_and(|p| p.id == s.id);
            if reset {
                ot.err = Some(Errno::ECONNRESET);
                wake.extend(ot.queue.writers().take());
            }
            reset
        };
        if reset {
            self.tap_event(None, || Event::Reset {
                sock: self.endpoint_now(old),
            });
        }
    }

    /// accept(): the next pending connection, holding one reference (the
    /// queue's, handed over).
    pub fn accept(&self, s: &Arc<Socket>, w: Option<&Waiter>) -> Result<Arc<Socket>> {
        if s.ty == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut wake = Wakeups::new();
        let got = {
            let mut st = s.lock();
            let shut = st.shutdown & RCV_SHUTDOWN != 0;
            let Conn::Listening { pending, .. } = &mut st.conn else {
                return Err(Errno::EINVAL);
            };
            match pending.pop_front() {
                Some(e) => {
                    wake.extend(st.queue.writers().take());
                    e
                }
                None if shut && w.is_some() => return Err(Errno::EINVAL),
                None => {
                    if let Some(w) = w {
                        st.queue.readers().add(w.clone());
                    }
                    return Err(Errno::EAGAIN);
                }
            }
        };
        {
            let mut et = got.lock();
            if let Conn::Connected { listener, .. } = &mut et.conn {
                *listener = None;
            }
        }
        got.accepted.store(true, Ordering::Release);
        self.gc.accepted(got.id);
        self.finish(wake);
        self.tap_event(None, || Event::Accepted {
            listener: self.endpoint_now(s),
            sock: self.endpoint_now(&got),
        });
        Ok(got)
    }

    /// accept() through the library with one descriptor slot left: the
    /// accepted socket `id` (its control handle, which holds it, is about to
    /// close to free the slot) becomes a received entry of the listener, as
    /// a passed socket does, for the library to open in its place. It goes
    /// with the listener if nobody opens it. The new entry's number.
    pub fn keep_accepted(&self, listener: &Arc<Socket>, id: u64, c: &Caller) -> Result<u64> {
        let d = self.dir(id).ok_or(Errno::ENOENT)?;
        if (d.uid != c.fsuid && !c.is_root()) || !self.try_hold(&d.sock) {
            return Err(Errno::ENOENT);
        }
        let ids = self.deliver_rights(listener, vec![d.sock], d.uid, d.gid, c.nofile_limit());
        ids.first().copied().ok_or(Errno::EMFILE)
    }

    pub fn shutdown(&self, s: &Arc<Socket>, how: u8) -> Result<()> {
        if how == 0 || how > 3 {
            return Err(Errno::EINVAL);
        }
        let mut wake = Wakeups::new();
        let peer = {
            let mut st = s.lock();
            st.shutdown |= how;
            wake.extend(st.queue.readers().take());
            wake.extend(st.queue.writers().take());
            super::socket::Socket::peer(&st).cloned()
        };
        // Stream and seqpacket mirror the shutdown onto the peer.
        if let Some(p) = peer.filter(|_| s.ty.connection_oriented()) {
            let mut pt = p.lock();
            if how & RCV_SHUTDOWN != 0 {
                pt.shutdown |= SEND_SHUTDOWN;
            }
            // The peer's EOF never overtakes data a fault still holds.
            let late = how & SEND_SHUTDOWN != 0 && pt.queue.holds_back_from(s.id);
            if how & SEND_SHUTDOWN != 0 && !late {
                pt.shutdown |= RCV_SHUTDOWN;
                // unix_shutdown: SIGIO to the peer whose reading ends
                // (POLL_IN, or POLL_HUP for both sides), not for SHUT_RD.
                wake.sigio(&pt);
            }
            wake.extend(pt.queue.readers().take());
            wake.extend(pt.queue.writers().take());
            drop(pt);
            if late {
                self.shutdown_later(s.id, p);
            }
        }
        self.finish(wake);
        self.tap_event(None, || Event::Shutdown {
            sock: self.endpoint_now(s),
            how,
        });
        Ok(())
    }
}

/// The target half of connect's checks: a live listener with room; EAGAIN
/// leaves the waiter for a free slot.
fn listener_ready(ot: &mut super::socket::SockState, w: Option<&Waiter>) -> Result<()> {
    if ot.conn.is_closed() || ot.shutdown & RCV_SHUTDOWN != 0 {
        return Err(Errno::ECONNREFUSED);
    }
    let Conn::Listening {
        backlog, pending, ..
    } = &ot.conn
    else {
        return Err(Errno::ECONNREFUSED);
    };
    if pending.len() > *backlog {
        if let Some(w) = w {
            ot.queue.writers().add(w.clone());
        }
        return Err(Errno::EAGAIN);
    }
    Ok(())
}

/// The caller half: only an unconnected socket may connect.
fn own_state(st: &super::socket::SockState) -> Result<()> {
    match st.conn {
        Conn::Unconnected { .. } => Ok(()),
        Conn::Listening { .. } | Conn::Closed => Err(Errno::EINVAL),
        Conn::Connected { .. } => Err(Errno::EISCONN),
    }
}

//! bind, autobind, listen, connect, accept, shutdown: the operations that
//! give sockets names and connections.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::names::AUTOBIND_SPACE;
use super::socket::{BoundName, Conn, RCV_SHUTDOWN, SEND_SHUTDOWN, SockType, Socket, lock2};
use super::{Addr, Caller, Engine, NameKey, Result, Waiter, Wakeups, random_u32};

impl Engine {
    /// Finds the socket an address names for a socket of type `ty`
    /// (unix_find_other): path lookups check permissions and type, abstract
    /// names live in one namespace per network namespace and type.
    pub fn find(&self, addr: &Addr, ty: SockType, caller: &Caller) -> Result<Arc<Socket>> {
        match addr {
            Addr::Path(p) => {
                let ino = self.tree.connect_node(self.tree_path(p)?, caller)?;
                let s = self
                    .names
                    .lookup(&NameKey::Path(ino))
                    .ok_or(Errno::ECONNREFUSED)?;
                if s.ty != ty {
                    return Err(Errno::EPROTOTYPE);
                }
                Ok(s)
            }
            Addr::Abstract(n) => self
                .names
                .lookup(&NameKey::Abstract(caller.netns(), ty, n.clone()))
                .ok_or(Errno::ECONNREFUSED),
        }
    }

    pub fn bind(&self, s: &Arc<Socket>, addr: &Addr, caller: &Caller) -> Result<()> {
        self.bind_as(s, addr, None, caller)
    }

    /// bind() of a path that the program gave as `given` (its sun_path), which
    /// getsockname, getpeername, recvfrom and accept then report.
    pub fn bind_as(
        &self,
        s: &Arc<Socket>,
        addr: &Addr,
        given: Option<&[u8]>,
        caller: &Caller,
    ) -> Result<()> {
        match addr {
            Addr::Path(p) => {
                let path = self.tree_path(p)?;
                // Like unix_bind_bsd: make the node first, then find the socket
                // already bound and take the node back.
                let perm = 0o777 & !caller.umask();
                let ino = self.tree.bind_node(path, caller, perm)?;
                let _bind = s.bind_lock.lock();
                if s.lock().name.is_some() {
                    self.tree.unbind_node(path, ino);
                    return Err(Errno::EINVAL);
                }
                let key = NameKey::Path(ino);
                self.names.rebind(s, &NameKey::Unbound(s.id), key.clone())?;
                s.lock().name = Some(Arc::new(BoundName {
                    addr: addr.clone(),
                    key,
                    given: given.map(<[u8]>::to_vec),
                }));
                Ok(())
            }
            Addr::Abstract(n) => {
                let _bind = s.bind_lock.lock();
                if s.lock().name.is_some() {
                    return Err(Errno::EINVAL);
                }
                let key = NameKey::Abstract(caller.netns(), s.ty, n.clone());
                self.names.rebind(s, &NameKey::Unbound(s.id), key.clone())?;
                s.lock().name = Some(Arc::new(BoundName {
                    addr: addr.clone(),
                    key,
                    given: None,
                }));
                Ok(())
            }
        }
    }

    /// Autobind as unix_autobind: random start, linear scan with wrap,
    /// ENOSPC when every name of this type is taken; a no-op when bound.
    /// The name is taken in the caller's network namespace.
    pub fn autobind(&self, s: &Arc<Socket>, caller: &Caller) -> Result<()> {
        let _bind = s.bind_lock.lock();
        if s.lock().name.is_some() {
            return Ok(());
        }
        let ns = caller.netns();
        // Linux starts after a random number and scans every name once,
        // ending with the start itself; the taken-map skips known runs.
        let last = random_u32() % AUTOBIND_SPACE;
        let mut next = (last + 1) % AUTOBIND_SPACE;
        let mut left = AUTOBIND_SPACE;
        loop {
            let (n, skipped) = self
                .names
                .next_free_autobind(ns, s.ty, next, left)
                .ok_or(Errno::ENOSPC)?;
            left -= skipped + 1;
            next = (n + 1) % AUTOBIND_SPACE;
            let name = format!("{n:05x}").into_bytes();
            let key = NameKey::Abstract(ns, s.ty, name.clone());
            match self.names.rebind(s, &NameKey::Unbound(s.id), key.clone()) {
                Ok(()) => {
                    s.lock().name = Some(Arc::new(BoundName {
                        addr: Addr::Abstract(name),
                        key,
                        given: None,
                    }));
                    return Ok(());
                }
                Err(Errno::EADDRINUSE) if left > 0 => continue,
                Err(Errno::EADDRINUSE) => return Err(Errno::ENOSPC),
                Err(e) => return Err(e),
            }
        }
    }

    /// Autobind when SO_PASSCRED asks for it (connect, dgram send).
    pub(crate) fn autobind_if_passcred(&self, s: &Arc<Socket>, caller: &Caller) -> Result<()> {
        let need = {
            let st = s.lock();
            st.may_passcred() && st.name.is_none()
        };
        if need {
            self.autobind(s, caller)
        } else {
            Ok(())
        }
    }

    pub fn listen(&self, s: &Arc<Socket>, backlog: i64, caller: &Caller) -> Result<()> {
        if s.ty == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        let backlog = if backlog < 0 || backlog as usize > self.cfg.somaxconn {
            self.cfg.somaxconn
        } else {
            backlog as usize
        };
        let cred = caller.peer_creds();
        let pin = self.pin_peer(cred);
        let mut wake = Wakeups::new();
        {
            let mut st = s.lock();
            if st.name.is_none() {
                return Err(Errno::EINVAL);
            }
            match &mut st.conn {
                Conn::Connected(_) => return Err(Errno::EINVAL),
                Conn::Listening { backlog: b, .. } => {
                    // A larger backlog takes effect at once.
                    *b = backlog;
                    wake.extend(st.writers.take());
                }
                Conn::Unconnected => {
                    st.conn = Conn::Listening {
                        backlog,
                        pending: VecDeque::new(),
                    };
                }
            }
            st.peercred = Some(cred);
            st.peer_pin = pin;
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
        let other = self.find(addr, s.ty, caller)?;
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
        if s.ty == SockType::Dgram {
            return self.dgram_connect(s, other);
        }
        // Everything the new connection needs is made before taking locks.
        // The server end is the listener's side: its owner's, never the
        // client's to open before accept (Linux: an embryo has no fd until
        // accept). The client pays for it until then, so connecting cannot
        // spend the listener owner's share (integration/adversarial_access.sh §6).
        let (uid, gid) = self
            .dir(other.id)
            .map_or((caller.fsuid, caller.fsgid), |d| (d.uid, d.gid));
        let embryo = self.new_socket_for(s.ty, uid, gid, caller.fsuid, true)?;
        embryo.refs.store(1, Ordering::Release);
        let client_cred = caller.peer_creds();
        let client_pin = self.pin_peer(client_cred);
        let res = self.stream_connect(s, &other, &embryo, (client_cred, client_pin), w);
        if res.is_err() {
            self.put(&embryo);
        }
        res
    }

    fn stream_connect(
        &self,
        s: &Arc<Socket>,
        other: &Arc<Socket>,
        embryo: &Arc<Socket>,
        (client_cred, client_pin): (super::Ucred, Option<super::pins::Pin>),
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
            let listener_cred = ot.peercred;
            let listener_pin = ot.peer_pin.clone();
            let listener_passcred = (ot.passcred, ot.passpidfd);
            let Conn::Listening { pending, .. } = &mut ot.conn else {
                return Err(Errno::ECONNREFUSED);
            };
            {
                let mut et = embryo.lock();
                et.conn = Conn::Connected(s.clone());
                et.name = listener_name;
                et.peercred = Some(client_cred);
                et.peer_pin = client_pin;
                (et.passcred, et.passpidfd) = listener_passcred;
                et.embryo = true;
                et.listener_id = Some(other.id);
            }
            pending.push_back(embryo.clone());
            st.conn = Conn::Connected(embryo.clone());
            st.peercred = listener_cred;
            st.peer_pin = listener_pin;
            wake.extend(ot.readers.take());
        }
        self.finish(wake);
        Ok(())
    }

    fn dgram_connect(&self, s: &Arc<Socket>, other: Arc<Socket>) -> Result<()> {
        let mut wake = Wakeups::new();
        let old = {
            let (mut st, ot) = if s.id == other.id {
                (s.lock(), None)
            } else {
                let (a, b) = lock2(s, &other)?;
                (a, Some(b))
            };
            if let Some(ot) = &ot {
                if ot.dead {
                    return Err(Errno::ECONNREFUSED);
                }
                if let Some(p) = super::socket::Socket::peer(ot)
                    && p.id != s.id
                {
                    return Err(Errno::EPERM);
                }
            }
            let old = std::mem::replace(&mut st.conn, Conn::Connected(other.clone()));
            match old {
                Conn::Connected(o) if o.id != other.id => {
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
            match std::mem::replace(&mut st.conn, Conn::Unconnected) {
                Conn::Connected(o) => {
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
        if st.rcvq.is_empty() {
            return false;
        }
        let msgs: Vec<_> = st.rcvq.drain(..).collect();
        st.rcvq_bytes = 0;
        wake.extend(st.writers.take());
        for m in msgs {
            self.dequeued(id, m, wake);
        }
        true
    }

    /// unix_dgram_disconnected, the old peer's half: if it pointed back at
    /// us, its next send sees ECONNRESET once.
    fn reset_if_peer_of(&self, old: &Arc<Socket>, s: &Arc<Socket>, wake: &mut Wakeups) {
        let mut ot = old.lock();
        if !ot.dead && super::socket::Socket::peer(&ot).is_some_and(|p| p.id == s.id) {
            ot.err = Some(Errno::ECONNRESET);
            wake.extend(ot.writers.take());
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
                    wake.extend(st.writers.take());
                    e
                }
                None if shut && w.is_some() => return Err(Errno::EINVAL),
                None => {
                    if let Some(w) = w {
                        st.readers.add(w.clone());
                    }
                    return Err(Errno::EAGAIN);
                }
            }
        };
        {
            let mut et = got.lock();
            et.embryo = false;
            et.listener_id = None;
        }
        self.gc.accepted(got.id);
        self.finish(wake);
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
            wake.extend(st.readers.take());
            wake.extend(st.writers.take());
            super::socket::Socket::peer(&st).cloned()
        };
        // Stream and seqpacket mirror the shutdown onto the peer.
        if let Some(p) = peer.filter(|_| s.ty.connection_oriented()) {
            let mut pt = p.lock();
            if how & RCV_SHUTDOWN != 0 {
                pt.shutdown |= SEND_SHUTDOWN;
            }
            if how & SEND_SHUTDOWN != 0 {
                pt.shutdown |= RCV_SHUTDOWN;
            }
            wake.extend(pt.readers.take());
            wake.extend(pt.writers.take());
        }
        self.finish(wake);
        Ok(())
    }

    pub fn set_passpidfd(&self, s: &Arc<Socket>, on: bool) {
        s.lock().passpidfd = on;
    }

    pub fn set_passcred(&self, s: &Arc<Socket>, on: bool) {
        s.lock().passcred = on;
    }
}

impl Engine {
    /// The socket bound at tree node `ino`, if the caller may connect to it
    /// (write permission on the node; the kernel checked the directories).
    pub fn find_by_node(&self, ino: u64, caller: &Caller) -> Result<Arc<Socket>> {
        self.tree.check_connect_node(ino, caller)?;
        self.names
            .lookup(&NameKey::Path(ino))
            .ok_or(Errno::ECONNREFUSED)
    }

    /// The socket bound at abstract `name` in the caller's network
    /// namespace, trying the types in turn.
    pub fn find_abstract_any(&self, name: &[u8], caller: &Caller) -> Option<Arc<Socket>> {
        let ns = caller.netns();
        [SockType::Stream, SockType::Seqpacket, SockType::Dgram]
            .into_iter()
            .find_map(|ty| self.names.lookup(&NameKey::Abstract(ns, ty, name.to_vec())))
    }
}

/// The target half of connect's checks: a live listener with room; EAGAIN
/// leaves the waiter for a free slot.
fn listener_ready(ot: &mut super::socket::SockState, w: Option<&Waiter>) -> Result<()> {
    if ot.dead || ot.shutdown & RCV_SHUTDOWN != 0 {
        return Err(Errno::ECONNREFUSED);
    }
    let Conn::Listening { backlog, pending } = &ot.conn else {
        return Err(Errno::ECONNREFUSED);
    };
    if pending.len() > *backlog {
        if let Some(w) = w {
            ot.writers.add(w.clone());
        }
        return Err(Errno::EAGAIN);
    }
    Ok(())
}

/// The caller half: only an unconnected socket may connect.
fn own_state(st: &super::socket::SockState) -> Result<()> {
    match st.conn {
        Conn::Unconnected => Ok(()),
        Conn::Listening { .. } => Err(Errno::EINVAL),
        Conn::Connected(_) => Err(Errno::EISCONN),
    }
}

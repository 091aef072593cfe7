//! The engine's side of the taps (tap.rs): the views of sockets and callers
//! they are given, and the connection events. Messages are reported where
//! they are queued (msgpath/enqueue.rs) and read (`Engine::recvmsg`).

use std::sync::Arc;

use super::socket::{BoundName, SockType, Socket};
use super::tap::{Endpoint, Event, Origin};
use super::{Caller, Engine};

impl Engine {
    /// A tap's view of `s`, named `name`.
    pub(crate) fn endpoint(&self, s: &Socket, name: Option<&BoundName>) -> Endpoint {
        self.endpoint_by_id(s.id, s.ty, name)
    }

    pub(crate) fn endpoint_by_id(
        &self,
        id: u64,
        ty: SockType,
        name: Option<&BoundName>,
    ) -> Endpoint {
        self.endpoint_as(id, ty, name, |s| self.openers(s))
    }

    /// A tap's view of `s` closing or collected: nobody may open it any
    /// more, so it is shown to whoever held it last.
    pub(crate) fn endpoint_gone(&self, s: &Socket, name: Option<&BoundName>) -> Endpoint {
        self.endpoint_as(s.id, s.ty, name, |s| self.last_openers(s))
    }

    /// A tap's view of socket `id`, with `openers` given.
    pub(crate) fn endpoint_with(
        &self,
        id: u64,
        ty: SockType,
        name: Option<&BoundName>,
        openers: Vec<u32>,
    ) -> Endpoint {
        let mut openers = Some(openers);
        self.endpoint_as(id, ty, name, |_| openers.take().unwrap_or_default())
    }

    fn endpoint_as(
        &self,
        id: u64,
        ty: SockType,
        name: Option<&BoundName>,
        mut openers: impl FnMut(&Socket) -> Vec<u32>,
    ) -> Endpoint {
        let dir = self.dir(id);
        Endpoint {
            id,
            ty,
            name: name.map(|n| n.addr.clone()),
            owner_uid: dir.as_ref().map_or(0, |d| d.uid),
            openers: dir.as_ref().map_or(Vec::new(), |d| openers(&d.sock)),
            accepted: dir
                .as_ref()
                .is_some_and(|d| d.sock.accepted.load(std::sync::atomic::Ordering::Acquire)),
            proto: dir.and_then(|d| d.sock.capture_proto.lock().clone()),
        }
    }

    /// Who may open socket `id` now (`openers`), by number.
    pub(crate) fn openers_by_id(&self, id: u64) -> Vec<u32> {
        self.dir(id).map_or(Vec::new(), |d| self.openers(&d.sock))
    }

    /// A tap's view of `s` as it is now (takes its lock: call with none held).
    pub(crate) fn endpoint_now(&self, s: &Socket) -> Endpoint {
        let name = s.lock().name.clone();
        self.endpoint(s, name.as_deref())
    }

    /// ctl `capture_proto`: what captures name the payload of `s`'s
    /// conversations begun from now on.
    pub fn set_capture_proto(&self, s: &Socket, proto: Option<String>) {
        *s.capture_proto.lock() = proto.map(Arc::from);
    }

    /// The caller as a tap sees it.
    pub(crate) fn origin(&self, caller: &Caller) -> Origin {
        Origin {
            pid: caller.tgid(),
            tid: caller.tid,
            uid: caller.fsuid,
            gid: caller.fsgid,
        }
    }

    /// Reports an event to the taps; `event` is built only when one is
    /// attached, and must take no lock the caller holds.
    pub(crate) fn tap_event(&self, caller: Option<&Caller>, event: impl FnOnce() -> Event) {
        if self.taps.any() {
            let origin = caller.map(|c| self.origin(c)).unwrap_or_default();
            self.taps.event(origin, &event());
        }
    }

    /// `Event::Connected` of `client` to `server`; `accepted` is the new
    /// connection's server end (stream, seqpacket).
    pub(crate) fn tap_connected(
        &self,
        client: &Arc<Socket>,
        server: &Arc<Socket>,
        accepted: Option<&Arc<Socket>>,
        c: &Caller,
    ) {
        self.tap_event(Some(c), || Event::Connected {
            client: self.endpoint_now(client),
            server: self.endpoint_now(server),
            accepted: accepted.map(|a| self.endpoint_now(a)),
        });
    }
}

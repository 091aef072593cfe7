//! Which conversation each socket is in, as one capture learns it from the
//! records it sees: a connection's two ends share one, a dgram socket's
//! receptions are one of their own. A socket closed leaves its entry, so a
//! reused socket number starts a new conversation.

use std::collections::HashMap;
use std::sync::Arc;

use super::record::{Conv, Side};
use crate::engine::SockType;
use crate::engine::tap::Endpoint;

#[derive(Default)]
pub struct Convs {
    /// Connection ends (stream, seqpacket).
    by_sock: HashMap<u64, Arc<Conv>>,
    /// Dgram receivers.
    dgram: HashMap<u64, Arc<Conv>>,
    /// Per conversation: the filter kinds it matched once (filter.rs) and
    /// how many of the maps' entries stand for it.
    state: HashMap<u64, (u8, u32)>,
    next: u64,
}

impl Convs {
    fn make(&mut self, ty: SockType, client: Option<Side>, server: Side, pid: u32) -> Arc<Conv> {
        self.next += 1;
        Arc::new(Conv {
            number: self.next,
            ty,
            client,
            server,
            first_pid: pid,
        })
    }

    /// The conversation a message from `from` to `to` belongs to, made if new.
    pub fn for_message(&mut self, from: &Endpoint, to: &Endpoint, pid: u32) -> Arc<Conv> {
        if to.ty == SockType::Dgram {
            return self.dgram_of(to, pid);
        }
        for end in [from.id, to.id] {
            if let Some(c) = self.by_sock.get(&end)
                && c.has(from.id)
                && c.has(to.id)
            {
                return c.clone();
            }
        }
        // A connection this capture did not see made (it opened after the
        // connect): its client is the end accept() did not hand out, else
        // (a socketpair) the first to send.
        if from.accepted && !to.accepted {
            return self.connection(to, from, pid);
        }
        self.connection(from, to, pid)
    }

    /// The conversation a message from `from` to `to` (type `ty`) belongs
    /// to, if this capture has one already (`for_message` without making
    /// one), with the filter kinds it matched.
    pub fn known(&self, ty: SockType, from: u64, to: u64) -> Option<(Arc<Conv>, u8)> {
        let c = if ty == SockType::Dgram {
            self.dgram.get(&to)?
        } else {
            [from, to]
                .iter()
                .filter_map(|end| self.by_sock.get(end))
                .find(|c| c.has(from) && c.has(to))?
        };
        Some((c.clone(), self.state.get(&c.number).map_or(0, |s| s.0)))
    }

    /// A new connection, `client` to `server`: it replaces what either end
    /// was in.
    pub fn connection(&mut self, client: &Endpoint, server: &Endpoint, pid: u32) -> Arc<Conv> {
        let c = self.make(client.ty, Some(client.into()), server.into(), pid);
        for end in [client.id, server.id] {
            self.hold(c.number);
            if let Some(old) = self.by_sock.insert(end, c.clone()) {
                self.release(old.number);
            }
        }
        c
    }

    /// The conversation of dgram receiver `to`, made if new.
    pub fn dgram_of(&mut self, to: &Endpoint, pid: u32) -> Arc<Conv> {
        if let Some(c) = self.dgram.get(&to.id) {
            return c.clone();
        }
        let c = self.make(SockType::Dgram, None, to.into(), pid);
        self.hold(c.number);
        self.dgram.insert(to.id, c.clone());
        c
    }

    /// The conversation socket `id` is in, if any.
    pub fn of(&self, id: u64) -> Option<Arc<Conv>> {
        self.by_sock
            .get(&id)
            .or_else(|| self.dgram.get(&id))
            .cloned()
    }

    /// Socket `id` is gone: its number may name another socket next.
    pub fn closed(&mut self, id: u64) {
        let gone = self.by_sock.remove(&id).or_else(|| self.dgram.remove(&id));
        if let Some(c) = gone {
            self.release(c.number);
        }
    }

    fn hold(&mut self, number: u64) {
        self.state.entry(number).or_default().1 += 1;
    }

    fn release(&mut self, number: u64) {
        if let Some(s) = self.state.get_mut(&number) {
            s.1 -= 1;
            if s.1 == 0 {
                self.state.remove(&number);
            }
        }
    }

    /// Adds `kinds` to what conversation `number` matched; the kinds it
    /// has matched now.
    pub fn matched(&mut self, number: u64, kinds: u8) -> u8 {
        match self.state.get_mut(&number) {
            Some(s) => {
                s.0 |= kinds;
                s.0
            }
            None => kinds,
        }
    }

    /// Sockets tracked (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_sock.len() + self.dgram.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(id: u64, ty: SockType) -> Endpoint {
        Endpoint {
            id,
            ty,
            name: None,
            owner_uid: 0,
            openers: Vec::new(),
            proto: None,
            accepted: false,
        }
    }

    #[test]
    fn both_directions_share_a_connection() {
        let mut c = Convs::default();
        let (a, b) = (ep(1, SockType::Stream), ep(2, SockType::Stream));
        let x = c.for_message(&a, &b, 10);
        let y = c.for_message(&b, &a, 11);
        assert_eq!(x.number, y.number);
        assert!(x.outbound(1) && !x.outbound(2));
        assert_eq!(x.first_pid, 10);
    }

    /// A capture that opens after the connect and first sees the server's
    /// end send (a server's answer, ring bytes drained at a lane's way
    /// down) still calls the connecting end the client: its dissectors
    /// read each direction as the protocol's (pgsql's 'D' is DataRow from
    /// the server, Describe from the client).
    #[test]
    fn a_connection_joined_late_knows_its_client_by_the_accept() {
        let mut c = Convs::default();
        let cli = ep(1, SockType::Stream);
        let srv = Endpoint {
            accepted: true,
            ..ep(2, SockType::Stream)
        };
        let x = c.for_message(&srv, &cli, 10);
        assert!(
            x.outbound(1) && !x.outbound(2),
            "the connecting end is the client"
        );
        let mut c = Convs::default();
        let (a, b) = (ep(3, SockType::Stream), ep(4, SockType::Stream));
        assert!(
            c.for_message(&b, &a, 0).outbound(4),
            "a pair: the first sender"
        );
    }

    #[test]
    fn a_closed_number_starts_a_new_conversation() {
        let mut c = Convs::default();
        let (a, b) = (ep(1, SockType::Seqpacket), ep(2, SockType::Seqpacket));
        let x = c.for_message(&a, &b, 0);
        c.matched(x.number, 1);
        c.closed(1);
        c.closed(2);
        assert_eq!(c.len(), 0);
        assert_eq!(c.matched(x.number, 0), 0, "its mask went with it");
        let y = c.for_message(&b, &a, 0);
        assert_ne!(x.number, y.number);
        assert!(y.outbound(2), "the first sender is the client");
    }

    #[test]
    fn dgram_conversations_are_per_receiver() {
        let mut c = Convs::default();
        let (a, b, r) = (
            ep(1, SockType::Dgram),
            ep(2, SockType::Dgram),
            ep(3, SockType::Dgram),
        );
        let x = c.for_message(&a, &r, 0);
        let y = c.for_message(&b, &r, 0);
        let z = c.for_message(&r, &a, 0);
        assert_eq!(x.number, y.number);
        assert_ne!(x.number, z.number);
        assert!(x.client.is_none() && x.server.id == 3);
    }

    #[test]
    fn a_connect_names_both_ends() {
        let mut c = Convs::default();
        // The client and the embryo its connect made on the listener.
        let [cl, emb] = [5, 6].map(|id| ep(id, SockType::Stream));
        let x = c.connection(&cl, &emb, 7);
        let y = c.for_message(&emb, &cl, 8);
        assert_eq!(x.number, y.number);
        assert!(y.outbound(5));
    }
}

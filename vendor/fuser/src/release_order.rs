//! Keeps each `FUSE_RELEASE` ahead of the requests read after it when several event
//! loops read one FUSE connection (`Config::ordered_release`).
//!
//! The kernel sends RELEASE as a background request: close(2) returns once it is queued,
//! without waiting for the answer. The caller's next request is queued behind it, but
//! with several threads reading `/dev/fuse` another thread can read that request and
//! finish it before the thread holding the RELEASE has called `Filesystem::release`, so
//! the program sees its close take effect late (a peer still open, a lock still held).
//!
//! Here the event loops read under one lock and number the requests they read. A
//! RELEASE is registered as in flight under that lock; any later request (but those
//! that answer nothing to the caller: INTERRUPT, FORGET, BATCH_FORGET) waits until the
//! RELEASEs read before it were dispatched. A RELEASE never waits and a waiting request
//! does not hold the read lock, so the RELEASEs in flight always run to completion.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::channel::Channel;
use crate::ll::fuse_abi::fuse_opcode;

/// The read lock, the RELEASEs in flight and the condition the others wait on.
#[derive(Debug, Default)]
pub(crate) struct ReleaseOrder {
    /// Held while reading a request; the number the next request read gets.
    reading: Mutex<u64>,
    /// The numbers of the RELEASEs read and not yet dispatched.
    in_flight: Mutex<BTreeSet<u64>>,
    /// `in_flight.len()`, so that a request finds no RELEASE in flight with one load.
    n_in_flight: AtomicUsize,
    /// Notified when a RELEASE was dispatched.
    dispatched: Condvar,
}

/// What a request read must do before it is dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ticket {
    /// A RELEASE with its number: dispatched at once, then taken off the in-flight set.
    Release(u64),
    /// Any other request with its number: waits for the RELEASEs read before it.
    Ordered(u64),
    /// Not ordered against RELEASE: it answers nothing to a caller.
    Unordered,
}

/// The opcode of the request in `buf` (`fuse_in_header`: len u32, opcode u32, ...).
fn opcode(buf: &[u8]) -> Option<fuse_opcode> {
    let bytes = buf.get(4..8)?.try_into().ok()?;
    fuse_opcode::try_from(u32::from_ne_bytes(bytes)).ok()
}

impl ReleaseOrder {
    /// Reads one request from `ch` into `buf` under the read lock and numbers it.
    pub(crate) fn receive(&self, ch: &Channel, buf: &mut [u8]) -> nix::Result<(usize, Ticket)> {
        let mut next = self.reading.lock();
        let size = ch.receive_retrying(buf)?;
        Ok((size, self.number(&mut next, &buf[..size])))
    }

    /// Gives the request in `buf` the number `next` (the read lock held) and registers
    /// a RELEASE as in flight before the lock is let go.
    fn number(&self, next: &mut u64, buf: &[u8]) -> Ticket {
        let seq = *next;
        *next += 1;
        match opcode(buf) {
            Some(fuse_opcode::FUSE_RELEASE) => {
                self.in_flight.lock().insert(seq);
                self.n_in_flight.fetch_add(1, Ordering::SeqCst);
                Ticket::Release(seq)
            }
            // An interrupt is for a request read already (perhaps one that waits here);
            // forgets only count lookups down.
            Some(
                fuse_opcode::FUSE_INTERRUPT
                | fuse_opcode::FUSE_FORGET
                | fuse_opcode::FUSE_BATCH_FORGET,
            ) => Ticket::Unordered,
            _ => Ticket::Ordered(seq),
        }
    }

    /// Waits, for an ordered request, until every RELEASE read before it was
    /// dispatched. Dispatch the request while the returned guard lives: dropping it
    /// ends a RELEASE's flight.
    pub(crate) fn take_turn(&self, ticket: Ticket) -> Turn<'_> {
        if let Ticket::Ordered(seq) = ticket {
            // A RELEASE read before `seq` was registered before `seq` was read, under
            // the read lock, so this load sees it unless it was dispatched already.
            if self.n_in_flight.load(Ordering::SeqCst) != 0 {
                let mut in_flight = self.in_flight.lock();
                while in_flight.first().is_some_and(|&release| release < seq) {
                    self.dispatched.wait(&mut in_flight);
                }
            }
        }
        Turn {
            order: self,
            ticket,
        }
    }

    fn dispatched(&self, seq: u64) {
        let mut in_flight = self.in_flight.lock();
        in_flight.remove(&seq);
        self.n_in_flight.fetch_sub(1, Ordering::SeqCst);
        drop(in_flight);
        self.dispatched.notify_all();
    }
}

/// A request's turn to be dispatched; see `ReleaseOrder::take_turn`.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    order: &'a ReleaseOrder,
    ticket: Ticket,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        // Also when the filesystem method panicked: the requests behind must not wait
        // for a RELEASE that will never finish.
        if let Ticket::Release(seq) = self.ticket {
            self.order.dispatched(seq);
        }
    }
}

#[cfg(test)]
mod test {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    use super::*;

    fn header(opcode: fuse_opcode) -> [u8; 40] {
        let mut buf = [0u8; 40];
        buf[0..4].copy_from_slice(&40u32.to_ne_bytes());
        buf[4..8].copy_from_slice(&(opcode as u32).to_ne_bytes());
        buf
    }

    #[test]
    fn releases_are_numbered_and_interrupts_and_forgets_are_not_ordered() {
        let order = ReleaseOrder::default();
        assert_eq!(read(&order, fuse_opcode::FUSE_IOCTL), Ticket::Ordered(0));
        assert_eq!(read(&order, fuse_opcode::FUSE_RELEASE), Ticket::Release(1));
        assert_eq!(read(&order, fuse_opcode::FUSE_INTERRUPT), Ticket::Unordered);
        assert_eq!(read(&order, fuse_opcode::FUSE_FORGET), Ticket::Unordered);
        assert_eq!(
            read(&order, fuse_opcode::FUSE_BATCH_FORGET),
            Ticket::Unordered
        );
        assert_eq!(
            read(&order, fuse_opcode::FUSE_RELEASEDIR),
            Ticket::Ordered(5)
        );
        assert_eq!(
            order.number(&mut order.reading.lock(), &[0u8; 7]),
            Ticket::Ordered(6)
        );
        assert_eq!(order.n_in_flight.load(Ordering::SeqCst), 1);
    }

    /// Numbers a request as `receive` does once it has read it.
    fn read(order: &ReleaseOrder, op: fuse_opcode) -> Ticket {
        order.number(&mut order.reading.lock(), &header(op))
    }

    #[test]
    fn a_request_read_after_a_release_waits_for_its_dispatch() {
        let order = Arc::new(ReleaseOrder::default());
        let release = read(&order, fuse_opcode::FUSE_RELEASE);
        let send = read(&order, fuse_opcode::FUSE_IOCTL);
        let release_turn = order.take_turn(release);
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let order = order.clone();
            thread::spawn(move || {
                let _turn = order.take_turn(send);
                tx.send(()).unwrap();
            })
        };
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(release_turn);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        waiter.join().unwrap();
        assert_eq!(order.n_in_flight.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_request_read_before_a_release_and_a_later_release_do_not_wait() {
        let order = ReleaseOrder::default();
        let earlier = read(&order, fuse_opcode::FUSE_GETATTR);
        let first = read(&order, fuse_opcode::FUSE_RELEASE);
        let second = read(&order, fuse_opcode::FUSE_RELEASE);
        let _first = order.take_turn(first);
        let _second = order.take_turn(second);
        let _earlier = order.take_turn(earlier);
        let _unordered = order.take_turn(Ticket::Unordered);
    }
}

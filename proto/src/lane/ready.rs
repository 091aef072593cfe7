//! Readiness on a lane (issue 30 stage c, docs/LANE.md): what poll, select
//! and epoll report for one end, computed from the region's words without
//! the end's reader or writer (another thread of the process may be using
//! them), and the waiting flags a poller raises so that the peer signals
//! the end's eventfd (`ring::Notify::Eventfd`) when it publishes.
//!
//! The look is advisory: a position that is no position (backwards, past
//! the ring) reports that ring's side ready (readable for the incoming
//! ring, writable for the outgoing one), so that the program calls read or
//! write, which find the corruption (ECONNRESET). A read or write that the
//! look sent there and that then finds nothing to do (WouldBlock) checks
//! that the region's word of its own position is its own (ring.rs): the
//! peer could otherwise write it so that the look says ready and the call
//! does not, and a program polling in a loop would spin (integration/
//! adversarial_lanes2.sh head_lie). Each side reports only its own ring's
//! lies: a lie about the outgoing ring made readable would send a reader
//! that finds its ring sound back to the poll for ever.

use std::sync::atomic::{Ordering, fence};

use super::region::{
    OFF_FIN, OFF_HEAD, OFF_LEDGER, OFF_READER_SLEEPING, OFF_READER_WAITING, OFF_TAIL,
    OFF_WRITER_WAITING, OFF_WRITES, Region, dir_word,
};
use super::ring::{Ledger, credit, most_unread};
use super::state::State;

/// poll(2)'s bits as Linux's unix_poll gives them for a connected stream.
pub const IN: u32 = (libc::POLLIN | libc::POLLRDNORM) as u32;
pub const OUT: u32 = (libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND) as u32;
pub const RDHUP: u32 = libc::POLLRDHUP as u32;

/// What one end's look found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// POLL* bits.
    pub mask: u32,
    /// The incoming ring's tail and the outgoing ring's head as published
    /// (an edge-triggered registration reports again when one moved).
    pub tail_in: u32,
    pub head_out: u32,
}

/// End `side`'s readiness, or None when the state is not `Direct` (the
/// daemon decides: poll the data file).
pub fn look(r: &Region, side: usize) -> Option<Look> {
    if r.state() != Some(State::Direct) {
        return None;
    }
    let [cap_out, cap_in] = {
        let c = r.caps();
        if side == 0 { c } else { [c[1], c[0]] }
    };
    let din = 1 - side;
    let fin = r.word(dir_word(din, OFF_FIN)).load(Ordering::Acquire);
    let tail_in = r.word(dir_word(din, OFF_TAIL)).load(Ordering::Acquire);
    let head_in = r.word(dir_word(din, OFF_HEAD)).load(Ordering::Acquire);
    let tail_out = r.word(dir_word(side, OFF_TAIL)).load(Ordering::Acquire);
    let head_out = r.word(dir_word(side, OFF_HEAD)).load(Ordering::Acquire);
    let used_in = tail_in.wrapping_sub(head_in);
    let queued = tail_out.wrapping_sub(head_out);
    let mut mask = 0;
    // Not a ring: let read (incoming) or write (outgoing) find it.
    if used_in > cap_in || fin > 1 || used_in > 0 {
        mask |= IN;
    }
    if fin == 1 {
        mask |= IN | RDHUP;
    }
    if queued > cap_out || writable(r, side, (tail_out, head_out), cap_out) {
        mask |= OUT;
    }
    Some(Look {
        mask,
        tail_in,
        head_out,
    })
}

/// unix_writable(): writable while at most a quarter of the sender's
/// budget is in flight: its unread writes' charges against its SO_SNDBUF
/// (region.rs `with_budgets`: the writer's published ledger, with what the
/// reader passed since it looked given back, ring.rs `credit`; stored
/// nowhere: the writer's own look does), or else its ring's bytes against
/// the ring. A ledger or marks that are no writes (a peer's scribbles) say
/// writable: the write finds them (ring.rs `would_block`). As the writer,
/// not writable with as many writes unread as the marks can tell.
fn writable(r: &Region, side: usize, (tail, head): (u32, u32), cap: u32) -> bool {
    let queued = tail.wrapping_sub(head);
    match r.budgets() {
        Some((sndbufs, framing)) if sndbufs[side] != 0 && queued != 0 => {
            let writes = r.word(dir_word(side, OFF_WRITES)).load(Ordering::Acquire);
            let ledger = r.word64(dir_word(side, OFF_LEDGER)).load(Ordering::Acquire);
            let sndbuf = sndbufs[side] as usize;
            let l = Ledger::from_word(ledger);
            credit(r.marks(side), writes, l, (tail, head), framing, sndbuf).is_none_or(|l| {
                l.charge as usize * 4 <= sndbuf
                    && (writes.wrapping_sub(l.at) as usize) < most_unread(r.marks(side))
            })
        }
        _ => u64::from(queued) * 4 <= u64::from(cap),
    }
}

/// Whether end `side`'s peer has a reader waiting for this end's bytes
/// (its flags on the outgoing ring up): asleep in a read, a poll or an
/// epoll_wait, or woken and not running yet, so not writing this end's
/// bytes now (unless another of its threads is). Advice for how long to
/// look before a sleep: the words are the peer's.
pub fn peer_waits(r: &Region, side: usize) -> bool {
    let up = |off| r.word(dir_word(side, off)).load(Ordering::Relaxed) != 0;
    up(OFF_READER_WAITING) || up(OFF_READER_SLEEPING)
}

/// Raises (or lowers) end `side`'s waiting flags for what a poller waits
/// for: the incoming ring's reader flag for input, the outgoing ring's
/// writer flag for output. After raising, a SeqCst fence: a look after it
/// and the peer's publish cannot both miss each other.
/// The flags are counts (ring.rs `wait_until`): each raise is lowered once.
pub fn set_waiting(r: &Region, side: usize, input: bool, output: bool, up: bool) {
    let count = |w: &std::sync::atomic::AtomicU32| {
        if up {
            w.fetch_add(1, Ordering::Relaxed);
        } else {
            w.fetch_sub(1, Ordering::Relaxed);
        }
    };
    if input {
        count(r.word(dir_word(1 - side, OFF_READER_WAITING)));
    }
    if output {
        count(r.word(dir_word(side, OFF_WRITER_WAITING)));
    }
    fence(Ordering::SeqCst);
}

/// Moves the lane's descriptor `fd` above the program's (requirement 7):
/// to the lowest free number at or above three quarters of RLIMIT_NOFILE
/// (at most 4096, so a huge limit does not grow the fd table), close-on-
/// exec, and closes `fd`. A program that opens fewer files than the floor
/// sees Linux's numbering. Err (and `fd` closed): no room there.
pub fn move_high(fd: i32) -> Result<i32, crate::Errno> {
    let floor = high_floor();
    // SAFETY: fcntl and close on a descriptor the caller owns.
    unsafe {
        let n = libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, floor);
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        super::own_fd::close(fd);
        if n < 0 { Err(e) } else { Ok(n as i32) }
    }
}

/// The lowest number the library's own descriptors go at (`move_high`):
/// three quarters of RLIMIT_NOFILE, at most 4096.
pub fn high_floor() -> libc::c_long {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit64 of this process reads into a live rlimit.
    let r = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_NOFILE,
            std::ptr::null::<libc::rlimit>(),
            &mut rl as *mut libc::rlimit,
        )
    };
    if r < 0 {
        1024
    } else {
        (rl.rlim_cur / 4 * 3).min(4096) as libc::c_long
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::tests::{a_to_b, direct};

    /// What poll would report for end B as end A writes, fills its ring,
    /// B drains it, the words are scribbled over, and the lane goes down.
    #[test]
    fn readiness_follows_the_rings_and_the_state() {
        let (_fd, r) = direct([4096, 4096]);
        let (mut wa, mut rb) = a_to_b(&r);
        let m = |side| look(&r, side).map(|l| l.mask);
        println!("fresh: A {:?} B {:?}", m(0), m(1));
        assert_eq!(m(1), Some(OUT));
        wa.write(b"hello").unwrap();
        println!("a write: A {:?} B {:?}", m(0), m(1));
        assert_eq!(m(1), Some(IN | OUT));
        let t0 = look(&r, 1).unwrap().tail_in;
        while wa.write(&[1u8; 1000]).is_ok() {}
        println!("A full: A {:?} B {:?}", m(0), m(1));
        assert_eq!(m(0), Some(0), "a full sender is not writable");
        assert_ne!(look(&r, 1).unwrap().tail_in, t0, "an edge: the tail moved");
        let mut buf = [0u8; 4096];
        let mut got = 0;
        while let Ok(n) = rb.read(&mut buf[..1024], false) {
            got += n;
            if m(0) == Some(OUT) {
                break;
            }
        }
        // unix_writable: writable again once at most a quarter is queued.
        println!("B read {got}: A {:?}", m(0));
        assert!(got >= 4096 - 1024, "{got}");
        r.word(dir_word(0, OFF_TAIL))
            .store(0xdead_beef, Ordering::SeqCst);
        println!("tail scribbled: B {:?}", m(1));
        assert_eq!(m(1), Some(IN | OUT), "not a ring: read and write find it");
        r.set_state(State::Through);
        assert_eq!(look(&r, 1), None, "down: the daemon answers");
    }

    /// An end's peer waits while its reader's flags on the end's outgoing
    /// ring are up: a poller's (`set_waiting`) or a sleeping reader's.
    #[test]
    fn a_peer_waits_while_its_reader_flags_are_up() {
        let (_fd, r) = direct([4096, 4096]);
        assert!(!peer_waits(&r, 0) && !peer_waits(&r, 1));
        set_waiting(&r, 1, true, false, true);
        assert!(peer_waits(&r, 0), "B polls for A's bytes");
        assert!(!peer_waits(&r, 1), "A waits for nothing");
        set_waiting(&r, 1, true, false, false);
        assert!(!peer_waits(&r, 0));
        r.word(dir_word(1, OFF_READER_SLEEPING))
            .store(1, Ordering::SeqCst);
        assert!(peer_waits(&r, 1), "A's reader asleep for B's bytes");
    }

    /// A peer that writes an end's own published position (its reader's
    /// head, its writer's tail: words only that end writes) makes the look
    /// say ready where the end's call has nothing to do: the call finds the
    /// lie (Corrupt: ECONNRESET) instead of WouldBlock, which sent a program
    /// polling in a loop back to a poll that said ready again
    /// (integration/adversarial_lanes2.sh head_lie).
    #[test]
    fn a_lie_about_an_ends_own_position_is_found_by_its_call() {
        let (_fd, r) = direct([4096, 4096]);
        let (mut wa, mut rb) = a_to_b(&r);
        let m = |side| look(&r, side).map(|l| l.mask);
        r.word(dir_word(0, OFF_HEAD))
            .store(u32::MAX, Ordering::SeqCst);
        let got = rb.read(&mut [0u8; 16], false);
        println!(
            "B's head word one behind A's tail: B {:?}, B's read {got:?}",
            m(1)
        );
        assert_eq!(m(1), Some(IN | OUT));
        assert!(
            matches!(got, Err(crate::lane::LaneErr::Corrupt(_))),
            "{got:?}"
        );
        r.word(dir_word(0, OFF_HEAD)).store(0, Ordering::SeqCst);
        while wa.write(&[1u8; 1000]).is_ok() {}
        // (the 96 bytes a 1000-byte write no longer takes)
        while wa.write(&[1u8]).is_ok() {}
        r.word(dir_word(0, OFF_TAIL)).store(0, Ordering::SeqCst);
        let got = wa.write(b"x");
        println!("A full, its tail word 0: A {:?}, A's write {got:?}", m(0));
        assert_eq!(m(0), Some(OUT), "said writable, not readable");
        assert!(
            matches!(got, Err(crate::lane::LaneErr::Corrupt(_))),
            "{got:?}"
        );
        r.word(dir_word(0, OFF_TAIL))
            .store(0x7000_0000, Ordering::SeqCst);
        println!("A's tail word past the ring: A {:?}", m(0));
        assert_eq!(m(0), Some(OUT), "a lie about the outgoing ring is no input");
    }
}

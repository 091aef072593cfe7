//! accept() of a udsfs listener, in the order Linux's __sys_accept4 takes
//! it: the descriptor slot first (get_unused_fd_flags: none free below
//! RLIMIT_NOFILE is EMFILE, and the connection stays queued), then the
//! connection. One decision for both fronts (issue 28, drift 5: the library
//! let an open fail EMFILE, the supervisor asked /proc first).
//!
//! The listener's descriptor is what authorises an accept, as on Linux
//! (issue 29): a ticket asked on it (`Op::AcceptTicket`, good once, for the
//! asking thread only; src/engine/tickets.rs) is opened as
//! `.udsfs/accept/TICKET`, which parks until a connection comes (or answers
//! EAGAIN when the front does not wait) and gives the new socket's control
//! handle. The listener's own `accept` file would not do: it is its
//! creator's, and a server that listened as root and accepts as www-data
//! would meet the kernel's EACCES before the daemon saw the open. The new
//! socket is the opener's, so its data file opens for it.
//!
//! With a slot for the control handle and none for the data file (one slot
//! left), the data file's open fails EMFILE: the listener keeps the new
//! socket as a received entry (`Op::KeepAccepted`), the handle closes, and
//! the data file opens in the slot it freed.

use libc::c_int;
use udsfs_proto::Res;
use udsfs_proto::ioctl::{AcceptTicket, Accepted, Ctl, Op};
use udsfs_proto::mount::{ACCEPT_DIR, ticket_name};

use crate::client;

/// Tickets asked again when the open finds its ticket gone (the user held
/// `PER_USER` at once, and the oldest went): the daemon drops only the
/// asking user's own, so this is a race with that user's other threads.
const TICKET_TRIES: usize = 4;

/// How a front opens the mount's files for the program.
pub trait Front {
    /// An open file of the front's (the program's own descriptor, or the
    /// supervisor's).
    type Fd;
    /// Whether the program has a descriptor slot free below its
    /// RLIMIT_NOFILE. A front whose opens are the program's own answers
    /// true: they fail EMFILE before the daemon sees them.
    fn slot_free(&mut self) -> bool;
    /// Opens `rel`, a path below the mount's `.udsfs/`, with `flags`, from
    /// the thread that called `accept` (and, in the supervisor, under the
    /// same act-for grant): a ticket opens only for the thread that asked.
    fn open_ctrl(&mut self, rel: &str, flags: c_int) -> Res<Self::Fd>;
    /// The first number a control handle reads.
    fn number(&mut self, h: &Self::Fd) -> Res<u64>;
    /// Opens socket `id`'s data file as the accept's flags ask.
    fn open_data(&mut self, id: u64) -> Res<Self::Fd>;
    fn close(&mut self, fd: Self::Fd);
}

/// The flags accept4 takes: EINVAL for others.
pub fn check_flags(flags: c_int) -> Res<()> {
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// One accept on `listener` (a descriptor of its data file the front can
/// ioctl), parked in the daemon if `wait`: the new socket's data file.
pub fn accept<F: Front>(f: &mut F, listener: c_int, wait: bool) -> Res<F::Fd> {
    if !f.slot_free() {
        return Err(libc::EMFILE);
    }
    let mut tries = 0;
    let h = loop {
        let c = client::ctl(listener, Ctl::new(Op::AcceptTicket, 0))?;
        let mut rel = [0u8; ACCEPT_DIR.len() + 17];
        let (dir, name) = rel.split_at_mut(ACCEPT_DIR.len());
        dir.copy_from_slice(ACCEPT_DIR.as_bytes());
        name[0] = b'/';
        name[1..].copy_from_slice(&ticket_name(c.values::<AcceptTicket>().ticket));
        // ASCII: the directory's name and hex digits.
        let rel = core::str::from_utf8(&rel).map_err(|_| libc::EIO)?;
        let flags = libc::O_RDONLY | if wait { 0 } else { libc::O_NONBLOCK };
        match f.open_ctrl(rel, flags) {
            Err(libc::ENOENT) if tries + 1 < TICKET_TRIES => tries += 1,
            r => break r?,
        }
    };
    let id = match f.number(&h) {
        Ok(id) => id,
        Err(e) => {
            f.close(h);
            return Err(e);
        }
    };
    match f.open_data(id) {
        Err(libc::EMFILE) => {
            let kept = client::ctl(
                listener,
                Ctl::new(Op::KeepAccepted, 0).with(Accepted { id }),
            );
            f.close(h);
            f.open_data(kept?.values::<Accepted>().id)
        }
        r => {
            f.close(h);
            r
        }
    }
}

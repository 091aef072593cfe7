//! Refusing a connection to the fd channel (src/fdchannel.rs) so that its
//! client reads why.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;

use super::send_plain;

/// Refused connections the lingerer still holds, at most.
const MAX_LINGERING: usize = 32;
/// How long a refused connection is kept for its client to read the answer.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Refuses connections with an errno the client reads as its answer. Closed
/// at once, a connection whose request arrived meanwhile would reset the
/// client's socket (ECONNRESET) before it reads the answer; so one thread
/// keeps each refused connection until its client closes it (or for
/// `LINGER`), dropping what it sends (its files close unread). Past
/// `MAX_LINGERING` held and as many queued, they close at once: these few
/// come out of the daemon's reserve (src/engine/fds.rs).
pub(super) struct Refuser(std::sync::mpsc::SyncSender<OwnedFd>);

impl Refuser {
    pub(super) fn start() -> Refuser {
        let (tx, rx) = std::sync::mpsc::sync_channel::<OwnedFd>(MAX_LINGERING);
        let spawned = std::thread::Builder::new()
            .name("udsfs-fdrefuse".into())
            .spawn(move || linger(rx));
        if let Err(e) = spawned {
            log::warn!("fd channel: cannot start the refusing thread: {e}");
        }
        Refuser(tx)
    }

    pub(super) fn refuse(&self, conn: OwnedFd, e: Errno) {
        let _ = send_plain(&conn, &udsfs_proto::fdchannel::error_answer(e as i32));
        // Full (or no thread): it closes here.
        let _ = self.0.try_send(conn);
    }
}

fn linger(rx: std::sync::mpsc::Receiver<OwnedFd>) {
    let mut held: Vec<(OwnedFd, std::time::Instant)> = Vec::new();
    loop {
        let room = MAX_LINGERING - held.len();
        let first = if held.is_empty() {
            match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            }
        } else if room > 0 {
            rx.try_recv().ok()
        } else {
            None
        };
        held.extend(first.map(|c| (c, std::time::Instant::now())));
        let room = MAX_LINGERING - held.len();
        held.extend(
            rx.try_iter()
                .take(room)
                .map(|c| (c, std::time::Instant::now())),
        );
        let mut polls: Vec<libc::pollfd> = held
            .iter()
            .map(|(c, _)| libc::pollfd {
                fd: c.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: poll reads and writes the pollfds given.
        unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, 50) };
        let mut junk = [0u8; 64];
        let mut keep = Vec::with_capacity(held.len());
        for ((c, since), p) in held.into_iter().zip(&polls) {
            let mut gone = since.elapsed() > LINGER;
            if p.revents != 0 {
                // No control buffer: passed files close unread.
                // SAFETY: recv into a local buffer.
                let n = unsafe {
                    libc::recv(
                        c.as_raw_fd(),
                        junk.as_mut_ptr().cast(),
                        junk.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                gone |= n == 0 || (n < 0 && Errno::last() != Errno::EAGAIN);
            }
            if !gone {
                keep.push((c, since));
            }
        }
        held = keep;
    }
}

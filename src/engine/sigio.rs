//! SIGIO to the owner of a socket with O_ASYNC on (sk_wake_async), from the
//! wake-up paths (`Wakeups::sigio`, run once every lock is dropped).
//!
//! FUSE files have no `fasync`, so the kernel never signals for them: the
//! daemon does, through `UrgOwner::send` (src/engine/urg.rs: the setter's
//! permission, a group's members checked by the kernel in a signaller that
//! runs as the setter). Wake-up paths only note an owner here; one thread
//! sends. What is noted is a set: an owner already waiting for its SIGIO is
//! not noted twice (a standard signal pending in the target coalesces the
//! same way), so a flood of events costs the daemon at most one signal per
//! owner per round of that thread, whatever the number of messages. The set
//! holds at most `MAX_PENDING` owners, `MAX_PER_UID` of one setter; past
//! those the SIGIO is dropped with a rate-limited log line.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use nix::sys::signal::Signal;
use parking_lot::{Condvar, Mutex};

use super::log_limit::limited;
use super::urg::UrgOwner;

/// Owners waiting for their SIGIO, in all.
const MAX_PENDING: usize = 4096;
/// Owners waiting for their SIGIO that one user set.
const MAX_PER_UID: usize = 256;

#[derive(Default)]
struct Pending {
    owners: HashSet<UrgOwner>,
    per_uid: HashMap<u32, usize>,
    started: bool,
}

#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    cv: Condvar,
}

impl Pending {
    /// Notes `o` (once: an owner already noted is not noted again); the
    /// number of owners waiting when the bound refuses it.
    fn add(&mut self, o: UrgOwner) -> Result<(), usize> {
        if self.owners.contains(&o) {
            return Ok(());
        }
        let of_uid = self.per_uid.get(&o.setter_uid).copied().unwrap_or(0);
        if of_uid >= MAX_PER_UID {
            return Err(of_uid);
        }
        if self.owners.len() >= MAX_PENDING {
            return Err(self.owners.len());
        }
        self.owners.insert(o);
        *self.per_uid.entry(o.setter_uid).or_default() += 1;
        Ok(())
    }

    /// Takes every noted owner.
    fn take(&mut self) -> Vec<UrgOwner> {
        self.per_uid.clear();
        self.owners.drain().collect()
    }
}

fn queue() -> &'static Queue {
    static Q: OnceLock<Queue> = OnceLock::new();
    Q.get_or_init(Queue::default)
}

/// Notes SIGIO for `owners`; the sending thread sends them.
pub(crate) fn note(owners: &[UrgOwner]) {
    if owners.is_empty() {
        return;
    }
    let q = queue();
    let mut p = q.pending.lock();
    for &o in owners {
        if let Err(waiting) = p.add(o) {
            limited!(
                info,
                "SIGIO to {} for uid {} dropped: {waiting} owners already wait for theirs",
                o.target,
                o.setter_uid,
            );
        }
    }
    if !p.started {
        let spawned = std::thread::Builder::new()
            .name("udsfs-sigio".into())
            .spawn(send_loop);
        match spawned {
            Ok(_) => p.started = true,
            Err(e) => limited!(warn, "SIGIO not sent: no thread to send it: {e}"),
        }
    }
    q.cv.notify_one();
}

/// The sending thread: takes what is noted and sends it. A setter whose
/// group signaller did not answer gets no more of this round's (at most
/// one signaller's wait per user per round).
fn send_loop() {
    let q = queue();
    loop {
        let batch: Vec<UrgOwner> = {
            let mut p = q.pending.lock();
            while p.owners.is_empty() {
                q.cv.wait(&mut p);
            }
            p.take()
        };
        let mut unanswered = HashSet::new();
        for o in batch {
            if unanswered.contains(&o.setter_uid) {
                continue;
            }
            if !o.send(Signal::SIGIO) {
                unanswered.insert(o.setter_uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(target: i32, setter_uid: u32) -> UrgOwner {
        UrgOwner {
            target,
            setter_uid,
            started: None,
        }
    }

    #[test]
    fn an_owner_is_noted_once_and_the_notes_are_bounded() {
        let mut p = Pending::default();
        for _ in 0..1000 {
            p.add(owner(7, 1000)).expect("one owner, noted again");
        }
        println!("one owner noted 1000 times: {} waiting", p.owners.len());
        assert_eq!(p.owners.len(), 1);
        // One user's distinct owners: MAX_PER_UID, then refused.
        let took = (1..=1000)
            .filter(|&t| p.add(owner(-t, 2000)).is_ok())
            .count();
        println!("uid 2000's 1000 owners: {took} noted");
        assert_eq!(took, MAX_PER_UID);
        assert_eq!(p.add(owner(-5000, 2000)), Err(MAX_PER_UID));
        // Many users: MAX_PENDING in all.
        let mut noted = p.owners.len();
        for uid in 3000..3100 {
            noted += (1..=100).filter(|&t| p.add(owner(t, uid)).is_ok()).count();
        }
        println!(
            "100 users' 100 owners each: {} waiting in all",
            p.owners.len()
        );
        assert_eq!(noted, MAX_PENDING);
        assert_eq!(p.owners.len(), MAX_PENDING);
        // Taken, there is room again.
        assert_eq!(p.take().len(), MAX_PENDING);
        assert!(p.add(owner(-5000, 2000)).is_ok());
    }
}

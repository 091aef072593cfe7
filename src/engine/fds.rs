//! Descriptors the daemon holds for clients (files in flight, received files
//! not claimed yet, pinned pidfds, fd-channel connections): each is one of
//! the daemon's own descriptors, so each is charged to a user on one quota
//! (`Engine::fds`), whose maximum leaves a reserve for the daemon's own work
//! (FUSE, `/proc` reads, the watchdog's kept files, accepting on the fd
//! channel). Past it a client's request fails; the daemon never runs out.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use nix::errno::Errno;

use super::quota::{Quota, Refused};

/// Descriptors kept back from clients beyond the watchdog's quarter
/// (src/fuse/watchdog.rs keeps at most a quarter of the limit open): FUSE,
/// the fd channel's listener and its refused connections
/// (src/fdchannel.rs), `/proc` reads, and descriptors being received.
const RESERVE: u64 = 256;

/// What clients may make the daemon hold, of a soft RLIMIT_NOFILE `limit`.
pub fn client_budget(limit: usize) -> u64 {
    let limit = limit as u64;
    limit.saturating_sub(limit / 4).saturating_sub(RESERVE)
}

/// The errno of a refused charge: the mount's total is the system's table
/// (ENFILE); one user's share is its in-flight limit (ETOOMANYREFS).
pub fn refused_errno(r: Refused) -> Errno {
    match r {
        Refused::Full => Errno::ENFILE,
        Refused::UserShare => Errno::ETOOMANYREFS,
    }
}

/// One descriptor held for `uid`, given back when dropped.
pub struct ChargedFd {
    /// None only while dropped (the closer has it).
    fd: Option<OwnedFd>,
    quota: Arc<Quota>,
    uid: u32,
}

impl ChargedFd {
    /// Charges `fd` to `uid`; on refusal the descriptor closes here.
    pub fn new(quota: &Arc<Quota>, uid: u32, fd: OwnedFd) -> Result<ChargedFd, Errno> {
        Self::try_new(quota, uid, fd).map_err(|(e, _)| e)
    }

    /// As `new`, giving the descriptor back on refusal (to answer on it).
    pub fn try_new(
        quota: &Arc<Quota>,
        uid: u32,
        fd: OwnedFd,
    ) -> Result<ChargedFd, (Errno, OwnedFd)> {
        if let Err(r) = quota.take(uid, 1) {
            return Err((refused_errno(r), fd));
        }
        Ok(ChargedFd {
            fd: Some(fd),
            quota: quota.clone(),
            uid,
        })
    }

    /// As `new`, past `uid`'s share (`Quota::take_past_share`).
    pub fn past_share(quota: &Arc<Quota>, uid: u32, fd: OwnedFd) -> Result<ChargedFd, Errno> {
        quota.take_past_share(uid, 1).map_err(refused_errno)?;
        Ok(ChargedFd {
            fd: Some(fd),
            quota: quota.clone(),
            uid,
        })
    }

    /// Moves the charge to `uid` (a received file is the receiver's); on
    /// refusal nothing changes.
    pub fn recharge(&mut self, uid: u32) -> Result<(), Errno> {
        if uid != self.uid {
            self.quota.take(uid, 1).map_err(refused_errno)?;
            self.quota.give(self.uid, 1);
            self.uid = uid;
        }
        Ok(())
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }
}

impl std::fmt::Debug for ChargedFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fd {} of uid {}", self.as_raw_fd(), self.uid)
    }
}

impl Drop for ChargedFd {
    fn drop(&mut self) {
        // Closing a client's file can wait without end (a FUSE file's flush
        // to a server that never answers, a lingering TCP socket): never here,
        // under whatever lock or on whichever FUSE worker drops it. The charge
        // stays until the close is done, so stuck closes stay bounded.
        let (quota, uid) = (self.quota.clone(), self.uid);
        if let Some(fd) = self.fd.take() {
            closer::close_later(Box::new(move || {
                drop(fd);
                quota.give(uid, 1);
            }));
        }
    }
}

/// Threads that close clients' files: one usually; another starts whenever
/// all are busy (stuck in a close), and a spare one ends when idle.
mod closer {
    use std::collections::VecDeque;
    use std::time::Duration;

    use parking_lot::{Condvar, Mutex};

    type Job = Box<dyn FnOnce() + Send>;

    struct Queue {
        jobs: VecDeque<Job>,
        idle: usize,
    }

    static Q: Mutex<Queue> = Mutex::new(Queue {
        jobs: VecDeque::new(),
        idle: 0,
    });
    static CV: Condvar = Condvar::new();

    pub fn close_later(job: Job) {
        let mut q = Q.lock();
        q.jobs.push_back(job);
        if q.idle > 0 {
            CV.notify_one();
            return;
        }
        drop(q);
        let spawned = std::thread::Builder::new()
            .name("udsfs-closer".into())
            .spawn(serve);
        if spawned.is_err() {
            // No thread: close here rather than never.
            let job = Q.lock().jobs.pop_back();
            if let Some(job) = job {
                job();
            }
        }
    }

    fn serve() {
        loop {
            let job = {
                let mut q = Q.lock();
                loop {
                    if let Some(j) = q.jobs.pop_front() {
                        break j;
                    }
                    q.idle += 1;
                    let timed_out = CV.wait_for(&mut q, Duration::from_secs(30)).timed_out();
                    q.idle -= 1;
                    if timed_out && q.jobs.is_empty() {
                        return;
                    }
                }
            };
            job();
        }
    }
}

impl AsRawFd for ChargedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }
}

impl AsFd for ChargedFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("taken only by drop").as_fd()
    }
}

/// What `q` holds once the closer threads are done with what was dropped
/// (they give a charge back when its close ends): waits up to a second for
/// `want`, then says what there is.
#[cfg(test)]
pub(crate) fn settled(q: &Quota, want: u64) -> u64 {
    for _ in 0..500 {
        if q.used() == want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    q.used()
}

#[cfg(test)]
mod tests {
    use super::super::tests::pipe_end as end;
    use super::*;

    #[test]
    fn charged_until_dropped_and_refused_past_the_share() {
        let q = Arc::new(Quota::new("descriptors"));
        q.set_max(4);
        q.set_user_share(500);
        let a = ChargedFd::new(&q, 1000, end()).unwrap();
        let mut b = ChargedFd::new(&q, 1000, end()).unwrap();
        assert_eq!(
            ChargedFd::new(&q, 1000, end()).unwrap_err(),
            Errno::ETOOMANYREFS
        );
        b.recharge(1001).unwrap();
        assert_eq!((q.user_used(1000), q.user_used(1001)), (1, 1));
        let _c = ChargedFd::new(&q, 0, end()).unwrap();
        let _d = ChargedFd::new(&q, 0, end()).unwrap();
        assert_eq!(ChargedFd::new(&q, 0, end()).unwrap_err(), Errno::ENFILE);
        drop((a, b));
        assert_eq!(settled(&q, 2), 2);
    }

    #[test]
    fn the_budget_keeps_a_reserve() {
        assert_eq!(client_budget(1024), 1024 - 256 - 256);
        assert_eq!(client_budget(300), 0, "a tiny limit gives clients nothing");
    }
}

//! The watchdog: answers EINTR for parked callers that got a signal, and
//! EAGAIN for those whose socket timeout ran out (at each scan, so a
//! timeout ends 0-20 ms late). fuser
//! answers FUSE_INTERRUPT with ENOSYS, so the kernel never tells us; a
//! caller parked in the daemon sleeps unkillably until it is answered.
//!
//! Reading every parked thread's `/proc` status every scan cost 44 % of a
//! core for 1,000 idle parked threads, so a scan looks at a thread itself
//! only when something shows a sign of a signal for it:
//! - a caught signal (any signal but SIGKILL is queued) raises its user's
//!   queued-signal count (SigQ), and keeps it up while the thread is parked.
//!   SigQ counts the user's signals everywhere (and its timers), so a rise
//!   counts only when it lasts two scans and stands above what the last read
//!   of every thread of that user put down to other processes. One status
//!   read per user per scan.
//! - a fatal signal (SIGKILL, or SIGINT/SIGTERM left at their default, even
//!   sent with tgkill) puts SIGKILL in every thread's pending set and wakes
//!   them from their killable sleep. A process whose only parked thread is
//!   its main thread: that thread's `schedstat` changes (read every other
//!   scan). Any other process: its main thread's status (kept open) shows
//!   SIGKILL pending until it dies, then a zombie; a process-directed
//!   signal sits in ShdPnd.
//!
//! A signal that slips past these (SigQ back to the same count because
//! another signal of that user was taken in the same 20 ms, or a signal not
//! queued because the user is at RLIMIT_SIGPENDING) is found by a slow sweep
//! that reads every parked thread once per `SWEEP_SCANS` scans.
//!
//! Cost (scripts/bench row 8, 2 cores under heavy load): 1,000 threads of one
//! process parked: 0.5-2.5 % of a core, signals seen in 20-60 ms; 4,000:
//! 2-4 %, 100-170 ms (reading all 4,000 takes ~60 ms); 1,000 single-threaded
//! processes: about 8 % (34 % with a status read per process).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::sync::Weak;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use crate::procfs::{self, SIGKILL_BIT, SchedstatFile, Status, StatusFile};
use crate::sharded::ShardedMap;

use super::park::ParkTable;

/// Time between scans: a signalled caller ends within about this much.
const SCAN_EVERY: Duration = Duration::from_millis(20);
/// Every parked thread is read itself at least once per this many scans.
const SWEEP_SCANS: u64 = 250;
/// Scans of SigQ history a rise is measured against.
const QUEUED_SCANS: usize = 50;
/// `/proc` files kept open at most (each is a file descriptor; fewer when
/// RLIMIT_NOFILE is low: a quarter of it).
const MAX_KEPT_FILES: usize = 8192;

/// The threads that have requests parked, with how many each.
#[derive(Default)]
pub struct Watched(ShardedMap<u32, u32>);

impl Watched {
    pub fn add(&self, tid: u32) {
        *self.0.shard(&tid).entry(tid).or_insert(0) += 1;
    }

    pub fn remove(&self, tid: u32) {
        let mut shard = self.0.shard(&tid);
        if let Some(n) = shard.get_mut(&tid) {
            *n -= 1;
            if *n == 0 {
                shard.remove(&tid);
            }
        }
    }

    fn tids(&self) -> Vec<u32> {
        self.0.entries().into_iter().map(|(tid, _)| tid).collect()
    }
}

/// Runs the watchdog until the park table is dropped.
pub fn spawn(table: Weak<ParkTable>) {
    std::thread::Builder::new()
        .name("udsfs-watchdog".into())
        .spawn(move || {
            let mut scanner = Scanner::new();
            loop {
                std::thread::sleep(SCAN_EVERY);
                let Some(t) = table.upgrade() else { return };
                let signalled = scanner.scan(&t.watched().tids());
                if !signalled.is_empty() {
                    t.interrupt_threads(&signalled, Errno::EINTR);
                }
                // SO_RCVTIMEO / SO_SNDTIMEO: deadlines end within a scan.
                t.expire(Instant::now());
            }
        })
        .expect("spawn watchdog");
}

struct Scanner {
    scans: u64,
    threads: HashMap<u32, Thread>,
    processes: HashMap<u32, Process>,
    users: HashMap<u32, User>,
    max_kept: usize,
}

struct Thread {
    tgid: u32,
    /// Its real uid: whose SigQ counts its signals.
    uid: u32,
    /// The scan that last read this thread's own status.
    read_at: u64,
}

/// What is kept of a process with parked threads.
#[derive(Default)]
struct Process {
    /// Its main thread's status (it has several threads).
    status: Option<StatusFile>,
    /// Its main thread's schedstat, and what it said last (its only parked
    /// thread is its main thread).
    sched: Option<SchedstatFile>,
    last_sched: Option<Vec<u8>>,
}

impl Process {
    fn kept(&self) -> usize {
        usize::from(self.status.is_some()) + usize::from(self.sched.is_some())
    }
}

/// A user's queued-signal count (SigQ), as scans saw it.
#[derive(Default)]
struct User {
    /// SigQ at the last `QUEUED_SCANS` scans.
    queued: VecDeque<u64>,
    /// What of SigQ the last read of every parked thread put down to other
    /// processes (lowered whenever SigQ falls below it).
    explained: Option<u64>,
    /// Threads that read found signalled: answered, but their signals stay
    /// in SigQ until they run and take them.
    answered: Vec<u32>,
}

impl User {
    /// Records this scan's SigQ; whether it stands, in this scan and the
    /// one before, above both its recent floor and what the last full read
    /// explained (with the `still` answered signals not taken yet). A
    /// signal pending for a parked thread stays queued until we answer it;
    /// other users of SigQ (signals in flight to running processes, timers)
    /// mostly come and go within one scan.
    fn queued_rose(&mut self, q: u64, still: u64) -> bool {
        if self.queued.len() == QUEUED_SCANS {
            self.queued.pop_front();
        }
        self.queued.push_back(q);
        self.explained = self.explained.map(|e| e.min(q));
        let n = self.queued.len();
        if n < 3 {
            return n == 1;
        }
        let recent = self.queued[n - 1].min(self.queued[n - 2]);
        let floor = self.queued.range(..n - 2).min().copied().unwrap_or(0);
        recent > floor.max(self.explained.unwrap_or(0) + still)
    }

    /// Every parked thread of the user was just read, and `found` had a
    /// signal: theirs leave SigQ once taken, so they explain nothing (the
    /// next signal may arrive as one of them leaves); until then they are
    /// counted apart, in `answered`.
    fn all_read(&mut self, found: Vec<u32>) {
        self.explained = self
            .queued
            .back()
            .map(|q| q.saturating_sub(found.len() as u64));
        self.answered = found;
    }

    /// How many answered threads have not taken their signals yet.
    fn still_pending(&mut self) -> u64 {
        self.answered
            .retain(|&tid| Status::read(tid).is_ok_and(|st| st.signal_pending()));
        self.answered.len() as u64
    }
}

/// What reading one thread's status says.
enum Verdict {
    /// Answer EINTR: a signal is pending, or the thread cannot be watched.
    Answer,
    Quiet(Status),
    /// Not readable for a passing reason (out of memory or descriptors):
    /// that is no signal; read again next scan.
    Retry,
}

fn read_thread(tid: u32) -> Verdict {
    if tid == 0 {
        // FUSE gives pid 0 for a caller outside the daemon's pid namespace:
        // its signals cannot be seen, and a wait nobody could end must not
        // start (as before, it gets EINTR instead of an unkillable wait).
        log::info!("a caller outside the daemon's pid namespace cannot wait: EINTR");
        return Verdict::Answer;
    }
    match Status::read(tid) {
        Ok(st) if st.signal_pending() => Verdict::Answer,
        Ok(st) => Verdict::Quiet(st),
        // Gone (a parked thread cannot exit before it is answered, but if
        // it did nobody waits), or hidden from the daemon (hidepid).
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ESRCH | libc::ENOENT | libc::EACCES | libc::EPERM)
            ) =>
        {
            log::info!("thread {tid}: /proc/{tid}/status: {e}: EINTR");
            Verdict::Answer
        }
        Err(e) => {
            log::warn!("thread {tid}: /proc/{tid}/status: {e}; reading it again next scan");
            Verdict::Retry
        }
    }
}

impl Scanner {
    fn new() -> Scanner {
        Scanner {
            scans: 0,
            threads: HashMap::new(),
            processes: HashMap::new(),
            users: HashMap::new(),
            max_kept: MAX_KEPT_FILES.min(procfs::own_nofile_limit() / 4),
        }
    }

    /// One pass over the parked threads `tids`: the ones to answer (a
    /// signal pending, or gone).
    fn scan(&mut self, tids: &[u32]) -> HashSet<u32> {
        self.scans += 1;
        let live: HashSet<u32> = tids.iter().copied().collect();
        self.threads.retain(|tid, _| live.contains(tid));
        let mut signalled = HashSet::new();
        let mut by_process: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut by_user: HashMap<u32, HashSet<u32>> = HashMap::new();
        for &tid in tids {
            if let Some(t) = self.threads.get(&tid) {
                by_process.entry(t.tgid).or_default().push(tid);
                by_user.entry(t.uid).or_default().insert(t.tgid);
            } else if self.first_look(tid) {
                signalled.insert(tid);
            }
        }
        self.processes
            .retain(|tgid, _| by_process.contains_key(tgid));
        self.users.retain(|uid, _| by_user.contains_key(uid));
        let mut kept = self.processes.values().map(Process::kept).sum();
        let mut sweep_budget = tids.len().div_ceil(SWEEP_SCANS as usize);
        let mut reads = 0;
        for (uid, tgids) in by_user {
            let any = *tgids.iter().next().expect("a user has a process");
            let user_suspect = self.user_suspect(uid, any, &mut kept);
            let mut found = Vec::new();
            for tgid in tgids {
                let threads = &by_process[&tgid];
                let suspect = user_suspect || self.process_suspect(tgid, threads, &mut kept);
                for &tid in threads {
                    if !suspect {
                        let stale = self.threads[&tid].read_at + SWEEP_SCANS <= self.scans;
                        if !stale || sweep_budget == 0 {
                            continue;
                        }
                        sweep_budget -= 1;
                    }
                    reads += 1;
                    if self.check_thread(tid) {
                        signalled.insert(tid);
                        found.push(tid);
                    }
                }
            }
            if user_suspect && let Some(u) = self.users.get_mut(&uid) {
                u.all_read(found);
            }
        }
        if reads > 0 {
            log::trace!("scan {}: {reads} threads read", self.scans);
        }
        signalled
    }

    /// A thread seen for the first time: whether to answer it now.
    fn first_look(&mut self, tid: u32) -> bool {
        match read_thread(tid) {
            Verdict::Answer => true,
            Verdict::Quiet(st) => {
                let t = Thread {
                    tgid: st.tgid as u32,
                    uid: st.uids[0],
                    read_at: self.scans,
                };
                self.threads.insert(tid, t);
                false
            }
            Verdict::Retry => false,
        }
    }

    fn check_thread(&mut self, tid: u32) -> bool {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.read_at = self.scans;
        }
        matches!(read_thread(tid), Verdict::Answer)
    }

    /// The main thread's status of process `tgid`, through a kept file
    /// while `kept` stays under the limit.
    fn process_status(&mut self, tgid: u32, kept: &mut usize) -> io::Result<Status> {
        let p = self.processes.entry(tgid).or_default();
        if p.status.is_none() {
            let mut f = StatusFile::open(tgid)?;
            if *kept >= self.max_kept {
                return f.read();
            }
            *kept += 1;
            p.status = Some(f);
        }
        let st = p.status.as_mut().map(StatusFile::read);
        if !matches!(st, Some(Ok(_))) {
            p.status = None;
        }
        st.unwrap_or_else(|| Err(io::Error::from_raw_os_error(libc::ESRCH)))
    }

    /// Whether user `uid`'s SigQ (read through its process `tgid`) rose.
    fn user_suspect(&mut self, uid: u32, tgid: u32, kept: &mut usize) -> bool {
        let Ok(st) = self.process_status(tgid, kept) else {
            return true;
        };
        let u = self.users.entry(uid).or_default();
        let still = u.still_pending();
        let rose = u.queued_rose(st.user_queued, still);
        log::trace!(
            "scan {}: uid {uid}: SigQ {} rose {rose} explained {:?}",
            self.scans,
            st.user_queued,
            u.explained
        );
        rose
    }

    /// Whether process `tgid` shows a sign of a fatal or process-directed
    /// signal (see the module comment).
    fn process_suspect(&mut self, tgid: u32, threads: &[u32], kept: &mut usize) -> bool {
        if threads == [tgid] {
            // Every other scan, half of them each time: a fatal signal is
            // still seen within 40 ms, at half the reads.
            return (u64::from(tgid) + self.scans).is_multiple_of(2)
                && self.main_thread_woke(tgid, kept);
        }
        let Ok(st) = self.process_status(tgid, kept) else {
            return true;
        };
        st.is_dead() || st.shd_pnd != 0 || st.sig_pnd & SIGKILL_BIT != 0 || st.signal_pending()
    }

    /// For a process whose only parked thread is its main thread: whether
    /// that thread ran since the last scan. A parked thread sleeps in the
    /// kernel until answered; a fatal signal wakes it once (SIGKILL gets
    /// through a killable sleep); caught signals show in SigQ instead.
    fn main_thread_woke(&mut self, tgid: u32, kept: &mut usize) -> bool {
        let max_kept = self.max_kept;
        let p = self.processes.entry(tgid).or_default();
        let now = match p.sched.as_mut() {
            Some(f) => f.read(),
            None => SchedstatFile::open(tgid).and_then(|mut f| {
                let text = f.read();
                if *kept < max_kept {
                    *kept += 1;
                    p.sched = Some(f);
                }
                text
            }),
        };
        let Ok(now) = now else {
            p.sched = None;
            return true;
        };
        p.last_sched.replace(now.clone()) != Some(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_gone_and_unseen_threads() {
        let me = nix::unistd::gettid().as_raw() as u32;
        // Above any pid_max: a thread that is gone.
        let gone = 1 << 23;
        let mut s = Scanner::new();
        // pid 0: a caller outside our pid namespace, whose signals we
        // cannot see, must not wait unkillably.
        let signalled = s.scan(&[me, gone, 0]);
        assert_eq!(signalled, HashSet::from([gone, 0]));
        // Known now: read through its process from here on, still quiet.
        assert!(s.scan(&[me]).is_empty());
        assert_eq!(s.processes.len(), 1);
        assert!(s.scan(&[]).is_empty());
        assert!(s.threads.is_empty() && s.processes.is_empty());
    }

    #[test]
    fn a_rise_of_the_queued_count_must_last_two_scans() {
        let mut p = User::default();
        assert!(p.queued_rose(3, 0), "first sight: look at the threads once");
        assert!(!p.queued_rose(3, 0));
        assert!(!p.queued_rose(4, 0), "a signal in flight somewhere");
        assert!(!p.queued_rose(3, 0));
        assert!(!p.queued_rose(4, 0));
        assert!(p.queued_rose(4, 0), "still up a scan later: look");
        p.all_read(vec![]);
        assert!(
            !p.queued_rose(4, 0),
            "nothing new since every thread was read"
        );
        assert!(!p.queued_rose(3, 0));
        assert!(!p.queued_rose(4, 0));
        assert!(
            p.queued_rose(4, 0),
            "a fall, then a rise that lasts: look again"
        );
        // One thread had a signal, answered but not taken yet: no rise.
        p.all_read(vec![1 << 23]);
        assert!(!p.queued_rose(4, 1));
        // It took it as another arrived: the other is seen.
        assert!(
            p.queued_rose(4, 0),
            "the one that came in its place is seen"
        );
    }
}

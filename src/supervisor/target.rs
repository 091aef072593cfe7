//! The trapped thread as the supervisor sees it: its descriptors (a copy
//! through pidfd_getfd, their flags, whether one is a udsfs socket) and
//! its process.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use libc::pid_t;

/// PIDFD_THREAD (O_EXCL): a pidfd of one thread, not its thread group.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

pub struct Task {
    pub tid: pid_t,
    pidfd: Arc<OwnedFd>,
    /// A pidfd of the thread itself (PIDFD_THREAD), kept in `PIDFDS`.
    thread: bool,
}

/// Thread pidfds kept between calls (a pidfd_open and a close a trapped
/// call less), by thread id. Only PIDFD_THREAD ones: a thread's pidfd
/// names that thread alone, and once it exited no other thread that gets
/// its id since (pidfd_getfd then fails ESRCH, and `get_fd` opens anew) —
/// but for the exec'ing thread, which takes the leader's id and its pidfd
/// (de_thread), so a kept pidfd is no proof that its thread trapped: the
/// listener's validity check is. A thread-group pidfd would still name a
/// living process after the thread whose id it was kept under exited:
/// never kept.
static PIDFDS: Mutex<Option<HashMap<pid_t, Arc<OwnedFd>>>> = Mutex::new(None);
/// Most thread pidfds kept (descriptors of the supervisor): past it the
/// map starts again.
const PIDFDS_KEPT: usize = 256;

fn kept(tid: pid_t) -> Option<Arc<OwnedFd>> {
    let g = PIDFDS.lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref()?.get(&tid).cloned()
}

fn keep(tid: pid_t, fd: &Arc<OwnedFd>) {
    let mut g = PIDFDS.lock().unwrap_or_else(|e| e.into_inner());
    let m = g.get_or_insert_with(HashMap::new);
    if m.len() >= PIDFDS_KEPT && !m.contains_key(&tid) {
        m.clear();
    }
    m.insert(tid, fd.clone());
}

/// `fd`, kept for `tid`, names a thread that exited: dropped (if still
/// the one kept).
fn forget(tid: pid_t, fd: &Arc<OwnedFd>) {
    let mut g = PIDFDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = g.as_mut()
        && m.get(&tid).is_some_and(|k| Arc::ptr_eq(k, fd))
    {
        m.remove(&tid);
    }
}

/// The device of the mount and how a data file's inode looks
/// (src/fuse/inode.rs: tag 2 in the top byte, file code 2 in the low bits).
#[derive(Clone, Copy)]
pub struct Dev {
    pub major: u32,
    pub minor: u32,
}

impl Dev {
    pub fn of(path: &std::path::Path) -> Option<Dev> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes()).ok()?;
        let st = statx(&c, 0)?;
        Some(Dev {
            major: st.stx_dev_major,
            minor: st.stx_dev_minor,
        })
    }

    fn owns(&self, st: &libc::statx) -> bool {
        st.stx_dev_major == self.major
            && st.stx_dev_minor == self.minor
            && udsfs_proto::mount::is_data_ino(st.stx_ino)
    }

    /// Is the file a /proc fd link names a udsfs data file? Looks at the
    /// inode without taking a copy of the descriptor.
    pub fn probe(&self, link: &str) -> bool {
        CString::new(link)
            .ok()
            .and_then(|p| statx(&p, 0))
            .is_some_and(|st| self.owns(&st))
    }

    /// Is the open file `fd` (ours) a udsfs data file? Asked of the
    /// descriptor itself (AT_EMPTY_PATH): no /proc path to resolve.
    pub fn is_data(&self, fd: &OwnedFd) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: statx fills the zeroed struct; the path is an empty C string.
        let st = unsafe {
            let mut st: libc::statx = std::mem::zeroed();
            let r = libc::statx(
                fd.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
                libc::STATX_INO,
                &mut st,
            );
            (r == 0).then_some(st)
        };
        st.is_some_and(|st| self.owns(&st))
    }
}

/// statx of a path with AT_STATX_DONT_SYNC: the cached inode, no round trip
/// to the daemon (as the library's check, preload/src/mount.rs).
fn statx(path: &CString, flags: i32) -> Option<libc::statx> {
    // SAFETY: statx fills the zeroed struct; the path is NUL-terminated.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let r = libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            flags | libc::AT_STATX_DONT_SYNC,
            libc::STATX_INO,
            &mut st,
        );
        (r == 0).then_some(st)
    }
}

fn last() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Task {
    /// A pidfd of thread `tid` (PIDFD_THREAD, Linux 6.9; else its thread
    /// group, found in /proc). Check the notification is still valid after
    /// this, so that the pidfd names the thread that trapped.
    /// A kept thread pidfd (`PIDFDS`) serves as is: `get_fd` finds out
    /// whether its thread exited.
    pub fn open(tid: pid_t) -> Result<Task, i32> {
        if let Some(pidfd) = kept(tid) {
            return Ok(Task {
                tid,
                pidfd,
                thread: true,
            });
        }
        Task::open_new(tid)
    }

    fn open_new(tid: pid_t) -> Result<Task, i32> {
        // SAFETY: pidfd_open takes a pid and flags; the result is ours.
        let mut fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
        let thread = fd >= 0;
        if fd < 0 {
            let tgid = tgid_of(tid).ok_or(libc::ESRCH)?;
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
        }
        if fd < 0 {
            return Err(last());
        }
        // SAFETY: a fresh descriptor we own.
        let pidfd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        if thread {
            keep(tid, &pidfd);
        }
        Ok(Task { tid, pidfd, thread })
    }

    /// A copy of the target's descriptor `fd` (same open file). A kept
    /// pidfd whose thread exited (ESRCH: the id `tid` is another thread's
    /// now, or nobody's) is dropped and `tid` opened anew.
    pub fn get_fd(&self, fd: i32) -> Result<OwnedFd, i32> {
        match self.getfd(&self.pidfd, fd) {
            Err(libc::ESRCH) if self.thread => {
                forget(self.tid, &self.pidfd);
                let fresh = Task::open_new(self.tid)?;
                self.getfd(&fresh.pidfd, fd)
            }
            r => r,
        }
    }

    fn getfd(&self, pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
        use std::os::fd::AsRawFd;
        if fd < 0 {
            return Err(libc::EBADF);
        }
        // SAFETY: pidfd_getfd returns a new descriptor we own.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if r < 0 {
            return Err(match last() {
                // (Ours: the supervisor is out of descriptors.)
                e @ (libc::ESRCH | libc::EMFILE | libc::ENFILE) => e,
                _ => libc::EBADF,
            });
        }
        // SAFETY: as above.
        Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
    }

    /// Is the target's `fd` still the file `ours` (a copy of it we hold, so
    /// its inode is not given to another file)? Looked at through
    /// /proc/TID/fd; checked with the listener afterwards, as every look at
    /// the target by thread id.
    pub fn holds(&self, fd: i32, ours: &OwnedFd) -> bool {
        use std::os::fd::AsRawFd;
        let id = |st: &libc::stat| (st.st_dev, st.st_ino);
        let Ok(link) = CString::new(format!("/proc/{}/fd/{fd}", self.tid)) else {
            return false;
        };
        // SAFETY: stat and fstat fill zeroed structs; the path is NUL-terminated.
        unsafe {
            let (mut theirs, mut mine): (libc::stat, libc::stat) = std::mem::zeroed();
            libc::stat(link.as_ptr(), &mut theirs) == 0
                && libc::fstat(ours.as_raw_fd(), &mut mine) == 0
                && id(&theirs) == id(&mine)
        }
    }

    /// FD_CLOEXEC of the target's `fd`.
    pub fn cloexec(&self, fd: i32) -> bool {
        crate::procfs::fd_flags(self.tid, fd).is_some_and(|f| f & libc::O_CLOEXEC as u32 != 0)
    }

    /// Is a descriptor number below the target's RLIMIT_NOFILE free (where
    /// an install would go)? Yes when it cannot be told.
    pub fn has_free_fd(&self) -> bool {
        let Some(tgid) = tgid_of(self.tid) else {
            return true;
        };
        let Some(limit) = crate::procfs::nofile_limit(tgid) else {
            return true;
        };
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/fd", self.tid)) else {
            return true;
        };
        let below = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<usize>().ok())
            .filter(|&n| n < limit)
            .count();
        below < limit
    }
}

pub fn tgid_of(tid: pid_t) -> Option<pid_t> {
    crate::procfs::Status::read(tid as u32)
        .ok()
        .map(|st| st.tgid)
        .filter(|&t| t > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::process::{Child, Command, Stdio};

    fn ino(fd: &impl AsRawFd) -> u64 {
        // SAFETY: fstat fills the zeroed struct.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(fd.as_raw_fd(), &mut st), 0);
            st.st_ino
        }
    }

    /// `sleep 20` with the read end of a new pipe as its stdin, and that
    /// pipe's inode.
    fn sleeper() -> (Child, u64) {
        let (r, _w) = std::io::pipe().unwrap();
        let i = ino(&r);
        let child = Command::new("sleep")
            .arg("20")
            .stdin(Stdio::from(r))
            .spawn()
            .unwrap();
        (child, i)
    }

    /// Why a kept thread pidfd proves nothing about the trapped thread
    /// (emulate.rs `perform` asks the listener every call): when another
    /// thread execs, it takes the leader's id and the leader's pidfd names
    /// it, so a copy through the pidfd kept for the leader succeeds and is
    /// the new image's.
    #[test]
    fn a_kept_leader_pidfd_names_the_thread_that_exec_d_in_its_place() {
        let (r, _w) = std::io::pipe().unwrap();
        let stdin_ino = ino(&r);
        // The leader sleeps; a second thread execs `sleep` half a second on.
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import os, threading, time\n\
                 threading.Thread(target=lambda: (time.sleep(0.5), os.execv('/bin/sleep', ['sleep', '20']))).start()\n\
                 time.sleep(20)",
            ])
            .stdin(Stdio::from(r))
            .spawn()
            .unwrap();
        let pid = child.id() as pid_t;
        let t = Task::open(pid).unwrap();
        assert_eq!(t.get_fd(0).map(|f| ino(&f)), Ok(stdin_ino));
        let exe = || std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        for _ in 0..100 {
            if exe().ends_with("sleep") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let exec_d = exe().ends_with("sleep");
        let through_kept = t.get_fd(0).map(|f| ino(&f));
        println!("exec'd: {exec_d}; stdin through the pidfd kept for the leader: {through_kept:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(exec_d, "the second thread exec'd");
        assert_eq!(
            through_kept,
            Ok(stdin_ino),
            "the kept pidfd serves the new image"
        );
    }

    /// A thread pidfd kept for a thread id does not reach the process that
    /// got the id after its thread exited: the descriptor copied is the new
    /// process's own. (Without the reopen at ESRCH the copy failed.) The
    /// pid is made to come round again by ns_last_pid (root).
    #[test]
    fn a_kept_pidfd_never_serves_a_reused_id() {
        for attempt in 0..200 {
            let (mut first, first_ino) = sleeper();
            let pid = first.id() as pid_t;
            let got = Task::open(pid).and_then(|t| t.get_fd(0)).map(|f| ino(&f));
            assert_eq!(got, Ok(first_ino), "the first process's stdin");
            assert!(kept(pid).is_some(), "its thread pidfd is kept");
            first.kill().unwrap();
            first.wait().unwrap();
            if std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).is_err() {
                println!("no ns_last_pid to write: not root");
                return;
            }
            let (mut second, second_ino) = sleeper();
            if second.id() as pid_t != pid {
                second.kill().unwrap();
                second.wait().unwrap();
                continue;
            }
            let got = Task::open(pid).and_then(|t| t.get_fd(0)).map(|f| ino(&f));
            println!(
                "pid {pid} reused (attempt {attempt}): stdin copied through the kept pidfd's id: {got:?} (first process's pipe {first_ino}, second's {second_ino})"
            );
            second.kill().unwrap();
            second.wait().unwrap();
            assert_eq!(got, Ok(second_ino), "the process that has the id now");
            return;
        }
        panic!("the pid never came round again");
    }
}

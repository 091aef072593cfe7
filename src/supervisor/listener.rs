//! The seccomp listener of the trapped programs: receiving notifications,
//! checking that one is still pending, replying to it and installing
//! descriptors in its caller.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{seccomp_notif, seccomp_notif_addfd, seccomp_notif_resp};

/// What a trapped call comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Run it in the kernel as the target made it.
    Continue,
    /// Return this value.
    Value(i64),
    /// Fail with this errno.
    Errno(i32),
    /// Not a reply: a send tried on the loop sent this many bytes and goes
    /// on on a thread.
    Resume(usize),
}

/// -ERESTARTSYS, the kernel's "interrupted: restart or EINTR": only ever
/// returned when a signal is pending, so the signal code sees it.
pub const ERESTARTSYS: i32 = 512;

/// SECCOMP_IOCTL_NOTIF_SET_FLAGS's one flag (linux/seccomp.h).
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

pub struct Listener {
    fd: OwnedFd,
    /// This listener among all of the process's (a receiver's epoll set is
    /// kept per listener: a descriptor number can name another one later).
    serial: u64,
}

thread_local! {
    /// The calling receiver's epoll set holding one listener (its serial)
    /// with EPOLLEXCLUSIVE: `Listener::wait_turn`.
    static TURN: RefCell<Option<(u64, OwnedFd)>> = const { RefCell::new(None) };
}

/// Is notification `id` of listener `fd` still pending?
pub fn id_valid(fd: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
}

fn last() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Listener {
    pub fn new(fd: OwnedFd) -> Listener {
        // Each trapped call wakes a receiver blocked in NOTIF_RECV and,
        // at the reply, its caller: with this flag (Linux 6.6) each wake-up
        // runs the woken task on the waker's CPU, which is about to sleep
        // anyway, instead of a migration and an idle CPU's wake-up. Older
        // kernels say EINVAL: the wake-ups stay as they were.
        // SAFETY: the ioctl takes its flags by value.
        unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        Listener {
            fd,
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// For the park watcher (park.rs), while a call holds the listener.
    pub fn raw(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Is notification `id` still pending (its thread alive, not
    /// interrupted)? Checked before acting on what was read and before
    /// replying.
    pub fn valid(&self, id: u64) -> bool {
        id_valid(self.fd.as_raw_fd(), id)
    }

    pub fn reply(&self, id: u64, r: &Reply) {
        let mut resp = seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match *r {
            Reply::Continue => resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Reply::Value(v) => resp.val = v,
            Reply::Errno(e) => resp.error = -e.abs().max(1),
            // Never sent as such (serve hands the call to a thread).
            Reply::Resume(n) => resp.val = n as i64,
        }
        // SAFETY: the ioctl reads the response struct. It fails with ENOENT
        // when the target is gone or the call was interrupted: nothing to do.
        unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                &mut resp,
            )
        };
    }

    /// Installs our `src` in the target of notification `id`: at `at`
    /// (SETFD, replacing what is there) or at the lowest free number.
    pub fn add_fd(
        &self,
        id: u64,
        src: &OwnedFd,
        at: Option<i32>,
        cloexec: bool,
    ) -> Result<i32, i32> {
        let mut a = seccomp_notif_addfd {
            id,
            flags: if at.is_some() {
                libc::SECCOMP_ADDFD_FLAG_SETFD as u32
            } else {
                0
            },
            srcfd: src.as_raw_fd() as u32,
            newfd: at.unwrap_or(0) as u32,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the ioctl reads the addfd struct.
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
                &mut a,
            )
        };
        if r < 0 { Err(last()) } else { Ok(r) }
    }

    /// Has every process under the filter gone (a look, no wait)?
    fn hung_up(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one local pollfd without waiting.
        let r = unsafe { libc::poll(&mut p, 1, 0) };
        r == 1 && p.revents & libc::POLLIN == 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0
    }

    /// Waits until every process under the filter is gone (POLLHUP, Linux
    /// 5.8). Polled for nothing else: the kernel's wake-ups of a new
    /// notification (EPOLLIN) and of one received (EPOLLOUT) do not wake
    /// this poll, so it costs one wake-up, at the end.
    pub(super) fn wait_hung_up(&self) {
        loop {
            let mut p = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: 0,
                revents: 0,
            };
            // SAFETY: polls one local pollfd.
            let r = unsafe { libc::poll(&mut p, 1, -1) };
            if r == 1 && p.revents & (libc::POLLHUP | libc::POLLNVAL) != 0 {
                return;
            }
            if r == 1 {
                // POLLERR: the poll's lock interrupted; not the end.
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }

    /// Waits until a notification may be there, in an epoll set of the
    /// calling receiver's own that holds the listener with EPOLLEXCLUSIVE:
    /// a new notification wakes one such receiver, where RECV's own wait
    /// wakes every receiver in it (notify.rs `RECEIVERS`). Ok also at the
    /// end (EPOLLHUP: RECV says it) and when no set could be made (RECV
    /// waits then); Err(EINTR) for a signal (notify.rs's end watcher).
    /// Another receiver may take the notification first: RECV then waits
    /// for the next one, as before.
    fn wait_turn(&self) -> Result<(), i32> {
        TURN.with(|turn| {
            let mut turn = turn.borrow_mut();
            if turn.as_ref().map(|t| t.0) != Some(self.serial) {
                *turn = self.turn_set().map(|set| (self.serial, set));
            }
            let Some((_, set)) = turn.as_ref() else {
                return Ok(());
            };
            let mut ev = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: waits for one event into a local struct.
            if unsafe { libc::epoll_wait(set.as_raw_fd(), &mut ev, 1, -1) } < 0 {
                return Err(last());
            }
            Ok(())
        })
    }

    /// A new epoll set holding the listener, readable exclusively.
    fn turn_set(&self) -> Option<OwnedFd> {
        // SAFETY: makes a descriptor that we own at once.
        let set = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if set < 0 {
            return None;
        }
        // SAFETY: `set` is ours and open.
        let set = unsafe { OwnedFd::from_raw_fd(set) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32,
            u64: 0,
        };
        // SAFETY: adds the listener to our set, reading a local struct.
        let r = unsafe {
            libc::epoll_ctl(
                set.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                self.fd.as_raw_fd(),
                &mut ev,
            )
        };
        (r == 0).then_some(set)
    }

    /// The next notification, waited for in the receiver's turn
    /// (`wait_turn`), then in RECV; None once no
    /// process uses the filter any more. Since Linux 6.11 (Andrei Vagin's
    /// "seccomp: interrupt SECCOMP_IOCTL_NOTIF_RECV when all users have
    /// exited") a RECV waiting when the last one goes returns ENOENT, as
    /// one made after it; before, it waits on: notify.rs's end watcher then
    /// ends it with a signal (EINTR).
    pub(super) fn next(&self) -> Option<Result<seccomp_notif, i32>> {
        if let Err(e) = self.wait_turn() {
            return Some(Err(e));
        }
        // SAFETY: RECV wants a zeroed struct and fills it.
        let mut n: seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut n,
            )
        };
        if r == 0 {
            return Some(Ok(n));
        }
        match last() {
            // The caller went away before the receive, or none is left.
            libc::ENOENT if self.hung_up() && recv_stays() => Some(Err(wait_as_before_6_11())),
            libc::ENOENT if self.hung_up() => None,
            e => Some(Err(e)),
        }
    }
}

/// For the tests (integration/run_seccomp_end.sh): `UDSFS_TEST_RECV_STAYS=1`
/// makes a receive at the end wait as on a kernel before 6.11, whose RECV
/// does not return when the last target goes.
fn recv_stays() -> bool {
    static STAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STAYS.get_or_init(|| std::env::var_os("UDSFS_TEST_RECV_STAYS").is_some_and(|v| v == "1"))
        || RECV_STAYS.load(std::sync::atomic::Ordering::Relaxed)
}

/// `UDSFS_TEST_RECV_STAYS` set from a test of this process.
pub(super) static RECV_STAYS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// What RECV does at the end before Linux 6.11: waits until a signal
/// (EINTR).
fn wait_as_before_6_11() -> i32 {
    // SAFETY: a poll of no descriptors: sleeps until a handled signal.
    unsafe { libc::poll(std::ptr::null_mut(), 0, -1) };
    libc::EINTR
}

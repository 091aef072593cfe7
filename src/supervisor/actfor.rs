//! The supervisor's side of src/fuse/actfor.rs: before a thread makes the
//! daemon calls of a trapped one, it names the target in the mount root's
//! `user.udsfs.act_for`. The grant stays after the call (clearing it cost
//! two round trips to the daemon a call): the thread's next call that
//! needs one names its own target, and the daemon checks the target at
//! every request (src/fuse/actfor.rs `caller_of`). The calls made without
//! one (queries, receives without control data) are the same whoever the
//! daemon takes them for; a grant refused clears the one held, so that the
//! supervisor's own credentials stand in as before.
//!
//! A thread is named by its id in the supervisor's pid namespace (the
//! seccomp notification's). A supervisor in a pid namespace below the
//! daemon's (`unshare -p` above `udsfs run`) is told so once by the
//! daemon (EXDEV); from then on each grant also holds a pidfd of the
//! thread, by which the daemon finds it in its own namespace
//! (src/fuse/actfor.rs `in_daemon_ns`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::fuse::actfor::{XATTR, XATTR_SECURITY};

pub struct Grant {
    /// Set in the daemon (else the supervisor's own credentials stand in).
    set: bool,
}

/// Said once: a daemon that refuses leaves the supervisor's credentials.
static WARNED: AtomicBool = AtomicBool::new(false);
/// Said once: a grant refused for a thread of another user than ours.
static OTHER_USER_WARNED: AtomicBool = AtomicBool::new(false);
/// Said once: a thread outside the tree is trapped by one of our listeners.
static OUTSIDER_WARNED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's grant is set in the daemon.
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The mount and the thread the sends of this thread's call name
    /// (`Named`).
    static NAMED: std::cell::RefCell<Option<(std::path::PathBuf, i32)>> =
        const { std::cell::RefCell::new(None) };
}

/// A send made without a grant set first: its message ioctls name the
/// thread it is made for (`MsgHead::act_for`), which the daemon takes only
/// when this thread holds a checked grant for exactly it (the grant it set
/// for an earlier call of that thread, or of another thread of the same
/// process with the same ids: src/fuse/actfor.rs `caller_named`); refused,
/// the grant is set by setxattr and the send made again (`refused`). One
/// round trip a send instead of two. Only for a call whose daemon requests
/// are its message ioctls and the queries that are the same whoever asks
/// (the caller, src/supervisor/emulate.rs, decides which).
pub struct Named;

impl Named {
    /// None: this thread holds no grant in the daemon (none set yet, or the
    /// daemon refuses them): the grant by setxattr first, as before.
    pub fn new(mount: &Path, tid: i32) -> Option<Named> {
        if !HELD.get() {
            return None;
        }
        NAMED.set(Some((mount.to_path_buf(), tid)));
        Some(Named)
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        NAMED.set(None);
    }
}

/// The thread this thread's sends name now (0: none, the grant held).
pub fn named() -> u32 {
    NAMED.with_borrow(|n| n.as_ref().map_or(0, |(_, tid)| *tid as u32))
}

/// A send that named its thread was refused (EPERM): the grant by
/// setxattr, the full check. Some(true): granted, send again naming it;
/// Some(false): refused, but the supervisor's own credentials stand in, send
/// again without (as `Grant::new` decides); None: refused.
pub fn refused() -> Option<bool> {
    let (mount, tid) = NAMED.with_borrow(|n| n.clone())?;
    let g = Grant::new(&mount, tid)?;
    if !g.set {
        NAMED.set(None);
    }
    Some(g.set)
}

/// The security name was refused (no CAP_SYS_ADMIN over the mount, or a
/// security module that keeps the namespace): the user name from then on.
static NO_SECURITY_NAME: AtomicBool = AtomicBool::new(false);

/// The daemon said that this supervisor's pid namespace is below its own
/// (EXDEV): grants name their thread with a pidfd too (`grant`).
static BELOW_DAEMON: AtomicBool = AtomicBool::new(false);

/// Sets xattr `name` to `value` with `call` (setxattr on a path, fsetxattr
/// on a descriptor), given the NUL-terminated name, the value and its
/// length: Ok, or the errno it set.
fn set_xattr(
    name: &str,
    value: &[u8],
    call: impl FnOnce(*const libc::c_char, *const libc::c_void, usize) -> libc::c_int,
) -> Result<(), i32> {
    let name = CString::new(name).expect("no NUL in the name");
    if call(name.as_ptr(), value.as_ptr().cast(), value.len()) == 0 {
        return Ok(());
    }
    Err(std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO))
}

fn set_as(root: &CString, name: &str, value: &[u8]) -> Result<(), i32> {
    // SAFETY: NUL-terminated path and name; the value is the caller's buffer.
    set_xattr(name, value, |n, v, len| unsafe {
        libc::setxattr(root.as_ptr(), n, v, len, 0)
    })
}

/// This thread's anchor: a udsfs socket of its own (made at its first
/// grant), whose data file the security name is set on. The grant is the
/// thread's whatever file it is set on, and a setxattr holds the file's
/// inode lock for its round trip to the daemon: on the mount root, shared
/// by every worker, the grants of all the calls in progress went one at a
/// time. None inside: none to be had (the root then).
fn anchor_set(root: &CString, name: &str, value: &[u8]) -> Option<Result<(), i32>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    thread_local! {
        static ANCHOR: std::cell::RefCell<Option<Option<std::os::fd::OwnedFd>>> =
            const { std::cell::RefCell::new(None) };
    }
    ANCHOR.with(|a| {
        let mut a = a.borrow_mut();
        let fd = a.get_or_insert_with(|| {
            let mount = Path::new(std::ffi::OsStr::from_bytes(root.as_bytes()));
            super::daemon::Daemon {
                mount: mount.to_path_buf(),
            }
            .new_sock(libc::SOCK_DGRAM, false)
            .ok()
        });
        let fd = fd.as_ref()?;
        // SAFETY: our descriptor, NUL-terminated name; the value is the caller's buffer.
        Some(set_xattr(name, value, |n, v, len| unsafe {
            libc::fsetxattr(fd.as_raw_fd(), n, v, len, 0)
        }))
    })
}

/// Sets the grant on this thread's anchor (else the root): under the
/// security name while it is let (one round trip to the daemon instead of
/// two, src/fuse/actfor.rs XATTR_SECURITY), else under the user name. A
/// refusal under the security name is tried again under the user name (the
/// kernel's refusal and the daemon's look alike); once the user name alone
/// is let, it is used from then on. The user name goes on the anchor too:
/// on the root of a mount that is not ours (sticky, another owner) the
/// kernel refuses a user.* name to everyone but its owner.
/// Ok, or the errno of the refusal (EXDEV: the daemon's, see `grant`).
fn set(root: &CString, value: &[u8]) -> Result<(), i32> {
    let set_named = |name: &str| match anchor_set(root, name, value) {
        Some(r) => r,
        None => set_as(root, name, value),
    };
    if NO_SECURITY_NAME.load(Ordering::Relaxed) {
        return set_named(XATTR);
    }
    match set_named(XATTR_SECURITY) {
        // (The kernel never says EXDEV for a setxattr: the name was let.)
        Ok(()) => return Ok(()),
        Err(libc::EXDEV) => return Err(libc::EXDEV),
        Err(_) => {}
    }
    let set = set_named(XATTR);
    if set.is_ok() {
        NO_SECURITY_NAME.store(true, Ordering::Relaxed);
    }
    set
}

/// A pidfd of thread `tid` of our pid namespace (PIDFD_THREAD, Linux 6.9;
/// before it, a thread that leads its process only).
fn thread_pidfd(tid: i32) -> Result<std::os::fd::OwnedFd, i32> {
    use std::os::fd::FromRawFd;
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: pidfd_open takes a pid and flags; the result is ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, flags) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor we own.
            return Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
        }
    }
    Err(std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::ESRCH))
}

/// Sets the grant for thread `tid` ("TID", then `more`: " netns" or
/// nothing). In a pid namespace below the daemon's, `tid` is not the
/// thread's id there: the daemon refuses a bare id with EXDEV, and the
/// grant names a pidfd of the thread too ("pidfd=FD", held until the
/// setxattr returned), which the daemon reads in our /proc/TID/fdinfo.
fn grant(root: &CString, tid: i32, more: &str) -> Result<(), i32> {
    if !BELOW_DAEMON.load(Ordering::Relaxed) {
        match set(root, format!("{tid}{more}").as_bytes()) {
            Err(libc::EXDEV) => BELOW_DAEMON.store(true, Ordering::Relaxed),
            r => return r,
        }
    }
    use std::os::fd::AsRawFd;
    let pidfd = thread_pidfd(tid)?;
    set(
        root,
        format!("{tid}{more} pidfd={}", pidfd.as_raw_fd()).as_bytes(),
    )
}

impl Grant {
    /// None: refused. The supervisor's own credentials then stand in for
    /// the target's only when it is in our tree (another user's mount, whose
    /// root only its owner may set the xattr of) and of our user (fsuid);
    /// one of another user (root's run of a command that dropped to it) or
    /// outside the tree is trapped
    /// by a listener handed over by a process of the tree (`adopt`), and
    /// must not get them (integration/adversarial_run.sh).
    pub fn new(mount: &Path, tid: i32) -> Option<Grant> {
        let Ok(root) = CString::new(mount.as_os_str().as_bytes()) else {
            return super::below_us(tid).then_some(Grant { set: false });
        };
        let granted = grant(&root, tid, "");
        if granted.is_ok() {
            HELD.set(true);
            return Some(Grant { set: true });
        }
        if HELD.replace(false) {
            let _ = set(&root, b"0");
        }
        if !super::below_us(tid) {
            if !OUTSIDER_WARNED.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "udsfs run (seccomp): thread {tid} is not one this udsfs run started: its calls are left to the kernel"
                );
            }
            return None;
        }
        let refused = std::io::Error::from_raw_os_error(granted.err().unwrap_or(libc::EIO));
        // Our credentials stand in only for our own user's thread: root's
        // run of a command that dropped to another user would otherwise
        // lend it root's (SO_PEERCRED uid 0: integration/adversarial_root_run.sh).
        // SAFETY: geteuid has no preconditions.
        let ours = unsafe { libc::geteuid() };
        let theirs = crate::procfs::Status::read(tid as u32).map(|st| st.uids[3]);
        if theirs.as_ref().ok() != Some(&ours) {
            if !OTHER_USER_WARNED.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "udsfs run (seccomp): the daemon does not let the supervisor act for thread {tid} ({refused}), whose user is not the supervisor's ({}): its socket calls are refused or left to the kernel",
                    theirs.map_or_else(|_| "gone".to_string(), |u| format!("uid {u}"))
                );
            }
            return None;
        }
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "udsfs run (seccomp): the daemon does not let the supervisor act for thread {tid} ({refused}): its sockets carry the supervisor's credentials"
            );
        }
        Some(Grant { set: false })
    }
}

/// The supervisor thread in a kernel socket's network namespace while it
/// makes the socket's udsfs stand-in for thread `tid`, which has left that
/// namespace since it made the socket (udsfs_calls::convert::SocketNetns
/// decides and switches): the grant says "netns", so that the daemon makes
/// the socket where this thread is. A plain grant, then back to the
/// thread's namespace, when dropped. None where nothing is to be done, or
/// it cannot be: the target's namespace then stands.
pub struct SocketNetns {
    root: CString,
    tid: i32,
    /// Dropped after the grant is set back (`Drop`): the thread back in
    /// its own namespace.
    _in: udsfs_calls::convert::SocketNetns,
}

impl SocketNetns {
    pub fn enter(mount: &Path, tid: i32, k: &std::os::fd::OwnedFd) -> Option<SocketNetns> {
        use std::os::fd::AsRawFd;
        let root = CString::new(mount.as_os_str().as_bytes()).ok()?;
        let theirs = crate::procfs::ns_inode(tid as u32, "net")?;
        let entered = udsfs_calls::convert::SocketNetns::enter(k.as_raw_fd(), Some(theirs))?;
        if grant(&root, tid, " netns").is_err() {
            return None; // (dropped: back to the thread's namespace)
        }
        Some(SocketNetns {
            root,
            tid,
            _in: entered,
        })
    }
}

impl Drop for SocketNetns {
    fn drop(&mut self) {
        let _ = grant(&self.root, self.tid, "");
    }
}

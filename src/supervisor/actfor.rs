//! The supervisor's side of src/fuse/actfor.rs: before a thread makes the
//! daemon calls of a trapped one, it names the target in the mount root's
//! `user.udsfs.act_for`; the guard clears it when the call is done.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::fuse::actfor::XATTR;

pub struct Grant {
    root: Option<CString>,
}

/// Said once: a daemon that refuses leaves the supervisor's credentials.
static WARNED: AtomicBool = AtomicBool::new(false);
/// Said once: a thread outside the tree is trapped by one of our listeners.
static OUTSIDER_WARNED: AtomicBool = AtomicBool::new(false);

fn set(root: &CString, value: &[u8]) -> bool {
    let name = CString::new(XATTR).expect("no NUL in the name");
    // SAFETY: NUL-terminated path and name; the value is a local buffer.
    unsafe {
        libc::setxattr(
            root.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        ) == 0
    }
}

impl Grant {
    /// None: refused. The supervisor's own credentials then stand in for
    /// the target's only when it is in our tree (another user's mount, whose
    /// root only its owner may set the xattr of); one outside it is trapped
    /// by a listener handed over by a process of the tree (`adopt`), and
    /// must not get them (integration/adversarial_run.sh).
    pub fn new(mount: &Path, tid: i32) -> Option<Grant> {
        let Ok(root) = CString::new(mount.as_os_str().as_bytes()) else {
            return super::below_us(tid).then_some(Grant { root: None });
        };
        if set(&root, tid.to_string().as_bytes()) {
            return Some(Grant { root: Some(root) });
        }
        if !super::below_us(tid) {
            if !OUTSIDER_WARNED.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "udsfs run (seccomp): thread {tid} is not one this udsfs run started: its calls are left to the kernel"
                );
            }
            return None;
        }
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "udsfs run (seccomp): the daemon does not let the supervisor act for thread {tid} ({}): its sockets carry the supervisor's credentials",
                std::io::Error::last_os_error()
            );
        }
        Some(Grant { root: None })
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(root) = &self.root {
            set(root, b"0");
        }
    }
}

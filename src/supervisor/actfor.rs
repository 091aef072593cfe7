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
    pub fn new(mount: &Path, tid: i32) -> Grant {
        let Ok(root) = CString::new(mount.as_os_str().as_bytes()) else {
            return Grant { root: None };
        };
        if set(&root, tid.to_string().as_bytes()) {
            return Grant { root: Some(root) };
        }
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "udsfs run (seccomp): the daemon does not let the supervisor act for thread {tid} ({}): its sockets carry the supervisor's credentials",
                std::io::Error::last_os_error()
            );
        }
        Grant { root: None }
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(root) = &self.root {
            set(root, b"0");
        }
    }
}

//! The calling thread's effective uid switched for a moment, so that the
//! kernel's own permission checks answer for the target's user. Never in
//! the daemon: while a thread runs as a user, that user may tgkill it. The
//! raw setresuid changes this thread only (the C library's changes every
//! thread of the process); the real and saved uids stay, so the way back is
//! always allowed.

/// Switched until dropped.
pub struct ThreadUid {
    back: Option<u32>,
}

impl ThreadUid {
    /// Takes effective uid `euid`; already so, nothing changes. Fails as
    /// setresuid fails (EPERM unprivileged).
    pub fn enter(euid: u32) -> std::io::Result<ThreadUid> {
        // SAFETY: geteuid has no preconditions.
        let ours = unsafe { libc::geteuid() };
        if ours == euid {
            return Ok(ThreadUid { back: None });
        }
        set_euid(euid)?;
        Ok(ThreadUid { back: Some(ours) })
    }
}

fn set_euid(euid: u32) -> std::io::Result<()> {
    // SAFETY: setresuid of this thread only; -1 keeps the real and saved uids.
    let r = unsafe { libc::syscall(libc::SYS_setresuid, -1i64, euid as i64, -1i64) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for ThreadUid {
    fn drop(&mut self) {
        if let Some(euid) = self.back
            && let Err(e) = set_euid(euid)
        {
            super::call::say(&format!(
                "cannot switch this thread back to uid {euid}: {e}"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadUid;

    fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn a_switch_holds_for_this_thread_only_and_comes_back() {
        assert_eq!(
            euid(),
            0,
            "this test switches uids: run it as root (CI does)"
        );
        std::thread::spawn(|| {
            let other = std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(50));
                euid()
            });
            {
                let _as = ThreadUid::enter(65534).unwrap();
                assert_eq!(euid(), 65534);
                assert_eq!(other.join().unwrap(), 0, "another thread was switched too");
            }
            assert_eq!(euid(), 0);
        })
        .join()
        .unwrap();
    }
}

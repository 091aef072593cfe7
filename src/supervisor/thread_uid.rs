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

/// The calling thread's filesystem credentials (fsuid, fsgid, groups) made
/// those of thread `tid` for a moment, so that the kernel paths the
/// supervisor looks at and makes for it (a bind's routed link and the errno
/// of a path, through /proc/TID/root) are judged as the target's own mknod
/// and stat would be: root's supervisor of a program that dropped to
/// another user must not make names where that user may not, nor tell it
/// what exists there (integration/adversarial_root_run.sh). Leaving fsuid 0
/// drops the filesystem capabilities of this thread (CAP_DAC_OVERRIDE and
/// the rest); CAP_SYS_PTRACE, which /proc/TID/root needs, stays. Nothing
/// changes for a supervisor that is not root (its targets are its own user).
pub struct FsCreds {
    back: Option<(u32, u32, Vec<libc::gid_t>)>,
}

impl FsCreds {
    /// Err(errno) when the target's credentials cannot be read or taken:
    /// then nothing is done for it.
    pub fn of(tid: i32) -> Result<FsCreds, i32> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(FsCreds { back: None });
        }
        let st = crate::procfs::Status::read(tid as u32).map_err(|_| libc::ESRCH)?;
        // The trapped thread's own, not those of an image that took its id.
        super::pending::check(tid).map_err(|_| libc::ESRCH)?;
        let (uid, gid) = (st.uids[3], st.gids[3]);
        // SAFETY: the raw calls below change this thread only; a query
        // (setfs*(-1)) returns the current value.
        let (fsuid, fsgid) = unsafe {
            (
                libc::syscall(libc::SYS_setfsuid, -1i64) as u32,
                libc::syscall(libc::SYS_setfsgid, -1i64) as u32,
            )
        };
        let mut groups = vec![0 as libc::gid_t; 65536];
        // SAFETY: the buffer holds NGROUPS_MAX entries.
        let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
        if n < 0 {
            return Err(libc::EPERM);
        }
        groups.truncate(n as usize);
        if (uid, gid) == (fsuid, fsgid) && st.groups == groups {
            return Ok(FsCreds { back: None });
        }
        let taken = FsCreds {
            back: Some((fsuid, fsgid, groups)),
        };
        // SAFETY: per-thread raw calls with a local list.
        let ok = unsafe {
            libc::syscall(libc::SYS_setgroups, st.groups.len(), st.groups.as_ptr()) == 0
                && {
                    libc::syscall(libc::SYS_setfsgid, gid as i64);
                    libc::syscall(libc::SYS_setfsgid, -1i64) as u32 == gid
                }
                && {
                    libc::syscall(libc::SYS_setfsuid, uid as i64);
                    libc::syscall(libc::SYS_setfsuid, -1i64) as u32 == uid
                }
        };
        if !ok {
            return Err(libc::EPERM); // (dropped: back as we were)
        }
        Ok(taken)
    }
}

impl Drop for FsCreds {
    fn drop(&mut self) {
        let Some((uid, gid, groups)) = self.back.take() else {
            return;
        };
        // SAFETY: per-thread raw calls; fsuid first, which gives back the
        // capabilities that setgroups and setfsgid need.
        let back = unsafe {
            libc::syscall(libc::SYS_setfsuid, uid as i64);
            libc::syscall(libc::SYS_setfsgid, gid as i64);
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) == 0
                && libc::syscall(libc::SYS_setfsuid, -1i64) as u32 == uid
                && libc::syscall(libc::SYS_setfsgid, -1i64) as u32 == gid
        };
        if !back {
            super::call::say(&format!(
                "cannot switch this thread's file credentials back to {uid}:{gid}"
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

    #[test]
    fn file_credentials_are_the_targets_for_a_moment() {
        assert_eq!(euid(), 0, "this test switches credentials: run it as root");
        let mut child = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sleep",
                "5",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let tid = child.id() as i32;
        let dir = tempfile_dir();
        std::fs::create_dir(&dir).unwrap();
        {
            let _as = super::FsCreds::of(tid).unwrap();
            let made = std::fs::File::create(format!("{dir}/x"));
            assert_eq!(
                made.map_err(|e| e.raw_os_error()).err(),
                Some(Some(libc::EACCES)),
                "root's 0755 directory, as 65534"
            );
        }
        std::fs::File::create(format!("{dir}/y")).expect("root again after the drop");
        std::fs::remove_dir_all(&dir).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    fn tempfile_dir() -> String {
        format!("/tmp/udsfs-fscreds-{}", std::process::id())
    }
}

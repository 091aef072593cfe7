//! fcntl and the socket ioctls about O_ASYNC and the SIGIO/SIGURG owner on
//! a udsfs socket of a supervised program, as udsfs_calls::sigio decides
//! them, from the target's memory and pid namespace (`Target`); and what a
//! conversion carries of them.
//!
//! The filter traps fcntl only for the commands with a part in the daemon
//! (`sigio::FCNTLS`: F_GETFL, F_SETFL, F_SETOWN, F_SETOWN_EX; filter.rs),
//! and triage continues them on any other file. On a udsfs socket the
//! daemon's part is done first and the program's own call then continues
//! in the kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE), which keeps the flags
//! and the owner on the file with the program's credentials and in its pid
//! namespace: F_GETOWN, F_GETOWN_EX, F_SETSIG and F_GETSIG are the kernel's
//! and cost no notification. F_GETFL is answered here (the kernel's flags,
//! read on the supervisor's copy of the same open file, with O_ASYNC as the
//! daemon keeps it).

use std::os::fd::{AsRawFd, OwnedFd};

use udsfs_calls::fileflags;
use udsfs_calls::sigio::{self, Part};

use super::daemon::Res;
use super::listener::Reply;
use super::mem;
use crate::engine::log_limit::limited;

/// A supervised thread: its memory, and pids as it names them (its pid
/// namespace) against the supervisor's.
pub struct Target {
    pub tid: i32,
}

impl sigio::Program for Target {
    fn read_int(&self, addr: u64) -> Res<i32> {
        mem::read_u32(self.tid, addr).map(|v| v as i32)
    }
    fn write_int(&self, addr: u64, v: i32) -> Res<()> {
        mem::write_u32(self.tid, addr, v as u32)
    }
    /// A program in the supervisor's pid namespace names pids as it does;
    /// one in another may name itself (src/engine/pidns.rs
    /// `owner_from_task`, as the daemon maps an owner): any other pid or
    /// group of its namespace is ESRCH here, said, rather than whoever has
    /// that number in the supervisor's.
    fn owner_to_front(&self, target: i32) -> Res<i32> {
        if target == 0 {
            return Ok(0);
        }
        let tid = self.tid as u32;
        let tgid = || {
            crate::procfs::Status::read(tid)
                .map(|s| s.tgid)
                .unwrap_or(0)
        };
        crate::engine::pidns::owner_from_task(target, tid, tgid).ok_or_else(|| {
            limited!(
                info,
                "thread {tid}: FIOSETOWN {target} names another process of its pid namespace: \
                 ESRCH (F_SETOWN carries that)"
            );
            libc::ESRCH
        })
    }
    fn owner_to_program(&self, owner: i32) -> i32 {
        let shown = crate::engine::pidns::to_viewer(owner.saturating_abs(), self.tid as u32);
        if owner < 0 { -shown } else { shown }
    }
}

/// fcntl(`a[1]`, `a[2]`) of thread `tid` on udsfs socket `s` (its copy).
pub fn fcntl(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Reply {
    let (cmd, arg) = (a[1] as i32, a[2]);
    let part = match sigio::fcntl_part(cmd, arg, &Target { tid }) {
        Ok(p) => p,
        Err(e) => return Reply::Errno(e),
    };
    let fd = s.as_raw_fd();
    match part {
        Part::Kernel => Reply::Continue,
        Part::GetFl => match sigio::kernel_fcntl(fd, libc::F_GETFL, 0) {
            Ok(fl) => Reply::Value(fileflags::visible(sigio::with_async(fd, fl)).into()),
            Err(e) => Reply::Errno(e),
        },
        // F_SETFL is made here on the supervisor's copy (the same open
        // file), with the data file's O_DIRECT kept (fileflags.rs): the
        // program's own call would clear it, and splice would read through
        // the page cache again.
        Part::SetAsync(_) => {
            let set = fileflags::kept(arg as i32)
                .and_then(|kept| sigio::kernel_fcntl(fd, libc::F_SETFL, kept as u64));
            match set.and_then(|_| sigio::daemon_part(fd, part, 0)) {
                Ok(_) => Reply::Value(0),
                Err(e) => Reply::Errno(e),
            }
        }
        p => match sigio::daemon_part(fd, p, 0) {
            Ok(_) => Reply::Continue,
            Err(e) => Reply::Errno(e),
        },
    }
}

/// Does fcntl(`a[1]`) or ioctl(`a[1]`) name an owner (the daemon must take
/// the call as the target's: its pid namespace and user decide)?
pub fn sets_owner(nr: i64, a: &[u64; 6]) -> bool {
    match nr {
        libc::SYS_fcntl => matches!(a[1] as i32, libc::F_SETOWN | sigio::F_SETOWN_EX),
        libc::SYS_ioctl => matches!(a[1] as u32, sigio::FIOSETOWN | sigio::SIOCSPGRP),
        _ => false,
    }
}

/// The ioctls of `sigio::IOCTLS` on udsfs socket `s`; None: not one.
pub fn ioctl(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Option<Res<()>> {
    sigio::ioctl(s.as_raw_fd(), a[1] as u32, a[2], &Target { tid })
}

/// What kernel socket `k` of thread `tid` carries of O_ASYNC, its owner and
/// F_SETSIG to `new`, the udsfs socket that takes its place.
pub fn carry(k: &OwnedFd, new: &OwnedFd, tid: i32) -> Res<()> {
    sigio::Carry::of(k.as_raw_fd()).apply(new.as_raw_fd(), &Target { tid })
}

//! SIGURG to a socket's owner (F_SETOWN, FIOSETOWN, SIOCSPGRP) when an
//! out-of-band byte arrives, with Linux's permission check.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Who gets SIGURG: a process (`target` > 0) or a process group (< 0), as
/// F_SETOWN takes it, and the user who set it (for the permission check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UrgOwner {
    pub target: i32,
    pub setter_uid: u32,
}

impl UrgOwner {
    /// send_sigurg: the signal goes only where the setter could send it
    /// (sigio_perm: root, or the target's real or saved uid is the setter's),
    /// checked for each process of a group.
    pub(crate) fn signal(self) {
        if self.target < 0 && self.setter_uid == 0 {
            let res = killpg(Pid::from_raw(-self.target), Signal::SIGURG);
            if let Err(e) = res {
                log::debug!("SIGURG to process group {}: {}", -self.target, e.desc());
            }
            return;
        }
        let pids = if self.target > 0 {
            vec![self.target]
        } else {
            group_members(-self.target)
        };
        for pid in pids {
            if self.setter_uid != 0 && !uid_may_signal(self.setter_uid, pid) {
                log::info!(
                    "SIGURG to {pid} not sent: its owner was set by uid {}, who may not signal it",
                    self.setter_uid
                );
                continue;
            }
            if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGURG) {
                log::debug!("SIGURG to {pid}: {}", e.desc());
            }
        }
    }
}

/// The processes of process group `pgrp` (field 5 of /proc/PID/stat).
fn group_members(pgrp: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the command name in parentheses: state, ppid, pgrp.
            let after = stat.rsplit_once(") ").map_or("", |(_, a)| a);
            after.split(' ').nth(2).and_then(|g| g.parse().ok()) == Some(pgrp)
        })
        .collect()
}

/// Does process `pid` run with real or saved uid `uid`?
fn uid_may_signal(uid: u32, pid: i32) -> bool {
    // uids: real, effective, saved, filesystem
    u32::try_from(pid)
        .ok()
        .and_then(|p| crate::procfs::Status::read(p).ok())
        .is_some_and(|st| st.uids[0] == uid || st.uids[2] == uid)
}

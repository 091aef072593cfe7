//! `udsfs umount`: stop the daemon of a mount, or detach a mount nobody serves.

use std::path::Path;
use std::time::{Duration, Instant};

use super::mounts;

pub fn umount(mp: &Path) -> Result<(), String> {
    let mp = mounts::absolute(mp)?;
    // The fsname's pid is the daemon's as its own pid namespace saw it: signal
    // it only if that pid here runs udsfs (a daemon started under
    // `unshare --pid` records 1, which here is init).
    let daemon = mounts::top_mount(&mp)
        .and_then(|m| m.daemon_pid())
        .filter(|&pid| mounts::daemon_alive(pid));
    if let Some(pid) = daemon {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if !mounts::is_mounted(&mp) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if !mounts::is_mounted(&mp) {
        return Err(format!("{} is not mounted", mp.display()));
    }
    mounts::detach(&mp)
}

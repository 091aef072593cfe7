//! The mount table (read by `procfs`) as far as the command line needs it:
//! is a directory a udsfs mount, which daemon serves it, and detaching one.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One mount of the table.
pub struct MountEntry {
    pub mountpoint: PathBuf,
    pub fstype: String,
    pub source: String,
}

impl MountEntry {
    /// The daemon's pid, from the fsname `udsfs:PID` the daemon mounts with.
    pub fn daemon_pid(&self) -> Option<i32> {
        if !self.is_udsfs() {
            return None;
        }
        self.source.strip_prefix("udsfs:")?.parse().ok()
    }

    /// A udsfs mount: type fuse.udsfs, or plain fuse with udsfs's fsname.
    pub fn is_udsfs(&self) -> bool {
        self.fstype == "fuse.udsfs" || (self.fstype == "fuse" && self.source.starts_with("udsfs:"))
    }
}

/// `mp` made absolute, also when it is a stale mount (where stat fails).
pub fn absolute(mp: &Path) -> Result<PathBuf, String> {
    if let Ok(p) = std::fs::canonicalize(mp) {
        return Ok(p);
    }
    let parent = match mp.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = mp
        .file_name()
        .ok_or_else(|| format!("{}: not a directory name", mp.display()))?;
    std::fs::canonicalize(parent)
        .map(|p| p.join(name))
        .map_err(|e| format!("{}: {e}", mp.display()))
}

/// Every mount, in mount order.
pub fn table() -> Vec<MountEntry> {
    crate::procfs::mounts()
        .unwrap_or_default()
        .into_iter()
        .map(|m| MountEntry {
            mountpoint: m.target,
            fstype: m.fstype,
            source: m.source,
        })
        .collect()
}

/// The topmost mount on `mp`, if any.
pub fn top_mount(mp: &Path) -> Option<MountEntry> {
    table().into_iter().rev().find(|m| m.mountpoint == mp)
}

pub fn is_mounted(mp: &Path) -> bool {
    top_mount(mp).is_some()
}

/// True while `pid` runs a udsfs binary.
pub fn daemon_alive(pid: i32) -> bool {
    u32::try_from(pid)
        .ok()
        .and_then(|p| crate::procfs::Status::read(p).ok())
        .is_some_and(|st| st.name.starts_with("udsfs") && st.state != 'Z')
}

/// Lazy unmount: as root directly, otherwise through fusermount3.
pub fn detach(mp: &Path) -> Result<(), String> {
    if nix::mount::umount2(mp, nix::mount::MntFlags::MNT_DETACH).is_ok() {
        return Ok(());
    }
    let st = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mp)
        .status()
        .map_err(|e| format!("fusermount3: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err("fusermount3 -u -z failed".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_pid_comes_from_udsfs_mounts_only() {
        let m = |fstype: &str, source: &str| MountEntry {
            mountpoint: PathBuf::from("/x"),
            fstype: fstype.into(),
            source: source.into(),
        };
        assert_eq!(m("fuse.udsfs", "udsfs:4242").daemon_pid(), Some(4242));
        assert_eq!(m("fuse", "udsfs:7").daemon_pid(), Some(7));
        assert_eq!(m("tmpfs", "udsfs:1").daemon_pid(), None);
    }
}

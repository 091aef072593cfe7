//! The mount table (/proc/self/mountinfo) as far as the command line needs it:
//! is a directory a udsfs mount, which daemon serves it, and detaching one.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One line of /proc/self/mountinfo.
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

/// Undoes the octal escapes (`\040` for a space) the kernel writes.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) if b[i] == b'\\' => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let f: Vec<&str> = line.split(' ').collect();
    let sep = f.iter().position(|x| *x == "-")?;
    Some(MountEntry {
        mountpoint: PathBuf::from(unescape(f.get(4)?)),
        fstype: unescape(f.get(sep + 1)?),
        source: unescape(f.get(sep + 2)?),
    })
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
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_line)
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
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = state
        .rsplit_once(')')
        .is_some_and(|(_, s)| s.trim_start().starts_with('Z'));
    comm.trim_end().starts_with("udsfs") && !zombie
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
    fn reads_escaped_mount_points() {
        let l = "90 30 0:77 / /tmp/a\\040b rw,nosuid - fuse.udsfs udsfs:4242 rw,user_id=0";
        let m = parse_line(l).unwrap();
        assert_eq!(m.mountpoint, PathBuf::from("/tmp/a b"));
        assert_eq!(m.daemon_pid(), Some(4242));
        let l = "91 30 0:78 / /x rw shared:5 - tmpfs udsfs:1 rw";
        assert_eq!(parse_line(l).unwrap().daemon_pid(), None);
        assert_eq!(unescape("a\\134b\\011"), "a\\b\t");
    }
}

//! Who holds a socket's files: the open files of every process, read from
//! /proc/*/fd as lsof does, so the daemon keeps no book of its openers.

use std::collections::HashMap;
use std::path::Path;

/// One open file: the holding process's name, its pid and the fd number.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    pub pid: u32,
    pub fd: u32,
    pub name: String,
}

/// Socket number -> holders of `MOUNT/.udsfs/sock/N/*` files, by pid and fd.
/// Files opened through `clone`, `pair`, `connect/` or `accept` keep that
/// path in /proc and cannot be told apart, so they are not listed.
pub fn holders(mount: &Path) -> HashMap<u64, Vec<Holder>> {
    let prefix = mount.join(".udsfs/sock");
    let mut out: HashMap<u64, Vec<Holder>> = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut name = None;
        for f in fds.flatten() {
            let Some(fd) = f.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(target) = std::fs::read_link(f.path()) else {
                continue;
            };
            let Some(id) = target
                .strip_prefix(&prefix)
                .ok()
                .and_then(|rest| rest.iter().next())
                .and_then(|n| n.to_str()?.parse::<u64>().ok())
            else {
                continue;
            };
            let name = name
                .get_or_insert_with(|| {
                    std::fs::read_to_string(p.path().join("comm"))
                        .unwrap_or_default()
                        .trim_end()
                        .to_owned()
                })
                .clone();
            out.entry(id).or_default().push(Holder { pid, fd, name });
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// ss's `users:(("name",pid=P,fd=F),...)`.
pub fn users_column(hs: &[Holder]) -> String {
    let list: Vec<String> = hs
        .iter()
        .map(|h| format!("(\"{}\",pid={},fd={})", h.name, h.pid, h.fd))
        .collect();
    format!("users:({})", list.join(","))
}

//! The one reader of `/proc` for udsfs: a task's `status` (who it is), its
//! namespaces and user-namespace id maps, a process's open-file limit,
//! sysctls, and the mount table.
//! Everything that parses a `/proc` file lives here, so each format is
//! handled once.

use std::io;
use std::path::PathBuf;

/// The fields of `/proc/<tid>/status` udsfs looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The command name (`Name:`, as /proc/PID/comm).
    pub name: String,
    /// The state letter: R, S, D, Z, X, T, ...
    pub state: char,
    pub tgid: i32,
    /// The thread group's id in each pid namespace, outermost first
    /// (`NStgid:`): the last is what the process's own getpid() returns.
    pub ns_tgid: Vec<i32>,
    /// The thread's own id in each pid namespace, outermost first
    /// (`NSpid:`): the last is what its own gettid() returns.
    pub ns_pid: Vec<i32>,
    /// The process group's id in each pid namespace, outermost first
    /// (`NSpgid:`): the last is what the process's own getpgrp() returns.
    pub ns_pgid: Vec<i32>,
    /// The parent process (`PPid:`).
    pub ppid: i32,
    /// real, effective, saved, fs
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    pub umask: u32,
    pub groups: Vec<u32>,
    /// CapEff: the effective capability set.
    pub cap_eff: u64,
    /// Signals pending for this thread only, for the whole process, and
    /// blocked (the seccomp supervisor ends a wait it does for the thread).
    pub sig_pnd: u64,
    pub shd_pnd: u64,
    pub sig_blk: u64,
}

impl Default for Status {
    fn default() -> Status {
        Status {
            name: String::new(),
            state: '?',
            tgid: 0,
            ns_tgid: Vec::new(),
            ns_pid: Vec::new(),
            ns_pgid: Vec::new(),
            ppid: 0,
            uids: [0; 4],
            gids: [0; 4],
            umask: 0o022,
            groups: Vec::new(),
            cap_eff: 0,
            sig_pnd: 0,
            shd_pnd: 0,
            sig_blk: 0,
        }
    }
}

impl Status {
    /// Whether a signal waits that the thread does not block (SIGKILL
    /// always counts): what would end a system call it sleeps in.
    pub fn signal_pending(&self) -> bool {
        const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
        (self.sig_pnd | self.shd_pnd) & (!self.sig_blk | SIGKILL_BIT) != 0
    }

    /// `/proc/<tid>/status` (any thread id works there, not only a tgid).
    pub fn read(tid: u32) -> io::Result<Status> {
        let text = read_small(&format!("/proc/{tid}/status"))?;
        Ok(Status::parse(&String::from_utf8_lossy(&text)))
    }

    pub fn parse(text: &str) -> Status {
        let mut st = Status::default();
        for line in text.lines() {
            let Some((key, val)) = line.split_once(':') else {
                continue;
            };
            let val = val.trim();
            let nums = || val.split_whitespace().filter_map(|v| v.parse::<u32>().ok());
            let mask = || u64::from_str_radix(val, 16).unwrap_or(0);
            match key {
                "Name" => st.name = val.to_string(),
                "State" => st.state = val.chars().next().unwrap_or('?'),
                "Tgid" => st.tgid = val.parse().unwrap_or(0),
                "NStgid" => {
                    st.ns_tgid = val
                        .split_whitespace()
                        .filter_map(|v| v.parse().ok())
                        .collect()
                }
                "NSpid" => {
                    st.ns_pid = val
                        .split_whitespace()
                        .filter_map(|v| v.parse().ok())
                        .collect()
                }
                "NSpgid" => {
                    st.ns_pgid = val
                        .split_whitespace()
                        .filter_map(|v| v.parse().ok())
                        .collect()
                }
                "PPid" => st.ppid = val.parse().unwrap_or(0),
                "Umask" => st.umask = u32::from_str_radix(val, 8).unwrap_or(0o022),
                "Uid" => nums().take(4).enumerate().for_each(|(i, v)| st.uids[i] = v),
                "Gid" => nums().take(4).enumerate().for_each(|(i, v)| st.gids[i] = v),
                "Groups" => st.groups = nums().collect(),
                "CapEff" => st.cap_eff = mask(),
                "SigPnd" => st.sig_pnd = mask(),
                "ShdPnd" => st.shd_pnd = mask(),
                "SigBlk" => st.sig_blk = mask(),
                _ => {}
            }
        }
        st
    }
}

/// The soft RLIMIT_NOFILE of this process.
pub fn own_nofile_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
}

/// The soft RLIMIT_NOFILE of process `pid`: prlimit(2) needs no
/// descriptor, so it works when the daemon is at its own limit; else
/// `/proc/<pid>/limits`.
pub fn nofile_limit(pid: i32) -> Option<usize> {
    if pid <= 0 {
        return None;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit with no new limit only writes the old one into lim.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut lim) } == 0 {
        return Some(usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX));
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    text.lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
}

/// A numeric sysctl, by its dotted name (`net.unix.max_dgram_qlen`): the
/// one reader, shared with the daemon's clients.
pub use udsfs_proto::sysctl::read as sysctl;

/// The pid namespace of task `tid` (the inode of `/proc/<tid>/ns/pid`;
/// `ns_inode`'s readlinkat costs half a stat of the path).
pub fn pid_ns(tid: u32) -> Option<u64> {
    ns_inode(tid, "pid")
}

/// The namespace of kind `kind` ("net", "user", "pid") task `tid` is in: the
/// nsfs inode its `/proc/<tid>/ns/<kind>` link names; None when the task is
/// gone (or is not visible from the daemon's pid namespace: tid 0). A
/// readlinkat on a held /proc descriptor: half the cost of a stat of the
/// full path (2.1 against 4.7 us measured), which walks /proc anew.
pub fn ns_inode(tid: u32, kind: &str) -> Option<u64> {
    ns_link(tid, kind).ok()
}

/// `ns_inode` with the reason it failed: ESRCH (tid 0) or ENOENT when the
/// task is gone, EACCES or EPERM when it lives but the daemon may not look
/// at it (ptrace access: another user's task, or one with capabilities the
/// daemon lacks, without CAP_SYS_PTRACE).
pub fn ns_link(tid: u32, kind: &str) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    if tid == 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    let path = std::ffi::CString::new(format!("{tid}/ns/{kind}"))?;
    let dir = proc_dir().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    let mut buf = [0u8; 64];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            path.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_ns_link(&buf[..n as usize], kind)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The inode of `/proc/<tid>/net/unix` (`tid` "self" for the daemon): each
/// network namespace has its own entry, and /proc/<tid>/net asks for no
/// ptrace access, so it tells whether a task the daemon may not look at
/// (`ns_link`: EACCES) is in the daemon's namespace. Its number is not the
/// namespace's nsfs inode.
pub fn net_unix_inode(tid: &str) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let path = std::ffi::CString::new(format!("{tid}/net/unix")).ok()?;
    // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat writes into st, a stat it is given.
    let r = unsafe { libc::fstatat(proc_dir()?.as_raw_fd(), path.as_ptr(), &mut st, 0) };
    (r == 0).then_some(st.st_ino)
}

/// `net:[4026531833]` (kind "net") -> 4026531833.
fn parse_ns_link(link: &[u8], kind: &str) -> Option<u64> {
    let digits = link
        .strip_prefix(kind.as_bytes())?
        .strip_prefix(b":[")?
        .strip_suffix(b"]")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The held /proc descriptor (opened once; `prepare` opens it early, so
/// that it does not show up as a new descriptor of the daemon later).
fn proc_dir() -> Option<&'static std::os::fd::OwnedFd> {
    static PROC: std::sync::OnceLock<Option<std::os::fd::OwnedFd>> = std::sync::OnceLock::new();
    PROC.get_or_init(|| {
        std::fs::File::open("/proc")
            .map(std::os::fd::OwnedFd::from)
            .map_err(|e| log::warn!("cannot open /proc: {e}; namespaces cannot be told apart"))
            .ok()
    })
    .as_ref()
}

/// Opens the held /proc descriptor now.
pub fn prepare() {
    let _ = proc_dir();
}

/// `/proc/<tid>/ns/<kind>` opened on the held /proc descriptor (O_CLOEXEC):
/// an nsfs descriptor, for the NS_GET_* ioctls, which keeps the namespace
/// (and so its number) alive while it is open.
pub fn open_ns(tid: u32, kind: &str) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let path = std::ffi::CString::new(format!("{tid}/ns/{kind}"))?;
    let dir = proc_dir().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    // SAFETY: openat reads a NUL-terminated path and makes a descriptor.
    let raw = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `open_ns`, with the inode it names (the namespace's number).
pub fn hold_ns(tid: u32, kind: &str) -> io::Result<(std::os::fd::OwnedFd, u64)> {
    use std::os::fd::AsRawFd;
    let fd = open_ns(tid, kind)?;
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into st, a stat it is given.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fd, st.st_ino))
}

/// One line of a user namespace's `uid_map` or `gid_map`: `count` ids from
/// `inside` (in the namespace) are `outside` and on (in the reader's
/// namespace, here the daemon's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdExtent {
    pub inside: u32,
    pub outside: u32,
    pub count: u32,
}

/// `/proc/<tid>/uid_map` (`which`: "uid_map" or "gid_map"), as the daemon
/// reads it: the outside ids in the daemon's namespace.
pub fn id_map(tid: u32, which: &str) -> io::Result<Vec<IdExtent>> {
    std::fs::read_to_string(format!("/proc/{tid}/{which}")).map(|t| parse_id_map(&t))
}

/// The lines of a uid_map/gid_map ("inside outside count", blank-separated);
/// a malformed line is skipped (it maps nothing: fail closed).
pub fn parse_id_map(text: &str) -> Vec<IdExtent> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().map(|v| v.parse::<u32>());
            let (Some(Ok(inside)), Some(Ok(outside)), Some(Ok(count)), None) =
                (f.next(), f.next(), f.next(), f.next())
            else {
                return None;
            };
            Some(IdExtent {
                inside,
                outside,
                count,
            })
        })
        .collect()
}

/// Whether a process (or thread) with this id exists.
pub fn exists(pid: i32) -> bool {
    pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// One line of the mount table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    pub target: PathBuf,
    pub fstype: String,
}

/// This process's mount table (`/proc/self/mounts`), in mount order.
pub fn mounts() -> io::Result<Vec<Mount>> {
    let text = std::fs::read("/proc/self/mounts")?;
    Ok(parse_mounts(&text))
}

pub fn parse_mounts(text: &[u8]) -> Vec<Mount> {
    use std::os::unix::ffi::OsStringExt;
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut f = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
            let source = unescape(f.next()?);
            let target = unescape(f.next()?);
            let fstype = unescape(f.next()?);
            Some(Mount {
                source: String::from_utf8_lossy(&source).into_owned(),
                target: PathBuf::from(std::ffi::OsString::from_vec(target)),
                fstype: String::from_utf8_lossy(&fstype).into_owned(),
            })
        })
        .collect()
}

/// The device of the mount on top at `path`, from /proc/self/mountinfo.
pub fn mount_dev(path: &std::path::Path) -> Option<libc::dev_t> {
    let text = std::fs::read("/proc/self/mountinfo").ok()?;
    parse_mount_dev(&text, path)
}

fn parse_mount_dev(text: &[u8], path: &std::path::Path) -> Option<libc::dev_t> {
    use std::os::unix::ffi::OsStrExt;
    let want = path.as_os_str().as_bytes();
    // The last line for the path is the mount on top.
    text.split(|&b| b == b'\n').rev().find_map(|line| {
        let f: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if f.len() < 5 || unescape(f[4]) != want {
            return None;
        }
        let (maj, min) = std::str::from_utf8(f[2]).ok()?.split_once(':')?;
        Some(libc::makedev(maj.parse().ok()?, min.parse().ok()?))
    })
}

/// Undoes the kernel's octal escapes (`\040` space, `\011` tab, `\012`
/// newline, `\134` backslash) in a mount-table field.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|d| {
            field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3'
        });
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// The open flags of task `tid`'s descriptor `fd` (`/proc/<tid>/fdinfo`,
/// whose `flags:` is octal and carries O_CLOEXEC for FD_CLOEXEC).
pub fn fd_flags(tid: i32, fd: i32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}")).ok()?;
    let v = text.lines().find_map(|l| l.strip_prefix("flags:"))?;
    u32::from_str_radix(v.trim(), 8).ok()
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`): with the pid, it names one process for good.
/// A /proc file whole, in as few reads as it takes (one and the one that
/// sees its end, for a status): `fs::read_to_string` asks the size first
/// (a statx, 0 for /proc) and grows its buffer from a small probe, eight
/// reads for a status, and the act-for checks read one for each call
/// the supervisor carries out.
pub fn read_small(path: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A child `sleep SECS` for tests that need a live process of their own.
#[cfg(test)]
pub(crate) fn sleeping_child(secs: u32) -> std::process::Child {
    std::process::Command::new("sleep")
        .arg(secs.to_string())
        .spawn()
        .expect("sleep")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status() {
        let text = "Name:\tx\nUmask:\t0027\nState:\tD (disk sleep)\nTgid:\t42\nPid:\t43\n\
                    Uid:\t1000\t65534\t2000\t65534\nGid:\t10\t11\t12\t11\nGroups:\t4 24 27 \n\
                    SigQ:\t3/96364\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000002\n\
                    SigBlk:\t0000000000000002\n";
        let st = Status::parse(text);
        assert_eq!(st.state, 'D');
        assert_eq!(st.tgid, 42);
        assert_eq!(st.umask, 0o027);
        assert_eq!(st.uids, [1000, 65534, 2000, 65534]);
        assert_eq!(st.gids, [10, 11, 12, 11]);
        assert_eq!(st.groups, vec![4, 24, 27]);
        assert_eq!((st.sig_pnd, st.shd_pnd, st.sig_blk), (0x100, 2, 2));
        // A pending SIGKILL (0x100) counts; SIGINT (2) would, were it not blocked.
        assert!(st.signal_pending());
        assert!(!Status { sig_pnd: 0, ..st }.signal_pending());
    }

    #[test]
    fn namespace_links_and_id_maps() {
        let me = std::process::id();
        assert_eq!(parse_ns_link(b"net:[4026531833]", "net"), Some(4026531833));
        assert_eq!(parse_ns_link(b"mnt:[4026531833]", "net"), None);
        assert_eq!(parse_ns_link(b"user:[7]", "user"), Some(7));
        assert!(ns_inode(me, "user").is_some());
        use std::os::unix::fs::MetadataExt;
        let stat = std::fs::metadata(format!("/proc/{me}/ns/pid"))
            .unwrap()
            .ino();
        assert_eq!(pid_ns(me), Some(stat), "the link names the inode");
        assert_eq!(ns_inode(0, "user"), None);
        let m = parse_id_map(
            "         0      65534          1\n      1000     100000      65536\nbad\n1 2\n",
        );
        assert_eq!(
            m,
            vec![
                IdExtent {
                    inside: 0,
                    outside: 65534,
                    count: 1
                },
                IdExtent {
                    inside: 1000,
                    outside: 100000,
                    count: 65536
                }
            ]
        );
        assert!(!id_map(me, "uid_map").unwrap().is_empty());
    }

    #[test]
    fn own_fd_flags_and_start_time() {
        use std::os::fd::AsRawFd;
        let me = std::process::id() as i32;
        let f = std::fs::File::open("/proc/self/status").unwrap();
        let fl = fd_flags(me, f.as_raw_fd()).unwrap();
        assert_ne!(fl & libc::O_CLOEXEC as u32, 0, "std opens with O_CLOEXEC");
        assert!(start_time(me).unwrap() > 0);
        assert_eq!(start_time(me), start_time(me));
        assert_eq!(
            Status::read(me as u32).unwrap().ppid,
            nix::unistd::getppid().as_raw()
        );
    }

    #[test]
    fn mountinfo_gives_the_device_of_the_mount_on_top() {
        let text = b"22 1 0:21 / /mnt/a\\040b rw - tmpfs x rw\n\
                     30 22 0:55 / /mnt/a\\040b rw - fuse.udsfs udsfs:1 rw\n\
                     31 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        let m = std::path::Path::new("/mnt/a b");
        assert_eq!(parse_mount_dev(text, m), Some(libc::makedev(0, 55)));
        assert_eq!(
            parse_mount_dev(text, std::path::Path::new("/")),
            Some(libc::makedev(8, 1))
        );
        assert_eq!(parse_mount_dev(text, std::path::Path::new("/mnt")), None);
        assert!(mount_dev(std::path::Path::new("/")).is_some());
    }

    #[test]
    fn mount_table_escapes() {
        let text = b"udsfs:12 /mnt/a\\040b\\011c fuse.udsfs rw 0 0\n\
                     /dev/sda1 / ext4 rw 0 0\n\
                     x /back\\134slash\\0123 tmpfs rw 0 0\n";
        let m = parse_mounts(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].source, "udsfs:12");
        assert_eq!(m[0].target, PathBuf::from("/mnt/a b\tc"));
        assert_eq!(m[0].fstype, "fuse.udsfs");
        assert_eq!(m[2].target, PathBuf::from("/back\\slash\n3"));
    }
}

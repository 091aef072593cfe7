//! The epoll sets that hold a descriptor, carried over its conversion.
//!
//! convert.rs puts a udsfs file in a kernel socket's place with dup3, which
//! closes the kernel socket's file: every epoll set that held it drops it
//! (an epoll registration belongs to the file, not to the number). A
//! program that registered the socket before connect, bind or sendto (nginx
//! adds an upstream socket to epoll before its connect) would never hear of
//! it again. So before the dup3 the library asks the kernel which epoll
//! sets of this process hold the file (/proc/self/fdinfo/EPFD lists `tfd:
//! N events: X data: Y ... ino: I` for each registration), and after it
//! adds the new file to each with the same events, flags and data. No table
//! is kept: fork, dup and close need nothing. The look costs a readlink per
//! descriptor, so it is made only in a process that made an epoll set
//! (epoll_create and epoll_create1 are seen here; fork keeps the mark; an
//! epoll set inherited across exec without a new one is not looked for).

use std::sync::atomic::{AtomicBool, Ordering};

use std::os::unix::ffi::OsStrExt;

use libc::c_int;

/// One registration of the descriptor: its epoll set, events (with their
/// flags: EPOLLET, EPOLLONESHOT, ...) and data.
pub struct Held {
    epfd: c_int,
    events: u32,
    data: u64,
}

/// Whether this process made an epoll set.
static EPOLL_SEEN: AtomicBool = AtomicBool::new(false);

/// An epoll set was made: conversions look for registrations from now on.
pub fn seen() {
    EPOLL_SEEN.store(true, Ordering::Relaxed);
}

/// The registrations of descriptor `fd` (inode `ino`) in this process's
/// epoll sets.
pub fn held(fd: c_int, ino: u64) -> Vec<Held> {
    let mut out = Vec::new();
    if !EPOLL_SEEN.load(Ordering::Relaxed) {
        return out;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(epfd) = std::str::from_utf8(entry.file_name().as_bytes())
            .ok()
            .and_then(|n| n.parse::<c_int>().ok())
        else {
            continue;
        };
        let is_epoll = std::fs::read_link(entry.path())
            .is_ok_and(|l| l.as_os_str().as_bytes() == b"anon_inode:[eventpoll]");
        if !is_epoll {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{epfd}")) else {
            continue;
        };
        out.extend(
            info.lines()
                .filter_map(parse_tfd)
                .filter(|r| r.0 == fd && r.3 == ino)
                .map(|(_, events, data, _)| Held { epfd, events, data }),
        );
    }
    out
}

/// One `tfd:` line of an epoll descriptor's fdinfo (fs/eventpoll.c
/// ep_show_fdinfo): `tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx
/// sdev:%x`: the descriptor, events, data and inode.
fn parse_tfd(line: &str) -> Option<(c_int, u32, u64, u64)> {
    let rest = line.strip_prefix("tfd:")?;
    let mut words = rest.split_whitespace();
    let fd = words.next()?.parse().ok()?;
    let (mut events, mut data, mut ino) = (None, None, None);
    while let Some(w) = words.next() {
        match w {
            "events:" => events = u32::from_str_radix(words.next()?, 16).ok(),
            "data:" => data = u64::from_str_radix(words.next()?, 16).ok(),
            _ => {
                if let Some(i) = w.strip_prefix("ino:") {
                    ino = u64::from_str_radix(i, 16).ok();
                }
            }
        }
    }
    Some((fd, events?, data?, ino?))
}

/// Adds descriptor `fd` (now another file) to each set that held it.
pub fn restore(fd: c_int, held: &[Held]) {
    for h in held {
        let mut ev = libc::epoll_event {
            events: h.events,
            u64: h.data,
        };
        // SAFETY: ev is a local epoll_event.
        let r = unsafe { libc::epoll_ctl(h.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            crate::log::say(&format!(
                "fd {fd}: could not add it back to epoll set {} after its conversion: {}",
                h.epfd,
                std::io::Error::last_os_error()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_tfd;

    #[test]
    fn reads_a_tfd_line() {
        let line = "tfd:        7 events: 80000019 data:     12345678abcdef  pos:0 ino:1f2e sdev:8";
        assert_eq!(
            parse_tfd(line),
            Some((7, 0x8000_0019, 0x12_3456_78ab_cdef, 0x1f2e))
        );
        assert_eq!(parse_tfd("pos:\t0"), None);
    }
}

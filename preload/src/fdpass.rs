//! The library's end of the daemon's fd channel (`udsfs_proto::fdchannel`,
//! whose `Client` speaks it): files that are not udsfs sockets go to the
//! daemon before the sendmsg that passes them, by tag, and come back after
//! the recvmsg that received them.

use std::os::fd::IntoRawFd;

use libc::c_int;
use udsfs_proto::fdchannel::{self, Client, Published};

use crate::errno::Res;
use crate::log;
use crate::mount::Mount;
use crate::real;

/// One connection to the channel, closed when dropped: deposits not sent
/// by then die with it.
pub type Channel = Client;

/// Where the channel is (its abstract name and path) and the daemon's uid,
/// from the mount's own `.udsfs/fdchannel`: anyone can bind an abstract name first, but only the
/// daemon answers reads of its mount (the file must be on the mount's
/// device), and the file is owned by the daemon's uid. Read once: the
/// mount, and so its daemon, is the process's for good.
fn channel_of(m: &Mount) -> Option<&'static (Published, u32)> {
    static CH: std::sync::OnceLock<Option<(Published, u32)>> = std::sync::OnceLock::new();
    CH.get_or_init(|| read_channel(m)).as_ref()
}

fn read_channel(m: &Mount) -> Option<(Published, u32)> {
    let path = m.ctrl_file(fdchannel::PUBLISHED_FILE);
    // SAFETY: open, fstat, read and close on a descriptor of our own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let mut buf = [0u8; 256];
        let ok = real::fstat(fd, &mut st) == 0 && m.owns_stat_dev(st.st_dev);
        let n = if ok {
            libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
        } else {
            -1
        };
        libc::close(fd);
        let text = buf.get(..usize::try_from(n).ok()?)?;
        fdchannel::parse_published(text).map(|p| (p, st.st_uid))
    }
}

/// Connects to the daemon serving `m`, making sure it is the daemon that answers.
pub fn connect(m: &Mount) -> Res<Channel> {
    connect_saying(m, true)
}

/// `connect` for a lane's region and eventfds. A lane is udsfs's own
/// business, which the program never asked for: when the channel cannot be
/// had the pair goes on without one, through the daemon (as the Bounds table
/// says), and no line goes to the program's stderr, where Linux writes none.
/// On the default mount, which has lanes: accept_setuid.py's accept with one
/// free slot printed "connect: errno 24" (EMFILE), and fstat_mode.py's child
/// in a user namespace of its own "not answered by the daemon's uid 0:
/// refused" (the daemon's uid, read before the unshare, reads as the overflow
/// uid there), and run_xvfb.sh's namespaced xprop, which cannot reach the
/// channel's abstract name (lanes_programs.sh ns_client). The refusal
/// stands: the channel is still checked.
pub fn connect_for_lane(m: &Mount) -> Res<Channel> {
    connect_saying(m, false)
}

fn connect_saying(m: &Mount, say: bool) -> Res<Channel> {
    let Some((ch, daemon_uid)) = channel_of(m) else {
        if say {
            log::say(
                "fd channel: the mount serves no .udsfs/fdchannel name; cannot pass files (EINVAL)",
            );
        }
        return Err(libc::EINVAL);
    };
    Client::connect_published(ch, *daemon_uid).inspect_err(|&e| {
        if !say {
            return;
        }
        let shown = fdchannel::shown(ch);
        if e == libc::ECONNREFUSED {
            log::say(&format!(
                "fd channel @{shown}: not answered by the daemon's uid {daemon_uid}: refused"
            ));
        } else {
            log::say(&format!("fd channel @{shown}: connect: errno {e}"));
        }
    })
}

/// Takes received files `tags` back as new descriptors of this process.
pub fn claim(ch: &Channel, tags: &[u64], cloexec: bool) -> Res<Vec<c_int>> {
    let fds = ch.claim(tags, cloexec)?;
    Ok(fds.into_iter().map(IntoRawFd::into_raw_fd).collect())
}

//! The supervisor's end of the daemon's fd channel (`udsfs_proto::fdchannel`,
//! whose `Client` speaks it): files that are not udsfs sockets are
//! deposited before the message ioctl that passes them, by tag, and claimed
//! after the one that received them. Deposits are made as the program's
//! user (`connect_as`).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use udsfs_proto::fdchannel::{self, Client, Published};

use super::call::say;
use super::daemon::Res;

/// One connection: deposits not passed by the time it closes die with it.
pub type Channel = Client;

/// Where the channel is (its abstract name and path) and the daemon's uid, from the mount's
/// `.udsfs/fdchannel`: the file must be on the mount's device (only the
/// daemon answers there), and its owner is the daemon's uid.
fn read_channel(mount: &Path) -> Option<(Published, u32)> {
    let root = std::fs::metadata(mount).ok()?;
    let path = mount.join(".udsfs").join(fdchannel::PUBLISHED_FILE);
    let f = std::fs::File::open(&path).ok()?;
    let meta = f.metadata().ok()?;
    if meta.dev() != root.dev() {
        return None;
    }
    let mut text = Vec::new();
    use std::io::Read;
    f.take(256).read_to_end(&mut text).ok()?;
    fdchannel::parse_published(&text).map(|p| (p, meta.uid()))
}

pub fn connect(mount: &Path) -> Res<Channel> {
    let Some((ch, uid)) = read_channel(mount) else {
        say("fd channel: the mount serves no .udsfs/fdchannel name; cannot pass files (EINVAL)");
        return Err(libc::EINVAL);
    };
    Client::connect_published(&ch, uid).inspect_err(|&e| {
        if e == libc::ECONNREFUSED {
            say(&format!(
                "fd channel @{}: not answered by the daemon's uid {uid}: refused",
                fdchannel::shown(&ch)
            ));
        }
    })
}

/// A connection whose SO_PEERCRED is the target thread `tid`'s effective
/// uid: the daemon charges deposits to that user and lets only that user's
/// sendmsg take them (src/engine/depot.rs `take_deposits`), and the send is
/// made for the target (actfor.rs). A root supervisor of a program that
/// dropped to another user would otherwise deposit as root and be refused
/// (EBADF). Receiving needs no switch: root may claim what anyone received.
pub fn connect_as(mount: &Path, tid: i32) -> Res<Channel> {
    let euid = crate::procfs::Status::read(tid as u32)
        .map_err(|_| libc::ESRCH)?
        .uids[1];
    let _as = super::thread_uid::ThreadUid::enter(euid).inspect_err(|e| {
        say(&format!(
            "fd channel: cannot connect as uid {euid} ({e}): files passed may be refused"
        ))
    });
    connect(mount)
}

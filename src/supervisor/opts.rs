//! getsockopt, setsockopt and the queue ioctls on a udsfs socket, as the
//! library answers them (preload/src/opts.rs), from the one copy of the
//! program's arguments.

use std::os::fd::OwnedFd;

use super::daemon::{self, Res};
use super::mem;
use crate::fuse::ioctl_abi::*;

/// x86_64's SO_RCVTIMEO/SO_SNDTIMEO: the _OLD numbers (struct timeval) and
/// the _NEW ones (__kernel_sock_timeval), both two 64-bit fields here.
const SO_RCVTIMEO_OLD: i32 = 20;
const SO_SNDTIMEO_OLD: i32 = 21;
const SO_RCVTIMEO_NEW: i32 = 66;
const SO_SNDTIMEO_NEW: i32 = 67;

/// OP_SET_TIMEO / OP_GET_TIMEO's `arg`: 0 receive, 1 send.
fn timeo_dir(name: i32) -> i32 {
    matches!(name, SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW) as i32
}

/// Options the daemon keeps per socket only to read them back (SO_LINGER
/// too, in two ints), as preload/src/opts.rs KEPT.
pub const KEPT: [i32; 7] = [
    libc::SO_REUSEADDR,
    libc::SO_DONTROUTE,
    libc::SO_BROADCAST,
    libc::SO_KEEPALIVE,
    libc::SO_NO_CHECK,
    libc::SO_PASSSEC,
    libc::SO_RCVLOWAT,
];

/// Sets kept option `name` to (a, b) (OP_SET_SOCKOPT).
pub fn set_kept(s: &OwnedFd, name: i32, a: i32, b: i32) -> Res<()> {
    // SAFETY: Ctl is plain integers.
    let mut c: Ctl = unsafe { std::mem::zeroed() };
    c.v[0] = a as i64;
    c.v[1] = b as i64;
    daemon::ctl_with(s, OP_SET_SOCKOPT, name, &[], &[], &mut c)
}

fn int(v: i64) -> Vec<u8> {
    (v as i32).to_ne_bytes().to_vec()
}

/// How long a wait in direction `dir` (0 receive, 1 send) may last:
/// None for ever, Some(zero) not at all (a negative tv_sec), as
/// preload/src/sock.rs `Deadline` reads it.
pub fn timeout(s: &OwnedFd, dir: i32) -> Option<std::time::Duration> {
    let c = daemon::ctl(s, OP_GET_TIMEO, dir, &[], &[]).ok()?;
    let d = std::time::Duration::new(
        c.v[0].max(0) as u64,
        (c.v[1].clamp(0, 999_999) * 1000) as u32,
    );
    (!d.is_zero() || c.v[2] != 0).then_some(d)
}

/// FIONREAD, SIOCOUTQ and SIOCATMARK as the library answers them
/// (preload/src/opts.rs queue_ioctl, preload/src/urg.rs).
pub fn queue_ioctl(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let n = match a[1] as u32 {
        super::filter::SIOCATMARK => daemon::ctl(s, OP_ATMARK, 0, &[], &[])?.v[0],
        r if r == libc::FIONREAD as u32 => daemon::info(s)?[INFO_INQ],
        _ => daemon::info(s)?[INFO_OUTQ],
    };
    if n < 0 {
        return Err(libc::EINVAL);
    }
    mem::write_u32(tid, a[2], n as u32)
}

/// getsockopt as preload/src/opts.rs answers it (SO_PEERPIDFD, which needs
/// a pidfd installed in the target, is not there yet).
pub fn get(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let (level, name) = (a[1] as i32, a[2] as i32);
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let info = || daemon::info(s);
    let val = match name {
        libc::SO_DOMAIN => int(libc::AF_UNIX as i64),
        libc::SO_PROTOCOL => int(0),
        libc::SO_TYPE => int(info()?[INFO_TYPE]),
        libc::SO_ACCEPTCONN => int(info()?[INFO_LISTENING]),
        libc::SO_PASSCRED => int(info()?[INFO_PASSCRED]),
        libc::SO_SNDBUF => int(info()?[INFO_SNDBUF]),
        libc::SO_RCVBUF => int(info()?[INFO_RCVBUF]),
        libc::SO_ERROR => int(daemon::ctl(s, OP_TAKE_ERROR, 0, &[], &[])?.v[0]),
        libc::SO_PEERCRED => {
            let v = info()?;
            [
                v[INFO_PEER_PID] as i32 as u32,
                v[INFO_PEER_UID] as u32,
                v[INFO_PEER_GID] as u32,
            ]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect()
        }
        SO_RCVTIMEO_OLD | SO_SNDTIMEO_OLD | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW => {
            let c = daemon::ctl(s, OP_GET_TIMEO, timeo_dir(name), &[], &[])?;
            [c.v[0], c.v[1]]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect()
        }
        libc::SO_LINGER => {
            let c = daemon::ctl(s, OP_GET_SOCKOPT, name, &[], &[])?;
            [c.v[0] as i32, c.v[1] as i32]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect()
        }
        _ if KEPT.contains(&name) => int(daemon::ctl(s, OP_GET_SOCKOPT, name, &[], &[])?.v[0]),
        libc::SO_OOBINLINE => int(daemon::ctl(s, OP_OOB_OPTS, 0, &[], &[])?.v[0]),
        libc::SO_PEEK_OFF => int(daemon::ctl(s, OP_OOB_OPTS, 0, &[], &[])?.v[1]),
        _ => return Err(libc::ENOPROTOOPT),
    };
    let room = mem::read_u32(tid, a[4])?;
    if (room as i32) < 0 {
        return Err(libc::EINVAL);
    }
    let n = (room as usize).min(val.len());
    mem::write(tid, a[3], &val[..n])?;
    mem::write_u32(tid, a[4], n as u32)
}

pub fn set(s: &OwnedFd, tid: i32, a: [u64; 6]) -> Res<()> {
    let (level, name, len) = (a[1] as i32, a[2] as i32, a[4] as usize);
    if level != libc::SOL_SOCKET {
        return Err(libc::EOPNOTSUPP);
    }
    let int = || -> Res<i32> {
        if len < 4 {
            return Err(libc::EINVAL);
        }
        Ok(mem::read_u32(tid, a[3])? as i32)
    };
    let op = |op, arg| daemon::ctl(s, op, arg, &[], &[]).map(|_| ());
    match name {
        libc::SO_PASSCRED => op(OP_SET_PASSCRED, (int()? != 0) as i32),
        libc::SO_SNDBUF => op(OP_SET_SNDBUF, int()?),
        libc::SO_RCVBUF => op(OP_SET_RCVBUF, int()?),
        libc::SO_OOBINLINE => op(OP_SET_OOBINLINE, (int()? != 0) as i32),
        libc::SO_PEEK_OFF => op(OP_SET_PEEK_OFF, int()?),
        SO_RCVTIMEO_OLD | SO_SNDTIMEO_OLD | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW => {
            // sock_set_timeout: shorter than a timeval is EINVAL.
            if len < 16 {
                return Err(libc::EINVAL);
            }
            let tv = mem::read(tid, a[3], 16)?;
            // SAFETY: Ctl is plain integers.
            let mut c: Ctl = unsafe { std::mem::zeroed() };
            c.v[0] = i64::from_ne_bytes(tv[..8].try_into().map_err(|_| libc::EINVAL)?);
            c.v[1] = i64::from_ne_bytes(tv[8..].try_into().map_err(|_| libc::EINVAL)?);
            daemon::ctl_with(s, OP_SET_TIMEO, timeo_dir(name), &[], &[], &mut c)
        }
        libc::SO_SNDBUFFORCE => op(OP_SET_SNDBUF_FORCE, int()?),
        libc::SO_RCVBUFFORCE => op(OP_SET_RCVBUF_FORCE, int()?),
        libc::SO_LINGER => {
            if len < 8 {
                return Err(libc::EINVAL);
            }
            let l = mem::read(tid, a[3], 8)?;
            let on = i32::from_ne_bytes([l[0], l[1], l[2], l[3]]);
            let secs = i32::from_ne_bytes([l[4], l[5], l[6], l[7]]);
            set_kept(s, name, on, secs)
        }
        _ if KEPT.contains(&name) => set_kept(s, name, int()?, 0),
        _ => Err(libc::ENOPROTOOPT),
    }
}

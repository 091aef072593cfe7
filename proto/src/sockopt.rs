//! SOL_SOCKET options on a udsfs socket: which options AF_UNIX only keeps
//! (the daemon stores them to read them back, src/engine/sockflags.rs), the
//! option numbers the libc crate lacks, and getsockopt, setsockopt and the
//! queue ioctls answered over the control ioctl, as Linux answers them.

use crate::Res;
use crate::ioctl::{self, Ctl, Info, OobOpts, Op, Sockopt, TakenError, Timeo};

/// asm-generic/socket.h (Linux 6.5); the libc crate may lack them.
pub const SO_PASSPIDFD: i32 = 76;
pub const SO_PEERPIDFD: i32 = 77;
pub const SCM_PIDFD: i32 = 4;

/// x86_64's numbers: glibc passes the _OLD ones (struct timeval), 64-bit
/// time_t programs may pass the _NEW ones (__kernel_sock_timeval); on this
/// ABI both are two 64-bit fields.
pub const SO_RCVTIMEO_OLD: i32 = 20;
pub const SO_SNDTIMEO_OLD: i32 = 21;
pub const SO_RCVTIMEO_NEW: i32 = 66;
pub const SO_SNDTIMEO_NEW: i32 = 67;

pub use crate::tstamp::{
    SO_TIMESTAMP_NEW, SO_TIMESTAMP_OLD, SO_TIMESTAMPING_NEW, SO_TIMESTAMPING_OLD,
    SO_TIMESTAMPNS_NEW, SO_TIMESTAMPNS_OLD, TSTAMP_OPTS, Tstamp,
};

/// The ioctls on sockets that the kernel refuses on a regular file.
pub const SIOCATMARK: libc::c_ulong = 0x8905;

/// The boolean options that AF_UNIX keeps but never acts on.
pub const FLAG_OPTS: [i32; 6] = [
    libc::SO_REUSEADDR,
    libc::SO_DONTROUTE,
    libc::SO_BROADCAST,
    libc::SO_KEEPALIVE,
    libc::SO_NO_CHECK,
    libc::SO_PASSSEC,
];

/// Every option AF_UNIX only keeps: the flags, SO_RCVLOWAT, SO_LINGER (two
/// ints: l_onoff, l_linger) and SO_PRIORITY (sk_priority, which AF_UNIX
/// never reads; PulseAudio sets it on its sockets).
pub const KEPT: [i32; 9] = [
    FLAG_OPTS[0],
    FLAG_OPTS[1],
    FLAG_OPTS[2],
    FLAG_OPTS[3],
    FLAG_OPTS[4],
    FLAG_OPTS[5],
    libc::SO_RCVLOWAT,
    libc::SO_LINGER,
    libc::SO_PRIORITY,
];

/// What a new socket reads for kept option `name`: sk_rcvlowat is 1.
pub fn kept_default(name: i32) -> [i32; 2] {
    if name == libc::SO_RCVLOWAT {
        [1, 0]
    } else {
        [0, 0]
    }
}

pub fn is_timeo(name: i32) -> bool {
    matches!(
        name,
        SO_RCVTIMEO_OLD | SO_SNDTIMEO_OLD | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW
    )
}

/// The `arg` of `Op::SetTimeo` and `Op::GetTimeo`: 0 receive, 1 send.
pub fn timeo_dir(name: i32) -> i32 {
    matches!(name, SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW) as i32
}

fn ctl(fd: i32, op: Op, arg: i32) -> Res<Ctl> {
    ioctl::request(fd, Ctl::new(op, arg))
}

/// The socket's type, settings and peer (`INFO_SETTINGS`: its lane stays).
fn info(fd: i32) -> Res<Info> {
    ctl(fd, Op::Info, ioctl::INFO_SETTINGS).map(|c| c.values())
}

/// All of it, the queues' bytes too.
fn info_queued(fd: i32) -> Res<Info> {
    ctl(fd, Op::Info, 0).map(|c| c.values())
}

fn int(v: i64) -> Vec<u8> {
    (v as i32).to_ne_bytes().to_vec()
}

fn words<T: Copy, const N: usize>(v: [T; N], bytes: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.into_iter().flat_map(bytes).collect()
}

/// getsockopt(SOL_SOCKET, `name`) on udsfs data file `fd`: the value's
/// bytes, which the caller cuts to the room it was given. SO_PEERPIDFD
/// (a descriptor to install) and anything not offered: ENOPROTOOPT.
pub fn get(fd: i32, name: i32) -> Res<Vec<u8>> {
    Ok(match name {
        libc::SO_DOMAIN => int(libc::AF_UNIX as i64),
        libc::SO_PROTOCOL => int(0),
        libc::SO_TYPE => int(info(fd)?.ty as i64),
        libc::SO_ACCEPTCONN => int(info(fd)?.listening as i64),
        libc::SO_PASSCRED => int(info(fd)?.passcred as i64),
        SO_PASSPIDFD => int(info(fd)?.passpidfd as i64),
        libc::SO_SNDBUF => int(info(fd)?.sndbuf),
        libc::SO_RCVBUF => int(info(fd)?.rcvbuf),
        libc::SO_ERROR => int(ctl(fd, Op::TakeError, 0)?.values::<TakenError>().errno as i64),
        libc::SO_PEERGROUPS => peer_groups(fd)?,
        libc::SO_PEERCRED => {
            let c = info(fd)?.peer.unwrap_or(Info::NO_PEER);
            words(c.to_words(), |w| w.to_ne_bytes().to_vec())
        }
        n if is_timeo(n) => {
            // timeval and __kernel_sock_timeval are both two 64-bit fields.
            let t: Timeo = ctl(fd, Op::GetTimeo, timeo_dir(n))?.values();
            words([t.sec, t.usec], |w| w.to_ne_bytes().to_vec())
        }
        libc::SO_LINGER => {
            let o: Sockopt = ctl(fd, Op::GetSockopt, name)?.values();
            words([o.a, o.b], |w| w.to_ne_bytes().to_vec())
        }
        // struct so_timestamping: flags, bind_phc.
        SO_TIMESTAMPING_OLD | SO_TIMESTAMPING_NEW => {
            let o: Sockopt = ctl(fd, Op::GetSockopt, name)?.values();
            words([o.a, 0], |w| w.to_ne_bytes().to_vec())
        }
        n if KEPT.contains(&n) || TSTAMP_OPTS.contains(&n) => {
            int(ctl(fd, Op::GetSockopt, n)?.values::<Sockopt>().a as i64)
        }
        libc::SO_OOBINLINE => int(ctl(fd, Op::OobOpts, 0)?.values::<OobOpts>().inline as i64),
        libc::SO_PEEK_OFF => int(ctl(fd, Op::OobOpts, 0)?.values::<OobOpts>().peek_off as i64),
        // Write-only options: Linux has no getsockopt for them either.
        _ => return Err(libc::ENOPROTOOPT),
    })
}

/// SO_PEERGROUPS: the peer's groups as gid_t values, asked for in chunks.
fn peer_groups(fd: i32) -> Res<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let from = out.len() / 4;
        let c = ctl(fd, Op::PeerGroups, from as i32)?;
        let total = (c.v[0].max(0) as usize).min(NGROUPS_MAX);
        let here = (total.saturating_sub(from)).min(ioctl::GROUPS_PER_CTL);
        for &g in &c.v[1..1 + here] {
            out.extend_from_slice(&(g as u32).to_ne_bytes());
        }
        if here == 0 || out.len() / 4 >= total {
            return Ok(out);
        }
    }
}

/// NGROUPS_MAX: no process has more supplementary groups.
const NGROUPS_MAX: usize = 65536;

/// How getsockopt hands option `name`'s value of `len` bytes to a caller
/// with room for `room`: most values are cut to the room; SO_PEERGROUPS
/// that does not fit is ERANGE with the length it needs written back
/// (sk_getsockopt). Ok: the bytes to copy; Err: the length to report.
pub fn fit(name: i32, room: u32, len: usize) -> Result<usize, u32> {
    if name == libc::SO_PEERGROUPS && (room as usize) < len {
        return Err(len as u32);
    }
    Ok((room as usize).min(len))
}

/// Whether a getsockopt (`set` false) or setsockopt refusal of `name`
/// (ENOPROTOOPT) is worth a log line: udsfs lacks an option Linux has for
/// AF_UNIX. Not when Linux refuses it too: a number Linux has no option
/// for, SO_PEERSEC without a security module (dbus-daemon asks for it on
/// every connection), getsockopt of the write-only FORCE options,
/// setsockopt of the read-only ones.
pub fn refusal_worth_saying(name: i32, set: bool) -> bool {
    if !(1..=LAST_KNOWN).contains(&name) {
        return false;
    }
    if set {
        !READ_ONLY.contains(&name)
    } else {
        readable(name) && name != libc::SO_PEERSEC
    }
}

/// The highest SOL_SOCKET option number Linux has (SO_INQ, 6.17; 6.18 sets it):
/// past it, or below 1, sk_getsockopt and sk_setsockopt refuse the number
/// itself (ENOPROTOOPT).
const LAST_KNOWN: i32 = 84;

/// The options sk_setsockopt refuses (ENOPROTOOPT): they are only read.
const READ_ONLY: [i32; 13] = [
    libc::SO_TYPE,
    libc::SO_ERROR,
    libc::SO_PEERCRED,
    libc::SO_ACCEPTCONN,
    libc::SO_PEERSEC,
    libc::SO_PEERGROUPS,
    libc::SO_PROTOCOL,
    libc::SO_DOMAIN,
    libc::SO_PEERNAME,
    57, // SO_COOKIE
    55, // SO_MEMINFO
    56, // SO_INCOMING_NAPI_ID
    SO_PEERPIDFD,
];

/// Whether getsockopt of `name` is one Linux has for AF_UNIX, whatever
/// udsfs answers (the write-only FORCE options are not): for logging.
pub fn readable(name: i32) -> bool {
    !matches!(name, libc::SO_SNDBUFFORCE | libc::SO_RCVBUFFORCE)
}

fn read_i32(val: &[u8], at: usize) -> i32 {
    i32::from_ne_bytes(val[at..at + 4].try_into().expect("4 bytes"))
}

fn read_i64(val: &[u8], at: usize) -> i64 {
    i64::from_ne_bytes(val[at..at + 8].try_into().expect("8 bytes"))
}

/// setsockopt(SOL_SOCKET, `name`, `val`) on udsfs data file `fd` (`val`:
/// the caller's bytes, at least as many as the option takes, or EINVAL).
pub fn set(fd: i32, name: i32, val: &[u8]) -> Res<()> {
    let int = || -> Res<i32> {
        if val.len() < 4 {
            return Err(libc::EINVAL);
        }
        Ok(read_i32(val, 0))
    };
    let op = |op: Op, arg: i32| ctl(fd, op, arg).map(|_| ());
    let kept = |a: i32, b: i32| {
        ioctl::request(fd, Ctl::new(Op::SetSockopt, name).with(Sockopt { a, b })).map(|_| ())
    };
    match name {
        libc::SO_PASSCRED => op(Op::SetPasscred, (int()? != 0) as i32),
        SO_PASSPIDFD => op(Op::SetPasspidfd, (int()? != 0) as i32),
        libc::SO_SNDBUF => op(Op::SetSndbuf, int()?),
        libc::SO_RCVBUF => op(Op::SetRcvbuf, int()?),
        libc::SO_SNDBUFFORCE => op(Op::SetSndbufForce, int()?),
        libc::SO_RCVBUFFORCE => op(Op::SetRcvbufForce, int()?),
        libc::SO_OOBINLINE => op(Op::SetOobInline, (int()? != 0) as i32),
        libc::SO_PEEK_OFF => op(Op::SetPeekOff, int()?),
        n if is_timeo(n) => {
            // sock_set_timeout: shorter than a timeval is EINVAL.
            if val.len() < 16 {
                return Err(libc::EINVAL);
            }
            set_timeo(fd, n, read_i64(val, 0), read_i64(val, 8))
        }
        libc::SO_LINGER => {
            if val.len() < size_of::<libc::linger>() {
                return Err(libc::EINVAL);
            }
            kept(read_i32(val, 0), read_i32(val, 4))
        }
        n if KEPT.contains(&n) => kept(int()?, 0),
        // Kept by the daemon, which stamps the messages (Tstamp); the flags
        // are checked there.
        n if TSTAMP_OPTS.contains(&n) => kept(int()?, 0),
        _ => Err(libc::ENOPROTOOPT),
    }
}

/// SO_RCVTIMEO or SO_SNDTIMEO (`name`) from a struct timeval.
pub fn set_timeo(fd: i32, name: i32, sec: i64, usec: i64) -> Res<()> {
    let t = Timeo {
        sec,
        usec,
        zero: false,
    };
    ioctl::request(fd, Ctl::new(Op::SetTimeo, timeo_dir(name)).with(t)).map(|_| ())
}

/// How long a wait in direction `dir` (0 receive, 1 send) may last:
/// None for ever, Some(zero) not at all (a negative tv_sec).
pub fn timeout(fd: i32, dir: i32) -> Res<Option<std::time::Duration>> {
    let t: Timeo = ctl(fd, Op::GetTimeo, dir)?.values();
    let d = std::time::Duration::new(
        t.sec.max(0) as u64,
        (t.usec.clamp(0, 999_999) * 1000) as u32,
    );
    Ok((!d.is_zero() || t.zero).then_some(d))
}

/// FIONREAD/SIOCINQ, SIOCOUTQ and SIOCATMARK: the int to report (EINVAL
/// for FIONREAD on a listener, as unix_ioctl), None for other requests.
pub fn queue_ioctl(fd: i32, req: libc::c_ulong) -> Option<Res<i32>> {
    let n = match req {
        SIOCATMARK => ctl(fd, Op::AtMark, 0).map(|c| c.values::<ioctl::AtMark>().at as i64),
        libc::FIONREAD => info_queued(fd).map(|i| i.inq.unwrap_or(-1)),
        libc::TIOCOUTQ => info_queued(fd).map(|i| i.outq),
        _ => return None,
    };
    Some(n.and_then(|n| {
        if n < 0 {
            Err(libc::EINVAL)
        } else {
            Ok(n as i32)
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_each_kept_option_once() {
        for (i, o) in KEPT.iter().enumerate() {
            assert!(!KEPT[i + 1..].contains(o));
            assert!(!is_timeo(*o));
        }
        assert_eq!(kept_default(libc::SO_RCVLOWAT), [1, 0]);
        assert_eq!(kept_default(libc::SO_LINGER), [0, 0]);
        assert_eq!(timeo_dir(SO_SNDTIMEO_NEW), 1);
        assert_eq!(timeo_dir(SO_RCVTIMEO_OLD), 0);
        assert_eq!(libc::SO_RCVTIMEO, SO_RCVTIMEO_OLD);
    }

    #[test]
    fn bad_values_are_refused_before_the_daemon_is_asked() {
        // fd -1 would answer EBADF: EINVAL and ENOPROTOOPT come first.
        assert_eq!(set(-1, libc::SO_SNDBUF, &[1, 0]), Err(libc::EINVAL));
        assert_eq!(set(-1, libc::SO_RCVTIMEO, &[0; 8]), Err(libc::EINVAL));
        assert_eq!(set(-1, libc::SO_LINGER, &[0; 4]), Err(libc::EINVAL));
        assert_eq!(set(-1, libc::SO_MARK, &[0; 4]), Err(libc::ENOPROTOOPT));
        assert_eq!(get(-1, libc::SO_SNDBUFFORCE), Err(libc::ENOPROTOOPT));
        assert_eq!(get(-1, SO_PEERPIDFD), Err(libc::ENOPROTOOPT));
        assert_eq!(get(-1, libc::SO_DOMAIN), Ok(int(libc::AF_UNIX as i64)));
        assert_eq!(set(-1, libc::SO_SNDBUF, &[1, 0, 0, 0]), Err(libc::EBADF));
        assert_eq!(queue_ioctl(-1, 0x5401), None);
        assert_eq!(queue_ioctl(-1, SIOCATMARK), Some(Err(libc::EBADF)));
    }

    #[test]
    fn only_a_refusal_linux_does_not_make_is_said() {
        // SO_MARK: Linux sets it, udsfs does not.
        assert!(refusal_worth_saying(libc::SO_MARK, true));
        assert!(refusal_worth_saying(libc::SO_MARK, false));
        for name in [0, -1, LAST_KNOWN + 1, 999, i32::MAX, i32::MIN] {
            assert!(!refusal_worth_saying(name, true), "setsockopt {name}");
            assert!(!refusal_worth_saying(name, false), "getsockopt {name}");
        }
        assert!(!refusal_worth_saying(libc::SO_PEERSEC, false));
        assert!(!refusal_worth_saying(libc::SO_PEERCRED, true));
        assert!(!refusal_worth_saying(libc::SO_SNDBUFFORCE, false));
    }
}

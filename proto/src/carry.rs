//! What a kernel AF_UNIX socket takes along when a udsfs socket takes its
//! place (at the call that routes it into the mount): SO_PASSCRED,
//! SO_PASSPIDFD, the buffer sizes and timeouts a program set, and the
//! options AF_UNIX only keeps (the receive timestamp options too), where
//! they differ from a new socket's.

use crate::Res;
use crate::ioctl::{self, Ctl, Op, Sockopt};
use crate::sockopt::{self, KEPT, SO_PASSPIDFD};
use crate::sysctl::core_mem;

/// A kernel socket's options, read before it goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub passcred: bool,
    pub passpidfd: bool,
    /// SO_SNDBUF, SO_RCVBUF as getsockopt reads them (doubled), where they
    /// differ from net.core.wmem_default / rmem_default.
    pub sizes: Vec<(i32, i32)>,
    /// SO_RCVTIMEO, SO_SNDTIMEO (tv_sec, tv_usec) where set.
    pub timeouts: Vec<(i32, [i64; 2])>,
    /// `KEPT` options where they differ from `kept_default`, then the
    /// receive timestamp options set (`timestamps`).
    pub kept: Vec<(i32, [i32; 2])>,
}

/// getsockopt of kernel socket `fd` into `out`, by system call (the
/// preload library defines getsockopt itself); false when it fails.
fn kernel_getsockopt<T>(fd: i32, name: i32, out: &mut T) -> bool {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `out`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getsockopt,
            fd,
            libc::SOL_SOCKET,
            name,
            out as *mut T,
            &mut len as *mut libc::socklen_t,
        )
    };
    r == 0
}

/// The receive timestamp options of a kernel socket (`int` reads one) as
/// the settings that make them so again: SO_TIMESTAMPING's flags (through
/// the number that set them), then the one of SO_TIMESTAMP, SO_TIMESTAMPNS
/// and their _NEW forms that reads 1 (the last set wins on Linux).
fn timestamps(int: &impl Fn(i32) -> Option<i32>) -> Vec<(i32, [i32; 2])> {
    use crate::tstamp::*;
    let mut out = Vec::new();
    let flags = int(SO_TIMESTAMPING_OLD).unwrap_or(0);
    if flags != 0 {
        let new = int(SO_TIMESTAMPING_NEW).unwrap_or(0) != 0;
        let name = if new {
            SO_TIMESTAMPING_NEW
        } else {
            SO_TIMESTAMPING_OLD
        };
        out.push((name, [flags, 0]));
    }
    // SO_TIMESTAMP_NEW also reads 1 under SO_TIMESTAMPNS_NEW: NS first.
    let on = [
        SO_TIMESTAMPNS_NEW,
        SO_TIMESTAMPNS_OLD,
        SO_TIMESTAMP_NEW,
        SO_TIMESTAMP_OLD,
    ]
    .into_iter()
    .find(|&n| int(n).unwrap_or(0) != 0);
    out.extend(on.map(|n| (n, [1, 0])));
    out
}

impl Carried {
    /// Reads them from kernel socket `fd`.
    pub fn of(fd: i32) -> Carried {
        let int = |name| {
            let mut v: i32 = 0;
            kernel_getsockopt(fd, name, &mut v).then_some(v)
        };
        let mut c = Carried {
            passcred: int(libc::SO_PASSCRED).unwrap_or(0) != 0,
            passpidfd: int(SO_PASSPIDFD).unwrap_or(0) != 0,
            ..Carried::default()
        };
        for (name, default) in [
            (libc::SO_SNDBUF, "wmem_default"),
            (libc::SO_RCVBUF, "rmem_default"),
        ] {
            match int(name) {
                Some(v) if v as u64 != core_mem(default) => c.sizes.push((name, v)),
                _ => {}
            }
        }
        for name in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
            let mut tv = [0i64; 2];
            if kernel_getsockopt(fd, name, &mut tv) && tv != [0, 0] {
                c.timeouts.push((name, tv));
            }
        }
        for name in KEPT {
            let mut v = [0i32; 2];
            if kernel_getsockopt(fd, name, &mut v) && v != sockopt::kept_default(name) {
                c.kept.push((name, v));
            }
        }
        c.kept.extend(timestamps(&int));
        c
    }

    /// Sets them on udsfs data file `fd`: a size as half what was read
    /// (setsockopt doubles it), forced where a privileged caller had set it
    /// past the maximum.
    pub fn apply(&self, fd: i32) -> Res<()> {
        let op = |op: Op, arg: i32| ioctl::request(fd, Ctl::new(op, arg)).map(|_| ());
        if self.passcred {
            op(Op::SetPasscred, 1)?;
        }
        if self.passpidfd {
            op(Op::SetPasspidfd, 1)?;
        }
        for &(name, v) in &self.sizes {
            let (plain, forced, max) = if name == libc::SO_SNDBUF {
                (Op::SetSndbuf, Op::SetSndbufForce, "wmem_max")
            } else {
                (Op::SetRcvbuf, Op::SetRcvbufForce, "rmem_max")
            };
            let past_max = (v / 2) as i64 > core_mem(max) as i64;
            op(if past_max { forced } else { plain }, v / 2)?;
        }
        for &(name, [sec, usec]) in &self.timeouts {
            sockopt::set_timeo(fd, name, sec, usec)?;
        }
        for &(name, [a, b]) in &self.kept {
            ioctl::request(fd, Ctl::new(Op::SetSockopt, name).with(Sockopt { a, b }))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_sockets_changed_options_are_read() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let fd = a.as_raw_fd();
        assert_eq!(
            Carried::of(fd),
            Carried::default(),
            "a new socket carries nothing"
        );
        let set = |name: i32, v: &[i32]| {
            // SAFETY: setsockopt reads the ints given.
            let r = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    name,
                    v.as_ptr().cast(),
                    (v.len() * 4) as libc::socklen_t,
                )
            };
            assert_eq!(r, 0);
        };
        set(libc::SO_PASSCRED, &[1]);
        set(libc::SO_KEEPALIVE, &[1]);
        set(libc::SO_LINGER, &[1, 5]);
        set(libc::SO_SNDBUF, &[8192]);
        a.set_read_timeout(Some(std::time::Duration::from_millis(1500)))
            .unwrap();
        let c = Carried::of(fd);
        assert!(c.passcred && !c.passpidfd);
        assert_eq!(c.sizes, [(libc::SO_SNDBUF, 16384)]);
        assert_eq!(c.timeouts, [(libc::SO_RCVTIMEO, [1, 500_000])]);
        assert_eq!(
            c.kept,
            [(libc::SO_KEEPALIVE, [1, 0]), (libc::SO_LINGER, [1, 5])]
        );
        assert_eq!(c.apply(-1), Err(libc::EBADF));
        // Receive timestamps: the one set last, the SO_TIMESTAMPING flags
        // (set through the old number, they leave SO_TIMESTAMPNS old too).
        set(crate::tstamp::SO_TIMESTAMP_OLD, &[1]);
        set(crate::tstamp::SO_TIMESTAMPNS_NEW, &[1]);
        set(crate::tstamp::SO_TIMESTAMPING_OLD, &[0x18]);
        let t = Carried::of(fd).kept.split_off(2);
        println!("timestamps carried: {t:?}");
        assert_eq!(
            t,
            [
                (crate::tstamp::SO_TIMESTAMPING_OLD, [0x18, 0]),
                (crate::tstamp::SO_TIMESTAMPNS_OLD, [1, 0]),
            ]
        );
    }
}

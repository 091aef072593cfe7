//! The SOL_SOCKET options Linux keeps on every socket but AF_UNIX never acts
//! on (SO_REUSEADDR, SO_KEEPALIVE, SO_BROADCAST, SO_DONTROUTE, SO_NO_CHECK,
//! SO_PASSSEC, SO_LINGER, SO_RCVLOWAT, SO_PRIORITY): set and read back as sock_setsockopt
//! and sk_getsockopt do (measured on the kernel here,
//! tests/conformance/api_diffs.py), on the socket itself so that a dup, a
//! child and a receiver of it see them. Atomics: no lock is taken.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use nix::errno::Errno;

/// The kernel's HZ, as src/engine/timeo.rs counts jiffies (4 ms).
const HZ: u64 = 250;
/// MAX_SCHEDULE_TIMEOUT (LONG_MAX): an SO_LINGER past it is "for ever".
const MAX_SCHEDULE_TIMEOUT: u64 = i64::MAX as u64;

/// The boolean options, by SOL_SOCKET number, each a bit of `Options::flags`.
use udsfs_proto::sockopt::FLAG_OPTS;
use udsfs_proto::sockopt::{TSTAMP_OPTS, Tstamp};

#[derive(Debug)]
pub struct Options {
    flags: AtomicU32,
    /// sk_rcvlowat: 1 unless set.
    rcvlowat: AtomicI32,
    /// SOCK_LINGER in bit 63, sk_lingertime (jiffies) below it.
    linger: AtomicU64,
    /// sk_priority: 0 unless set.
    priority: AtomicI32,
    /// SO_TIMESTAMP and its kin (`udsfs_proto::sockopt::Tstamp`): the one
    /// word a send reads to stamp a message queued here.
    tstamp: AtomicU32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            flags: AtomicU32::new(0),
            rcvlowat: AtomicI32::new(1),
            linger: AtomicU64::new(0),
            priority: AtomicI32::new(0),
            tstamp: AtomicU32::new(0),
        }
    }
}

const LINGER_ON: u64 = 1 << 63;

fn flag_bit(opt: i32) -> Option<u32> {
    FLAG_OPTS.iter().position(|&o| o == opt).map(|i| 1 << i)
}

/// TC_PRIO_BESTEFFORT..=TC_PRIO_INTERACTIVE: the SO_PRIORITY values any
/// caller may set (sk_set_prio_allowed); others need CAP_NET_RAW or
/// CAP_NET_ADMIN.
const UNPRIVILEGED_PRIORITY: std::ops::RangeInclusive<i32> = 0..=6;

impl Options {
    /// Whether setting `opt` to `a` needs CAP_NET_RAW or CAP_NET_ADMIN (the
    /// caller checks: this file knows no callers).
    pub fn needs_net_cap(opt: i32, a: i32) -> bool {
        opt == libc::SO_PRIORITY && !UNPRIVILEGED_PRIORITY.contains(&a)
    }

    /// Whether this file keeps `opt`.
    pub fn knows(opt: i32) -> bool {
        udsfs_proto::sockopt::KEPT.contains(&opt) || TSTAMP_OPTS.contains(&opt)
    }

    /// The receive timestamp state (SO_TIMESTAMP, SO_TIMESTAMPNS, their
    /// _NEW forms, SO_TIMESTAMPING).
    pub fn tstamp(&self) -> Tstamp {
        Tstamp(self.tstamp.load(Ordering::Relaxed))
    }

    /// setsockopt(SOL_SOCKET, opt): `a` the int (SO_LINGER: l_onoff), `b`
    /// SO_LINGER's l_linger. ENOPROTOOPT for an option not kept here.
    pub fn set(&self, opt: i32, a: i32, b: i32) -> Result<(), Errno> {
        if TSTAMP_OPTS.contains(&opt) {
            let mut r = Ok(());
            let _ =
                self.tstamp
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                        match Tstamp(w).set(opt, a) {
                            Ok(t) => Some(t.0),
                            Err(e) => {
                                r = Err(Errno::from_raw(e));
                                None
                            }
                        }
                    });
            return r;
        }
        if let Some(bit) = flag_bit(opt) {
            if a != 0 {
                self.flags.fetch_or(bit, Ordering::Relaxed);
            } else {
                self.flags.fetch_and(!bit, Ordering::Relaxed);
            }
            return Ok(());
        }
        match opt {
            // A negative value means INT_MAX; 0 means 1.
            libc::SO_RCVLOWAT => {
                let v = if a < 0 { i32::MAX } else { a.max(1) };
                self.rcvlowat.store(v, Ordering::Relaxed);
                Ok(())
            }
            libc::SO_PRIORITY => {
                self.priority.store(a, Ordering::Relaxed);
                Ok(())
            }
            libc::SO_LINGER => {
                let old = self.linger.load(Ordering::Relaxed);
                let new = if a == 0 {
                    // Off: the time stays, as sock_reset_flag leaves it.
                    old & !LINGER_ON
                } else {
                    // l_linger is widened to unsigned long first: -1 is huge.
                    let secs = b as i64 as u64;
                    let t = if secs >= MAX_SCHEDULE_TIMEOUT / HZ {
                        MAX_SCHEDULE_TIMEOUT
                    } else {
                        secs * HZ
                    };
                    t | LINGER_ON
                };
                self.linger.store(new, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// getsockopt(SOL_SOCKET, opt): (the int or l_onoff, l_linger).
    pub fn get(&self, opt: i32) -> Result<(i32, i32), Errno> {
        if TSTAMP_OPTS.contains(&opt) {
            return Ok((self.tstamp().get(opt), 0));
        }
        if let Some(bit) = flag_bit(opt) {
            return Ok(((self.flags.load(Ordering::Relaxed) & bit != 0) as i32, 0));
        }
        match opt {
            libc::SO_RCVLOWAT => Ok((self.rcvlowat.load(Ordering::Relaxed), 0)),
            libc::SO_PRIORITY => Ok((self.priority.load(Ordering::Relaxed), 0)),
            libc::SO_LINGER => {
                let l = self.linger.load(Ordering::Relaxed);
                // sk_lingertime / HZ, truncated to the int of struct linger.
                let secs = ((l & !LINGER_ON) / HZ) as i32;
                Ok(((l & LINGER_ON != 0) as i32, secs))
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_the_kernel_gives_them() {
        let o = Options::default();
        assert_eq!(o.get(libc::SO_KEEPALIVE), Ok((0, 0)));
        o.set(libc::SO_KEEPALIVE, 5, 0).unwrap();
        assert_eq!(o.get(libc::SO_KEEPALIVE), Ok((1, 0)));
        assert_eq!(o.get(libc::SO_BROADCAST), Ok((0, 0)));
        o.set(libc::SO_KEEPALIVE, 0, 0).unwrap();
        assert_eq!(o.get(libc::SO_KEEPALIVE), Ok((0, 0)));
        assert_eq!(o.get(libc::SO_RCVLOWAT), Ok((1, 0)));
        o.set(libc::SO_RCVLOWAT, -3, 0).unwrap();
        assert_eq!(o.get(libc::SO_RCVLOWAT), Ok((i32::MAX, 0)));
        o.set(libc::SO_RCVLOWAT, 0, 0).unwrap();
        assert_eq!(o.get(libc::SO_RCVLOWAT), Ok((1, 0)));
        assert_eq!(o.get(libc::SO_LINGER), Ok((0, 0)));
        o.set(libc::SO_LINGER, 1, 5).unwrap();
        o.set(libc::SO_LINGER, 0, 7).unwrap();
        assert_eq!(o.get(libc::SO_LINGER), Ok((0, 5)), "off keeps the time");
        o.set(libc::SO_LINGER, 1, -1).unwrap();
        // The kernel here reads back (1, -1752346657): LONG_MAX / HZ as an int.
        assert_eq!(o.get(libc::SO_LINGER), Ok((1, -1752346657)));
        o.set(libc::SO_LINGER, 3, i32::MAX).unwrap();
        assert_eq!(o.get(libc::SO_LINGER), Ok((1, i32::MAX)));
        assert_eq!(o.get(libc::SO_PRIORITY), Ok((0, 0)));
        o.set(libc::SO_PRIORITY, -1, 0).unwrap();
        assert_eq!(o.get(libc::SO_PRIORITY), Ok((-1, 0)));
        assert!(Options::needs_net_cap(libc::SO_PRIORITY, 7));
        assert!(!Options::needs_net_cap(libc::SO_PRIORITY, 6));
        assert!(!Options::needs_net_cap(libc::SO_RCVLOWAT, 7));
        assert_eq!(o.set(libc::SO_MARK, 1, 0), Err(Errno::ENOPROTOOPT));
    }
}

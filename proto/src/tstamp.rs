//! The receive timestamp options (SO_TIMESTAMP, SO_TIMESTAMPNS, their _NEW
//! numbers, SO_TIMESTAMPING) as one word of state per socket, and the control
//! messages a read gets from it, as Linux 6.18 gives them on AF_UNIX
//! (measured: tests/conformance/front_tstamp.rs). The daemon keeps the word
//! (src/engine/sockflags.rs) and stamps messages (src/engine/msgpath/); the
//! fronts write the messages (calls/src/control.rs).

use crate::Res;

/// The receive timestamp options (asm-generic/socket.h, x86_64): the _OLD
/// numbers are glibc's SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING; each
/// is also its SCM_ control message's type.
pub const SO_TIMESTAMP_OLD: i32 = 29;
pub const SO_TIMESTAMPNS_OLD: i32 = 35;
pub const SO_TIMESTAMPING_OLD: i32 = 37;
pub const SO_TIMESTAMP_NEW: i32 = 63;
pub const SO_TIMESTAMPNS_NEW: i32 = 64;
pub const SO_TIMESTAMPING_NEW: i32 = 65;

/// The timestamp options a socket keeps (`Tstamp`).
pub const TSTAMP_OPTS: [i32; 6] = [
    SO_TIMESTAMP_OLD,
    SO_TIMESTAMPNS_OLD,
    SO_TIMESTAMPING_OLD,
    SO_TIMESTAMP_NEW,
    SO_TIMESTAMPNS_NEW,
    SO_TIMESTAMPING_NEW,
];

/// A socket's receive timestamp state as sock_set_timestamp and
/// sock_set_timestamping leave it (measured on Linux 6.18): SOCK_RCVTSTAMP,
/// SOCK_RCVTSTAMPNS, SOCK_TSTAMP_NEW, and sk_tsflags (SO_TIMESTAMPING) in
/// the bits above them. One word, so that the daemon keeps it in an atomic
/// and hands it with a received message to the front that writes its
/// control messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tstamp(pub u32);

const RCVTSTAMP: u32 = 1;
const RCVTSTAMPNS: u32 = 2;
const TSTAMP_NEW: u32 = 4;
const TSFLAGS_SHIFT: u32 = 8;
/// SOF_TIMESTAMPING_SOFTWARE: report software stamps (SCM_TIMESTAMPING).
const SOF_SOFTWARE: u32 = 1 << 4;
const SOF_RX_SOFTWARE: u32 = 1 << 3;
const SOF_OPT_ID: u32 = 1 << 7;
const SOF_OPT_STATS: u32 = 1 << 12;
const SOF_BIND_PHC: u32 = 1 << 15;
const SOF_OPT_ID_TCP: u32 = 1 << 16;
const SOF_OPT_RX_FILTER: u32 = 1 << 17;
/// SOF_TIMESTAMPING_MASK on 6.18: bits 0 to 18.
const SOF_MASK: u32 = (1 << 19) - 1;

impl Tstamp {
    /// Whether a message queued for this socket is stamped (SOCK_RCVTSTAMP:
    /// unix_dgram_sendmsg stamps at send; one queued before is stamped when
    /// first read). Only dgram and seqpacket: unix_stream_read_generic
    /// gives no timestamp.
    pub fn wanted(self) -> bool {
        self.0 & RCVTSTAMP != 0
    }

    fn tsflags(self) -> u32 {
        self.0 >> TSFLAGS_SHIFT
    }

    /// setsockopt(SOL_SOCKET, `name`, `val`) of a timestamp option: the new
    /// state, or Linux's errno (EINVAL for SO_TIMESTAMPING flags it does
    /// not have or OPT_STATS off TCP, EOPNOTSUPP for OPT_BIND_PHC without a
    /// PHC device).
    pub fn set(self, name: i32, val: i32) -> Res<Tstamp> {
        let mut s = self.0;
        match name {
            SO_TIMESTAMPING_OLD | SO_TIMESTAMPING_NEW => {
                let f = val as u32;
                if f & !SOF_MASK != 0
                    || f & SOF_OPT_STATS != 0
                    || (f & SOF_OPT_ID_TCP != 0 && f & SOF_OPT_ID == 0)
                {
                    return Err(libc::EINVAL);
                }
                if f & SOF_BIND_PHC != 0 {
                    return Err(libc::EOPNOTSUPP);
                }
                s = (s & ((1 << TSFLAGS_SHIFT) - 1)) | (f << TSFLAGS_SHIFT);
                s = bit(s, TSTAMP_NEW, name == SO_TIMESTAMPING_NEW);
            }
            _ if val != 0 => {
                s = bit(
                    s,
                    TSTAMP_NEW,
                    matches!(name, SO_TIMESTAMP_NEW | SO_TIMESTAMPNS_NEW),
                );
                s = bit(
                    s,
                    RCVTSTAMPNS,
                    matches!(name, SO_TIMESTAMPNS_OLD | SO_TIMESTAMPNS_NEW),
                );
                s |= RCVTSTAMP;
            }
            _ => s &= !(RCVTSTAMP | RCVTSTAMPNS),
        }
        Ok(Tstamp(s))
    }

    /// getsockopt(SOL_SOCKET, `name`) of a timestamp option, as sk_getsockopt
    /// reads the flags (SO_TIMESTAMP_NEW is 1 with SO_TIMESTAMPNS_NEW set too;
    /// SO_TIMESTAMPING: the flags of struct so_timestamping, whose bind_phc
    /// is 0 here).
    pub fn get(self, name: i32) -> i32 {
        let (on, ns, new) = (
            self.0 & RCVTSTAMP != 0,
            self.0 & RCVTSTAMPNS != 0,
            self.0 & TSTAMP_NEW != 0,
        );
        (match name {
            SO_TIMESTAMP_OLD => on && !new && !ns,
            SO_TIMESTAMPNS_OLD => ns && !new,
            SO_TIMESTAMP_NEW => on && new,
            SO_TIMESTAMPNS_NEW => ns && new,
            // SO_TIMESTAMPING_NEW reads the flags only when they were set
            // through it (sk_getsockopt is strict about the newer number).
            SO_TIMESTAMPING_NEW if !new => return 0,
            _ => return self.tsflags() as i32,
        }) as i32
    }

    /// The control messages __sock_recv_timestamp writes for stamp `ns`
    /// (ns since the epoch): SCM_TIMESTAMP (a timeval) or SCM_TIMESTAMPNS
    /// (a timespec), _NEW or _OLD (both two 64-bit fields on x86_64); then
    /// SCM_TIMESTAMPING (three timespecs, the software one first) when
    /// SO_TIMESTAMPING asks for software reports. (type, payload).
    pub fn cmsgs(self, ns: u64) -> Vec<(i32, Vec<u8>)> {
        let mut out = Vec::new();
        if !self.wanted() {
            return out;
        }
        let sec = (ns / 1_000_000_000) as i64;
        let nsec = (ns % 1_000_000_000) as i64;
        let new = self.0 & TSTAMP_NEW != 0;
        let two = |a: i64, b: i64| [a.to_ne_bytes(), b.to_ne_bytes()].concat();
        let (ty, frac) = match (self.0 & RCVTSTAMPNS != 0, new) {
            (false, false) => (SO_TIMESTAMP_OLD, nsec / 1000),
            (false, true) => (SO_TIMESTAMP_NEW, nsec / 1000),
            (true, false) => (SO_TIMESTAMPNS_OLD, nsec),
            (true, true) => (SO_TIMESTAMPNS_NEW, nsec),
        };
        out.push((ty, two(sec, frac)));
        let f = self.tsflags();
        if f & SOF_SOFTWARE != 0 && (f & SOF_RX_SOFTWARE != 0 || f & SOF_OPT_RX_FILTER == 0) {
            let mut b = two(sec, nsec);
            b.extend_from_slice(&[0u8; 32]);
            let ty = if new {
                SO_TIMESTAMPING_NEW
            } else {
                SO_TIMESTAMPING_OLD
            };
            out.push((ty, b));
        }
        out
    }
}

impl Tstamp {
    /// The control buffer bytes its messages take ahead of the others
    /// (SCM_CREDENTIALS and SCM_RIGHTS come after them): CMSG_SPACE of each.
    pub fn space(self) -> usize {
        self.cmsgs(1)
            .iter()
            .map(|(_, b)| crate::cmsg::align(crate::cmsg::HDR + b.len()))
            .sum()
    }
}

fn bit(s: u32, b: u32, on: bool) -> u32 {
    if on { s | b } else { s & !b }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_options_read_back_and_choose_one_message_as_linux() {
        let t = Tstamp::default();
        assert!(!t.wanted());
        assert!(t.cmsgs(1).is_empty());
        let ts = t.set(SO_TIMESTAMP_OLD, 5).unwrap();
        let got = |t: Tstamp| TSTAMP_OPTS.map(|n| t.get(n));
        // 29, 35, 37, 63, 64, 65, as measured on 6.18.
        assert_eq!(got(ts), [1, 0, 0, 0, 0, 0]);
        let ns = ts.set(SO_TIMESTAMPNS_OLD, 1).unwrap();
        assert_eq!(got(ns), [0, 1, 0, 0, 0, 0]);
        assert_eq!(got(ns.set(SO_TIMESTAMP_OLD, 0).unwrap()), [0; 6]);
        let new = t.set(SO_TIMESTAMP_NEW, 1).unwrap();
        assert_eq!(got(new), [0, 0, 0, 1, 0, 0]);
        let nsnew = t.set(SO_TIMESTAMPNS_NEW, 1).unwrap();
        assert_eq!(got(nsnew), [0, 0, 0, 1, 1, 0]);
        let stamp = 1_796_444_175_318_275_142u64;
        let c = ts.cmsgs(stamp);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, SO_TIMESTAMP_OLD);
        assert_eq!(c[0].1[8..16], 318_275i64.to_ne_bytes());
        assert_eq!(ns.cmsgs(stamp)[0].1[8..16], 318_275_142i64.to_ne_bytes());
        assert_eq!(nsnew.cmsgs(stamp)[0].0, SO_TIMESTAMPNS_NEW);
        // SO_TIMESTAMPING: flags kept; a software report only with a stamp.
        let sw = ns.set(SO_TIMESTAMPING_OLD, 0x18).unwrap();
        assert_eq!(sw.get(SO_TIMESTAMPING_OLD), 0x18);
        assert_eq!(sw.get(SO_TIMESTAMPING_NEW), 0, "set through the old number");
        let swnew = sw.set(SO_TIMESTAMPING_NEW, 0x18).unwrap();
        assert_eq!(swnew.get(SO_TIMESTAMPING_NEW), 0x18);
        let c = sw.cmsgs(stamp);
        assert_eq!(
            (c.len(), c[1].0, c[1].1.len()),
            (2, SO_TIMESTAMPING_OLD, 48)
        );
        assert_eq!(sw.set(SO_TIMESTAMPING_OLD, 1 << 12), Err(libc::EINVAL));
        assert_eq!(sw.set(SO_TIMESTAMPING_OLD, 1 << 16), Err(libc::EINVAL));
        assert_eq!(sw.set(SO_TIMESTAMPING_OLD, 1 << 19), Err(libc::EINVAL));
        assert_eq!(sw.set(SO_TIMESTAMPING_OLD, 1 << 15), Err(libc::EOPNOTSUPP));
        assert!(
            t.set(SO_TIMESTAMPING_OLD, 0x18)
                .unwrap()
                .cmsgs(stamp)
                .is_empty()
        );
    }
}

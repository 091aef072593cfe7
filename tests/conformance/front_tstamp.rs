//! SO_TIMESTAMP, SO_TIMESTAMPNS, their _NEW numbers and SO_TIMESTAMPING as
//! Linux gives them on unix sockets (rsyslogd's imuxsock sets SO_TIMESTAMP on
//! /dev/log), run on the kernel and through the two fronts (fronts.rs).
//!
//! A trace cannot hold a wall-clock time: a receive shows each control message's
//! type and length, and for a timestamp where it falls among the scenario's marks
//! (`Ts::Mark`: the clock read by the program, compared at the message's own
//! resolution), whether it is past the time of the receive, and whether it is the
//! same as, later or earlier than the stamp before it.

use std::cell::RefCell;

use libc::c_int;

use super::backend::Ty::*;
use super::backend::*;
use super::front_programs::{Fds, Prog};

pub const SO_TIMESTAMP_OLD: c_int = 29;
pub const SO_TIMESTAMPNS_OLD: c_int = 35;
pub const SO_TIMESTAMPING_OLD: c_int = 37;
pub const SO_TIMESTAMP_NEW: c_int = 63;
pub const SO_TIMESTAMPNS_NEW: c_int = 64;
pub const SO_TIMESTAMPING_NEW: c_int = 65;

/// A timestamp call of a program's.
#[derive(Clone, Debug)]
pub enum Ts {
    /// setsockopt(SOL_SOCKET, name) of an int.
    Set(Sock, c_int, c_int),
    /// setsockopt(SOL_SOCKET, name) of `len` bytes of an int (EINVAL short).
    SetLen(Sock, c_int, c_int, u32),
    /// getsockopt(SOL_SOCKET, name) of an int, with `len` bytes of room.
    Get(Sock, c_int, u32),
    /// Reads the clock: the next mark (3 us clear of what comes before and after).
    Mark,
    /// recvmsg(MSG_DONTWAIT | flags) with a control buffer of this many bytes
    /// (0: none).
    Recv(Sock, c_int, usize),
    /// recvmmsg(MSG_DONTWAIT) of two messages with these control buffers.
    Recvmmsg(Sock, [usize; 2]),
}

thread_local! {
    /// The marks of the running scenario (a scenario runs on a thread of its own).
    static MARKS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The last stamp received (ns).
    static LAST: RefCell<u64> = const { RefCell::new(0) };
}

fn now() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    d.as_nanos() as u64
}

fn name(n: c_int) -> String {
    match n {
        SO_TIMESTAMP_OLD => "SO_TIMESTAMP_OLD".into(),
        SO_TIMESTAMPNS_OLD => "SO_TIMESTAMPNS_OLD".into(),
        SO_TIMESTAMPING_OLD => "SO_TIMESTAMPING_OLD".into(),
        SO_TIMESTAMP_NEW => "SO_TIMESTAMP_NEW".into(),
        SO_TIMESTAMPNS_NEW => "SO_TIMESTAMPNS_NEW".into(),
        SO_TIMESTAMPING_NEW => "SO_TIMESTAMPING_NEW".into(),
        libc::SCM_CREDENTIALS => "SCM_CREDENTIALS".into(),
        libc::SCM_RIGHTS => "SCM_RIGHTS".into(),
        n => n.to_string(),
    }
}

impl Ts {
    pub fn show(&self) -> String {
        let s = sock_s;
        match self {
            Ts::Set(k, n, v) => format!("setsockopt({}, {}, {v})", s(*k), name(*n)),
            Ts::SetLen(k, n, v, l) => {
                format!("setsockopt({}, {}, {v}, len {l})", s(*k), name(*n))
            }
            Ts::Get(k, n, l) => format!("getsockopt({}, {}, room {l})", s(*k), name(*n)),
            Ts::Mark => "mark".to_string(),
            Ts::Recv(k, f, c) => format!("recvmsg({}, flags {f:#x}, control {c})", s(*k)),
            Ts::Recvmmsg(k, c) => format!("recvmmsg({}, 2, control {c:?})", s(*k)),
        }
    }
}

fn cvt(r: c_int) -> Res<c_int> {
    if r < 0 { Err(last_errno()) } else { Ok(r) }
}

/// What a program sees of received message `m` (after a call that returned `n`).
fn shown(m: &libc::msghdr, n: isize, at: u64) -> String {
    let mut out = format!(
        "n={n} flags={:#x} controllen={}",
        m.msg_flags, m.msg_controllen
    );
    // SAFETY: the kernel (or a front) wrote msg_controllen bytes of messages.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(m) };
    while !c.is_null() {
        // SAFETY: c points at a header inside the control buffer.
        let h = unsafe { &*c };
        out += &format!(
            " [{} {} len {}",
            h.cmsg_level,
            name(h.cmsg_type),
            h.cmsg_len
        );
        let ty = h.cmsg_type;
        let stampy = matches!(
            ty,
            SO_TIMESTAMP_OLD
                | SO_TIMESTAMP_NEW
                | SO_TIMESTAMPNS_OLD
                | SO_TIMESTAMPNS_NEW
                | SO_TIMESTAMPING_OLD
                | SO_TIMESTAMPING_NEW
        );
        // SAFETY: as above; a length under 16 bytes of payload is not read.
        if stampy && h.cmsg_len as usize >= unsafe { libc::CMSG_LEN(16) } as usize {
            // SAFETY: 16 bytes of payload are there.
            let w = unsafe { libc::CMSG_DATA(c).cast::<[i64; 2]>().read_unaligned() };
            let unit = if matches!(ty, SO_TIMESTAMP_OLD | SO_TIMESTAMP_NEW) {
                1000
            } else {
                1
            };
            let ns = w[0] as u64 * 1_000_000_000 + w[1] as u64 * unit;
            // Marks at the message's resolution: a stamp in microseconds is
            // the time cut down.
            let (past, nmarks) = MARKS.with_borrow(|marks| {
                let past = marks.iter().filter(|&&m| m / unit * unit <= ns).count();
                (past, marks.len())
            });
            let last = LAST.replace(ns);
            let rel = match ns.cmp(&last) {
                std::cmp::Ordering::Equal => "same as last",
                std::cmp::Ordering::Greater => "later than last",
                std::cmp::Ordering::Less => "earlier than last",
            };
            out += &format!(
                ", past {past} of {nmarks} marks, {}, {rel}",
                if ns <= at {
                    "not after the receive"
                } else {
                    "AFTER THE RECEIVE"
                }
            );
            if matches!(ty, SO_TIMESTAMPING_OLD | SO_TIMESTAMPING_NEW)
                && h.cmsg_len as usize >= unsafe { libc::CMSG_LEN(48) } as usize
            {
                // SAFETY: 48 bytes of payload are there.
                let rest = unsafe {
                    libc::CMSG_DATA(c)
                        .add(16)
                        .cast::<[i64; 4]>()
                        .read_unaligned()
                };
                out += &format!(", then {rest:?}");
            }
        }
        out += "]";
        // SAFETY: walks the control buffer as the C library does.
        c = unsafe { libc::CMSG_NXTHDR(m, c) };
    }
    out
}

pub fn call(k: &dyn Fds, c: &Ts) -> Res<String> {
    match c {
        Ts::Set(s, n, v) => call(k, &Ts::SetLen(*s, *n, *v, 4)),
        Ts::SetLen(s, n, v, l) => {
            // SAFETY: v is an int; at most 4 bytes are read.
            cvt(unsafe {
                libc::setsockopt(
                    k.fd(*s)?,
                    libc::SOL_SOCKET,
                    *n,
                    (v as *const c_int).cast(),
                    (*l).min(4),
                )
            })
            .map(|_| String::new())
        }
        Ts::Get(s, n, l) => {
            let mut v: [c_int; 2] = [-1, -1];
            let mut len = (*l).min(8) as libc::socklen_t;
            // SAFETY: v has room for len (at most 8) bytes.
            cvt(unsafe {
                libc::getsockopt(
                    k.fd(*s)?,
                    libc::SOL_SOCKET,
                    *n,
                    v.as_mut_ptr().cast(),
                    &mut len,
                )
            })?;
            Ok(if len > 4 {
                format!("{v:?} (len {len})")
            } else {
                format!("{} (len {len})", v[0])
            })
        }
        Ts::Mark => {
            // A microsecond stamp taken just before or after the mark must
            // not share its microsecond.
            let gap = std::time::Duration::from_micros(3);
            std::thread::sleep(gap);
            MARKS.with_borrow_mut(|m| m.push(now()));
            std::thread::sleep(gap);
            Ok(String::new())
        }
        Ts::Recv(s, f, clen) => {
            let mut data = [0u8; 64];
            let mut ctl = vec![0u64; 64];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            let room = if *clen > 0 { &mut ctl[..] } else { &mut [] };
            let mut m = one_iov_msghdr(&mut iov, room);
            m.msg_controllen = m.msg_controllen.min(*clen);
            // SAFETY: the buffers outlive the call.
            let n = unsafe { libc::recvmsg(k.fd(*s)?, &mut m, libc::MSG_DONTWAIT | *f) };
            let at = now();
            if n < 0 {
                return Err(last_errno());
            }
            Ok(shown(&m, n, at))
        }
        Ts::Recvmmsg(s, clens) => {
            let mut data = [[0u8; 64]; 2];
            let mut ctl = [[0u64; 32]; 2];
            let mut iov: Vec<libc::iovec> = data
                .iter_mut()
                .map(|d| libc::iovec {
                    iov_base: d.as_mut_ptr().cast(),
                    iov_len: d.len(),
                })
                .collect();
            // SAFETY: zeroed mmsghdrs are valid.
            let mut mm: [libc::mmsghdr; 2] = unsafe { std::mem::zeroed() };
            for i in 0..2 {
                mm[i].msg_hdr.msg_iov = &mut iov[i];
                mm[i].msg_hdr.msg_iovlen = 1;
                mm[i].msg_hdr.msg_control = ctl[i].as_mut_ptr().cast();
                mm[i].msg_hdr.msg_controllen = clens[i].min(256);
            }
            // SAFETY: the buffers outlive the call.
            let n = cvt(unsafe {
                libc::recvmmsg(
                    k.fd(*s)?,
                    mm.as_mut_ptr(),
                    2,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            })?;
            let at = now();
            let each: Vec<String> = mm[..n as usize]
                .iter()
                .map(|x| shown(&x.msg_hdr, x.msg_len as isize, at))
                .collect();
            Ok(format!("{n}: {}", each.join("; ")))
        }
    }
}

fn ts(b: &mut dyn Backend, c: Ts) {
    b.prog(Prog::Tstamp(c));
}

/// A scenario's marks and last stamp start afresh.
fn fresh() {
    MARKS.with_borrow_mut(|m| m.clear());
    LAST.set(0);
}

/// On a dgram or seqpacket pair: stamped at send when the receiver asked before,
/// at the first read (a peek too, and the read after it reports the same) when it
/// asked after; none once it stopped asking, none for a sender that asked; one
/// message for SO_TIMESTAMP and SO_TIMESTAMPNS both set (the last wins), the _NEW
/// numbers' own types, getsockopt as sk_getsockopt reads the flags, SCM_TIMESTAMP
/// ahead of SCM_CREDENTIALS, MSG_CTRUNC when the control buffer has no room.
fn messages(b: &mut dyn Backend, ty: Ty) {
    fresh();
    let (a, r) = b.pair(ty);
    let flags = [
        SO_TIMESTAMP_OLD,
        SO_TIMESTAMPNS_OLD,
        SO_TIMESTAMP_NEW,
        SO_TIMESTAMPNS_NEW,
        SO_TIMESTAMPING_OLD,
    ];
    let get_all = |b: &mut dyn Backend| {
        for n in flags {
            ts(b, Ts::Get(r, n, 4));
        }
    };
    get_all(b);
    // Queued before the option: stamped when first read.
    b.send(a, b"before");
    ts(b, Ts::Mark); // 1
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 1));
    get_all(b);
    ts(b, Ts::Mark); // 2
    // Sent with it: stamped at send, between marks 2 and 3.
    b.send(a, b"after");
    ts(b, Ts::Mark); // 3
    ts(b, Ts::Recv(r, 0, 64));
    ts(b, Ts::Mark); // 4
    ts(b, Ts::Recv(r, libc::MSG_PEEK, 64));
    ts(b, Ts::Mark); // 5
    ts(b, Ts::Recv(r, libc::MSG_PEEK, 64));
    ts(b, Ts::Recv(r, 0, 64));
    // Two sends: each its own stamp, in order.
    b.send(a, b"one");
    ts(b, Ts::Mark); // 6
    b.send(a, b"two");
    ts(b, Ts::Recv(r, 0, 64));
    ts(b, Ts::Recv(r, 0, 64));
    // Queued before, peeked first: the peek stamps it, the read reports the same.
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 0));
    b.send(a, b"late");
    ts(b, Ts::Set(r, SO_TIMESTAMPNS_OLD, 1));
    ts(b, Ts::Mark); // 7
    ts(b, Ts::Recv(r, libc::MSG_PEEK, 64));
    ts(b, Ts::Mark); // 8
    ts(b, Ts::Recv(r, 0, 64));
    // The last set wins; SO_TIMESTAMP off turns SO_TIMESTAMPNS off too.
    for (n, v) in [
        (SO_TIMESTAMP_OLD, 1),
        (SO_TIMESTAMPNS_OLD, 1),
        (SO_TIMESTAMP_NEW, 1),
        (SO_TIMESTAMPNS_NEW, 1),
        (SO_TIMESTAMPNS_OLD, 1),
        (SO_TIMESTAMP_OLD, 0),
    ] {
        ts(b, Ts::Set(r, n, v));
        get_all(b);
        b.send(a, b"m");
        ts(b, Ts::Recv(r, 0, 64));
    }
    // Sent while asked, read after it stopped: nothing.
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 7));
    b.send(a, b"x");
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 0));
    ts(b, Ts::Recv(r, 0, 64));
    // The sender asking is nothing to its peer.
    ts(b, Ts::Set(a, SO_TIMESTAMP_OLD, 1));
    b.send(a, b"y");
    ts(b, Ts::Recv(r, 0, 64));
    ts(b, Ts::Set(a, SO_TIMESTAMP_OLD, 0));
    // Control buffers too small, and none.
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 1));
    for clen in [0, 8, 16, 24, 32] {
        b.send(a, b"c");
        ts(b, Ts::Recv(r, 0, clen));
    }
    // With SO_PASSCRED: the stamp first; with a buffer that holds only it.
    b.passcred(r, true);
    b.send(a, b"cred");
    ts(b, Ts::Recv(r, 0, 128));
    b.send(a, b"cred");
    ts(b, Ts::Recv(r, 0, 40));
    b.passcred(r, false);
    // Short option lengths.
    ts(b, Ts::SetLen(r, SO_TIMESTAMP_OLD, 1, 2));
    ts(b, Ts::Get(r, SO_TIMESTAMP_OLD, 1));
    // recvmmsg: each message its own stamp; the second's buffer too small.
    b.send(a, b"r1");
    ts(b, Ts::Mark); // 9
    b.send(a, b"r2");
    ts(b, Ts::Recvmmsg(r, [64, 16]));
}

pub fn dgram(b: &mut dyn Backend) {
    messages(b, Dgram);
}

pub fn seqpacket(b: &mut dyn Backend) {
    messages(b, Seqpacket);
}

/// A stream has no timestamps at all (unix_stream_read_generic gives none), the
/// option set before or after the bytes came, several writes read at once.
pub fn stream(b: &mut dyn Backend) {
    fresh();
    let (a, r) = b.pair(Stream);
    b.send(a, b"x");
    ts(b, Ts::Set(r, SO_TIMESTAMP_OLD, 1));
    ts(b, Ts::Get(r, SO_TIMESTAMP_OLD, 4));
    b.send(a, b"y");
    b.send(a, b"z");
    ts(b, Ts::Recv(r, libc::MSG_PEEK, 64));
    ts(b, Ts::Recv(r, 0, 64));
    ts(b, Ts::Set(r, SO_TIMESTAMPNS_NEW, 1));
    b.passcred(r, true);
    b.send(a, b"w");
    ts(b, Ts::Recv(r, 0, 64));
}

/// SO_TIMESTAMPING: the flags Linux takes (EINVAL for OPT_STATS off TCP, OPT_ID_TCP
/// without OPT_ID and unknown bits, EOPNOTSUPP for OPT_BIND_PHC) read back under
/// both numbers; no message of its own without SO_TIMESTAMP (a unix send stamps
/// only for that), SCM_TIMESTAMPING after SCM_TIMESTAMPNS with it when software
/// reports are asked for.
pub fn timestamping(b: &mut dyn Backend) {
    fresh();
    let (a, r) = b.pair(Dgram);
    for bit in 0..20 {
        ts(b, Ts::Set(r, SO_TIMESTAMPING_OLD, 1 << bit));
        ts(b, Ts::Get(r, SO_TIMESTAMPING_OLD, 4));
    }
    ts(b, Ts::Get(r, SO_TIMESTAMPING_OLD, 8));
    ts(b, Ts::Get(r, SO_TIMESTAMPING_NEW, 8));
    ts(b, Ts::Set(r, SO_TIMESTAMPING_NEW, 0x18));
    ts(b, Ts::Get(r, SO_TIMESTAMPING_NEW, 8));
    ts(b, Ts::Get(r, SO_TIMESTAMPING_OLD, 2));
    ts(b, Ts::Set(r, SO_TIMESTAMPING_OLD, (1 << 16) | (1 << 7)));
    for f in [0x18, 0x10, 0x08, 0x10 | (1 << 17), 0x18 | (1 << 17)] {
        ts(b, Ts::Set(r, SO_TIMESTAMPING_OLD, f));
        b.send(a, b"t");
        ts(b, Ts::Recv(r, 0, 256));
    }
    ts(b, Ts::Set(r, SO_TIMESTAMPNS_OLD, 1));
    for (n, f) in [
        (SO_TIMESTAMPING_OLD, 0x18),
        (SO_TIMESTAMPING_OLD, 0x10),
        (SO_TIMESTAMPING_OLD, 0x08),
        (SO_TIMESTAMPING_OLD, 0x10 | (1 << 17)),
        (SO_TIMESTAMPING_NEW, 0x18),
    ] {
        ts(b, Ts::Set(r, n, f));
        ts(b, Ts::Get(r, SO_TIMESTAMPNS_OLD, 4));
        ts(b, Ts::Get(r, SO_TIMESTAMPNS_NEW, 4));
        b.send(a, b"t");
        ts(b, Ts::Recv(r, 0, 256));
        b.send(a, b"t");
        ts(b, Ts::Recv(r, 0, 40));
    }
}

/// The options set on a socket before the call that makes it a udsfs socket (its
/// bind or connect in the mount or a routed directory) still hold after it: rsyslogd
/// and others set them on the socket they are about to bind.
pub fn before_bind(b: &mut dyn Backend) {
    fresh();
    let r = b.socket(Dgram);
    ts(b, Ts::Set(r, SO_TIMESTAMPING_OLD, 0x18));
    ts(b, Ts::Set(r, SO_TIMESTAMPNS_NEW, 1));
    b.bind(r, p("ts.sock"));
    for n in [SO_TIMESTAMP_NEW, SO_TIMESTAMPNS_NEW, SO_TIMESTAMPING_NEW] {
        ts(b, Ts::Get(r, n, 8));
    }
    let a = b.socket(Dgram);
    ts(b, Ts::Set(a, SO_TIMESTAMP_OLD, 1));
    b.connect(a, p("ts.sock"));
    ts(b, Ts::Get(a, SO_TIMESTAMP_OLD, 4));
    ts(b, Ts::Mark);
    b.send(a, b"hello");
    ts(b, Ts::Mark);
    ts(b, Ts::Recv(r, 0, 256));
}

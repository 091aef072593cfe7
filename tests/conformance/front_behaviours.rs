//! Scenarios of calls only a program makes, run on the kernel and through the two
//! fronts (fronts.rs), never on the files, which have no address family, address
//! length or socket inode (issue 28 item 3; integration/behaviours.sh tries the same
//! and more with Python through both fronts). At 74c1ef6, before the behaviours
//! merge, each differed from the kernel through both fronts (`other_family` through
//! the library only), `show_traces --front` run against that commit's build.

use super::backend::Ty::*;
use super::backend::*;

const AF_INET: u16 = libc::AF_INET as u16;
const AF_UNSPEC: u16 = libc::AF_UNSPEC as u16;

/// bind and connect with another sun_family: EINVAL whatever the path, on a socket
/// still the kernel's and on one udsfs made (a pair), and no name is made.
pub fn other_family(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let l = b.listening(Stream, p("l.sock"), 5);
    let s = b.socket(Dgram);
    b.fd_call(s, FdCall::BindFamily(AF_INET, p("a.sock")));
    b.fd_call(s, FdCall::BindFamily(AF_UNSPEC, p("a.sock")));
    b.stat("a.sock");
    b.getsockname(s);
    b.fd_call(s, FdCall::ConnectFamily(AF_INET, p("r.sock")));
    b.getpeername(s);
    let (x, _y) = b.pair(Dgram);
    b.fd_call(x, FdCall::BindFamily(AF_INET, p("b.sock")));
    b.fd_call(x, FdCall::BindFamily(AF_INET, p("r.sock")));
    b.stat("b.sock");
    b.getsockname(x);
    b.bind(x, p("b.sock"));
    b.getsockname(x);
    let c = b.socket(Stream);
    b.fd_call(c, FdCall::ConnectFamily(AF_INET, p("l.sock")));
    b.getpeername(c);
    b.connect(c, p("l.sock"));
    b.getpeername(c);
    b.close(l);
    b.close(r);
}

/// A send's address of length 0 is no address, whatever the pointer: the
/// connected peer gets it, an unconnected socket gets ENOTCONN (EPIPE-free).
pub fn zero_length_address(b: &mut dyn Backend) {
    let r = b.bound(Dgram, p("r.sock"));
    let s = b.socket(Dgram);
    b.fd_call(s, FdCall::SendtoLen0(b"unconnected".to_vec()));
    b.connect(s, p("r.sock"));
    b.fd_call(s, FdCall::SendtoLen0(b"to the peer".to_vec()));
    b.recvfrom(r, 100);
    let (x, y) = b.pair(Dgram);
    b.fd_call(x, FdCall::SendtoLen0(b"pair".to_vec()));
    b.recv(y, 100);
    b.fd_call(
        x,
        FdCall::SendmsgName0(SendMsg::new(b"with rights").rights(&[s])),
    );
    b.recvmsg(y, 100);
    b.fd_call(
        x,
        FdCall::SendmsgName0(SendMsg::new(b"with creds").creds(Ucred::own())),
    );
    b.recv(y, 100);
    let (a, c) = b.pair(Stream);
    b.fd_call(a, FdCall::SendtoLen0(b"stream".to_vec()));
    b.fd_call(
        a,
        FdCall::SendmsgName0(SendMsg::new(b" and rights").rights(&[r])),
    );
    b.recvmsg(c, 100);
    let q = b.socket(Seqpacket);
    b.fd_call(q, FdCall::SendtoLen0(b"seqpacket unconnected".to_vec()));
}

/// fstat and a raw statx of socket descriptors say S_IFSOCK; fchmod and fchown of
/// one succeed and leave the bound path's node as it was.
pub fn fstat_fchmod_fchown(b: &mut dyn Backend) {
    let (x, _y) = b.pair(Stream);
    b.fd_call(x, FdCall::Fstat);
    b.fd_call(x, FdCall::SyscallStatx);
    let s = b.bound(Dgram, p("f.sock"));
    b.fd_call(s, FdCall::Fstat);
    b.fd_call(s, FdCall::SyscallStatx);
    b.stat("f.sock");
    b.fd_call(s, FdCall::Fchmod(0o600));
    b.fd_call(s, FdCall::Fchown(1, 1));
    b.fd_call(s, FdCall::Fstat);
    b.stat("f.sock");
    b.owner("f.sock");
    let (l, c, a) = b.connection(Stream, p("l.sock"));
    b.fd_call(c, FdCall::Fstat);
    b.fd_call(a, FdCall::SyscallStatx);
    b.fd_call(l, FdCall::Fchmod(0o700));
    b.stat("l.sock");
    b.connected(Stream, p("l.sock"));
}

/// A datagram or seqpacket record of 4 MiB, once SO_SNDBUF fits it, goes through
/// whole; the largest one Linux allocates is 4 MiB + 69312 bytes (ENOBUFS past it),
/// and past SO_SNDBUF - 32 a record is EMSGSIZE.
pub fn big_records(b: &mut dyn Backend) {
    const MAX: usize = 4263616;
    for ty in [Dgram, Seqpacket] {
        let (x, y) = b.pair(ty);
        b.send(x, &pattern(4 << 20));
        b.fd_call(x, FdCall::SndbufForce(8 << 20));
        b.send(x, &pattern(4 << 20));
        b.recv(y, 5 << 20);
        b.send(x, &pattern(MAX));
        b.recv(y, 5 << 20);
        b.send(x, &pattern(MAX + 1));
        b.recv(y, 5 << 20);
        b.fd_call(x, FdCall::SndbufForce(2 << 20));
        b.send(x, &pattern(4 << 20));
        b.send(x, &pattern((4 << 20) - 32));
        b.recv(y, 5 << 20);
    }
}

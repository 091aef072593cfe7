//! The ioctls of a socket's `data` file: the wire format shared by the daemon
//! (`fuse/ioctl.rs`) and the preload library (which includes this file).
//! FUSE passes ioctls on regular files "restricted": the kernel copies in and
//! out exactly _IOC_SIZE(cmd) bytes, so each command is a fixed-size struct.
//! Fields are native-endian; the library and the daemon run on one machine.

/// `ioctl(fd, UDSFS_IOC_CTL, &mut Ctl)`: control operations (`Ctl::op`).
pub const UDSFS_IOC_CTL: u32 = iowr(1, core::mem::size_of::<Ctl>());
/// `ioctl(fd, UDSFS_IOC_MSG, buf)`: one sendmsg or recvmsg; `buf` holds a
/// `MsgHead`, then the payload, `MSG_BUF` bytes in all.
pub const UDSFS_IOC_MSG: u32 = iowr(2, MSG_BUF);

/// _IOC_SIZE has 14 bits.
pub const MSG_BUF: usize = 16 * 1024 - 8;
/// Payload room of one UDSFS_IOC_MSG; larger messages go through `msg`.
pub const MSG_ROOM: usize = MSG_BUF - core::mem::size_of::<MsgHead>();

const IOC_TYPE: u32 = b'U' as u32;

const fn iowr(nr: u32, size: usize) -> u32 {
    // _IOC(_IOC_READ | _IOC_WRITE, type, nr, size)
    (3 << 30) | ((size as u32) << 16) | (IOC_TYPE << 8) | nr
}

/// Room for `sun_path` (108 bytes) and alignment.
pub const ADDR_MAX: usize = 112;
/// SCM_MAX_FD.
pub const MAX_RIGHTS: usize = 253;

/// sizeof(struct cmsghdr) (CMSG_LEN(0)) and the alignment of control messages.
pub const CMSG_HDR: usize = 16;
const CMSG_ALIGN: usize = 8;

/// How many passed fds a recvmsg control buffer of `controllen` bytes takes
/// after the credentials, which come first and take CMSG_SPACE(12) (or the
/// rest, cut short), as scm_recv fills it.
pub const fn rights_room(controllen: usize, creds: bool) -> usize {
    let mut used = 0;
    if creds && controllen >= CMSG_HDR {
        let space = (CMSG_HDR + 12).next_multiple_of(CMSG_ALIGN);
        used = if space < controllen {
            space
        } else {
            controllen
        };
    }
    (controllen - used).saturating_sub(CMSG_HDR) / 4
}

/// Addresses in `addr`/`addr_len`: a tree path (relative to the mount root)
/// as bytes, or a NUL followed by an abstract name; length 0 means none
/// (unnamed, or autobind for OP_BIND). With `ADDR_AS_GIVEN` in `addr_flags`
/// an address read back is the sun_path the program gave bind, verbatim.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Ctl {
    pub op: u32,
    pub arg: i32,
    pub addr_len: u32,
    /// Out (OP_GETNAME): `ADDR_AS_GIVEN` or 0.
    pub addr_flags: u32,
    /// Results (OP_INFO: the `INFO_*` indices; OP_TAKE_ERROR: v[0] = errno).
    pub v: [i64; 13],
    pub addr: [u8; ADDR_MAX],
    /// In (OP_BIND of a path): the sun_path as the program gave it (Linux
    /// reports it so: `./x.sock` stays `./x.sock`); 0 bytes: none.
    pub given_len: u32,
    pub _pad: u32,
    pub given: [u8; ADDR_MAX],
}

/// `addr` is the sun_path as given to bind, not a tree path.
pub const ADDR_AS_GIVEN: u32 = 1;

pub const OP_BIND: u32 = 1;
pub const OP_LISTEN: u32 = 2;
/// Never parks: a full backlog gives EAGAIN; a blocking caller then writes
/// `connect` to the socket's ctl file, which parks.
pub const OP_CONNECT: u32 = 3;
/// `arg`: SHUT_RD, SHUT_WR or SHUT_RDWR.
pub const OP_SHUTDOWN: u32 = 4;
/// `arg` 0: the local address, 1: the peer's (ENOTCONN without a peer).
pub const OP_GETNAME: u32 = 5;
pub const OP_INFO: u32 = 6;
pub const OP_TAKE_ERROR: u32 = 7;
pub const OP_SET_PASSCRED: u32 = 8;
pub const OP_SET_SNDBUF: u32 = 9;
/// connect(AF_UNSPEC): dissolve a dgram socket's default peer.
pub const OP_DISCONNECT: u32 = 10;
/// SO_OOBINLINE (`arg` 0 or 1).
pub const OP_SET_OOBINLINE: u32 = 11;
/// SO_PEEK_OFF (`arg`; negative: off).
pub const OP_SET_PEEK_OFF: u32 = 12;
/// F_SETOWN and friends: `arg` a pid (> 0), a process group (< 0) or 0;
/// SIGURG goes there when OOB data arrives.
pub const OP_SET_OWNER: u32 = 13;
/// SIOCATMARK: v[0] = 1 at the OOB mark.
pub const OP_ATMARK: u32 = 14;
/// v[0] = SO_OOBINLINE, v[1] = SO_PEEK_OFF, v[2] = the SIGURG owner.
pub const OP_OOB_OPTS: u32 = 15;
/// SO_PASSPIDFD (`arg` 0 or 1).
pub const OP_SET_PASSPIDFD: u32 = 32;
/// SO_PEERPIDFD: v[0] = a depot tag of the peer's pidfd, pinned when the
/// peer connected (src/engine/pins.rs), to claim over the fd channel.
pub const OP_PEER_PIDFD: u32 = 36;
/// SO_RCVBUF (`arg`), as OP_SET_SNDBUF for the send buffer.
pub const OP_SET_RCVBUF: u32 = 16;
/// SO_SNDBUFFORCE and SO_RCVBUFFORCE: EPERM without CAP_NET_ADMIN.
pub const OP_SET_SNDBUF_FORCE: u32 = 17;
pub const OP_SET_RCVBUF_FORCE: u32 = 18;
/// SO_RCVTIMEO (`arg` 0) or SO_SNDTIMEO (`arg` 1) from v[0] = tv_sec,
/// v[1] = tv_usec: EDOM for a usec outside 0..1000000; 0, 0: none.
pub const OP_SET_TIMEO: u32 = 19;
/// Reads them back: v[0], v[1] (`arg` 0: SO_RCVTIMEO, 1: SO_SNDTIMEO);
/// v[2] = 1 for a zero timeout (a negative tv_sec: no waiting, reads 0).
pub const OP_GET_TIMEO: u32 = 20;
/// The SOL_SOCKET option `arg` that AF_UNIX only keeps (src/engine/sockflags.rs):
/// set from v[0] (SO_LINGER: l_onoff) and v[1] (l_linger); ENOPROTOOPT for others.
pub const OP_SET_SOCKOPT: u32 = 33;
/// Reads option `arg` back into v[0] and v[1].
pub const OP_GET_SOCKOPT: u32 = 34;
/// On a listener: socket v[0], just accepted, becomes a received entry of
/// it (v[0] out: the entry's number), so that its control handle may close
/// before its data file opens (accept with one descriptor slot left).
pub const OP_KEEP_ACCEPTED: u32 = 35;

pub const INFO_TYPE: usize = 0; // SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET
pub const INFO_LISTENING: usize = 1;
pub const INFO_PASSCRED: usize = 2;
pub const INFO_HAS_PEERCRED: usize = 3;
pub const INFO_PEER_PID: usize = 4;
pub const INFO_PEER_UID: usize = 5;
pub const INFO_PEER_GID: usize = 6;
pub const INFO_SNDBUF: usize = 7;
pub const INFO_INQ: usize = 8; // -1 on a listener
pub const INFO_OUTQ: usize = 9;
pub const INFO_ID: usize = 10; // the socket's number N
pub const INFO_PASSPIDFD: usize = 11;
pub const INFO_RCVBUF: usize = 12;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct MsgHead {
    pub op: u32,
    pub flags: u32,
    /// In: payload bytes (send) or wanted (recv). Out: bytes sent/received.
    pub len: u32,
    /// Out (recv): the message's whole length (MSG_TRUNC).
    pub full_len: u32,
    pub addr_len: u32,
    /// Out (recv): STATUS_*.
    pub status: u32,
    /// Out (recv): HAS_CREDS (SCM_CREDENTIALS in `creds`) and HAS_PIDFD
    /// (SCM_PIDFD of the sender, whose pid is `creds[0]`).
    pub has_creds: u32,
    pub nrights: u32,
    /// pid, uid, gid.
    pub creds: [u32; 3],
    /// Out (recv): `ADDR_AS_GIVEN` or 0, for `addr`.
    pub addr_flags: u32,
    /// In (recv with MSGF_PEEK): start this far into what a peek returns,
    /// so that a peek larger than MSG_ROOM comes in pieces.
    pub skip: u32,
    pub _pad: u32,
    /// What is left of the call's SO_RCVTIMEO or SO_SNDTIMEO in ns
    /// (TIMEO_NONE: none). Out: after this ioctl. In, with MSGF_CONT: the
    /// most a later ioctl of the same call may wait, so that a call carried
    /// by several ioctls is timed once, by the daemon.
    pub timeo_left: u64,
    /// Send: `to`; recv: `from`.
    pub addr: [u8; ADDR_MAX],
    /// Socket numbers: passed (send) or received, each a new
    /// `.udsfs/sock/H/` to open (recv).
    pub rights: [u64; MAX_RIGHTS],
}

pub const HAS_CREDS: u32 = 1;
pub const HAS_PIDFD: u32 = 2;
/// With HAS_PIDFD: the daemon holds a pidfd of the sender, made when it
/// sent; its file tag follows the received ones, at `rights[nrights]`.
pub const HAS_PIDFD_FILE: u32 = 4;

pub const MSGOP_SEND: u32 = 1;
pub const MSGOP_RECV: u32 = 2;

/// recv: leave the message queued.
pub const MSGF_PEEK: u32 = 1;
/// send: the last byte is out-of-band (MSG_OOB); recv: read the OOB byte,
/// and (out) the byte returned is it.
pub const MSGF_OOB: u32 = 2;
/// recv (out): passed sockets were dropped, past the reader's RLIMIT_NOFILE
/// unopened ones (MSG_CTRUNC).
pub const MSGF_CTRUNC: u32 = 4;
/// recv (in): `nrights` is the caller's control buffer length; passed
/// sockets beyond its room are closed, as Linux closes the files it does not
/// install (MSG_CTRUNC).
pub const MSGF_ROOM: u32 = 8;
/// In: the caller blocks (no O_NONBLOCK, no MSG_DONTWAIT): a call that
/// cannot complete parks in the daemon, under the socket's SO_RCVTIMEO or
/// SO_SNDTIMEO, until it can or a signal comes. Without it: EAGAIN at once.
pub const MSGF_WAIT: u32 = 16;
/// recv (in): MSG_WAITALL on a stream: wait until `len` bytes (at most
/// MSG_ROOM), EOF, an error, a signal or the timeout; then what came.
pub const MSGF_WAITALL: u32 = 32;
/// In: a later ioctl of one call (a MSG_WAITALL receive larger than
/// MSG_ROOM, timed once as unix_stream_read_generic does): it waits at most
/// `timeo_left`.
pub const MSGF_CONT: u32 = 64;
/// `timeo_left` of a socket without a timeout.
pub const TIMEO_NONE: u64 = u64::MAX;
/// recv: the message does not fit MSG_ROOM; nothing was taken.
pub const STATUS_TOO_BIG: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_room_follows_scm_recv() {
        // CMSG_SPACE(4) holds two fds; CMSG_LEN(0) none; credentials first.
        assert_eq!(rights_room(24, false), 2);
        assert_eq!(rights_room(16, false), 0);
        assert_eq!(rights_room(0, false), 0);
        assert_eq!(rights_room(32 + 24, true), 2);
        assert_eq!(
            rights_room(20, true),
            0,
            "credentials cut short take it all"
        );
    }
}

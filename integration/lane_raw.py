# lane_raw.py: the library's own lane requests made by hand, for the attacks on lanes
# (adversarial_lanes.py and adversarial_through.py through with_helpers,
# adversarial_lanes3_pass.py and adversarial_lanes4.py by import):
# Op::LaneClaim on a socket's data file, and a region's file claimed by its depot tag
# over the fd channel (docs/LANE.md), the channel as the library connects it; and a
# socket's lane as its status file says it.
import ctypes
import errno
import os
import socket
import struct
import time

libc = ctypes.CDLL(None, use_errno=True)
IOC_CTL = 0xC1F05501  # udsfs_proto::ioctl::UDSFS_IOC_CTL (a 496-byte Ctl)
OP_LANE_CLAIM = 40


def lane_ctl(fd, arg):
    """Op::LaneClaim with `arg` on data file `fd`: (tag, side, cap0, cap1) or the errno name."""
    buf = (ctypes.c_char * 496)()
    struct.pack_into("Ii", buf, 0, OP_LANE_CLAIM, arg)
    if libc.ioctl(fd, ctypes.c_ulong(IOC_CTL), buf) < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return struct.unpack_from("qqqq", buf, 16)


def lane_ask(fd, arg, tries):
    """lane_ctl(fd, arg) again every 10 ms while EAGAIN (the daemon not ready to make the
    lane yet), `tries` times at most: the last answer."""
    g = "EAGAIN"
    for _ in range(tries):
        g = lane_ctl(fd, arg)
        if g != "EAGAIN":
            break
        time.sleep(0.01)
    return g


def channel():
    """A connection to the mount's fd channel (its abstract name in $U/fdchannel, U the
    mount's .udsfs directory), as the library makes it."""
    name = open(f"{os.environ.get('U', '')}/fdchannel").read().split("\n")[0]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0" + name)
    return s


def claim(ch, tag):
    """The file of depot `tag` over the fd channel `ch`: its fd, or the errno name."""
    ch.send(b"C" + struct.pack("=Q", tag & 0xFFFFFFFFFFFFFFFF))
    msg, anc, _, _ = ch.recvmsg(64, socket.CMSG_SPACE(4 * 4))
    if msg[:1] == b"E":
        return errno.errorcode.get(struct.unpack_from("i", msg, 1)[0], "?")
    fds = []
    for lvl, ty, data in anc:
        if lvl == socket.SOL_SOCKET and ty == socket.SCM_RIGHTS:
            fds += list(struct.unpack(f"{len(data) // 4}i", data))
    return fds[0] if fds else f"no file ({msg[:1]!r})"


def lane_status(sock):
    """`sock`'s lane= word in its status file ("direct", "through"...), "none" for a kernel socket."""
    link = os.readlink(f"/proc/self/fd/{sock.fileno()}")
    try:
        for line in open(link.replace("/data", "/status")):
            if line.startswith("lane="):
                return line.strip()[5:]
    except OSError:
        pass
    return "none"

"""Queue figures (FIONREAD/SIOCINQ, SIOCOUTQ), SO_SNDBUF/SO_RCVBUF (doubling,
minimum, maximum, the FORCE variants, their effect on send limits) and
MSG_TRUNC/MSG_CTRUNC through the socket API: run once on kernel sockets and
once through `udsfs run` (integration/bufs.sh); the two outputs must be equal
line by line. Usage: bufs.py DIR (DIR: where to bind names)."""

import array
import fcntl
import os
import resource
import socket
import struct
import sys
import termios

from differential import become, fill, getopt, res, say, setopt, where

SIOCOUTQ = termios.TIOCOUTQ
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
TYPES = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}


def q(s, req):
    return res(lambda: struct.unpack("i", fcntl.ioctl(s, req, b"\0" * 4))[0])


def figures(s):
    return f"inq={q(s, termios.FIONREAD)} outq={q(s, SIOCOUTQ)}"


def queue_figures(where):
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        say(f"{name} empty: a {figures(a)} b {figures(b)}")
        a.send(b"12345")
        a.send(b"123")
        a.send(b"")
        # SIOCOUTQ counts the kernel's skb charges (truesize), not payload.
        say(f"{name} 5+3+0 queued: b inq={q(b, termios.FIONREAD)} a outq={q(a, SIOCOUTQ)}")
        b.recv(2)
        say(f"{name} after recv 2: b inq={q(b, termios.FIONREAD)}")
        while True:
            try:
                b.recv(100, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
        say(f"{name} drained: a {figures(a)} b {figures(b)}")
        a.close()
        say(f"{name} peer closed: b {figures(b)}")
        b.close()
    for name, ty in TYPES.items():
        s = socket.socket(socket.AF_UNIX, ty)
        say(f"{name} unconnected: {figures(s)}")
        if ty != socket.SOCK_DGRAM:
            s.bind(os.path.join(where, f"listen-{name}"))
            s.listen(4)
            c = socket.socket(socket.AF_UNIX, ty)
            c.connect(os.path.join(where, f"listen-{name}"))
            say(f"{name} listener with a client: {figures(s)}")
            c.close()
        s.close()


def buffer_sizes(where):
    wmax = int(open("/proc/sys/net/core/wmem_max").read())
    rmax = int(open("/proc/sys/net/core/rmem_max").read())
    a, b = socket.socketpair()
    say("defaults:", getopt(a, socket.SO_SNDBUF), getopt(a, socket.SO_RCVBUF))
    for name, o in (("SO_SNDBUF", socket.SO_SNDBUF), ("SO_RCVBUF", socket.SO_RCVBUF)):
        top = wmax if o == socket.SO_SNDBUF else rmax
        for label, v in (("65536", 65536), ("1", 1), ("0", 0), ("-1", -1), ("INT_MAX", 2**31 - 1),
                         ("max+1000", top + 1000), ("max/2", top // 2)):
            r = setopt(a, o, v)
            got = getopt(a, o)
            shown = {2 * top: "2*max", top: "max"}.get(got, got)
            say(f"{name} {label}: {r} -> {shown}")
    for name, o in (("SO_SNDBUFFORCE", SO_SNDBUFFORCE), ("SO_RCVBUFFORCE", SO_RCVBUFFORCE)):
        for v in (10**8, 1, -5, 2**31 - 1):
            r = setopt(a, o, v)
            plain = socket.SO_SNDBUF if o == SO_SNDBUFFORCE else socket.SO_RCVBUF
            say(f"{name} {'INT_MAX' if v == 2**31 - 1 else v}: {r} -> {getopt(a, plain)}")
    say("getsockopt SO_SNDBUFFORCE:", getopt(a, SO_SNDBUFFORCE))
    say("short optlen:", res(lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, b"\1\0")))
    a.close()
    b.close()
    # A listener's sizes are not inherited by the sockets it accepts.
    for name in ("stream", "seqpacket"):
        path = os.path.join(where, f"bufs-{name}")
        ls = socket.socket(socket.AF_UNIX, TYPES[name])
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 10000)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 10000)
        ls.bind(path)
        ls.listen(1)
        c = socket.socket(socket.AF_UNIX, TYPES[name])
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 30000)
        c.connect(path)
        s, _ = ls.accept()
        say(f"{name} listener {getopt(ls, socket.SO_SNDBUF)} {getopt(ls, socket.SO_RCVBUF)},",
            f"accepted {getopt(s, socket.SO_SNDBUF)} {getopt(s, socket.SO_RCVBUF)},",
            f"client {getopt(c, socket.SO_SNDBUF)} {getopt(c, socket.SO_RCVBUF)}")
        for x in (ls, c, s):
            x.close()
    # The FORCE options need CAP_NET_ADMIN: EPERM for nobody, the plain ones clamp.
    pid = os.fork()
    if pid == 0:
        try:
            become(65534)
            c, d = socket.socketpair()
            say("nobody SO_SNDBUFFORCE:", setopt(c, SO_SNDBUFFORCE, 10**8), getopt(c, socket.SO_SNDBUF))
            say("nobody SO_RCVBUFFORCE:", setopt(c, SO_RCVBUFFORCE, 10**8), getopt(c, socket.SO_RCVBUF))
            say("nobody SO_SNDBUF big:", setopt(c, socket.SO_SNDBUF, 10**8), getopt(c, socket.SO_SNDBUF) == 2 * wmax)
        except Exception as e:
            say("nobody failed:", repr(e))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def buffer_effects():
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        limit = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) - 32
        if ty != socket.SOCK_STREAM:
            say(f"{name} sndbuf 8192: send {limit}: {res(lambda: a.send(bytes(limit)))}")
            say(f"{name} sndbuf 8192: send {limit + 1}: {res(lambda: a.send(bytes(limit + 1)))}")
            b.recv(limit)
        else:
            say(f"{name} sndbuf 8192: one send of 100000 takes {res(lambda: a.send(bytes(100000), socket.MSG_DONTWAIT))}")
            while True:
                try:
                    b.recv(1 << 20, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
        say(f"{name} sndbuf 8192: 1000-byte sends until EAGAIN: {fill(a, bytes(1000))}")
        a.close()
        b.close()
        # What the receiver's SO_RCVBUF changes (nothing, on AF_UNIX).
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        say(f"{name} receiver rcvbuf 2304: 1000-byte sends until EAGAIN: {fill(a, bytes(1000))}")
        a.close()
        b.close()


def ctl_send(a, fds):
    return a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def received(msg, anc, flags):
    fds = []
    for level, ty, data in anc:
        if level == socket.SOL_SOCKET and ty == socket.SCM_RIGHTS:
            fds += array.array("i", data[: len(data) - len(data) % 4]).tolist()
        elif ty == socket.SCM_CREDENTIALS:
            fds.append("creds")
    for fd in fds:
        if fd != "creds":
            os.close(fd)
    t = "|".join(n for n, f in (("TRUNC", socket.MSG_TRUNC), ("CTRUNC", socket.MSG_CTRUNC)) if flags & f)
    return f"{msg!r} got={len([f for f in fds if f != 'creds'])}{' creds' if 'creds' in fds else ''} flags={t or '-'}"


def truncation():
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        buf = bytearray(4)
        a.send(b"0123456789")
        a.send(b"abcdefghij")
        say(f"{name} recvmsg 4:", received(*b.recvmsg(4)[:3]))
        say(f"{name} recv_into 4 MSG_TRUNC:", res(lambda: b.recv_into(buf, 4, socket.MSG_TRUNC)), bytes(buf))
        a.send(b"ABCDEFGHIJ")
        say(f"{name} recv_into 4 MSG_TRUNC|MSG_PEEK:", res(lambda: b.recv_into(buf, 4, socket.MSG_TRUNC | socket.MSG_PEEK)), bytes(buf))
        nb, anc, fl, _ = b.recvmsg_into([buf], 0, socket.MSG_TRUNC)
        say(f"{name} recvmsg_into 4 MSG_TRUNC: {nb} flags={fl & (socket.MSG_TRUNC | socket.MSG_CTRUNC):#x}", bytes(buf))
        say(f"{name} left: inq={q(b, termios.FIONREAD)}")
        a.send(b"")
        say(f"{name} empty message MSG_TRUNC:", res(lambda: b.recv_into(buf, 4, socket.MSG_TRUNC | socket.MSG_DONTWAIT)))
        if ty != socket.SOCK_STREAM:
            # Larger than one ioctl of the library: the `msg` file's path.
            big = bytes(range(256)) * 400
            a.send(big)
            a.send(big)
            say(f"{name} 102400 MSG_TRUNC|MSG_PEEK:", res(lambda: b.recv_into(buf, 4, socket.MSG_TRUNC | socket.MSG_PEEK)), bytes(buf))
            say(f"{name} 102400 MSG_TRUNC:", res(lambda: b.recv_into(buf, 4, socket.MSG_TRUNC)), bytes(buf))
            say(f"{name} 102400 recvmsg 50000:", received(*b.recvmsg(50000)[:3])[-12:])
        a.close()
        b.close()


def control_truncation():
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        x, y = socket.socketpair()
        fds = [x.fileno(), y.fileno(), x.fileno()]
        for room, label in ((socket.CMSG_SPACE(12), "room for 3"), (socket.CMSG_SPACE(4), "room for 1"),
                            (socket.CMSG_LEN(0), "room for none"), (0, "no buffer")):
            ctl_send(a, fds)
            say(f"{name} 3 fds, {label}:", received(*b.recvmsg(16, room)[:3]))
        # The sockets that did not fit are closed: the peer of a passed socket
        # whose sender closed its copy sees the end of the stream.
        p, peer = socket.socketpair()
        ctl_send(a, [p.fileno()])
        p.close()
        say(f"{name} 1 fd, no buffer:", received(*b.recvmsg(16)[:3]))
        say(f"{name} the dropped socket's peer reads:", res(lambda: peer.recv(10, socket.MSG_DONTWAIT)))
        peer.close()
        b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        a.send(b"c")
        say(f"{name} creds, room for none:", received(*b.recvmsg(16, socket.CMSG_LEN(4))[:3]))
        a.send(b"c")
        say(f"{name} creds, room for them:", received(*b.recvmsg(16, socket.CMSG_SPACE(12))[:3]))
        b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        # RLIMIT_NOFILE: fds beyond it are not installed (MSG_CTRUNC).
        ctl_send(a, fds)
        pid = os.fork()
        if pid == 0:
            try:
                top = max(os.listdir("/proc/self/fd"), key=int)
                resource.setrlimit(resource.RLIMIT_NOFILE, (int(top) + 3, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
                # Two free slots below the limit at most: leave exactly one.
                spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(1)]
                free = [f for f in range(int(top) + 3) if not os.path.exists(f"/proc/self/fd/{f}")]
                while len(free) > 1:
                    spare.append(os.open("/dev/null", os.O_RDONLY))
                    free.pop(0)
                say(f"{name} 3 fds, one below RLIMIT_NOFILE:", received(*b.recvmsg(16, socket.CMSG_SPACE(12))[:3]))
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        for s in (a, b, x, y):
            s.close()


def main():
    names = sys.argv[1]
    where()
    queue_figures(names)
    buffer_sizes(names)
    buffer_effects()
    truncation()
    control_truncation()
    say("done")


main()

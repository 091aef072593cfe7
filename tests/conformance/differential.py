"""What the differential programs (oob_peek.py, bufs.py) share: each runs once on
kernel sockets and once through `udsfs run` (integration/lib.sh kernel_vs_udsfs),
prints one result per line, and the two outputs must be equal."""

import ctypes
import errno
import os
import socket
import threading
import time


def res(f):
    """f()'s value ("ok" for None), or the errno name of the OSError it raised."""
    try:
        r = f()
        return r if r is not None else "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def say(*a):
    print(*a, flush=True)


def where():
    """The first line: which sockets this run got (the runner checks it)."""
    a, b = socket.socketpair()
    udsfs = "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{a.fileno()}")
    say("where:", "udsfs" if udsfs else "kernel")
    a.close()
    b.close()


def open_fds():
    """This process's descriptors, eventfds left out: the preload library's
    lanes hold some, given back when a lane is down for good at any later
    close (lane.rs `sweep`: 'leaked -8' where two pairs' lanes went), and
    the scenarios pass none."""
    out = set()
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{n}") != "anon_inode:[eventfd]":
                out.add(int(n))
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return out


class Child:
    """body(out) in a forked child: the lines it appends to `out` come back through
    a pipe (if it raises: broke(e)'s line after those). The parent does what it
    likes meanwhile; say_lines then reads them to the end, reaps the child and says
    them in order."""

    def __init__(self, body, broke=lambda e: f"child broke: {e!r}"):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(r)
            out = []
            try:
                body(out)
            except Exception as e:  # noqa: BLE001 - the line says what broke
                out.append(broke(e))
            os.write(w, ("\n".join(out) + "\n").encode())
            os._exit(0)
        os.close(w)
        self.r = r

    def say_lines(self):
        text = b"".join(iter(lambda: os.read(self.r, 65536), b""))  # to EOF
        os.close(self.r)
        os.waitpid(self.pid, 0)
        for line in text.decode().splitlines():
            say(line)


def become(uid):
    """This process as user and group `uid` alone (no other groups), for good: a
    root process dropping to another user, as servers' workers do."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def getopt(s, name):
    """The SOL_SOCKET option `name` of socket `s`, or the errno name."""
    return res(lambda: s.getsockopt(socket.SOL_SOCKET, name))


def setopt(s, name, v):
    """Sets the SOL_SOCKET option `name` of socket `s` to `v`: "ok" or the errno name."""
    return res(lambda: s.setsockopt(socket.SOL_SOCKET, name, v))


def fill(a, chunk):
    """Non-blocking sends of `chunk` until EAGAIN: (messages, bytes)."""
    n = total = 0
    while n < 100000:
        try:
            total += a.send(chunk, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        n += 1
    return n, total


# The C structures the programs that call libc directly (sendmsg, sendmmsg,
# recvmmsg through ctypes) fill in: struct iovec, struct msghdr, struct mmsghdr.
class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class MsgHdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(IOVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


class MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", MsgHdr), ("len", ctypes.c_uint)]


def blocked_send_with_file(a, b):
    """a's queue filled with 1000-byte sends, then b"after" sent with a pipe's
    write end while a thread drains b from 0.3 s on: the send must wait for
    room, then go whole. (send_fds's count, the message, how many files came,
    what the pipe carried from the received end)."""
    queued, _ = fill(a, b"f" * 1000)

    def drain():
        time.sleep(0.3)
        for _ in range(queued):
            b.recv(1000)

    t = threading.Thread(target=drain)
    t.start()
    r, w = os.pipe()
    n = socket.send_fds(a, [b"after"], [w])
    t.join()
    os.close(w)
    msg, got, _, _ = socket.recv_fds(b, 10, 1)
    os.write(got[0], b"ok")
    out = (n, msg, len(got), os.read(r, 2))
    for fd in got + [r]:
        os.close(fd)
    return out

"""SO_RCVTIMEO, SO_SNDTIMEO and MSG_WAITALL through the socket API: run once on
kernel sockets and once through `udsfs run` (integration/timeo.sh); the two outputs
must be equal line by line. Usage: timeo.py DIR (DIR: where to bind names).
Timings are not compared: a timed-out call prints whether it waited at least the
timeout and ended well before ten times it."""

import os
import socket
import struct
import sys
import threading
import time

from differential import res, say, where

SO_RCVTIMEO, SO_SNDTIMEO, SO_RCVTIMEO_NEW = 20, 21, 66
T = 0.3


def settimeo(s, opt, sec, usec):
    return res(lambda: s.setsockopt(socket.SOL_SOCKET, opt, struct.pack("qq", sec, usec)))


def gettimeo(s, opt):
    return res(lambda: struct.unpack("qq", s.getsockopt(socket.SOL_SOCKET, opt, 16)))


def timed(f):
    """f()'s outcome, and whether it took between T and 10 T."""
    t = time.monotonic()
    r = res(f)
    took = time.monotonic() - t
    return f"{r} waited={T * 0.9 <= took < T * 10}"


def later(delay, f):
    def run():
        time.sleep(delay)
        f()

    threading.Thread(target=run, daemon=True).start()


def main():
    where()
    d = sys.argv[1]
    a, b = socket.socketpair()
    say("default", gettimeo(a, SO_RCVTIMEO), gettimeo(a, SO_SNDTIMEO))
    say("set 100ms", settimeo(a, SO_RCVTIMEO, 0, 100000), gettimeo(a, SO_RCVTIMEO))
    say("set 1.5s", settimeo(a, SO_SNDTIMEO, 1, 500000), gettimeo(a, SO_SNDTIMEO))
    say("new form", gettimeo(a, SO_RCVTIMEO_NEW))
    say("usec 1000000", settimeo(a, SO_RCVTIMEO, 0, 1000000))
    say("usec -1", settimeo(a, SO_RCVTIMEO, 0, -1))
    say("short", res(lambda: a.setsockopt(socket.SOL_SOCKET, SO_RCVTIMEO, b"\0" * 8)))
    say("cleared", settimeo(a, SO_RCVTIMEO, 0, 0), gettimeo(a, SO_RCVTIMEO))
    # A negative tv_sec: a zero timeout, read back as 0, and no waiting.
    say("sec -1", settimeo(a, SO_RCVTIMEO, -1, 0), gettimeo(a, SO_RCVTIMEO))
    t = time.monotonic()
    say("no wait", res(lambda: a.recv(10)), res(lambda: a.recvmsg(10, 64)),
        res(lambda: os.read(a.fileno(), 10)), time.monotonic() - t < T * 10)
    a.close()
    b.close()

    for ty in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        settimeo(a, SO_RCVTIMEO, 0, int(T * 1e6))
        say(ty, "recv", timed(lambda: a.recv(10)))
        say(ty, "recvmsg", timed(lambda: a.recvmsg(10, 64)))
        say(ty, "read", timed(lambda: os.read(a.fileno(), 10)))
        b.send(b"x")
        say(ty, "data still comes", res(lambda: a.recv(10)))
        a.close()
        b.close()

    # Send timeouts: a stream write that queued part gives the count.
    a, b = socket.socketpair()
    settimeo(a, SO_SNDTIMEO, 0, int(T * 1e6))
    big = b"z" * (4 << 20)
    t = time.monotonic()
    n = res(lambda: a.send(big))
    say("stream send partial", isinstance(n, int) and 0 < n < len(big),
        T * 0.9 <= time.monotonic() - t < T * 10)
    say("stream send full", timed(lambda: a.send(big)))
    say("stream write full", timed(lambda: os.write(a.fileno(), big)))
    a.close()
    b.close()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    settimeo(a, SO_SNDTIMEO, 0, int(T * 1e6))
    a.setblocking(False)
    while res(lambda: a.send(b"m")) == 1:
        pass
    a.setblocking(True)
    say("dgram send full", timed(lambda: a.send(b"m")))
    a.close()
    b.close()

    # accept, connect.
    path = os.path.join(d, "timeo.sock")
    lst = socket.socket(socket.AF_UNIX)
    lst.bind(path)
    lst.listen(0)
    settimeo(lst, SO_RCVTIMEO, 0, int(T * 1e6))
    settimeo(lst, SO_SNDTIMEO, 0, int(T * 1e6))
    say("accept", timed(lambda: lst.accept()))
    c1 = socket.socket(socket.AF_UNIX)
    c1.connect(path)
    s1, _ = lst.accept()
    say("accepted inherits", gettimeo(s1, SO_RCVTIMEO), gettimeo(s1, SO_SNDTIMEO))
    c2 = socket.socket(socket.AF_UNIX)
    say("fills backlog", res(lambda: c2.connect(path)))
    c3 = socket.socket(socket.AF_UNIX)
    settimeo(c3, SO_SNDTIMEO, 0, int(T * 1e6))
    say("connect", timed(lambda: c3.connect(path)))
    for s in (lst, c1, s1, c2, c3):
        s.close()

    # MSG_WAITALL.
    for ty in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM):
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        for i, piece in enumerate((b"ab", b"cd", b"ef")):
            later(0.05 * (i + 1), lambda p=piece: b.send(p))
        say(ty, "waitall pieces", res(lambda: a.recv(6, socket.MSG_WAITALL)))
        time.sleep(0.3)
        while res(lambda: a.recv(6, socket.MSG_DONTWAIT)) != "EAGAIN":
            pass
        if ty == socket.SOCK_STREAM:
            settimeo(a, SO_RCVTIMEO, 0, int(T * 1e6))
            b.send(b"12")
            say("waitall timeout", timed(lambda: a.recv(10, socket.MSG_WAITALL)))
            b.send(b"xy")
            later(0.1, b.close)
            say("waitall eof", res(lambda: a.recv(10, socket.MSG_WAITALL)))
        a.close()
        b.close()


main()
say("done")

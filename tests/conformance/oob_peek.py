"""MSG_PEEK, SO_PEEK_OFF and MSG_OOB through the socket API: run once on kernel
sockets and once through `udsfs run` (integration/oob_peek.sh); the two outputs
must be equal line by line. Usage: oob_peek.py DIR (DIR: where to bind names)."""

import fcntl
import os
import select
import signal
import socket
import struct
import sys
import termios
import threading

from differential import getopt, res, say, setopt, where

SIOCATMARK = 0x8905
FIOSETOWN = 0x8901
FIOGETOWN = 0x8903
SO_PEEK_OFF = 42
POLL = select.POLLIN | select.POLLPRI | select.POLLOUT | select.POLLHUP

urgent = []
signal.signal(signal.SIGURG, lambda *_: urgent.append(1))


def mark(s):
    return res(lambda: struct.unpack("i", fcntl.ioctl(s, SIOCATMARK, b"\0" * 4))[0])


def inq(s):
    return res(lambda: struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0])


def events(s):
    p = select.poll()
    p.register(s, POLL)
    got = p.poll(0)
    return got[0][1] if got else 0


def state(tag, s, show_inq=True):
    n = inq(s) if show_inq else "-"
    exc = bool(select.select([], [], [s], 0)[2])
    say(f"{tag}: mark={mark(s)} inq={n} poll={events(s):#x} except={exc} sigurg={len(urgent)}")
    urgent.clear()


def recv(s, n, flags=0):
    def f():
        data, _, mflags, _ = s.recvmsg(n, 0, flags)
        return f"{data!r} flags={mflags & (socket.MSG_OOB | socket.MSG_TRUNC):#x}"

    return res(f)


def peek_off(s):
    return getopt(s, SO_PEEK_OFF)


def oob_basics():
    a, b = socket.socketpair()
    b.setblocking(False)
    say("owner via F_SETOWN:", res(lambda: fcntl.fcntl(b, fcntl.F_SETOWN, os.getpid())))
    say("F_GETOWN is me:", fcntl.fcntl(b, fcntl.F_GETOWN) == os.getpid())
    say("send hello oob:", res(lambda: a.send(b"hello", socket.MSG_OOB)))
    state("after hello", b)
    say("peek oob:", recv(b, 1, socket.MSG_OOB | socket.MSG_PEEK))
    say("recv oob:", recv(b, 1, socket.MSG_OOB))
    state("after oob read", b)
    say("recv oob again:", recv(b, 1, socket.MSG_OOB))
    say("recv 10:", recv(b, 10))
    state("at mark", b)
    say("recv 10:", recv(b, 10))
    state("empty", b)
    say("send x oob:", res(lambda: a.send(b"x", socket.MSG_OOB)))
    say("send y oob:", res(lambda: a.send(b"y", socket.MSG_OOB)))
    state("two oob", b)
    say("recv 5:", recv(b, 5))
    state("after ex-oob", b)
    say("recv oob:", recv(b, 1, socket.MSG_OOB))
    say("send ab, cd oob, ef:", a.send(b"ab"), a.send(b"cd", socket.MSG_OOB), a.send(b"ef"))
    say("recv 10 drops the oob byte:", recv(b, 10), recv(b, 10))
    # Linux 6.18 leaves the dropped OOB byte counted in SIOCINQ (1 here);
    # udsfs counts what is readable (0): not compared.
    state("after drop", b, show_inq=False)
    say("empty oob send:", res(lambda: a.send(b"", socket.MSG_OOB)))
    say("recv oob on empty:", recv(b, 1, socket.MSG_OOB))
    # A send longer than one ioctl's room: the last byte is still the OOB byte.
    big = bytes(range(256)) * 160
    say("send 40960 oob:", res(lambda: a.send(big, socket.MSG_OOB)))
    got = b""
    while True:
        try:
            chunk = b.recv(65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        got += chunk
        if mark(b) == 1:
            break
    say("bytes before the mark:", len(got), got == big[:-1])
    say("oob byte:", recv(b, 1, socket.MSG_OOB), repr(big[-1:]))
    a.close()
    b.close()


def oob_inline_and_owner():
    a, b = socket.socketpair()
    b.setblocking(False)
    say("oobinline default:", b.getsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE))
    b.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 7)
    say("oobinline set 7:", b.getsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE))
    a.send(b"abc", socket.MSG_OOB)
    state("inline abc (no owner)", b)
    say("recv oob inline:", recv(b, 1, socket.MSG_OOB))
    say("peek 10:", recv(b, 10, socket.MSG_PEEK))
    say("recv 10:", recv(b, 10))
    state("inline at mark", b)
    say("recv 10:", recv(b, 10))
    state("inline empty", b)
    pid = struct.pack("i", os.getpid())
    say("FIOSETOWN:", res(lambda: fcntl.ioctl(b, FIOSETOWN, pid) and "ok"))
    say("FIOGETOWN is me:", struct.unpack("i", fcntl.ioctl(b, FIOGETOWN, b"\0" * 4))[0] == os.getpid())
    a.send(b"z", socket.MSG_OOB)
    state("owner by FIOSETOWN", b)
    fcntl.fcntl(b, fcntl.F_SETOWN, -os.getpgrp())
    a.send(b"q", socket.MSG_OOB)
    state("owner a process group", b)
    fcntl.fcntl(b, fcntl.F_SETOWN, 0)
    a.send(b"w", socket.MSG_OOB)
    state("no owner", b)
    say("shut rd, send oob:", b.shutdown(socket.SHUT_RD), res(lambda: a.send(b"v", socket.MSG_OOB | socket.MSG_NOSIGNAL)))
    for t, name in ((socket.SOCK_DGRAM, "dgram"), (socket.SOCK_SEQPACKET, "seqpacket")):
        c, d = socket.socketpair(socket.AF_UNIX, t)
        d.setblocking(False)
        say(name, "send oob:", res(lambda: c.send(b"ab", socket.MSG_OOB)))
        c.send(b"ab")
        say(name, "recv oob:", recv(d, 1, socket.MSG_OOB), "siocatmark:", mark(d))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(sys.argv[1], "oob.sock"))
    s.listen(1)
    say("listener recv oob:", recv(s, 1, socket.MSG_OOB), "siocatmark:", mark(s))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    say("unconnected send oob:", res(lambda: c.send(b"a", socket.MSG_OOB)))


def peek_offsets():
    for t, name in ((socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "dgram"), (socket.SOCK_SEQPACKET, "seqpacket")):
        c, d = socket.socketpair(socket.AF_UNIX, t)
        d.setblocking(False)
        say(name, "peek_off default:", peek_off(d))
        say(name, "set 0:", setopt(d, SO_PEEK_OFF, 0))
        c.send(b"abc")
        c.send(b"defg")
        for n in (2, 2, 10, 10):
            say(name, f"peek {n}:", recv(d, n, socket.MSG_PEEK), "off", peek_off(d))
        say(name, "recv 3:", recv(d, 3), "off", peek_off(d))
        say(name, "peek 10:", recv(d, 10, socket.MSG_PEEK), "off", peek_off(d))
        say(name, "peek 1 trunc:", recv(d, 1, socket.MSG_PEEK | socket.MSG_TRUNC), "off", peek_off(d))
        say(name, "recv 10:", recv(d, 10), "off", peek_off(d))
        say(name, "set -5:", setopt(d, SO_PEEK_OFF, -5), "off", peek_off(d))
        c.send(b"hij")
        say(name, "peek off disabled:", recv(d, 10, socket.MSG_PEEK), recv(d, 10, socket.MSG_PEEK), "off", peek_off(d))
        d.setsockopt(socket.SOL_SOCKET, SO_PEEK_OFF, 1)
        say(name, "peek from 1:", recv(d, 10, socket.MSG_PEEK), "off", peek_off(d))
        say(name, "recv 2:", recv(d, 2), "off", peek_off(d))
        say(name, "recv 10:", recv(d, 10), "off", peek_off(d))
        say(name, "peek empty:", recv(d, 10, socket.MSG_PEEK), "off", peek_off(d))
    # A blocking peek that finds nothing at its offset waits for more data.
    c, d = socket.socketpair()
    c.send(b"abc")
    d.setsockopt(socket.SOL_SOCKET, SO_PEEK_OFF, 3)
    t = threading.Timer(0.2, lambda: c.send(b"def"))
    t.start()
    say("blocking peek past the data:", recv(d, 10, socket.MSG_PEEK), "off", peek_off(d))
    t.join()
    # The peek offset and the OOB byte: a peek stops at it too.
    c, d = socket.socketpair()
    d.setblocking(False)
    d.setsockopt(socket.SOL_SOCKET, SO_PEEK_OFF, 0)
    c.send(b"hello", socket.MSG_OOB)
    c.send(b"world")
    for _ in range(3):
        say("oob stream peek 3:", recv(d, 3, socket.MSG_PEEK), "off", peek_off(d))
    say("recv 10:", recv(d, 10), "off", peek_off(d))
    say("recv 10:", recv(d, 10), "off", peek_off(d))


where()
oob_basics()
oob_inline_and_owner()
peek_offsets()
say("done")

"""SIGIO to the owner of a socket with O_ASYNC, per event and socket type: run
once on kernel sockets and once through `udsfs run` (integration/sigio.sh); the
two outputs must be equal line by line. Usage: sigio.py DIR (DIR: where to bind
names). SIGIO is blocked and taken with sigtimedwait after each event: a line
says whether the event gave one (a standard signal coalesces, so 0 or 1).
Each scenario (a socket's run of events) runs at once in a child of its own, in
a process group of its own, so their waits overlap: every SIGIO here goes to
that child or its group, so none can reach another scenario, and the lines are
said in the scenarios' order."""

import fcntl
import os
import signal
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "conformance"))
from differential import Child, fill, say, where  # noqa: E402

FIOASYNC = 0x5452
FIOSETOWN = 0x8901
SIOCSPGRP = 0x8902
F_SETOWN_EX = 15
DIR = sys.argv[1]
TYPES = (("stream", socket.SOCK_STREAM), ("seqpacket", socket.SOCK_SEQPACKET),
         ("dgram", socket.SOCK_DGRAM))

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO])
# A group of its own: SIGIO to the group (SIOCSPGRP) reaches no runner.
os.setpgid(0, 0)
lines = []  # this scenario's results (a child's: Child sends them back)


def report(*a):
    lines.append(" ".join(str(x) for x in a))


def sigio():
    """How many SIGIO the last event gave: the kernel's come at once, the
    daemon's soon after; none is awaited 0.5 s."""
    got = 0
    wait = 0.5
    while signal.sigtimedwait([signal.SIGIO], wait) is not None:
        got += 1
        wait = 0.2
    return got


def arm(s, how="fcntl"):
    if how == "fcntl":
        fcntl.fcntl(s, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_ASYNC)
    elif how == "ioctl":
        fcntl.ioctl(s, FIOSETOWN, struct.pack("i", os.getpid()))
        fcntl.ioctl(s, FIOASYNC, struct.pack("i", 1))
    elif how == "group":  # the process group, as SIOCSPGRP takes it
        fcntl.ioctl(s, SIOCSPGRP, struct.pack("i", -os.getpgrp()))
        fcntl.ioctl(s, FIOASYNC, struct.pack("i", 1))
    else:  # F_SETOWN_EX: F_OWNER_TID (1) of this thread, or F_OWNER_PGRP (2)
        kind, who = (1, threading.get_native_id()) if how == "tid" else (2, os.getpgrp())
        fcntl.fcntl(s, F_SETOWN_EX, struct.pack("ii", kind, who))
        fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_ASYNC)
    s.setblocking(False)


def event(name, what, f):
    f()
    report(name, what, "sigio", sigio())


def armed_pair(ty):
    """A new pair, its first end armed, the SIGIOs that gave let go by."""
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    arm(a)
    sigio()
    return a, b


def pair_sequence(name, ty):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    b.setblocking(False)
    arm(a)
    report(name, "armed", "sigio", sigio())
    event(name, "first message", lambda: b.send(b"x"))
    event(name, "second message, the first unread", lambda: b.send(b"y"))
    event(name, "reads one", lambda: a.recv(1))
    event(name, "reads the rest", lambda: a.recv(10))
    event(name, "own send", lambda: a.send(b"z"))
    event(name, "peer reads own send", lambda: b.recv(10))
    sent, _ = fill(a, b"q" * 1000)
    report(name, "own sends until EAGAIN", sent > 10, "sigio", sigio())
    got = 0
    try:
        while got < 5000:
            got += len(b.recv(1000))
    except BlockingIOError:
        pass
    report(name, "peer reads 5 of them", "sigio", sigio())
    def drain():
        try:
            while True:
                b.recv(100000)
        except BlockingIOError:
            pass
    event(name, "peer reads the rest", drain)
    event(name, "own send after room came back", lambda: a.send(b"q"))
    event(name, "peer reads it", drain)
    event(name, "peer shut rd", lambda: b.shutdown(socket.SHUT_RD))
    event(name, "peer shut wr", lambda: b.shutdown(socket.SHUT_WR))
    event(name, "peer close", b.close)
    a.close()


def pair_shut_rdwr(name, ty):
    a, b = armed_pair(ty)
    event(name, "peer shut rdwr", lambda: b.shutdown(socket.SHUT_RDWR))
    event(name, "then peer close", b.close)
    a.close()


def pair_close_first(name, ty):
    a, b = armed_pair(ty)
    event(name, "peer close, nothing before", b.close)
    a.close()


def pair_owner_by(name, ty, how):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    arm(a, how)
    event(name, f"owner by {how}: message", lambda: b.send(b"x"))
    fcntl.ioctl(a, FIOASYNC, struct.pack("i", 0))
    event(name, f"owner by {how}: FIOASYNC off, message", lambda: b.send(b"x"))
    a.close()
    b.close()


def pair_async_off(name, ty):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    arm(a)
    fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) & ~os.O_ASYNC)
    event(name, "O_ASYNC off: message", lambda: b.send(b"x"))
    fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) | os.O_ASYNC)
    fcntl.fcntl(a, fcntl.F_SETOWN, 0)
    event(name, "owner 0: message", lambda: b.send(b"x"))
    a.close()
    b.close()


def listener_events(name, ty):
    p = os.path.join(DIR, "l" + name)
    ls = socket.socket(socket.AF_UNIX, ty)
    ls.bind(p)
    ls.listen(5)
    arm(ls)
    c1 = socket.socket(socket.AF_UNIX, ty)
    event(name, "listener: connect", lambda: c1.connect(p))
    c2 = socket.socket(socket.AF_UNIX, ty)
    event(name, "listener: second connect", lambda: c2.connect(p))
    got = []
    event(name, "listener: accept", lambda: got.append(ls.accept()[0]))
    c3 = socket.socket(socket.AF_UNIX, ty)
    arm(c3)
    event(name, "client: its connect", lambda: c3.connect(p))
    event(name, "client: accepted", lambda: got.append(ls.accept()[0]))
    event(name, "client: server sends", lambda: got[-1].send(b"x"))
    for s in [c1, c2, c3, ls] + got:
        s.close()
    os.unlink(p)


def dgram_bound_events():
    p = os.path.join(DIR, "d")
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.bind(p)
    arm(a)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    event("dgram", "bound: sendto", lambda: c.sendto(b"x", p))
    event("dgram", "bound: another sendto", lambda: c.sendto(b"y", p))
    c.connect(p)
    event("dgram", "bound: connected sender sends", lambda: c.send(b"z"))
    event("dgram", "bound: connected sender closes", c.close)
    a.close()
    os.unlink(p)


def scenario(body, *args):
    """body(*args) started in a child of its own process group (SIGIO to the
    group, SIOCSPGRP's, reaches that child alone)."""
    def run(out):
        global lines
        lines = out
        os.setpgid(0, 0)
        body(*args)
    return Child(run)


where()
scenarios = []
for name, ty in TYPES:
    scenarios += [scenario(pair_sequence, name, ty), scenario(pair_shut_rdwr, name, ty),
                  scenario(pair_close_first, name, ty)]
    scenarios += [scenario(pair_owner_by, name, ty, how)
                  for how in ("ioctl", "group", "tid", "pgrp_ex")]
    scenarios.append(scenario(pair_async_off, name, ty))
    if ty != socket.SOCK_DGRAM:
        scenarios.append(scenario(listener_events, name, ty))
scenarios.append(scenario(dgram_bound_events))
for child in scenarios:
    child.say_lines()
say("done")

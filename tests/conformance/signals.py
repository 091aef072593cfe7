"""Signals on blocked socket calls: run once on kernel sockets and once through
`udsfs run` (integration/signals.sh); the outputs must be equal. Usage: signals.py
DIR (DIR: where to bind). The calls go through libc (ctypes) so that an EINTR is
seen as it is, not retried as Python's own socket methods do. Handlers set with C
calls (signal, sigaction, sysv_signal) are libc's getpid: async-signal-safe, and no
Python code runs in them."""

import ctypes
import errno
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from differential import say, where

libc = ctypes.CDLL(None, use_errno=True)
SO_RCVTIMEO = 20
SO_SNDTIMEO = 21
SA_SIGINFO = 4
SA_NODEFER = 0x40000000
SA_RESETHAND = 0x80000000
SA_RESTART = 0x10000000
SA_RESTORER = 0x04000000
# Long enough for a blocked call to be parked or asleep in the kernel.
SETTLE = 0.4


def call(f, *args):
    """A libc call's result: its value, or the errno name."""
    r = f(*args)
    if r < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return r


def handle(restart):
    signal.signal(signal.SIGUSR1, lambda *a: None)
    signal.siginterrupt(signal.SIGUSR1, not restart)


class SigAction(ctypes.Structure):
    """glibc's struct sigaction (x86-64 and arm64)."""
    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


GETPID = ctypes.cast(libc.getpid, ctypes.c_void_p).value
for f in (libc.signal, libc.sysv_signal):
    f.restype = ctypes.c_void_p
    f.argtypes = [ctypes.c_int, ctypes.c_void_p]


def c_signal():
    """glibc's signal(): SA_RESTART."""
    libc.signal(signal.SIGUSR1, GETPID)


def c_sysv_signal():
    """sysv_signal(): one-shot, no SA_RESTART."""
    libc.sysv_signal(signal.SIGUSR1, GETPID)


def c_signal_after_siginterrupt():
    """signal() after siginterrupt(sig, 1): no SA_RESTART (glibc keeps it)."""
    libc.siginterrupt(signal.SIGUSR1, 1)
    libc.signal(signal.SIGUSR1, GETPID)


def c_sigaction(flags):
    def install():
        a = SigAction()
        a.handler = GETPID
        a.flags = flags
        if libc.sigaction(signal.SIGUSR1, ctypes.byref(a), None) != 0:
            raise OSError(ctypes.get_errno(), "sigaction")

    return install


def reported_action():
    """What sigaction reports for SIGUSR1: the handler set, not a stand-in."""
    o = SigAction()
    libc.sigaction(signal.SIGUSR1, None, ctypes.byref(o))
    who = "getpid" if o.handler == GETPID else o.handler
    return f"{who} flags={o.flags & 0xffffffff:#x}"


def recv(s, n=16):
    buf = ctypes.create_string_buffer(n)
    return call(libc.recv, s.fileno(), buf, ctypes.c_size_t(n), 0)


def threads_blocked_in_recv(restart):
    """Four threads each in recv() on their own pair; a process-directed SIGUSR1
    that the main thread blocks: one thread is chosen to take it."""
    handle(restart)
    pairs = [socket.socketpair() for _ in range(4)]
    got = [None] * 4

    def run(i):
        got[i] = recv(pairs[i][0])

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    time.sleep(SETTLE)
    os.kill(os.getpid(), signal.SIGUSR1)
    time.sleep(SETTLE)
    for a, b in pairs:
        b.send(b"x")
    for t in ts:
        t.join()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    for a, b in pairs:
        a.close()
        b.close()
    return got.count("EINTR"), sorted(map(str, got))


def one_blocked(restart, op, prepare=None, install=None):
    """op() blocked in a second thread, which gets SIGUSR1 by pthread_kill;
    data arrives after the signal. What op returned. `install` sets the
    handler instead of Python's signal module."""
    if install:
        install()
    else:
        handle(restart)
    a, b = socket.socketpair()
    if prepare:
        prepare(a)
    out = []
    t = threading.Thread(target=lambda: out.append(op(a)))
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    time.sleep(SETTLE)
    b.send(b"late")
    t.join()
    a.close()
    b.close()
    return out[0]


def read(s, n=16):
    buf = ctypes.create_string_buffer(n)
    return call(libc.read, s.fileno(), buf, ctypes.c_size_t(n))


def rcvtimeo(sec):
    return lambda s: s.setsockopt(socket.SOL_SOCKET, SO_RCVTIMEO, struct.pack("qq", sec, 0))


def listener(path, backlog):
    """A stream socket listening at `path` (a node left by an earlier run is removed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(backlog)
    return srv


def accept_blocked(restart, d):
    """accept() on a listener nobody connects to, signalled; a client comes later."""
    handle(restart)
    path = os.path.join(d, f"sig-{int(restart)}.sock")
    srv = listener(path, 4)
    out = []

    def run():
        r = call(libc.accept, srv.fileno(), None, None)
        out.append("fd" if isinstance(r, int) and r >= 0 else r)
        if isinstance(r, int) and r >= 0:
            os.close(r)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    time.sleep(SETTLE)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    t.join()
    c.close()
    srv.close()
    os.unlink(path)
    return out[0]


def connect_blocked(d, restart=False):
    """connect() to a listener whose backlog is full, signalled; then the
    listener takes one connection, which makes room."""
    handle(restart)
    path = os.path.join(d, "sig-backlog.sock")
    srv = listener(path, 0)
    held = []
    # Fill the backlog: a listen(0) queue takes one; the next would block.
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(path)
            held.append(c)
        except BlockingIOError:
            c.close()
            break
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    addr = struct.pack("H", socket.AF_UNIX) + path.encode() + b"\0"
    out = []
    t = threading.Thread(target=lambda: out.append(call(libc.connect, c.fileno(), addr, len(addr))))
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    time.sleep(SETTLE)
    srv.accept()[0].close()
    t.join()
    for x in held + [c, srv]:
        x.close()
    os.unlink(path)
    return f"{out[0]} (backlog took {len(held)})"


def partial_send(restart=False):
    """A 4 MiB send() to a peer that never reads, signalled: the count queued
    (with SA_RESTART too: a send that queued part is not restarted)."""
    handle(restart)
    a, b = socket.socketpair()
    big = b"z" * (4 << 20)
    out = []
    t = threading.Thread(target=lambda: out.append(call(libc.send, a.fileno(), big, ctypes.c_size_t(len(big)), 0)))
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    t.join()
    n = out[0]
    a.close()
    b.close()
    return f"partial={isinstance(n, int) and 0 < n < len(big)}"


def send_blocked(restart, timeo=False):
    """A 100-byte send() on a stream whose peer's queue is full, signalled;
    then the peer reads everything."""
    handle(restart)
    a, b = socket.socketpair()
    if timeo:
        a.setsockopt(socket.SOL_SOCKET, SO_SNDTIMEO, struct.pack("qq", 30, 0))
    a.setblocking(False)
    try:
        while True:
            a.send(b"f" * 4096)
    except BlockingIOError:
        pass
    a.setblocking(True)
    out = []
    t = threading.Thread(target=lambda: out.append(call(libc.send, a.fileno(), b"x" * 100, ctypes.c_size_t(100), 0)))
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    time.sleep(SETTLE)
    b.setblocking(False)
    try:
        while True:
            if not b.recv(65536):
                break
    except BlockingIOError:
        pass
    t.join()
    a.close()
    b.close()
    return out[0]


def stopped_and_continued(prepare=None):
    """recv() in a child process that is stopped (SIGSTOP) and continued
    (SIGCONT) while no handler runs: Linux restarts the call, unless the socket
    has a receive timeout (then EINTR, as signal(7) says)."""
    a, b = socket.socketpair()
    if prepare:
        prepare(a)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, str(recv(a)).encode())
        finally:
            os._exit(0)
    time.sleep(SETTLE)
    os.kill(pid, signal.SIGSTOP)
    os.waitpid(pid, os.WUNTRACED)
    os.kill(pid, signal.SIGCONT)
    time.sleep(SETTLE)
    b.send(b"late")
    os.waitpid(pid, 0)
    os.close(w)
    out = os.read(r, 64).decode()
    os.close(r)
    a.close()
    b.close()
    return out


def handler_sees():
    """What a Python handler is told: the signal number (the C handler Python
    installs is called with it), after a subprocess started."""
    got = []
    signal.signal(signal.SIGUSR2, lambda n, f: got.append(n))
    # A child started meanwhile resets its handlers (Python's subprocess does
    # so in a vfork child, which shares the parent's memory until exec).
    subprocess.run(["true"], check=True)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR2)
    time.sleep(0.05)
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    return [signal.Signals(n).name for n in got]


def storm(seconds=3.0):
    """Four threads loop in blocking recv() while each gets SIGUSR1 every
    millisecond: many signals land while a request is still on its way to the
    daemon. A signal the daemon dropped then would leave its call blocked for
    good (the kernel interrupts a request once), so after the storm one more
    signal must end every thread's call. (Such a signal is rare: a dropped one
    showed up about once in 10 s of storm here.)"""
    handle(False)
    pairs = [socket.socketpair() for _ in range(4)]
    stop = threading.Event()
    ended = [threading.Event() for _ in pairs]

    def run(i):
        while not stop.is_set():
            recv(pairs[i][0])
        ended[i].set()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for t in ts:
            signal.pthread_kill(t.ident, signal.SIGUSR1)
        time.sleep(0.001)
    stop.set()
    time.sleep(SETTLE)
    for t in ts:
        if t.is_alive():
            signal.pthread_kill(t.ident, signal.SIGUSR1)
    stuck = sum(not e.wait(2) for e in ended)
    for a, b in pairs:
        b.send(b"x")
    for t in ts:
        t.join()
    for a, b in pairs:
        a.close()
        b.close()
    return stuck


def seqpacket_peek_truncated(restart):
    """A blocking seqpacket recvfrom(fd, NULL, 0, MSG_PEEK|MSG_TRUNC) in a second
    thread, signalled, then a record arrives: restarted, it returns the record's
    length; without SA_RESTART, EINTR."""
    handle(restart)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    flags = socket.MSG_PEEK | socket.MSG_TRUNC
    out = []
    t = threading.Thread(target=lambda: out.append(
        call(libc.recvfrom, a.fileno(), None, ctypes.c_size_t(0), flags, None, None)))
    t.start()
    time.sleep(SETTLE)
    signal.pthread_kill(t.ident, signal.SIGUSR1)
    time.sleep(SETTLE)
    b.send(b"late record")
    t.join()
    a.close()
    b.close()
    return out[0]


def main():
    where()
    d = sys.argv[1]
    say("threads, no SA_RESTART: EINTRs", *threads_blocked_in_recv(False))
    say("sa_restart threads: EINTRs", *threads_blocked_in_recv(True))
    say("recv, no SA_RESTART:", one_blocked(False, recv))
    say("sa_restart recv:", one_blocked(True, recv))
    say("read, no SA_RESTART:", one_blocked(False, read))
    say("sa_restart read:", one_blocked(True, read))
    # With a receive timeout the kernel answers EINTR even for SA_RESTART.
    say("recv with SO_RCVTIMEO, SA_RESTART:", one_blocked(True, recv, rcvtimeo(30)))
    say("read with SO_RCVTIMEO, no SA_RESTART:", one_blocked(False, read, rcvtimeo(30)))
    say("seqpacket peek, MSG_TRUNC, no buffer, no SA_RESTART:", seqpacket_peek_truncated(False))
    say("sa_restart seqpacket peek, MSG_TRUNC, no buffer:", seqpacket_peek_truncated(True))
    say("accept, no SA_RESTART:", accept_blocked(False, d))
    say("sa_restart accept:", accept_blocked(True, d))
    say("connect to a full backlog, no SA_RESTART:", connect_blocked(d))
    say("sa_restart connect to a full backlog:", connect_blocked(d, True))
    say("sa_restart send to a full queue:", send_blocked(True))
    say("send to a full queue, no SA_RESTART:", send_blocked(False))
    say("send with SO_SNDTIMEO, SA_RESTART:", send_blocked(True, True))
    say("send interrupted:", partial_send())
    say("sa_restart send interrupted:", partial_send(True))
    say("a Python handler is told:", *handler_sees())
    # Handlers set in C, as programs do: glibc's signal() sets SA_RESTART.
    say("sa_restart recv, signal():", one_blocked(True, recv, install=c_signal))
    say("sigaction reports after signal():", reported_action())
    say("sa_restart read, signal():", one_blocked(True, read, install=c_signal))
    say("recv, sysv_signal():", one_blocked(True, recv, install=c_sysv_signal))
    say("sigaction reports after sysv_signal's one shot:", reported_action())
    say("recv, sigaction without SA_RESTART:", one_blocked(True, recv, install=c_sigaction(0)))
    say("sigaction reports:", reported_action())
    sa = c_sigaction(SA_RESTART | SA_SIGINFO)
    say("sa_restart recv, sigaction SA_RESTART|SA_SIGINFO:", one_blocked(True, recv, install=sa))
    say("sigaction reports:", reported_action())
    say("recv with SO_RCVTIMEO, signal():", one_blocked(True, recv, rcvtimeo(30), install=c_signal))
    # Last: glibc keeps siginterrupt's choice for later signal() calls.
    say("recv, signal() after siginterrupt:", one_blocked(True, recv, install=c_signal_after_siginterrupt))
    say("sigaction reports:", reported_action())
    say("sa_restart recv stopped and continued:", stopped_and_continued())
    say("recv with SO_RCVTIMEO stopped and continued:", stopped_and_continued(rcvtimeo(30)))
    say("signal storm: calls left blocked", storm())
    say("done")


main()

#!/usr/bin/env python3
"""lanes.py CASE: one scenario on a stream socketpair, printing what it saw.

Run on kernel sockets and through `udsfs run` on a mount with --lanes
(integration/lanes.sh): the lines must be the same. Lines that start with
GUARD are udsfs's only (the socket's status file), and are left out of the
comparison; lanes.sh checks them itself."""

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import select
import signal
import socket
import struct
import sys
import termios
import threading
import time

from lanes_lib import BIG, epoll_around_send, fill_socket, guard, listener, peer, pingpong_rounds, read_available, recv_exact
from lanes_lib import recv_hashed, run_case, say, scribble_regions, send_odd_pieces

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conformance"))
from differential import blocked_send_with_file  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)


def pingpong():
    a, b = socket.socketpair()
    pid = peer(a, b, lambda b: os._exit(pingpong_rounds(b, 2000, False)))
    bad = pingpong_rounds(a, 2000, True, "pingpong mid-way")
    _, st = os.waitpid(pid, 0)
    say("pingpong 2000 round trips of 100 bytes, wrong:", bad, "child status:", st)
    say("after the child's close, recv:", a.recv(10))


def big():
    def sender(a):
        send_odd_pieces(a, BIG)
        a.close()

    a, b = socket.socketpair()
    pid = peer(b, a, sender)
    got, h = recv_hashed(b, "4 MiB transfer")
    os.waitpid(pid, 0)
    say("4 MiB transfer: got", got, "bytes, checksum ok:", h.digest() == hashlib.sha256(BIG).digest())
    say("EOF again:", b.recv(10))


def eagain():
    a, b = socket.socketpair()
    a.send(b"x")
    say("first:", b.recv(10))
    try:
        b.recv(10, socket.MSG_DONTWAIT)
    except BlockingIOError as e:
        say("MSG_DONTWAIT on empty:", e.errno == 11)
    fl = libc.fcntl(b.fileno(), 3, 0)  # F_GETFL
    libc.fcntl(b.fileno(), 4, fl | os.O_NONBLOCK)  # F_SETFL
    r = libc.read(b.fileno(), ctypes.create_string_buffer(10), 10)
    say("O_NONBLOCK read on empty:", r, os.strerror(ctypes.get_errno()))
    # Fill a's send side until EAGAIN.
    libc.fcntl(a.fileno(), 4, libc.fcntl(a.fileno(), 3, 0) | os.O_NONBLOCK)
    total = 0
    chunk = b"y" * 4096
    while True:
        r = libc.write(a.fileno(), chunk, len(chunk))
        if r < 0:
            break
        total += r
    say("filled until", os.strerror(ctypes.get_errno()), "wrote more than 64 KiB:", total > 65536)
    guard(a, "EAGAIN")
    drained = 0
    while True:
        r = libc.read(b.fileno(), ctypes.create_string_buffer(65536), 65536)
        if r <= 0:
            break
        drained += r
    say("drained all:", drained == total)


def rcvtimeo():
    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
    a.send(b"z")
    say("got:", b.recv(10))
    t = time.monotonic()
    try:
        b.recv(10)
        say("no timeout")
    except (BlockingIOError, TimeoutError, OSError) as e:
        dt = time.monotonic() - t
        say("SO_RCVTIMEO: errno", e.errno, "after at least 0.15 s:", dt >= 0.15, "within 5 s:", dt < 5)
    guard(b, "SO_RCVTIMEO")
    # The timeout bounds the whole MSG_WAITALL read, not each wait: fed 15000
    # bytes every 0.3 s, a 100000-byte read with 0.5 s gives up with what came
    # (the lane restarted the timeout per piece and read all 100000 in 3 s).
    c, d = socket.socketpair()
    d.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 500000))

    def feed():
        for _ in range(4):
            time.sleep(0.3)
            c.send(b"w" * 15000)

    feeder = threading.Thread(target=feed)
    feeder.start()
    t = time.monotonic()
    n = len(d.recv(100000, socket.MSG_WAITALL))
    say("MSG_WAITALL fed in pieces, cut by SO_RCVTIMEO:", 0 < n < 50000, "within 1.5 s:", time.monotonic() - t < 1.5)
    feeder.join()
    guard(d, "SO_RCVTIMEO MSG_WAITALL")


def handshaken(a, b, then):
    """`peer` whose child first trades a byte each way with `a` (both ends claim
    their lane) and then runs then(b); returns the child's pid once `a`'s side of
    the trade is done."""

    def child(b):
        b.send(b"1")
        b.recv(10)
        then(b)

    pid = peer(a, b, child)
    a.recv(10)
    a.send(b"2")
    return pid


def parted(pid, a):
    """The end of a case: `handshaken`'s child killed and reaped, `a` closed."""
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    a.close()


def passing_a_pipe(a, b, linger):
    """`handshaken` whose child, 0.3 s after the trade, sends 12 bytes with the read
    end of a pipe that holds "through the pipe" (SCM_RIGHTS: the lane goes down),
    then lingers `linger` s."""
    r, w = os.pipe()
    os.write(w, b"through the pipe")
    os.close(w)

    def then(b):
        time.sleep(0.3)
        b.sendmsg([b"x" * 12], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", r))])
        time.sleep(linger)

    pid = handshaken(a, b, then)
    os.close(r)
    return pid


def sndtimeo():
    """SO_SNDTIMEO bounds a wait for room from its first sleep, as Linux's one
    timeout per skb: a write asleep in a full ring whose lane goes down under it
    (at 1.2 s the reader passes a file, which takes the lane down) waits in the
    daemon only what is left, and a 2 s timeout ends at 2 s (it ended at 3.2 s:
    the daemon's wait began anew)."""
    a, b = socket.socketpair()
    # Set after a claim, a timeout takes the lane down (docs/LANE.md).
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 2, 0))

    def reader(b):
        time.sleep(1.2)
        r, w = os.pipe()
        socket.send_fds(b, [b"f"], [w])
        time.sleep(2)

    pid = handshaken(a, b, reader)
    filled = fill_socket(a)
    guard(a, "sndtimeo: a full ring")
    t = time.monotonic()
    try:
        a.send(b"y" * 100)
        say("sndtimeo: the write went")
    except BlockingIOError as e:
        dt = time.monotonic() - t
        say("sndtimeo: filled", filled, "then errno", e.errno, "after at least 1.5 s:", dt >= 1.5, "within 2.7 s:", dt < 2.7)
    os.waitpid(pid, 0)


def rcvtimeo_down():
    """SO_RCVTIMEO is one timeout for the whole receive (unix_stream_read_generic):
    a recv asleep in the ring whose lane goes down under it (at 1.2 s the writer asks
    SIOCOUTQ, which takes the lane down) waits in the daemon only what is left, and a
    2 s timeout ends at 2 s, a MSG_WAITALL one too, with the 10 bytes that came at
    0.3 s (they ended at 2.9 s and 3.2 s: the daemon's wait began anew)."""
    for flags in (0, socket.MSG_WAITALL):
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 2, 0))

        def writer(b):
            if flags:
                time.sleep(0.3)
                b.send(b"p" * 10)
            time.sleep(0.9 if flags else 1.2)
            fcntl.ioctl(b.fileno(), termios.TIOCOUTQ, b"\0" * 4)
            time.sleep(5)

        pid = handshaken(a, b, writer)
        guard(a, f"rcvtimeo_down {flags}: before the recv")
        t = time.monotonic()
        try:
            got = len(a.recv(100, flags))
        except BlockingIOError as e:
            got = errno.errorcode[e.errno]
        dt = time.monotonic() - t
        say("rcvtimeo_down flags", flags, "recv:", got, "after at least 1.5 s:", dt >= 1.5, "within 2.7 s:", dt < 2.7)
        parted(pid, a)


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class Msghdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(Iovec)),
        ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


def recvmsg_unnamed(s, n, room, flags):
    """recvmsg(2) as C programs make it (haproxy's): no msg_name (Python's
    socket.recvmsg always passes one), `room` bytes of control buffer. The bytes
    and the descriptors that came."""
    buf = ctypes.create_string_buffer(n)
    ctl = ctypes.create_string_buffer(room)
    iov = Iovec(ctypes.cast(buf, ctypes.c_void_p), n)
    m = Msghdr(None, 0, ctypes.pointer(iov), 1, ctypes.cast(ctl, ctypes.c_void_p), room, 0)
    r = libc.recvmsg(s.fileno(), ctypes.byref(m), flags)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    fds, off, raw = [], 0, ctl.raw[: m.controllen]
    while off + 16 <= len(raw):
        clen, level, kind = struct.unpack_from("Qii", raw, off)
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack_from(f"{(clen - 16) // 4}i", raw, off + 16)
        off += (clen + 7) & ~7
    return buf.raw[:r], fds


def rights_down():
    """A recvmsg with room for control messages and SO_RCVTIMEO, asleep in the ring,
    whose lane goes down under it because the peer sends a descriptor (SCM_RIGHTS takes
    the lane down): it gets the bytes and the descriptor, as haproxy's `-x` takes its
    listeners from the old process (a 1 s SO_RCVTIMEO, no msg_name). The lane once
    finished such a call with a plain receive through the daemon, without control room,
    which dropped the descriptor (haproxy: "expecting 2 got 0")."""
    for flags in (0, socket.MSG_WAITALL):
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 2, 0))
        pid = passing_a_pipe(a, b, 5)
        guard(a, f"rights_down {flags}: before the recvmsg")
        data, fds = recvmsg_unnamed(a, 12, socket.CMSG_SPACE(4 * 4), flags)
        say("rights_down flags", flags, "recvmsg:", len(data), "bytes,", len(fds), "descriptors")
        for fd in fds:
            say("rights_down flags", flags, "the descriptor reads:", os.read(fd, 100))
            os.close(fd)
        parted(pid, a)


def seq_timed(call):
    """`call()`, cut by an alarm at 8 s (a call that waits forever says so):
    what it gave (a length, or the errno's name) and how long it took."""
    t = time.monotonic()
    signal.alarm(8)
    try:
        got = call()
    except OSError as e:
        got = errno.errorcode.get(e.errno, str(e))
    finally:
        signal.alarm(0)
    return got, time.monotonic() - t


def seq_down():
    """A blocking seqpacket recv or send asleep in the ring whose lane goes down
    under it goes on through the daemon at once, as the stream case does, and
    keeps one timeout for the whole call, as unix_dgram_recvmsg's and
    sock_alloc_send_pskb's one timeo. A recv gets the record with SCM_RIGHTS
    that took the lane down as soon as it is queued, with a 5 s SO_RCVTIMEO and
    without one (and a recvmsg with control room, the daemon's from its
    start, gets the record with its descriptor); a send
    asleep in a full ring goes as soon as the reader, having sent a
    descriptor, drains it (SO_SNDTIMEO 5 s, and none). With a 1.5 s timeout
    and the lane taken down at 1.2 s by something that brings no record or
    room (SIOCOUTQ, a descriptor the other way), a recv and a send give EAGAIN
    at 1.5 s (they waited a whole timeout again in the daemon: 2.7 s). An
    alarm cuts each call at 8 s, so one that waits forever says so."""

    def hung(*_):
        raise TimeoutError("hung")

    signal.signal(signal.SIGALRM, hung)
    for timeo, room in ((5, False), (None, False), (5, True), (None, True)):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if timeo:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", timeo, 0))
        pid = passing_a_pipe(a, b, 10)
        what = f"seq_down recv timeo {timeo} control room {room}:"
        guard(a, f"{what} before the recv")
        fds = []

        def recv():
            if not room:
                return len(a.recv(100))
            data, got_fds = recvmsg_unnamed(a, 100, socket.CMSG_SPACE(4 * 4), 0)
            fds.extend(got_fds)
            return f"{len(data)} bytes, {len(got_fds)} descriptors"

        got, dt = seq_timed(recv)
        say(what, "got", got, "within 2 s:", dt < 2)
        for fd in fds:
            say(what, "the descriptor reads:", os.read(fd, 100))
            os.close(fd)
        parted(pid, a)
    for timeo in (5, None):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if timeo:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", timeo, 0))

        def reader(b):
            time.sleep(0.3)
            socket.send_fds(b, [b"f"], [os.pipe()[1]])
            time.sleep(0.2)
            with contextlib.suppress(BlockingIOError):
                while True:
                    b.recv(70000, socket.MSG_DONTWAIT)
            time.sleep(10)

        pid = handshaken(a, b, reader)
        filled = fill_socket(a, b"r" * 1000)
        what = f"seq_down send timeo {timeo}:"
        guard(a, f"{what} a full ring")
        got, dt = seq_timed(lambda: a.send(b"s" * 1000))
        say(what, "filled some:", filled > 0, "sent", got, "after at least 0.4 s:", dt >= 0.4, "within 2 s:", dt < 2)
        parted(pid, a)
    # One timeout for the call: the lane goes down at 1.2 s, nothing comes.
    for way in ("recv", "send"):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        opt = socket.SO_RCVTIMEO if way == "recv" else socket.SO_SNDTIMEO
        a.setsockopt(socket.SOL_SOCKET, opt, struct.pack("ll", 1, 500000))

        def downer(b):
            time.sleep(1.2)
            if way == "recv":
                fcntl.ioctl(b.fileno(), termios.TIOCOUTQ, b"\0" * 4)
            else:
                socket.send_fds(b, [b"f"], [os.pipe()[1]])
            time.sleep(10)

        pid = handshaken(a, b, downer)
        if way == "send":
            fill_socket(a, b"r" * 1000)
        what = f"seq_down {way} timeo 1.5 s, the lane down at 1.2 s:"
        guard(a, f"{what} before the {way}")
        call = (lambda: len(a.recv(100))) if way == "recv" else (lambda: a.send(b"s" * 1000))
        got, dt = seq_timed(call)
        say(what, "got", got, "after at least 1.3 s:", dt >= 1.3, "within 2.2 s:", dt < 2.2)
        parted(pid, a)


def waitall_down():
    """A stream recv with MSG_WAITALL under SO_RCVTIMEO asleep in the ring
    whose lane goes down after it copied bytes (SIOCOUTQ right after a send,
    so bytes may be in the ring then too) goes on through the daemon with the
    time left: every byte once, in order. With 1.2 s, bytes at 0.1 s and 0.9 s
    (the lane down then) and at 1 s, it returns those 40 at 1.2 s (a daemon
    wait begun anew would end at 2.1 s); with 3 s, 100000 bytes (several
    ioctls' worth) fed around the way down all come, well before 3 s. (A
    recvmsg with MSG_WAITALL is the daemon's from its start.)"""
    big = hashlib.sha256(b"waitall").digest() * 3125
    cases = (
        ("cut", 1.2, 100, [(0.1, b"A" * 10), (0.8, b"B" * 10), (0, None), (0.1, b"C" * 20)]),
        ("big", 3, len(big), [(0.1, big[:30000]), (0, None), (0.1, big[30000:50000]), (0.1, big[50000:])]),
    )
    for name, timeo, n, steps in cases:
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(timeo), int(timeo % 1 * 1e6)))

        def writer(b):
            for at, data in steps:
                time.sleep(at)
                if data is None:
                    fcntl.ioctl(b.fileno(), termios.TIOCOUTQ, b"\0" * 4)
                else:
                    b.sendall(data)
            time.sleep(10)

        pid = handshaken(a, b, writer)
        what = f"waitall_down {name}:"
        guard(a, f"{what} before the recv")
        t = time.monotonic()
        got = a.recv(n, socket.MSG_WAITALL)
        dt = time.monotonic() - t
        sent = b"".join(d for _, d in steps if d is not None)
        # cut ends at its timeout, big well before.
        in_time = timeo - 0.2 <= dt < timeo + 0.45 if name == "cut" else dt < timeo - 0.4
        say(what, "got", len(got), "the bytes sent, in order:", got == sent[: len(got)], "in time:", in_time)
        parted(pid, a)


def waitall_rejoin(d=None):
    """A MSG_WAITALL recv asleep in the ring after part of its bytes while
    another thread of the same process takes the lane down (SIOCOUTQ) and at
    once asks for the next one (a poll of the end): without a timeout the
    rest waited in the daemon, which the new lane's coming up kicked out
    (EINTR), and the program got the part alone (4 of 10 bytes, every
    time). Linux's MSG_WAITALL returns short only at a signal, the end or an
    error: every round must give all 10 bytes."""
    import tempfile

    short = []
    srv, path = listener(d or tempfile.mkdtemp(), "rejoin")
    for i in range(10):
        b = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        b.connect(path)
        a, _ = srv.accept()
        b.send(b"x")
        a.recv(1)
        a.send(b"y")
        b.recv(1)
        if i == 0:
            guard(a, "waitall_rejoin before the recv")
        got = []
        t = threading.Thread(target=lambda: got.append(a.recv(10, socket.MSG_WAITALL)), daemon=True)
        t.start()
        b.send(b"1234")
        time.sleep(0.05)
        fcntl.ioctl(a.fileno(), termios.TIOCOUTQ, b"\0" * 4)
        p = select.poll()
        p.register(a, select.POLLOUT)
        p.poll(100)
        time.sleep(0.05)
        b.send(b"567890")
        t.join(5)
        if got != [b"1234567890"]:
            short.append((i, got))
        a.close()
        b.close()
    say("waitall_rejoin: rounds short or wrong:", short)


def signals():
    for restart in (True, False):
        a, b = socket.socketpair()
        a.send(b"w")
        b.recv(1)  # the lane is claimed on both ends
        fired = []
        signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
        signal.siginterrupt(signal.SIGALRM, not restart)
        pid = os.fork()
        if pid == 0:
            b.close()
            time.sleep(0.6)
            a.send(b"hello")
            time.sleep(0.5)
            os._exit(0)
        signal.setitimer(signal.ITIMER_REAL, 0.15)
        buf = ctypes.create_string_buffer(10)
        r = libc.recv(b.fileno(), buf, 10, 0)
        e = ctypes.get_errno()
        if r < 0:
            say("SA_RESTART" if restart else "no SA_RESTART", ": recv", os.strerror(e))
            r = libc.recv(b.fileno(), buf, 10, 0)
        say("SA_RESTART" if restart else "no SA_RESTART", ": recv got", buf.raw[: max(r, 0)])
        os.waitpid(pid, 0)
        a.close()
        b.close()


def fork_end():
    a, b = socket.socketpair()
    a.send(b"1")  # this process claims end a
    say("b got:", b.recv(10))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        a.send(b"2")  # the child's a: not its lane: the daemon's
        os.write(w, b".")
        os._exit(0)
    os.read(r, 1)
    os.waitpid(pid, 0)
    a.send(b"3")
    time.sleep(0.05)
    got = b""
    while len(got) < 2:
        got += b.recv(10)
    say("after the fork, b got in order:", got)
    guard(a, "after a fork")


def pass_end():
    a, b = socket.socketpair()
    c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.send(b"one-")
    b.recv(0)
    say("peek-free: b has bytes")
    pid = os.fork()
    if pid == 0:
        a.close()
        c.close()
        msg, fds, _, _ = socket.recv_fds(d, 10, 1)
        nb = socket.socket(fileno=fds[0])
        got = b""
        while len(got) < 12:
            m = nb.recv(100)
            if not m:
                break
            got += m
        d.send(got)
        os._exit(0)
    d.close()
    socket.send_fds(c, [b"s"], [b.fileno()])
    b.close()
    a.send(b"two-")
    a.send(b"three")
    say("the receiver of b read in order:", c.recv(100))
    os.waitpid(pid, 0)


def blocked_fds():
    """A send with a file that must wait for room, after a lane's ring was
    filled (pass_fds.py's "blocked send with a file"): the file takes the
    lane down, the ring's bytes land in the daemon's queue, the send blocks
    until the reader drains them, then goes through whole (it hung: the
    reader's drain never woke the parked sender)."""
    a, b = socket.socketpair()
    say("blocked send with a file:", *blocked_send_with_file(a, b))


def epoll():
    """Readiness stays the daemon's: an epoll set registered before the
    first byte, and one registered on an end whose lane already carries
    bytes, each see the socket readable."""
    import select

    a, b = socket.socketpair()
    before, after = epoll_around_send(a, b)
    say("epoll before:", before)
    say("epoll after a send:", after)
    say("recv:", b.recv(10))
    c, d = socket.socketpair()
    c.send(b"x")
    say("d got:", d.recv(1))
    c.send(b"y")
    guard(d, "before epoll")
    ep2 = select.epoll()
    ep2.register(d.fileno(), select.EPOLLIN)
    say("epoll on a laned end with a byte:", [(fd == d.fileno(), ev) for fd, ev in ep2.poll(1)])
    r, _, _ = select.select([d], [], [], 1)
    say("select:", len(r), "recv:", d.recv(1))


def many():
    """6000 pairs made by 20 processes, each holding its 300 until it ends
    (laned or, past a bound, not): every pair carries its bytes."""
    kids = []
    for k in range(20):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            pairs = [socket.socketpair() for _ in range(300)]
            good = 0
            for i, (a, b) in enumerate(pairs):
                a.send(b"%d" % i)
                good += b.recv(10) == b"%d" % i
            os.write(w, b"%d" % good)
            time.sleep(0.5)
            os._exit(0)
        os.close(w)
        kids.append((pid, r))
    total = 0
    for pid, r in kids:
        total += int(os.read(r, 10) or b"0")
    for pid, _ in kids:
        os.waitpid(pid, 0)
    say("6000 pairs, bytes right on:", total)


def observed():
    """A capture opened while a lane carries bytes sees the next message
    (the lane goes down, its bytes drained through the taps)."""
    mnt = os.environ["MNT"]
    a, b = socket.socketpair()
    a.send(b"before")
    say("b got:", b.recv(100))
    guard(b, "before the capture")
    cap = os.open(mnt + "/.udsfs/capture", os.O_RDONLY | os.O_NONBLOCK)
    a.send(b"SEEN-BY-CAPTURE")
    say("b got:", b.recv(100))
    time.sleep(0.2)
    got = read_available(cap)
    say("the capture saw the message:", b"SEEN-BY-CAPTURE" in got)
    guard(b, "after the capture")
    os.close(cap)


def scribble():
    """The peer overwrites the whole region in its own mapping (udsfs only)."""
    a, b = socket.socketpair()
    a.send(b"x")
    b.recv(1)
    # This process's own mapping (the memory the peer shares). A forked
    # child no longer has one to write over: its library lets go of the
    # ends it inherited claimed, and the region is unmapped in it
    # (docs/LANE.md "Giving a lane back").
    say("regions scribbled over:", scribble_regions() > 0)
    t = time.monotonic()
    try:
        b.settimeout(None)
        libc.fcntl(b.fileno(), 4, libc.fcntl(b.fileno(), 3, 0) | os.O_NONBLOCK)
        m = b.recv(10)
        say("recv after the scribble:", m)
    except OSError as e:
        say("recv after the scribble:", os.strerror(e.errno))
    try:
        a.send(b"more")
        say("send after the scribble: ok")
    except OSError as e:
        say("send after the scribble:", os.strerror(e.errno))
    say("within 10 s:", time.monotonic() - t < 10)


def sockopts():
    """getsockopt of what a lane does not change, on ends whose lane carries
    bytes (dbus asks SO_PEERCRED and SO_PEERPIDFD after its first byte):
    the answers as the kernel's, and the lane stays (it went down at each:
    Op::Info and Op::PeerPidfd took a claimed lane down)."""
    a, b = socket.socketpair()
    pingpong_pair(a, b)
    guard(a, "sockopts before")
    for name, opt in [("SO_TYPE", socket.SO_TYPE), ("SO_ACCEPTCONN", socket.SO_ACCEPTCONN),
                      ("SO_PASSCRED", socket.SO_PASSCRED)]:
        say(name, a.getsockopt(socket.SOL_SOCKET, opt))
    pid, uid, gid = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    say("SO_PEERCRED is this process:", (pid, uid, gid) == (os.getpid(), os.getuid(), os.getgid()))
    say("SO_SNDBUF > 0:", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) > 0)
    try:
        pidfd = a.getsockopt(socket.SOL_SOCKET, 77)  # SO_PEERPIDFD (Linux 6.5)
        os.close(pidfd)
        say("SO_PEERPIDFD: a pidfd")
    except OSError as e:
        say("SO_PEERPIDFD:", errno.errorcode[e.errno])
    pingpong_pair(a, b)
    guard(a, "sockopts after")
    guard(b, "sockopts after, the peer")
    a.close()
    b.close()


def pingpong_pair(a, b):
    for i in range(3):
        a.send(b"ping %d" % i)
        b.send(b.recv(10))
        say("round", i, a.recv(10))


def fionread(d=None):
    """FIONREAD (SIOCINQ) and SIOCOUTQ on each end of a connection, read
    with recv and with read (nginx reads with recv and, when the buffer
    came back full, asks FIONREAD how much more waits): empty, with bytes
    queued, after a part is read, after all is read, after the peer's
    SHUT_WR; a socketpair and an accepted connection; and on the listener."""
    import fcntl
    import tempfile
    import termios

    def q(s):
        out = []
        for req in (termios.FIONREAD, termios.TIOCOUTQ):
            try:
                out.append(struct.unpack("i", fcntl.ioctl(s.fileno(), req, b"\0" * 4))[0])
            except OSError as e:
                out.append(os.strerror(e.errno))
        # The same through syscall(2), past the library's wrapper (under
        # `udsfs run` the supervisor answers it): it must say the same.
        for req in (termios.FIONREAD, termios.TIOCOUTQ):
            n = ctypes.c_int(-7)
            r = libc.syscall(16, s.fileno(), ctypes.c_ulong(req), ctypes.byref(n))  # SYS_ioctl
            raw = n.value if r == 0 else os.strerror(ctypes.get_errno())
            ours = out[len(out) - 2] if req == termios.FIONREAD else out[len(out) - 1]
            if raw != ours:
                out.append("syscall(SYS_ioctl, %#x) said %s" % (req, raw))
        # SIOCOUTQ is the kernel's skb charges: only whether any is queued compares.
        return "inq=%s outq>0=%s%s" % (
            out[0], out[1] if isinstance(out[1], str) else out[1] > 0, "".join(" " + x for x in out[2:])
        )

    def steps(name, a, b):
        say(name, "empty: a", q(a), "b", q(b))
        a.send(b"x" * 1000)
        say(name, "1000 queued: a", q(a), "b", q(b))
        say(name, "recv 100:", len(b.recv(100)), "b", q(b))
        say(name, "read 100:", len(os.read(b.fileno(), 100)), "b", q(b))
        say(name, "recv 800 (full):", len(b.recv(800)), "a", q(a), "b", q(b))
        guard(b, name + " after a full recv")
        a.send(b"y" * 5000)
        b.send(b"z" * 3)
        say(name, "both ways: a", q(a), "b", q(b))
        say(name, "read 5000:", len(os.read(b.fileno(), 5000)), "b", q(b))
        say(name, "a recv:", a.recv(10), "a", q(a))
        a.send(b"w" * 70)
        a.shutdown(socket.SHUT_WR)
        say(name, "70 then SHUT_WR: a", q(a), "b", q(b))
        say(name, "recv 70:", len(b.recv(70)), "b", q(b), "eof:", b.recv(10))
        a.close()
        say(name, "after the peer's close: b", q(b))
        b.close()

    steps("pair", *socket.socketpair())
    # The first question on ends whose lane already carries bytes: what
    # waits in the ring counts.
    a, b = socket.socketpair()
    a.send(b"1")
    say("laned: b got", b.recv(10))
    b.send(b"2")
    say("laned: a got", a.recv(10))
    guard(b, "laned before FIONREAD")
    a.send(b"v" * 3000)
    b.send(b"u" * 7)
    time.sleep(0.05)
    say("laned 3000 and 7 in the rings: a", q(a), "b", q(b))
    guard(b, "laned after FIONREAD")
    say("laned: b got", len(b.recv(5000)), "a got", a.recv(10), "a", q(a), "b", q(b))
    a.close()
    b.close()
    # FIONREAD alone on a stream is the ring's to answer: the lane stays
    # (Postfix asks it before each read; through the daemon it took the lane
    # down). A seqpacket socket's sums its records (the daemon's answer).
    for ty, sends in ((socket.SOCK_STREAM, (b"t" * 1234, b"u" * 66)), (socket.SOCK_SEQPACKET, (b"r" * 5, b"s" * 9))):
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        a.send(b"1")
        b.recv(10)
        b.send(b"2")
        a.recv(10)
        for m in sends:
            a.send(m)
        time.sleep(0.05)
        n = struct.unpack("i", fcntl.ioctl(b.fileno(), termios.FIONREAD, b"\0" * 4))[0]
        say("FIONREAD alone, type", ty, "after sends of", [len(m) for m in sends], ":", n)
        guard(b, "after FIONREAD alone type %d" % ty)
        say("then recv:", len(b.recv(5000)), "FIONREAD:", struct.unpack("i", fcntl.ioctl(b.fileno(), termios.FIONREAD, b"\0" * 4))[0])
        a.close()
        b.close()
    d = d or tempfile.mkdtemp()
    srv, path = listener(d, "fionread.sock")
    say("listener:", q(srv))
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    say("listener with one waiting:", q(srv))
    s, _ = srv.accept()
    steps("accepted", c, s)
    srv.close()


if __name__ == "__main__":
    run_case(
        pingpong, big, eagain, rcvtimeo, rcvtimeo_down, rights_down, seq_down, waitall_down, waitall_rejoin, sndtimeo, signals, fork_end, pass_end, blocked_fds, epoll, observed, many,
        scribble, fionread, sockopts,
    )

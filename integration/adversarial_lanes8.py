#!/usr/bin/env python3
"""adversarial_lanes8.py: the peer of a laned connection (another process of
another user, uid 65534) takes the lane down and asks for another, again and
again, while the victim waits for its bytes in poll, ppoll, select or epoll
(level, EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE, two sets, a nested set,
three threads in one set). integration/adversarial_lanes8.sh runs each case on
kernel sockets and through `udsfs run` (lanes_compare): the lines must be the
same.

  python3 adversarial_lanes8.py MODE DIR      the victim (MODE: a wait below)
  python3 adversarial_lanes8.py attacker PATH ROUNDS MODE  (the victim starts it)

Each round the attacker takes the lane down and up a few ways (SIOCOUTQ and a
poll of its end; the same through a dup of its end; a forked child holding the
end does it; SO_PASSCRED on its end in the last rounds; one round 1000 times
as fast as it can), sleeps a little (the victim is asleep by then), sends the
round's bytes and waits for the victim's 1-byte answer. The victim counts a
wait that said "readable" while FIONREAD said 0 with no EOF (spurious), bytes
that came late or not at all (missed: each wait ends within 5 s), and its CPU
and memory. Then the attacker storms for 0.2 s and sends nothing for 0.7 s:
the victim's 0.5 s wait must report nothing and take no CPU. A second
connection (the attacker's reconnect) goes the same way in the same sets for
a few cases (`conns`), then the attacker shuts its writing down: the victim
must see the end. "late" MODs its one-shot 0.3 s after each answer (after the
peer's way down and ask); "threads" and "threads_up" (no bounces but the
quiet storm) wait in three threads on one one-shot set."""

import array
import ctypes
import fcntl
import os
import select
import socket
import subprocess
import sys
import termios
import threading
import time

from lanes_lib import guard, listener, recv_exact, say

ROUNDS = 8
ATTACKER_UID = 65534
SHORT, STORM = 3, 1000
MODES = ["poll", "ppoll", "select", "epoll", "et", "oneshot", "late", "excl", "two_sets", "nested", "threads", "threads_up"]


def conns(mode):
    """The connections a case makes one after another (the attacker's
    reconnect: the next end in the same sets): two for a few, to keep the
    run short."""
    return 2 if mode in ("epoll", "late", "threads") else 1


def nread(s):
    n = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, n)
    return n[0]


def outq(fd):
    n = array.array("i", [0])
    fcntl.ioctl(fd, termios.TIOCOUTQ, n)
    return n[0]


def ask(fd):
    """A poll of fd (the library asks for a lane again)."""
    p = select.poll()
    p.register(fd, select.POLLOUT)
    p.poll(0)


def down_up(c, kind, pause=0.0):
    """One way down and up of c's lane, of the given kind; pause: a sleep
    between the two (the victim's wait sees each)."""
    if kind == "outq":
        outq(c.fileno())
        time.sleep(pause)
        ask(c.fileno())
    elif kind == "dup":
        d = os.dup(c.fileno())
        outq(d)
        time.sleep(pause)
        ask(d)
        os.close(d)
    elif kind == "fork":
        pid = os.fork()
        if pid == 0:
            outq(c.fileno())
            time.sleep(pause)
            ask(c.fileno())
            os._exit(0)
        os.waitpid(pid, 0)


def attacker(path, rounds, mode):
    """Connects to the victim at path; per round: ways down and up, a sleep,
    the round's bytes, the victim's answer; then the quiet storm; then again
    on a second connection, whose writing it shuts down at the end."""
    rounds = int(rounds)
    for conn in range(conns(mode)):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        for i in range(rounds):
            # A connection gets 3 lanes: one way down and up a round while it
            # has them, each with the victim asleep at the way down and at
            # the rejoin; then the ways through the daemon, fast.
            if mode == "threads_up":
                pass  # (the first lane's coming up only)
            elif i in (1, 2, 3):
                down_up(c, ["outq", "dup", "outq"][i - 1], pause=0.05)
            elif i == 4:
                down_up(c, "fork", pause=0.05)
            elif i == 5:
                for _ in range(STORM):
                    down_up(c, "outq")
            elif i == rounds * 3 // 4:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            elif i > 5:
                for k in range(SHORT):
                    down_up(c, ["outq", "dup", "fork"][(i + k) % 3])
            # Round 2's bytes come 1 s after the rejoin: the victim sleeps on the
            # new lane meanwhile (its CPU is looked at). "late"'s rounds 1 and 3
            # too: its MOD finds the lane down and the next one up, no bytes.
            time.sleep(0.5 if i == 2 or (mode == "late" and i in (1, 3)) else 0.02)
            guard(c, "attacker %d round %d" % (conn, i))
            c.sendall(b"%d.%02d;" % (conn, i))
            if recv_exact(c, 1) != b"k":
                sys.exit("attacker: no answer in round %d" % i)
        # The quiet storm: ways down and up, no bytes.
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            down_up(c, "outq")
        time.sleep(0.5)
        c.sendall(b"end")
        if recv_exact(c, 1) != b"k":
            sys.exit("attacker: no answer after the quiet")
        if conn < conns(mode) - 1:
            c.close()
        else:
            c.shutdown(socket.SHUT_WR)
            recv_exact(c, 1)
            c.close()


class Pollfd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


LIBC = ctypes.CDLL(None, use_errno=True)


class Waiter:
    """The victim's way of waiting for its end s to be readable."""

    def __init__(self, mode, s):
        self.mode, self.s, self.turn = mode, s, 0
        self.sets = []
        if mode in ("epoll", "et", "oneshot", "late", "excl", "threads", "threads_up"):
            self.sets = [select.epoll()]
            self.sets[0].register(s, select.EPOLLIN | self.flags())
        elif mode == "two_sets":
            self.sets = [select.epoll(), select.epoll()]
            for ep in self.sets:
                ep.register(s, select.EPOLLIN)
        elif mode == "nested":
            inner, outer = select.epoll(), select.epoll()
            inner.register(s, select.EPOLLIN)
            outer.register(inner.fileno(), select.EPOLLIN)
            self.sets = [outer, inner]

    def wait(self, timeout):
        """True if the wait said s is readable within timeout seconds."""
        m, fd = self.mode, self.s.fileno()
        if m == "poll":
            p = select.poll()
            p.register(fd, select.POLLIN)
            return any(ev & select.POLLIN for _, ev in p.poll(int(timeout * 1000)))
        if m == "ppoll":
            pfd = Pollfd(fd, select.POLLIN, 0)
            ts = Timespec(int(timeout), int((timeout % 1) * 1e9))
            r = LIBC.ppoll(ctypes.byref(pfd), 1, ctypes.byref(ts), None)
            return r == 1 and pfd.revents & select.POLLIN != 0
        if m == "select":
            return select.select([fd], [], [], timeout)[0] == [fd]
        if m == "nested":
            if not self.sets[0].poll(timeout):
                return False
            return any(ev & select.EPOLLIN for _, ev in self.sets[1].poll(0))
        ep = self.sets[self.turn % len(self.sets)]
        self.turn += 1
        return any(f == fd and ev & select.EPOLLIN for f, ev in ep.poll(timeout))

    def flags(self):
        flags = {"et": select.EPOLLET, "excl": select.EPOLLEXCLUSIVE}
        one = ("oneshot", "late", "threads", "threads_up")
        return select.EPOLLONESHOT if self.mode in one else flags.get(self.mode, 0)

    def rearm(self, late=False):
        """A one-shot armed again (MOD); "late"'s only when late is True:
        0.3 s after its answer, when the lane went down and came up."""
        if self.mode in ("oneshot", "threads", "threads_up") or (self.mode == "late" and late):
            self.sets[0].modify(self.s, select.EPOLLIN | select.EPOLLONESHOT)

    def renew(self, s):
        """The next connection's end in the same sets (the old one closed)."""
        for ep in self.sets[1:] if self.mode == "nested" else self.sets:
            ep.unregister(self.s)
        self.s = s
        for ep in self.sets[1:] if self.mode == "nested" else self.sets:
            ep.register(s, select.EPOLLIN | self.flags())


class Tally:
    def __init__(self):
        self.got, self.spurious, self.missed, self.lock = b"", 0, 0, threading.Lock()


def nothing_to_read(s):
    """True if s has no bytes and no EOF (a "readable" then was spurious)."""
    if nread(s):
        return False
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True


def take(w, s, want, t, budget=5.0):
    """Waits (w) until want's bytes came on s, reading each time the wait
    says readable; counts spurious "readable"s and a deadline missed."""
    deadline = time.monotonic() + budget
    got = b""
    while len(got) < len(want):
        left = deadline - time.monotonic()
        if left <= 0:
            t.missed += 1
            break
        if not w.wait(left):
            continue
        if nothing_to_read(s):
            t.spurious += 1
            w.rearm()
            if t.spurious > 50:
                break
            continue
        got += s.recv(max(nread(s), 1))
        w.rearm()
    t.got += got
    return got


def cpu_ticks():
    with open("/proc/self/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return int(st[11]) + int(st[12])


def rss_kib():
    with open("/proc/self/status") as f:
        return int([l for l in f if l.startswith("VmRSS:")][0].split()[1])


def victim_threads(w, s, conn, t):
    """Three threads wait in one EPOLLONESHOT set; the one woken reads and
    answers, then re-arms."""
    want = b"".join(b"%d.%02d;" % (conn, i) for i in range(ROUNDS)) + b"end"
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            evs = w.sets[0].poll(0.5)
            if not evs:
                continue
            with t.lock:
                if t.got.endswith(want):
                    return
                if nothing_to_read(s):
                    t.spurious += 1
                else:
                    m = s.recv(nread(s))
                    t.got += m
                    if b";" in m:
                        guard(s, "victim %d round %d" % (conn, t.got.count(b";") - 1))
                    s.send(b"k" * (m.count(b";") + m.count(b"end")))
                w.rearm()

    ths = [threading.Thread(target=worker) for _ in range(3)]
    for th in ths:
        th.start()
    deadline = time.monotonic() + 30
    while not t.got.endswith(want) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for th in ths:
        th.join()
    t.missed = int(not t.got.endswith(want))
    w.rearm()


def victim(mode, d):
    srv, path = listener(d, "l8-" + mode)
    os.chmod(path, 0o777)
    me = os.path.realpath(__file__)
    who = ["setpriv", "--reuid", str(ATTACKER_UID), "--regid", str(ATTACKER_UID), "--clear-groups"]
    att = subprocess.Popen(who + [sys.executable, me, "attacker", path, str(ROUNDS), mode])
    w = None
    for conn in range(conns(mode)):
        a, _ = srv.accept()
        if w is None:
            w = Waiter(mode, a)
        else:
            w.renew(a)
        t = Tally()
        rss0 = rss_kib()
        if mode.startswith("threads"):
            victim_threads(w, a, conn, t)
            quiet, cpu_ok, slept_ok = [], True, True
        else:
            for i in range(ROUNDS):
                c0 = cpu_ticks()
                take(w, a, b"%d.%02d;" % (conn, i), t)
                if i == 2:
                    slept_ok = cpu_ticks() - c0 < 10
                guard(a, "victim %d round %d" % (conn, i))
                a.send(b"k")
                if mode == "late":
                    # The MOD after the peer's way down and up (its registration
                    # still on the old lane until this call).
                    time.sleep(0.3)
                    w.rearm(late=True)
            # The quiet storm: the 1 s wait must report nothing, on no CPU.
            c0 = cpu_ticks()
            quiet = [w.wait(0.5)]
            cpu_ok = cpu_ticks() - c0 < 10
            take(w, a, b"end", t)
            a.send(b"k")
            w.rearm(late=True)
        grew = rss_kib() - rss0
        say(mode, "connection", conn, "bytes right:", t.got.endswith(b"end"), "missed:", t.missed,
            "spurious:", t.spurious, "quiet wait said:", quiet, "cpu ok:", cpu_ok, slept_ok, "rss ok:", grew < 4096)
        if grew >= 4096:
            say("rss grew by", grew, "KiB")
        guard(a, mode + " connection %d" % conn)
        if conn == conns(mode) - 1:
            # The attacker's SHUT_WR: the end seen (readable, no bytes, EOF).
            r = w.wait(5)
            say(mode, "end seen:", r, a.recv(10))
            a.send(b"k")
        else:
            # (Its close: read to EOF so the next connection's waits start clean.)
            w.wait(5)
            a.recv(10)
    att.wait()
    say(mode, "attacker status:", att.returncode)


if __name__ == "__main__":
    if sys.argv[1] == "attacker":
        attacker(*sys.argv[2:])
    else:
        victim(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""lanes_services.py CASE DIR: a service's connection, made by connect() and
accept() (a name bound in DIR), whose two ends wait as services do (redis,
PostgreSQL's backend: epoll; libpq: poll) and register in epoll or poll
before their lane can be up: the client's first request is sent before the
server accepts, so each end is polled through the daemon first.

Then a request/reply exchange of random sizes both ways (a seeded model:
each side's sizes and bytes come from its own random.Random), nonblocking,
every wait in the end's epoll set (level, EPOLLET drained to EAGAIN, or
EPOLLONESHOT re-armed with MOD), poll() or select(). Each side prints the
SHA-256 of what it sent and what it received, and the counts: kernel
sockets and `udsfs run` on a --lanes mount must print the same lines
(integration/lanes_services.sh). Lines that start with GUARD are udsfs's
only: the socket's status file (lane=direct once the lane is up), read by
each end after the first rounds and at the end.

CASES: name -> (the server's wait, the client's wait)."""

import hashlib
import os
import random
import select
import socket
import struct
import sys
import time

from lanes_lib import guard, listener, say

CASES = {
    "epoll_level": ("level", "level"),
    "epoll_edge_poll": ("edge", "poll"),
    "oneshot_select": ("oneshot", "select"),
}
ROUNDS = 300
GUARD_AT = 40


class Waiter:
    """Waits for readiness of one socket the way `how` says."""

    def __init__(self, s, how):
        self.s, self.how = s, how
        self.fd = s.fileno()
        if how in ("level", "edge", "oneshot"):
            self.ep = select.epoll()
            flags = {"level": 0, "edge": select.EPOLLET, "oneshot": select.EPOLLONESHOT}[how]
            self.flags = flags
            self.ep.register(self.fd, select.EPOLLIN | select.EPOLLOUT | flags)
            self.mask = select.EPOLLIN | select.EPOLLOUT
        elif how == "poll":
            self.p = select.poll()
            self.p.register(self.fd, select.POLLIN)

    def want(self, out):
        """Waits until the socket is readable (out False) or writable."""
        if self.how == "level" or self.how == "oneshot":
            m = select.EPOLLOUT if out else select.EPOLLIN
            if self.mask != m or self.how == "oneshot":
                self.ep.modify(self.fd, m | self.flags)
                self.mask = m
            evs = self.ep.poll(10)
            if not any(ev & (m | select.EPOLLERR | select.EPOLLHUP) for _, ev in evs):
                raise TimeoutError(f"epoll ({self.how}) woke with {evs} waiting for {m}")
        elif self.how == "edge":
            # Registered for both: the caller tries its call first and
            # sleeps only after EAGAIN, until the next edge of either
            # (a missed one is 10 s of nothing: a failure).
            if not self.ep.poll(10):
                raise TimeoutError("epoll (edge) missed an edge")
        elif self.how == "poll":
            self.p.modify(self.fd, select.POLLOUT if out else select.POLLIN)
            if not self.p.poll(10000):
                raise TimeoutError("poll missed a wake-up")
        else:
            r, w, _ = select.select([] if out else [self.s], [self.s] if out else [], [], 10)
            assert r or w, "select timed out"


def send_all(s, w, data):
    at = 0
    while at < len(data):
        try:
            at += s.send(data[at : at + 65536])
        except BlockingIOError:
            w.want(True)


def recv_n(s, w, n):
    out = bytearray()
    while len(out) < n:
        try:
            b = s.recv(min(n - len(out), 65536))
        except BlockingIOError:
            w.want(False)
            continue
        if not b:
            raise EOFError(f"EOF after {len(out)} of {n} bytes")
        out += b
    return bytes(out)


def sizes(rng):
    """A size: mostly small (a service's requests), now and then past a ring."""
    r = rng.random()
    if r < 0.7:
        return rng.randint(1, 200)
    if r < 0.95:
        return rng.randint(200, 20000)
    return rng.randint(20000, 300000)


def serve(s, how, seed):
    s.setblocking(False)
    w = Waiter(s, how)
    # Polled through the daemon before the lane: the request is queued.
    p = select.poll()
    p.register(s.fileno(), select.POLLIN)
    assert p.poll(10000), "the first request never came"
    rng = random.Random(seed)
    got, sent = hashlib.sha256(), hashlib.sha256()
    nin = nout = 0
    for i in range(ROUNDS):
        n = struct.unpack("<I", recv_n(s, w, 4))[0]
        req = recv_n(s, w, n)
        got.update(req)
        nin += n
        m = sizes(rng)
        body = rng.randbytes(m)
        send_all(s, w, struct.pack("<I", m) + body)
        sent.update(body)
        nout += m
        if i == GUARD_AT:
            guard(s, "server early")
    # The client has the last reply now: were it to close its end before
    # this look (a close takes the lane down, lane=none), a server slowed by
    # load would see none. The pause makes that order likely; the client
    # waits for the byte after it (`ask`) so that it cannot happen.
    time.sleep(0.3)
    guard(s, "server end")
    send_all(s, w, b"!")
    # Said after the client's line (main): one order on every run.
    return f"server got {nin} {got.hexdigest()[:16]} sent {nout} {sent.hexdigest()[:16]}"


def ask(s, how, seed):
    s.setblocking(False)
    rng = random.Random(seed)
    got, sent = hashlib.sha256(), hashlib.sha256()
    nin = nout = 0
    w = None
    for i in range(ROUNDS):
        n = sizes(rng)
        body = rng.randbytes(n)
        if w is None:
            # The first request before any wait: queued before the accept.
            s.send(struct.pack("<I", n))
            w = Waiter(s, how)
            send_all(s, w, body)
        else:
            send_all(s, w, struct.pack("<I", n) + body)
        sent.update(body)
        nout += n
        m = struct.unpack("<I", recv_n(s, w, 4))[0]
        rep = recv_n(s, w, m)
        got.update(rep)
        nin += m
        if i == GUARD_AT:
            guard(s, "client early")
    guard(s, "client end")
    # The server's "looked at my status" (`serve`): only then close.
    assert recv_n(s, w, 1) == b"!", "no last byte"
    say("client sent", nout, sent.hexdigest()[:16], "got", nin, got.hexdigest()[:16])


def main():
    case, d = sys.argv[1], sys.argv[2]
    server_how, client_how = CASES[case]
    srv, path = listener(d, "svc-" + case)
    pid = os.fork()
    if pid == 0:
        try:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            ask(c, client_how, 1)
            c.close()
            os._exit(0)
        except BaseException as e:  # noqa: BLE001
            print("client:", repr(e), file=sys.stderr, flush=True)
            os._exit(1)
    # The client's first bytes wait in the queue before the accept.
    time.sleep(0.2)
    a, _ = srv.accept()
    line = serve(a, server_how, 2)
    _, st = os.waitpid(pid, 0)
    a.close()
    say(line)
    say("client exit", os.waitstatus_to_exitcode(st))


if __name__ == "__main__":
    main()

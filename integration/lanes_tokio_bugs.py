#!/usr/bin/env python3
"""lanes_tokio_bugs.py CASE: the two lane bugs tokio's own tests found
(integration/run_tokio_tests.sh), without tokio, printing what it saw.

Run on kernel sockets and through `udsfs run` on a mount with --lanes
(integration/lanes_tokio_bugs.sh): the lines must be the same. GUARD lines
(the socket's status file) are udsfs's only."""

import os
import select
import socket
import sys

from lanes_lib import guard, run_case, say

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "conformance"))
from differential import res  # noqa: E402

IN, OUT, ET = select.EPOLLIN, select.EPOLLOUT, select.EPOLLET


def laned_pair():
    """A socketpair with a byte each way (both ends claim the lane)."""
    a, b = socket.socketpair()
    a.send(b"x")
    b.recv(1)
    b.send(b"y")
    a.recv(1)
    return a, b


def epoll_dup():
    """mio's way: registrations through a dup of the epoll descriptor, the
    wait on the original (and on a second dup); modify and unregister
    through the original."""
    a, b = laned_pair()
    b.setblocking(False)
    ep = select.epoll()
    reg = select.epoll.fromfd(os.dup(ep.fileno()))
    reg.register(b.fileno(), IN | OUT | ET)
    show = lambda e: [(fd == b.fileno(), ev) for fd, ev in e.poll(1)]
    say("registered through a dup, waited on the original:", show(ep))
    say("again (edge: nothing new):", show(ep))
    a.send(b"z")
    say("after a byte:", show(ep))
    third = select.epoll.fromfd(os.dup(ep.fileno()))
    a.send(b"w")
    say("after another, waited on a second dup:", show(third))
    say("registered twice through the original:", res(lambda: ep.register(b.fileno(), IN)))
    ep.modify(b.fileno(), IN)
    say("modified to level EPOLLIN through the original:", show(ep), show(reg))
    b.recv(16)
    say("drained:", show(ep))
    ep.unregister(b.fileno())
    a.send(b"v")
    say("unregistered through the original, a byte:", show(ep), show(reg))
    reg.register(b.fileno(), IN)
    say("registered again through the dup, waited on the original:", show(ep))
    b.recv(16)
    say("drained:", show(ep), show(third))
    guard(b, "epoll_dup b")
    reg.close()
    ep.close()
    third.close()


def recv_now(s):
    try:
        return s.recv(1)
    except BlockingIOError:
        return "EAGAIN"


def polled(s):
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLRDHUP)
    return [ev for _, ev in p.poll(0)]


def eof_after_close():
    """close() of one end of a laned nonblocking pair: the peer reads EOF
    and sees POLLHUP at once (Linux), not EAGAIN until the daemon's
    RELEASE. While a dup or a forked child keeps the end open, no EOF."""
    for i in range(20):
        a, b = laned_pair()
        a.setblocking(False)
        b.setblocking(False)
        if i == 0:
            guard(b, "eof_after_close b")
        a.close()
        got = recv_now(b)
        if i == 0 or got != b"":
            say("round", i, "peer's read right after close:", got, "poll:", polled(b))
        b.close()
    say("20 rounds")
    # A dup keeps the socket open: no EOF until the dup is closed too.
    a, b = laned_pair()
    b.setblocking(False)
    d = os.dup(a.fileno())
    a.close()
    say("a dup left: peer reads", recv_now(b), "poll:", polled(b))
    os.write(d, b"q")
    say("the dup writes: peer reads", recv_now(b))
    os.close(d)
    say("the dup closed: peer reads", recv_now(b), "poll:", polled(b))
    b.close()
    # A forked child keeps the end open: the parent's close is no EOF.
    a, b = laned_pair()
    b.setblocking(False)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        a.send(b"c")
        os._exit(0)
    os.close(r)
    a.close()
    say("a child holds it: peer reads", recv_now(b), "poll:", polled(b))
    os.write(w, b"go")
    os.close(w)
    os.waitpid(pid, 0)
    b.setblocking(True)
    say("the child wrote and exited: peer reads", b.recv(1), b.recv(1))
    b.close()


run_case(epoll_dup, eof_after_close)

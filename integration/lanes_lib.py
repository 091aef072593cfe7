"""lanes_lib.py: what the fast-lane scenario programs share (lanes.py,
lanes_ready.py, lanes_connect.py, adversarial_lanes.sh's programs,
run_checks.py): printing a line, the status file's lane= word, reading a
whole message, draining a nonblocking descriptor, an epoll set around a send,
and a forked peer on one end of a pair.

Not a test itself. A program in this folder imports it as it is (Python puts
the program's folder first on sys.path); a script that copies a program
elsewhere (into $TMP, to run it as another user) copies this file beside it."""

import os
import select
import sys
import traceback


def say(*a):
    """One line in one write: two processes print at once (print writes a
    line in pieces, which another process's line can split)."""
    os.write(1, (" ".join(str(x) for x in a) + "\n").encode())


def lane_of(s):
    """The status file's lane= line of socket s ("lane=direct", "lane=none"),
    or None where s is no udsfs socket (a kernel run)."""
    try:
        link = os.readlink(f"/proc/self/fd/{s.fileno()}")
    except OSError:
        return None
    if "/.udsfs/sock/" not in link:
        return None
    with open(os.path.join(os.path.dirname(link), "status")) as f:
        lane = [l.strip() for l in f if l.startswith("lane=")]
    return lane[0] if lane else "lane=?"


def guard(s, what):
    """Says `GUARD what lane=...` for a udsfs socket s, nothing for a kernel
    one: the scripts leave GUARD lines out of the kernel comparison and check
    them themselves."""
    lane = lane_of(s)
    if lane is not None:
        say("GUARD", what, lane)


def recv_exact(s, n):
    """n bytes from stream socket s, or fewer where it reached EOF first."""
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            break
        out += b
    return out


def read_available(fd):
    """Everything nonblocking descriptor fd (a capture) has now: it reads
    until EAGAIN or EOF."""
    got = b""
    while True:
        try:
            m = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not m:
            break
        got += m
    return got


def epoll_around_send(a, b, data=b"ready"):
    """An epoll set holding b (EPOLLIN), registered before a sends data: what
    it reports before the send, and after it as [(is b, events)]."""
    ep = select.epoll()
    ep.register(b.fileno(), select.EPOLLIN)
    before = ep.poll(0)
    a.send(data)
    after = [(fd == b.fileno(), ev) for fd, ev in ep.poll(1)]
    ep.close()
    return before, after


def peer(a, b, child):
    """Forks a child that closes end a and runs child(b), then exits (status 0,
    or 1 with the traceback on stderr if child raised); the parent closes b.
    Returns the child's pid."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            a.close()
            child(b)
        except BaseException:
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            code = 1
        finally:
            os._exit(code)
    b.close()
    return pid

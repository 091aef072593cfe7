"""lanes_lib.py: what the fast-lane scenario programs share (lanes.py,
lanes_ready.py, lanes_connect.py, lanes_services.py, adversarial_lanes.sh's
programs, run_checks.py): printing a line, the status file's lane= word, a
listener at a path, reading a whole message, draining a nonblocking descriptor, an epoll set around a send,
and a forked peer on one end of a pair.

Not a test itself. A program in this folder imports it as it is (Python puts
the program's folder first on sys.path); a script that copies a program
elsewhere (into $TMP, to run it as another user) copies this file beside it."""

import contextlib
import hashlib
import os
import select
import socket
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


def listener(d, name, ty=socket.SOCK_STREAM):
    """A socket of type ty listening (backlog 8) at d/name, a node an
    earlier run left there removed first; and its path."""
    path = os.path.join(d, name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, ty)
    srv.bind(path)
    srv.listen(8)
    return srv, path


def fill_socket(s, chunk=b"x" * 4096):
    """Sends `chunk` on `s` with MSG_DONTWAIT until EAGAIN: the bytes that went."""
    filled = 0
    while True:
        try:
            filled += s.send(chunk, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return filled


def recv_exact(s, n):
    """n bytes from stream socket s, or fewer where it reached EOF first."""
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            break
        out += b
    return out


def pingpong_rounds(s, n, first, mid=None, wait=None):
    """n round trips of 100 bytes on s. `first`: this end sends first and
    checks each echo (reversed), returning how many went wrong; else it echoes
    each 100 bytes reversed, returning 0, or 1 where the bytes came short, or
    2 where `wait` said no (it stops there). `wait`, where given, is called
    before each read: True if s became readable. `mid`: the guard line read
    half way."""
    bad = 0
    for i in range(n):
        m = bytes((i + j) % 256 for j in range(100))
        if first:
            s.sendall(m)
            if wait and not wait():
                bad += 1
            if recv_exact(s, 100) != m[::-1]:
                bad += 1
        else:
            if wait and not wait():
                return 2
            got = recv_exact(s, 100)
            if len(got) != 100:
                return 1
            s.sendall(got[::-1])
        if mid and i == n // 2:
            guard(s, mid)
    return bad


# The 4 MiB the transfer cases send, and its checksum.
BIG = hashlib.sha256(b"seed").digest() * (4 * 1024 * 1024 // 32)


def send_odd_pieces(s, data):
    """Sends data on s in pieces of odd sizes (1 to 65536 bytes, none a
    ring's or a page's multiple)."""
    off, k = 0, 1
    while off < len(data):
        n = min(len(data) - off, 1 + (k * 7919) % 65536)
        s.sendall(data[off : off + n])
        off += n
        k += 1


def recv_hashed(s, what):
    """Reads s to EOF: (how many bytes, their sha256). Its guard line, `what`,
    is read once 1 MiB has come: mid-transfer."""
    h = hashlib.sha256()
    got = 0
    while True:
        m = s.recv(70000)
        if not m:
            break
        if got < 1 << 20 <= got + len(m):
            guard(s, what)
        got += len(m)
        h.update(m)
    return got, h


def scribble_regions():
    """Writes 0xa5 over every lane region mapped in this process (through
    /proc/self/mem, as a buggy or hostile peer would): how many there were."""
    regions = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "udsfs-lane" in line:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                regions.append((lo, hi))
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        for lo, hi in regions:
            mem.seek(lo)
            mem.write(b"\xa5" * (hi - lo))
    return len(regions)


def run_case(*cases):
    """Runs the case sys.argv[1] names, of the functions given, with the rest
    of the arguments."""
    named = {f.__name__: f for f in cases}
    named[sys.argv[1]](*sys.argv[2:])


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

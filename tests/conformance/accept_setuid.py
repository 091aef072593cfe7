"""accept after the process dropped its uid (issue 29): a server listens as
root, then its worker becomes nobody (as php-fpm's pool and nginx's workers
do) and accepts on the listener it inherited. On Linux the descriptor is all
accept needs. Run on kernel sockets and through `udsfs run` with each front
(integration/accept_after_setuid.sh); the outputs must be equal line by line.
Also: accept4 with no queued connection (EAGAIN), a blocking accept woken by
a later connect, RLIMIT_NOFILE with no free slot (EMFILE, the connection
left queued) and one free slot, a forked child's accept, accept on sockets
that are not listening. Needs root.
Usage: accept_setuid.py DIR (where to bind names)."""

import os
import resource
import socket
import sys
import time

from differential import Child, become, res, say, where

DIR = os.path.realpath(sys.argv[1])
NOBODY = 65534
TYPES = [("stream", socket.SOCK_STREAM), ("seqpacket", socket.SOCK_SEQPACKET)]


def lowest_free_fd():
    fd = os.dup(0)
    os.close(fd)
    return fd


def worker(l, name, ty, ready_w):
    """The dropped worker's part: its results, one per line."""
    out = []
    become(NOBODY)
    out.append(f"{name}: uid now {os.getuid()}")

    def got(s):
        data = s.recv(16).decode()
        s.send(b"ack:" + data.encode())
        return data

    # Queued before the drop: the connection the root parent made first.
    c, _ = l.accept()
    out.append(f"{name}: accept of a queued connection as nobody: {got(c)}")
    out.append(f"{name}: the accepted socket's name: {os.path.basename(c.getsockname())}")
    c.close()
    # Nothing queued now.
    l.setblocking(False)
    out.append(f"{name}: accept4 NONBLOCK with nothing queued: {res(lambda: l.accept())}")
    l.setblocking(True)
    # A blocking accept, woken by a connect made afterwards.
    os.write(ready_w, b"b")
    c, _ = l.accept()
    out.append(f"{name}: blocking accept woken as nobody: {got(c)}")
    c.close()
    # RLIMIT_NOFILE: no free slot, then one (two connections queued).
    os.write(ready_w, b"r")
    time.sleep(0.3)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    k = lowest_free_fd()
    resource.setrlimit(resource.RLIMIT_NOFILE, (k, hard))
    out.append(f"{name}: accept with no free slot: {res(lambda: l.accept())}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (k + 1, hard))
    c = None

    def one_slot():
        nonlocal c
        c, _ = l.accept()
        return c.fileno() == k

    out.append(f"{name}: accept with one slot, in that slot: {res(one_slot)}")
    out.append(f"{name}: and its connection: {got(c)}")
    c.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    c, _ = l.accept()
    out.append(f"{name}: the next one stayed queued: {got(c)}")
    c.close()
    # A forked child of the worker accepts on the listener it inherited.
    os.write(ready_w, b"f")
    pid = os.fork()
    if pid == 0:
        c, _ = l.accept()
        c.send(b"ack:" + c.recv(16))
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    out.append(f"{name}: a forked child of the worker accepted: status {st}")
    # Sockets that are not listening.
    s = socket.socket(socket.AF_UNIX, ty)
    out.append(f"{name}: accept on an unbound socket: {res(lambda: s.accept())}")
    s.close()
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    out.append(f"{name}: accept on a dgram socket: {res(lambda: d.accept())}")
    d.close()
    return out


def client(path, ty, msg):
    c = socket.socket(socket.AF_UNIX, ty)
    c.connect(path)
    c.send(msg)
    return c


def run(name, ty):
    path = os.path.join(DIR, f"{name}.sock")
    l = socket.socket(socket.AF_UNIX, ty)
    l.bind(path)
    l.listen(8)
    first = client(path, ty, b"one")
    r, w = os.pipe()

    def work(out):
        os.close(r)
        out.extend(worker(l, name, ty, w))

    child = Child(work, broke=lambda e: f"{name}: worker failed: {e!r}")
    os.close(w)
    l.close()
    first.settimeout(5)
    answers = [res(lambda: first.recv(16).decode())]
    keep = []
    while True:
        step = os.read(r, 1)
        if not step:
            break
        if step == b"b":
            time.sleep(0.3)
            keep.append(client(path, ty, b"two"))
        elif step == b"r":
            keep.append(client(path, ty, b"three"))
            keep.append(client(path, ty, b"four"))
        elif step == b"f":
            keep.append(client(path, ty, b"five"))
    child.say_lines()
    for c in keep:
        c.settimeout(5)
        answers.append(res(lambda c=c: c.recv(16).decode()))
    say(f"{name}: the clients heard: {' '.join(answers)}")
    first.close()
    for c in keep:
        c.close()


where()
for name, ty in TYPES:
    run(name, ty)
say("done")

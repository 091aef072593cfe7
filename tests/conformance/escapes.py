"""What programs did that escaped the preload library (issue 29 items 2 and 3),
as Linux answers it: epoll registrations made before the connect, bind or
sendto that turns a kernel socket into a udsfs one (the same events, data and
flags after it); FIOASYNC, O_ASYNC and F_SETOWN; every stat entry point of the
C library on a socket; link and linkat of a routed socket, then connect
through the new name; remove(); SO_PEERGROUPS. Run once on kernel sockets and
once through `udsfs run --route ROUTE` (integration/escapes.sh); the outputs
must be equal line by line. Needs root (setgroups).
Usage: escapes.py DIR ROUTE (DIR: where to bind names; ROUTE: a kernel
directory, routed into the mount in the udsfs run)."""

import ctypes
import fcntl
import os
import socket
import stat
import struct
import sys
import termios

from differential import res, say, where

DIR = os.path.realpath(sys.argv[1])
ROUTE = os.path.realpath(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)

EPOLLIN, EPOLLOUT, EPOLLONESHOT, EPOLLET = 0x1, 0x4, 1 << 30, 1 << 31
SO_PEERGROUPS = 59
FIOASYNC = 0x5452


class EpollEvent(ctypes.Structure):
    _pack_ = 1  # x86_64's struct epoll_event is packed
    _fields_ = [("events", ctypes.c_uint32), ("data", ctypes.c_uint64)]


def errname(r):
    if r >= 0:
        return "ok"
    import errno

    return errno.errorcode[ctypes.get_errno()]


def ep_ctl(ep, op, fd, events, data):
    ev = EpollEvent(events, data)
    return errname(libc.epoll_ctl(ep, op, fd, ctypes.byref(ev)))


def ep_wait(ep, ms=2000):
    evs = (EpollEvent * 8)()
    n = libc.epoll_wait(ep, evs, 8, ms)
    return [(hex(evs[i].events), hex(evs[i].data)) for i in range(max(n, 0))]


def listener(path, ty=socket.SOCK_STREAM):
    if os.path.lexists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, ty)
    s.bind(path)
    if ty != socket.SOCK_DGRAM:
        s.listen()
    return s


def epoll_before_connect():
    srv = listener(os.path.join(DIR, "ep.sock"))
    for flags, name in [(0, "level"), (EPOLLET, "edge"), (EPOLLONESHOT, "oneshot")]:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ep, ep2 = libc.epoll_create1(0), libc.epoll_create1(0)
        say(name, "add before connect:", ep_ctl(ep, 1, c.fileno(), EPOLLIN | flags, 0x1234_5678_9ABC_DEF0))
        say(name, "add to a second set:", ep_ctl(ep2, 1, c.fileno(), EPOLLIN | EPOLLOUT, 7))
        say(name, "connect:", res(lambda: c.connect(srv.getsockname())))
        a, _ = srv.accept()
        say(name, "nothing to read yet:", ep_wait(ep, 0))
        a.send(b"reply")
        say(name, "after the reply:", ep_wait(ep))
        say(name, "second set:", ep_wait(ep2))
        say(name, "again (oneshot: disarmed; edge: no new edge):", ep_wait(ep, 100) if flags else "-")
        a.send(b"more")
        say(name, "after more:", ep_wait(ep, 300))
        say(name, "mod:", ep_ctl(ep, 3, c.fileno(), EPOLLIN, 9), ep_wait(ep, 300))
        say(name, "read:", c.recv(100))
        for f in (ep, ep2):
            os.close(f)
        a.close()
        c.close()
    srv.close()


def epoll_before_bind_and_sendto():
    path = os.path.join(DIR, "epd.sock")
    if os.path.lexists(path):
        os.unlink(path)
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ep = libc.epoll_create1(0)
    say("dgram add before bind:", ep_ctl(ep, 1, d.fileno(), EPOLLIN, 42))
    say("dgram bind:", res(lambda: d.bind(path)))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ep2 = libc.epoll_create1(0)
    say("sender add before sendto:", ep_ctl(ep2, 1, s.fileno(), EPOLLIN | EPOLLOUT, 43))
    say("sendto:", res(lambda: s.sendto(b"x", path)))
    say("bound socket sees it:", ep_wait(ep))
    say("sender writable:", ep_wait(ep2))
    for f in (ep, ep2):
        os.close(f)
    d.close()
    s.close()


def async_and_owner():
    a, b = socket.socketpair()
    fd = a.fileno()
    getfl = lambda: bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ASYNC)
    say("O_ASYNC at first:", getfl())
    say("FIOASYNC on:", res(lambda: fcntl.ioctl(fd, FIOASYNC, struct.pack("i", 1))) != "ENOTTY", getfl())
    say("FIOASYNC off:", res(lambda: fcntl.ioctl(fd, FIOASYNC, struct.pack("i", 0))) != "ENOTTY", getfl())
    say("F_SETFL O_ASYNC:", res(lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)), getfl())
    say("F_SETOWN:", res(lambda: fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())),
        fcntl.fcntl(fd, fcntl.F_GETOWN) == os.getpid())
    a.close()
    b.close()
    # Set on a kernel socket before its connect: still there after it.
    srv = listener(os.path.join(DIR, "async.sock"))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fcntl.fcntl(c.fileno(), fcntl.F_SETFL, os.O_ASYNC)
    fcntl.fcntl(c.fileno(), fcntl.F_SETOWN, os.getpid())
    c.connect(srv.getsockname())
    say("after connect: O_ASYNC", bool(fcntl.fcntl(c.fileno(), fcntl.F_GETFL) & os.O_ASYNC),
        "owner kept", fcntl.fcntl(c.fileno(), fcntl.F_GETOWN) == os.getpid())
    c.close()
    srv.close()


def stat_entry_points():
    a, b = socket.socketpair()
    fd = a.fileno()
    proc = f"/proc/self/fd/{fd}".encode()
    buf = ctypes.create_string_buffer(256)

    def mode():
        return stat.S_IFMT(struct.unpack_from("I", buf.raw, 24)[0])

    calls = {
        "fstat": lambda: libc.fstat(fd, buf),
        "fstat64": lambda: libc.fstat64(fd, buf),
        "__fxstat": lambda: libc.__fxstat(1, fd, buf),
        "__fxstat64": lambda: libc.__fxstat64(1, fd, buf),
        "stat /proc/self/fd/N": lambda: libc.stat(proc, buf),
        "stat64 /proc/self/fd/N": lambda: libc.stat64(proc, buf),
        "__xstat /proc/self/fd/N": lambda: libc.__xstat(1, proc, buf),
        "__xstat64 /proc/self/fd/N": lambda: libc.__xstat64(1, proc, buf),
        "fstatat AT_EMPTY_PATH": lambda: libc.fstatat(fd, b"", buf, 0x1000),
        "__fxstatat64 AT_EMPTY_PATH": lambda: libc.__fxstatat64(1, fd, b"", buf, 0x1000),
    }
    for name, call in calls.items():
        r = call()
        say(name, errname(r), "S_IFSOCK" if r == 0 and mode() == stat.S_IFSOCK else oct(mode()))
    say("os.fstat:", stat.S_ISSOCK(os.fstat(fd).st_mode))
    a.close()
    b.close()


def connects(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    r = res(lambda: c.connect(path))
    c.close()
    return r


def links():
    for where_, base in [("mount", DIR), ("route", ROUTE)]:
        a, b, c = (os.path.join(base, n) for n in ("l1.sock", "l1.sock.9", "l2.sock"))
        srv = listener(b)
        say(where_, "link:", res(lambda: os.link(b, a, follow_symlinks=False)))
        say(where_, "connect through the new name:", connects(a))
        say(where_, "lstat of the new name a socket:", stat.S_ISSOCK(os.lstat(a).st_mode))
        say(where_, "unlink the old name:", res(lambda: os.unlink(b)))
        say(where_, "connect through the new name after:", connects(a), "old:", connects(b))
        say(where_, "link over an existing name:", res(lambda: os.link(a, a, follow_symlinks=False)))
        say(where_, "linkat AT_SYMLINK_FOLLOW:", res(lambda: os.link(a, c)), connects(c))
        say(where_, "link into a missing directory:",
            res(lambda: os.link(a, os.path.join(base, "nodir", "x"), follow_symlinks=False)))
        srv.close()
        say(where_, "after close:", connects(a), connects(c))
        for p in (a, c):
            os.unlink(p)
        say(where_, "names left:", sorted(n for n in os.listdir(base) if n.startswith("l")))


def remove():
    for where_, base in [("mount", DIR), ("route", ROUTE)]:
        p = os.path.join(base, "rm.sock")
        srv = listener(p)
        libc.remove.argtypes = [ctypes.c_char_p]
        say(where_, "remove():", errname(libc.remove(p.encode())), os.path.lexists(p))
        say(where_, "connect after remove:", connects(p))
        s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        say(where_, "bind the name again:", res(lambda: s2.bind(p)))
        s2.close()
        srv.close()
        os.unlink(p)
        d = os.path.join(base, "rmdir")
        os.mkdir(d)
        s3 = listener(os.path.join(d, "x.sock"))
        s3.close()
        say(where_, "remove() of a non-empty directory:", errname(libc.remove(d.encode())))
        os.unlink(os.path.join(d, "x.sock"))
        say(where_, "remove() of the emptied directory:", errname(libc.remove(d.encode())),
            os.path.lexists(d))
        s4 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        os.mkdir(d)
        say(where_, "bind below it made again:", res(lambda: s4.bind(os.path.join(d, "x.sock"))))
        s4.close()
        os.unlink(os.path.join(d, "x.sock"))
        os.rmdir(d)


def groups_of(s, n=1024):
    raw = s.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, n)
    return sorted(struct.unpack(f"{len(raw) // 4}I", raw))


def refused_quietly():
    """Options Linux refuses too: the same errno, and no line on stderr (the
    runner fails on any)."""
    a, b = socket.socketpair()
    say("getsockopt SO_PEERSEC:", res(lambda: a.getsockopt(socket.SOL_SOCKET, 31, 256)))
    for name, n in [("SO_TYPE", 3), ("SO_ERROR", 4), ("SO_PEERCRED", 17), ("SO_ACCEPTCONN", 30),
                    ("SO_PEERSEC", 31), ("SO_PEERGROUPS", 59), ("SO_DOMAIN", 39), ("SO_COOKIE", 57)]:
        say("setsockopt", name, res(lambda: a.setsockopt(socket.SOL_SOCKET, n, 1)))
    a.close()
    b.close()


def peergroups():
    os.setgroups([4, 24, 27])
    a, b = socket.socketpair()
    say("socketpair SO_PEERGROUPS:", res(lambda: groups_of(a)))
    say("too small a buffer:", res(lambda: groups_of(a, 4)))
    say("room for exactly them:", res(lambda: groups_of(a, 12)))
    a.close()
    b.close()
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    say("unconnected:", res(lambda: groups_of(u)))
    u.close()
    srv = listener(os.path.join(DIR, "groups.sock"))
    say("listener, its own:", res(lambda: groups_of(srv)))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setgroups([100, 7])
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(srv.getsockname())
        os.setgroups([5])  # after connect: not what the server sees
        c.send(b"x")
        os.read(r, 1)
        os._exit(0)
    conn, _ = srv.accept()
    conn.recv(1)
    say("the client's at connect:", res(lambda: groups_of(conn)))
    os.write(w, b"x")
    os.waitpid(pid, 0)
    conn.close()
    srv.close()
    os.setgroups([])


where()
epoll_before_connect()
epoll_before_bind_and_sendto()
async_and_owner()
stat_entry_points()
links()
remove()
refused_quietly()
peergroups()
say("done")

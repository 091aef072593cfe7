"""Socket calls outside the send/receive path where udsfs once answered
otherwise than Linux: SOL_SOCKET options, netdevice ioctls, bind
into a missing directory or over an existing path (routed too), accept with
one descriptor slot left, errno after a successful accept4, abstract names
after unshare(CLONE_NEWNET) in the program, forged SCM_CREDENTIALS from a
root without the capabilities Linux checks, a bound routed path as lstat,
unlinkat with a directory descriptor, rmtree and rename see it. Run once on kernel sockets and
once through `udsfs run --route ROUTE` (integration/api_diffs.sh); the outputs
must be equal line by line. Needs root.
Usage: api_diffs.py DIR ROUTE (DIR: where to bind names; ROUTE: a kernel
directory, routed into the mount in the udsfs run)."""

import array
import ctypes
import errno
import fcntl
import os
import resource
import shutil
import stat
import socket
import struct
import sys

from differential import getopt, res, say, setopt, where

DIR = os.path.realpath(sys.argv[1])
ROUTE = os.path.realpath(sys.argv[2])
SOL = socket.SOL_SOCKET
TYPES = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}
SO_NO_CHECK = 11
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
FLAGS = {
    "SO_BROADCAST": socket.SO_BROADCAST,
    "SO_NO_CHECK": SO_NO_CHECK,
    "SO_REUSEADDR": socket.SO_REUSEADDR,
    "SO_KEEPALIVE": socket.SO_KEEPALIVE,
    "SO_DONTROUTE": socket.SO_DONTROUTE,
}
libc = ctypes.CDLL(None, use_errno=True)


def linger(s, n=8):
    def get():
        raw = s.getsockopt(SOL, socket.SO_LINGER, n)
        return struct.unpack("ii", raw) if len(raw) == 8 else raw.hex()

    return res(get)


def set_linger(s, on, secs):
    return res(lambda: s.setsockopt(SOL, socket.SO_LINGER, struct.pack("ii", on, secs)))


def options():
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        for oname, opt in FLAGS.items():
            seq = [getopt(a, opt)]
            for v in (1, 0, 5, -3):
                seq += [setopt(a, opt, v), getopt(a, opt)]
            say(f"{name} {oname}:", *seq, "peer:", getopt(b, opt))
        seq = [getopt(a, socket.SO_RCVLOWAT)]
        for v in (7, 0, -3, 1 << 20, 1):
            seq += [setopt(a, socket.SO_RCVLOWAT, v), getopt(a, socket.SO_RCVLOWAT)]
        say(f"{name} SO_RCVLOWAT:", *seq)
        seq = [linger(a)]
        for on, secs in ((1, 5), (0, 7), (1, 0), (1, -1), (1, 2**31 - 1), (3, 9)):
            seq += [set_linger(a, on, secs), linger(a)]
        say(f"{name} SO_LINGER:", *seq, "short:", linger(a, 4),
            res(lambda: a.setsockopt(SOL, socket.SO_LINGER, b"\1\0\0\0")))
        for opt, oname in ((SO_RCVBUFFORCE, "RCV"), (SO_SNDBUFFORCE, "SND")):
            back = socket.SO_RCVBUF if oname == "RCV" else socket.SO_SNDBUF
            seq = []
            for v in (1 << 20, 1 << 22, (1 << 22) + 1, 1 << 25, -5, 1, 2**31 - 1):
                seq += [setopt(a, opt, v), getopt(a, back)]
            say(f"{name} SO_{oname}BUFFORCE:", *seq, "get:", getopt(a, opt))
        seq = [getopt(a, socket.SO_PRIORITY)]
        for v in (6, 0, 7, -1, 1000, 3):
            seq += [setopt(a, socket.SO_PRIORITY, v), getopt(a, socket.SO_PRIORITY)]
        say(f"{name} SO_PRIORITY:", *seq, "peer:", getopt(b, socket.SO_PRIORITY), "short:",
            res(lambda: a.setsockopt(SOL, socket.SO_PRIORITY, b"\1\0")))
        a.close()
        b.close()
    # SO_PRIORITY past 6 needs CAP_NET_RAW or CAP_NET_ADMIN (PulseAudio sets 6 on
    # its sockets); an accepted socket starts at 0 whatever its listener's.
    def priority_without_caps():
        a, _ = socket.socketpair()
        a.setsockopt(SOL, socket.SO_PRIORITY, 2)
        drop_caps(CAP_NET_RAW, CAP_NET_ADMIN)
        seq = []
        for v in (6, 7, -1, 0):
            seq += [setopt(a, socket.SO_PRIORITY, v), getopt(a, socket.SO_PRIORITY)]
        return [" ".join(map(str, seq))]

    for line in child_lines(priority_without_caps):
        say("SO_PRIORITY without CAP_NET_RAW, CAP_NET_ADMIN:", line)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(os.path.join(DIR, "prio.sock"))
    lst.listen()
    lst.setsockopt(SOL, socket.SO_PRIORITY, 5)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setsockopt(SOL, socket.SO_PRIORITY, 4)
    c.connect(os.path.join(DIR, "prio.sock"))
    acc = lst.accept()[0]
    say("SO_PRIORITY listener, client, accepted:", getopt(lst, socket.SO_PRIORITY),
        getopt(c, socket.SO_PRIORITY), getopt(acc, socket.SO_PRIORITY))
    for s in (lst, c, acc):
        s.close()
    # Options are the socket's: a dup, a child and a receiver of the socket
    # see them, and a kernel socket's go with it when it becomes a udsfs one.
    a, b = socket.socketpair()
    a.setsockopt(SOL, socket.SO_KEEPALIVE, 1)
    a.setsockopt(SOL, socket.SO_RCVLOWAT, 9)
    set_linger(a, 1, 4)
    d = socket.socket(fileno=os.dup(a.fileno()))
    say("dup:", getopt(d, socket.SO_KEEPALIVE), getopt(d, socket.SO_RCVLOWAT), linger(d))
    pid = os.fork()
    if pid == 0:
        a.setsockopt(SOL, socket.SO_BROADCAST, 1)
        os._exit(0)
    os.waitpid(pid, 0)
    say("set by a child:", getopt(a, socket.SO_BROADCAST))
    x, y = socket.socketpair()
    socket.send_fds(x, [b"s"], [a.fileno()])
    _, fds, _, _ = socket.recv_fds(y, 1, 1)
    r = socket.socket(fileno=fds[0])
    say("passed:", getopt(r, socket.SO_KEEPALIVE), getopt(r, socket.SO_RCVLOWAT), linger(r))
    for s in (a, b, d, x, y, r):
        s.close()
    k = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    k.setsockopt(SOL, socket.SO_REUSEADDR, 1)
    k.setsockopt(SOL, socket.SO_RCVLOWAT, 3)
    set_linger(k, 1, 6)
    k.bind(os.path.join(DIR, "opts.sock"))
    say("after the bind:", getopt(k, socket.SO_REUSEADDR), getopt(k, socket.SO_RCVLOWAT), linger(k))
    k.close()


SIOCGIFNAME, SIOCGIFCONF, SIOCGIFFLAGS, SIOCGIFINDEX, SIOCGIFMTU = 0x8910, 0x8912, 0x8913, 0x8933, 0x8921


def ifreq(name=b"", data=b""):
    return struct.pack("16s24s", name, data)


def ioctl(s, req, arg):
    return res(lambda: fcntl.ioctl(s, req, arg))


def netdevice():
    a, _ = socket.socketpair()
    r = ioctl(a, SIOCGIFINDEX, ifreq(b"lo"))
    lo = struct.unpack("i", r[16:20])[0] if isinstance(r, bytes) else r
    say("SIOCGIFINDEX lo:", lo)
    say("SIOCGIFINDEX nosuch0:", ioctl(a, SIOCGIFINDEX, ifreq(b"nosuch0")))
    r = ioctl(a, SIOCGIFNAME, ifreq(data=struct.pack("i", lo if isinstance(lo, int) else 1)))
    say("SIOCGIFNAME:", r[:16].rstrip(b"\0") if isinstance(r, bytes) else r)
    say("SIOCGIFNAME 999999:", ioctl(a, SIOCGIFNAME, ifreq(data=struct.pack("i", 999999))))
    r = ioctl(a, SIOCGIFFLAGS, ifreq(b"lo"))
    say("SIOCGIFFLAGS lo up:", bool(struct.unpack("h", r[16:18])[0] & 1) if isinstance(r, bytes) else r)
    r = ioctl(a, SIOCGIFMTU, ifreq(b"lo"))
    say("SIOCGIFMTU lo:", struct.unpack("i", r[16:20])[0] if isinstance(r, bytes) else r)
    buf = array.array("B", b"\0" * 40 * 64)
    addr, _ = buf.buffer_info()
    conf = bytearray(struct.pack("iP", len(buf), addr))
    r = res(lambda: fcntl.ioctl(a, SIOCGIFCONF, conf, True))
    names = bytes(buf)[:16].rstrip(b"\0") if r == 0 else r
    say("SIOCGIFCONF:", struct.unpack("i", conf[:4])[0] % 40 if r == 0 else r, "first:", names)
    a.close()


def bind_errors():
    def bind(path, ty=socket.SOCK_STREAM, s=None):
        s = s or socket.socket(socket.AF_UNIX, ty)
        return res(lambda: s.bind(path))

    say("bind in a missing directory:", bind(os.path.join(DIR, "nodir", "x.sock")))
    say("bind in a missing directory, routed:", bind(os.path.join(ROUTE, "nodir", "x.sock")))
    say("bind in a missing directory, elsewhere:", bind("/nonexistent-udsfs-dir/x.sock"))
    a, _ = socket.socketpair()
    say("a pair's socket, bind in a missing directory:", bind("/nonexistent-udsfs-dir/y.sock", s=a))
    with open(os.path.join(ROUTE, "file"), "w"):
        pass
    os.mkdir(os.path.join(ROUTE, "dir"))
    os.symlink("/nonexistent-udsfs-target", os.path.join(ROUTE, "dangling"))
    for what in ("file", "dir", "dangling"):
        say(f"bind over a routed {what}:", bind(os.path.join(ROUTE, what)),
            bind(os.path.join(ROUTE, what), socket.SOCK_DGRAM))
    # A server that crashed left its name: binding it again is EADDRINUSE,
    # after an unlink it binds and clients reach it.
    path = os.path.join(ROUTE, "srv.sock")
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen()
        os._exit(0)
    os.waitpid(pid, 0)
    say("bind the crashed server's name:", bind(path))
    say("unlink it:", res(lambda: os.unlink(path)))
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    say("bind it again:", res(lambda: srv.bind(path)))
    srv.listen()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    say("a client connects:", res(lambda: c.connect(path)))
    c.send(b"k")
    say("accept:", res(lambda: srv.accept()[0].recv(1) or "eof"))
    for s in (srv, c, a):
        s.close()


AT_SYMLINK_NOFOLLOW = 0x100
STATX_BASIC_STATS = 0x7FF


def lstat_kinds(path):
    """The file type letter each of the C library's lstat-like entry points
    gives for `path` (x86_64 layouts: st_mode at 24, stx_mode at 28)."""
    b = os.fsencode(path)
    name = os.fsencode(os.path.basename(path))
    dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    calls = {
        "lstat": (24, lambda buf: libc.lstat(b, buf)),
        "lstat64": (24, lambda buf: libc.lstat64(b, buf)),
        "__lxstat": (24, lambda buf: libc.__lxstat(1, b, buf)),
        "__lxstat64": (24, lambda buf: libc.__lxstat64(1, b, buf)),
        "fstatat": (24, lambda buf: libc.fstatat(dfd, name, buf, AT_SYMLINK_NOFOLLOW)),
        "fstatat64": (24, lambda buf: libc.fstatat64(-100, b, buf, AT_SYMLINK_NOFOLLOW)),
        "__fxstatat": (24, lambda buf: libc.__fxstatat(1, dfd, name, buf, AT_SYMLINK_NOFOLLOW)),
        "__fxstatat64": (24, lambda buf: libc.__fxstatat64(1, -100, b, buf, AT_SYMLINK_NOFOLLOW)),
        "statx": (28, lambda buf: libc.statx(dfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, buf)),
    }
    out = []
    for what, (at, call) in calls.items():
        buf = ctypes.create_string_buffer(512)
        if call(buf) != 0:
            out.append(f"{what}={errno.errorcode[ctypes.get_errno()]}")
            continue
        mode = struct.unpack_from("H" if what == "statx" else "I", buf.raw, at)[0]
        out.append(f"{what}={stat.filemode(mode)[0]}")
    os.close(dfd)
    return " ".join(out)


def routed_names():
    """A bound routed path is a socket file to lstat, and unlinkat with a
    directory descriptor (shutil.rmtree) and rename treat it as one."""
    def listener(path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen()
        return s

    def rebind(path):
        """A new listener on `path`: the bind's result and the socket."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        r = res(lambda: s.bind(path))
        if r == "ok":
            s.listen()
        return r, s

    def reach(path, srv):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        r = res(lambda: c.connect(path))
        if r == "ok":
            c.send(b"r")
            srv.settimeout(2)
            try:
                r = srv.accept()[0].recv(1).decode()
            except TimeoutError:
                r = "another socket took it"
            except OSError as e:
                r = errno.errorcode[e.errno]
        c.close()
        return r

    def shown(name):
        return name.replace(ROUTE, "ROUTE") if isinstance(name, str) else name

    path = os.path.join(ROUTE, "ls.sock")
    s = listener(path)
    mode = os.lstat(path).st_mode
    say("lstat of a bound path:", stat.filemode(mode)[0], stat.S_ISSOCK(mode),
        "islink:", os.path.islink(path), "exists:", os.path.exists(path),
        "lexists:", os.path.lexists(path), "stat:", stat.filemode(os.stat(path).st_mode)[0])
    say("lstat entry points:", lstat_kinds(path))
    ls, st = os.lstat(path), os.stat(path)
    say("lstat fields:", stat.filemode(ls.st_mode), ls.st_size, ls.st_nlink,
        "same as stat:", (ls.st_dev, ls.st_ino, ls.st_mode) == (st.st_dev, st.st_ino, st.st_mode),
        "samefile:", os.path.samefile(path, path))
    dfd = os.open(ROUTE, os.O_RDONLY | os.O_DIRECTORY)
    say("lstat with a dir_fd:", stat.filemode(os.stat("ls.sock", dir_fd=dfd, follow_symlinks=False).st_mode)[0])
    with open(os.path.join(ROUTE, "plain"), "w"):
        pass
    os.symlink(path, os.path.join(ROUTE, "alias"))
    os.symlink("plain", os.path.join(ROUTE, "rel"))
    for what in ("plain", "alias", "rel"):
        say(f"lstat of {what}:", lstat_kinds(os.path.join(ROUTE, what)))
    say("lstat of the alias, followed:", stat.filemode(os.stat(os.path.join(ROUTE, "alias")).st_mode)[0])
    s.close()
    os.unlink(path)
    say("lstat once unlinked:", res(lambda: os.lstat(path)))

    # unlinkat(dirfd, name, 0): the name goes and can be bound again.
    os.mkdir(os.path.join(ROUTE, "d1"))
    path = os.path.join(ROUTE, "d1", "u.sock")
    s = listener(path)
    d1 = os.open(os.path.join(ROUTE, "d1"), os.O_RDONLY | os.O_DIRECTORY)
    say("unlinkat with a dir_fd:", res(lambda: os.unlink("u.sock", dir_fd=d1)),
        "lexists:", os.path.lexists(path))
    r, s2 = rebind(path)
    say("bind it again:", r)
    say("a client reaches the new one:", reach(path, s2))
    say("unlinkat again:", res(lambda: os.unlink("u.sock", dir_fd=d1)),
        res(lambda: os.unlink("u.sock", dir_fd=d1)))
    os.close(d1)
    for x in (s, s2):
        x.close()

    # shutil.rmtree of a directory holding a bound socket, then the same
    # path bound again (test_pathlib's test_is_socket_true twice).
    top = os.path.join(ROUTE, "tree")
    os.makedirs(os.path.join(top, "sub"))
    path = os.path.join(top, "sub", "t.sock")
    s = listener(path)
    say("rmtree:", res(lambda: shutil.rmtree(top)), "exists:", os.path.lexists(top))
    s.close()
    os.makedirs(os.path.join(top, "sub"))
    r, s = rebind(path)
    say("bind after the rmtree:", r)
    say("a client reaches it:", reach(path, s), "S_ISSOCK:",
        res(lambda: stat.S_ISSOCK(os.lstat(path).st_mode)))
    s.close()
    say("rmtree again, then bind the directory's name:", res(lambda: shutil.rmtree(top)),
        rebind(top)[0], "rmdir of a routed directory:",
        res(lambda: os.mkdir(os.path.join(ROUTE, "d2"))), res(lambda: os.rmdir(os.path.join(ROUTE, "d2"))),
        rebind(os.path.join(ROUTE, "d2"))[0])

    # rename: the socket file moves and stays reachable under the new name;
    # getsockname still gives the name it was bound to.
    old, new = os.path.join(ROUTE, "old.sock"), os.path.join(ROUTE, "new.sock")
    s = listener(old)
    say("rename:", res(lambda: os.rename(old, new)), "old:", os.path.lexists(old),
        "new lstat:", res(lambda: stat.filemode(os.lstat(new).st_mode)[0]))
    say("connect the new name:", reach(new, s), "the old:", reach(old, s))
    say("getsockname:", shown(s.getsockname()))
    os.mkdir(os.path.join(ROUTE, "moved"))
    moved = os.path.join(ROUTE, "moved", "m.sock")
    say("rename into a new directory:", res(lambda: os.rename(new, moved)), reach(moved, s))
    other = listener(os.path.join(ROUTE, "other.sock"))
    say("rename over another bound name:",
        res(lambda: os.replace(moved, os.path.join(ROUTE, "other.sock"))),
        reach(os.path.join(ROUTE, "other.sock"), s))
    dfd2 = os.open(os.path.join(ROUTE, "moved"), os.O_RDONLY | os.O_DIRECTORY)
    say("renameat with dir_fds:",
        res(lambda: os.rename("other.sock", "at.sock", src_dir_fd=dfd, dst_dir_fd=dfd2)),
        reach(moved.replace("m.sock", "at.sock"), s))
    say("bind the names it left:", res(lambda: other.close()),
        *[res(lambda p=p: socket.socket(socket.AF_UNIX).bind(p))
          for p in (old, new, moved, os.path.join(ROUTE, "other.sock"))])
    say("rename onto a missing directory:",
        res(lambda: os.rename(moved.replace("m.sock", "at.sock"), os.path.join(ROUTE, "nodir", "x.sock"))),
        reach(moved.replace("m.sock", "at.sock"), s))
    s.close()
    os.close(dfd)
    os.close(dfd2)
    # A directory holding bound sockets (one a level down) renamed.
    os.makedirs(os.path.join(ROUTE, "dirA", "deep"))
    s = listener(os.path.join(ROUTE, "dirA", "a.sock"))
    t = listener(os.path.join(ROUTE, "dirA", "deep", "b.sock"))
    say("rename a directory:", res(lambda: os.rename(os.path.join(ROUTE, "dirA"), os.path.join(ROUTE, "dirB"))),
        reach(os.path.join(ROUTE, "dirB", "a.sock"), s), reach(os.path.join(ROUTE, "dirB", "deep", "b.sock"), t),
        stat.filemode(os.lstat(os.path.join(ROUTE, "dirB", "deep", "b.sock")).st_mode)[0],
        "the old:", reach(os.path.join(ROUTE, "dirA", "a.sock"), s),
        "bind there again:", res(lambda: os.makedirs(os.path.join(ROUTE, "dirA", "deep"))),
        rebind(os.path.join(ROUTE, "dirA", "deep", "b.sock"))[0])
    s.close()
    t.close()

    # A call that succeeds leaves errno as it was.
    def kept(call):
        ctypes.set_errno(errno.EXDEV)
        r = call()
        return f"{r} {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"

    a, b = (os.fsencode(os.path.join(ROUTE, n)) for n in ("e1.sock", "e2.sock"))
    s = listener(os.fsdecode(a))
    buf = ctypes.create_string_buffer(512)
    d = os.open(ROUTE, os.O_RDONLY | os.O_DIRECTORY)
    with open(os.path.join(ROUTE, "e.txt"), "w"):
        pass
    say("errno after a success:", kept(lambda: libc.lstat(a, buf)),
        kept(lambda: libc.rename(os.fsencode(os.path.join(ROUTE, "e.txt")), os.fsencode(os.path.join(ROUTE, "f.txt")))),
        kept(lambda: libc.rename(a, b)), kept(lambda: libc.unlinkat(d, b"e2.sock", 0)),
        kept(lambda: libc.unlinkat(d, b"f.txt", 0)))
    s.close()
    os.close(d)


def fill_fds(keep):
    """Opens /dev/null until EMFILE, then closes `keep` of them."""
    fds = []
    while True:
        try:
            fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            if e.errno != errno.EMFILE:
                raise
            break
    for _ in range(keep):
        os.close(fds.pop())
    return fds


def accept_last_slot():
    path = os.path.join(DIR, "acc.sock")
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    lst.listen()
    c1 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c1.connect(path)
    c1.send(b"hi")
    c2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c2.connect(path)
    c2.send(b"ho")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    try:
        fds = fill_fds(1)
        got = res(lambda: lst.accept()[0])
        say("accept with one slot:", got.recv(2) if isinstance(got, socket.socket) else got)
        if isinstance(got, socket.socket):
            got.close()
        fds += fill_fds(0)
        say("accept with no slot:", res(lambda: lst.accept()))
        os.close(fds.pop())
        got = res(lambda: lst.accept()[0])
        say("accept once a slot is free:", got.recv(2) if isinstance(got, socket.socket) else got)
        say("the client sends on:", res(lambda: c2.send(b"x")))
        for fd in fds:
            os.close(fd)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    for s in (lst, c1, c2):
        s.close()


def errno_kept():
    """A successful call leaves errno as it was."""
    path = os.path.join(DIR, "errno.sock")
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    lst.listen()
    for name, call in (("accept4", lambda: libc.accept4(lst.fileno(), None, None, 0)),
                       ("accept", lambda: libc.accept(lst.fileno(), None, None))):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        ctypes.set_errno(errno.EXDEV)
        fd = call()
        say(f"{name}: fd", fd >= 0, "errno", errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
        os.close(fd)
        c.close()
    lst.close()


def child_lines(body):
    """Runs body() in a forked child: the lines it returned, passed back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            out = body()
            os.write(w, ("\n".join(out) + "\n").encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return [line.rstrip() for line in f]


def netns_in_program():
    """unshare(CLONE_NEWNET) in the program itself, in a child."""
    tag = f"ns-{os.getpid()}".encode()
    outer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    outer.bind(b"\0" + tag + b"-outer")
    outer.listen()
    def in_new_netns():
        out = []
        if libc.unshare(0x40000000) != 0:
            out.append(f"unshare failed {ctypes.get_errno()}")
        name, outer_name = b"\0" + tag, b"\0" + tag + b"-outer"
        lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        out.append(f"bind: {res(lambda: lst.bind(name))}")
        lst.listen()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        out.append(f"connect: {res(lambda: c.connect(name))}")
        c.send(b"n")
        out.append(f"accept: {res(lambda: lst.accept()[0].recv(1))}")
        d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        out.append(f"autobind: {res(lambda: d.bind(b''))} {len(d.getsockname())}")
        e = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        out.append(f"sendto the autobind: {res(lambda: e.sendto(b'q', d.getsockname()))} {res(lambda: d.recv(4))}")
        o = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        out.append(f"the outer name: {res(lambda: o.connect(outer_name))}")
        return out

    for line in child_lines(in_new_netns):
        say("new netns:", line)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    say("the child's name from outside:", res(lambda: c.connect(b"\0" + tag)))
    outer.close()


CAP_SETGID, CAP_SETUID, CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN = 6, 7, 12, 13, 21


def drop_caps(*caps):
    """Removes `caps` from this process's effective set (capset, version 3)."""
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.syscall(125, hdr, data) != 0:  # capget
        raise OSError(ctypes.get_errno(), "capget")
    for cap in caps:
        data[0] &= ~(1 << cap)
    if libc.syscall(126, hdr, data) != 0:  # capset
        raise OSError(ctypes.get_errno(), "capset")


def creds_without_caps():
    other = os.getppid()
    for label, caps in (("root", ()), ("root without CAP_SYS_ADMIN", (CAP_SYS_ADMIN,)),
                        ("root without CAP_SETUID, CAP_SETGID", (CAP_SETUID, CAP_SETGID))):
        def without_caps(caps=caps):
            out = []
            try:
                drop_caps(*caps)
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                b.setsockopt(SOL, socket.SO_PASSCRED, 1)
                for what, cr in (("own", (os.getpid(), 0, 0)),
                                 ("another pid", (other, 0, 0)),
                                 ("another uid", (os.getpid(), 65534, 0)),
                                 ("another gid", (os.getpid(), 0, 65534)),
                                 ("uid -1", (os.getpid(), -1, 0))):
                    cm = [(SOL, socket.SCM_CREDENTIALS, struct.pack("iii", *cr))]
                    sent = res(lambda: a.sendmsg([b"c"], cm))
                    got = ""
                    if sent == 1:
                        _, anc, _, _ = b.recvmsg(4, 64)
                        p, u, g = struct.unpack("iii", anc[0][2])
                        got = f"pid={'other' if p == other else 'own' if p == os.getpid() else p} uid={u} gid={g}"
                    out.append(f"{what}: {sent} {got}")
            except OSError as e:
                out.append(f"failed: {e}")
            return out

        for line in child_lines(without_caps):
            say(f"{label}, SCM_CREDENTIALS {line}")
    # The real uid a message carries follows setresuid at once.
    def real_uids():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        b.setsockopt(SOL, socket.SO_PASSCRED, 1)
        out = []
        for step in ("before", "after setresuid(65534, 0, 0)", "after setresuid(0, 0, 0)"):
            if step.startswith("after setresuid(6"):
                os.setresuid(65534, 0, 0)
            elif step.startswith("after setresuid(0"):
                os.setresuid(0, 0, 0)
            try:
                a.sendmsg([b"u"])
                _, anc, _, _ = b.recvmsg(4, 64)
                out.append(f"{step}: uid={struct.unpack('iii', anc[0][2])[1]}")
            except OSError as e:
                out.append(f"{step}: {errno.errorcode[e.errno]}")
        return out

    for line in child_lines(real_uids):
        say("real uid", line)


where()
options()
netdevice()
bind_errors()
routed_names()
accept_last_slot()
errno_kept()
netns_in_program()
creds_without_caps()
say("done")

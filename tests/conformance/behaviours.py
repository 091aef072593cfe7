"""Behaviours other people's test suites found (issue 28 item 3), each as Linux
answers it: a non-NULL address of length 0 to sendmsg/sendto is "no address";
fchmod/fchown of a socket descriptor succeed and leave the path's mode alone;
connect/sendto to a regular file under a route is ECONNREFUSED; bind with a
sun_family other than AF_UNIX is EINVAL; a 4 MiB datagram or seqpacket record
(1,024 iovecs of a page) goes through whole once SO_SNDBUF fits it; fstat and a
raw statx of a socket descriptor say S_IFSOCK; bind to a kernel path outside
the mount and its routes, or to a routed path that exists, answers as mknod
(EADDRINUSE, ENOENT, ENOTDIR). Run on kernel sockets, through
the preload library and under the seccomp supervisor
(integration/behaviours.sh); the outputs must be equal line by line. Needs root.
Usage: behaviours.py DIR ROUTE (DIR: where to bind names; ROUTE: a kernel
directory, routed into the mount in the udsfs runs)."""

import ctypes
import errno
import os
import select
import socket
import stat
import struct
import sys

from differential import IOVec, MMsgHdr, MsgHdr, open_fds, res, say, where

DIR = os.path.realpath(sys.argv[1])
ROUTE = os.path.realpath(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
TYPES = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}
SO_SNDBUFFORCE = 32


def call(f):
    """A libc call's result, or the errno name when it returned -1."""
    r = f()
    if r == -1:
        return errno.errorcode[ctypes.get_errno()]
    return r


def sockaddr_un(path=b"", family=socket.AF_UNIX):
    raw = struct.pack("H108s", family, path)
    return ctypes.create_string_buffer(raw, len(raw))


def sendmsg_raw(fd, data, name, namelen, rights=()):
    """sendmsg(2) with msg_name and msg_namelen as given and SCM_RIGHTS of rights."""
    buf = ctypes.create_string_buffer(data, len(data))
    iov = IOVec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    ctl = None
    ctllen = 0
    if rights:
        payload = struct.pack(f"{len(rights)}i", *rights)
        hdr = struct.pack("Nii", 16 + len(payload), socket.SOL_SOCKET, socket.SCM_RIGHTS)
        raw = hdr + payload + b"\0" * (-(len(hdr) + len(payload)) % 8)
        ctl = ctypes.create_string_buffer(raw, len(raw))
        ctllen = len(raw)
    m = MsgHdr(ctypes.cast(name, ctypes.c_void_p) if name is not None else None, namelen,
               ctypes.pointer(iov), 1, ctypes.cast(ctl, ctypes.c_void_p) if ctl else None, ctllen, 0)
    return call(lambda: libc.sendmsg(fd, ctypes.byref(m), 0))


def zero_length_address():
    # A zeroed sockaddr_un with msg_namelen 0 is no address: the record goes
    # to the connected peer, with and without ancillary data.
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        r, w = os.pipe()
        buf = ctypes.create_string_buffer(b"three")
        seq, got = [], []
        for send in (lambda: sendmsg_raw(a.fileno(), b"one", sockaddr_un(), 0),
                     lambda: sendmsg_raw(a.fileno(), b"two", sockaddr_un(), 0, [r]),
                     lambda: call(lambda: libc.sendto(a.fileno(), buf, 5, 0, sockaddr_un(), 0))):
            seq.append(send())
            m = res(lambda: b.recvmsg(64, 64, socket.MSG_DONTWAIT))
            got.append((m[0].decode(), len(m[1])) if isinstance(m, tuple) else m)
        say(f"{name} zero-length address:", *seq, "received:", got)
        os.close(r)
        os.close(w)
        a.close()
        b.close()
    # Unconnected datagram socket: no address at all, as Linux says.
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    say("unconnected dgram zero-length address:", sendmsg_raw(a.fileno(), b"x", sockaddr_un(), 0))
    a.close()


def fchmod_fchown():
    for name, ty in TYPES.items():
        path = os.path.join(DIR, f"chmod-{name}.sock")
        s = socket.socket(socket.AF_UNIX, ty)
        s.bind(path)
        before = stat.S_IMODE(os.stat(path).st_mode)
        p, q = socket.socketpair(socket.AF_UNIX, ty)
        say(f"{name} fchmod/fchown:",
            res(lambda: os.fchmod(s.fileno(), 0o600)),
            res(lambda: os.fchown(s.fileno(), 0, 0)),
            res(lambda: os.fchmod(p.fileno(), 0o600)),
            res(lambda: os.fchown(p.fileno(), -1, -1)),
            "path mode unchanged:", stat.S_IMODE(os.stat(path).st_mode) == before)
        for x in (s, p, q):
            x.close()
        os.unlink(path)


def plain_file(path):
    with open(path, "w") as f:
        f.write("not a socket")
    return path


def regular_file_under_route():
    path = plain_file(os.path.join(ROUTE, "plain.file"))
    for name, ty in TYPES.items():
        s = socket.socket(socket.AF_UNIX, ty)
        seq = [res(lambda: s.connect(path))]
        if ty == socket.SOCK_DGRAM:
            seq.append(res(lambda: s.sendto(b"x", path)))
        say(f"{name} to a regular file under the route:", *seq)
        s.close()
    os.unlink(path)


def bind_other_family():
    # A fresh socket and one of a socketpair (a udsfs socket from the start);
    # a new name, one in a missing directory, one that exists: the family is
    # looked at first.
    for name, ty in TYPES.items():
        s = socket.socket(socket.AF_UNIX, ty)
        p, q = socket.socketpair(socket.AF_UNIX, ty)
        path = os.path.join(DIR, f"fam-{name}.sock").encode()
        names = (path, os.path.join(DIR, "missing", "x.sock").encode(), DIR.encode())
        seq = []
        for x in (s, p):
            for n in names:
                for fam in (socket.AF_INET, socket.AF_UNSPEC, 0xffff):
                    addr = sockaddr_un(n, fam)
                    seq.append(call(lambda: libc.bind(x.fileno(), addr, 110)))
        seq.append("exists:" + str(os.path.exists(path)))
        say(f"{name} bind with another family:", *seq)
        for x in (s, p, q):
            x.close()


def big_record():
    size = 4 << 20
    page = 4096
    for name in ("dgram", "seqpacket"):
        a, b = socket.socketpair(socket.AF_UNIX, TYPES[name])
        a.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 2 * size)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2 * size)
        data = bytes(i & 0xff for i in range(page)) * (size // page)
        bufs = [memoryview(data)[i:i + page] for i in range(0, size, page)]
        sent = res(lambda: a.sendmsg(bufs))
        got = []
        if sent == size:
            for _ in range(size // (1 << 16)):
                got.append(bytearray(1 << 16))
            n = res(lambda: b.recvmsg_into(got, 0, socket.MSG_DONTWAIT))
            whole = isinstance(n, tuple) and n[0] == size and b"".join(got) == data
            say(f"{name} 4 MiB record in 1024 iovecs:", "sent", sent, "received whole:", whole,
                "flags:", n[2] if isinstance(n, tuple) else n)
        else:
            say(f"{name} 4 MiB record in 1024 iovecs:", "sent", sent)
        # Past the largest skb Linux allocates (4 MiB and 17 pages less
        # skb_shared_info) a send SO_SNDBUF allows is ENOBUFS.
        a.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 16 * size)
        say(f"{name} 5 MiB record:", res(lambda: a.sendmsg([data, data[:size // 4]])),
            "queued:", res(lambda: len(b.recv(1, socket.MSG_DONTWAIT))))
        # More than SO_SNDBUF fits is EMSGSIZE as on Linux.
        a.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 1 << 20)
        say(f"{name} 4 MiB record over SO_SNDBUF:", res(lambda: a.sendmsg(bufs)))
        a.close()
        b.close()


def bind_kernel_path():
    # A socket of a socketpair (a udsfs socket from the start) bound to a
    # kernel path outside the mount and its routes: as unix_bind's mknod
    # answers, EADDRINUSE when the path exists, ENOENT or ENOTDIR when its
    # directory does not (issue 28: the supervisor said EINVAL to each).
    outside = os.path.dirname(ROUTE)
    taken = plain_file(os.path.join(outside, f"behaviours-taken-{os.getpid()}"))
    names = (taken, os.path.join(outside, "behaviours-missing", "x.sock"), os.path.join(taken, "x.sock"))
    for name, ty in TYPES.items():
        p, q = socket.socketpair(socket.AF_UNIX, ty)
        say(f"{name} socketpair bound to a kernel path (taken, missing dir, file as dir):",
            *[res(lambda: p.bind(n)) for n in names])
        p.close()
        q.close()
    os.unlink(taken)


def routed_bind_taken():
    # bind to a routed path that exists: EADDRINUSE, whatever is there (a
    # regular file; the name a closed socket left), as Linux makes the socket
    # file first (issue 28: the supervisor bound, then replaced a stale link).
    plain = plain_file(os.path.join(ROUTE, "taken.file"))
    for name, ty in TYPES.items():
        left = os.path.join(ROUTE, f"left-{name}.sock")
        s = socket.socket(socket.AF_UNIX, ty)
        s.bind(left)
        s.close()
        t = socket.socket(socket.AF_UNIX, ty)
        u = socket.socket(socket.AF_UNIX, ty)
        say(f"{name} bind to a routed path that exists (a file, a closed socket's name):",
            res(lambda: t.bind(plain)), res(lambda: u.bind(left)),
            "the file is still one:", os.path.isfile(plain))
        t.close()
        u.close()
        os.unlink(left)
    os.unlink(plain)


def kinds(fds):
    out = []
    for fd in fds:
        m = os.fstat(fd).st_mode
        out.append("sock" if stat.S_ISSOCK(m) else "fifo" if stat.S_ISFIFO(m) else "other")
        os.close(fd)
    return "+".join(out) or "none"


def rights_past_room():
    # Sockets and files passed together, received where not all fit: as
    # scm_detach_fds, those that fit the control buffer (or the one free
    # descriptor slot) are installed in order, the rest closed, MSG_CTRUNC.
    # (Sockets before files: udsfs's engine keeps a message's sockets and
    # files apart, and gives the sockets first.)
    import resource
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        s1, s2 = socket.socketpair(socket.AF_UNIX, ty)
        r, w = os.pipe()
        passed = [s1.fileno(), s2.fileno(), r, w]
        seq = []
        for room in (2, 3, 4):
            socket.send_fds(a, [b"m"], passed)
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if room == 4:
                # One free slot: the first is installed, the rest are not.
                free = os.dup(0)
                os.close(free)
                resource.setrlimit(resource.RLIMIT_NOFILE, (free + 1, hard))
            try:
                got = res(lambda: b.recvmsg(1, socket.CMSG_SPACE(4 * room)))
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            if isinstance(got, tuple):
                fds = []
                for level, t, data in got[1]:
                    if level == socket.SOL_SOCKET and t == socket.SCM_RIGHTS:
                        fds += list(struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4]))
                seq += [f"room {room}:", kinds(fds), "ctrunc:", bool(got[2] & socket.MSG_CTRUNC)]
            else:
                seq += [f"room {room}:", got]
        say(f"{name} sockets and files past the room:", *seq)
        for x in (a, b, s1, s2):
            x.close()
        os.close(r)
        os.close(w)


def recvmmsg_readonly_timeout():
    # recvmmsg's timeout is read first and written back once, at the end
    # (__sys_recvmmsg): one in read-only memory lets the datagrams be
    # received, then the call is EFAULT (issue 28: the library wrote it
    # after each datagram and stopped at the first).
    import mmap
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    page = mmap.mmap(-1, mmap.PAGESIZE)
    page.write(struct.pack("qq", 5, 0))
    at = ctypes.addressof(ctypes.c_char.from_buffer(page))
    libc.mprotect(at, mmap.PAGESIZE, mmap.PROT_READ)
    for name in ("dgram", "seqpacket"):
        a, b = socket.socketpair(socket.AF_UNIX, TYPES[name])
        for i in range(3):
            a.send(b"m%d" % i)
        bufs = [ctypes.create_string_buffer(16) for _ in range(3)]
        iovs = [IOVec(ctypes.cast(x, ctypes.c_void_p), 16) for x in bufs]
        v = (MMsgHdr * 3)()
        for i in range(3):
            v[i].hdr = MsgHdr(None, 0, ctypes.pointer(iovs[i]), 1, None, 0, 0)
        r = call(lambda: libc.recvmmsg(b.fileno(), v, 3, socket.MSG_DONTWAIT, at))
        left = []
        while True:
            got = res(lambda: b.recv(16, socket.MSG_DONTWAIT))
            if not isinstance(got, bytes):
                break
            left.append(got)
        say(f"{name} recvmmsg with a read-only timeout:", r, "left queued:", len(left))
        a.close()
        b.close()


AT_EMPTY_PATH = 0x1000
SYS_STATX = 332


def socket_kind():
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        st = os.fstat(a.fileno())
        buf = ctypes.create_string_buffer(256)
        r = libc.syscall(SYS_STATX, a.fileno(), b"", AT_EMPTY_PATH, 0xfff, buf)
        mode = struct.unpack_from("H", buf.raw, 28)[0]
        # A socket received over a socket, as an event library sees it.
        x, y = socket.socketpair()
        socket.send_fds(x, [b"s"], [a.fileno()])
        _, fds, _, _ = socket.recv_fds(y, 1, 1)
        passed = os.fstat(fds[0])
        say(f"{name} fstat:", stat.S_ISSOCK(st.st_mode), stat.S_IMODE(st.st_mode) == 0o777,
            "statx:", r, stat.S_ISSOCK(mode), stat.S_IMODE(mode) == 0o777,
            "passed:", stat.S_ISSOCK(passed.st_mode))
        for fd in fds:
            os.close(fd)
        for s in (a, b, x, y):
            s.close()


def connect_without_a_name():
    # A udsfs socket (bound under the route: converted) connected to no
    # AF_UNIX name: nothing, a byte, the family alone, AF_INET; and a
    # datagram sent to AF_INET. unix_validate_addr says EINVAL to each.
    for name, ty in TYPES.items():
        s = socket.socket(socket.AF_UNIX, ty)
        s.bind(os.path.join(ROUTE, f"noname-{name}.sock"))
        fam = struct.pack("H", socket.AF_UNIX)
        inet = struct.pack("HH4s8x", socket.AF_INET, 80, b"\x7f\0\0\1")
        seq = []
        for raw in (b"", fam[:1], fam, inet):
            buf = ctypes.create_string_buffer(raw, max(len(raw), 1))
            seq.append(call(lambda: libc.connect(s.fileno(), buf if raw else None, len(raw))))
        if ty == socket.SOCK_DGRAM:
            buf = ctypes.create_string_buffer(inet, len(inet))
            seq.append(call(lambda: libc.sendto(s.fileno(), b"x", 1, 0, buf, len(inet))))
        say(f"{name} connect to no AF_UNIX name:", *seq)
        s.close()
        os.unlink(os.path.join(ROUTE, f"noname-{name}.sock"))


def epoll_across_conversion():
    # A socket in an epoll set before the connect or send that routes it into
    # the mount (nginx adds an upstream socket before its connect): the set
    # still reports it, by the same number (modify and unregister find it).
    for name, ty in (("stream", socket.SOCK_STREAM), ("dgram", socket.SOCK_DGRAM)):
        path = os.path.join(ROUTE, f"ep-{name}.sock")
        srv = socket.socket(socket.AF_UNIX, ty)
        srv.bind(path)
        c = socket.socket(socket.AF_UNIX, ty)
        ep = select.epoll()
        ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
        if ty == socket.SOCK_STREAM:
            srv.listen()
            c.connect(path)
            peer, _ = srv.accept()
        else:
            c.sendto(b"x", path)
            peer = srv
        first = [e for _, e in ep.poll(1)]
        if ty == socket.SOCK_STREAM:
            peer.send(b"y")
        else:
            c.connect(path)
        second = [e for _, e in ep.poll(1)]
        ep.modify(c.fileno(), select.EPOLLIN)
        third = [e for _, e in ep.poll(0)]
        ep.unregister(c.fileno())
        say(f"{name} epoll across the conversion:", first, second, third)
        for x in {ep, c, srv, peer}:
            x.close()
        os.unlink(path)


def getsockopt_order():
    # sk_getsockopt reads the length first (EFAULT, a negative one EINVAL)
    # before it looks at the option (an unknown one: ENOPROTOOPT), and
    # installs SO_PEERPIDFD's pidfd only once it wrote both places.
    for name, ty in TYPES.items():
        a, b = socket.socketpair(socket.AF_UNIX, ty)
        val = ctypes.create_string_buffer(16)
        neg = ctypes.c_int(-1)
        four = ctypes.c_int(4)
        fd = a.fileno()
        seq = [call(lambda: libc.getsockopt(fd, socket.SOL_SOCKET, 9999, val, None)),
               call(lambda: libc.getsockopt(fd, socket.SOL_SOCKET, 9999, val, ctypes.byref(neg))),
               call(lambda: libc.getsockopt(fd, socket.SOL_SOCKET, 9999, val, ctypes.byref(four)))]
        before = len(open_fds())
        seq.append(call(lambda: libc.getsockopt(fd, socket.SOL_SOCKET, 77, ctypes.c_void_p(8),
                                                ctypes.byref(four))))
        seq.append(f"new descriptors: {len(open_fds()) - before}")
        say(f"{name} getsockopt order:", *seq)
        a.close()
        b.close()


where()
for part in (zero_length_address, fchmod_fchown, regular_file_under_route, bind_other_family,
             big_record, socket_kind, bind_kernel_path, routed_bind_taken,
             rights_past_room, recvmmsg_readonly_timeout, connect_without_a_name,
             epoll_across_conversion, getsockopt_order):
    try:
        part()
    except OSError as e:
        say(part.__name__, "stopped:", errno.errorcode.get(e.errno, e))
say("done")

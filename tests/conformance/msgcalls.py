"""The message calls (recvmsg, recvfrom, MSG_PEEK, sendmsg, recvmmsg, sendmmsg,
zero-length I/O) through the socket API: run once on kernel sockets and once
through `udsfs run` (integration/msgcalls.sh); the two outputs must be equal line
by line. Usage: msgcalls.py DIR. Nothing here may block for good: a receive that
could hang on a wrong answer has SO_RCVTIMEO set or MSG_DONTWAIT."""

import array
import ctypes
import errno
import os
import signal
import socket
import struct
import sys
import threading
import time

from differential import IOVec, MMsgHdr, MsgHdr, open_fds, res, say, where

DGRAM, SEQ, STREAM = socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_STREAM
TYPES = (("dgram", DGRAM), ("seqpacket", SEQ), ("stream", STREAM))
DW = socket.MSG_DONTWAIT
SO_RCVTIMEO = 20
MSG_WAITFORONE = 0x10000
LIBC = ctypes.CDLL(None, use_errno=True)


def recv0(s, flags):
    """recv(fd, NULL, 0, flags) itself: CPython answers recv(0) without a call."""
    r = LIBC.recv(s.fileno(), None, ctypes.c_size_t(0), flags)
    return r if r >= 0 else errno.errorcode[ctypes.get_errno()]


def pair(ty):
    return socket.socketpair(socket.AF_UNIX, ty)


def rcvtimeo(s, sec):
    s.setsockopt(socket.SOL_SOCKET, SO_RCVTIMEO, struct.pack("qq", int(sec), int(sec % 1 * 1e6)))


def lens(f):
    """f()'s result with bytes shown by their length."""
    r = res(f)
    if isinstance(r, bytes):
        return len(r)
    if isinstance(r, tuple):
        return tuple(len(x) if isinstance(x, bytes) else x for x in r)
    return r


def flagnames(fl):
    names = [n for n, b in (("TRUNC", socket.MSG_TRUNC), ("CTRUNC", socket.MSG_CTRUNC),
                            ("OOB", socket.MSG_OOB)) if fl & b]
    return "|".join(names) or "0"


def big_peek():
    # A peek of a datagram larger than one ioctl leaves it queued.
    for name, ty in TYPES[:2]:
        a, b = pair(ty)
        rcvtimeo(b, 1)
        a.send(b"x" * 20000)
        a.send(b"y")
        say(name, "big peek", lens(lambda: b.recv(65536, socket.MSG_PEEK)),
            lens(lambda: b.recv(65536, DW)), lens(lambda: b.recv(65536, DW)),
            lens(lambda: b.recv(65536, DW)))
        a.send(b"z" * 30000)
        d, _, fl, _ = b.recvmsg(40000, 0, socket.MSG_PEEK)
        say(name, "big peek recvmsg", len(d), d == b"z" * 30000, flagnames(fl),
            lens(lambda: b.recv(100, socket.MSG_PEEK | DW)))
        d, _, fl, _ = b.recvmsg(100, 0, socket.MSG_PEEK)
        say(name, "peek short", len(d), flagnames(fl), lens(lambda: b.recv(40000, DW)))
    a, b = pair(STREAM)
    rcvtimeo(b, 1)
    a.sendall(b"s" * 30000)
    say("stream big peek", lens(lambda: b.recv(65536, socket.MSG_PEEK)),
        lens(lambda: b.recv(65536, DW)), lens(lambda: b.recv(10, DW)))


def truncation():
    # recvmsg without a name or control buffer still reports MSG_TRUNC.
    for name, ty in TYPES:
        a, b = pair(ty)
        rcvtimeo(b, 1)
        a.send(b"abcdef")
        d, anc, fl, _ = b.recvmsg(3)
        say(name, "recvmsg 3 of 6", d, anc, flagnames(fl))
        a.send(b"abcdef")
        d, anc, fl, _ = b.recvmsg(3, 0, socket.MSG_TRUNC)
        say(name, "recvmsg MSG_TRUNC", d, flagnames(fl))
        a.send(b"ghij")
        buf = bytearray(2)
        n, _, fl, _ = b.recvmsg_into([buf])
        say(name, "recvmsg_into", n, bytes(buf), flagnames(fl))


def zero_length():
    for name, ty in TYPES:
        a, b = pair(ty)
        rcvtimeo(b, 0.2)
        say(name, "write 0", res(lambda: os.write(a.fileno(), b"")),
            lens(lambda: b.recv(10, DW)), lens(lambda: b.recv(10, DW)))
        say(name, "send 0", res(lambda: a.send(b"")), lens(lambda: b.recv(10, DW)))
        a.send(b"abc")
        say(name, "read 0", lens(lambda: os.read(b.fileno(), 0)), lens(lambda: b.recv(10, DW)))
        say(name, "recv 0 empty", recv0(b, DW), recv0(b, 0))
        a.send(b"abc")
        say(name, "recv 0 queued", recv0(b, DW), lens(lambda: b.recv(10, DW)))
        a.send(b"abc")
        d, anc, fl, _ = b.recvmsg(0)
        say(name, "recvmsg 0", d, flagnames(fl), lens(lambda: b.recv(10, DW)))
        b.close()
        # FUSE passes a close on after close() returns: give it the time.
        time.sleep(0.2)
        say(name, "zero-length to a closed peer", res(lambda: os.write(a.fileno(), b"")),
            res(lambda: a.send(b"", socket.MSG_NOSIGNAL)))
        a.close()


def rights():
    for name, ty in TYPES:
        a, b = pair(ty)
        rcvtimeo(b, 1)
        c, d = pair(STREAM)
        socket.send_fds(a, [b"m"], [c.fileno()])
        c.close()
        data, anc, fl, _ = b.recvmsg(10)
        say(name, "no control buffer", data, len(anc), flagnames(fl),
            "peer reads", lens(lambda: d.recv(10, DW)))
        c, d = pair(STREAM)
        socket.send_fds(a, [b"n"], [c.fileno()])
        c.close()
        data, anc, fl, _ = b.recvmsg(0, socket.CMSG_SPACE(4))
        fds = []
        for lvl, t, v in anc:
            if lvl == socket.SOL_SOCKET and t == socket.SCM_RIGHTS:
                fds.extend(array.array("i", v[: len(v) - len(v) % 4]))
        got = socket.socket(fileno=fds[0]) if fds else None
        say(name, "zero-length recvmsg", data, len(fds), flagnames(fl) if ty != STREAM else "-")
        if got:
            got.send(b"hi")
            say(name, "passed socket works", lens(lambda: d.recv(10, DW)))
            got.close()
        d.close()
        # A peek gives the passed sockets too, as new descriptors.
        c, d = pair(STREAM)
        socket.send_fds(a, [b"p"], [c.fileno()])
        c.close()
        counts = []
        for flags in (socket.MSG_PEEK, 0):
            data, anc, fl, _ = b.recvmsg(10, socket.CMSG_SPACE(8), flags)
            fds = [x for lvl, t, v in anc if t == socket.SCM_RIGHTS
                   for x in array.array("i", v[: len(v) - len(v) % 4])]
            counts.append((data, len(fds)))
            for fd in fds:
                os.write(fd, b"via")
                os.close(fd)
        # (Blocking reads: FUSE passes the closes on after close() returns.)
        rcvtimeo(d, 2)
        say(name, "peek then receive", counts, "peer reads", lens(lambda: d.recv(10)),
            lens(lambda: d.recv(10)))
        d.close()


def sizes():
    # 16 KiB and larger messages, and records of 1024 iovecs, taken whole.
    for name, ty in TYPES:
        for n in (16384, 20000, 100000):
            a, b = pair(ty)
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            payload = bytes(range(256)) * (n // 256) + b"e" * (n % 256)
            out = []
            t = threading.Thread(target=lambda: out.append(res(lambda: a.sendmsg([payload]))))
            t.start()
            got = bytearray()
            rcvtimeo(b, 3)
            while len(got) < n:
                d, _, fl, _ = b.recvmsg(n + 10)
                if not d:
                    break
                got += d
                if ty != STREAM:
                    break
            t.join()
            say(name, f"sendmsg/recvmsg {n}", out, len(got), bytes(got) == payload)
            a.close()
            b.close()
        a, b = pair(ty)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        iov = [bytes([i % 251]) * 64 for i in range(1024)]
        r = res(lambda: a.sendmsg(iov))
        bufs = [bytearray(64) for _ in range(1024)]
        rcvtimeo(b, 3)
        if ty == STREAM:
            got = bytearray()
            while len(got) < 65536:
                d = b.recv(65536)
                if not d:
                    break
                got += d
            same = bytes(got) == b"".join(iov)
            got = len(got)
        else:
            got = b.recvmsg_into(bufs)[0]
            same = b"".join(bufs) == b"".join(iov)
        say(name, "1024 iovecs", r, got, same)


def libc_mmsg():
    libc = LIBC

    class timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

    def vec(n, size, fill=None):
        bufs = [ctypes.create_string_buffer(fill or size, size) for _ in range(n)]
        iovs = [IOVec(ctypes.cast(b, ctypes.c_void_p), size) for b in bufs]
        m = (MMsgHdr * n)()
        for i in range(n):
            m[i].hdr.iov = ctypes.pointer(iovs[i])
            m[i].hdr.iovlen = 1
        return m, (bufs, iovs)

    def raw_recvmsg(s, size, flags=0):
        """recvmsg with no name and no control buffer, as C programs call it
        (CPython always passes a name buffer)."""
        buf = ctypes.create_string_buffer(size)
        iov = IOVec(ctypes.cast(buf, ctypes.c_void_p), size)
        h = MsgHdr()
        h.iov = ctypes.pointer(iov)
        h.iovlen = 1
        r = libc.recvmsg(s.fileno(), ctypes.byref(h), flags)
        if r < 0:
            return errno.errorcode[ctypes.get_errno()]
        return r, buf.raw[: max(0, min(r, size))], flagnames(h.flags)

    def raw_recvmsg_iovs(s, n, size):
        bufs = [ctypes.create_string_buffer(size) for _ in range(n)]
        iovs = (IOVec * n)(*[IOVec(ctypes.cast(x, ctypes.c_void_p), size) for x in bufs])
        h = MsgHdr()
        h.iov = ctypes.cast(iovs, ctypes.POINTER(IOVec))
        h.iovlen = n
        r = libc.recvmsg(s.fileno(), ctypes.byref(h), 0)
        if r < 0:
            return errno.errorcode[ctypes.get_errno()]
        return r, b"".join(x.raw for x in bufs)[:r], flagnames(h.flags)

    for name, ty in TYPES:
        a, b = pair(ty)
        rcvtimeo(b, 1)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        iov = [bytes([i % 251]) * 64 for i in range(1024)]
        a.sendmsg(iov)
        a.send(b"next")
        r = raw_recvmsg_iovs(b, 1024, 64)
        say(name, "raw recvmsg into 1024 iovecs", r[0], r[1] == b"".join(iov), r[2],
            lens(lambda: b.recv(100, DW)))
        a.send(b"abcdef")
        say(name, "raw recvmsg 3 of 6", raw_recvmsg(b, 3))
        c, d = pair(STREAM)
        socket.send_fds(a, [b"m"], [c.fileno()])
        c.close()
        say(name, "raw recvmsg with sockets", raw_recvmsg(b, 10), "peer reads",
            lens(lambda: d.recv(10, DW)))

    # Bad vectors: more than UIO_MAXIOV, or none where one is counted.
    for name, ty in TYPES:
        a, b = pair(ty)
        one = ctypes.create_string_buffer(4)
        iovs = (IOVec * 1025)(*[IOVec(ctypes.cast(one, ctypes.c_void_p), 1)] * 1025)
        h = MsgHdr()
        h.iov = ctypes.cast(iovs, ctypes.POINTER(IOVec))
        h.iovlen = 1025
        r1 = libc.sendmsg(a.fileno(), ctypes.byref(h), socket.MSG_DONTWAIT)
        e1 = errno.errorcode.get(ctypes.get_errno()) if r1 < 0 else r1
        a.send(b"q")
        h = MsgHdr()
        h.iovlen = 1
        r2 = libc.recvmsg(b.fileno(), ctypes.byref(h), socket.MSG_DONTWAIT)
        e2 = errno.errorcode.get(ctypes.get_errno()) if r2 < 0 else r2
        say(name, "1025 iovecs", e1, "no iovec", e2)

    # A blocking seqpacket peek with MSG_TRUNC and no buffer: the record's length.
    a, b = pair(SEQ)
    rcvtimeo(b, 3)
    threading.Timer(0.2, lambda: a.send(b"r" * 777)).start()
    peek_trunc = socket.MSG_PEEK | socket.MSG_TRUNC
    r = libc.recvfrom(b.fileno(), None, ctypes.c_size_t(0), peek_trunc, None, None)
    say("seqpacket blocking recvfrom(NULL, PEEK|TRUNC)", r, lens(lambda: b.recv(1000, DW)))

    # recvmmsg looks at its timeout after each datagram only.
    a, b = pair(DGRAM)
    rcvtimeo(b, 2)
    a.send(b"one")
    m, keep = vec(2, 100)
    ts = timespec(0, 1)
    t = time.monotonic()
    r = libc.recvmmsg(b.fileno(), m, 2, 0, ctypes.byref(ts))
    say("recvmmsg 1 ns", r, m[0].len, "quick", time.monotonic() - t < 1.0, "left", ts.sec, ts.nsec)
    a.send(b"two")
    a.send(b"three")
    m, keep = vec(3, 100)
    ts = timespec(5, 0)
    r = libc.recvmmsg(b.fileno(), m, 3, MSG_WAITFORONE, ctypes.byref(ts))
    say("recvmmsg waitforone", r, [m[i].len for i in range(r)])
    ts = timespec(0, -1)
    r = libc.recvmmsg(b.fileno(), m, 1, DW, ctypes.byref(ts))
    say("recvmmsg bad timeout", r, errno.errorcode[ctypes.get_errno()])
    # A signal while recvmmsg waits for its second datagram under SO_RCVTIMEO: the
    # count of the first, and EINTR is left for the next call (__sys_recvmmsg's
    # sk_err). (Without a timeout Linux leaves ERESTARTSYS, errno 512 to the next
    # call; udsfs leaves nothing: not compared.)
    a, b = pair(DGRAM)
    rcvtimeo(b, 5)
    a.send(b"one")
    old = signal.signal(signal.SIGUSR1, lambda *_: None)
    main = threading.get_ident()
    kick = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGUSR1))
    kick.start()
    m, keep = vec(2, 100)
    r = libc.recvmmsg(b.fileno(), m, 2, 0, None)
    kick.join()
    signal.signal(signal.SIGUSR1, old)
    a.send(b"two")
    got = ctypes.create_string_buffer(100)
    nxt = [libc.recv(b.fileno(), got, ctypes.c_size_t(100), DW) for _ in range(2)]
    nxt = [n if n >= 0 else errno.errorcode[ctypes.get_errno()] for n in nxt]
    say("recvmmsg signalled after a datagram", r, m[0].len, "next calls", nxt)
    a.send(b"three")
    kick = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGUSR1))
    old = signal.signal(signal.SIGUSR1, lambda *_: None)
    kick.start()
    m, keep = vec(2, 100)
    r = libc.recvmmsg(b.fileno(), m, 2, 0, None)
    kick.join()
    signal.signal(signal.SIGUSR1, old)
    err = b.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    say("recvmmsg signalled, then SO_ERROR", r, errno.errorcode.get(err, err), b.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
    # sendmmsg: the count of what went, and the partial bytes of the last one.
    a, b = pair(STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    m, keep = vec(3, 300000, b"q" * 300000)
    r = libc.sendmmsg(a.fileno(), m, 3, DW)
    say("sendmmsg stream partial", r, 0 < m[0].len < 300000)
    a, b = pair(DGRAM)
    m, keep = vec(2, 10, b"d" * 10)
    m[1].hdr.iov[0].len = 300000
    r = libc.sendmmsg(a.fileno(), m, 2, 0)
    say("sendmmsg dgram second too big", r, m[0].len, lens(lambda: b.recv(100, DW)),
        lens(lambda: b.recv(100, DW)))


def epipe_count():
    # A blocking stream send cut off by the peer's close returns the count
    # that went (no EPIPE, no SIGPIPE); nothing sent: EPIPE.
    for flags in (socket.MSG_NOSIGNAL, 0):
        a, b = pair(STREAM)
        out = []
        t = threading.Thread(target=lambda: out.append(res(lambda: a.send(b"p" * 2000000, flags))))
        t.start()
        time.sleep(0.3)
        b.recv(1000)
        b.close()
        t.join()
        r = out[0]
        say("stream send cut off", flags, r if isinstance(r, str) else 0 < r < 2000000,
            "then", res(lambda: a.send(b"x", socket.MSG_NOSIGNAL)))


def blocking():
    # Blocking calls through the message paths wait and then get their answer.
    a, b = pair(DGRAM)
    threading.Timer(0.2, lambda: a.send(b"late")).start()
    say("blocking recvfrom", lens(lambda: b.recvfrom(100)))
    threading.Timer(0.2, lambda: a.send(b"late2")).start()
    say("blocking peek", res(lambda: b.recv(100, socket.MSG_PEEK)), res(lambda: b.recv(100)))
    threading.Timer(0.2, lambda: a.send(b"late3")).start()
    d, anc, fl, _ = b.recvmsg(100, 64)
    say("blocking recvmsg", d, flagnames(fl))
    rcvtimeo(b, 0.2)
    say("recvfrom times out", res(lambda: b.recvfrom(100)), res(lambda: b.recv(100, socket.MSG_PEEK)))
    # One receive is timed once: a MSG_WAITALL receive larger than one ioctl,
    # fed in pieces but never stalled for a whole timeout.
    c, d = pair(STREAM)
    rcvtimeo(d, 0.5)

    def feed():
        for _ in range(10):
            time.sleep(0.3)
            res(lambda: c.send(b"w" * 15000))

    threading.Thread(target=feed, daemon=True).start()
    t = time.monotonic()
    r = lens(lambda: d.recv(100000, socket.MSG_WAITALL))
    say("slow writer: MSG_WAITALL cut by SO_RCVTIMEO", isinstance(r, int) and 0 < r < 50000,
        "within 1.5 s", time.monotonic() - t < 1.5)
    b.setblocking(False)
    say("O_NONBLOCK peek", res(lambda: b.recv(100, socket.MSG_PEEK)), res(lambda: b.recvmsg(100, 64)))



def rights_of(anc):
    return [x for lvl, t, v in anc if lvl == socket.SOL_SOCKET and t == socket.SCM_RIGHTS
            for x in array.array("i", v[: len(v) - len(v) % 4])]


def waitall_glue():
    """A stream MSG_WAITALL recvmsg that waits for its rest: unix_stream_read_generic
    glues the chunks that come, the passed files of the one that brings them
    included, and ends with that chunk; with SO_PASSCRED it never glues two
    senders' chunks (it ends short at the second sender's)."""
    def got(s, n, flags=socket.MSG_WAITALL):
        data, anc, fl, _ = s.recvmsg(n, socket.CMSG_SPACE(8) + socket.CMSG_SPACE(12), flags)
        fds = rights_of(anc)
        for fd in fds:
            os.close(fd)
        creds = [struct.unpack("iII", v[:12])[0] == os.getpid() for lvl, t, v in anc
                 if t == socket.SCM_CREDENTIALS]
        return data, len(fds), flagnames(fl), creds

    def later(sec, f):
        t = threading.Timer(sec, f)
        t.start()
        return t

    r, w = os.pipe()
    a, b = pair(STREAM)
    rcvtimeo(b, 3)
    a.send(b"plain")
    t = later(0.3, lambda: socket.send_fds(a, [b"x" * 7], [r]))
    say("waitall: rights in the chunk that completes it", got(b, 12))
    t.join()
    # The chunk that passes ends the receive, short of MSG_WAITALL's size.
    socket.send_fds(a, [b"abc"], [r])
    t = later(0.3, lambda: a.send(b"later"))
    say("waitall: rights in the first chunk", got(b, 8))
    t.join()
    say("waitall: then", got(b, 5))
    # Queued before the call: the same.
    a.send(b"plain")
    socket.send_fds(a, [b"y" * 7], [r])
    a.send(b"after")
    say("waitall: queued, rights in the second chunk", got(b, 17))
    say("waitall: queued, then", got(b, 5))
    # With SO_PASSCRED, another sender's chunk (root names its parent's pid) ends it.
    b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    other = struct.pack("iII", os.getppid(), os.getuid(), os.getgid())
    a.send(b"mine")
    t = later(0.3, lambda: a.sendmsg([b"them"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, other)]))
    say("waitall: passcred, another sender's chunk comes", got(b, 8))
    t.join()
    say("waitall: passcred, then", got(b, 8, 0))
    a.send(b"mine")
    res(lambda: a.sendmsg([b"them"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, other)]))
    say("waitall: passcred, queued", got(b, 8))
    say("waitall: passcred, queued, then", got(b, 8, 0))
    for f in (a, b):
        f.close()
    os.close(r)
    os.close(w)


def rights_at_nofile():
    """Two sockets and a pipe received with two descriptor slots left: whatever
    is installed comes back in SCM_RIGHTS and the rest is closed (MSG_CTRUNC),
    nothing stays open unreported (udsfs claims files before it opens the
    sockets, so a file claimed for a socket that could not open must close)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for name, ty in TYPES:
        a, b = pair(ty)
        rcvtimeo(b, 1)
        c1, d1 = pair(STREAM)
        c2, d2 = pair(STREAM)
        r, w = os.pipe()
        socket.send_fds(a, [b"x"], [c1.fileno(), c2.fileno(), r])
        for f in (c1, c2):
            f.close()
        os.close(r)
        # exactly two free slots below the limit: the two lowest free numbers
        probe = [os.dup(0), os.dup(0)]
        for fd in probe:
            os.close(fd)
        before = open_fds()
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(probe) + 1, hard))
        try:
            data, anc, fl, _ = b.recvmsg(10, socket.CMSG_SPACE(12))
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        got = [x for lvl, t, v in anc if t == socket.SCM_RIGHTS
               for x in array.array("i", v[: len(v) - len(v) % 4])]
        # (each listing holds one descriptor of its own: counts cancel it)
        leaked = len(open_fds()) - len(before) - len(got)
        whole = len(got) == 3 or bool(fl & socket.MSG_CTRUNC)
        # (how many are installed differs: udsfs claims the files first, so the
        # pipe takes a slot the kernel would give the second socket; README)
        say(name, "rights at RLIMIT_NOFILE", data, "leaked", leaked, "ctrunc or all", whole)
        for fd in got:
            os.close(fd)
        for f in (a, b, d1, d2):
            f.close()
        os.close(w)


def main():
    where()
    sys.setswitchinterval(0.001)
    for section in (big_peek, truncation, zero_length, rights, rights_at_nofile, sizes,
                    libc_mmsg, epipe_count, blocking, waitall_glue):
        # A section that fails says so and the rest still run.
        try:
            section()
        except Exception as e:
            say(section.__name__, "raised", type(e).__name__, e)
    say("done")


if __name__ == "__main__":
    main()

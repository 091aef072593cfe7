#!/usr/bin/env python3
"""The socket API as an unmodified Python program uses it. run_python.sh runs this
once on kernel sockets (BASE a plain directory) and once through `udsfs run` (BASE
in the mount) and compares the lines it prints; paths print as BASE/...

usage: run_checks.py BASE MODE   (MODE: kernel or udsfs)"""
import array, errno, os, signal, socket, struct, sys, fcntl, termios, threading

BASE, MODE = sys.argv[1], sys.argv[2]
ME = (os.getpid(), os.getuid(), os.getgid())


def show(label, value):
    text = repr(value).replace(repr(BASE)[1:-1], "BASE")
    print(f"{label}: {text}", flush=True)


def err(f):
    try:
        return ("ok", f())
    except OSError as e:
        return ("errno", errno.errorcode.get(e.errno, e.errno))


def on_udsfs(s):
    """Where the descriptor lives: the check that the run really used udsfs."""
    link = os.readlink(f"/proc/self/fd/{s.fileno()}")
    return "udsfs" if "/.udsfs/sock/" in link else "kernel"


# socketpair: data, fstat, options, queue ioctls
a, b = socket.socketpair()
print(f"where: {on_udsfs(a)}")
a.send(b"hello")
buf = array.array("i", [0])
fcntl.ioctl(b.fileno(), termios.FIONREAD, buf)
show("pair FIONREAD", buf[0])
show("pair recv", b.recv(100))
show("pair fstat is socket", oct(os.fstat(a.fileno()).st_mode & 0o170000))
for name in ("SO_TYPE", "SO_DOMAIN", "SO_PROTOCOL", "SO_ACCEPTCONN", "SO_ERROR", "SO_PASSCRED"):
    show(f"pair {name}", a.getsockopt(socket.SOL_SOCKET, getattr(socket, name)))
pc = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
show("pair peercred is mine", pc == ME)
show("pair name", (a.getsockname(), a.getpeername()))

# MSG_PEEK, MSG_DONTWAIT, O_NONBLOCK
a.send(b"abc")
show("peek", b.recv(3, socket.MSG_PEEK))
show("after peek", b.recv(10))
show("dontwait empty", err(lambda: b.recv(10, socket.MSG_DONTWAIT)))
b.setblocking(False)
show("nonblocking empty", err(lambda: b.recv(10)))
b.setblocking(True)

# SIGPIPE exactly when Linux sends it
pipes = []
signal.signal(signal.SIGPIPE, lambda *_: pipes.append(1))
c, d = socket.socketpair()
d.close()
show("send to closed peer", err(lambda: c.send(b"x")))
show("sigpipes", len(pipes))
show("nosignal send to closed peer", err(lambda: c.send(b"x", socket.MSG_NOSIGNAL)))
show("sigpipes after nosignal", len(pipes))
e, f = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
f.close()
show("seqpacket send to closed peer", err(lambda: e.send(b"x")))
show("sigpipes after seqpacket", len(pipes))
signal.signal(signal.SIGPIPE, signal.SIG_IGN)

# a stream server on a path
path = os.path.join(BASE, "srv.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
print(f"server where: {on_udsfs(srv)}")
show("server name", srv.getsockname())
show("server SO_ACCEPTCONN", srv.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
show("server FIONREAD", err(lambda: fcntl.ioctl(srv.fileno(), termios.FIONREAD, buf)))
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect(path)
conn, addr = srv.accept()
print(f"accepted where: {on_udsfs(conn)}")
show("accepted from", addr)
show("client peer", cli.getpeername())
show("conn name", conn.getsockname())
pc = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
show("SO_PEERCRED is the client", pc == ME)
show("connect again", err(lambda: cli.connect(path)))
show("connect missing", err(lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(BASE, "none"))))
show("bind taken", err(lambda: socket.socket(socket.AF_UNIX).bind(path)))

# a megabyte each way, MSG_WAITALL
blob = os.urandom(1 << 20)
sender = threading.Thread(target=cli.sendall, args=(blob,))
sender.start()
got = b""
while len(got) < len(blob):
    got += conn.recv(len(blob) - len(got), socket.MSG_WAITALL)
sender.join()
show("1 MiB stream intact", got == blob)
cli.sendall(b"0123456789")
show("waitall 10", conn.recv(10, socket.MSG_WAITALL))

# passing sockets: send_fds / recv_fds
p1, p2 = socket.socketpair()
socket.send_fds(cli, [b"fds"], [p1.fileno()])
msg, fds, flags, _ = socket.recv_fds(conn, 100, 4)
show("recv_fds", (msg, len(fds), flags))
passed = socket.socket(fileno=fds[0])
p2.send(b"through the passed socket")
show("passed socket reads", passed.recv(100))
show("passed socket type", passed.type)
socket.send_fds(cli, [b"two"], [p1.fileno(), p2.fileno()])
msg, fds, flags, _ = socket.recv_fds(conn, 100, 1)
show("recv_fds room for one", (msg, len(fds), bool(flags & socket.MSG_CTRUNC)))

# shutdown
cli.shutdown(socket.SHUT_WR)
show("after peer SHUT_WR", conn.recv(10))
cli.close()
conn.close()
srv.close()
show("connect after close", err(lambda: socket.socket(socket.AF_UNIX).connect(path)))

# datagrams: abstract names, autobind, credentials, truncation, big messages
name = f"\0udsfs-checks-{os.getpid()}"
ds = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
ds.bind(name)
show("abstract name", ds.getsockname() == name.encode())
dc = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dc.bind("")
auto = dc.getsockname()
show("autobind shape", (len(auto), auto[:1]))
dc.sendto(b"dgram", name)
data, frm = ds.recvfrom(100)
show("recvfrom", (data, frm == auto))
ds.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
dc.sendto(b"creds", name)
data, anc, flags, frm = ds.recvmsg(100, socket.CMSG_SPACE(12))
creds = [struct.unpack("3i", d) for (lvl, t, d) in anc if t == socket.SCM_CREDENTIALS]
show("SCM_CREDENTIALS", (data, creds == [ME]))
dc.sendmsg([b"explicit"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", *ME))], 0, name)
data, anc, flags, frm = ds.recvmsg(100, socket.CMSG_SPACE(12))
show("explicit SCM_CREDENTIALS", (data, len(anc)))
dc.sendto(b"0123456789", name)
data, anc, flags, frm = ds.recvmsg(4)
show("truncated", (data, bool(flags & socket.MSG_TRUNC)))
dc.sendto(b"0123456789", name)
bb = bytearray(4)
show("MSG_TRUNC length", ds.recv_into(bb, 4, socket.MSG_TRUNC))
big = os.urandom(100000)
dc.sendto(big, name)
data, frm = ds.recvfrom(200000)
show("100000-byte datagram", (len(data), data == big, frm == auto))
dc.sendto(big, name)
show("big datagram truncated", len(ds.recv(50000)))
dc.connect(name)
dc.send(b"connected")
show("connected dgram", ds.recv(100))
show("dgram peer", dc.getpeername() == name.encode())
dpath = os.path.join(BASE, "d.sock")
dp = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dp.bind(dpath)
dq = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dq.sendto(b"to a path", dpath)
show("dgram on a path", dp.recvfrom(100))
# a full backlog: O_NONBLOCK connect gets EAGAIN; a blocking one waits for accept
lpath = os.path.join(BASE, "backlog.sock")
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(lpath)
ls.listen(0)
held = []
results = []
for i in range(3):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setblocking(False)
    results.append(err(lambda: c.connect(lpath)))
    held.append(c)
show("nonblocking connects on backlog 0", results)
show("SO_ERROR after", held[-1].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
timer = threading.Timer(0.3, lambda: ls.accept())
timer.start()
bc = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
show("blocking connect on a full backlog", err(lambda: bc.connect(lpath)))
timer.join()

# MSG_CMSG_CLOEXEC on received sockets
q1, q2 = socket.socketpair()
socket.send_fds(q1, [b"c"], [q1.fileno()])
msg, anc, flags, _ = q2.recvmsg(10, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC)
rfd = struct.unpack("i", anc[0][2][:4])[0]
show("MSG_CMSG_CLOEXEC", bool(fcntl.fcntl(rfd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
os.close(rfd)

# sendmmsg / recvmmsg (through the C library, as a C program calls them)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
m1, m2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
bufs = [ctypes.create_string_buffer(b"msg%d" % i) for i in range(3)]
iovs = [iovec(ctypes.cast(b, ctypes.c_void_p), 4) for b in bufs]
vec = (mmsghdr * 3)()
for i in range(3):
    vec[i].hdr.iov = ctypes.pointer(iovs[i])
    vec[i].hdr.iovlen = 1
show("sendmmsg", libc.sendmmsg(m1.fileno(), vec, 3, 0))
rbufs = [ctypes.create_string_buffer(16) for _ in range(4)]
riovs = [iovec(ctypes.cast(b, ctypes.c_void_p), 16) for b in rbufs]
rvec = (mmsghdr * 4)()
for i in range(4):
    rvec[i].hdr.iov = ctypes.pointer(riovs[i])
    rvec[i].hdr.iovlen = 1
n = libc.recvmmsg(m2.fileno(), rvec, 4, socket.MSG_DONTWAIT, None)
show("recvmmsg", (n, [rbufs[i].raw[:rvec[i].len] for i in range(max(n, 0))]))
# epoll readiness, zero-length datagrams, flags at socketpair(), abstract streams
from lanes_lib import epoll_around_send
e1, e2 = socket.socketpair()
epoll_before, epoll_after = epoll_around_send(e1, e2)
show("epoll before", epoll_before)
show("epoll after", epoll_after)
z1, z2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
z1.send(b"")
show("zero-length datagram", z2.recv(10))
nb1, nb2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
show("SOCK_NONBLOCK pair", (nb1.getblocking(), err(lambda: nb2.recv(1))))
aname = f"\0udsfs-stream-{os.getpid()}"
asrv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
asrv.bind(aname)
asrv.listen(1)
acli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
acli.connect(aname)
aconn, aaddr = asrv.accept()
acli.send(b"abstract stream")
show("abstract stream", (aconn.recv(100), aaddr, acli.getpeername() == aname.encode()))
show("connect to an unbound abstract name", err(lambda: socket.socket(socket.AF_UNIX).connect("\0udsfs-nobody")))
show("dgram to an unbound abstract name", err(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", "\0udsfs-nobody")))
# options set before the socket moved to udsfs are kept; SO_SNDBUF as Linux sets it
pre = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
pre.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
pre.setblocking(False)
pre.bind(f"\0udsfs-pre-{os.getpid()}")
show("kept across the bind", (pre.getsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED), pre.getblocking()))
pre.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
show("SO_SNDBUF", pre.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
pre.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
show("SO_SNDBUF minimum", pre.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
print("done")

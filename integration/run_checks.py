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
print("done")

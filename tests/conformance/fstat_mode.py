"""fstat, fchmod and fchown of socket descriptors (issue 28 item 3): Linux gives
each socket an inode (sockfs) with mode S_IFSOCK|0777 and the creator's fsuid and
fsgid (accept: the acceptor's); fchmod and fchown change it, under the usual
checks (the owner for chmod, CAP_CHOWN for chown), and leave a bound name's node
as it was. A socket passed with SCM_RIGHTS keeps its inode: its receiver sees the
sender's mode and owner and may not change them. Run on kernel sockets and
through `udsfs run` with each front (integration/fstat_mode.sh); the outputs must
be equal line by line. Needs root.
Usage: fstat_mode.py DIR (where to bind names)."""

import array
import ctypes
import os
import socket
import stat
import sys

from differential import Child, become, res, say, where

DIR = os.path.realpath(sys.argv[1])
NOBODY = 65534
USER = 1000


def st(fd):
    s = os.fstat(fd)
    kind = "sock" if stat.S_ISSOCK(s.st_mode) else oct(stat.S_IFMT(s.st_mode))
    return f"{kind} {stat.S_IMODE(s.st_mode):o} {s.st_uid}:{s.st_gid}"


def path_mode(p):
    return f"{stat.S_IMODE(os.stat(p).st_mode):o}"


def own_userns():
    """This process (uid USER) in a user namespace of its own, as its root."""
    libc = ctypes.CDLL(None, use_errno=True)
    # setresuid made the process undumpable: its /proc/self files root's.
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")
    for f, text in [("setgroups", "deny"), ("uid_map", f"0 {USER} 1"), ("gid_map", f"0 {USER} 1")]:
        with open(f"/proc/self/{f}", "w") as fh:
            fh.write(text)


def send_fd(ch, fd):
    ch.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def recv_fd(ch):
    _, anc, _, _ = ch.recvmsg(1, socket.CMSG_SPACE(4))
    return array.array("i", anc[0][2])[0]


where()

# 1. Root's own sockets: a pair, a bound socket, fchmod and fchown.
x, y = socket.socketpair()
say("pair:", st(x.fileno()), "/", st(y.fileno()))
say("fchmod(x, 0640):", res(lambda: os.fchmod(x.fileno(), 0o640)), st(x.fileno()))
say("fchown(x, 1, 2):", res(lambda: os.fchown(x.fileno(), 1, 2)), st(x.fileno()))
say("the other end:", st(y.fileno()))
say("fchown(x, -1, 3):", res(lambda: os.fchown(x.fileno(), -1, 3)), st(x.fileno()))
say("fchmod(x, 01700):", res(lambda: os.fchmod(x.fileno(), 0o1700)), st(x.fileno()))
x.sendall(b"still a socket")
say("x to y after all that:", y.recv(64))
b = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
b.bind(f"{DIR}/b.sock")
before = path_mode(f"{DIR}/b.sock")
say("fchmod(bound, 0600):", res(lambda: os.fchmod(b.fileno(), 0o600)), st(b.fileno()))
say("the bound name's mode unchanged:", path_mode(f"{DIR}/b.sock") == before)

# 2. A socket passed to another user: root's, mode 0000. The receiver sees root's
# mode and owner, may not change them, and uses the socket all the same.
ch_a, ch_b = socket.socketpair()
p, q = socket.socketpair()
os.fchmod(p.fileno(), 0)


def nobody_receives(out):
    become(NOBODY)
    fd = recv_fd(ch_b)
    out.append(f"nobody received root's 0000 socket: {st(fd)}")
    out.append(f"nobody fchmod 0666: {res(lambda: os.fchmod(fd, 0o666))}")
    out.append(f"nobody fchown to itself: {res(lambda: os.fchown(fd, NOBODY, NOBODY))}")
    out.append(f"nobody fchown group only: {res(lambda: os.fchown(fd, -1, NOBODY))}")
    out.append(f"nobody fchown -1 -1: {res(lambda: os.fchown(fd, -1, -1))}")
    out.append(f"after those: {st(fd)}")
    os.write(fd, b"from nobody")
    # Its own sockets: nobody's, and changed by it as the owner.
    m, n = socket.socketpair()
    out.append(f"nobody's own pair: {st(m.fileno())}")
    out.append(f"nobody fchmod its own 0600: {res(lambda: os.fchmod(m.fileno(), 0o600))} {st(m.fileno())}")
    out.append(f"nobody fchown its own to root: {res(lambda: os.fchown(m.fileno(), 0, 0))}")
    out.append(f"nobody fchown its own to itself: {res(lambda: os.fchown(m.fileno(), NOBODY, NOBODY))}")
    # Its own socket, mode 0000, passed to itself: received and used.
    os.fchmod(m.fileno(), 0)
    c1, c2 = socket.socketpair()
    send_fd(c1, m.fileno())
    got = recv_fd(c2)
    out.append(f"its own 0000 socket received back: {st(got)}")
    os.write(got, b"self")
    out.append(f"read on the other end: {n.recv(16)}")


send_fd(ch_a, p.fileno())
Child(nobody_receives).say_lines()
say("root reads what nobody sent:", q.recv(64))
say("root's end after nobody's tries:", st(p.fileno()))

# 3. Accept makes a new inode, the acceptor's: nobody accepts on root's listener.
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(f"{DIR}/l.sock")
l.listen(4)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(f"{DIR}/l.sock")


def nobody_accepts(out):
    become(NOBODY)
    a, _ = l.accept()
    out.append(f"accepted by nobody: {st(a.fileno())}")
    out.append(f"its fchmod 0700: {res(lambda: os.fchmod(a.fileno(), 0o700))} {st(a.fileno())}")


Child(nobody_accepts).say_lines()
say("the connecting end, root's:", st(c.fileno()))
say("the listener:", st(l.fileno()))

# 4. A user in a user namespace of its own, as its root: root's socket passed in
# shows unmapped owners; it may change neither; its own socket's ids are its.
r1, r2 = socket.socketpair()


def userns_root(out):
    become(USER)
    own_userns()
    fd = recv_fd(ch_b)
    out.append(f"userns root received root's socket: {st(fd)}")
    out.append(f"userns root fchmod it: {res(lambda: os.fchmod(fd, 0o600))}")
    out.append(f"userns root fchown it to 0: {res(lambda: os.fchown(fd, 0, 0))}")
    out.append(f"after those: {st(fd)}")
    m, _ = socket.socketpair()
    out.append(f"userns root's own pair: {st(m.fileno())}")
    out.append(f"fchown its own to 0 0: {res(lambda: os.fchown(m.fileno(), 0, 0))}")
    out.append(f"fchown its own to 5 5 (unmapped): {res(lambda: os.fchown(m.fileno(), 5, 5))}")
    out.append(f"fchmod its own 0750: {res(lambda: os.fchmod(m.fileno(), 0o750))} {st(m.fileno())}")


send_fd(ch_a, r1.fileno())
Child(userns_root).say_lines()
say("root's socket after the userns tries:", st(r1.fileno()))

# 5. One inode number per socket: a passed socket's descriptor fstats its sender's
# st_ino, in the same process and in another (Dovecot's imap checks a connection
# imap-login passed it so), as a dup's does; a pair's two ends, an accepted socket,
# its connecting peer and the listener each have their own.
def ino(fd):
    return os.fstat(fd).st_ino


i1, i2 = socket.socketpair()
send_fd(ch_a, i1.fileno())
got = recv_fd(ch_b)
say("passed: the sender's st_ino:", ino(got) == ino(i1.fileno()))
say("dup: the same st_ino:", ino(os.dup(i1.fileno())) == ino(i1.fileno()))
say("the pair's ends differ:", ino(i1.fileno()) != ino(i2.fileno()))
sent = ino(i2.fileno())


def other_receives(out):
    become(NOBODY)
    fd = recv_fd(ch_b)
    out.append(f"passed to another process: the sender's st_ino: {ino(fd) == sent}")


send_fd(ch_a, i2.fileno())
Child(other_receives).say_lines()
l5 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l5.bind(f"{DIR}/l5.sock")
l5.listen(1)
c5 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c5.connect(f"{DIR}/l5.sock")
a5, _ = l5.accept()
inos = {ino(l5.fileno()), ino(c5.fileno()), ino(a5.fileno())}
say("listener, connecting and accepted: three st_ino:", len(inos) == 3)
say("done")

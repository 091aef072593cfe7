# Passes files of every kind over AF_UNIX socketpairs and prints what the
# receiver gets. Run on kernel sockets and through `udsfs run`: the outputs
# must be equal (tests/conformance/programs.rs).
import os, select, socket, stat, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from differential import blocked_send_with_file  # noqa: E402

def kind(fd):
    m = os.fstat(fd).st_mode
    for name, test in (("reg", stat.S_ISREG), ("fifo", stat.S_ISFIFO), ("sock", stat.S_ISSOCK)):
        if test(m):
            return name
    return "other"

def files():
    """(label, fd, how to read it back) for each kind of file."""
    out = []
    t = tempfile.TemporaryFile()
    t.write(b"regular file\n"); t.flush()
    out.append(("regular", t.fileno(), lambda fd: os.pread(fd, 100, 0)))
    r, w = os.pipe()
    os.write(w, b"through a pipe\n")
    out.append(("pipe", r, lambda fd: os.read(fd, 100)))
    e = os.eventfd(7)
    out.append(("eventfd", e, lambda fd: os.eventfd_read(fd)))
    mf = os.memfd_create("fds")
    os.write(mf, b"memfd bytes\n")
    out.append(("memfd", mf, lambda fd: os.pread(fd, 100, 0)))
    k = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.append(("inet socket", k.fileno(), lambda fd: socket.socket(fileno=os.dup(fd)).type.name))
    c, d = socket.socketpair()
    d.send(b"to the passed unix socket")
    out.append(("unix socket", c.fileno(), lambda fd: socket.socket(fileno=os.dup(fd)).recv(100)))
    return out, (t, w, k, c, d)

for ty in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    fs, keep = files()
    n = socket.send_fds(a, [b"hello"], [fd for _, fd, _ in fs])
    msg, got, flags, _ = socket.recv_fds(b, 100, 10)
    print(ty.name, "sent", n, "got", msg, len(got), "fds, flags", flags)
    for (label, _, read), fd in zip(fs, got):
        print("  ", label, kind(fd), read(fd))
        os.close(fd)
    # Closing the receiver with a message unread closes the files it carries:
    # the reader of a pipe whose only other write end was in flight sees EOF.
    r, w = os.pipe()
    socket.send_fds(a, [b"unread"], [w])
    os.close(w)
    b.close()
    # (udsfs closes them when its daemon handles the release: wait for it.)
    ready = select.select([r], [], [], 10)[0]
    print("  pipe EOF after the receiver closed:", bool(ready) and os.read(r, 10) == b"")
    os.close(r)
    # Too small a control buffer: the rest is cut (MSG_CTRUNC) and closed.
    a2, b2 = socket.socketpair(socket.AF_UNIX, ty)
    r, w = os.pipe()
    socket.send_fds(a2, [b"x"], [r, w])
    os.close(w)
    msg, got, flags, _ = socket.recv_fds(b2, 10, 1)
    print("  one of two:", len(got), "ctrunc", bool(flags & socket.MSG_CTRUNC))
    for fd in got:
        os.close(fd)
    os.close(r)
    for s in (a, a2, b2):
        s.close()
    for f in keep:
        f.close() if hasattr(f, "close") else os.close(f)
# A send with files that must wait for room: it blocks, then goes through
# whole once the reader drains the queue.
for ty in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    print(ty.name, "blocked send with a file:", *blocked_send_with_file(a, b))
    a.close(); b.close()
print("done")

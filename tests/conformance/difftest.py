"""What the differential programs run on kernel sockets and through `udsfs run`
share: results as errno names, flushed lines, and which sockets they got."""

import errno
import os
import socket


def res(f):
    """f's result ("ok" for None), or the errno name it failed with."""
    try:
        r = f()
        return r if r is not None else "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def say(*a):
    print(*a, flush=True)


def where():
    """`where: udsfs` when socketpair() gives udsfs sockets, else `where: kernel`."""
    a, b = socket.socketpair()
    udsfs = "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{a.fileno()}")
    a.close()
    b.close()
    say("where:", "udsfs" if udsfs else "kernel")

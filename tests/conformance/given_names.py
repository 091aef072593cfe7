"""Addresses as the program gave them: a socket bound with a relative path
reports that path, not an absolute one, in getsockname, getpeername,
recvfrom, recvmsg and accept (Linux keeps sun_path as given). Run once on
kernel sockets and once through `udsfs run` (integration/given_names.sh);
the outputs must be equal. Usage: given_names.py DIR (binds in DIR)."""

import os
import socket
import sys

from differential import res, say, where

DIR = os.path.realpath(sys.argv[1])


def shown(a):
    """An address with DIR, which differs between the runs, spelled DIR."""
    if isinstance(a, str) and a.startswith(DIR):
        return "DIR" + a[len(DIR) :]
    return repr(a)


def stream_names():
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind("./rel.sock")
    lst.listen()
    say("listener getsockname:", shown(lst.getsockname()))
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cli.connect("rel.sock")
    say("client getpeername:", shown(cli.getpeername()))
    say("client getsockname:", shown(cli.getsockname()))
    conn, addr = lst.accept()
    say("accept of an unnamed client:", shown(addr))
    say("accepted getsockname:", shown(conn.getsockname()))
    named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    named.bind("sub/../c2.sock")
    named.connect(os.path.join(DIR, "rel.sock"))
    conn2, addr2 = lst.accept()
    say("accept of a client bound as sub/../c2.sock:", shown(addr2))
    say("its getpeername:", shown(conn2.getpeername()))
    say("client connected by absolute path, getpeername:", shown(named.getpeername()))
    for s in (lst, cli, conn, named, conn2):
        s.close()


def dgram_names():
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d.bind("sub/d.sock")
    e = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    e.bind("./sub//e.sock")
    say("dgram getsockname:", shown(d.getsockname()), shown(e.getsockname()))
    e.sendto(b"x", "sub/d.sock")
    say("recvfrom:", res(lambda: shown(d.recvfrom(10)[1])))
    e.sendto(b"y", os.path.join(DIR, "sub", "d.sock"))
    say("recvmsg:", res(lambda: shown(d.recvmsg(10)[3])))
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.bind(os.path.join(DIR, "abs.sock"))
    a.sendto(b"z", "sub/d.sock")
    say("absolute getsockname:", shown(a.getsockname()))
    say("recvfrom an absolute name:", res(lambda: shown(d.recvfrom(10)[1])))
    e.connect("sub/d.sock")
    say("connected dgram getpeername:", shown(e.getpeername()))
    # The name stays as given after the program moves elsewhere.
    os.chdir("sub")
    say("after chdir, getsockname:", shown(d.getsockname()))
    os.chdir(DIR)
    for s in (d, e, a):
        s.close()


def seqpacket_names():
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lst.bind("sub/./sp.sock")
    lst.listen()
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cli.connect("./sub/sp.sock")
    say("seqpacket getpeername:", shown(cli.getpeername()))
    conn, _ = lst.accept()
    say("seqpacket accepted getsockname:", shown(conn.getsockname()))
    for s in (lst, cli, conn):
        s.close()


os.chdir(DIR)
os.mkdir("sub")
where()
stream_names()
dgram_names()
seqpacket_names()
say("done")

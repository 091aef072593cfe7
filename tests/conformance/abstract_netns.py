"""Abstract names per network namespace: a process that unshares its network
namespace (`unshare -n`) neither finds nor blocks the abstract names and
autobinds of the one it left, and processes in one namespace find each other's.
Run once on kernel sockets and once through `udsfs run`
(integration/abstract_netns.sh); the outputs must be equal. Needs root.
Usage: abstract_netns.py DIR (unused: every name here is abstract)."""

import os
import socket
import subprocess
import sys

from differential import res, say, where

STREAM, DGRAM = socket.SOCK_STREAM, socket.SOCK_DGRAM


def sock(ty, name=None):
    s = socket.socket(socket.AF_UNIX, ty)
    if name is not None:
        s.bind(name)
    return s


def connect(ty, name):
    return res(lambda: sock(ty).connect(name))


def child(tag, auto):
    """In a new network namespace: the parent's names are not there."""
    say("child: stream connect to the parent's listener:", connect(STREAM, f"\0{tag}-L"))
    say("child: sendto the parent's dgram name:", res(lambda: sock(DGRAM).sendto(b"x", f"\0{tag}-D")))
    say("child: sendto the parent's autobound name:", res(lambda: sock(DGRAM).sendto(b"x", auto)))
    own = sock(STREAM)
    say("child: bind the parent's listener name here:", res(lambda: own.bind(f"\0{tag}-L")))
    own.listen()
    say("child: autobind here:", res(lambda: sock(DGRAM).bind("")))
    # Another process of this namespace finds the name.
    pid = os.fork()
    if pid == 0:
        os._exit(0 if connect(STREAM, f"\0{tag}-L") == "ok" else 1)
    _, status = os.waitpid(pid, 0)
    say("child's child, same namespace: connect", "ok" if status == 0 else "refused")
    say("child: accept:", res(lambda: own.accept() and None))


def parent():
    tag = f"netns-{os.getpid()}"
    lst = sock(STREAM, f"\0{tag}-L")
    lst.listen()
    d = sock(DGRAM, f"\0{tag}-D")
    a = sock(DGRAM, "")
    auto = a.getsockname()
    say("parent: autobound name length:", len(auto))
    r = subprocess.run(
        ["unshare", "-n", sys.executable, __file__, "child", tag, auto.hex()],
        stdout=subprocess.PIPE,
        text=True,
    )
    print(r.stdout, end="", flush=True)
    say("child exit:", r.returncode)
    say("parent: connect to its own listener:", connect(STREAM, f"\0{tag}-L"))
    say("parent: accept:", res(lambda: lst.accept() and None))
    d.setblocking(False)
    say("parent: nothing came to its dgram name:", res(lambda: d.recv(10)))
    say("parent: bind its listener name again:", res(lambda: sock(STREAM, f"\0{tag}-L")))


if sys.argv[1] == "child":
    child(sys.argv[2], bytes.fromhex(sys.argv[3]).decode("latin-1"))
else:
    where()
    parent()
    say("done")

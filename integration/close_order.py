"""close(2) of a socket's last descriptor takes effect before close returns, so the
very next call sees it: each scenario below runs many times in a row and prints how
often each outcome came. Through udsfs the close arrives as a FUSE RELEASE the
kernel sends without waiting, which a daemon with several threads could serve after
the call that follows it. close_order.sh runs this on kernel sockets and through
`udsfs run`; both must print the same lines. Usage: close_order.py DIR (names are
abstract, DIR is not used); $CLOSE_ORDER_ROUNDS rounds of each (default 3000)."""

import collections
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conformance"))
from differential import res, say, where  # noqa: E402

ROUNDS = int(os.environ.get("CLOSE_ORDER_ROUNDS", "3000"))


def tally(label, once):
    """Runs once() ROUNDS times; prints each distinct result with its count."""
    seen = collections.Counter(once() for _ in range(ROUNDS))
    say(f"{label}:", dict(sorted(seen.items(), key=str)))


def send_after_peer_close():
    a, b = socket.socketpair()
    a.close()
    r = res(lambda: b.send(b"x"))
    b.close()
    return r


def recv_after_peer_close():
    a, b = socket.socketpair()
    b.setblocking(False)
    a.close()
    r = res(lambda: b.recv(1))
    b.close()
    return r


NAME = f"\0udsfs-close-order-{os.getpid()}"


def rebind_after_close():
    """(bind, listen, the second bind): the first bind follows the close of the
    previous round's second socket, so it is checked too."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    first = (res(lambda: s.bind(NAME)), res(lambda: s.listen(1)))
    s.close()
    t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    again = res(lambda: t.bind(NAME))
    t.close()
    return first + (again,)


where()
tally("close one end of a pair, send on the other", send_after_peer_close)
tally("close one end of a pair, nonblocking recv on the other", recv_after_peer_close)
tally("close an abstract listener, bind its name again", rebind_after_close)
say("done")

"""The faults that end a connection, against the kernel: each scenario runs on
kernel sockets, where the peer's process is killed at the point, and through
`udsfs run`, where a fault rule ends the connection there instead; what the
surviving end sees (every call's result or errno) must be the same. Usage:
fault_peer.py DIR (DIR: where to bind names; the mount root under udsfs)."""

import errno
import os
import signal
import socket
import sys
import time

# res(), say() and where() are the differential programs' (tests/conformance/differential.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conformance"))
from differential import res, say, where  # noqa: E402

D = sys.argv[1]
UDSFS = os.path.isdir(os.path.join(D, ".udsfs"))


def rule(line):
    """A mount-wide rule (udsfs only); `clear` takes them all away."""
    if UDSFS:
        with open(os.path.join(D, ".udsfs/faults"), "w") as f:
            f.write(line + "\n")


def serve(name, body):
    """A server process: it accepts one connection and runs body(conn, tell),
    where tell() reports to the parent that the point is reached. Returns
    (pid, listener path, the parent's end of the report pipe)."""
    path = os.path.join(D, name)
    if os.path.exists(path):
        os.unlink(path)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    lst.listen(8)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        conn, _ = lst.accept()
        os.write(w, b"a")
        body(conn, lambda: os.write(w, b"p"))
        time.sleep(30)
        os._exit(0)
    os.close(w)
    lst.close()
    return pid, path, r


def killed_at_point(pid, r):
    """Waits for the server to reach its point; on kernel sockets kills it
    there, as the fault rule does through udsfs."""
    assert os.read(r, 1) == b"p"
    if not UDSFS:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def finish(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except ProcessLookupError:
        pass
    rule("clear")


def connect(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    return c


def drain(c):
    """Reads until EOF or an error: the bytes, then what ended it."""
    got = b""
    while True:
        try:
            b = c.recv(4096)
        except OSError as e:
            return got, errno.errorcode[e.errno]
        if not b:
            return got, "EOF"
        got += b


def after(c, tag):
    c.setblocking(False)
    say(tag, "read:", res(lambda: c.recv(100)))
    say(tag, "read again:", res(lambda: c.recv(100)))
    say(tag, "write:", res(lambda: c.send(b"w")), sigpipe())
    say(tag, "write again:", res(lambda: c.send(b"w")), sigpipe())
    say(tag, "write with MSG_NOSIGNAL:", res(lambda: c.send(b"w", socket.MSG_NOSIGNAL)), sigpipe())
    c.close()


where()
# SIGPIPE is blocked and looked for after each write: one that fails with EPIPE
# raises it, unless MSG_NOSIGNAL.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})


def sigpipe():
    if signal.SIGPIPE in signal.sigpending():
        signal.sigwait({signal.SIGPIPE})
        return "SIGPIPE"
    return "no signal"

# reset_peer: the server is gone with the client's request unread.
rule("name rp.sock up reset_peer")
pid, path, r = serve("rp.sock", lambda conn, tell: tell())
c = connect(path)
assert os.read(r, 1) == b"a"
say("reset_peer send:", res(lambda: c.send(b"request")))
if not UDSFS:
    time.sleep(0.05)
killed_at_point(pid, r)
after(c, "reset_peer")
finish(pid)


# reset_peer timeout=T: the connection works until T ms after the client's
# first request (which is delivered and answered), then is reset as when the
# server's process dies then with the client's later data unread.
T = 0.5
rule("name rpt.sock up reset_peer timeout=500")


def answer(conn, tell):
    conn.send(b"reply to " + conn.recv(100))
    tell()


pid, path, r = serve("rpt.sock", answer)
c = connect(path)
assert os.read(r, 1) == b"a"
t0 = time.monotonic()
say("reset_peer timeout send:", res(lambda: c.send(b"request")))
assert os.read(r, 1) == b"p"
say("reset_peer timeout reply:", res(lambda: c.recv(100)))
say("reset_peer timeout send more:", res(lambda: c.send(b"more")))
c.setblocking(False)
say("reset_peer timeout read before the timeout:", res(lambda: c.recv(100)))
if not UDSFS:
    time.sleep(max(0.0, t0 + T - time.monotonic()))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
c.settimeout(5)
say("reset_peer timeout read:", res(lambda: c.recv(100)))
say("reset_peer timeout: the reset came no earlier than the timeout:", time.monotonic() - t0 >= T)
after(c, "reset_peer timeout")
finish(pid)


# die_after: the server sends two messages, then its process dies; in the
# second run the client's request is still unread then.
def two(conn, tell):
    time.sleep(0.1)
    conn.send(b"m1")
    conn.send(b"m2")
    tell()


for unread in (False, True):
    tag = "die_after" + (" with data unread" if unread else "")
    rule("name da.sock down die_after messages=2")
    pid, path, r = serve("da.sock", two)
    c = connect(path)
    assert os.read(r, 1) == b"a"
    if unread:
        say(tag, "send:", res(lambda: c.send(b"request")))
    killed_at_point(pid, r)
    say(tag, "drain:", drain(c))
    after(c, tag)
    finish(pid)


# limit_data: the client sends 4 then 6 bytes, and the server's end is closed
# after exactly 10 as if the client had died there: the server reads 10 bytes,
# then EOF, and its writes fail.
rule("name ld.sock up limit_data bytes=10")
path = os.path.join(D, "ld.sock")
if os.path.exists(path):
    os.unlink(path)
lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lst.bind(path)
lst.listen(8)
pid = os.fork()
if pid == 0:
    c = connect(path)
    c.send(b"0123")
    c.send(b"456789")
    time.sleep(0.05)
    if UDSFS:
        time.sleep(30)
    os._exit(0)
conn, _ = lst.accept()
time.sleep(0.1)
if not UDSFS:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
say("limit_data drain:", drain(conn))
after(conn, "limit_data")
finish(pid)
lst.close()
say("done")

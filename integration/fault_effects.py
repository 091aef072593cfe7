"""What each fault that acts at once does to both ends, measured through
`udsfs run`: refuse, full, short_write, ctrunc, limit_data. Prints one
result a line; fault_immediate.sh compares them with what Linux would give.
Usage: fault_effects.py MOUNT."""

import array
import errno
import hashlib
import os
import select
import signal
import socket
import sys
import threading
import time

# res() and say() are the differential programs' (tests/conformance/differential.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conformance"))
from differential import res, say  # noqa: E402

M = sys.argv[1]
FAULTS = os.path.join(M, ".udsfs/faults")


def rule(line):
    """Adds a rule; returns its number (the last one listed)."""
    with open(FAULTS, "w") as f:
        f.write(line + "\n")
    with open(FAULTS) as f:
        return int(f.read().splitlines()[-1].split("\t")[0])


def delete(n):
    with open(FAULTS, "w") as f:
        f.write(f"del {n}\n")


def counters(n):
    with open(FAULTS) as f:
        for line in f:
            if line.split("\t")[0] == str(n):
                return line.rstrip("\n").split("\t")[2]
    return "gone"


def listener(name, ty=socket.SOCK_STREAM, backlog=8):
    path = os.path.join(M, name)
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, ty)
    s.bind(path)
    if ty != socket.SOCK_DGRAM:
        s.listen(backlog)
    return s, path


def connected(name):
    lst, path = listener(name)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = lst.accept()
    return lst, c, a


def elapsed_ms(f):
    t = time.monotonic()
    r = res(f)
    return r, (time.monotonic() - t) * 1000


signal.signal(signal.SIGPIPE, signal.SIG_IGN)

# refuse: ECONNREFUSED; EAGAIN as a full backlog (a blocking connect waits:
# SO_SNDTIMEO ends it with EAGAIN, and it goes through once the rule goes).
lst, path = listener("refuse.sock")
n = rule("name refuse.sock refuse")
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
say("refuse connect:", res(lambda: c.connect(path)))
say("refuse counters:", counters(n))
delete(n)
n = rule("name refuse.sock refuse errno=EAGAIN")
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.setblocking(False)
say("refuse EAGAIN non-blocking connect:", res(lambda: c.connect(path)))
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.settimeout(None)
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, bytes(array.array("l", [0, 200000])))
r, ms = elapsed_ms(lambda: c.connect(path))
say("refuse EAGAIN blocking connect with SO_SNDTIMEO 200 ms:", r, "in time:", 190 <= ms < 400)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out = {}
t = threading.Thread(target=lambda: out.setdefault("r", elapsed_ms(lambda: c.connect(path))))
t.start()
time.sleep(0.2)
say("refuse EAGAIN blocking connect waits:", t.is_alive())
delete(n)
t.join(2)
say("refuse EAGAIN blocking connect once the rule is gone:", out.get("r", ("hung",))[0])
lst.close()

# full: EAGAIN for a non-blocking sender; a blocked one waits, ends at a
# signal within 100 ms and at SO_SNDTIMEO, and goes on once the rule goes.
for ty, tyname in ((socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "dgram")):
    if ty == socket.SOCK_STREAM:
        lst, c, a = connected("full.sock")
    else:
        a, path = listener("full.sock", ty)
        c = socket.socket(socket.AF_UNIX, ty)
        c.connect(path)
    n = rule("name full.sock up full")
    c.setblocking(False)
    say(tyname, "full non-blocking send:", res(lambda: c.send(b"x")))
    c.setblocking(True)
    fired = []

    # Python retries after EINTR once the handler returns; a handler that
    # raises ends the call.
    def raiser(*_):
        fired.append(time.monotonic())
        raise InterruptedError

    signal.signal(signal.SIGALRM, raiser)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    t0 = time.monotonic()
    try:
        c.send(b"x")
        r = "sent"
    except InterruptedError:
        r = "interrupted"
    end = time.monotonic()
    say(tyname, "full blocking send at a signal:", r, "waited:", end - t0 >= 0.19,
        "ended within 100 ms of it:", bool(fired) and end - fired[0] < 0.1)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, bytes(array.array("l", [0, 200000])))
    r, ms = elapsed_ms(lambda: c.send(b"x"))
    say(tyname, "full blocking send with SO_SNDTIMEO 200 ms:", r, "in time:", 190 <= ms < 400)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, bytes(array.array("l", [0, 0])))
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", res(lambda: c.send(b"y"))))
    t.start()
    time.sleep(0.1)
    say(tyname, "full blocking send waits:", t.is_alive())
    delete(n)
    t.join(2)
    say(tyname, "full send once the rule is gone:", out.get("r", "hung"))
    a.setblocking(False)
    say(tyname, "full receiver got:", res(lambda: a.recv(10)))
    c.close()
    a.close()
    if ty == socket.SOCK_STREAM:
        lst.close()

# full and poll: no POLLOUT (poll, select, epoll) while the rule holds the
# connection's sends, as at a full kernel queue; a poll waiting for it wakes
# when the rule goes.
lst, c, a = connected("fullpoll.sock")


def writable():
    p = select.poll()
    p.register(c, select.POLLOUT)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLOUT)
    r = (bool(p.poll(0)), bool(select.select([], [c], [], 0)[1]), bool(ep.poll(0)))
    ep.close()
    return "poll, select, epoll: %s %s %s" % r


say("full writable before the rule:", writable())
n = rule("name fullpoll.sock up full")
say("full writable under the rule:", writable())
out = {}


def wait_out():
    p = select.poll()
    p.register(c, select.POLLOUT)
    out["r"] = elapsed_ms(lambda: bool(p.poll(3000)))


t = threading.Thread(target=wait_out)
t.start()
time.sleep(0.2)
say("full poll for POLLOUT waits:", t.is_alive())
delete(n)
t.join(3)
r, ms = out.get("r", ("hung", 0))
say("full poll for POLLOUT once the rule is gone:", r, "after waiting:", ms >= 190)
say("full writable after the rule:", writable())

# full times=K counts messages, not tries: K messages each meet a full queue
# for `timeout` ms however often they are retried (a non-blocking sender's
# loop, with and without waiting in select), then the rule only counts.
n = rule("name fullpoll.sock up full timeout=100 times=2")
c.setblocking(False)
met = []
for i in range(4):
    tries, t0 = 0, time.monotonic()
    while True:
        try:
            c.send(bytes([65 + i]))
            break
        except BlockingIOError:
            tries += 1
            if i == 0:
                time.sleep(0.005)
            else:
                select.select([], [c], [], 1)
    met.append((tries, time.monotonic() - t0))
say("full times=2 non-blocking: messages that met EAGAIN:", [t > 0 for t, _ in met],
    "the first retried often:", met[0][0] > 5, "each waited the timeout:", [w >= 0.095 for _, w in met[:2]])
say("full times=2 non-blocking counters:", counters(n))
delete(n)
n = rule("name fullpoll.sock up full timeout=100 times=2")
c.setblocking(True)
waits = []
for i in range(3):
    _, ms = elapsed_ms(lambda: c.send(bytes([97 + i])))
    waits.append(ms >= 95)
say("full times=2 blocking: sends that waited the timeout:", waits)
say("full times=2 blocking counters:", counters(n))
delete(n)
a.setblocking(False)
say("full receiver got:", res(lambda: a.recv(100)))
c.close(), a.close(), lst.close()

# refuse errno=EAGAIN times=K counts connects, not retries: the connect hit
# stays refused while the rule stands; other connects go once K were hit.
lst, path = listener("refuse2.sock")
n = rule("name refuse2.sock refuse errno=EAGAIN times=1")
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.setblocking(False)
say("refuse EAGAIN times=1 connect and retries:", [res(lambda: c.connect(path)) for _ in range(4)])
c2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c2.setblocking(False)
say("refuse EAGAIN times=1 another connect:", res(lambda: c2.connect(path)))
say("refuse EAGAIN times=1 counters:", counters(n))
delete(n)
say("refuse EAGAIN times=1 the retry once the rule is gone:", res(lambda: c.connect(path)))
c.close(), c2.close(), lst.close()

# short_write: a stream send queues part and returns its count, as a nearly
# full buffer makes a kernel socket do: a plain send (a write of the data
# file), one with flags (the message ioctl) and one larger than a FUSE write
# request all return the rule's count; sendall() finishes what they leave.
lst, c, a = connected("short.sock")
n = rule("name short.sock up short_write bytes=5")
say("short_write send of 100:", res(lambda: c.send(b"s" * 100)))
say("short_write send of 100 with MSG_NOSIGNAL:", res(lambda: c.send(b"t" * 100, socket.MSG_NOSIGNAL)))
say("short_write send of 3:", res(lambda: c.send(b"abc")))
say("short_write sendall of 12:", res(lambda: c.sendall(b"0123456789ab")))
a.setblocking(False)
say("short_write receiver got:", res(lambda: a.recv(1000)))
say("short_write send of 300000:", res(lambda: c.send(b"u" * 300000)))
say("short_write receiver got:", res(lambda: a.recv(1000)))
say("short_write counters:", counters(n))
delete(n)
c.close(), a.close(), lst.close()


def drained(a):
    """Starts reading `a` to EOF in a thread; the returned function joins it
    and gives (total bytes, sha256 of them)."""
    got = []

    def run():
        h, total = hashlib.sha256(), 0
        while True:
            b = a.recv(1 << 16)
            if not b:
                break
            h.update(b)
            total += len(b)
        got.append((total, h.hexdigest()))

    t = threading.Thread(target=run)
    t.start()

    def result():
        t.join(20)
        return got[0] if got else ("reader did not finish", "")

    return result


def sha(b):
    return hashlib.sha256(b).hexdigest()


def drained_under(name, fault):
    """A connection to a new listener at `name`, its accepted end drained (`drained`),
    then the rule `name NAME up FAULT`: the listener, the client, the accepted end, the
    drain's result function and the rule's number."""
    lst, c, a = connected(name)
    result = drained(a)
    return lst, c, a, result, rule(f"name {name} up {fault}")


# Large sends (more than one message ioctl holds, MSG_ROOM) under short_write;
# random payloads, so that a byte duplicated, lost or reordered changes the hash:
# one send()/send() with a flag/write() of 1 MiB returns the rule's count and
# the receiver gets exactly that prefix; once the rule goes the same send
# returns its whole length; sendall() delivers every byte once.
BIG = 1 << 20
K = 5000
for how in ("send", "send with MSG_NOSIGNAL", "sendmsg passing a socket", "write"):
    lst, c, a, result, n = drained_under("bigshort.sock", f"short_write bytes={K}")
    p1, p2 = os.urandom(BIG), os.urandom(BIG)
    if how == "send":
        one = c.send
    elif how == "write":
        def one(b): return os.write(c.fileno(), b)
    elif how == "sendmsg passing a socket":
        def one(b): return c.sendmsg([b], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [lst.fileno()]))])
    else:
        def one(b): return c.send(b, socket.MSG_NOSIGNAL)
    r1 = res(lambda: one(p1))
    delete(n)
    r2 = res(lambda: one(p2))
    c.close()
    total, digest = result()
    say(f"short_write large {how}: returns", r1, "then without the rule", r2,
        "receiver got", total, "bytes, the prefix then the whole:", digest == sha(p1[:K] + p2))
    a.close(), lst.close()

lst, c, a, result, n = drained_under("bigshort.sock", f"short_write bytes={K}")
p = os.urandom(BIG)
say("short_write large sendall:", res(lambda: c.sendall(p)))
injected = counters(n)
delete(n)
c.close()
total, digest = result()
say("short_write large sendall: receiver got", total, "bytes, each once:", digest == sha(p), "counters:", injected)
a.close(), lst.close()

# limit_data under a large send: it returns the limit, the receiver gets
# exactly that prefix then EOF, and the next send fails with EPIPE.
lst, c, a, result, n = drained_under("biglimit.sock", f"limit_data bytes={K}")
p = os.urandom(BIG)
say("limit_data large send:", res(lambda: c.send(p)))
say("limit_data send after it:", res(lambda: c.send(p)))
total, digest = result()
say("limit_data large send: receiver got", total, "bytes, the prefix:", digest == sha(p[:K]))
delete(n)
c.close(), a.close(), lst.close()

# ctrunc: passed sockets and files are dropped, the reader gets MSG_CTRUNC,
# and the dropped references are freed: the passed end's peer sees EOF.
lst, c, a = connected("ctrunc.sock")
n = rule("name ctrunc.sock up ctrunc")
x, y = socket.socketpair()
pr, pw = os.pipe()
fds = array.array("i", [x.fileno(), pw])
say("ctrunc send:", res(lambda: c.sendmsg([b"fds"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])))
x.close()
os.close(pw)
data, anc, flags, _ = a.recvmsg(10, socket.CMSG_SPACE(8))
say("ctrunc receiver got:", data, "fds:", len(anc), "MSG_CTRUNC:", bool(flags & socket.MSG_CTRUNC))
y.settimeout(2)
say("ctrunc: the dropped socket's peer reads:", res(lambda: y.recv(10)))
# The daemon closes the dropped pipe end as it drops the message's references;
# like the socket's peer above, the reader waits for that (2 s at most).
select.select([pr], [], [], 2)
os.set_blocking(pr, False)
say("ctrunc: the dropped pipe end's reader reads:", res(lambda: os.read(pr, 10)))
delete(n)
c.close(), a.close(), lst.close()

# limit_data: the receiver gets exactly N bytes, then EOF; the sender's send
# that crosses N is cut there and its next one fails with EPIPE.
lst, c, a = connected("limit.sock")
n = rule("name limit.sock up limit_data bytes=10")
say("limit_data send of 7:", res(lambda: c.send(b"0123456")))
say("limit_data send of 6:", res(lambda: c.send(b"789abc")))
say("limit_data next send:", res(lambda: c.send(b"d")))
got = b""
a.settimeout(2)
while True:
    b = a.recv(100)
    if not b:
        break
    got += b
say("limit_data receiver got:", got, "then EOF")
say("limit_data receiver send:", res(lambda: a.send(b"z")))
c.setblocking(False)
say("limit_data sender reads:", res(lambda: c.recv(10)))
delete(n)
c.close(), a.close(), lst.close()
say("done")

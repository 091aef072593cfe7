#!/usr/bin/env python3
"""What a second user (B) does to slow every other user of a mount down, for
scripts/bench row 14: each flood of issue 27, run as B through the mount's files.

    floods.py MOUNT captures COUNT       # COUNT captures (4 processes), each `buffer 1`
    floods.py MOUNT faultlog RATE        # a rule hitting every message of B's own pair,
                                         # RATE 100-byte messages a second through it
    floods.py MOUNT oob RATE PGRP        # RATE out-of-band bytes a second to B's socket
                                         # whose owner (F_SETOWN) is process group PGRP
    floods.py MOUNT close INFLIGHT RULES # RULES rules standing; again and again: a socket
                                         # holding INFLIGHT sockets in flight, then closed

Prints `ready ...` once the flood is under way (captures: once all are open, with how
many were granted and the first refusal), then goes on until SIGTERM. A refusal at a
bound is part of the answer, not a failure: the flood goes on with what it got.
"""

import errno
import os
import signal
import sys
import time

MNT = sys.argv[1]
U = os.path.join(MNT, ".udsfs")
# The mount's files as the integration scripts use them (integration/udsfs_files.py,
# which reads MNT and U from the environment): beside this file where scripts/bench
# copies both, or in the repository.
os.environ.update(MNT=MNT, U=U)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "integration")]
from udsfs_files import lines_from, opn, pair  # noqa: E402

stop = False


def on_term(_sig, _frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def ready(text=""):
    print(("ready " + text).strip(), flush=True)


def paced(rate, step):
    """Calls step() rate times a second until SIGTERM."""
    period = 1.0 / rate
    nxt = time.monotonic()
    while not stop:
        step()
        nxt += period
        lag = nxt - time.monotonic()
        if lag > 0:
            time.sleep(lag)
        elif lag < -1:
            nxt = time.monotonic()


def captures(count):
    """count captures over 4 processes, each shrunk with `buffer 1`; held until SIGTERM."""
    procs = 4
    r, w = os.pipe()
    kids = []
    for i in range(procs):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            held, refused = 0, ""
            for _ in range(count // procs + (1 if i < count % procs else 0)):
                try:
                    fd = os.open(f"{U}/capture", os.O_RDWR)
                except OSError as e:
                    refused = ename(e)
                    break
                try:
                    os.write(fd, b"buffer 1\n")
                except OSError as e:
                    refused = refused or "buffer:" + ename(e)
                held += 1
            os.write(w, f"{held} {refused or '-'}\n".encode())
            signal.pause()
            os._exit(0)
        kids.append(pid)
    os.close(w)
    got = [line.split() for line in lines_from(r, procs).splitlines()]
    held = sum(int(g[0]) for g in got)
    refused = sorted({g[1] for g in got if g[1] != "-"})
    # The opens' own load passes before the measurement starts.
    time.sleep(3)
    ready(f"captures={held} refused={','.join(refused) or '-'}")
    while not stop:
        time.sleep(0.2)
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    for pid in kids:
        os.waitpid(pid, 0)


def faultlog(rate):
    """A rule on B's own pair that acts on every message, and messages through it."""
    keep, a, b = pair("stream")
    with open(f"{U}/faults", "w") as f:
        f.write(f"socket {a} latency latency=0\n")
    wa, rb = opn(a, "data"), opn(b, "data")
    msg = b"x" * 100

    def step():
        os.write(wa, msg)
        got = 0
        while got < len(msg):
            got += len(os.read(rb, len(msg) - got))

    ready(f"pair={a},{b}")
    paced(rate, step)
    del keep


def oob(rate, pgrp):
    """Out-of-band bytes to B's socket whose SIGURG goes to process group pgrp."""
    keep, a, b = pair("stream")
    ctl = opn(b, "ctl", os.O_WRONLY)
    os.write(ctl, f"owner -{pgrp}\n".encode())
    os.write(ctl, b"oobinline on\n")
    wa, rb = opn(a, "msg", os.O_WRONLY), opn(b, "data", os.O_RDONLY)

    def step():
        os.write(wa, b"len=1 oob=1\nx")
        os.read(rb, 16)

    ready(f"pair={a},{b} owner=-{pgrp}")
    paced(rate, step)
    del keep


def close(inflight, rules):
    """RULES rules of B's standing (selecting B's own sockets by name, so that none
    matches A's), then again and again: INFLIGHT sockets passed into a pair's queue
    and the pair closed, which releases them all."""
    added = 0
    fd = os.open(f"{U}/faults", os.O_WRONLY)
    for i in range(rules):
        try:
            os.write(fd, f"name flood-b/{i}/* latency latency=1\n".encode())
            added += 1
        except OSError as e:
            print(f"rule {i}: {ename(e)}", file=sys.stderr)
            break
    os.close(fd)
    first = True
    while not stop:
        keep, a, b = pair("stream")
        w = opn(a, "msg", os.O_WRONLY)
        sent = 0
        while sent < inflight and not stop:
            batch = []
            for _ in range(min(253, inflight - sent)):
                cfd = os.open(f"{U}/stream/clone", os.O_RDWR)
                batch.append((cfd, int(os.read(cfd, 64).split()[0])))
            rights = ",".join(str(n) for _, n in batch)
            try:
                os.write(w, f"len=1 rights={rights}\nx".encode())
            except OSError as e:
                print(f"pass after {sent}: {ename(e)}", file=sys.stderr)
                for cfd, _ in batch:
                    os.close(cfd)
                break
            for cfd, _ in batch:
                os.close(cfd)
            sent += len(batch)
        if first:
            ready(f"rules={added} inflight={sent}")
            first = False
        os.close(w)
        os.close(keep)  # the last reference to b: its queue, and all in it, goes
        time.sleep(0.5)


def main():
    mode = sys.argv[2]
    args = [int(a) for a in sys.argv[3:]]
    {"captures": captures, "faultlog": faultlog, "oob": oob, "close": close}[mode](*args)


if __name__ == "__main__":
    main()

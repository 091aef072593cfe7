#!/usr/bin/env python3
"""sndtimeo_held.py: a write asleep for room whose SO_SNDTIMEO runs out looks once
more, as Linux's sender (sock_alloc_send_pskb), and takes the room a reader made,
too little to have woken it (a quarter of the budget): a seqpacket record and a
stream write, each with a reader that takes one record / 64 KiB while it sleeps.
BLOCKERS other calls sleep first, so that under the supervisor every parking slot
is taken and the writes wait as held calls (src/supervisor/wait.rs)."""

import errno
import socket
import struct
import sys
import threading
import time

from lanes_lib import fill_socket

BLOCKERS = int(sys.argv[1]) if len(sys.argv) > 1 else 130


def case(ty, name, size, drain):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 2, 0))
    filled = fill_socket(a)

    def reader():
        time.sleep(0.5)
        b.recv(drain)

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.monotonic()
    try:
        r = a.send(b"y" * size)
    except OSError as e:
        r = errno.errorcode[e.errno]
    dt = time.monotonic() - t0
    t.join()
    print(name, "filled", filled, "send:", r, "after at least 1.5 s:", dt >= 1.5, flush=True)
    a.close()
    b.close()


pairs = [socket.socketpair() for _ in range(BLOCKERS)]
sleepers = [threading.Thread(target=p[1].recv, args=(10,)) for p in pairs]
for t in sleepers:
    t.start()
time.sleep(1)
case(socket.SOCK_SEQPACKET, "seqpacket", 4096, 4096)
case(socket.SOCK_STREAM, "stream", 60000, 65536)
for p in pairs:
    p[0].send(b"e")
for t in sleepers:
    t.join()
print("done")

"""lanes_live_capture.py: a client and a server on a connection that a capture
joins in the middle (integration/lanes_live_capture.sh). Each writes what it
sent and what it received to files of its own, so that the script can hold the
capture against what the programs sent and received, byte for byte.

  server PATH OUT   listens at PATH, answers one connection's requests until
                    EOF; OUT.sent, OUT.recv: the bytes it sent and received.
  client PATH OUT FLAGS ROUNDS
                    connects, sends ROUNDS rounds at a steady rate, each (after
                    the first 300) 1 to 8 requests at once, then their answers; says `laned` in FLAGS once its
                    lane is up (after a few rounds) and notes the offsets of
                    both streams at the first round after the script's
                    `opened` flag (the capture is open): OUT.sent, OUT.recv,
                    OUT.opened ("OUT_OFFSET IN_OFFSET ROUND").

A request: 4 bytes of length, then `REQ-<round>-` and 10 to 300 bytes of a
pseudo-random pattern; an answer: the same length word, `REP-<round>-` and the
request's bytes reversed, so a lost, doubled or reordered byte shows anywhere.
"""

import os
import random
import socket
import struct
import sys
import time

from lanes_lib import guard, lane_of, listener, recv_exact, say


def frame(tag, i, body):
    payload = f"{tag}-{i:06d}-".encode() + body
    return struct.pack(">I", len(payload)) + payload


def read_frame(s):
    head = recv_exact(s, 4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack(">I", head)
    body = recv_exact(s, n)
    if len(body) < n:
        raise SystemExit(f"short frame: {len(body)} of {n}")
    return head + body


def server(path, out):
    srv, _ = listener(os.path.dirname(path), os.path.basename(path))
    say("server: listening")
    c, _ = srv.accept()
    # This end asks for its lane at a call that does not wait (EAGAIN), and
    # waits in the daemon only after the client's first send asked too: an
    # end's ask is refused while the other waits in the daemon (docs/LANE.md,
    # "Asks refused under load"; the lane of a ping-pong would come by luck).
    try:
        c.recv(1, socket.MSG_DONTWAIT)
    except BlockingIOError:
        pass
    time.sleep(0.5)
    sent = open(out + ".sent", "wb")
    recv = open(out + ".recv", "wb")
    rounds = 0
    while True:
        req = read_frame(c)
        if req is None:
            break
        recv.write(req)
        i = int(req[8:14])
        rep = frame("REP", i, req[15:][::-1])
        c.sendall(rep)
        sent.write(rep)
        rounds += 1
    sent.close()
    recv.close()
    say("server: rounds", rounds)


def client(path, out, flags, rounds):
    rnd = random.Random(30)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    time.sleep(0.25)
    sent = open(out + ".sent", "wb")
    recv = open(out + ".recv", "wb")
    off_out = off_in = 0
    opened = None
    for i in range(rounds):
        if opened is None and os.path.exists(os.path.join(flags, "opened")):
            opened = (off_out, off_in, i)
            with open(out + ".opened", "w") as f:
                f.write("%d %d %d\n" % opened)
            guard(s, "client after the capture opened")
        # After round 300 (the lane up) 1 to 8 requests at once, then their
        # answers: the rings hold several messages, some of them half read,
        # when the capture opens. (Before, one at a time: an end's ask for
        # its lane is refused while the other end waits in the daemon, and a
        # burst read in pieces makes more such moments.)
        burst = 1 + i % 8 if i > 300 else 1
        reqs = b""
        for _ in range(burst):
            body = bytes(rnd.randrange(32, 127) for _ in range(rnd.randrange(10, 300)))
            reqs += frame("REQ", i, body)
        s.sendall(reqs)
        sent.write(reqs)
        off_out += len(reqs)
        for _ in range(burst):
            rep = read_frame(s)
            if rep is None:
                raise SystemExit(f"client: EOF at round {i}")
            recv.write(rep)
            off_in += len(rep)
        if i == 300:
            guard(s, "client before the capture")
            if lane_of(s) == "lane=direct":
                open(os.path.join(flags, "laned"), "w").close()
        if i > 300 and not os.path.exists(os.path.join(flags, "laned")):
            break
        if i == rounds - 1 and opened is not None and i > opened[2] + 200:
            # Long after the open, under the capture: the lane through the
            # daemon carries the connection (lane=through).
            guard(s, "client at the end under the capture")
        time.sleep(0.0005)
    sent.close()
    recv.close()
    s.close()
    say("client: rounds", rounds, "capture opened at round", opened[2] if opened else None)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
    else:
        client(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))

#!/usr/bin/env python3
"""lanes_syscalls.py ROUNDS: an event loop on 20 laned socketpairs, as a
server with many connections is (issue 30's redis rows): ROUNDS times a
byte to one of them, epoll_wait, a read; then ROUNDS times epoll_ctl DEL and
ADD of one laned socket, as redis-benchmark's ae does per request.
integrations/lanes_syscalls.sh counts the system calls this makes through
`udsfs run` on a --lanes mount (strace -c) against a run of 0 rounds: the
lane answers epoll_wait, read and write from the ring and its table, with no
statx per registration or per call (preload/src/fdgen.rs) and no epoll_ctl
of the lane's eventfd per DEL and ADD. Prints what each part saw and, for a
udsfs socket, a GUARD line with its status file's lane= word."""

import select
import socket
import sys

from lanes_lib import guard, say

PAIRS = 20


def main():
    rounds = int(sys.argv[1])
    pairs = [socket.socketpair() for _ in range(PAIRS)]
    ep = select.epoll()
    for a, b in pairs:
        a.send(b"1")
        b.recv(1)
        b.setblocking(False)
        ep.register(b, select.EPOLLIN)
    wrong = 0
    for i in range(rounds):
        a, b = pairs[i % PAIRS]
        a.send(b"x")
        evs = ep.poll(1)
        if [fd for fd, _ in evs] != [b.fileno()] or b.recv(10) != b"x":
            wrong += 1
    say("rounds:", rounds, "wrong:", wrong)
    a, b = pairs[0]
    for i in range(rounds):
        ep.unregister(b)
        ep.register(b, select.EPOLLIN)
    a.send(b"y")
    say("after DEL and ADD:", [fd == b.fileno() for fd, _ in ep.poll(1)], b.recv(10))
    guard(pairs[0][1], "pair 0")
    guard(pairs[-1][1], "pair 19")


main()

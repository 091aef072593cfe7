"""Helpers of integration/lanes_programs.sh.

serve SOCK N: a unix stream server at SOCK answering N connections one after the other,
each line it reads echoed back with "echo: " before it (an accepted connection and its
client both run the library: the connection asks for a lane at connect and accept).
ask SOCK: connects to SOCK, sends three lines, prints the answers.
close_reuse SOCK THREADS ROUNDS: a server at SOCK echoing on a thread per connection, and
THREADS client threads each making ROUNDS connections (four 10-byte round trips, then
close): closes and new sockets of the process's threads at once, so that a number one
thread closes is another's next socket or accepted connection at once. Prints "done N
connections"."""

import os
import socket
import sys
import threading


def serve(path, n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(4)
    print("listening", flush=True)
    for _ in range(n):
        c, _ = s.accept()
        f = c.makefile("rwb")
        for line in f:
            f.write(b"echo: " + line)
            f.flush()
        f.close()
        c.close()


def ask(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    f = c.makefile("rwb")
    for i in range(3):
        f.write(b"line %d\n" % i)
        f.flush()
        print(f.readline().decode().rstrip())
    c.shutdown(socket.SHUT_WR)
    f.close()
    c.close()


def close_reuse(path, nthreads, rounds):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)

    def echo(c):
        while True:
            b = c.recv(64)
            if not b:
                break
            c.sendall(b)
        c.close()

    def serve():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=echo, args=(c,), daemon=True).start()

    def client():
        for _ in range(rounds):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            for _ in range(4):
                c.sendall(b"x" * 10)
                got = c.recv(64)
                if got != b"x" * 10:
                    sys.exit(f"echo: got {got!r}")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    ts = [threading.Thread(target=client) for _ in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("done", nthreads * rounds, "connections", flush=True)


if sys.argv[1] == "close_reuse":
    close_reuse(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif sys.argv[1] == "serve":
    serve(sys.argv[2], int(sys.argv[3]))
else:
    ask(sys.argv[2])

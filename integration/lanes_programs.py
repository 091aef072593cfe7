"""Helpers of integration/lanes_programs.sh.

serve SOCK N: a unix stream server at SOCK answering N connections one after the other,
each line it reads echoed back with "echo: " before it (an accepted connection and its
client both run the library: the connection asks for a lane at connect and accept).
ask SOCK: connects to SOCK, sends three lines, prints the answers."""

import os
import socket
import sys


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


if sys.argv[1] == "serve":
    serve(sys.argv[2], int(sys.argv[3]))
else:
    ask(sys.argv[2])

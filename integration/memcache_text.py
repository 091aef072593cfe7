#!/usr/bin/env python3
"""memcache_text.py: a client of memcached's text protocol over a unix stream socket,
for run_memcached.sh. Its lines are the answers the script compares between the kernel
run and the udsfs runs: only what the server said, nothing volatile (cas ids, times,
connection numbers are replaced by what they are).

    memcache_text.py SOCK basics      set/get/add/replace/append/incr/decr/gets/cas/delete,
                                      a 900 KB value read back equal, noreply, errors
    memcache_text.py SOCK many N K HOLD
                                      N connections at once (threads), each K set+get of
                                      its own keys; then each keeps its connection open
                                      until the file HOLD exists (10 s at most): the
                                      script counts the lanes meanwhile
    memcache_text.py SOCK conns N     N connections open at once, then `stats conns`
                                      seen from one of them, normalized
"""

import hashlib
import os
import re
import socket
import sys
import threading
import time


class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        return self.file.readline().rstrip(b"\r\n").decode(errors="backslashreplace")

    def ask(self, command):
        self.send(command.encode() + b"\r\n")
        return self.line()

    def store(self, verb, key, value, extra=""):
        self.send(f"{verb} {key} 0 0 {len(value)}{extra}\r\n".encode() + value + b"\r\n")
        return self.line()

    def get(self, command):
        """The items of a get/gets: [(key, value, cas or None)], read up to END."""
        self.send(command.encode() + b"\r\n")
        items = []
        while True:
            head = self.line()
            if head == "END":
                return items
            parts = head.split()
            if parts[0] != "VALUE":
                raise RuntimeError(f"{command}: unexpected line {head!r}")
            value = self.file.read(int(parts[3]) + 2)[:-2]
            items.append((parts[1], value, parts[4] if len(parts) > 4 else None))

    def close(self):
        self.file.close()
        self.sock.close()


def show_items(what, items):
    shown = [f"{k}={v.decode() if len(v) < 64 else 'sha256:' + hashlib.sha256(v).hexdigest()[:16]}" for k, v, _ in items]
    print(f"{what}: {' '.join(shown) or '(none)'}")


def basics(path):
    c = Conn(path)
    print("version:", "VERSION" if c.ask("version").startswith("VERSION ") else "?")
    print("set a:", c.store("set", "a", b"alpha"))
    print("add a:", c.store("add", "a", b"other"))
    print("add b:", c.store("add", "b", b"beta"))
    print("replace c:", c.store("replace", "c", b"gamma"))
    print("replace b:", c.store("replace", "b", b"BETA"))
    print("append a:", c.store("append", "a", b"-tail"))
    print("prepend a:", c.store("prepend", "a", b"head-"))
    show_items("get a b c", c.get("get a b c"))
    print("set n:", c.store("set", "n", b"41"))
    print("incr n 1:", c.ask("incr n 1"))
    print("decr n 50:", c.ask("decr n 50"))
    print("incr a 1:", c.ask("incr a 1"))
    print("incr missing 1:", c.ask("incr missing 1"))
    (_, _, cas), = c.get("gets n")
    print("cas n (right id):", c.store("cas", "n", b"7", f" {cas}"))
    print("cas n (stale id):", c.store("cas", "n", b"8", f" {cas}"))
    show_items("get n", c.get("get n"))
    print("delete b:", c.ask("delete b"))
    print("delete b again:", c.ask("delete b"))
    # noreply: no answer at all; the next command's answer comes next.
    c.send(b"set quiet 0 0 2 noreply\r\nqq\r\n")
    show_items("get quiet (after a noreply set)", c.get("get quiet"))
    big = bytes((i * 7 + i // 251) % 256 for i in range(900 * 1024))
    print("set big (900 KB):", c.store("set", "big", big))
    (_, back, _), = c.get("get big")
    print("big read back:", "equal" if back == big else f"DIFFERENT ({len(back)} bytes)")
    too_big = b"x" * (2 * 1024 * 1024)
    print("set 2 MB:", c.store("set", "huge", too_big))
    print("unknown command:", c.ask("bogus"))
    print("touch a:", c.ask("touch a 100"))
    print("flush_all:", c.ask("flush_all"))
    show_items("get a n big after flush", c.get("get a n big"))
    c.send(b"quit\r\n")
    print("after quit:", "EOF" if c.file.read() == b"" else "data")
    c.close()


def many(path, n, k, hold):
    bad = [0] * n
    done = threading.Barrier(n + 1)

    def client(i):
        c = Conn(path)
        try:
            for j in range(k):
                value = f"{i}-{j}-".encode() * (1 + j % 50)
                if c.store("set", f"t{i}.{j % 20}", value) != "STORED":
                    bad[i] += 1
                items = c.get(f"get t{i}.{j % 20}")
                if len(items) != 1 or items[0][1] != value:
                    bad[i] += 1
        finally:
            done.wait()
            # keep the connection open until HOLD (the script counts lanes meanwhile)
            deadline = time.monotonic() + 10
            while not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.02)
            c.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    done.wait()
    print(f"{n} clients x {k} set+get: wrong answers {sum(bad)}", flush=True)
    for t in threads:
        t.join()


def conns(path, n):
    held = [Conn(path) for _ in range(n)]
    for c in held:
        c.ask("version")
    lines = []
    held[0].send(b"stats conns\r\n")
    while True:
        line = held[0].line()
        if line == "END":
            break
        # STAT <fd>:<field> <value>: fd numbers and idle seconds vary
        m = re.match(r"STAT \d+:(\S+) (.*)", line)
        field, value = m.group(1), m.group(2)
        if field == "secs_since_last_cmd":
            continue
        if field == "addr" and value.startswith("unix:") and value != f"unix:{path}":
            # memcached (1.6.18's conn_to_str) asks getsockname for a listening socket's
            # name into a sockaddr_in6: 28 bytes, 26 of the path, which it prints as a
            # string, on to whatever bytes follow on its stack.
            value = "unix:(SOCK's first 26 bytes, then memcached's stack)" if value[5:31] == path[:26] else value
        if field == "state" and value in ("conn_mwrite", "conn_new_cmd", "conn_waiting"):
            # a connection whose answer the client has read may not have got back to
            # conn_read yet: its worker thread runs on its own
            value = "conn_read"
        lines.append(f"{field} {value.replace(path, 'SOCK')}")
    print(f"stats conns with {n} open:")
    for line in sorted(set(lines)):
        print(f"    {lines.count(line)} x {line}")
    for c in held:
        c.close()


def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "basics":
        basics(path)
    elif mode == "many":
        many(path, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif mode == "conns":
        conns(path, int(sys.argv[3]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

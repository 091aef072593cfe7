# adversarial_lanes5.py: the programs of integration/adversarial_lanes5.sh (see its head),
# each run on kernel sockets or through `udsfs run`; lane_raw.py's helpers come first
# (with_helpers). Roles:
#   client PATH N DIR   connects N times to PATH, writes each connection nonblocking until
#                       it takes no more (a pattern per connection), writes the counts to
#                       DIR/counts, then waits for DIR/done and closes.
#   server PATH N DIR PAIRS
#                       first fills PAIRS socketpairs of its own one way (held to the end:
#                       its share of the queued bytes), then accepts N connections, a MSG_DONTWAIT recv on each (its library's
#                       ask), waits for DIR/counts, asks SIOCOUTQ on each (through the
#                       daemon: the lane goes down, its ring's bytes into the queue), then
#                       reads each to its count: "whole" or what it got.
#   own_fill PATH N DIR (A's server) accepts N connections (a MSG_DONTWAIT recv on each: its
#                       library's ask), waits for DIR/counts (the client filled them),
#                       then fills a socketpair of its own one way: what it took, and its
#                       lane; then DIR/done. With N 0: the fill alone, at once.
#   fionread            a socketpair with 5 bytes unread, asked FIONREAD with Python's
#                       fcntl.ioctl (its buffer at any address: Python copies it to a char
#                       array on its stack) and with ctypes: both counts.
#   pairs N             N socketpairs, each written one way nonblocking until it takes no
#                       more: the bytes the process holds unread in them.
import array
import fcntl
import sys
import termios
import time


def pattern(conn, n):
    return bytes((conn * 7 + i) % 251 for i in range(n))


def fill(s, conn):
    s.setblocking(False)
    total, why = 0, "EAGAIN"
    chunk = pattern(conn, 16384 + 251)
    while True:
        at = total % 251
        try:
            n = s.send(chunk[at : at + 16384])
        except BlockingIOError:
            break
        except OSError as e:
            why = errno.errorcode.get(e.errno, str(e.errno))
            break
        total += n
    return total, why


def wait_file(path, secs=20):
    end = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit(f"no {path} in {secs} s")
        time.sleep(0.01)


def client(path, n, d):
    conns = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        conns.append(s)
    # Filled once the server accepted each (and asked for its lane): a
    # connection filled before, through the daemon, gets no lane (its
    # bytes queued), and the case would try nothing on it (load ~20).
    wait_file(f"{d}/accepted", 30)
    got = [fill(s, i) for i, s in enumerate(conns)]
    lanes = [lane_status(s) for s in conns]
    with open(f"{d}/counts.tmp", "w") as f:
        f.write(" ".join(str(c) for c, _ in got))
    os.rename(f"{d}/counts.tmp", f"{d}/counts")
    print("client: wrote", " ".join(f"{c}({w})" for c, w in got), "lanes", ",".join(lanes))
    wait_file(f"{d}/done", 30)


def server(path, n, d, npairs):
    held = [socket.socketpair() for _ in range(npairs)]
    mine = sum(fill(a, i)[0] for i, (a, _) in enumerate(held))
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    os.chmod(path, 0o777)
    ls.listen(n)
    print("listening", flush=True)
    conns, first = [], []
    for _ in range(n):
        c, _ = ls.accept()
        try:
            first.append(c.recv(1, socket.MSG_DONTWAIT))
        except BlockingIOError:
            first.append(b"")
        conns.append(c)
    open(f"{d}/accepted", "w").close()
    wait_file(f"{d}/counts")
    counts = [int(x) for x in open(f"{d}/counts").read().split()]
    # every lane down first (each ring's bytes into the engine's queue), then the reads
    for c in conns:
        b = ctypes.c_int(0)
        libc.ioctl(c.fileno(), ctypes.c_ulong(termios.TIOCOUTQ), ctypes.byref(b))
    out = []
    for i, c in enumerate(conns):
        c.settimeout(2)
        data = bytearray(first[i])
        try:
            while len(data) < counts[i]:
                r = c.recv(65536)
                if not r:
                    break
                data += r
        except (socket.timeout, OSError) as e:
            data_err = type(e).__name__
        else:
            data_err = "eof" if len(data) < counts[i] else ""
        if len(data) == counts[i] and data == pattern(i, len(data)):
            out.append("whole")
        else:
            good = next((k for k in range(len(data)) if data[k] != (i * 7 + k) % 251), len(data))
            out.append(f"short({len(data)} of {counts[i]}, right up to {good}{', ' + data_err if data_err else ''})")
    open(f"{d}/done", "w").close()
    print("server:", " ".join(out))
    print(f"server held {mine} bytes in {npairs} pairs of its own")


def own_fill(path, n, d):
    conns = []
    if n:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        os.chmod(path, 0o777)
        ls.listen(n)
        print("listening", flush=True)
        for _ in range(n):
            c, _ = ls.accept()
            try:
                c.recv(1, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
            conns.append(c)
        open(f"{d}/accepted", "w").close()
        wait_file(f"{d}/counts")
    a, b = socket.socketpair()
    c, w = fill(a, 0)
    print(f"own_fill: took {c} ({w}), lane {lane_status(a)}")
    if n:
        open(f"{d}/done", "w").close()


def pairs(n):
    held, lanes, why = 0, [], {}
    keep = []
    for i in range(n):
        a, b = socket.socketpair()
        keep.append((a, b))
        c, w = fill(a, i)
        held += c
        why[w] = why.get(w, 0) + 1
        lanes.append(lane_status(a))
    print(f"pairs: {n} pairs hold {held} bytes unread ({why}), lanes {','.join(sorted(set(lanes)))} ({lanes.count('direct')} direct)")


def fionread():
    a, b = socket.socketpair()
    a.send(b"hello")
    buf = array.array("i", [0])
    fcntl.ioctl(b.fileno(), termios.FIONREAD, buf)
    c = ctypes.c_int(0)
    libc.ioctl(b.fileno(), ctypes.c_ulong(termios.FIONREAD), ctypes.byref(c))
    print(f"fionread: fcntl.ioctl {buf[0]}, ctypes {c.value}")


role = sys.argv[1]
if role == "client":
    client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif role == "server":
    server(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
elif role == "own_fill":
    own_fill(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif role == "fionread":
    fionread()
elif role == "pairs":
    pairs(int(sys.argv[2]))
else:
    sys.exit(f"unknown role {role}")

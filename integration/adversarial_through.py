# adversarial_through.py CASE ARGS...: the programs of adversarial_through.sh (a lane
# through the daemon, docs/LANE.md stage d, under root's capture). udsfs_files.py's
# helpers come first (with_helpers). a_pingpong, b_server and b_flood run through
# `udsfs run` (the library); scribble and take_share use the mount's files and the fd
# channel as the library does (Op::LaneClaim arg 5 and 4, the region mapped), then do
# what the library never would.
import ctypes, mmap, socket, struct  # noqa: E401

# region.rs: header words; a direction's words at 64 + 256 d (tail 0, fin 4,
# writer-waiting 8, writes 20, ledger 24 (8 bytes), head 128, reader-waiting 132);
# direction d's marks at 4096 + 4096 d;
# the rings after the header (HEADER, three pages: region version 5).
DIR = lambda d, off: 64 + 256 * d + off  # noqa: E731
HEADER = 3 * 4096
MARKS0 = 4096
TAIL, FIN, WW, WRITES, LEDGER, HEAD, RW = 0, 4, 8, 20, 24, 128, 132


def say(*a):
    os.write(1, (" ".join(str(x) for x in a) + "\n").encode())


def lane_word(n):
    try:
        return status(n, "lane")
    except OSError:
        return "gone"


def lane_of(s):
    link = os.readlink(f"/proc/self/fd/{s.fileno()}")
    with open(os.path.join(os.path.dirname(link), "status")) as f:
        return "".join(line.strip() for line in f if line.startswith("lane="))


def a_pingpong():
    """A's connection (a listener at argv[2], a forked child connecting and echoing):
    round trips until argv[4]/stop exists; each round's end time and latency to argv[3]."""
    path, out, flags = sys.argv[2], sys.argv[3], sys.argv[4]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    pid = os.fork()
    if pid == 0:
        srv.close()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        while True:
            m = c.recv(100)
            if not m:
                os._exit(0)
            c.sendall(m)
    a, _ = srv.accept()
    rec = []
    i = 0
    stop = os.path.join(flags, "stop")
    while True:
        if i % 100 == 0:
            if os.path.exists(stop):
                break
            if i == 1000:
                say("A warm:", lane_of(a))
                open(os.path.join(flags, "warm"), "w").close()
        m = b"ping-%08d" % i
        t0 = time.monotonic()
        a.sendall(m)
        got = b""
        while len(got) < len(m):
            r = a.recv(len(m) - len(got))
            if not r:
                say("A: EOF")
                sys.exit(1)
            got += r
        t1 = time.monotonic()
        if got != m:
            say("A: wrong echo", got, m)
            sys.exit(1)
        rec.append((t1, t1 - t0))
        i += 1
    say("A at the end:", lane_of(a), "rounds", i)
    with open(out, "w") as f:
        f.write("".join(f"{t:.6f} {d:.6f}\n" for t, d in rec))
    a.close()
    os.waitpid(pid, 0)


def a_huge():
    """A's connection with SO_SNDBUF argv[3] on both ends (a listener at argv[2], a forked
    child echoing): argv[4] round trips of a 1 MiB message, each in one sendall."""
    path, buf, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    size = 1 << 20
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def exact(s, k):
        got = bytearray()
        while len(got) < k:
            r = s.recv(k - len(got))
            if not r:
                raise OSError(errno.ECONNRESET, "EOF")
            got += r
        return bytes(got)

    pid = os.fork()
    if pid == 0:
        srv.close()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buf)
        c.connect(path)
        for _ in range(n):
            c.sendall(exact(c, size))
        os._exit(0)
    a, _ = srv.accept()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buf)
    msg = bytes(range(256)) * (size // 256)
    t0 = time.monotonic()
    for i in range(n):
        a.sendall(msg)
        if exact(a, size) != msg:
            say("A: wrong echo")
            sys.exit(1)
        if i == 0:
            say("A's big connection:", lane_of(a))
    say(f"A: {n} round trips of 1 MiB in {time.monotonic() - t0:.2f} s, {lane_of(a)}")
    os.waitpid(pid, 0)


def b_server():
    """B's listener at argv[2] (argv[3]: stream or seqpacket): each connection accepted
    gets a thread that waits 0.5 s (its peer asks for the lane first) and then sends
    64 KiB pieces until an error."""
    ty = socket.SOCK_SEQPACKET if sys.argv[3] == "seqpacket" else socket.SOCK_STREAM
    srv = socket.socket(socket.AF_UNIX, ty)
    srv.bind(sys.argv[2])
    srv.listen(64)
    say("B's server: listening")

    def feed(c):
        time.sleep(0.5)
        try:
            while True:
                c.sendall(b"b" * 65536)
        except OSError as e:
            say("B's server: a connection ended:", errno.errorcode.get(e.errno, e.errno))
        c.close()

    while True:
        c, _ = srv.accept()
        threading.Thread(target=feed, args=(c,), daemon=True).start()


def b_flood():
    """B's flood through the daemon: argv[3] connections to its own listener at argv[2],
    each written as fast as it goes (argv[4]-byte sends) and read at the other end,
    until argv[5] exists; prints the bytes moved and the connections' lanes, and makes
    argv[6] once each connection has moved bytes."""
    path, n, size, stop = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    moved = [0] * n
    ends, ts = [], []

    def sink(c, k):
        while True:
            d = c.recv(1 << 20)
            if not d:
                return
            moved[k] += len(d)

    def source(c):
        buf = b"f" * size
        try:
            while not os.path.exists(stop):
                c.sendall(buf)
        except OSError:
            pass
        c.shutdown(socket.SHUT_WR)

    def watchdog():
        # (a flood that does not end 10 s after its stop says what it waits for: its
        # setup, each connection's threads still running, bytes moved, the sockets' fds
        # and lanes, and every thread's Python stack)
        while not os.path.exists(stop):
            time.sleep(0.1)
        time.sleep(10)
        left = [t.name for t in ts if t.is_alive()]
        if not left and len(ends) == n:
            return
        say(f"B's flood: 10 s after the stop, {len(ends)} of {n} connections made,"
            f" still running: {' '.join(left) or '(none: the setup)'}")
        for k, (c, s) in enumerate(ends):
            say(f"  connection {k}: moved {moved[k]}; writer fd {c.fileno()} {lane_of(c)},"
                f" reader fd {s.fileno()} {lane_of(s)}")
        import faulthandler
        faulthandler.dump_traceback(all_threads=True)

    threading.Thread(target=watchdog, daemon=True).start()
    for k in range(n):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        s, _ = srv.accept()
        ends.append((c, s))
        # Each connection's lane before its flood: each end asks at its first
        # plain call, and bytes queued through the daemon keep a connection
        # off any lane (its asks run out). Left to the threads, at nice 19
        # beside a loaded machine's work, a source's first sends could come
        # before its sink's first read (a CI run: one connection lane=none).
        for _ in range(8):
            c.sendall(b"h")
            s.recv(1)
            s.sendall(b"h")
            c.recv(1)
            if lane_of(c) == lane_of(s) == "lane=through":
                break
        say(f"B's flood: connection {k}:", lane_of(c), lane_of(s))
        ts.append(threading.Thread(target=sink, args=(s, k), name=f"sink{k}"))
        ts.append(threading.Thread(target=source, args=(c,), name=f"source{k}"))
    for t in ts:
        t.start()
    # The lanes looked at once every connection has moved bytes (a fixed
    # wait was not enough at nice 19 on a loaded machine: the stop came
    # first, and the ends were down after their shutdown); then argv[6] is
    # made for the script's measures to start.
    t0 = time.monotonic()
    while min(moved) == 0 and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    say("B's flood: lanes", " ".join(sorted(set(lane_of(c) for c, _ in ends))))
    open(sys.argv[6], "w").close()
    for t in ts:
        t.join()
    say(f"B's flood: {sum(moved)} bytes moved on {n} connections")


def b_records():
    """B's argv[3] seqpacket connections to its own listener at argv[2], SO_SNDBUF
    argv[4] on each end, each warmed up with small records until it is through the
    daemon, then one big record each way (a quarter of the ring SO_SNDBUF gives, at
    most 1 MiB); holds them until argv[5] exists."""
    path, n, sndbuf, stop = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(64)
    ends, lanes = [], []
    for _ in range(n):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        c.connect(path)
        s, _ = srv.accept()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        for i in range(100):
            c.send(b"w%d" % i)
            s.recv(16)
            s.send(b"w%d" % i)
            c.recv(16)
            if lane_of(c) == lane_of(s) == "lane=through":
                break
        lanes.append(lane_of(c))
        ends.append((c, s))
    eff = ends[0][0].getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    ring = 1 << (eff.bit_length() - 1)
    size = min(1 << 20, ring // 4)
    rec = b"r" * size
    for c, s in ends:
        c.send(rec)
        assert s.recv(size + 1) == rec
        s.send(rec)
        assert c.recv(size + 1) == rec
    say(f"B's records: {n} connections ({', '.join(sorted(set(lanes)))}), SO_SNDBUF {eff}, a record of {size} bytes each way on each")
    open(stop + ".held", "w").close()
    while not os.path.exists(stop):
        time.sleep(0.05)


def through_connection(path, ch, seq=False):
    """B's raw client end of a connection to B's server at `path` (in the mount), its
    lane asked for (Op::LaneClaim arg 5) until granted: (clone fd, number, data fd,
    region mmap, caps, the daemon's eventfd of the region) or, after three connections
    without one (the server's first send may come before this end's first ask on a
    loaded machine: the connection then has bytes queued and no lane), the last
    one's (clone fd, number, data fd, errno name)."""
    for _ in range(3):
        r = through_connection_once(path, ch, seq)
        if len(r) != 4:
            return r
        for f in (r[2], r[0]):
            os.close(f)
    return r


def through_connection_once(path, ch, seq):
    cf, c = clone("seqpacket" if seq else "stream")
    ctl(cf, f"connect {path}")
    dc = os.open(f"{U}/sock/{c}/data", os.O_RDWR | os.O_NONBLOCK)
    g = lane_ask(dc, 5, 300)
    if isinstance(g, str):
        return cf, c, dc, g
    mfd = claim(ch, g[0])
    m = mmap.mmap(mfd, HEADER + g[2] + g[3], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(mfd)
    evs = lane_ctl(dc, 4)
    dev = claim(ch, evs[1]) if not isinstance(evs, str) else evs
    return cf, c, dc, m, (g[2], g[3]), dev


def wake(dev):
    os.write(dev, struct.pack("Q", 1))


def scribble():
    """B's through connections to its own server (argv[2]: stream, argv[3]: seqpacket),
    one per scribble: each field of B's own region written over, the daemon woken (its
    eventfd of the region, as a publish writes it); then whether B's connection was reset.
    Last, "spin": B's incoming ring full (its server writes, B never reads), B clears the
    daemon's writer-waiting word on it as fast as it can for argv[4] seconds."""
    path, spath, spin_s = sys.argv[2], sys.argv[3], float(sys.argv[4])
    ch = channel()

    def head(m):
        return struct.unpack_from("I", m, DIR(1, TAIL))[0]

    cases = {
        "tail of B's outgoing ring past the ring": lambda m, caps: struct.pack_into("I", m, DIR(0, TAIL), caps[0] * 3 + 5),
        "tail of B's outgoing ring at 2^31": lambda m, caps: struct.pack_into("I", m, DIR(0, TAIL), 2**31),
        "head of B's incoming ring past its tail": lambda m, caps: struct.pack_into("I", m, DIR(1, HEAD), head(m) + caps[1] + 64),
        "head of B's incoming ring backwards": lambda m, caps: struct.pack_into("I", m, DIR(1, HEAD), (head(m) - caps[1] * 2) & 0xFFFFFFFF),
        "the header's magic, version and state": lambda m, caps: m.__setitem__(slice(0, 16), b"\xff" * 16),
        "the busy word held up": lambda m, caps: struct.pack_into("I", m, 16, 1),
        "the fin word and marks": lambda m, caps: (struct.pack_into("I", m, DIR(0, FIN), 0xFFFFFFFF), m.__setitem__(slice(MARKS0, MARKS0 + 4096), b"\xee" * 4096)),
        "the writes and ledger words": lambda m, caps: struct.pack_into("<IQ", m, DIR(0, WRITES), 0xFFFFFFFF, 0xFFFFFFFF_00000007),
        "the ring's bytes and a tail within it": lambda m, caps: (m.__setitem__(slice(HEADER, HEADER + 512), b"\x7f" * 512), struct.pack_into("I", m, DIR(0, TAIL), 512)),
    }
    for name, scrib in list(cases.items()) + [("a record's length past the ring (seqpacket)", None)]:
        seq = scrib is None
        r = through_connection(spath if seq else path, ch, seq)
        if len(r) == 4:
            say(f"{name}: no lane ({r[3]})")
            continue
        cf, c, dc, m, caps, dev = r
        before = lane_word(c)
        time.sleep(0.4)  # the server writes, the mover moves into B's ring
        if seq:
            t = struct.unpack_from("I", m, DIR(0, TAIL))[0]
            at = HEADER + t % caps[0]
            struct.pack_into("I", m, at, caps[0] * 4)
            struct.pack_into("I", m, DIR(0, TAIL), t + 8)
        else:
            scrib(m, caps)
        wake(dev)
        time.sleep(0.3)
        after = lane_word(c)
        try:
            d = os.read(dc, 16)
            got = f"a read: {len(d)} bytes"
        except OSError as e:
            got = "a read: " + errno.errorcode.get(e.errno, str(e.errno))
        say(f"{name}: lane before {before}, after {after}; then {got}")
        m.close()
        for f in (dev, dc, cf):
            os.close(f)
    # spin
    cf, c, dc, m, caps, dev = through_connection(path, ch)
    time.sleep(0.6)  # B's incoming ring fills: the mover raised its writer-waiting word
    say(f"spin: lane {lane_word(c)}, B's incoming ring holds {struct.unpack_from('I', m, DIR(1, TAIL))[0] - struct.unpack_from('I', m, DIR(1, HEAD))[0]} of {caps[1]}")
    open(sys.argv[5], "w").close()
    end = time.monotonic() + spin_s
    n = 0
    at = DIR(1, WW)
    while time.monotonic() < end:
        for _ in range(1000):
            struct.pack_into("I", m, at, 0)
        wake(dev)
        n += 1
    say(f"spin: {n * 1000} clears of the writer-waiting word in {spin_s} s; lane {lane_word(c)}")
    m.close()
    for f in (dev, dc, cf):
        os.close(f)


def take_share():
    """B's raw through connections (its own listener at @argv[2], both ends asking,
    Op::LaneClaim arg 5) until one is refused; prints how many and why, then holds
    them until argv[3] exists."""
    name, go = sys.argv[2], sys.argv[3]
    lf, L = clone("stream")
    ctl(lf, f"bind @{name}")
    ctl(lf, "listen 512")
    ch = channel()
    held, why = [], ""
    while len(held) < 5000:
        cf, c = clone("stream")
        ctl(cf, f"connect @{name}")
        dc = os.open(f"{U}/sock/{c}/data", os.O_RDWR | os.O_NONBLOCK)
        first = lane_ctl(dc, 5)
        af = os.open(f"{U}/sock/{L}/accept", os.O_RDWR)
        s = int(os.read(af, 32).split()[0])
        ds = os.open(f"{U}/sock/{s}/data", os.O_RDWR | os.O_NONBLOCK)
        g = lane_ctl(ds, 5)
        held.append((cf, dc, af, ds))
        if not isinstance(g, str):
            # the region as the library claims it (its deposit is B's until then)
            f = claim(ch, g[0])
            if isinstance(f, int):
                os.close(f)
        if isinstance(g, str):
            why = f"the accepter's ask: {g} (the connector's: {first if isinstance(first, str) else 'a lane'})"
            break
        if lane_word(s) != "through":
            why = f"lane={lane_word(s)}"
            break
        if len(held) == 1:
            # Its accept handle read again (a control handle moves no bytes):
            # before, the read took the lane down, as did the first read's
            # end when the ask made the lane before it (1 run in 10 here).
            os.pread(af, 32, 0)
            say(f"B's first connection after its accept handle's read again: lane={lane_word(s)}")
    say(f"B's through connections: {len(held) - 1}, then {why}")
    open(go + ".held", "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)


CASES = {f.__name__: f for f in (a_huge, a_pingpong, b_records, b_server, b_flood, scribble, take_share)}
CASES[sys.argv[1]]()

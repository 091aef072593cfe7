# adversarial_lanes.py CASE ARGS...: a user's raw moves against the fast lane of a
# --lanes mount (docs/LANE.md), through the mount's files and the fd channel, without
# the library: the library's own requests (Op::LaneClaim arg 3 for a pair's region,
# the region claimed by its depot tag over the fd channel, mmap), then what a hostile
# holder of a region may do with it. udsfs_files.py's helpers and lane_raw.py's requests come first (with_helpers).
import ctypes, mmap, socket, struct, select  # noqa: E401

BUSY = (16, 20)  # the busy words of sides 0 and 1 (region.rs: header offset 16 + 4 side)
HEADER = 3 * 4096  # the region's header (region.rs HEADER, version 5); the rings follow


def say(*a):
    print(*a, flush=True)


def laned_pair(ch):
    """A fresh stream pair with a lane: (pair fd, data fd of a, of b, region mmap, grant)."""
    pf, a, b = pair("stream")
    da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
    db = os.open(f"{U}/sock/{b}/data", os.O_RDWR | os.O_NONBLOCK)
    g = lane_ctl(da, 3)
    if isinstance(g, str):
        raise OSError(f"lane prepare: {g}")
    mfd = claim(ch, g[0])
    if isinstance(mfd, str):
        raise OSError(f"claim of the region: {mfd}")
    m = mmap.mmap(mfd, HEADER + g[2] + g[3], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(mfd)
    return pf, a, b, da, db, m, g


def connected(name):
    """A stream socket connected to @name: its clone file's and its data file's descriptors."""
    cf, C = clone("stream")
    ctl(cf, f"connect @{name}")
    return cf, os.open(f"{U}/sock/{C}/data", os.O_RDWR | os.O_NONBLOCK)


def laned_connection(name):
    """A stream socket connected to @name, its lane asked for (Op::LaneClaim arg 5, again
    while EAGAIN, 5 s at most): its clone file's descriptor, its name, its data file's
    descriptor and the grant (or the errno name)."""
    cf, c = clone("stream")
    ctl(cf, f"connect @{name}")
    dc = os.open(f"{U}/sock/{c}/data", os.O_RDWR | os.O_NONBLOCK)
    return cf, c, dc, lane_ask(dc, 5, 500)


def close_pair(p):
    pf, _, _, da, db, m, _ = p
    m.close()
    for f in (da, db, pf):
        os.close(f)


def prepare():
    """A laned pair whose region is not claimed yet (the library's moment between its
    Op::LaneClaim arg 3 and its claim over the fd channel): prints its sockets and the
    region's tag (for another user), holds it argv[2] seconds, then claims the region
    itself (whether it still could: another's claim would have taken it)."""
    pf, a, b = pair("stream")
    da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
    g = lane_ctl(da, 3)
    say(f"pair {a} {b} tag {g[0]}")
    time.sleep(float(sys.argv[2]))
    got = claim(channel(), g[0])
    say("the owner's own claim afterwards:", got if isinstance(got, str) else "a file")


def claim_tag():
    """Claims argv[2]'s tag (another user's region) over the channel."""
    ch = channel()
    say("claim of another user's region:", claim(ch, int(sys.argv[2])))
    for guess in (int(sys.argv[2]) ^ 1, 1 << 63, (1 << 63) | 1):
        say("claim of a guessed tag:", claim(ch, guess))


def open_other():
    """Opens another user's socket argv[2]'s data file, and asks for its lane."""
    n = sys.argv[2]
    say("open of another user's data file:", err(os.open, f"{U}/sock/{n}/data", os.O_RDWR))


def stall():
    """STALLERS threads, each with PAIRS laned pairs made first, their busy words held
    up; then (a line "go" printed) each thread reads its pairs' ends one after another:
    each read's way down waits for the busy word on a FUSE worker thread."""
    stallers, pairs = int(sys.argv[2]), int(sys.argv[3])
    ch = channel()
    made = [[laned_pair(ch) for _ in range(pairs)] for _ in range(stallers)]
    for ps in made:
        for p in ps:
            struct.pack_into("I", p[5], BUSY[0], 1)
    say("go")
    t0 = time.monotonic()

    got = []

    def one(ps):
        for p in ps:
            try:
                os.read(p[3], 16)
                got.append("bytes")
            except OSError as e:
                got.append(errno.errorcode.get(e.errno, "?"))

    ts = [threading.Thread(target=one, args=(ps,)) for ps in made]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    seen = ", ".join(f"{got.count(k)} {k}" for k in sorted(set(got)))
    say(f"ways down held up: {stallers * pairs} in {time.monotonic() - t0:.1f} s; the stuck ends' reads: {seen}")
    for ps in made:
        for p in ps:
            close_pair(p)


def probe():
    """N requests of this user (a pair made and closed), each timed: the median and worst ms."""
    n = int(sys.argv[2])
    took = []
    for _ in range(n):
        t = time.monotonic()
        fd, _, _ = pair("stream")
        os.close(fd)
        took.append((time.monotonic() - t) * 1000)
        time.sleep(0.02)
    took.sort()
    say(f"median {took[len(took) // 2]:.1f} worst {took[-1]:.1f}")


def take_lanes():
    """Makes laned pairs until refused, holds them argv[3] seconds; prints how many."""
    most, hold = int(sys.argv[2]), float(sys.argv[3])
    ch = channel()
    held, why = [], ""
    while len(held) < most:
        try:
            pf, a, b = pair("stream")
        except OSError as e:
            why = f"pair: {errno.errorcode.get(e.errno)}"
            break
        da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
        g = lane_ctl(da, 3)
        if isinstance(g, str):
            why = f"lane: {g}"
            os.close(da)
            os.close(pf)
            break
        # the region's depot entry is the socket's until claimed: claimed and closed
        f = claim(ch, g[0])
        if not isinstance(f, str):
            os.close(f)
        held.append((pf, da))
    # and then channel connections, each charged to this user, within its share
    extra = [channel() for _ in range(int(os.environ.get("EXTRA_CONNS", "0")))]
    say(f"lanes taken: {len(held)} ({why}) pid {os.getpid()}")
    time.sleep(hold)


def one_lane():
    """Whether a fresh pair of this user gets a lane now."""
    pf, a, b = pair("stream")
    da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
    g = lane_ctl(da, 3)
    say("a lane for a fresh pair:", "yes" if not isinstance(g, str) else g)


def scribble():
    """Lying positions and scribbles while the daemon drains the way down; then the
    pair must still answer (no panic, bounded time)."""
    ch = channel()
    worst = 0.0
    for lie in range(40):
        p = laned_pair(ch)
        m, cap0 = p[5], p[6][2]
        vals = [0, 1, 3, cap0 - 1, cap0, cap0 + 1, 2**31, 2**32 - 1, 2**32 - 4, 7 * cap0 + 5]
        tail, head = vals[lie % len(vals)], vals[(lie // len(vals) * 3 + lie) % len(vals)]
        # ring 0's words: the writer's tail at dir_word(0, 0) = 64, the reader's head at 64 + 128
        struct.pack_into("II", m, 64, tail & 0xFFFFFFFF, 0)
        struct.pack_into("I", m, 64 + 128, head & 0xFFFFFFFF)
        struct.pack_into("I", m, BUSY[0], int(lie % 4 == 0))
        stop = [False]

        def scrib():
            i = 0
            while not stop[0]:
                m[HEADER + (i * 7919) % cap0] = i & 0xFF
                i += 1

        t = threading.Thread(target=scrib)
        t.start()
        t0 = time.monotonic()
        try:
            os.read(p[3], 16)
        except OSError:
            pass
        worst = max(worst, time.monotonic() - t0)
        stop[0] = True
        t.join()
        try:
            os.read(p[4], 1 << 20)
        except OSError:
            pass
        close_pair(p)
    say(f"scribbled ways down: 40, worst {worst:.2f} s")


def server():
    """A's listener at @argv[2]: accepts argv[3] connections, each accept (the open of
    its accept file) and a nonblocking read of it timed; prints the worst in ms."""
    name, n = sys.argv[2], int(sys.argv[3])
    lf, L = clone("stream")
    ctl(lf, f"bind @{name}")
    ctl(lf, "listen 64")
    say("listening")
    worst, held = 0.0, []
    for _ in range(n):
        while status(L).get("pending", "0") == "0":
            time.sleep(0.01)
        t = time.monotonic()
        a = os.open(f"{U}/sock/{L}/accept", os.O_RDWR | os.O_NONBLOCK)
        try:
            os.read(a, 16)
        except BlockingIOError:
            pass
        worst = max(worst, (time.monotonic() - t) * 1000)
        held.append(a)
    say(f"worst accept and read: {worst:.0f} ms")


def client_lanes():
    """B's argv[3] connections to @argv[2], each asked for a lane (Op::LaneClaim arg 3 on
    B's own connected socket, the peer A's), its region's busy word held up."""
    name, n = sys.argv[2], int(sys.argv[3])
    ch = channel()
    got, held = [], []
    for _ in range(n):
        cf, dc = connected(name)
        g = lane_ctl(dc, 3)
        got.append("lane" if not isinstance(g, str) else g)
        if not isinstance(g, str):
            mfd = claim(ch, g[0])
            m = mmap.mmap(mfd, HEADER + g[2] + g[3], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            struct.pack_into("I", m, BUSY[0], 1)
            held.append(m)
        held += [cf, dc]
    say("B's lane requests on its connections to A:", " ".join(sorted(set(got))))
    time.sleep(float(sys.argv[4]))


def lane_server():
    """A's listener at @argv[2] (backlog 512): once argv[4] exists, accepts argv[3]
    connections, each as its library would take a lane: its data file opened, asked
    (Op::LaneClaim arg 5), a granted region claimed over the fd channel and closed.
    Prints how the asks went, then holds everything until argv[4].done exists."""
    name, n, go = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    lf, L = clone("stream")
    ctl(lf, f"bind @{name}")
    ctl(lf, "listen 512")
    say("listening")
    while not os.path.exists(go):
        time.sleep(0.01)
    ch = channel()
    got, held = [], []
    for _ in range(n):
        a = os.open(f"{U}/sock/{L}/accept", os.O_RDWR)
        d = os.open(f"{U}/sock/{int(os.read(a, 32).split()[0])}/data", os.O_RDWR | os.O_NONBLOCK)
        g = lane_ctl(d, 5)
        if isinstance(g, str):
            got.append(g)
        else:
            m = claim(ch, g[0])
            got.append("lane" if isinstance(m, int) else m)
            if isinstance(m, int):
                os.close(m)
        held += [a, d]
    say("A's asks: " + ", ".join(f"{got.count(k)} {k}" for k in sorted(set(got))))
    while not os.path.exists(go + ".done"):
        time.sleep(0.05)


def connect_first():
    """B's argv[3] connections to @argv[2], each asked for its lane (Op::LaneClaim
    arg 5) before A accepts it (EAGAIN: A's ask then makes the lane); prints how the
    asks went, then holds them until argv[4] exists."""
    name, n = sys.argv[2], int(sys.argv[3])
    got, held = [], []
    for _ in range(n):
        cf, dc = connected(name)
        g = lane_ctl(dc, 5)
        got.append("lane" if not isinstance(g, str) else g)
        held += [cf, dc]
    say("B's asks before the accepts: " + ", ".join(f"{got.count(k)} {k}" for k in sorted(set(got))))
    while not os.path.exists(sys.argv[4]):
        time.sleep(0.05)


def charge():
    """B's own pairs: argv[2] times, bytes written straight into ring 0 of a fresh
    region (its end never claimed, Op::LaneClaim arg 0), the tail moved to the ring's
    end, then a read of the other end: the way down queues them. Prints how many bytes
    B's sockets then hold queued, with the pairs kept open argv[3] seconds."""
    n, hold = int(sys.argv[2]), float(sys.argv[3])
    ch = channel()
    total, held = 0, []
    for _ in range(n):
        p = laned_pair(ch)
        m, cap0 = p[5], p[6][2]
        m[HEADER:HEADER + cap0] = b"q" * cap0
        struct.pack_into("I", m, 64, cap0)
        try:
            os.read(p[3], 16)
        except BlockingIOError:
            pass
        total += int(status(p[2], "rcvq_bytes") or 0)
        m.close()
        held.append(p)
    say(f"B's queued bytes: {total}")
    time.sleep(hold)


def fill_own():
    """A fresh pair of this user filled with 4096-byte nonblocking writes: how it ends."""
    pf, a, b = pair("stream")
    da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
    n = 0
    while True:
        try:
            n += os.write(da, b"a" * 4096)
        except OSError as e:
            say(f"A's pair took {n} bytes, then {errno.errorcode.get(e.errno)}")
            return


def claim_after_setuid():
    """Run as root: connects to the fd channel, then becomes uid argv[3] (as a program
    that drops its privileges after the library connected), and claims argv[2]'s tag
    (another user's region) on that connection, then on a new one."""
    ch = channel()
    uid = int(sys.argv[3])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    got = claim(ch, int(sys.argv[2]))
    say("claim on root's connection after setuid:", got if isinstance(got, str) else "a file")
    got = claim(channel(), int(sys.argv[2]))
    say("claim on a new connection:", got if isinstance(got, str) else "a file")


def deposit(c, fds):
    """A DEPOSIT of `fds` over channel connection `c`: ("T", n tags) or ("E", errno name)."""
    import array
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    msg = c.recv(1 + 8 * 253)
    if msg[:1] == b"E":
        return "E", errno.errorcode.get(struct.unpack_from("i", msg, 1)[0], "?")
    return msg[:1].decode(), (len(msg) - 1) // 8


def ctrunc():
    """Fills this user's share of the daemon's descriptors with single deposits (one
    connection per 250), lets 10 go (a connection of 10 closed), then sends argv[2]
    deposits of 253 files on one more connection: each is truncated to the room left
    (MSG_CTRUNC, ETOOMANYREFS). Prints what each got, then waits for a line on stdin."""
    r, w = os.pipe()
    conns, held = [], 0
    ten = channel()
    for _ in range(10):
        assert deposit(ten, [w])[0] == "T"
    while True:
        c = channel()
        conns.append(c)
        kind, got = "T", 0
        for _ in range(250):
            kind, body = deposit(c, [w])
            if kind != "T":
                break
            got += 1
        held += got
        if kind != "T":
            break
    ten.close()
    time.sleep(0.5)
    last = channel()
    answers = [deposit(last, [w] * 253) for _ in range(int(sys.argv[2]))]
    say(f"share filled with {held + 10} deposits, 10 let go; the 253-file deposits got:",
        " ".join(sorted(set(f"{k}:{b}" for k, b in answers))))
    sys.stdin.readline()


def userns():
    """In a user (and pid) namespace of its own, root there: a laned pair of its own,
    its region claimed; then argv[2]'s tag (another user's region)."""
    ch = channel()
    try:
        p = laned_pair(ch)
        say("own region in a user namespace:", f"{p[6][2]}+{p[6][3]} bytes mapped")
    except OSError as e:
        say("own region in a user namespace:", e)
    say("another user's region from a user namespace:", claim(ch, int(sys.argv[2])))


def deposit_one():
    """One pipe deposited over a new channel connection: the answer."""
    r, w = os.pipe()
    try:
        c = channel()
        c.settimeout(5)
        k, b = deposit(c, [w])
        say("A's deposit:", f"{k}:{b}")
    except socket.timeout:
        say("A's deposit: no answer in 5 s")
    except OSError as e:
        say("A's deposit:", errno.errorcode.get(e.errno, str(e)))


def hup_drain():
    """B's argv[3] connections to A's laned server @argv[2], one at a time: B asks for
    each lane (Op::LaneClaim arg 5, again while EAGAIN) and for its eventfds (arg 4,
    both ends': A's among them), waits argv[4] seconds for A's library to claim its end
    and sleep on its eventfd, then (argv[5] "drain") a child of B spins reading A's
    eventfd while B closes its socket (the way down writes A's eventfd: A's only
    wake-up). Prints "closed I T" (CLOCK_MONOTONIC) for each, and how each lane went."""
    name, n, settle = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    drain = sys.argv[5] == "drain"
    ch = channel()
    for i in range(1, n + 1):
        cf, c, dc, g = laned_connection(name)
        evs = lane_ctl(dc, 4) if not isinstance(g, str) else g
        if isinstance(evs, str):
            say(f"connection {i}: lane {g}, eventfds {evs}")
            theirs = None
        else:
            theirs = claim(ch, evs[1 - g[1]])
        time.sleep(settle)
        say(f"connection {i}: lane {status(c, 'lane')}, A's eventfd: {'yes' if isinstance(theirs, int) else theirs}")
        child = None
        if isinstance(theirs, int) and drain:
            os.set_blocking(theirs, False)
            child = os.fork()
            if child == 0:
                os.close(dc)
                os.close(cf)
                end = time.monotonic() + 1.0
                while time.monotonic() < end:
                    try:
                        os.read(theirs, 8)
                    except BlockingIOError:
                        pass
                os._exit(0)
            time.sleep(0.05)
        os.close(dc)
        os.close(cf)
        say(f"closed {i} {time.monotonic():.3f}")
        if child:
            os.waitpid(child, 0)
        if isinstance(theirs, int):
            os.close(theirs)
        time.sleep(0.5)


def share_draining():
    """B's laned pairs until refused (its share of the mount's lanes), each region's
    busy word of side 0 held up; then B opens each pair's data file again, which starts
    its way down (the lane stays in the daemon, its region mapped, until the busy word
    falls or BUSY_WAIT, 500 ms); within argv[2] seconds of the first open, B asks for
    new laned pairs. Prints how many it had, how long the opens took and how many more
    it got, then holds them all argv[3] seconds."""
    window, hold = float(sys.argv[2]), float(sys.argv[3])
    ch = channel()

    def take(until):
        got = []
        while until is None or time.monotonic() < until:
            try:
                got.append(laned_pair(ch))
            except OSError as e:
                return got, str(e)
        return got, "the window closed"

    first, why = take(None)
    for p in first:
        struct.pack_into("I", p[5], BUSY[0], 1)
    t0 = time.monotonic()
    opened = [os.open(f"{U}/sock/{p[1]}/data", os.O_RDWR | os.O_NONBLOCK) for p in first]
    took = time.monotonic() - t0
    more, why2 = take(t0 + window)
    say(f"B's lanes: {len(first)} ({why}); their ways down started in {took * 1000:.0f} ms; "
        f"more lanes within {window * 1000:.0f} ms of that: {len(more)} ({why2}) pid {os.getpid()}")
    time.sleep(hold)
    del opened


def head_lie():
    """B's connection to A's laned server @argv[2]: B asks for its lane (arg 5, again
    while EAGAIN), maps the region, waits argv[3] seconds for A's library to claim its
    end and sleep on it, then writes A's published head word of the ring B writes (a
    word only A's reader writes) one byte behind B's tail: a look at the region's words
    then says a byte is there, A's reader (its own position) has none; one write of
    A's eventfd (arg 4) wakes A to look (argv[5] "nolie": the wake-up alone). Prints
    "scribbled", then holds the connection argv[4] seconds."""
    name, settle, hold = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    lie = sys.argv[5] == "lie"
    ch = channel()
    cf, c, dc, g = laned_connection(name)
    if isinstance(g, str):
        raise OSError(f"lane: {g}")
    mfd = claim(ch, g[0])
    m = mmap.mmap(mfd, HEADER + g[2] + g[3], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    time.sleep(settle)
    side = g[1]
    tail = struct.unpack_from("I", m, 64 + 256 * side)[0]
    if lie:
        struct.pack_into("I", m, 64 + 256 * side + 128, (tail - 1) & 0xFFFFFFFF)
    # and one wake-up of A (its eventfd, arg 4: as a write of a byte would)
    evs = lane_ctl(dc, 4)
    theirs = claim(ch, evs[1 - side]) if not isinstance(evs, str) else evs
    if isinstance(theirs, int):
        os.write(theirs, struct.pack("Q", 1))
    say(f"woke A: {'yes' if isinstance(theirs, int) else theirs}")
    say(f"scribbled ({'lie' if lie else 'no lie'}): lane {status(c, 'lane')}, side {side}, A's head word set to {(tail - 1) & 0xFFFFFFFF:#x} (tail {tail:#x})")
    time.sleep(hold)
    say(f"after: lane {status(c, 'lane')}")


CASES = {f.__name__: f for f in (head_lie, share_draining, hup_drain, lane_server, connect_first, prepare, deposit_one, userns, ctrunc, claim_after_setuid, charge, fill_own, claim_tag, server, client_lanes, open_other, stall, probe, take_lanes, one_lane, scribble)}
CASES[sys.argv[1]]()

"""The attacker's and the victims' programs of adversarial_fdpath.sh (the fd
channel's path socket, src/fdchannel.rs, as other users see it). Each mode
prints one line of key=value words (or writes it to a file, whole, for a
program that runs on in the background).
"""
import array, contextlib, errno, os, socket, struct, sys, time

FILE_TAG = 1 << 63


def name(e):
    return errno.errorcode.get(e, str(e))


def report(**kv):
    print(" ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def write_whole(path, text):
    with open(path + ".new", "w") as f:
        f.write(text + "\n")
    os.rename(path + ".new", path)


def connect(where):
    """A connection to `where`: a path, or @NAME for an abstract name."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect("\0" + where[1:] if where.startswith("@") else where)
    c.settimeout(5)
    return c


def answer(c):
    try:
        msg, anc, _, _ = c.recvmsg(8 * 254, socket.CMSG_SPACE(4 * 253))
    except OSError as e:
        return name(e.errno)
    if msg[:1] == b"E":
        return name(struct.unpack("i", msg[1:5])[0])
    return msg[:1].decode() or "EOF"


def request(c, kind, fds=()):
    try:
        if fds:
            c.sendmsg([kind], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            c.send(kind)
    except OSError:
        pass  # refused already: its answer waits
    return answer(c)


def pid_range(first, count):
    top = int(open("/proc/sys/kernel/pid_max").read())
    # (past pid_max - 1, Linux goes on at 300)
    return [p if p < top else p - top + 300 for p in range(first, first + count)]


mode = sys.argv[1]
if mode == "catch":
    # Binds abstract NAME and keeps every file a client deposits there.
    where, secs, out = sys.argv[2], float(sys.argv[3]), sys.argv[4]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind("\0" + where)
    s.listen(16)
    s.settimeout(0.1)
    conns, caught = 0, []
    write_whole(out, "connections=0 caught=none")
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        conns += 1
        c.settimeout(2)
        try:
            msg, fds, _, _ = socket.recv_fds(c, 4096, 253)
        except OSError:
            msg, fds = b"", []
        for fd in fds:
            caught.append(os.readlink(f"/proc/self/fd/{fd}"))
        try:
            c.send(b"T" + struct.pack("Q", FILE_TAG | 5) * len(fds))
        except OSError:
            pass
        write_whole(out, f"connections={conns} caught={','.join(caught) or 'none'}")
elif mode == "squat":
    # /tmp/udsfs-P for the next pids, each a KIND: `sock` (a directory of the
    # attacker's, 0777, its listening socket `fdchannel` in it), `file`, or
    # `link:TARGET` (a symlink to a place of the victim's); then counts what
    # its sockets accept until STOP exists.
    kind, first, count, out, stop = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    socks, made = [], 0
    for p in pid_range(first, count):
        d = f"/tmp/udsfs-{p}"
        try:
            if kind == "sock":
                os.mkdir(d)
                os.chmod(d, 0o777)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.bind(d + "/fdchannel")
                os.chmod(d + "/fdchannel", 0o666)
                s.listen(16)
                s.setblocking(False)
                socks.append(s)
            elif kind == "file":
                open(d, "x").close()
            else:
                os.symlink(kind[len("link:"):], d)
            made += 1
        except OSError:
            pass
    accepted = 0
    write_whole(out, f"made={made} accepted=0")
    while not os.path.exists(stop):
        for s in socks:
            # (one connection a look: what waits is counted at the next)
            with contextlib.suppress(BlockingIOError):
                s.accept()[0].close()
                accepted += 1
        write_whole(out, f"made={made} accepted={accepted}")
        time.sleep(0.05)
elif mode == "probe":
    # One deposit of a pipe at WHERE.
    try:
        c = connect(sys.argv[2])
    except OSError as e:
        report(deposit=name(e.errno))
        sys.exit(0)
    r, w = os.pipe()
    report(deposit=request(c, b"D", [w]))
elif mode == "flood":
    # N connections, each at PATH and @NAME in turn, each asked one claim:
    # served ones answer EBADF (no such file), refused ones their errno.
    path, abstract, n, hold = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    conns, refused = [], {}
    for i in range(n):
        try:
            c = connect(path if i % 2 == 0 else "@" + abstract)
        except OSError as e:
            refused[name(e.errno)] = refused.get(name(e.errno), 0) + 1
            continue
        k = request(c, b"C" + struct.pack("Q", FILE_TAG | 1))
        if k == "EBADF":
            conns.append(c)
        else:
            refused[k] = refused.get(k, 0) + 1
            c.close()
    report(served=len(conns), refused=",".join(f"{k}:{v}" for k, v in sorted(refused.items())) or "none")
    time.sleep(hold)
elif mode == "stall":
    # Claims sent without ever reading an answer, until the socket takes no
    # more; then held open (the daemon's thread for it blocks in its send).
    c = connect(sys.argv[2])
    c.setblocking(False)
    sent = 0
    try:
        while sent < 100000:
            c.send(b"C" + struct.pack("Q", FILE_TAG | 1))
            sent += 1
    except BlockingIOError:
        pass
    write_whole(sys.argv[3], f"sent={sent}")
    time.sleep(float(sys.argv[4]))
elif mode == "handover":
    # A connection made by user OWNER (served), used by user OTHER, given it.
    where, owner, other = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if os.fork() == 0:
        os.setgroups([])
        os.setresgid(owner, owner, owner)
        os.setresuid(owner, owner, owner)
        c = connect(where)
        socket.send_fds(a, [b"c"], [c.fileno()])
        os._exit(0)
    os.wait()
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    r, w = os.pipe()
    def conn(fd):
        c = socket.socket(fileno=fd)
        c.settimeout(5)
        return c
    first = request(conn(os.dup(fds[0])), b"D", [w])
    if os.fork() == 0:
        os.setgroups([])
        os.setresgid(other, other, other)
        os.setresuid(other, other, other)
        c = conn(fds[0])
        report(owner=first, other_deposit=request(c, b"D", [w]),
               other_claim=request(c, b"C" + struct.pack("Q", FILE_TAG | 1)))
        os._exit(0)
    os.wait()
elif mode == "passfile":
    # Passes FILE (which only this user may read) over a socketpair, as a
    # program does, and reads it through the descriptor received.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    fd = os.open(sys.argv[2], os.O_RDONLY)
    try:
        socket.send_fds(a, [b"f"], [fd])
        _, fds, _, _ = socket.recv_fds(b, 1, 1)
        print("passed:", os.read(fds[0], 64).decode().strip())
    except OSError as e:
        print("sendmsg:", name(e.errno))
elif mode == "cycle":
    # N times: a connection to the channel at PATH, put in flight in a
    # socketpair's queue, the pair's other end deposited over the connection,
    # then all closed: the connection lives on only inside the daemon's own
    # deposit, which goes only when the connection ends.
    got = {}
    for i in range(int(sys.argv[3])):
        c = connect(sys.argv[2])
        s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        socket.send_fds(s1, [b"c"], [c.fileno()])
        k = request(c, b"D", [s2.fileno()])
        got[k] = got.get(k, 0) + 1
        for x in (c, s1, s2):
            x.close()
    report(deposits=",".join(f"{k}:{v}" for k, v in sorted(got.items())))
elif mode == "mountcycle":
    # N times: a dgram pair of the mount (MNT); b's own data file put in
    # flight in a socketpair's queue, the pair's other end deposited and sent
    # to b, never read; all closed: b lives on through its file in the
    # daemon's deposit, which b's queue holds.
    U = os.path.join(sys.argv[2], ".udsfs")
    c = connect(sys.argv[3])
    got = {}
    for i in range(int(sys.argv[4])):
        with open(os.path.join(U, "dgram", "pair"), "rb+", buffering=0) as pf:
            a, b = [int(x) for x in pf.read(64).split()]
            fa = os.open(os.path.join(U, "sock", str(a), "msg"), os.O_WRONLY)
            bdata = os.open(os.path.join(U, "sock", str(b), "data"), os.O_RDONLY)
            s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            socket.send_fds(s1, [b"x"], [bdata])
            c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [s2.fileno()]))])
            m = c.recv(64)
            k = m[:1].decode()
            if k == "T":
                tag = struct.unpack("Q", m[1:9])[0] & ~FILE_TAG
                try:
                    os.write(fa, f"len=1 rights=file:{tag}\nx".encode())
                    k = "sent"
                except OSError as e:
                    k = name(e.errno)
            got[k] = got.get(k, 0) + 1
            for f in (fa, bdata):
                os.close(f)
            s1.close()
            s2.close()
    report(deposits=",".join(f"{k}:{v}" for k, v in sorted(got.items())))

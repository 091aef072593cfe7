# adversarial_lanes3_pass.py server PATH K | client PATH K hold|nohold UDSFS_DIR SECONDS: adversarial_lanes3.sh pass_stall;
# secret_server PATH | secret_client PATH | keep_client PATH SECONDS: region_kept (each mode's comment says).
# server (A): accepts one connection on PATH, receives a message with K descriptors (SCM_RIGHTS) and reads
# each once, nonblocking: what each read got and how long they took. client (B): connects to PATH, makes K
# laned socketpairs with the library's raw requests (Op::LaneClaim arg 3, the region claimed over the fd
# channel), holds each region's busy word of side 0 up (hold) or not, and sends one end of each to A.
import ctypes, errno, mmap, os, socket, struct, sys, time
from lane_raw import claim, lane_ctl, lane_status, libc  # copied beside this file
BUSY0 = 16
def say(*a): print(*a, flush=True)
mode, path = sys.argv[1], sys.argv[2]
SECRET = b"A-SECRET-" * 7000





def pinged(n, byte):
    """A stream connection to PATH after `n` one-byte ping-pongs (both ends' lanes claimed)."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    for _ in range(n):
        c.send(byte)
        c.recv(1)
    return c

if mode == "secret_server":
    # A: the first connection (B's) echoed until EOF; the second (A's own client) gets SECRET
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(path); os.chmod(path, 0o777); l.listen(2)
    say("listening")
    for i in range(2):
        c, _ = l.accept()
        if i == 0:
            while d := c.recv(100):
                c.sendall(d)
        else:
            for _ in range(5):
                c.recv(1); c.send(b"k")
            c.sendall(SECRET)
            c.recv(1)
            say(f"A served its own client {len(SECRET)} bytes, lane {lane_status(c)}")
        c.close()
    sys.exit(0)
if mode == "secret_client":
    # A's own client: 5 ping-pongs, then SECRET in full, then an ack
    c = pinged(5, b"p")
    got = b""
    while len(got) < len(SECRET):
        got += c.recv(65536)
    say(f"A's client got {len(got)} bytes, lane {lane_status(c)}")
    c.send(b"k")
    sys.exit(0)
if mode == "keep_client":
    # B: 20 ping-pongs with A's server (a lane), closed; waits argv[3] seconds (A serves
    # its own client meanwhile), then looks through every lane region still mapped in
    # its process for A's bytes
    c = pinged(20, b"b")
    lane = lane_status(c)
    c.close()
    say(f"B closed its connection (lane {lane})")
    time.sleep(float(sys.argv[3]))
    found, maps = 0, 0
    for line in open("/proc/self/maps"):
        if "udsfs-lane" not in line:
            continue
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if "rw" not in line.split()[1]:
            continue
        maps += 1
        if ctypes.string_at(lo, hi - lo).find(b"A-SECRET-") >= 0:
            found += 1
    say(f"B's lane mappings kept: {maps}; holding A's other connection's bytes: {found}")
    sys.exit(0)
k = int(sys.argv[3])
if mode == "server":
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(path); os.chmod(path, 0o777); l.listen(1)
    say("listening")
    c, _ = l.accept()
    c.recv(1)
    t0 = time.monotonic()
    msg, anc, _, _ = c.recvmsg(16, socket.CMSG_SPACE(4 * k))
    took = time.monotonic() - t0
    n = sum(len(d) // 4 for lvl, ty, d in anc if ty == socket.SCM_RIGHTS)
    say(f"A's recvmsg: {len(msg)} byte, {n} descriptors in {took * 1000:.0f} ms")
    fds = [f for lvl, ty, d in anc if ty == socket.SCM_RIGHTS for f in struct.unpack(f"{len(d) // 4}i", d)]
    got, worst, t0 = [], 0, time.monotonic()
    for f in fds:
        os.set_blocking(f, False)
        t = time.monotonic()
        try:
            got.append("bytes" if os.read(f, 16) else "EOF")
        except OSError as e:
            got.append(errno.errorcode.get(e.errno, "?"))
        worst = max(worst, time.monotonic() - t)
    seen = ", ".join(f"{got.count(x)} {x}" for x in sorted(set(got)))
    say(f"A's nonblocking reads of them: {seen}; {(time.monotonic() - t0) * 1000:.0f} ms in all, the worst {worst * 1000:.0f} ms")
    sys.exit(0)
U = sys.argv[5]
def channel():
    name = open(f"{U}/fdchannel").read().split("\n")[0]
    # (by raw system calls: the library would take the abstract name for the mount's)
    fd = libc.syscall(41, socket.AF_UNIX, socket.SOCK_SEQPACKET, 0)
    addr = struct.pack("H", socket.AF_UNIX) + b"\0" + name.encode()
    if libc.syscall(42, fd, addr, len(addr)) < 0:
        raise OSError(ctypes.get_errno(), "fd channel connect")
    return socket.socket(fileno=fd)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
c.send(b"0")
ch = channel()
held = []
for _ in range(k):
    pf = os.open(f"{U}/stream/pair", os.O_RDWR)
    a, b = map(int, os.read(pf, 64).split())
    da = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
    g = lane_ctl(da, 3)
    if isinstance(g, str):
        raise OSError(f"lane: {g}")
    mfd = claim(ch, g[0])
    m = mmap.mmap(mfd, 3 * 4096 + g[2] + g[3],  # the header: region.rs HEADER
                  mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    if sys.argv[4] == "hold":
        struct.pack_into("I", m, BUSY0, 1)
    held.append((pf, da, m))
t0 = time.monotonic()
c.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{k}i", *[h[1] for h in held]))])
say(f"B sent {k} laned ends ({sys.argv[4]}) in {(time.monotonic() - t0) * 1000:.0f} ms")
time.sleep(float(sys.argv[6]) if len(sys.argv) > 6 else 2)

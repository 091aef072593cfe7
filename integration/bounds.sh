#!/usr/bin/env bash
# Resource bounds: each limit a client can run into is driven to exhaustion and must
# fail with the documented errno, the same figure as the kernel where the kernel has
# the same limit (measured live on kernel sockets), and give the room back afterwards:
#  1. a dgram receiver's queue: max_dgram_qlen + 1 messages from O_NONBLOCK senders that
#     are not its peer, then EAGAIN for each; a mutually connected pair is bounded by
#     the sender's buffer instead (278 small messages, as the kernel);
#  2. a stream (and seqpacket) sender's budget: O_NONBLOCK writes until EAGAIN queue as
#     much as the kernel's do (44 writes of 4096 bytes), the bytes come back intact;
#  3. a listen backlog: backlog + 1 pending connections, then EAGAIN for O_NONBLOCK
#     connects (ctl and .udsfs/abstract/); `listen 100000` is capped at somaxconn 4096,
#     so 4097 connect and the 4098th gets EAGAIN;
#  4. msg records: a header line over 4096 bytes -> EINVAL; len over 1 MiB - 4 KiB ->
#     EMSGSIZE (exactly 1 MiB - 4 KiB goes through a stream); a datagram record over
#     sndbuf - 32 -> EMSGSIZE; rights= with 254 sockets -> EINVAL, 253 go through;
#  5. sockets in flight per user: an unprivileged user with RLIMIT_NOFILE 16 gets
#     ETOOMANYREFS once it has more than 16 in flight (as the kernel); root is exempt;
#  6. received-but-unopened sockets: a reader under `prlimit --nofile=64:64` receiving
#     100 passed sockets without opening them keeps at most 64 .udsfs/sock/H entries,
#     the rest are closed at once (like fds past RLIMIT_NOFILE); adopting one makes room;
#  7. (a second mount: --max-nodes 1000 --sndbuf 65536 --max-dgram-qlen 3) names: the
#     tree holds 1000 nodes, then mkdir, bind, ln -s and mknod (a socket node) fail with ENOSPC and work
#     again after rm; a datagram over sndbuf - 32 = 65504 -> EMSGSIZE; the queue takes
#     3 + 1 messages;
#  8. (a third mount: --sndbuf 4194304) one write of a data file is one datagram of at
#     most 1 MiB - 4 KiB (one FUSE request): 1044480 bytes go through, 1044481 ->
#     EMSGSIZE; a `msg` record takes sndbuf - 32 = 4194272 bytes, 4194273 -> EMSGSIZE,
#     as Linux.
# Every bound and what happened is printed as a "bound:" line.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
chmod 755 "$TMP" # the unprivileged user of section 5 walks through it to the mount

QLEN=$(cat /proc/sys/net/unix/max_dgram_qlen 2>/dev/null || echo 10)
BASE=$(socket_count)
say "host net.unix.max_dgram_qlen=$QLEN; sockets at the start: $BASE"

# Shared by the Python parts: sockets through the mount and on the kernel.
PY_SOCK='
import array, resource, socket
def sock(ty, flags=0):
    fd = os.open(f"{U}/{ty}/clone", os.O_RDWR | flags)
    return fd, int(os.read(fd, 64))
def pair(ty):
    fd = os.open(f"{U}/{ty}/pair", os.O_RDWR)
    n, m = os.read(fd, 64).split()
    return fd, int(n), int(m)
def status(n):
    with open(f"{U}/sock/{n}/status") as f:
        return dict(l.split("=", 1) for l in f.read().splitlines())
def bound(text):
    print(f"bound: {text}", flush=True)
def check(cond, text):
    if not cond:
        sys.exit(f"FAIL: {text}")
    print(f"ok: {text}", flush=True)
def fill(fd, chunk):
    """O_NONBLOCK writes of chunk until EAGAIN: (writes, bytes)."""
    n = total = 0
    while True:
        try:
            k = os.write(fd, chunk)
        except BlockingIOError:
            return n, total
        n += 1
        total += k
def kernel_fill(ty, chunk):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    a.setblocking(False)
    try:
        return fill(a.fileno(), chunk)
    finally:
        a.close()
        b.close()
'
pyb() {
    local code=$1
    shift
    py "$PY_SOCK
$code" "$@"
}

# ---- 1. a dgram receiver's queue
say "== 1. dgram receive queue"
pyb '
qlen = int(sys.argv[1])
r, R = sock("dgram")
os.write(r, b"bind @bq\n")
senders = []
for i in range(3):
    c, C = sock("dgram")
    os.write(c, b"connect @bq\n")
    senders.append((c, os.open(f"{U}/sock/{C}/data", os.O_WRONLY | os.O_NONBLOCK)))
sent = 0
while True:
    progress = False
    for _, d in senders:
        try:
            os.write(d, b"m%d" % sent)
            sent += 1
            progress = True
        except BlockingIOError:
            pass
    if not progress:
        break
    if sent > 10000:
        sys.exit("FAIL: the receive queue takes more than 10000 messages")
# the kernel, the same way
kr = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
kr.bind(b"\0udsfs-bounds-%d" % os.getpid())
ks = []
for i in range(3):
    k = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    k.connect(kr.getsockname())
    k.setblocking(False)
    ks.append(k)
ksent = 0
while True:
    progress = False
    for k in ks:
        try:
            k.send(b"m")
            ksent += 1
            progress = True
        except BlockingIOError:
            pass
    if not progress:
        break
bound(f"dgram receive queue (max_dgram_qlen={qlen}): 3 O_NONBLOCK senders got {sent} messages queued, then EAGAIN each (kernel: {ksent})")
check(sent == qlen + 1, f"the receiver takes max_dgram_qlen + 1 = {qlen + 1} messages")
check(sent == ksent, "as many as a kernel socket takes")
for i, (_, d) in enumerate(senders):
    check(err(os.write, d, b"x") == "EAGAIN", f"sender {i} gets EAGAIN on the full queue")
check(status(R)["rcvq_msgs"] == str(qlen + 1), f"status rcvq_msgs={qlen + 1}")
rd = os.open(f"{U}/sock/{R}/data", os.O_RDONLY | os.O_NONBLOCK)
check(os.read(rd, 100) == b"m0", "the first message reads back first")
check(err(os.write, senders[1][1], b"again") == "OK", "one read makes room for one more message")
check(err(os.write, senders[2][1], b"x") == "EAGAIN", "and only one")

# a mutually connected pair: bounded by the sender budget, not the queue length
p, N, M = pair("dgram")
d = os.open(f"{U}/sock/{N}/data", os.O_WRONLY | os.O_NONBLOCK)
n, _ = fill(d, b"x")
kn, _ = kernel_fill(socket.SOCK_DGRAM, b"x")
bound(f"dgram socketpair (mutually connected): {n} one-byte messages, then EAGAIN (kernel: {kn})")
check(n == kn and n > qlen + 1, "a mutual pair is bounded by the sender buffer, as the kernel")
' "$QLEN" || fail "dgram receive queue bound"
wait_socket_count "$BASE"

# ---- 2. a stream sender's budget
say "== 2. stream and seqpacket sender budget"
pyb '
pat = bytes(range(256)) * 512
for ty, kty, size in (("stream", socket.SOCK_STREAM, 4096), ("stream", socket.SOCK_STREAM, 65536),
                      ("stream", socket.SOCK_STREAM, 1), ("seqpacket", socket.SOCK_SEQPACKET, 4096)):
    p, N, M = pair(ty)
    w = os.open(f"{U}/sock/{N}/data", os.O_WRONLY | os.O_NONBLOCK)
    r = os.open(f"{U}/sock/{M}/data", os.O_RDONLY | os.O_NONBLOCK)
    sent = bytearray()
    writes = 0
    while True:
        chunk = pat[writes % 256 : writes % 256 + size]
        try:
            k = os.write(w, chunk)
        except BlockingIOError:
            break
        sent += chunk[:k]
        writes += 1
    kw, kb = kernel_fill(kty, pat[:size])
    bound(f"{ty} sender budget (sndbuf 212992), {size}-byte O_NONBLOCK writes: {writes} writes, {len(sent)} bytes queued, then EAGAIN (kernel: {kw} writes, {kb} bytes)")
    check((writes, len(sent)) == (kw, kb), f"{ty}: the same as the kernel")
    check(status(M)["rcvq_bytes"] == str(len(sent)), f"{ty}: status rcvq_bytes={len(sent)}")
    check(err(os.write, w, b"x") == "EAGAIN", f"{ty}: one more byte gets EAGAIN")
    if ty == "stream":
        got = drain(r)
    else:
        got = b""
        while True:
            try:
                got += os.read(r, 1 << 20)
            except BlockingIOError:
                break
    check(got == bytes(sent), f"{ty}: all {len(sent)} bytes read back intact")
    check(err(os.write, w, b"x") == "OK", f"{ty}: writable again once read")
    for fd in (w, r, p):
        os.close(fd)
' || fail "stream sender budget"
wait_socket_count "$BASE"

# ---- 3. listen backlogs
say "== 3. listen backlog"
pyb '
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
l, L = sock("stream")
os.write(l, b"bind @bl3\n")
os.write(l, b"listen 3\n")
held = []
n = 0
while True:
    c, C = sock("stream", os.O_NONBLOCK)
    held.append(c)
    e = err(os.write, c, b"connect @bl3\n")
    if e != "OK":
        break
    n += 1
kl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
kl.bind(b"\0udsfs-bl3-%d" % os.getpid())
kl.listen(3)
kheld = []
while True:
    k = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    k.setblocking(False)
    kheld.append(k)
    try:
        k.connect(kl.getsockname())
    except BlockingIOError:
        break
kn = len(kheld) - 1
bound(f"listen 3: {n} O_NONBLOCK connects pending, then {e} (kernel: {kn})")
check(n == 4 and e == "EAGAIN", "backlog + 1 = 4 pending, then EAGAIN")
check(n == kn, "as the kernel")
st = status(L)
check((st.get("pending"), st.get("backlog")) == ("4", "3"), "status pending=4 backlog=3")
check(err(os.open, f"{U}/abstract/bl3", os.O_RDWR | os.O_NONBLOCK) == "EAGAIN",
      "opening .udsfs/abstract/bl3 with O_NONBLOCK gets EAGAIN too")
a = os.open(f"{U}/sock/{L}/accept", os.O_RDWR)
check(err(os.write, held[-1], b"connect @bl3\n") == "OK", "one accept makes room for one more connect")
for fd in held + [a, l]:
    os.close(fd)

# listen 100000: capped at somaxconn
l, L = sock("stream")
os.write(l, b"bind @blbig\n")
os.write(l, b"listen 100000\n")
check(status(L).get("backlog") == "4096", "listen 100000 gives status backlog=4096 (somaxconn)")
held = []
t0 = time.monotonic()
while True:
    try:
        held.append(os.open(f"{U}/abstract/blbig", os.O_RDWR | os.O_NONBLOCK))
    except OSError as e:
        last = errno.errorcode[e.errno]
        break
    if len(held) > 5000:
        sys.exit("FAIL: more than 5000 connections pending on listen 100000")
ms = (time.monotonic() - t0) * 1000
ksom = open("/proc/sys/net/core/somaxconn").read().strip()
bound(f"listen 100000: {len(held)} connections pending (via .udsfs/abstract/, {ms:.0f} ms), then {last} (kernel: capped at net.core.somaxconn={ksom}, so {int(ksom) + 1})")
check(len(held) == 4097 and last == "EAGAIN", "somaxconn + 1 = 4097 pending, then EAGAIN")
check(status(L).get("pending") == "4097", "status pending=4097")
for fd in held + [l]:
    os.close(fd)
for arg in ("", " -1"):
    l, L = sock("stream")
    os.write(l, f"bind @bl{arg.strip()}x\n".encode())
    os.write(l, f"listen{arg}\n".encode())
    b = status(L).get("backlog")
    desc = "listen" + (arg or " with no backlog")
    bound(f"{desc}: backlog {b}")
    check(b == "4096", f"{desc} means somaxconn, 4096")
    os.close(l)
' || fail "listen backlog bound"
wait_socket_count "$BASE" 10000
ok "the 8194 sockets of the backlog test are gone"

# ---- 4. msg records
say "== 4. msg record limits"
pyb '
p, N, M = pair("dgram")
w = os.open(f"{U}/sock/{N}/msg", os.O_WRONLY)
r = os.open(f"{U}/sock/{M}/data", os.O_RDONLY | os.O_NONBLOCK)
def header(total):
    """a record whose header line (with its newline) is TOTAL bytes, payload x"""
    h = b"len=1"
    return h + b" " * (total - len(h) - 1) + b"\nx"
e1, e2 = err(os.write, w, header(4096)), err(os.write, w, header(4097))
bound(f"msg header line: 4096 bytes (with the newline) -> {e1}; 4097 bytes -> {e2}")
check(e1 == "OK" and e2 == "EINVAL", "a header line over 4096 bytes is EINVAL")
check(os.read(r, 100) == b"x", "the 4096-byte-header record arrived")
check(err(os.read, r, 100) == "EAGAIN", "nothing of the refused record was queued")
e3 = err(os.write, w, b"len=212961\n" + b"y" * 212961)
e4 = err(os.write, w, b"len=212960\n" + b"y" * 212960)
bound(f"msg dgram record: len=212961 (sndbuf - 32 + 1) -> {e3}; len=212960 -> {e4}")
check(e3 == "EMSGSIZE" and e4 == "OK", "a datagram over sndbuf - 32 is EMSGSIZE")
check(len(os.read(r, 1 << 20)) == 212960, "the 212960-byte datagram arrived whole")
e5 = err(os.write, w, b"len=1044481\n" + b"z" * 1044481)
bound(f"msg record len=1044481 (1 MiB - 4 KiB + 1) -> {e5}")
check(e5 == "EMSGSIZE", "len over 1 MiB - 4 KiB is EMSGSIZE")
rights = ",".join(str(i + 1) for i in range(254))
e6 = err(os.write, w, f"len=1 rights={rights}\n".encode() + b"r")
bound(f"msg rights= with 254 sockets (SCM_MAX_FD 253) -> {e6}")
check(e6 == "EINVAL", "more than 253 sockets in one record is EINVAL")
# 253 real sockets go through in one record
socks = [sock("dgram") for _ in range(253)]
rm = os.open(f"{U}/sock/{M}/msg", os.O_RDONLY | os.O_NONBLOCK)
e7 = err(os.write, w, ("len=1 rights=" + ",".join(str(n) for _, n in socks) + "\n").encode() + b"r")
for fd, _ in socks:
    os.close(fd)
rec = os.read(rm, 1 << 20)
head = rec.split(b"\n", 1)[0].decode()
got = [f for f in head.split() if f.startswith("rights=")]
nr = len(got[0].split("=", 1)[1].split(",")) if got else 0
bound(f"msg rights= with 253 sockets -> {e7}, the record read back carries {nr}")
check(e7 == "OK" and nr == 253, "253 sockets go through in one record")
os.close(rm)
# a stream takes a record of exactly 1 MiB - 4 KiB (in pieces, as the reader drains it)
sp, SN, SM = pair("stream")
sw = os.open(f"{U}/sock/{SN}/msg", os.O_WRONLY)
sr = os.open(f"{U}/sock/{SM}/data", os.O_RDONLY)
big = bytes((i * 31) % 251 for i in range(1044480))
got = bytearray()
def reader():
    while len(got) < len(big):
        d = os.read(sr, 1 << 20)
        if not d:
            break
        got.extend(d)
t = threading.Thread(target=reader)
t.start()
e8 = err(os.write, sw, b"len=1044480\n" + big)
t.join(10)
bound(f"msg stream record len=1044480 (1 MiB - 4 KiB) -> {e8}, {len(got)} bytes arrived")
check(e8 == "OK" and bytes(got) == big, "a 1 MiB - 4 KiB stream record goes through intact")
' || fail "msg record limits"
wait_socket_count "$BASE"

# ---- 5. sockets in flight per user
say "== 5. sockets in flight per user (ETOOMANYREFS)"
pyb '
LIM = 16
def run(uid, count):
    """in a child with RLIMIT_NOFILE=LIM as uid: pass one socket over a dgram pair
    again and again (udsfs, then the kernel); returns (udsfs passes, errno, kernel
    passes, errno)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (LIM, LIM))
            if uid:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            p, N, M = pair("dgram")
            x, X = sock("stream")
            w = os.open(f"{U}/sock/{N}/msg", os.O_WRONLY | os.O_NONBLOCK)
            n, e = 0, "none"
            while n < count:
                e = err(os.write, w, b"len=1 rights=%d\nx" % X)
                if e != "OK":
                    break
                n += 1
            inflight = status(X)["inflight"]
            for fd in (w, x, p):
                os.close(fd)
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            kx = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            kn, ke = 0, "none"
            while kn < count:
                try:
                    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [kx.fileno()]))])
                except OSError as ex:
                    ke = errno.errorcode[ex.errno]
                    break
                kn += 1
            os.write(wfd, f"{n} {e} {kn} {ke} {inflight}".encode())
            os._exit(0)
        except BaseException as ex:
            os.write(wfd, f"child failed: {ex!r}".encode())
            os._exit(1)
    os.close(wfd)
    out = os.read(rfd, 1000).decode()
    _, st = os.waitpid(pid, 0)
    if st != 0:
        sys.exit(f"FAIL: the child as uid {uid} failed: {out}")
    n, e, kn, ke, inflight = out.split()
    return int(n), e, int(kn), ke, inflight
n, e, kn, ke, inflight = run(65534, 100)
bound(f"in flight per user, uid 65534 with RLIMIT_NOFILE={LIM}: {n} passes, then {e}; status inflight={inflight} (kernel: {kn} passes, then {ke})")
check(e == "ETOOMANYREFS" and n == LIM + 1, f"an unprivileged user gets ETOOMANYREFS past RLIMIT_NOFILE ({LIM + 1} passes, as the kernel counts)")
check((n, e) == (kn, ke), "the same as the kernel")
n, e, kn, ke, inflight = run(0, 100)
bound(f"in flight per user, root with RLIMIT_NOFILE={LIM}: {n} passes ({e}) (kernel: {kn}, {ke})")
check(n == 100 and e == "OK" and kn == 100, "root is exempt")
' || fail "in-flight bound"
wait_socket_count "$BASE"
expect_eq ".udsfs/gc inflight after the in-flight test" "$(sed -n 's/^inflight=//p' "$U/gc")" 0

# ---- 6. received-but-unopened sockets
say "== 6. received but unopened sockets (reader under prlimit --nofile=64:64)"
new_pair K dgram
exec {km}<"$U/sock/$K_M/ctl" # keeps the receiving end alive between the readers
pyb '
n = sys.argv[1]
w = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
for i in range(101):
    x, X = sock("stream")
    os.write(w, b"len=1 rights=%d\n%c" % (X, 48 + i % 10))
    os.close(x)
' "$K_N" || fail "sending 101 sockets"
wait_socket_count $((BASE + 2 + 101))
say "101 sockets in flight to $K_M: .udsfs/gc $(tr '\n' ' ' <"$U/gc")"
# shellcheck disable=SC2016 # expanded by the reader
prlimit --nofile=64:64 python3 -c "$PY_PRELUDE"'
m = sys.argv[1]
r = os.open(f"{U}/sock/{m}/msg", os.O_RDONLY)
kept = []
dropped = 0
for i in range(100):
    rec = os.read(r, 4096)
    head = rec.split(b"\n", 1)[0].decode()
    rights = [f.split("=", 1)[1] for f in head.split() if f.startswith("rights=")]
    if rights:
        kept.append(int(rights[0]))
    else:
        dropped += 1
present = sum(os.path.isdir(f"{U}/sock/{h}") for h in kept)
print(f"bound: received but unopened, RLIMIT_NOFILE 64: 100 records read, {len(kept)} kept as .udsfs/sock/H ({present} present), {dropped} arrived without rights= (closed)")
if not (0 < len(kept) <= 64 and present == len(kept) and len(kept) + dropped == 100):
    sys.exit(f"FAIL: want at most 64 received sockets kept, each present; got {len(kept)} ({present} present)")
print(f"ok: at most 64 unopened received sockets are kept")
# adopting one (open and close it: it closes) makes room for the next
os.close(os.open(f"{U}/sock/{kept[0]}/ctl", os.O_RDWR))
rec = os.read(r, 4096)
head = rec.split(b"\n", 1)[0].decode()
print(f"after adopting .udsfs/sock/{kept[0]}: the 101st record reads {head!r}")
if "rights=" not in head:
    sys.exit("FAIL: the 101st socket was dropped though one entry was adopted")
print("ok: adopting one received socket makes room for the next")
' "$K_M" || fail "received-but-unopened bound"
# the kernel, for comparison: 100 fds to a reader with RLIMIT_NOFILE 64
kernel_kept=$(prlimit --nofile=64:64 python3 -c '
import array, socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
hold = []
for i in range(100):
    x = socket.socket()
    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [x.fileno()]))])
    x.close()
n = 0
for i in range(100):
    msg, anc, flags, _ = b.recvmsg(10, socket.CMSG_SPACE(4))
    n += sum(len(d) // 4 for _, _, d in anc)
print(n)
')
say "bound: (kernel: a reader with RLIMIT_NOFILE 64 and a few fds open got $kernel_kept of 100 passed fds; the rest were closed, MSG_CTRUNC)"
wait_socket_count $((BASE + 2 + 64))
ok "64 received sockets live on as unopened entries, the other 37 are closed"
close_fd "$km"
close_fd "$K_FD"
wait_socket_count "$BASE"
ok "closing the receiving socket releases the unopened entries"

# ---- 7. a mount with --max-nodes 1000 --sndbuf 65536 --max-dgram-qlen 3
say "== 7. --max-nodes 1000 --sndbuf 65536 --max-dgram-qlen 3"
udsfs_unmount
udsfs_mount --max-nodes 1000 --sndbuf 65536 --max-dgram-qlen 3
py '
n = 0
while True:
    try:
        os.mkdir(f"{M}/d{n}")
    except OSError as e:
        last = errno.errorcode[e.errno]
        break
    n += 1
    if n > 5000:
        sys.exit("FAIL: more than 5000 directories with --max-nodes 1000")
print(f"bound: --max-nodes 1000: {n} mkdirs succeeded (plus the root: {n + 1} nodes), then {last}")
if last != "ENOSPC" or n not in (999, 1000):
    sys.exit(f"FAIL: want ENOSPC once the tree holds 1000 nodes; got {last} after {n}")
print("ok: the tree is full at 1000 nodes")
' || fail "--max-nodes"
NODES=$(find "$MNT" -mindepth 1 -maxdepth 1 -name 'd*' | wc -l)
expect_errno ENOSPC mkdir "$MNT/one-more"
expect_errno ENOSPC ln -s d0 "$MNT/link"
# mknod of a socket node (coreutils mknod makes no sockets)
mknod_sock() { py 'os.mknod(sys.argv[1], stat.S_IFSOCK | 0o755)' "$1"; }
expect_errno ENOSPC mknod_sock "$MNT/node.sock"
new_sock S dgram
expect_errno ENOSPC ctl "$S_FD" "bind full.sock"
rmdir "$MNT/d0"
expect_ok mkdir "$MNT/one-more"
expect_errno ENOSPC mkdir "$MNT/two-more"
rmdir "$MNT/d1"
expect_ok ctl "$S_FD" "bind full.sock"
expect_errno ENOSPC ln -s d2 "$MNT/link"
rm "$MNT/full.sock"
expect_ok ln -s d2 "$MNT/link"
expect_errno ENOSPC mknod_sock "$MNT/node.sock"
rmdir "$MNT/d2"
expect_ok mknod_sock "$MNT/node.sock"
say "bound: --max-nodes 1000: $NODES directories fit; mkdir, ln -s, mknod and bind fail with ENOSPC; each works again after an rm/rmdir"
close_fd "$S_FD"

pyb '
r, R = sock("dgram")
os.write(r, b"bind @small\n")
c, C = sock("dgram")
os.write(c, b"connect @small\n")
d = os.open(f"{U}/sock/{C}/data", os.O_WRONLY | os.O_NONBLOCK)
check(status(C)["sndbuf"] == "65536", "status sndbuf=65536")
e1, e2 = err(os.write, d, b"s" * 65505), err(os.write, d, b"s" * 65504)
bound(f"--sndbuf 65536: a 65505-byte datagram -> {e1}; 65504 bytes (sndbuf - 32) -> {e2}")
check(e1 == "EMSGSIZE" and e2 == "OK", "a datagram over sndbuf - 32 is EMSGSIZE")
rd = os.open(f"{U}/sock/{R}/data", os.O_RDONLY | os.O_NONBLOCK)
check(len(os.read(rd, 1 << 20)) == 65504, "the 65504-byte datagram arrived whole")
n = 0
while err(os.write, d, b"q") == "OK":
    n += 1
bound(f"--max-dgram-qlen 3: {n} messages queued, then EAGAIN")
check(n == 4, "the queue takes max_dgram_qlen + 1 = 4")
' || fail "--sndbuf / --max-dgram-qlen"

# ---- 8. a mount with --sndbuf 4194304: a data file write stops at 1 MiB - 4 KiB, a record at sndbuf - 32
say "== 8. --sndbuf 4194304"
udsfs_unmount
udsfs_mount --sndbuf 4194304
pyb '
p, N, M = pair("dgram")
d = os.open(f"{U}/sock/{N}/data", os.O_WRONLY | os.O_NONBLOCK)
r = os.open(f"{U}/sock/{M}/data", os.O_RDONLY | os.O_NONBLOCK)
big = bytes((i * 7) % 253 for i in range(1044481))
e1, e2 = err(os.write, d, big), err(os.write, d, big[:-1])
bound(f"--sndbuf 4194304: a 1044481-byte datagram -> {e1}; 1044480 bytes (1 MiB - 4 KiB) -> {e2}")
check(e1 == "EMSGSIZE" and e2 == "OK", "a data file write is capped at 1 MiB - 4 KiB whatever the send buffer")
check(os.read(r, 2 << 20) == big[:-1], "the 1044480-byte datagram arrived whole")
w = os.open(f"{U}/sock/{N}/msg", os.O_WRONLY | os.O_NONBLOCK)
rm = os.open(f"{U}/sock/{M}/msg", os.O_RDONLY | os.O_NONBLOCK)
huge = bytes((i * 7) % 253 for i in range(4194273))
e3 = err(os.write, w, b"len=4194273\n" + huge)
e4 = err(os.write, w, b"len=4194272\n" + huge[:-1])
bound(f"--sndbuf 4194304: a msg record of 4194273 bytes -> {e3}; 4194272 bytes (sndbuf - 32) -> {e4}")
check(e3 == "EMSGSIZE" and e4 == "OK", "a msg record is capped at sndbuf - 32, as a datagram on Linux")
rec = b""
while True:
    d = os.read(rm, 8 << 20)
    rec += d
    if len(d) < (8 << 20):
        break
check(rec == b"len=4194272\n" + huge[:-1], "the 4194272-byte record arrived whole")
' || fail "datagram caps"

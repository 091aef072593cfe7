#!/usr/bin/env bash
# Readiness on stream data files. socat (which waits in select/poll before it reads)
# wakes when data arrives and exits when the peer closes, both one-way
# (`socat -u OPEN:data,rdonly STDOUT`) and two-way (`socat - OPEN:data`). Python's
# select.poll, select.select, epoll level- and edge-triggered block on an empty data fd
# and wake when a byte arrives; POLLOUT blocks on a full queue and wakes when the peer
# drains it; peer `shutdown wr` and peer close give the same poll masks as a kernel
# socketpair (POLLIN|POLLRDHUP, then POLLHUP); a dgram sender facing a full receiver
# loses POLLOUT and gets it back when one message is read. Wake-up latencies are printed.
source "$(dirname "$0")/lib.sh"

# SPEC: readiness is reported; the notes measured ~0.1 ms. Fail above this (CI slack).
LIMIT=${UDSFS_POLL_LIMIT_MS:-100}

# wait_file_has FILE TEXT MS START_MS: wait until FILE holds exactly TEXT; sets ELAPSED_MS.
wait_file_has() {
    until [ "$(cat "$1")" == "$2" ]; do
        [ $(($(now_ms) - $4)) -le "$3" ] || fail "after $3 ms $1 holds '$(cat "$1")', want '$2'"
        sleep 0.001
    done
    ELAPSED_MS=$(($(now_ms) - $4))
}

# wait_wchan PID PATTERN [MS]: wait until PID sleeps in a kernel function matching PATTERN.
wait_wchan() {
    local start w
    start=$(now_ms)
    while :; do
        w=$(cat "/proc/$1/wchan" 2>/dev/null || true)
        # shellcheck disable=SC2053 # PATTERN is a glob on purpose
        [[ $w == $2 ]] && return 0
        proc_alive "$1" || fail "process $1 ended while we waited for it to sleep in $2"
        [ $(($(now_ms) - start)) -le "${3:-5000}" ] || fail "process $1 did not sleep in $2 within ${3:-5000} ms (wchan=$w)"
        sleep 0.002
    done
}

# ends_cleanly PID MS T0 WHAT ERRFILE: socat PID, whose peer closed at T0, exits 0
# within MS ms (ELAPSED_MS: when).
ends_cleanly() {
    ended_within "$1" "$2" "$3" || fail "$4 still runs $ELAPSED_MS ms after the peer closed"
    reap "$1"
    say "$4 exited $ELAPSED_MS ms after the peer's close, status $REAPED_STATUS"
    [ "$REAPED_STATUS" -eq 0 ] || fail "$4 exited with status $REAPED_STATUS: $(cat "$5")"
}

# ---- 1. socat -u: one-way, wakes on data, exits on the peer's close
new_pair A stream
exec {am}<>"$U/sock/$A_M/data"
ok "stream pair $A_N <-> $A_M; this shell holds $A_M's data on fd $am"
# the child must not inherit this shell's handles of A (or the peer would never close)
socat -u "OPEN:$U/sock/$A_N/data,rdonly" STDOUT >"$TMP/socat1.out" 2>"$TMP/socat1.err" {am}>&- {A_FD}>&- &
s1=$!
wait_wchan "$s1" '*poll*'
ok "socat -u OPEN:.udsfs/sock/$A_N/data,rdonly STDOUT (pid $s1) waits in $(cat "/proc/$s1/wchan")"
for word in first second; do
    t0=$(now_ms)
    printf '%s\n' "$word" >&"$am"
    want=$([ "$word" == first ] && printf 'first' || printf 'first\nsecond')
    wait_file_has "$TMP/socat1.out" "$want" 3000 "$t0"
    say "socat -u: '$word' written to $A_M appeared on socat's stdout after $ELAPSED_MS ms"
    [ "$ELAPSED_MS" -le "$LIMIT" ] || fail "socat took $ELAPSED_MS ms to pass '$word' on (limit $LIMIT ms)"
    wait_wchan "$s1" '*poll*'
done
ok "socat -u woke on each write and went back to waiting"
t0=$(now_ms)
close_fd "$am"
close_fd "$A_FD"
ends_cleanly "$s1" 3000 "$t0" "socat -u" "$TMP/socat1.err"
[ "$ELAPSED_MS" -le 1000 ] || fail "socat -u took $ELAPSED_MS ms to see EOF (limit 1000 ms)"
ok "socat -u saw EOF when the peer closed and exited 0"

# ---- 2. socat - OPEN:data: two-way
new_pair B stream
exec {bm}<>"$U/sock/$B_M/data"
mkfifo "$TMP/socat2.in"
socat -t 10 - "OPEN:$U/sock/$B_N/data" <"$TMP/socat2.in" >"$TMP/socat2.out" 2>"$TMP/socat2.err" {bm}>&- {B_FD}>&- &
s2=$!
exec {sin}>"$TMP/socat2.in"
printf 'ping\n' >&"$sin"
read -r line <&"$bm" || fail "reading what socat sent to $B_M"
expect_eq "what socat sent through .udsfs/sock/$B_N/data" "$line" ping
wait_wchan "$s2" '*poll*'
t0=$(now_ms)
printf 'pong\n' >&"$bm"
wait_file_has "$TMP/socat2.out" pong 3000 "$t0"
say "socat - OPEN:data: the reply appeared on socat's stdout after $ELAPSED_MS ms"
[ "$ELAPSED_MS" -le "$LIMIT" ] || fail "socat took $ELAPSED_MS ms to pass the reply on (limit $LIMIT ms)"
close_fd "$sin"
t0=$(now_ms)
close_fd "$bm"
close_fd "$B_FD"
ends_cleanly "$s2" 5000 "$t0" "two-way socat" "$TMP/socat2.err"
ok "two-way socat: request out, reply in, clean exit on the peer's close"

# ---- 3. poll, select, epoll from python
py '
import select
LIMIT = float(sys.argv[1])
failed = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stdout if cond else sys.stderr)
    if not cond:
        failed.append(what)

def wait_wchan(tid, names, limit=5.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            w = open(f"/proc/self/task/{tid}/wchan").read()
        except OSError:
            w = ""
        if any(n in w for n in names):
            return
        time.sleep(0.001)
    raise SystemExit(f"FAIL: thread {tid} did not sleep in {names} (wchan {w!r})")

def new_pair():
    fd = os.open(f"{U}/stream/pair", os.O_RDWR)
    n, m = os.read(fd, 64).split()
    a = os.open(f"{U}/sock/{n.decode()}/data", os.O_RDWR | os.O_NONBLOCK)
    b = os.open(f"{U}/sock/{m.decode()}/data", os.O_RDWR | os.O_NONBLOCK)
    mctl = os.open(f"{U}/sock/{m.decode()}/ctl", os.O_RDWR)
    os.close(fd)  # N lives on through a, M through b and mctl
    return a, b, mctl

IN, OUT = select.POLLIN, select.POLLOUT
a, b, mctl = new_pair()

# no false readiness: an empty queue is not readable (fuser'"'"'s default poll would say so)
p = select.poll()
p.register(a, IN)
t0 = time.monotonic()
r = p.poll(150)
check(r == [], f"poll(POLLIN, 150 ms) on an empty data fd: {r} after {(time.monotonic() - t0) * 1000:.0f} ms")
r = select.select([a], [], [], 0.1)[0]
check(r == [], f"select() on an empty data fd: not readable ({r})")
p2 = select.poll()
p2.register(a, OUT)
check(p2.poll(0) == [(a, OUT)], f"a connected, empty stream is writable: {p2.poll(0)}")

def waiter(kind, fd, events, box):
    box["tid"] = threading.get_native_id()
    if kind == "poll":
        q = select.poll(); q.register(fd, events)
        box["ready"] = q.poll(5000)
    elif kind == "select":
        rl, wl = ([fd], []) if events == IN else ([], [fd])
        box["ready"] = select.select(rl, wl, [], 5)
    else:
        ep = select.epoll()
        ep.register(fd, (select.EPOLLIN if events == IN else select.EPOLLOUT) | (select.EPOLLET if kind == "epoll-et" else 0))
        if kind == "epoll-et":
            ep.poll(0)  # consume any edge already pending
        box["ready"] = ep.poll(5)
    box["t"] = time.monotonic()

SLEEPS = ("poll", "select", "epoll")
def timed_wake(kind, fd, events, act):
    box = {}
    th = threading.Thread(target=waiter, args=(kind, fd, events, box))
    th.start()
    while "tid" not in box:
        time.sleep(0.001)
    wait_wchan(box["tid"], SLEEPS)
    t0 = time.monotonic()
    act()
    th.join(10)
    if th.is_alive():
        raise SystemExit(f"FAIL: {kind} did not wake within 10 s")
    return box["ready"], (box["t"] - t0) * 1000

for kind in ("poll", "select", "epoll-lt", "epoll-et"):
    ready, ms = timed_wake(kind, a, IN, lambda: os.write(b, b"x"))
    print(f"{kind}: woke {ms:.2f} ms after one byte was written by the peer ({ready})")
    check(bool(ready and (ready[0] if kind == "select" else True)), f"{kind} reported the data fd readable")
    check(ms <= LIMIT, f"{kind} wake-up {ms:.2f} ms <= {LIMIT:.0f} ms")
    check(os.read(a, 10) == b"x", f"{kind}: the byte is there to read")

# POLLOUT: fill the queue a -> b, then drain it from b
sent = 0
while True:
    try:
        sent += os.write(a, b"y" * 65536)
    except BlockingIOError:
        break
print(f"filled the queue with {sent} bytes")
check(p2.poll(100) == [], f"a full queue: poll(POLLOUT, 100 ms) -> {p2.poll(0)}")
def drain():
    while True:
        try:
            os.read(b, 65536)
        except BlockingIOError:
            return
ready, ms = timed_wake("poll", a, OUT, drain)
print(f"poll(POLLOUT): woke {ms:.2f} ms after the peer drained the queue ({ready})")
check(ready == [(a, OUT)], f"poll(POLLOUT) reported writable after the drain: {ready}")
check(ms <= LIMIT, f"POLLOUT wake-up {ms:.2f} ms <= {LIMIT:.0f} ms")

# peer shutdown and close: compare the masks with a kernel socketpair doing the same
import socket
ka, kb = socket.socketpair()
RD = IN | OUT | select.POLLRDHUP
def mask(fd):
    q = select.poll(); q.register(fd, RD)
    r = q.poll(0)
    return r[0][1] if r else 0
check(mask(a) == mask(ka.fileno()), f"idle connected stream: mask {mask(a):#x}, kernel {mask(ka.fileno()):#x}")

ready, ms = timed_wake("poll", a, IN, lambda: os.write(mctl, b"shutdown wr\n"))
kb.shutdown(socket.SHUT_WR)
print(f"poll(POLLIN): woke {ms:.2f} ms after the peer'"'"'s shutdown wr ({ready})")
check(ms <= LIMIT, f"wake-up on the peer'"'"'s shutdown {ms:.2f} ms <= {LIMIT:.0f} ms")
check(mask(a) == mask(ka.fileno()), f"after the peer'"'"'s shutdown wr: mask {mask(a):#x} (POLLIN|POLLOUT|POLLRDHUP), kernel {mask(ka.fileno()):#x}")
check(os.read(a, 10) == b"", "read gives EOF after the peer'"'"'s shutdown wr")

def close_peer():
    os.close(b)
    os.close(mctl)
ep = select.epoll()
ep.register(a, select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
ep.poll(0)
t0 = time.monotonic()
close_peer()
ev = ep.poll(5)
ms = (time.monotonic() - t0) * 1000
kb.close()
print(f"epoll-et: woke {ms:.2f} ms after the peer closed ({ev})")
check(bool(ev) and ev[0][1] & select.EPOLLHUP, f"epoll reports EPOLLHUP after the peer closed: {ev}")
check(ms <= LIMIT + 50, f"EPOLLHUP within {LIMIT + 50:.0f} ms of the close (release is asynchronous): {ms:.2f} ms")
check(mask(a) == mask(ka.fileno()), f"after the peer closed: mask {mask(a):#x} (POLLIN|POLLOUT|POLLHUP|POLLRDHUP), kernel {mask(ka.fileno()):#x}")
check(select.select([a], [], [], 0)[0] == [a], "select() says readable after the peer closed")
check(os.read(a, 10) == b"", "read gives EOF after the peer closed")

# dgram: POLLOUT goes away while the receiver'"'"'s queue is full (max_dgram_qlen + 1
# messages from a non-peer) and comes back when the receiver reads one, as in the kernel
ks = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
ks.bind(b"\0udsfs-poll-socat-%d" % os.getpid())
kc = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
kc.connect(ks.getsockname())
kc.setblocking(False)
sfd = os.open(f"{U}/dgram/clone", os.O_RDWR)
sn = os.read(sfd, 64).split()[0].decode()
os.write(sfd, b"bind @poll-dgram\n")
cfd = os.open(f"{U}/dgram/clone", os.O_RDWR)
cn = os.read(cfd, 64).split()[0].decode()
os.write(cfd, b"connect @poll-dgram\n")
dw = os.open(f"{U}/sock/{cn}/data", os.O_WRONLY | os.O_NONBLOCK)
dr = os.open(f"{U}/sock/{sn}/data", os.O_RDONLY)
def outmask(fd):
    q = select.poll(); q.register(fd, OUT)
    r = q.poll(0)
    return r[0][1] if r else 0
check(outmask(dw) == outmask(kc.fileno()) == OUT, f"dgram client with room: POLLOUT ({outmask(dw):#x}, kernel {outmask(kc.fileno()):#x})")
n, kn = fill(dw, b"m"), fill(kc.fileno(), b"m")
check(n == kn, f"dgram: {n} messages fit before EAGAIN (kernel {kn})")
check(outmask(dw) == outmask(kc.fileno()) == 0, f"dgram client facing a full queue: no POLLOUT ({outmask(dw):#x}, kernel {outmask(kc.fileno()):#x})")
ready, ms = timed_wake("poll", dw, OUT, lambda: os.read(dr, 10))
print(f"dgram poll(POLLOUT): woke {ms:.2f} ms after the receiver read one message ({ready})")
check(ready == [(dw, OUT)], f"dgram POLLOUT after the receiver read one: {ready}")
check(ms <= LIMIT, f"dgram POLLOUT wake-up {ms:.2f} ms <= {LIMIT:.0f} ms")

if failed:
    sys.exit(1)
' "$LIMIT" || fail "poll/select/epoll on data files"

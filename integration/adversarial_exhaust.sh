#!/usr/bin/env bash
# adversarial_exhaust.sh: a user B of an --allow-other mount making the daemon work, or
# hold memory, for everyone, through what every user may write or open:
#  1. capture filters (src/capture/filter.rs, src/wildcard.rs): a `name` line of a
#     million stars is refused with EINVAL (globs are at most 512 bytes; matching one
#     used to recurse until a worker's stack overflowed and the daemon died); text
#     without its newline is refused once past 4096 bytes; a 65th criterion gets
#     ENOSPC; a capture whose glob is *a*a*a*a*a*a*a*a*a*a*b (exponential for a
#     backtracking matcher) watching B's own traffic on names of 96 `a`s leaves B's
#     and A's round trips done.
#  2. fault rules (src/fault/rules.rs): a name glob is at most 512 bytes (EINVAL, and
#     the log names the field); B's 1024 rules with costly name globs cost A's
#     messages nothing, since a rule's owner is checked before its glob: A's round
#     trips with them installed take at most 10 times what they took without.
#  3. listings (src/fuse/open.rs): every open of .udsfs/unix, graph, faults, gc or a
#     status file keeps its text, charged to the opener; on --max-held-bytes 1048576,
#     B's opens fail with ENOMEM once B holds its share (524288 bytes), A and root
#     still open theirs, and B's room comes back once it closes its handles.
#  4. queued bytes (src/engine/msgpath/enqueue.rs): each socket's SO_SNDBUF bounds what it
#     queues, and B may make sockets by the thousand; on --max-queued-bytes 4194304,
#     B's socketpairs filled one after another meet ENOBUFS once B's queues hold its
#     share (2 MiB), A still fills a pair of its own (to EAGAIN, its SO_SNDBUF), and
#     once B reads one pair back, byte for byte, B may write again.
UDSFS_MOUNT_ARGS=(--allow-other --max-held-bytes 1048576 --max-queued-bytes 4194304)
source "$(dirname "$0")/lib.sh"

[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
A=61011
B=61012
chmod o+x "$TMP" # mktemp -d made it 0700; other users must reach $MNT inside it
LONG=$(printf 'a%.0s' $(seq 1 96))

# roundtrip.py TAG N: two dgram sockets bound at @<96 a's>TAG<pid>x and ...y, connected
# to each other, N round trips; prints the seconds they took.
with_helpers "$TMP/roundtrip.py" <<'PY'
tag, n = sys.argv[1], int(sys.argv[2])
name = "a" * 96 + tag + str(os.getpid())
xf, X = clone("dgram"); ctl(xf, f"bind @{name}x")
yf, Y = clone("dgram"); ctl(yf, f"bind @{name}y")
ctl(xf, f"connect @{name}y"); ctl(yf, f"connect @{name}x")
xd = os.open(f"{U}/sock/{X}/data", os.O_RDWR)
yd = os.open(f"{U}/sock/{Y}/data", os.O_RDWR)
t = time.monotonic()
for i in range(n):
    os.write(xd, b"ping")
    assert os.read(yd, 16) == b"ping"
    os.write(yd, b"pong")
    assert os.read(xd, 16) == b"pong"
print(f"{time.monotonic() - t:.3f}")
PY

# capture_then.py LINE...: opens a capture, writes each LINE and a newline as one
# write ("million-stars": a name line of a million stars), prints what each write
# gave, then runs 20 round trips of its own with the capture open and prints "done".
with_helpers "$TMP/capture_then.py" <<'PY'
fd = os.open(U + "/capture", os.O_RDWR)
out = []
for line in sys.argv[1:]:
    data = b"name " + b"*" * 1_000_000 if line == "million-stars" else line.encode()
    out.append(err(os.write, fd, data + b"\n"))
import subprocess
subprocess.run([sys.executable, sys.argv[0].replace("capture_then", "roundtrip"), "c", "20"],
               check=True, stdout=subprocess.DEVNULL)
print(" ".join(out), "done")
PY
chmod 644 "$TMP"/*.py
alive() { kill -0 "$DAEMON_PID" 2>/dev/null || fail "the daemon died ($1)"; }

# 1. Capture filters.
got=$(as_uid $B timeout 60 /usr/bin/python3 "$TMP/capture_then.py" million-stars) ||
    fail "B's capture with a million-star glob: $got"
expect_eq "B: a name line of a million stars, then B's round trips" "$got" "EINVAL done"
alive "a million-star glob"
got=$(as_uid $B timeout 60 /usr/bin/python3 "$TMP/capture_then.py" "name *a*a*a*a*a*a*a*a*a*a*b") ||
    fail "B's round trips under a capture with a costly glob did not end: $got"
expect_eq "B: a capture with *a*a*a*a*a*a*a*a*a*a*b, then B's round trips" "$got" "OK done"
alive "a costly glob"
got=$(as_uid $A timeout 60 /usr/bin/python3 "$TMP/roundtrip.py" d 20) || fail "A's round trips: $got"
ok "A's round trips after B's costly capture: ${got}s"
got=$(as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
fd = os.open(U + '/capture', os.O_RDWR)
n = 0
while n < 50 and err(os.write, fd, b'name ' + b'a' * 100 if n == 0 else b'a' * 100) == 'OK':
    n += 1
print(n, err(os.write, fd, b'a' * 100))")
expect_eq "B: 100-byte writes of one unfinished line (accepted, then the next)" "$got" "40 EINVAL"
got=$(as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
fd = os.open(U + '/capture', os.O_RDWR)
n = 0
while n < 100 and err(os.write, fd, b'pid %d\n' % n) == 'OK':
    n += 1
print(n, err(os.write, fd, b'uid 1\n'))")
expect_eq "B: one criterion per write (accepted, then the next)" "$got" "64 ENOSPC"
ok "capture filters: bounded globs, lines and criteria"

# 2. Fault rules.
long_glob=$(printf '*a%.0s' $(seq 1 257))
got=$(as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
print(faults_write('name $long_glob latency latency=1\n'))")
expect_eq "B: a rule with a 514-byte name glob" "$got" "EINVAL"
grep -q "name: pattern of 514 bytes (at most 512)" "$LOG" || fail "no log line naming the field of the long glob"
ok "the log names the field: $(grep -m1 -o "name: pattern of 514 bytes (at most 512)" "$LOG")"
before=$(as_uid $A /usr/bin/python3 "$TMP/roundtrip.py" e 1000) || fail "A's round trips: $before"
costly="*$(printf 'a%.0s' $(seq 1 48))b"
as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
fd = os.open(U + '/faults', os.O_WRONLY)
for i in range(1024):
    os.write(fd, b'name $costly latency latency=1\n')
n = len([l for l in open(U + '/faults') if 'latency' in l])
assert n == 1024, n" || fail "B could not add its 1024 rules"
after=$(as_uid $A timeout 60 /usr/bin/python3 "$TMP/roundtrip.py" f 1000) || fail "A's round trips under B's rules: $after"
say "A's 1000 round trips: ${before}s without B's rules, ${after}s with them"
python3 -c "import sys; b, a = map(float, sys.argv[1:]); sys.exit(0 if a <= 10 * max(b, 0.05) else 1)" "$before" "$after" ||
    fail "B's 1024 rules slowed A's round trips from ${before}s to ${after}s"
ok "B's rules cost A's messages at most 10x (${before}s, ${after}s)"
as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
print(faults_write('clear\n'))" >/dev/null

# 3. Listings.
with_helpers "$TMP/listings.py" <<'PY'
# Holds 300 sockets so the listing is large, then opens .udsfs/unix until refused
# (at most 300 times); prints the errno, whether what it held fit its share, and
# (after closing them all) whether an open works again.
socks = [clone("stream")[0] for _ in range(300)]
size = len(open(U + "/unix", "rb").read())
held = []
why = "none"
while len(held) < 300:
    try:
        held.append(os.open(U + "/unix", os.O_RDONLY))
    except OSError as e:
        why = errno.errorcode[e.errno]
        break
fits = "fits" if size * len(held) <= 524288 + size else f"{len(held)} of {size} bytes"
open(sys.argv[1], "w").close()
# Holds them until told to close.
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
for fd in held:
    os.close(fd)
again = "refused"
for _ in range(150):  # the releases are on their way (the kernel sends them after close returns)
    try:
        os.close(os.open(U + "/unix", os.O_RDONLY))
        again = "again"
        break
    except OSError:
        time.sleep(0.02)
print(why, fits, again, len(held) > 0)
PY
chmod 644 "$TMP/listings.py"
OUT=$TMP/out
mkdir -m 1777 "$OUT"
as_uid $B /usr/bin/python3 "$TMP/listings.py" "$OUT/held" "$OUT/close" >"$OUT/b" &
HOLDER=$!
wait_for "$OUT/held" 15 "B's listing holder did not get to hold its listings" "$OUT/b"
got=$(as_uid $A /usr/bin/python3 -c "$PY_PRELUDE
fds = [os.open(U + '/unix', os.O_RDONLY) for _ in range(5)]
print(len(fds))") || fail "A could not open listings while B holds its share"
expect_eq "A's opens of .udsfs/unix while B holds its share" "$got" "5"
expect_ok cat "$U/unix"
let_go "$OUT/close" "$HOLDER" "B's listing holder failed" "$OUT/b"
expect_eq "B: opens until refused; what it held; after closing" "$(cat "$OUT/b")" "ENOMEM fits again True"
alive "listings"
ok "listings: charged to their opener"

# 4. Queued bytes.
with_helpers "$TMP/fill.py" <<'PY'
# fill.py MOST: fills stream socketpairs with non-blocking 65536-byte writes (each to
# EAGAIN, its sender's budget) until a write fails otherwise or MOST pairs are full;
# prints that errno, the pairs and the bytes written. With a second argument it then
# waits for that file, reads the first pair back and writes to the last one again.
def fill_pair():
    fd, a, b = pair("stream")
    w = os.open(f"{U}/sock/{a}/data", os.O_WRONLY | os.O_NONBLOCK)
    r = os.open(f"{U}/sock/{b}/data", os.O_RDONLY | os.O_NONBLOCK)
    sent, why = fill_bytes(w, bytes([len(pairs) % 251]) * 65536)
    pairs.append((fd, w, r, sent))
    return why
pairs = []
why = None
while why is None and len(pairs) < int(sys.argv[1]):
    why = fill_pair()
total = sum(p[3] for p in pairs)
print(why or "none", len(pairs), total, flush=True)
if len(sys.argv) > 2:
    hold(sys.argv[2])
    fd, w, r, sent = pairs[0]
    got = b""
    while True:
        try:
            got += os.read(r, 65536)
        except BlockingIOError:
            break
    back = "intact" if got == bytes([0]) * sent else f"{len(got)} of {sent}"
    print(back, err(os.write, pairs[-1][1], b"more"))
PY
chmod 644 "$TMP/fill.py"
as_uid $B /usr/bin/python3 "$TMP/fill.py" 100 "$OUT/read" >"$OUT/fill_b" &
FILLER=$!
wait_for "$OUT/read.held" 15 "B's filler did not fill" "$OUT/fill_b"
read -r why pairs total <"$OUT/fill_b"
say "B filled $pairs pairs with $total bytes before $why"
expect_eq "B's fills end with" "$why" "ENOBUFS"
[ "$total" -le 2097152 ] && [ "$total" -ge 1048576 ] || fail "B's queues held $total bytes (its share: 2097152 as charged)"
ok "B's queues: $total bytes of data within its share"
expect_eq "A fills one pair while B holds its share (errno, pairs)" \
    "$(as_uid $A /usr/bin/python3 "$TMP/fill.py" 1 | cut -d' ' -f1-2)" "none 1"
let_go "$OUT/read" "$FILLER" "B's filler failed" "$OUT/fill_b"
expect_eq "B reads its first pair back, then writes again" "$(tail -1 "$OUT/fill_b")" "intact OK"
alive "queued bytes"
ok "queued bytes: bounded per user"

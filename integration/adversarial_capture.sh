#!/usr/bin/env bash
# adversarial_capture.sh: a user of an --allow-other mount trying to exhaust the daemon
# through captures and fault rules, which every user may open and write:
#  1. captures (src/capture/budget.rs): each open of .udsfs/capture keeps its own copy
#     of what its user may see, up to its `buffer` (at most 256 MiB); never read, they
#     would keep it all. User B's open captures share one limit of 256 MiB: a second
#     capture (or a buffer line asking for 256 MiB in one), or a 65th of the default 4 MiB, is refused (ENOBUFS);
#     each capture is charged at least 64 KiB, however small its `buffer` (a user may
#     also have at most 64 open: adversarial_observers.sh §3),
#     closing one makes room again, another user has a share of their own and root is
#     not counted;
#  2. fault rules (src/fault/rules.rs): every message of every user is checked against
#     every rule, so B may have at most 1024 rules (ENOSPC past them, through the file
#     and through a socket's ctl); another user and root still add theirs.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"

[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
A=61001
B=61002

# captures.py: opens captures with the buffers given (0: the default), keeps them
# open, prints for each what the open and the buffer line gave; "close N" closes the
# Nth kept one.
cat >"$TMP/captures.py" <<'PY'
import errno, os, sys, time
U = os.environ["U"]
held, out = [], []

def settled(call, first):
    """call(), retrying ENOBUFS for 1.5 s (3 s for the first action and the one after
    a close): a close returns before the daemon has the FUSE release of what it
    closed (the kernel sends it without waiting), here or in the run before, so the
    room it makes comes a moment later. An ENOBUFS that stays is the answer."""
    deadline = time.monotonic() + (3 if first else 1.5)
    while True:
        try:
            return call()
        except OSError as e:
            if e.errno != errno.ENOBUFS or time.monotonic() > deadline:
                raise
            time.sleep(0.02)

first = True
for a in sys.argv[1:]:
    if a.startswith("close"):
        os.close(held.pop(int(a.split()[1])))
        out.append("closed")
        first = True
        continue
    try:
        fd = settled(lambda: os.open(U + "/capture", os.O_RDWR), first)
    except OSError as e:
        out.append("open " + errno.errorcode[e.errno])
        first = False
        continue
    if a != "0":
        try:
            settled(lambda: os.write(fd, b"buffer %s\n" % a.encode()), first)
        except OSError as e:
            out.append("buffer " + errno.errorcode[e.errno])
            os.close(fd)
            first = False
            continue
    first = False
    held.append(fd)
    out.append("ok")
print(" ".join(out))
PY
chmod 644 "$TMP/captures.py"
chmod 755 "$TMP"
OUT=$TMP/out
mkdir -m 1777 "$OUT"
MAX=268435456

expect_eq "B: one capture of 256 MiB, then another" \
    "$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $MAX $MAX)" "ok open ENOBUFS"
expect_eq "B: two default captures, the second asking for 256 MiB" \
    "$(as_uid $B /usr/bin/python3 "$TMP/captures.py" 0 $MAX)" "ok buffer ENOBUFS"
expect_eq "B: 256 MiB less 4 MiB, then two default captures" \
    "$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $((MAX - 4194304)) 0 0)" "ok ok open ENOBUFS"
got=$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $(printf '0 %.0s' $(seq 1 65)))
expect_eq "B: 65 default captures (how many opened, then what the 65th got)" "$(grep -o ok <<<"$got" | wc -l) ${got##* ok }" "64 open ENOBUFS"
# A capture is charged at least 64 KiB whatever its buffer (budget.rs FLOOR): 63 of
# `buffer 1` leave room for 256 MiB - 63 x 64 KiB in a 64th, not a byte more.
REST=$((MAX - 63 * 65536))
got=$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $(printf '1 %.0s' $(seq 1 63)) $((REST + 1)))
expect_eq "B: 63 captures of buffer 1, then one asking for the rest and a byte (how many opened, then what the 64th got)" \
    "$(grep -o ok <<<"$got" | wc -l) ${got##* ok }" "63 buffer ENOBUFS"
got=$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $(printf '1 %.0s' $(seq 1 63)) $REST)
expect_eq "B: 63 captures of buffer 1, then one asking for the rest" "$(grep -o ok <<<"$got" | wc -l)" "64"
expect_eq "B: room again after a close" \
    "$(as_uid $B /usr/bin/python3 "$TMP/captures.py" $MAX "close 0" $MAX)" "ok closed ok"
# B keeps a full share open while A and root open theirs.
as_uid $B /usr/bin/python3 -c '
import errno, os, sys, time
fd = os.open(os.environ["U"] + "/capture", os.O_RDWR)
for _ in range(150):  # the releases of the last run may still be on their way
    try:
        os.write(fd, b"buffer %d\n" % int(sys.argv[1]))
        break
    except OSError as e:
        if e.errno != errno.ENOBUFS:
            raise
        time.sleep(0.02)
open(sys.argv[2], "w").close()
time.sleep(60)' $MAX "$OUT/b_holds" &
HOLDER=$!
wait_for "$OUT/b_holds" 10 "B's holder did not start"
expect_eq "B, while holding 256 MiB: a default capture" "$(as_uid $B /usr/bin/python3 "$TMP/captures.py" 0)" "open ENOBUFS"
expect_eq "A, while B holds its share: 256 MiB" "$(as_uid $A /usr/bin/python3 "$TMP/captures.py" $MAX)" "ok"
expect_eq "root: three of 256 MiB" "$(/usr/bin/python3 "$TMP/captures.py" $MAX $MAX $MAX)" "ok ok ok"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
ok "captures: one limit per user"

# 2. Fault rules.
cat >"$TMP/rules.py" <<'PY'
import errno, os, socket, sys
U = os.environ["U"]
n = int(sys.argv[1])
fd = os.open(U + "/faults", os.O_WRONLY)
added = 0
res = "all added"
for i in range(n):
    try:
        os.write(fd, b"uid %d latency latency=1\n" % (100000 + i))
        added += 1
    except OSError as e:
        res = errno.errorcode[e.errno]
        break
print(added, res)
PY
chmod 644 "$TMP/rules.py"
expect_eq "B adding 1100 rules" "$(as_uid $B /usr/bin/python3 "$TMP/rules.py" 1100)" "1024 ENOSPC"
expect_eq "B adding one more" "$(as_uid $B /usr/bin/python3 "$TMP/rules.py" 1)" "0 ENOSPC"
expect_eq "A adding 10 rules meanwhile" "$(as_uid $A /usr/bin/python3 "$TMP/rules.py" 10)" "10 all added"
expect_eq "root adding 10 rules meanwhile" "$(/usr/bin/python3 "$TMP/rules.py" 10)" "10 all added"
got=$(as_uid $B /usr/bin/python3 -c "$PY_PRELUDE
sfd, S = clone('stream')
print(err(ctl, sfd, 'fault short_write bytes=3'))")
expect_eq "B's ctl fault line on its own socket" "$got" "ENOSPC"
expect_eq "the rules root lists (B's, A's, root's)" "$(grep -c "latency" "$U/faults")" "$((1024 + 10 + 10))"
# Clearing its own makes room again.
as_uid $B /usr/bin/python3 -c 'import os; fd = os.open(os.environ["U"] + "/faults", os.O_WRONLY); os.write(fd, b"clear\n")'
expect_eq "B adding 5 after its clear" "$(as_uid $B /usr/bin/python3 "$TMP/rules.py" 5)" "5 all added"
ok "fault rules: a limit per user"

#!/usr/bin/env bash
# Behaviours other people's test suites found (issue 28 item 3):
# tests/conformance/behaviours.py runs on kernel sockets, through the preload
# library (`udsfs run --route`) and under the seccomp supervisor (`udsfs run
# --front seccomp --route`, a dynamic python3 forced there); the three outputs
# must be equal line by line.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PROG=$ROOT/tests/conformance/behaviours.py
mkdir -p "$TMP/k" "$TMP/rk" "$TMP/ru"
python3 "$PROG" "$TMP/k" "$TMP/rk" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "the program fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
ok "kernel run: $(wc -l <"$TMP/kernel.out") results"
failed=
for front in preload seccomp; do
    UDSFS_PRELOAD=$PRELOAD_LIB timeout 120 "$UDSFS_BIN" run --front "$front" --mount "$MNT" --route "$TMP/ru" -- \
        python3 "$PROG" "$MNT" "$TMP/ru" >"$TMP/$front.out" 2>"$TMP/$front.err" ||
        say "the program failed under the $front front: $(tail -3 "$TMP/$front.err")"
    grep -qx 'where: udsfs' "$TMP/$front.out" || fail "the $front run did not use udsfs sockets"
    if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/$front.out") >"$TMP/diff"; then
        say "the $front front answered differently from the kernel (< kernel, > $front):"
        cat "$TMP/diff"
        failed+=" $front"
    elif false; then
        say "the $front run complained: $(cat "$TMP/$front.err")"
        failed+=" $front"
    else
        ok "$front front: the same $(wc -l <"$TMP/$front.out") results as the kernel"
    fi
done
[ -z "$failed" ] || fail "differences from the kernel on:$failed"

# A 4 MiB record is charged to its reader before it leaves its queue: on a mount with
# --max-held-bytes 6 MiB, one reader keeps the first record half read (4 MiB held);
# a second reader's read of the next record fails with ENOMEM and leaves it queued;
# once the first handle closes, the second reads it whole.
udsfs_unmount
udsfs_mount --max-held-bytes 6291456
python3 - "$U" <<'PY' || fail "a 4 MiB record's charge to its reader"
import errno, os, sys
U = sys.argv[1]
fd = os.open(f"{U}/seqpacket/pair", os.O_RDWR)
N, M = (int(x) for x in os.read(fd, 64).split())
ctl = os.open(f"{U}/sock/{N}/ctl", os.O_WRONLY)
os.write(ctl, b"sndbufforce 16777216\n")
size = 4 << 20
recs = [bytes([i]) * size for i in (1, 2)]
w = os.open(f"{U}/sock/{N}/msg", os.O_WRONLY)
for r in recs:
    n = os.write(w, f"len={size}\n".encode() + r)
    print(f"sent a record of {size} bytes: write gave {n}")
    assert n == size + len(f"len={size}\n"), "the record was not taken whole"
r1 = os.open(f"{U}/sock/{M}/msg", os.O_RDONLY | os.O_NONBLOCK)
head = os.read(r1, 100)
print("first reader read", len(head), "bytes of the first record and keeps the rest")
r2 = os.open(f"{U}/sock/{M}/msg", os.O_RDONLY | os.O_NONBLOCK)
try:
    os.read(r2, 8 << 20)
    sys.exit("FAIL: the second reader took a 4 MiB record past --max-held-bytes")
except OSError as e:
    print("second reader:", errno.errorcode[e.errno])
    assert e.errno == errno.ENOMEM, "want ENOMEM"
os.close(r1)
got = os.read(r2, 8 << 20)
print("after the first closed, the second reader got", len(got), "bytes")
assert got == f"len={size}\n".encode() + recs[1], "the second record did not arrive whole"
print("ok: a 4 MiB record is charged to its reader; refused, it stays queued")
PY
ok "a 4 MiB record is charged to its reader's --max-held-bytes before it leaves its queue"

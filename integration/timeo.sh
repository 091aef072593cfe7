#!/usr/bin/env bash
# SO_RCVTIMEO, SO_SNDTIMEO and MSG_WAITALL through the socket API:
# tests/conformance/timeo.py runs on kernel sockets and through `udsfs run`; both
# outputs must be equal. Then the file forms: ctl `rcvtimeo MS` / `sndtimeo MS` and
# the status keys rcvtimeo, sndtimeo.
source "$(dirname "$0")/lib.sh"
kernel_vs_udsfs "$ROOT/tests/conformance/timeo.py"

py_pair out stream '
def st(k):
    return status(m, k)
ctl = os.open(f"{U}/sock/{m}/ctl", os.O_WRONLY)
d = os.open(f"{U}/sock/{m}/data", os.O_RDWR)
print("default", st("rcvtimeo"), st("sndtimeo"))
os.write(ctl, b"rcvtimeo 200\n")
os.write(ctl, b"sndtimeo 1001\n")
print("set", st("rcvtimeo"), st("sndtimeo"))
t = time.monotonic()
print("read:", err(os.read, d, 10))
print("waited:", 0.18 <= time.monotonic() - t < 2)
print("bad:", err(os.write, ctl, b"rcvtimeo -5\n"))
os.write(ctl, b"rcvtimeo 0\n")
print("cleared", st("rcvtimeo"))
'
printf '%s\n' "$out"
expect_eq "file forms of the timeouts" "$out" "default 0 0
set 200 1004
read: EAGAIN
waited: True
bad: EINVAL
cleared 0"

# A write asleep for room whose SO_SNDTIMEO runs out looks once more and takes the room
# a reader made, too little to have woken it (Linux's sock_alloc_send_pskb):
# sndtimeo_held.py on kernel sockets and through both fronts, with 130 calls asleep
# first, so that under the supervisor the writes wait as held calls
# (src/supervisor/wait.rs; they answered EAGAIN there before their last look).
HELD=$ROOT/integration/sndtimeo_held.py
timeout 60 python3 "$HELD" >"$TMP/held.kernel" 2>&1 || fail "sndtimeo_held.py fails on kernel sockets: $(tail -3 "$TMP/held.kernel")"
grep -qx 'seqpacket filled [0-9]* send: 4096 after at least 1.5 s: True' "$TMP/held.kernel" ||
    fail "the kernel's timed-out record did not go: $(cat "$TMP/held.kernel")"
for front in preload seccomp; do
    UDSFS_PRELOAD=$PRELOAD_LIB timeout 60 "$UDSFS_BIN" run --front "$front" --mount "$MNT" -- \
        python3 "$HELD" >"$TMP/held.$front" 2>&1 || fail "sndtimeo_held.py fails through the $front front: $(tail -3 "$TMP/held.$front")"
    diff "$TMP/held.kernel" "$TMP/held.$front" >&2 ||
        fail "a timed-out write through the $front front answered differently from the kernel (< kernel, > $front)"
    ok "$front front: a timed-out write takes the room there, as the kernel's: $(tr '\n' '|' <"$TMP/held.$front")"
done

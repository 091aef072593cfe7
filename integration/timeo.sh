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

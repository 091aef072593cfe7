#!/usr/bin/env bash
# The message calls through the socket API (recvmsg and recvfrom with and without
# names or control, MSG_PEEK of datagrams larger than one ioctl, MSG_TRUNC, passed
# sockets with no or little control room, 16 KiB and larger messages, 1024 iovecs,
# zero-length I/O, recvmmsg's timeout and the error it leaves after datagrams, sendmmsg's counts, a stream send cut off by
# the peer, blocking receives and timeouts, MSG_WAITALL's glue): tests/conformance/msgcalls.py
# runs on kernel sockets, through `udsfs run` (the library) and through `udsfs run
# --front seccomp` (the supervisor: a write of nothing is trapped and sent, as Linux
# sends it, where the data file would answer 0); the outputs must be equal.
source "$(dirname "$0")/lib.sh"
kernel_vs_udsfs "$ROOT/tests/conformance/msgcalls.py"
udsfs_same_as_kernel_run "$ROOT/tests/conformance/msgcalls.py" "" --front seccomp

# The message ioctl itself (proto/src/ioctl.rs): a receive with MSGF_WAIT parks
# in the daemon (the park table counts it) until a message comes; without it EAGAIN
# at once; with the socket's rcvtimeo, EAGAIN once it runs out; a parked send to a
# full receiver waits likewise and goes once there is room.
py_pair out dgram '
import struct
IOC, BUF = 0xFFF85503, 16376
SEND, RECV, WAIT, ROOM, HEAD = 1, 2, 16, 14016, 2360
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(fd, op, flags, payload=b"", want=100):
    # Through ctypes, which lets other threads run while it blocks (fcntl.ioctl
    # holds the GIL for buffers this large).
    head = struct.pack("14IQ", op, flags, len(payload) if op == SEND else want, *[0] * 11, 0)
    buf = ctypes.create_string_buffer(BUF)
    buf[:64] = head
    buf[HEAD:HEAD + len(payload)] = payload
    if libc.ioctl(fd, ctypes.c_ulong(IOC), buf) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    got = struct.unpack_from("3I", buf.raw)[2]
    return buf.raw[HEAD:HEAD + got] if op == RECV else got
def parked():
    return int(open(f"{U}/gc").read().split("parked=")[1].split()[0])
def wait_parked():
    for _ in range(200):
        if parked() == 1:
            break
        time.sleep(0.01)
a = os.open(f"{U}/sock/{n}/data", os.O_RDWR)
b = os.open(f"{U}/sock/{m}/data", os.O_RDWR)
print("no wait:", err(call, b, RECV, 0))
out = []
t = threading.Thread(target=lambda: out.append(call(b, RECV, WAIT)), daemon=True)
t.start()
wait_parked()
print("parked:", parked())
os.write(a, b"hello")
t.join(5)
print("woken:", out, "parked:", parked())
ctl = os.open(f"{U}/sock/{m}/ctl", os.O_WRONLY)
os.write(ctl, b"rcvtimeo 200\n")
t0 = time.monotonic()
print("timeout:", err(call, b, RECV, WAIT), 0.18 < time.monotonic() - t0 < 2)
# A full receiver: the sender parks, then receives make room.
while err(call, a, SEND, 0, b"x" * 10) == "OK":
    pass
out = []
t = threading.Thread(target=lambda: out.append(call(a, SEND, WAIT, b"y" * 10)), daemon=True)
t.start()
wait_parked()
print("send parked:", parked())
# (A sender wakes once its budget is below half, as sock_writeable: drain all.)
os.set_blocking(b, False)
while err(os.read, b, 100) == "OK":
    pass
t.join(5)
print("send went:", out, "parked:", parked())
'
printf '%s\n' "$out"
expect_eq "the message ioctl parks" "$out" "no wait: EAGAIN
parked: 1
woken: [b'hello'] parked: 0
timeout: EAGAIN True
send parked: 1
send went: [10] parked: 0"

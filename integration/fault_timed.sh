#!/usr/bin/env bash
# The timed faults through the mount, measured by Python on both sides of a stream
# socketpair, each rule installed with a socket's ctl line `fault ...`:
# 1. latency: a ping-pong's round trips are >= the latency and < latency + 45 ms
#    (UDSFS_FAULT_SLACK_MS: the margin, default 45: under the doubled latency a rule applied twice would give, and wide enough for a round trip on a loaded machine, where a clean-clone CI run saw 86 ms);
# 2. bandwidth: 1 MiB at rate=1000 KB/s arrives intact within 20 % of 1.05 s;
# 3. slicer: bytes identical, every read <= average + variation, the pieces in time;
# 4. timeout: nothing delivered, EOF after the timeout, then EPIPE for the writer;
# 5. slow_close: the peer reads what was sent at once, EOF only after the delay;
# 6. a reader blocked while a message is held ends within 100 ms of SIGTERM
#    (UDSFS_SIGNAL_LIMIT_MS, default 150 on a loaded machine), and SO_RCVTIMEO
#    (ctl rcvtimeo) fires on time while a message is held.
source "$(dirname "$0")/lib.sh"

SLACK=${UDSFS_FAULT_SLACK_MS:-45}
LIMIT=${UDSFS_SIGNAL_LIMIT_MS:-150}

py '
SLACK, LIMIT = int(sys.argv[1]) / 1000, int(sys.argv[2]) / 1000

def data(n, flags=os.O_RDWR):
    return os.open(f"{U}/sock/{n}/data", flags)

def fault(n, text):
    fd = os.open(f"{U}/sock/{n}/ctl", os.O_WRONLY)
    ctl(fd, "fault " + text)
    os.close(fd)

def stream_pair():
    """A stream pair, its handle, and a data descriptor on each end."""
    h, a, b = pair("stream")
    return h, a, b, data(a), data(b)

def read_exactly(fd, n, most=65536):
    got, sizes = b"", []
    while len(got) < n:
        piece = os.read(fd, most)
        if not piece:
            break
        sizes.append(len(piece))
        got += piece
    return got, sizes

# ---- 1. latency
h, a, b, fa, fb = stream_pair()
fault(b, "up latency latency=50")
def echo():
    for _ in range(5):
        os.write(fb, os.read(fb, 100))
t = threading.Thread(target=echo, daemon=True)
t.start()
rtts = []
for i in range(5):
    t0 = time.monotonic()
    os.write(fa, bytes([i]) * 10)
    assert os.read(fa, 100) == bytes([i]) * 10, "latency: bytes changed"
    rtts.append(time.monotonic() - t0)
print("latency 50 ms up: round trips (ms):", [round(r * 1000, 1) for r in rtts])
assert all(0.050 <= r < 0.050 + SLACK for r in rtts), "latency: a round trip out of bounds"
print("ok: latency: every round trip >= 50 ms and < 50 ms + slack")

# ---- 2. bandwidth
h, a, b, fa, fb = stream_pair()
fault(b, "up bandwidth rate=1000")
blob = bytes(i * 7 % 251 for i in range(1 << 20))
def writer():
    view = memoryview(blob)
    while view:
        view = view[os.write(fa, view[:65536]):]
t0 = time.monotonic()
w = threading.Thread(target=writer, daemon=True)
w.start()
got, _ = read_exactly(fb, len(blob))
took = time.monotonic() - t0
want = len(blob) / 1e6
print(f"bandwidth 1000 KB/s: 1 MiB in {took:.3f} s (want {want:.3f} s)")
assert got == blob, "bandwidth: bytes changed"
assert abs(took - want) < 0.2 * want, "bandwidth: off the rate by more than 20 %"
print("ok: bandwidth: 1 MiB intact within 20 % of the rate")

# ---- 3. slicer
h, a, b, fa, fb = stream_pair()
fault(b, "up slicer average_size=64 size_variation=32 delay=10000 seed=9")
blob = bytes(i % 253 for i in range(1500))
t0 = time.monotonic()
os.write(fa, blob)
got, sizes = read_exactly(fb, len(blob))
took = time.monotonic() - t0
print(f"slicer 64+-32, 10 ms apart: {len(sizes)} reads in {took * 1000:.0f} ms, sizes {sizes}")
assert got == blob, "slicer: bytes changed"
assert max(sizes) <= 96, "slicer: a read of more than average + variation"
assert len(sizes) >= 16 and took >= 0.15, "slicer: the pieces did not come apart in time"
print("ok: slicer: bytes identical, every read <= 96 bytes")

# ---- 4. timeout
h, a, b, fa, fb = stream_pair()
fault(b, "up timeout timeout=200")
t0 = time.monotonic()
os.write(fa, b"held")
nb = data(b, os.O_RDWR | os.O_NONBLOCK)
assert err(os.read, nb, 100) == "EAGAIN", "timeout: a held message was readable"
assert os.read(fb, 100) == b"", "timeout: data after the end"
took = time.monotonic() - t0
print(f"timeout 200 ms: EOF after {took * 1000:.0f} ms")
assert 0.2 <= took < 0.2 + 0.2, "timeout: the end came at the wrong time"
assert err(os.write, fa, b"x") == "EPIPE", "timeout: the writer does not get EPIPE"
print("ok: timeout: nothing delivered, EOF after 200 ms, then EPIPE")

# ---- 5. slow_close: the pair handle and fa are the last references to a
h, a, b, fa, fb = stream_pair()
fault(a, "slow_close delay=200")
os.write(fa, b"bye")
t0 = time.monotonic()
os.close(fa)
os.close(h)
assert os.read(fb, 100) == b"bye", "slow_close: the data before the close"
nb = data(b, os.O_RDWR | os.O_NONBLOCK)
assert err(os.read, nb, 100) == "EAGAIN", "slow_close: EOF at once"
assert os.read(fb, 100) == b""
took = time.monotonic() - t0
print(f"slow_close 200 ms: EOF after {took * 1000:.0f} ms")
assert 0.2 <= took < 0.4, "slow_close: EOF at the wrong time"
print("ok: slow_close: EOF only after the delay")

# ---- 6. a blocked reader under a held message: signals and SO_RCVTIMEO
h, a, b, fa, fb = stream_pair()
fault(b, "up latency latency=5000")
os.write(fa, b"late")
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.read(fb, 100)
    os._exit(3)
time.sleep(0.3)
assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the reader did not block"
t0 = time.monotonic()
os.kill(pid, signal.SIGTERM)
_, st = os.waitpid(pid, 0)
took = time.monotonic() - t0
print(f"blocked reader under latency 5000: ended {took * 1000:.0f} ms after SIGTERM")
assert os.WIFSIGNALED(st), "the reader was not ended by the signal"
assert took < LIMIT, "the signalled reader took too long"
print("ok: a reader blocked behind a held message ends on a signal")
cb = os.open(f"{U}/sock/{b}/ctl", os.O_WRONLY)
ctl(cb, "rcvtimeo 300")
t0 = time.monotonic()
e = err(os.read, fb, 100)
took = time.monotonic() - t0
print(f"SO_RCVTIMEO 300 ms under latency 5000: {e} after {took * 1000:.0f} ms")
assert e == "EAGAIN" and 0.3 <= took < 0.3 + 0.1, "SO_RCVTIMEO off"
print("ok: SO_RCVTIMEO fires on time while a message is held")
' "$SLACK" "$LIMIT" || fail "timed faults through the mount"
ok "timed faults through the mount"

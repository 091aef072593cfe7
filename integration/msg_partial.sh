#!/usr/bin/env bash
# Issue 11, defect 2: a stream `msg` record that is only partly queued is
# never sent twice. write(2) reports the header and payload bytes queued; the
# file then takes the next bytes written as the rest of that record's payload
# (no new header), so a writer that follows write(2)'s count sends each byte
# exactly once.
#  1. O_NONBLOCK: A -> B filled with 4 KiB writes until EAGAIN, 8 KiB read
#     from B, then a 65536-byte record on A's msg, written as write(2) says
#     while B is drained: B gets the filler and the 65536 payload bytes, once.
#  2. A blocking 400000-byte record parks once part of it is queued; a signal
#     ends the write with the partial count (not EINTR), and the writer goes
#     on with the rest: B gets the 400000 bytes, once, in order.
source "$(dirname "$0")/lib.sh"

new_pair P stream
new_pair Q stream
ok "stream pairs $P_N-$P_M and $Q_N-$Q_M"

py '
A, B, A2, B2 = sys.argv[1:5]

def pattern(n, seed):
    return bytes((i * 7 + seed) % 251 for i in range(n))

def drain(fd, into):
    while True:
        try:
            got = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not got:
            return
        into += got

# ---- 1. non-blocking
a = os.open(f"{U}/sock/{A}/data", os.O_WRONLY | os.O_NONBLOCK)
amsg = os.open(f"{U}/sock/{A}/msg", os.O_WRONLY | os.O_NONBLOCK)
b = os.open(f"{U}/sock/{B}/data", os.O_RDONLY | os.O_NONBLOCK)
filler = bytearray()
while True:
    chunk = pattern(4096, len(filler) // 4096)
    try:
        n = os.write(a, chunk)
    except BlockingIOError:
        break
    filler += chunk[:n]
print(f"ok: {len(filler)} filler bytes fill A -> B")
got = bytearray(os.read(b, 8192))
payload = pattern(65536, 3)
rec = b"len=65536\n" + payload
left, writes, partial = rec, 0, 0
while left:
    try:
        n = os.write(amsg, left)
    except BlockingIOError:
        drain(b, got)
        continue
    writes += 1
    if n < len(left):
        partial += 1
    left = left[n:]
drain(b, got)
want = bytes(filler) + payload
if len(got) != len(want):
    sys.exit(f"FAIL: B received {len(got)} bytes, want {len(want)} ({len(filler)} filler + 65536)")
if bytes(got) != want:
    sys.exit("FAIL: B received the right count but other bytes")
if partial == 0:
    sys.exit("FAIL: the record went in whole: the partial path was not tried")
print(f"ok: 65536 payload bytes arrive once ({writes} writes, {partial} partial)")

# ---- 2. a parked record interrupted by a signal
signal.signal(signal.SIGUSR1, lambda *_: None)
amsg2 = os.open(f"{U}/sock/{A2}/msg", os.O_WRONLY)
b2 = os.open(f"{U}/sock/{B2}/data", os.O_RDONLY)
payload = pattern(400000, 5)
rec = b"len=400000\n" + payload
t, first = in_thread(lambda: os.write(amsg2, rec))
time.sleep(0.5)
if not t.is_alive():
    sys.exit(f"FAIL: a 400000-byte record did not wait: {first}")
signal.pthread_kill(t.ident, signal.SIGUSR1)
t.join(3)
if t.is_alive():
    sys.exit("FAIL: the signalled write did not end")
n = first.get("n")
if n is None or not 0 < n < len(rec):
    sys.exit(f"FAIL: the signalled write gave {first}, want a partial count")
print(f"ok: the signal ends the write with a partial count ({n} of {len(rec)})")
got = bytearray()
def reader():
    while len(got) < 400000:
        chunk = os.read(b2, 65536)
        if not chunk:
            return
        got.extend(chunk)
r = threading.Thread(target=reader, daemon=True)
r.start()
left = rec[n:]
while left:
    left = left[os.write(amsg2, left):]
r.join(10)
if r.is_alive():
    sys.exit(f"FAIL: B got {len(got)} of 400000 bytes and no more")
time.sleep(0.2)
os.set_blocking(b2, False)
drain(b2, got)
if len(got) != 400000 or bytes(got) != payload:
    sys.exit(f"FAIL: B received {len(got)} bytes, want the 400000 payload bytes once")
print("ok: after the signal, the rest goes on as payload: 400000 bytes arrive once")
' "$P_N" "$P_M" "$Q_N" "$Q_M"

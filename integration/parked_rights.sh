#!/usr/bin/env bash
# Issue 11, defect 1: a `rights=` send that parks keeps its sockets. A dgram
# socket R bound at @rcv, a client C connected to it; C's queue is filled with
# one-byte O_NONBLOCK writes until EAGAIN; then a blocking `len=3 rights=X`
# write to C's msg parks (X a stream socket, whose handle is closed while the
# write waits: the parked send holds it, as sendmsg holds its fds). Draining R
# lets the write finish: the last record read on R's msg must carry rights=H,
# and H must be the stream socket X was.
UDSFS_MOUNT_ARGS=(--max-dgram-qlen 10)
source "$(dirname "$0")/lib.sh"

new_sock R dgram
ctl "$R_FD" "bind @rcv" || fail "bind @rcv"
new_sock C dgram
ctl "$C_FD" "connect @rcv" || fail "connect @rcv"
new_sock X stream
ok "receiver $R at @rcv, client $C, stream socket $X to pass"

py '
R, C, X, xfd = sys.argv[1:5]
xfd = int(xfd)
data = os.open(f"{U}/sock/{C}/data", os.O_WRONLY | os.O_NONBLOCK)
n = fill(data, b"x", most=1000)
if n > 1000:
    sys.exit("FAIL: the dgram queue never filled")
print(f"ok: {n} one-byte writes fill the queue")
msg = os.open(f"{U}/sock/{C}/msg", os.O_WRONLY)
t, result = in_thread(lambda: os.write(msg, f"len=3 rights={X}\nabc".encode()))
time.sleep(0.3)
if not t.is_alive():
    sys.exit(f"FAIL: the rights= write did not wait on a full queue: {result}")
print("ok: the rights= write waits")
os.close(xfd)  # the waiting send holds X now
time.sleep(0.1)
rmsg = os.open(f"{U}/sock/{R}/msg", os.O_RDONLY | os.O_NONBLOCK)
records = []
deadline = time.time() + 5
while len(records) < n + 1 and time.time() < deadline:
    try:
        rec = os.read(rmsg, 4096)
    except BlockingIOError:
        time.sleep(0.01)
        continue
    records.append(rec)
t.join(5)
if t.is_alive():
    sys.exit("FAIL: the rights= write never finished")
if result.get("n") != len(f"len=3 rights={X}\nabc"):
    sys.exit(f"FAIL: the rights= write gave {result}")
if len(records) != n + 1:
    sys.exit(f"FAIL: {len(records)} records read, want {n + 1}")
if any(r != b"len=1\nx" for r in records[:n]):
    sys.exit(f"FAIL: the filler records: {records[:n]!r}")
head, _, payload = records[n].partition(b"\n")
fields = dict(f.split(b"=", 1) for f in head.split())
if payload != b"abc" or b"rights" not in fields:
    sys.exit(f"FAIL: the parked record reads {records[n]!r}, want len=3 rights=H and abc")
h = fields[b"rights"].decode()
st = open(f"{U}/sock/{h}/status").read()
if "type=stream" not in st:
    sys.exit(f"FAIL: the passed socket {h} is not a stream socket: {st}")
print(f"ok: the parked record arrives with rights={h}, the stream socket passed")
' "$R" "$C" "$X" "$X_FD"

#!/usr/bin/env bash
# O_NONBLOCK: a read of an empty data file fails at once with EAGAIN, whether the flag
# was given at open or set later with fcntl; clearing it with fcntl makes reads block
# again; a full datagram queue makes a non-blocking write fail with EAGAIN.
source "$(dirname "$0")/lib.sh"

new_sock SRV dgram
ctl "$SRV_FD" "bind nb.sock" || fail "bind nb.sock"
new_sock CLI dgram
ctl "$CLI_FD" "connect nb.sock" || fail "connect nb.sock"
ok "dgram server $SRV at nb.sock, client $CLI connected"

# shell: dd iflag=nonblock on an empty queue
expect_errno EAGAIN dd bs=65536 count=1 status=none iflag=nonblock if="$U/sock/$SRV/data"

py '
srv, cli = sys.argv[1], sys.argv[2]
data = f"{U}/sock/{srv}/data"
cdata = f"{U}/sock/{cli}/data"
def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)

def timed_read(fd, n=65536):
    t0 = time.monotonic()
    try:
        return os.read(fd, n), (time.monotonic() - t0) * 1000
    except BlockingIOError:
        return "EAGAIN", (time.monotonic() - t0) * 1000

# 1. O_NONBLOCK at open
fd = os.open(data, os.O_RDONLY | os.O_NONBLOCK)
r, ms = timed_read(fd)
check(r == "EAGAIN", f"os.open(O_RDONLY|O_NONBLOCK) then os.read on an empty queue -> BlockingIOError/EAGAIN ({ms:.1f} ms, got {r!r})")
check(ms < 1000, f"the EAGAIN came at once ({ms:.1f} ms)")
c = os.open(cdata, os.O_WRONLY)
check(os.write(c, b"one") == 3, "client wrote one message")
r, ms = timed_read(fd)
check(r == b"one", f"non-blocking read returns the queued message ({r!r})")
r, ms = timed_read(fd)
check(r == "EAGAIN", f"and EAGAIN again once the queue is empty ({r!r})")
os.close(fd)

# 2. blocking open, O_NONBLOCK set later with fcntl
fd = os.open(data, os.O_RDONLY)
fl = fcntl.fcntl(fd, fcntl.F_GETFL)
fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
r, ms = timed_read(fd)
check(r == "EAGAIN", f"fcntl(F_SETFL, O_NONBLOCK) after a blocking open: os.read -> EAGAIN ({ms:.1f} ms, got {r!r})")
check(ms < 1000, f"the EAGAIN came at once ({ms:.1f} ms)")
os.write(c, b"two")
r, ms = timed_read(fd)
check(r == b"two", f"non-blocking read after fcntl returns the queued message ({r!r})")

# 3. clear O_NONBLOCK again: the read blocks until a message comes
fcntl.fcntl(fd, fcntl.F_SETFL, fl & ~os.O_NONBLOCK)
def later():
    time.sleep(0.3)
    os.write(c, b"three")
threading.Thread(target=later, daemon=True).start()
t0 = time.monotonic()
r = os.read(fd, 65536)
ms = (time.monotonic() - t0) * 1000
check(r == b"three", f"after clearing O_NONBLOCK the read blocked and got {r!r}")
check(ms >= 250, f"it blocked until the message was sent ({ms:.0f} ms, sender waited 300 ms)")
os.close(fd)
os.close(c)
' "$SRV" "$CLI" || fail "O_NONBLOCK reads"

# A full datagram queue: a sender that is not the receiver's own peer gets
# max_dgram_qlen + 1 messages in, then EAGAIN with O_NONBLOCK. The mount used the
# host's net.unix.max_dgram_qlen (else 10).
qlen=$(cat /proc/sys/net/unix/max_dgram_qlen 2>/dev/null || echo 10)
py '
srv, cli, qlen = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = os.open(f"{U}/sock/{cli}/data", os.O_WRONLY | os.O_NONBLOCK)
sent = 0
while sent < qlen + 50:
    try:
        os.write(c, b"m%d" % sent)
        sent += 1
    except BlockingIOError:
        break
print(f"non-blocking sends before EAGAIN: {sent} (max_dgram_qlen {qlen})")
if sent != qlen + 1:
    print(f"FAIL: {sent} non-blocking sends fit in the queue, want max_dgram_qlen + 1 = {qlen + 1}", file=sys.stderr)
    sys.exit(1)
print("ok: a full datagram queue gives EAGAIN to an O_NONBLOCK writer after max_dgram_qlen + 1 messages")
r = os.open(f"{U}/sock/{srv}/data", os.O_RDONLY | os.O_NONBLOCK)
first = os.read(r, 100)
if first != b"m0":
    print(f"FAIL: first queued message {first!r}, want b\"m0\"", file=sys.stderr)
    sys.exit(1)
os.write(c, b"again")
print("ok: after one read the non-blocking writer gets one more message in")
' "$SRV" "$CLI" "$qlen" || fail "O_NONBLOCK write on a full datagram queue"

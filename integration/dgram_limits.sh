#!/usr/bin/env bash
# Datagram limits: the largest message (send buffer - 32 = 212960 bytes by default) goes
# through whole in one write and one read; one byte more fails with EMSGSIZE; a blocking
# sender on a full queue parks and goes on as soon as the receiver reads one message.
source "$(dirname "$0")/lib.sh"

new_sock SRV dgram
ctl "$SRV_FD" "bind big.sock" || fail "bind big.sock"
new_sock CLI dgram
ctl "$CLI_FD" "connect big.sock" || fail "connect big.sock"
ok "dgram server $SRV at big.sock, client $CLI connected"
expect_status "$CLI" sndbuf 212992

py '
srv, cli = sys.argv[1], sys.argv[2]
c = os.open(f"{U}/sock/{cli}/data", os.O_WRONLY)
r = os.open(f"{U}/sock/{srv}/data", os.O_RDONLY | os.O_NONBLOCK)
big = bytes((i * 7 + 3) % 256 for i in range(212960))
n = os.write(c, big)
if n != len(big):
    sys.exit(f"FAIL: a {len(big)}-byte datagram write returned {n}")
got = os.read(r, 1 << 20)
if got != big:
    sys.exit(f"FAIL: read back {len(got)} bytes, want the {len(big)} bytes sent, unchanged")
print(f"ok: a {len(big)}-byte datagram (sndbuf - 32) went through whole in one write and one read")
try:
    os.write(c, big + b"x")
    sys.exit(f"FAIL: a {len(big) + 1}-byte datagram was accepted; want EMSGSIZE")
except OSError as e:
    if e.errno != errno.EMSGSIZE:
        sys.exit(f"FAIL: a {len(big) + 1}-byte datagram failed with {errno.errorcode.get(e.errno)}, want EMSGSIZE")
print(f"ok: a {len(big) + 1}-byte datagram fails with EMSGSIZE")
try:
    os.read(r, 10)
    sys.exit("FAIL: the refused datagram was queued anyway")
except BlockingIOError:
    print("ok: nothing was queued by the refused write")
' "$SRV" "$CLI" || fail "datagram size limits"

# fill the queue with non-blocking writes, then a blocking writer parks
qlen=$(cat /proc/sys/net/unix/max_dgram_qlen 2>/dev/null || echo 10)
py '
c = os.open(f"{U}/sock/{sys.argv[1]}/data", os.O_WRONLY | os.O_NONBLOCK)
n = 0
try:
    while n < 1000:
        os.write(c, b"fill%d" % n)
        n += 1
except BlockingIOError:
    pass
print(f"queued {n} messages before EAGAIN")
' "$CLI" || fail "filling the queue"
expect_status "$SRV" rcvq_msgs $((qlen + 1))

env --default-signal=INT,TERM bash -c 'printf blocked-sender >"$1"' bash "$U/sock/$CLI/data" &
writer=$!
wait_parked "$writer"
sleep 0.2
proc_alive "$writer" || fail "the blocking write to a full queue did not block"
ok "a blocking write to the full queue ($((qlen + 1)) messages) is parked"
expect_eq "first queued message" "$(recv "$SRV")" fill0
t0=$(now_ms)
ended_within "$writer" 2000 "$t0" || fail "the parked writer did not go on within 2 s of a read freeing a slot"
reap "$writer"
[ "$REAPED_STATUS" -eq 0 ] || fail "the parked writer failed with status $REAPED_STATUS"
say "the parked writer went on $ELAPSED_MS ms after the read"
ok "a read freed a slot and the parked writer completed"
for i in $(seq 1 "$qlen"); do
    expect_eq "queued message $i" "$(recv "$SRV")" "fill$i"
done
expect_eq "the parked writer's message, last" "$(recv "$SRV")" blocked-sender

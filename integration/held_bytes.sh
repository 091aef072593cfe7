#!/usr/bin/env bash
# The daemon holds at most --max-held-bytes of data for waiting writes and partly
# written msg records: with --max-held-bytes 1048576, five blocking writes of 200000
# bytes wait on a full stream (1000000 bytes held), a sixth fails at once with ENOBUFS
# (and a log line); a msg record written in pieces that would leave 100011 bytes
# waiting fails with ENOBUFS, nothing taken; room comes back when a waiter ends.
UDSFS_MOUNT_ARGS=(--max-held-bytes 1048576)
source "$(dirname "$0")/lib.sh"

new_pair P stream
# Fill P_N -> P_M until EAGAIN, so every blocking write to P_N waits.
py 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
n = 0
try:
    while True:
        n += os.write(fd, b"x" * 4096)
except BlockingIOError:
    pass
print(f"{n} bytes queued before EAGAIN")' "$U/sock/$P_N/data"

parked_count() { sed -n 's/^parked=//p' "$U/gc"; }
head -c 200000 /dev/zero >"$TMP/200k"
writers=()
for i in 1 2 3 4 5; do
    dd if="$TMP/200k" of="$U/sock/$P_N/data" bs=200000 count=1 conv=notrunc status=none 2>"$TMP/w$i.err" &
    writers+=($!)
    wait_parked "${writers[-1]}"
done
[ "$(parked_count)" = 5 ] || fail "parked=$(parked_count), want 5"
ok "5 writes of 200000 bytes wait (1000000 bytes held)"

rc=0
out=$(timeout 5 dd if="$TMP/200k" of="$U/sock/$P_N/data" bs=200000 count=1 conv=notrunc status=none 2>&1) || rc=$?
[ "$rc" -ne 124 ] || fail "a sixth write of 200000 bytes waited past --max-held-bytes 1048576"
case $out in
*"No buffer space available"*) ok "a sixth write of 200000 bytes gets ENOBUFS at once" ;;
*) fail "the sixth write: status $rc, output '$out', want ENOBUFS" ;;
esac
grep -q "cannot wait: ENOBUFS" "$LOG" || fail "no log line for the refused write"
ok "the daemon logged it"

# A msg record in pieces on another pair: its first piece would leave 100011 bytes
# waiting for the rest of the record (1100011 held in all).
new_pair Q stream
piece() { # piece BYTES: a header for 900000 bytes and BYTES of its payload, one write()
    py 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, b"len=900000\n" + b"m" * int(sys.argv[2]))
    print("ok")
except OSError as e:
    print(os.strerror(e.errno))' "$U/sock/$Q_N/msg" "$1"
}
out=$(piece 100000)
[ "$out" = "No buffer space available" ] || fail "a msg piece leaving 100011 bytes waiting: '$out', want ENOBUFS"
ok "a msg piece that would hold 100011 more bytes gets ENOBUFS"

kill -9 "${writers[0]}"
wait "${writers[0]}" 2>/dev/null || true
n=0
until [ "$(parked_count)" = 4 ]; do
    n=$((n + 1))
    [ $n -le 300 ] || fail "parked=$(parked_count) after a writer was killed, want 4"
    sleep 0.01
done
out=$(piece 100000)
[ "$out" = ok ] || fail "after a waiter ended, the msg piece: '$out', want ok"
ok "room comes back when a waiter ends: the piece fits (900011 bytes held)"

for w in "${writers[@]:1}"; do kill -9 "$w" 2>/dev/null || true; done
wait 2>/dev/null || true

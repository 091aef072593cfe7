#!/usr/bin/env bash
# A datagram server bound at run/log.sock and a client connected to it through ctl:
# three separate writes arrive as three messages, in order, boundaries kept; the bound
# name shows as a socket node in `ls -l`; status reports type, state and addresses.
source "$(dirname "$0")/lib.sh"

mkdir "$MNT/run"
ok "mkdir run"

new_sock SRV dgram
say "server socket: $SRV"
ctl "$SRV_FD" "bind run/log.sock" || fail "bind run/log.sock failed"
ok "server bound at run/log.sock"

listing=$(ls -l "$MNT/run")
say "$ listing of run:"
say "$listing"
grep -Eq '^srwxr-xr-x .* log\.sock$' <<<"$listing" || fail "ls -l run shows no srwxr-xr-x log.sock node"
ok "ls -l run shows the socket node srwxr-xr-x log.sock"
expect_eq "stat -c %F run/log.sock" "$(stat -c %F "$MNT/run/log.sock")" socket
[ -S "$MNT/run/log.sock" ] || fail "test -S run/log.sock is false"
ok "test -S run/log.sock"

expect_status "$SRV" type dgram
expect_status "$SRV" local run/log.sock
expect_status "$SRV" peer ""
expect_status "$SRV" state unconnected

new_sock CLI dgram
say "client socket: $CLI"
ctl "$CLI_FD" "connect run/log.sock" || fail "connect run/log.sock failed"
ok "client connected to run/log.sock"
expect_status "$CLI" type dgram
expect_status "$CLI" peer run/log.sock
expect_status "$CLI" local ""
expect_status "$CLI" state connected

msgs=("first message" "second, a little longer message" "3")
exec {cdata}>"$U/sock/$CLI/data"
for m in "${msgs[@]}"; do
    printf '%s' "$m" >&"$cdata" || fail "write '$m' to the client's data failed"
done
close_fd "$cdata"
ok "client wrote ${#msgs[@]} messages with ${#msgs[@]} separate writes"

expect_status "$SRV" rcvq_msgs 3
expect_status "$SRV" rcvq_bytes $((${#msgs[0]} + ${#msgs[1]} + ${#msgs[2]}))

say "$ dd bs=65536 count=1 < .udsfs/sock/$SRV/data   (one read per message)"
for i in 0 1 2; do
    got=$(recv "$SRV") || fail "read $((i + 1)) from the server's data failed"
    say "  message $((i + 1)): $got"
    [ "$got" == "${msgs[$i]}" ] || fail "message $((i + 1)): got '$got', want '${msgs[$i]}'"
done
ok "the server read the 3 messages in order, one per read, boundaries kept"
expect_status "$SRV" rcvq_msgs 0
expect_status "$SRV" rcvq_bytes 0

# Nothing else is queued: a non-blocking read now fails with EAGAIN.
expect_errno EAGAIN dd bs=65536 count=1 status=none iflag=nonblock if="$U/sock/$SRV/data"

# A reader with a small buffer gets the head of one message; the rest of that message is
# dropped and the next read starts at the next message (Linux SOCK_DGRAM truncation).
send "$CLI" "0123456789" || fail "send 0123456789"
send "$CLI" "next" || fail "send next"
expect_eq "3-byte read of a 10-byte message" "$(recv "$SRV" 3)" "012"
expect_eq "the read after the truncated one" "$(recv "$SRV")" "next"

# A read with the status file of a dgram socket still readable by plain cat.
say "$ cat .udsfs/sock/$SRV/status"
cat "$U/sock/$SRV/status"

# Plain `cat` on the server's data prints what clients send, in order: each read
# returns one datagram, and cat waits (parked in the daemon) for the next.
cat "$U/sock/$SRV/data" > "$TMP/cat.out" &
catpid=$!
wait_parked "$catpid"
for m in "one" "two" "three"; do
    echo "$m" > "$MNT/.udsfs/connect/run/log.sock" || fail "echo $m into the connect view"
done
wait_lines "$TMP/cat.out" 3
kill "$catpid" 2>/dev/null || true
wait "$catpid" 2>/dev/null || true
expect_eq "what cat printed" "$(cat "$TMP/cat.out")" "$(printf 'one\ntwo\nthree')"
ok "cat on the server's data printed the messages of three echo clients in order"

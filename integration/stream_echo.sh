#!/usr/bin/env bash
# A stream echo server written in bash on the mount (bind, listen, an accept loop, each
# connection served in the background by dd copying its data back) serves 20 concurrent
# clients: all 20 connections are open at once before any client sends, then each
# client sends its own random payload (1 byte to ~320 KB, several above the 212992-byte
# send buffer, so both directions fill up and block) and gets exactly those bytes back.
source "$(dirname "$0")/lib.sh"

CLIENTS=${UDSFS_ECHO_CLIENTS:-20}
# The whole exchange (all clients) must finish within this.
LIMIT=${UDSFS_ECHO_LIMIT_MS:-30000}

start_echo_server echo.sock 64
ok "echo server: socket $ECHO_SRV bound at echo.sock and listening, accept loop pid $ECHO_PID"
expect_status "$ECHO_SRV" state listening

# distinct random payloads: client 1 sends 1 byte, the others random sizes up to ~320 KB
total=0
sizes=()
for i in $(seq 1 "$CLIENTS"); do
    if [ "$i" -eq 1 ]; then size=1; else size=$((RANDOM * 10 + i)); fi
    head -c "$size" /dev/urandom >"$TMP/in.$i"
    sizes+=("$size")
    total=$((total + size))
done
[ "$(md5sum "$TMP"/in.* | awk '{print $1}' | sort -u | wc -l)" -eq "$CLIENTS" ] ||
    fail "two random payloads are equal"
say "payload sizes (bytes): ${sizes[*]} (total $total)"

# start the clients; each connects, then waits for the go file before it sends
pids=()
for i in $(seq 1 "$CLIENTS"); do
    echo_client echo.sock "$TMP/in.$i" "$TMP/out.$i" "$TMP/go" 2>"$TMP/err.$i" &
    pids+=("$!")
done
wait_lines "$ECHO_LOG" "$CLIENTS" 10000
ok "the bash server accepted all $CLIENTS connections, all open at once: sockets $(tr '\n' ' ' <"$ECHO_LOG")"
accepted=$(sort -u "$ECHO_LOG" | wc -l)
expect_eq "distinct accepted socket numbers" "$accepted" "$CLIENTS"
for m in $(cat "$ECHO_LOG"); do
    expect_status "$m" state connected >/dev/null
done
ok "every accepted socket reports state=connected"

t0=$(now_ms)
: >"$TMP/go"
for i in $(seq 1 "$CLIENTS"); do
    pid=${pids[$((i - 1))]}
    if ! ended_within "$pid" "$LIMIT" "$t0"; then
        fail "client $i (pid $pid, ${sizes[$((i - 1))]} bytes) has not finished $ELAPSED_MS ms after go; got $(stat -c %s "$TMP/out.$i") bytes back so far"
    fi
    reap "$pid"
    [ "$REAPED_STATUS" -eq 0 ] || fail "client $i exited with status $REAPED_STATUS: $(cat "$TMP/err.$i")"
done
ms=$(($(now_ms) - t0))
say "all $CLIENTS clients done $ms ms after go: $((total * 2 / 1024)) KiB through the mount (sent and echoed), $((total * 2 / 1024 * 1000 / (ms > 0 ? ms : 1))) KiB/s"

for i in $(seq 1 "$CLIENTS"); do
    cmp -s "$TMP/in.$i" "$TMP/out.$i" ||
        fail "client $i got back $(stat -c %s "$TMP/out.$i") bytes that differ from its ${sizes[$((i - 1))]}-byte payload ($(cmp "$TMP/in.$i" "$TMP/out.$i" 2>&1 | head -n1))"
done
ok "each of the $CLIENTS clients got exactly its own bytes back"

# the served connections close when their dd ends: their socket directories go
for m in $(cat "$ECHO_LOG"); do
    sock_gone "$m" 3000 || fail "accepted socket $m still exists 3 s after its client finished: $(tr '\n' ' ' <"$U/sock/$m/status")"
done
ok "all $CLIENTS served sockets closed after EOF"
expect_status "$ECHO_SRV" state listening

# the server still serves: one more client after the storm
printf 'one more line\n' >"$TMP/in.last"
echo_client echo.sock "$TMP/in.last" "$TMP/out.last" &
last=$!
ended_within "$last" 10000 || fail "a client after the 20 did not finish within 10 s"
reap "$last"
[ "$REAPED_STATUS" -eq 0 ] || fail "a client after the 20 exited with status $REAPED_STATUS"
cmp -s "$TMP/in.last" "$TMP/out.last" || fail "the last client got '$(cat "$TMP/out.last")'"
ok "a further client is served by the same accept loop"
kill "$ECHO_PID"

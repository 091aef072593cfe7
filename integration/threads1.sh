#!/usr/bin/env bash
# One FUSE worker thread (--threads 1): a request that blocks must be parked, never
# waited for on the worker, or that single thread would be gone and the mount would
# hang. With a reader, a writer on a full queue, an accept and connects over a full
# backlog all blocked at once, every other request (ls, status, the writes, reads,
# connects and accepts that wake them) is still answered promptly; then the bash stream
# echo server serves several concurrent clients through the same single thread.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--threads 1)
source "$(dirname "$0")/lib.sh"

# Each request made while others are parked must finish within this (a worker held by
# a parked request would make it hang until the timeout below instead).
PROMPT_LIMIT=${UDSFS_PROMPT_LIMIT_MS:-500}
CLIENTS=${UDSFS_THREADS1_CLIENTS:-5}

say "daemon $DAEMON_PID runs $(ls /proc/"$DAEMON_PID"/task | wc -l) threads in all (1 FUSE worker)"

# prompt DESC CMD...: CMD must succeed within PROMPT_LIMIT ms (a hang is cut at 10 s).
prompt() {
    local desc=$1 ms rc=0
    shift
    timed ms timeout -k 1 10 "$@" >/dev/null || rc=$?
    [ "$rc" -eq 0 ] || fail "$desc failed (status $rc$([ "$rc" -eq 124 ] && printf ': timed out, the worker is stuck'))"
    say "  $desc: $ms ms"
    [ "$ms" -le "$PROMPT_LIMIT" ] || fail "$desc took $ms ms with one worker thread (limit $PROMPT_LIMIT ms)"
}

# ---- 1. a blocked reader woken by a writer
new_pair R stream
cat "$U/sock/$R_N/data" >"$TMP/reader.out" 2>"$TMP/reader.err" {R_FD}>&- &
reader=$!
wait_parked "$reader"
ok "cat $reader is blocked reading the empty .udsfs/sock/$R_N/data"
exec {rm}>"$U/sock/$R_M/data"
prompt "write 'wake up' to $R_M while the reader is parked" bash -c 'printf "wake up\n" >&"$1"' bash "$rm"
start=$(now_ms)
until [ "$(cat "$TMP/reader.out")" == "wake up" ]; do
    [ $(($(now_ms) - start)) -le 3000 ] || fail "the parked cat did not print 'wake up' within 3 s: '$(cat "$TMP/reader.out")'"
    sleep 0.002
done
say "the reader printed the line $(($(now_ms) - start)) ms after the write returned"
wait_parked "$reader"
ok "the reader woke, printed the line and blocked again"

# ---- 2. more kinds of blocked request at once
new_pair W stream
# hold M's data in this shell: once one of M's files was opened, M lives only while one is
exec {wm}<"$U/sock/$W_M/data"
cat /dev/zero >"$U/sock/$W_N/data" 2>"$TMP/writer.err" {R_FD}>&- {W_FD}>&- {rm}>&- {wm}<&- &
writer=$!
wait_parked "$writer"
ok "cat /dev/zero (pid $writer) is blocked writing to .udsfs/sock/$W_N/data, $(status_of "$W_M" rcvq_bytes) bytes queued at $W_M"

new_sock L stream
ctl "$L_FD" "bind acc.sock" || fail "bind acc.sock"
ctl "$L_FD" "listen" || fail "listen"
cat "$U/sock/$L/accept" >"$TMP/accept.out" 2>"$TMP/accept.err" {R_FD}>&- {W_FD}>&- {rm}>&- {wm}<&- &
acceptor=$!
wait_parked "$acceptor"
ok "cat .udsfs/sock/$L/accept (pid $acceptor) is blocked in accept"

new_sock B stream
ctl "$B_FD" "bind bl.sock" || fail "bind bl.sock"
ctl "$B_FD" "listen 1" || fail "listen 1"
connectors=()
for i in 1 2 3; do
    cat "$U/connect/bl.sock" >/dev/null 2>"$TMP/conn$i.err" {R_FD}>&- {W_FD}>&- {rm}>&- {wm}<&- &
    connectors+=("$!")
done
for pid in "${connectors[@]}"; do wait_parked "$pid"; done
expect_status "$B" pending 2
ok "3 cats on .udsfs/connect/bl.sock (backlog 1): 2 connected and blocked reading, 1 blocked in connect"
parked=$(sed -n 's/^parked=//p' "$U/gc")
say "requests parked in the daemon now: $parked (.udsfs/gc)"
[ "$parked" -ge 6 ] || fail ".udsfs/gc parked=$parked; want at least the 6 blocked requests"

say "with one worker thread and $parked parked requests:"
prompt "ls -l of the mount root" ls -l "$MNT"
prompt "cat .udsfs/sock/$W_M/status" cat "$U/sock/$W_M/status"
prompt "cat .udsfs/unix" cat "$U/unix"
prompt "mkdir/rmdir" sh -c 'mkdir "$1/d" && rmdir "$1/d"' sh "$MNT"
prompt "a new stream pair, one byte through it" bash -c '
    exec {p}<>"$1/stream/pair"; read -r n m <&"$p"
    exec {a}<>"$1/sock/$n/data" {b}<>"$1/sock/$m/data"
    printf z >&"$a"; [ "$(dd bs=1 count=1 status=none <&"$b")" == z ]' bash "$U"
prompt "drain 64 KiB from $W_M (the blocked writer goes on)" bash -c 'dd bs=65536 count=1 status=none of=/dev/null <&"$1"' bash "$wm"
prompt "connect to acc.sock (wakes the blocked accept)" bash -c 'exec {c}<>"$1/connect/acc.sock"' bash "$U"
ended_within "$acceptor" 3000 || fail "the blocked accept did not return after a connect (accept.out: '$(cat "$TMP/accept.out")')"
reap "$acceptor"
say "  the blocked accept returned socket $(cat "$TMP/accept.out") (cat exit status $REAPED_STATUS)"
[[ $(cat "$TMP/accept.out") =~ ^[0-9]+$ ]] || fail "accept handle read '$(cat "$TMP/accept.out")', want a socket number"
prompt "accept one pending connection on bl.sock" bash -c 'exec {a}<"$1"; read -r m <&"$a"; [[ $m =~ ^[0-9]+$ ]]' bash "$U/sock/$B/accept"
start=$(now_ms)
until [ "$(status_of "$B" pending)" == 2 ]; do
    [ $(($(now_ms) - start)) -le 3000 ] || fail "the connect blocked on the full backlog did not complete after an accept (pending=$(status_of "$B" pending))"
    sleep 0.005
done
ok "the connect that was blocked on the full backlog completed after the accept (pending back at 2)"
# the accepted connection was closed at once: its client cat sees EOF and ends
start=$(now_ms)
until [ "$(count_alive "${connectors[@]}")" == 2 ]; do
    [ $(($(now_ms) - start)) -le 3000 ] ||
        fail "$(count_alive "${connectors[@]}") of the 3 connected cats run 3 s after one connection was accepted and closed; want 2"
    sleep 0.005
done
alive=()
for pid in "${connectors[@]}"; do
    if proc_alive "$pid"; then alive+=("$pid"); else reap "$pid" && ended=$pid; fi
done
[ "$REAPED_STATUS" -eq 0 ] || fail "the cat whose connection was accepted and closed exited with status $REAPED_STATUS"
ok "the cat whose connection was accepted and closed saw EOF and exited 0 (pid $ended)"
connectors=("${alive[@]}")
wait_parked "$writer"
ok "the writer is blocked again on the refilled queue"
proc_alive "$reader" || fail "the parked reader ended unexpectedly"

# ---- 3. the bash echo server through one worker thread
start_echo_server echo.sock 16
ok "echo server: socket $ECHO_SRV at echo.sock, accept loop pid $ECHO_PID"
pids=()
for i in $(seq 1 "$CLIENTS"); do
    head -c $((RANDOM * 8 + i)) /dev/urandom >"$TMP/in.$i"
    echo_client echo.sock "$TMP/in.$i" "$TMP/out.$i" "$TMP/go" 2>"$TMP/err.$i" {R_FD}>&- {W_FD}>&- {rm}>&- {wm}<&- &
    pids+=("$!")
done
wait_lines "$ECHO_LOG" "$CLIENTS" 10000
ok "$CLIENTS clients connected at once"
t0=$(now_ms)
: >"$TMP/go"
for i in $(seq 1 "$CLIENTS"); do
    pid=${pids[$((i - 1))]}
    ended_within "$pid" 20000 "$t0" || fail "echo client $i has not finished after $ELAPSED_MS ms: one worker thread is stuck?"
    reap "$pid"
    [ "$REAPED_STATUS" -eq 0 ] || fail "echo client $i exited with status $REAPED_STATUS: $(cat "$TMP/err.$i")"
    cmp -s "$TMP/in.$i" "$TMP/out.$i" ||
        fail "echo client $i sent $(stat -c %s "$TMP/in.$i") bytes and got $(stat -c %s "$TMP/out.$i") different bytes back"
done
total=$(cat "$TMP"/in.* | wc -c)
say "$CLIENTS echo clients, $total bytes in all, done in $(($(now_ms) - t0)) ms with one worker thread"
ok "each echo client got exactly its own bytes back"

# everything parked still ends promptly on kill -9
t0=$(now_ms)
kill -KILL "$reader" "$writer" "${connectors[@]}"
for pid in "$reader" "$writer" "${connectors[@]}"; do
    ended_within "$pid" 3000 "$t0" || fail "blocked process $pid survived kill -9 for $ELAPSED_MS ms"
done
say "kill -9 of the 4 blocked processes: all gone after $(($(now_ms) - t0)) ms"
kill "$ECHO_PID"

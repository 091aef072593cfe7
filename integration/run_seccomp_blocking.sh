#!/usr/bin/env bash
# run_seccomp_blocking.sh: blocking calls of a statically linked program under
# `udsfs run --front seccomp` (src/supervisor/) park in the daemon, as the library's
# do, and end by a signal as on Linux (integration/c/blocking.c, run on kernel sockets
# and through the supervisor).
# 1. Threads blocked in accept (50), in connect to a full backlog, and in a send of a
#    datagram larger than the free receive space make no wake-ups while they wait: the
#    supervisor's threads sleep in their FUSE request (not in poll), the daemon gets no
#    request and its threads stay asleep; SIGSTOP stops all of the threads in accept
#    and SIGCONT lets them wait again; once unblocked, every call completes.
# 2. recvmmsg's timeout as the kernel keeps it: checked after each datagram, what is
#    left written back, bad values refused; an error after datagrams (a bad buffer, a
#    msg_len that cannot be written) is left pending for SO_ERROR and the next call.
# 3. Signals: one kill(pid) ends one of four blocked receives (the thread the kernel
#    picks, src/supervisor/deliver.rs), the other three get their messages later;
#    SA_RESTART restarts; for recv, accept, connect and a large datagram's send
#    SO_RCVTIMEO/SO_SNDTIMEO turn a signal into EINTR and run out with EAGAIN; the same
#    results as the kernel.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
gcc -static -O2 -pthread -o "$TMP/blocking" "$ROOT/integration/c/blocking.c" || fail "gcc -static blocking.c failed"
! readelf -l "$TMP/blocking" | grep -q 'INTERP' || fail "blocking is not statically linked"

mkdir "$TMP/k"

# The voluntary context switches (the times a thread slept and woke; a preemption on
# a loaded machine is not a wake-up) of process $1's threads named $2 (all threads: empty).
switches() {
    local t n=0 v
    for t in /proc/"$1"/task/*; do
        [ -z "$2" ] || [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] || continue
        v=$(awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' "$t/status" 2>/dev/null) || continue
        n=$((n + v))
    done
    echo "$n"
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# 1. Waits that make no wake-ups.
wait_case() { # KIND THREADS
    local kind=$1 n=$2 i
    local out=$TMP/$kind.udsfs fifo=$TMP/$kind.fifo
    # On the kernel first: the reference output.
    (sleep 0.5; echo go) | "$TMP/blocking" wait "$kind" "$TMP/k" "$n" >"$TMP/$kind.kernel" 2>&1 ||
        fail "blocking wait $kind on kernel sockets: $(cat "$TMP/$kind.kernel")"
    mkfifo "$fifo"
    # Held open read-write: opening the program's end does not wait for a writer.
    exec {hold}<>"$fifo"
    # (A background job's stdin is /dev/null: the FIFO is opened inside.)
    start_bg RUN bash -c 'exec "$@" <"$0"' "$fifo" "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/blocking" wait "$kind" "$MNT" "$n" >"$out" 2>&1
    for i in $(seq 1 200); do grep -q '^blocked' "$out" && break; sleep 0.05; done
    grep -q '^blocked' "$out" || fail "$kind: the program did not block: $(cat "$out")"
    PROPER=$(run_proper "$RUN")
    for i in $(seq 1 200); do [ "$(parked_threads "$PROPER")" -eq "$n" ] && break; sleep 0.05; done
    expect_eq "$kind: supervisor threads parked in the daemon" "$(parked_threads "$PROPER")" "$n"
    local d0 s0 c0 d1 s1 c1
    d0=$(switches "$DAEMON_PID" "") s0=$(switches "$PROPER" udsfs-supervise) c0=$(cpu_ticks "$PROPER")
    sleep 1
    d1=$(switches "$DAEMON_PID" "") s1=$(switches "$PROPER" udsfs-supervise) c1=$(cpu_ticks "$PROPER")
    say "$kind, $n blocked for 1 s: daemon $((d1 - d0)) context switches, the waiting supervisor threads $((s1 - s0)), udsfs run $((c1 - c0)) CPU ticks"
    # A wait in 100 ms polls makes 10 a second per waiting call on each side.
    [ $((s1 - s0)) -le 2 ] || fail "$kind: the $n waiting supervisor threads woke $((s1 - s0)) times in 1 s"
    [ $((d1 - d0)) -le 5 ] || fail "$kind: the daemon woke $((d1 - d0)) times in 1 s while $n calls waited"
    if [ "$kind" = accept ]; then
        # A stop stops every thread, the parked ones too (their calls end and are made
        # again after SIGCONT), as threads blocked in accept stop on Linux.
        local child states
        child=$(cat /proc/"$PROPER"/task/*/children | tr ' ' '\n' | grep . | head -1)
        kill -STOP "$child"
        for i in $(seq 1 100); do
            states=$(cat /proc/"$child"/task/*/stat | sed 's/.*) \(.\).*/\1/' | sort | uniq -c | tr -s ' \n' ' ')
            [ "$states" = " $((n + 1)) T " ] && break
            sleep 0.05
        done
        expect_eq "$kind: states of the program's $((n + 1)) threads after SIGSTOP" "$states" " $((n + 1)) T "
        kill -CONT "$child"
        for i in $(seq 1 200); do [ "$(parked_threads "$PROPER")" -eq "$n" ] && break; sleep 0.05; done
        expect_eq "$kind: supervisor threads parked again after SIGCONT" "$(parked_threads "$PROPER")" "$n"
    fi
    echo go >&"$hold"
    exec {hold}>&-
    ended_within "$RUN" 10000 || fail "$kind: the program did not end: $(cat "$out")"
    reap "$RUN"
    expect_eq "$kind: exit status" "$REAPED_STATUS" 0
    expect_eq "$kind: sockets through the supervisor that were udsfs" "$(grep -c '^where: udsfs$' "$out")" 1
    if ! diff <(grep -v '^where: ' "$TMP/$kind.kernel") <(grep -v '^where: ' "$out") >"$TMP/$kind.diff"; then
        cat "$TMP/$kind.diff" >&2
        fail "$kind: the supervisor's blocking calls ended differently from the kernel's (< kernel, > udsfs)"
    fi
    ok "$kind: $n calls parked without a wake-up for 1 s, then all completed: $(tail -1 "$out")"
}
wait_case accept 50
wait_case connect 4
wait_case dgram 1

# 2 and 3: the same results as the kernel.
compare() { # NAME ARGS...: kernel sockets in $TMP/k, udsfs in $MNT
    local name=$1
    shift
    # (A call that never ends fails the case, not the whole run.)
    timeout 60 "$TMP/blocking" "$@" >"$TMP/$name.kernel" 2>&1 || fail "blocking $* on kernel sockets: $(cat "$TMP/$name.kernel")"
    local args=("$@")
    [ "${args[-1]}" != "$TMP/k" ] || args[-1]=$MNT
    timeout 60 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/blocking" "${args[@]}" >"$TMP/$name.udsfs" 2>&1 || fail "blocking $* through the supervisor: $(cat "$TMP/$name.udsfs")"
    [ "$(grep -c '^where: kernel$' "$TMP/$name.udsfs")" -eq 0 ] || fail "$name: a kernel socket through the supervisor: $(cat "$TMP/$name.udsfs")"
    grep -q '^where: udsfs$' "$TMP/$name.udsfs" || fail "$name: no udsfs socket through the supervisor"
    if ! diff <(grep -v '^where: ' "$TMP/$name.kernel") <(grep -v '^where: ' "$TMP/$name.udsfs") >"$TMP/$name.diff"; then
        cat "$TMP/$name.diff" >&2
        fail "$name: the supervisor answered differently from the kernel (< kernel, > udsfs)"
    fi
    ok "$name: the same $(grep -vc '^where: ' "$TMP/$name.udsfs") results as the kernel"
}
compare recvmmsg mmsg
compare signals signal "$TMP/k"

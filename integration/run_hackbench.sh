#!/usr/bin/env bash
# run_hackbench.sh: rt-tests' hackbench, unmodified, in socketpair mode (its default),
# through `udsfs run --mount $MNT` (UDSFS_RUN_VIA=kernel: on kernel sockets): processes
# (fork) and -T threads, small -g/-l. Each run must exit 0 with hackbench's three lines,
# its socketpairs must have been udsfs sockets (40 per group, seen in $U/unix while it
# ran), and no socket may be left afterwards. With lanes on (the default), a longer -T run
# must have every socketpair end on a direct lane at once: twenty threads write to each
# receiver's end, and a thread that found another on the end (or claiming it) went through
# the daemon, which took the lane down for good (40 of 44 ends had none).
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd hackbench rt-tests

# watch_most FILE COUNT...: until killed, keep in FILE the largest number the command
# COUNT printed at one look.
watch_most() {
    local file=$1 peak=0 n
    shift
    while :; do
        n=$("$@")
        if [ "$n" -gt "$peak" ]; then
            peak=$n
            printf '%s\n' "$peak" >"$file"
        fi
        sleep 0.002
    done
}

# sockets_now: the mount's socket count.
sockets_now() { echo $(($(wc -l <"$U/unix") - 1)); }

# direct_now: how many of the mount's sockets say lane=direct.
direct_now() { cat "$U"/sock/*/status 2>/dev/null | grep -c '^lane=direct' || true; }

# one_run MODE_FLAG GROUPS LOOPS DATASIZE: hackbench [-T] -g GROUPS -l LOOPS -s DATASIZE.
one_run() {
    local flag=$1 g=$2 l=$3 s=$4 mode=process watcher out rc=0 peak want
    [ "$flag" == -T ] && mode=threaded
    want=$((40 * g)) # 20 receivers per group, one socketpair each
    echo 0 >"$TMP/peak"
    watch_most "$TMP/peak" sockets_now &
    watcher=$!
    run_cmd -- hackbench ${flag:+"$flag"} -g "$g" -l "$l" -s "$s"
    out=$(timeout 60 "${RUN_CMD[@]}" 2>&1) || rc=$?
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null || true
    [ "$rc" -eq 0 ] || fail "hackbench ${flag} -g $g -l $l -s $s exited with status $rc: $out"
    grep -qx "Running in $mode mode with $g groups using 40 file descriptors each (== $((g * 40)) tasks)" <<<"$out" &&
        grep -qx "Each sender will pass $l messages of $s bytes" <<<"$out" &&
        grep -qE '^Time: [0-9]+\.[0-9]+$' <<<"$out" ||
        fail "hackbench ${flag} -g $g -l $l -s $s printed something else: $out"
    ok "hackbench ${flag:+$flag }-g $g -l $l -s $s ($mode mode) exit 0, $(grep ^Time: <<<"$out")"
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        peak=$(cat "$TMP/peak")
        [ "$peak" -ge "$want" ] ||
            fail "at most $peak udsfs sockets were seen while hackbench ran, want its $want socketpair ends"
        ok "its $want socketpair ends were udsfs sockets (peak $peak in $U/unix)"
    fi
    wait_socket_count 0 5000
    ok "no socket left in $U/unix"
}

# lanes_run LOOPS: hackbench -T -g 1 -l LOOPS; all 40 socketpair ends direct at once.
lanes_run() {
    local l=$1 watcher out rc=0 peak
    echo 0 >"$TMP/lanes"
    watch_most "$TMP/lanes" direct_now &
    watcher=$!
    run_cmd -- hackbench -T -g 1 -l "$l"
    out=$(timeout 120 "${RUN_CMD[@]}" 2>&1) || rc=$?
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null || true
    [ "$rc" -eq 0 ] || fail "hackbench -T -g 1 -l $l exited with status $rc: $out"
    peak=$(cat "$TMP/lanes")
    [ "$peak" -ge 40 ] ||
        fail "hackbench -T -g 1 -l $l: at most $peak of its 40 socketpair ends had a direct lane at once (threads sharing an end went through the daemon)"
    ok "hackbench -T -g 1 -l $l: $peak ends on direct lanes at once (its 40 socketpair ends), $(grep ^Time: <<<"$out")"
    wait_socket_count 0 5000
}

one_run "" 2 50 100
one_run -T 2 50 100
one_run "" 1 20 4096
one_run -T 1 20 4096
if [ "$UDSFS_RUN_VIA" == udsfs ] && [ "${UDSFS_LANES:-}" != off ]; then
    lanes_run 1000
fi

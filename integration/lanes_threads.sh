#!/usr/bin/env bash
# lanes_threads.sh: several threads of one process on one laned end (preload/src/
# lane_turn.rs: a thread's turn at an end's reader or writer; the ring's sleepers counted,
# proto/src/lane/ring.rs `Sleeper::pass_on`; lane.rs `find` waits for another thread's
# claim). integration/lanes_threads.c (built here with gcc) runs each case on kernel
# sockets, then through `udsfs run` on a lanes mount, several times; each run's summary
# line must be the kernel's, and its "info:" line must say both ends were lane=direct
# (their status files, $U/sock/N/status, read by the program through /proc/self/fd) at
# the point it names (a case that binds a listener binds it in the directory the third
# argument names: the mount through udsfs). Cases (see the program's head):
#  stream        16 writers x 2000 messages of 64 or 3000 bytes, one reader: each whole,
#                once, in its writer's order.
#  seqpacket     8 writers, 8 readers of a seqpacket pair: each record once, whole.
#  nonblock      16 MSG_DONTWAIT writers (poll on EAGAIN), 4 O_NONBLOCK readers in epoll
#                (2 on one level-triggered set, 2 EPOLLET sets).
#  sigrestart    SIGUSR1 every 200 us to 4 writers and 3 readers, SA_RESTART: nothing
#  signorestart  lost or doubled; with SA_RESTART no EINTR reaches the program.
#  close, dup2   a thread blocked reading and one writing 1 MiB when the main thread
#  closepeer     closes the end (or dup2s /dev/null onto it): both stay blocked; the
#                peer's bytes and reads end them; or the peer's close.
#  fork          a fork under running writer and reader threads; the child writes and
#                reads through the daemon: every message once.
#  duplex        one thread blocked writing 1 MiB on an end, another reading it byte by
#                byte while the peer sends 50: each byte at once, then the peer reads
#                the writer's MiB.
#  sleeper_epoll, sleeper_epollet, sleeper_poll
#                a connect/accept pair: thread L asleep in epoll_wait (level, EPOLLET) or
#                poll() on the accepted end, registered before any lane, while thread W's
#                greeting (its first call: its library asks and claims) makes the lane;
#                then 20 requests, each a wake-up of L that hands it to W: every wake-up
#                readable (none spurious), every reply right, and the end keeps its lane
#                (src/engine/lane.rs `lane_polled`: L's poll at the grant's wake-up is
#                answered "ready", once; it took the lane down before: slapd's listener).
# A case listed in integration/lanes_threads_exceptions.txt is a known defect: it must
# fail as listed, and the script fails once it passes (then unlist it).
source "$(dirname "$0")/lib.sh"

need_cmd gcc gcc
need_preload
EXCEPTIONS=$LIB_DIR/lanes_threads_exceptions.txt
failed=()
PROG=$TMP/lanes_threads
gcc -O2 -Wall -Werror -pthread -o "$PROG" "$LIB_DIR/lanes_threads.c" || fail "gcc of lanes_threads.c"

# REPS: runs through udsfs of each case (the kernel's: one); the close cases take ~1.2 s
# a run, duplex ~3 s when a wake-up is lost, nonblock 0.2-0.7 s (the kernel: 0.07), the
# others well under one.
declare -A REPS=([stream]=20 [seqpacket]=20 [nonblock]=10 [sigrestart]=20 [signorestart]=20
    [close]=2 [dup2]=2 [closepeer]=2 [closewrite]=2 [fork]=12 [duplex]=2
    [sleeper_epoll]=10 [sleeper_epollet]=10 [sleeper_poll]=10)

# CASES: the cases to run (by hand: CASES="sleeper_epoll sleeper_poll"); all by default.
for c in ${CASES:-stream seqpacket nonblock sigrestart signorestart close closewrite dup2 closepeer fork duplex \
    sleeper_epoll sleeper_epollet sleeper_poll}; do
    k=$(timeout 60 "$PROG" "$c" 1 "$TMP" 2>&1) || fail "$c on kernel sockets: $k"
    want=$(grep -v '^info:' <<<"$k")
    out=$TMP/$c.udsfs
    rc=0 t0=$(now_ms)
    timeout 120 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
        "$PROG" "$c" "${REPS[$c]}" "$MNT" >"$out" 2>&1 || rc=$?
    # each run's summary: the lines before its info line
    runs=0 same=0 laned=0 firstbad=
    while IFS= read -r -d '' run; do
        runs=$((runs + 1))
        got=$(grep -v '^info:' <<<"$run")
        info=$(grep '^info:' <<<"$run")
        [[ $info == *"lanes direct direct"* ]] && laned=$((laned + 1))
        if [ "$got" = "$want" ]; then
            same=$((same + 1))
        elif [ -z "$firstbad" ]; then
            firstbad="run $runs: $got ($info)"
        fi
    done < <(awk '{ printf "%s\n", $0 } /^info:/ { printf "%c", 0 }' "$out")
    say "$c: kernel: $(tr '\n' ' ' <<<"$k")"
    say "$c: udsfs: $runs of ${REPS[$c]} runs ended (exit $rc) in $(($(now_ms) - t0)) ms, $same as the kernel's, $laned with both ends lane=direct"
    [ "$laned" -eq "$runs" ] || say "$c: not every run had both ends laned: $(grep '^info:' "$out" | sort | uniq -c | tr '\n' ' ')"
    good=
    [ "$rc" -eq 0 ] && [ "$runs" -eq "${REPS[$c]}" ] && [ "$same" -eq "$runs" ] && [ "$laned" -eq "$runs" ] && good=1
    verdict "$c" "$good" "${REPS[$c]} runs through udsfs: $same as the kernel's, $laned laned, exit $rc${firstbad:+; first different: $firstbad}$( [ "$rc" -eq 0 ] || echo "; its output's end: $(tail -3 "$out" | tr '\n' ' ')")"
done

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"

#!/usr/bin/env bash
# The supervisor's pool under a flood of waiting calls: a static program's child makes
# FLOOD_THREADS (default 10000) threads that each block in recv() on one socketpair,
# through `udsfs run --front seccomp`. The supervisor must not start a thread for each
# (its threads stay within its pool's bound: 160 workers and a few of its own), and
# another process of the same program (the same seccomp listener) must still get its
# calls served meanwhile: a socketpair, a send and a MSG_WAITALL recv, within 120 s
# (the flood's own notifications are in the queue before them). Then one byte for each
# receiver is sent and every recv returns: the calls held past the bound wake on their
# data.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

flood_build

N=${FLOOD_THREADS:-10000}
BOUND=200
out=$FLOOD_OUT
flood_start "$N"
PROPER=$(run_proper "$RUN")
threads() { ls /proc/"$PROPER"/task 2>/dev/null | wc -l; }
peak=0
for i in $(seq 1 3000); do
    t=$(threads)
    [ "$t" -gt "$peak" ] && peak=$t
    grep -q '^probed' "$out" && break
    proc_alive "$RUN" || break
    sleep 0.05
done
say "$N threads blocked in recv: the supervisor's process had at most $peak threads; $(grep '^probe:' "$out" || true)"
grep -q '^probed' "$out" || fail "the second process's calls were not served within 150 s while $N recvs waited: $(tail -5 "$out")"
probe=$(sed -n 's/^probe: //p' "$out")
awk -v p="$probe" 'BEGIN { exit !(p < 120) }' || fail "the second process's round trip took $probe s while $N recvs waited"
ok "another process's socketpair, send and MSG_WAITALL recv took $probe s while $N recvs waited"
[ "$peak" -le "$BOUND" ] || fail "the supervisor's process grew to $peak threads for $N waiting recvs (bound $BOUND)"
ok "the supervisor's process stayed within $BOUND threads ($peak) for $N waiting recvs"
flood_release 120000

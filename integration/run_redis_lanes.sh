#!/usr/bin/env bash
# run_redis_lanes.sh: run_redis.sh on a `--lanes` mount (the same answers as on kernel
# sockets: every check of run_redis.sh), then the lanes at work: redis-server and
# redis-benchmark (50 clients, GET and SET, every reply checked by the tool) through `udsfs
# run` on the mount, whose connections' status files must say lane=direct while the
# benchmark runs (sampled): redis waits in epoll and registers each connection right after
# its accept, before the connection's lane can be up (issue 30, docs/LANE.md "Programs
# that poll"). Before the library said its polls are its own (`Op::LaneClaim` arg 6) no
# connection of redis had a lane.
UDSFS_MOUNT_ARGS=(--lanes)
# shellcheck source=integration/run_redis.sh
source "$(dirname "$0")/run_redis.sh"

UDSFS_RUN_VIA=udsfs
d=$TMP/redis-lanes
mkdir -p "$MNT/lanes" "$d"
sock=$MNT/lanes/redis.sock
run_cmd -- redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 \
    --save '' --appendonly no --dir "$d" --daemonize no --logfile "$d/redis.log"
start_bg LREDIS "${RUN_CMD[@]}" >"$d/redis.out" 2>&1
wait_listening "$sock"
run_cmd -- timeout 120 redis-benchmark -s "$sock" -c 50 -n 50000 -t set,get -q --csv
start_bg BENCH "${RUN_CMD[@]}" >"$d/bench.out" 2>&1
laned_most "$BENCH"
most=$LANED_MOST
wait "$BENCH" || fail "redis-benchmark through udsfs run on a --lanes mount failed: $(tail -3 "$d/bench.out")"
awk -F, 'NR > 1 { gsub(/"/, ""); print "lanes benchmark", $1, $2 }' "$d/bench.out"
[ "$(awk -F, 'NR > 1 { gsub(/"/, ""); if ($2 + 0 > 0) n++ } END { print n + 0 }' "$d/bench.out")" = 2 ] ||
    fail "redis-benchmark on the --lanes mount did not run both tests: $(cat "$d/bench.out")"
# Each laned connection's two ends are two sockets: 50 connections, up to 100 lines.
# redis-benchmark counts replies, whatever they say: the server's own count
# of the SETs and GETs it ran must be the benchmark's (50000 each).
stats=$(via -- timeout 30 redis-cli -s "$sock" INFO commandstats)
for c in set get; do
    calls=$(printf '%s\n' "$stats" | sed -n "s/^cmdstat_$c:calls=\([0-9]*\),.*/\1/p")
    [ "${calls:-0}" -eq 50000 ] || fail "redis-server ran ${calls:-no} ${c^^} calls for redis-benchmark's 50000 on the --lanes mount"
    ok "redis-server ran the benchmark's 50000 ${c^^} calls"
done
[ "$most" -ge 50 ] || fail "at most $most sockets said lane=direct during the benchmark (50 connections: want at least 50 of their 100 ends)"
ok "redis-benchmark -c 50 through udsfs run on a --lanes mount: $most sockets laned at once"
via -- timeout 30 redis-cli -s "$sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || true

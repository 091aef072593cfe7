#!/usr/bin/env bash
# run_postgres_lanes.sh: run_postgres.sh on a `--lanes` mount (every check of it: psql
# as postgres, a table written and read back, peer authentication refusing root, a clean
# stop), and before the stop pgbench (-i, then -S with 2 clients and 2 threads for 5 s)
# through `udsfs run`, whose connections' status files must say lane=direct while it runs
# (sampled) and which must end without a failed transaction: libpq waits in poll, the
# backend in epoll, each polled through the daemon before its connection's lane can be up
# (issue 30, docs/LANE.md "Programs that poll"). Before the library said its polls are its
# own (`Op::LaneClaim` arg 6) no pgbench connection had a lane.
RUN_POSTGRES_LANES=1
RUN_POSTGRES_MORE=pgbench_on_lanes

pgbench_on_lanes() {
    [ "$UDSFS_RUN_VIA" == udsfs ] || return 0
    need_cmd pgbench postgresql
    local pgb=(pgbench -h "$SOCKDIR" -p "$PORT" -U postgres)
    via --route "$SOCKDIR" -- "${AS_POSTGRES[@]}" "${pgb[@]}" -i -s 1 -q postgres >"$TMP/pgbench-init.out" 2>&1 ||
        fail "pgbench -i through udsfs run failed: $(tail -3 "$TMP/pgbench-init.out")"
    pgbench_laned 1 || {
        # Neither connection laned: about one run in ten at load ~10, the backend's
        # epoll_ctl ADD racing its own ask (docs/LANE.md, "Programs that poll": found, not
        # fixed). pgbench runs once more with new connections, which must get lanes.
        say "pgbench -S on lanes, first run: $PGBENCH_WHY; once more with new connections"
        pgbench_laned 2 || fail "pgbench -S on lanes, twice: $PGBENCH_WHY"
    }
}

# pgbench_laned N: pgbench -S (run N) through udsfs run; fails on an error, false (with
# PGBENCH_WHY) when no connection's two ends said lane=direct at once while it ran.
pgbench_laned() {
    local out=$TMP/pgbench.$1.out
    run_cmd --route "$SOCKDIR" -- timeout 60 "${AS_POSTGRES[@]}" "${pgb[@]}" -S -c 2 -j 2 -T 5 postgres
    start_bg PGBENCH "${RUN_CMD[@]}" >"$out" 2>&1
    # Until pgbench ends or both ends of a connection said lane=direct (a loaded
    # machine may take pgbench past the sampler's 10 s before its connections are up).
    laned_most "$PGBENCH" 2
    local most=$LANED_MOST seen=$LANED_SEEN
    wait "$PGBENCH" || fail "pgbench -S through udsfs run failed: $(tail -5 "$out")"
    grep -Eq '^number of failed transactions: 0( |$)' "$out" ||
        ! grep -q '^number of failed transactions' "$out" ||
        fail "pgbench had failed transactions: $(cat "$out")"
    local tps
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out" | tail -n1)
    awk -v t="${tps:-0}" 'BEGIN { exit !(t > 0) }' || fail "pgbench -S reported no transactions: $(cat "$out")"
    # 2 connections, 4 ends; at least one connection's two (in about one run of five one of
    # the two stays without a lane: docs/LANE.md, "Programs that poll").
    PGBENCH_WHY="at most $most sockets said lane=direct at once while it ran (want both ends of a connection at least; $seen)"
    [ "$most" -ge 2 ] || return 1
    ok "pgbench -S -c 2 -j 2 through udsfs run on a --lanes mount: $tps tps, $most sockets laned at once ($seen), no failed transaction"
}

# shellcheck source=integration/run_postgres.sh
source "$(dirname "$0")/run_postgres.sh"

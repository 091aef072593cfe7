#!/usr/bin/env bash
# run_postgres.sh: a PostgreSQL server (Debian's postgresql package) with its own data
# directory (initdb as user postgres in a temporary directory), listening only on a unix
# socket (listen_addresses=''), started and used through
# `udsfs run --mount $MNT --route $SOCKDIR` (UDSFS_RUN_VIA=kernel: on kernel sockets).
#
# $SOCKDIR is a real directory: PostgreSQL keeps its regular lock file
# .s.PGSQL.PORT.lock there (udsfs holds no regular files), while the routed socket name
# .s.PGSQL.PORT lives in the mount at the same path below it. psql logs in through peer
# authentication, which reads the client's uid with SO_PEERCRED: user postgres gets in
# and runs queries, root asking to be postgres is refused.
# the server and psql run as user postgres. Lanes off here (issue 30: the real programs
# pass with lanes off too); run_postgres_lanes.sh and run_postgres_live_capture.sh run
# every check again with lanes on (the mount's default)
UDSFS_MOUNT_ARGS=(--allow-other --no-lanes)
[ -z "${RUN_POSTGRES_LANES:-}" ] || UDSFS_MOUNT_ARGS=(--allow-other --lanes)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

source "$LIB_DIR/lib_postgres.bash"

out=$(psql_as_postgres -c "select 6 * 7" 2>&1) || fail "psql as postgres failed: $out"
expect_eq "select 6 * 7" "$out" 42

out=$(psql_as_postgres -c "select current_user, string_agg(distinct auth_method, ',')
    from pg_hba_file_rules where type = 'local'" 2>&1) || fail "psql as postgres failed: $out"
expect_eq "the user psql got and the method of every rule for local connections" "$out" "postgres|peer"

out=$(psql_as_postgres 2>&1 <<'EOF'
create table t (n int, s text);
insert into t select g, repeat('x', g) from generate_series(1, 2000) g;
select count(*), sum(length(s)) from t;
EOF
) || fail "psql as postgres failed: $out"
expect_eq "a table of 2000 rows written and read back" "$(tail -n1 <<<"$out")" "2000|2001000"

# Peer authentication compares the client's uid (SO_PEERCRED) with the user asked for:
# root asking to be postgres is refused.
out=$(via --route "$SOCKDIR" -- psql -X -h "$SOCKDIR" -p "$PORT" -U postgres -d postgres -Atc "select 1" 2>&1) &&
    fail "psql as root logged in as postgres: peer authentication did not see uid 0 ($out)"
case $out in
*'Peer authentication failed for user "postgres"'*) ok "root asking for user postgres is refused by peer authentication" ;;
*) fail "psql as root failed, but not with the peer authentication error: $out" ;;
esac
grep -q 'provided user name (postgres) and authenticated user name (root) do not match' "$TMP/server.log" ||
    fail "the server log does not say it saw uid root: $(tail -n 20 "$TMP/server.log")"
ok "the server saw the client's uid as root"

${RUN_POSTGRES_MORE:-true} # run_postgres_lanes.sh: pgbench
stop_server
ok "postgres stopped (status $REAPED_STATUS)"
[ "$REAPED_STATUS" -eq 0 ] || fail "postgres exited with status $REAPED_STATUS: $(tail -n 20 "$TMP/server.log")"
if [ "$UDSFS_RUN_VIA" == udsfs ]; then
    wait_socket_count 0 5000
    ok "no socket left in $U/unix"
fi

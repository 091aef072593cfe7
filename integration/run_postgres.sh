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
UDSFS_MOUNT_ARGS=(--allow-other) # the server and psql run as user postgres
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

PGBIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/initdb" ] ||
    fail "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; apt-get install postgresql; .ci/run installs it)"
need_cmd psql postgresql-client
id postgres >/dev/null 2>&1 || fail "there is no user postgres (the postgresql package makes it)"
need_cmd setpriv util-linux

# AS_POSTGRES CMD...: CMD as user postgres, environment (LD_PRELOAD included) unchanged.
AS_POSTGRES=(setpriv --reuid=postgres --regid=postgres --init-groups --)

PORT=5432
chmod 755 "$TMP" # user postgres must reach its directories
PGDATA=$TMP/pgdata
SOCKDIR=$TMP/pgsock
install -d -o postgres -g postgres -m 700 "$PGDATA"
install -d -o postgres -g postgres -m 755 "$SOCKDIR"
if [ "$UDSFS_RUN_VIA" == udsfs ]; then
    # the routed name's directory, at the same path below the mount
    install -d -o postgres -g postgres -m 755 "$MNT$SOCKDIR"
fi

"${AS_POSTGRES[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth-local=peer --auth-host=reject \
    --no-sync >"$TMP/initdb.out" 2>&1 || fail "initdb failed: $(cat "$TMP/initdb.out")"
ok "initdb made a cluster in $PGDATA"

run_cmd --route "$SOCKDIR" -- "${AS_POSTGRES[@]}" "$PGBIN/postgres" -D "$PGDATA" -p "$PORT" -c listen_addresses= \
    -c unix_socket_directories="$SOCKDIR" -c fsync=off -c logging_collector=off
start_bg SERVER "${RUN_CMD[@]}" >"$TMP/server.log" 2>&1
# stop_server: SIGINT to the postmaster (its pid is the first line of postmaster.pid,
# as pg_ctl finds it; $SERVER may be `udsfs run`) is PostgreSQL's fast shutdown.
stop_server() {
    local pm
    pm=$(head -n1 "$PGDATA/postmaster.pid") || fail "no $PGDATA/postmaster.pid"
    kill -INT "$pm" || fail "cannot signal the postmaster $pm"
    ended_within "$SERVER" 30000 || fail "postgres did not stop within 30 s after SIGINT: $(tail -n 20 "$TMP/server.log")"
    reap "$SERVER"
}
start=$(now_ms)
until grep -q 'database system is ready to accept connections' "$TMP/server.log"; do
    proc_alive "$SERVER" || fail "postgres exited while starting: $(cat "$TMP/server.log")"
    [ $(($(now_ms) - start)) -le 60000 ] || fail "postgres not ready after 60 s: $(cat "$TMP/server.log")"
    sleep 0.1
done
ok "postgres is ready"
expect_socket_home "$SOCKDIR/.s.PGSQL.$PORT"
[ -f "$SOCKDIR/.s.PGSQL.$PORT.lock" ] || fail "no lock file $SOCKDIR/.s.PGSQL.$PORT.lock: $(ls -la "$SOCKDIR")"
ok "the lock file .s.PGSQL.$PORT.lock is a regular file in $SOCKDIR"

# psql ARGS...: psql as user postgres through the chosen sockets.
psql_as_postgres() {
    via --route "$SOCKDIR" -- "${AS_POSTGRES[@]}" psql -X -v ON_ERROR_STOP=1 -h "$SOCKDIR" -p "$PORT" -U postgres -d postgres -At "$@"
}

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

stop_server
ok "postgres stopped (status $REAPED_STATUS)"
[ "$REAPED_STATUS" -eq 0 ] || fail "postgres exited with status $REAPED_STATUS: $(tail -n 20 "$TMP/server.log")"
if [ "$UDSFS_RUN_VIA" == udsfs ]; then
    wait_socket_count 0 5000
    ok "no socket left in $U/unix"
fi

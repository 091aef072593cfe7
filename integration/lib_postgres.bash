# lib_postgres.bash: a PostgreSQL server of its own (initdb as user postgres in $TMP),
# listening only on a unix socket in $SOCKDIR, started through `udsfs run --route
# $SOCKDIR` (or on kernel sockets, UDSFS_RUN_VIA=kernel) and ready; stop_server stops
# it, psql_as_postgres runs psql as user postgres. Sourced after lib.sh and lib_run.bash
# by run_postgres.sh and fault_postgres.sh.

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

#!/usr/bin/env bash
# fault_postgres.sh: a real program under a fault. PostgreSQL runs through
# `udsfs run --route $SOCKDIR` as in run_postgres.sh; a psql session runs a query,
# then (from psql itself, `\!`, so as user postgres) adds a `reset_peer` rule on the
# server's socket name, and runs another: psql must report the lost connection and
# exit, within seconds, instead of hanging; the server's backend sees the reset too,
# and a new session after the rule is deleted works.
UDSFS_MOUNT_ARGS=(--allow-other) # the server and psql run as user postgres
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "fault_postgres.sh injects udsfs faults: UDSFS_RUN_VIA must be udsfs"

source "$LIB_DIR/lib_postgres.bash"


NAME=$SOCKDIR/.s.PGSQL.$PORT
# psql, bounded: a psql that hangs is killed after 60 s (status 124).
run_cmd --route "$SOCKDIR" -- timeout 60 "${AS_POSTGRES[@]}" psql -X -v ON_ERROR_STOP=1 -h "$SOCKDIR" \
    -p "$PORT" -U postgres -d postgres -At
out=$("${RUN_CMD[@]}" 2>&1 <<EOS
select 6 * 7;
\! printf 'name $NAME up reset_peer\n' >$U/faults
select 'after the reset';
EOS
) && fail "psql went on after the reset: $out"
status=$?
printf '%s\n' "$out"
[ "$status" -ne 124 ] || fail "psql hung after the reset (killed by timeout): $out"
grep -qx 42 <<<"$out" || fail "the query before the rule did not run: $out"
grep -q 'after the reset' <<<"$out" && fail "a query ran after the reset: $out"
grep -Eq 'server closed the connection unexpectedly|connection to server was lost|Connection reset by peer' <<<"$out" ||
    fail "psql did not report the closed connection: $out"
ok "psql reports the closed connection (status $status) instead of hanging"
grep -q "fault rule [0-9:]* (name .*s.PGSQL.$PORT up reset_peer" "$LOG" || fail "the daemon did not log the injection"
rule=$(cut -f1 "$U/faults")
expect_eq "the rule's counters" "$(cut -f3 "$U/faults")" "matched=1 injected=1"
printf 'del %s\n' "$rule" >"$U/faults"
out=$(psql_as_postgres -c "select 'again'" 2>&1) || fail "psql failed once the rule was gone: $out"
expect_eq "a new session once the rule is gone" "$out" again

stop_server
ok "postgres stopped (status $REAPED_STATUS)"

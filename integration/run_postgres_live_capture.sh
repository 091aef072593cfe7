#!/usr/bin/env bash
# run_postgres_live_capture.sh: run_postgres.sh on a `--lanes` mount with, before the stop,
# issue 30's live attach under pgbench: `pgbench -S -c 2 -j 2 -T 6` through `udsfs run`
# (each transaction one SELECT, simple protocol, logged with its start and end: -l),
# whose connections say lane=direct (sampled) before root opens a capture of the mount
# in its middle (`udsfs capture --format tcp --proto pgsql`). pgbench must end without a
# failed transaction; tshark's pgsql dissector must find no malformed message in the
# capture (a byte lost, doubled or reordered in a stream would misframe the messages
# after it); every query in it must be answered in it; and its queries must number at
# least the transactions pgbench began after the open and at most those it ended after
# it (a query in flight at the open, drained from a ring, may be in it too).
# (lanes_live_capture.sh holds a capture against every byte its own programs sent.)
RUN_POSTGRES_LANES=1
RUN_POSTGRES_MORE=pgbench_live_capture

pgbench_live_capture() {
    [ "$UDSFS_RUN_VIA" == udsfs ] || return 0
    need_cmd pgbench postgresql tshark tshark
    local pgb=(pgbench -h "$SOCKDIR" -p "$PORT" -U postgres)
    via --route "$SOCKDIR" -- "${AS_POSTGRES[@]}" "${pgb[@]}" -i -s 1 -q postgres >"$TMP/pgbench-init.out" 2>&1 ||
        fail "pgbench -i through udsfs run failed: $(tail -3 "$TMP/pgbench-init.out")"
    mkdir -m 0777 "$TMP/pgl"
    run_cmd --route "$SOCKDIR" -- timeout 60 "${AS_POSTGRES[@]}" "${pgb[@]}" -S -c 2 -j 2 -T 6 \
        -l --log-prefix="$TMP/pgl/tx" postgres
    start_bg PGBENCH "${RUN_CMD[@]}" >"$TMP/pgbench.out" 2>&1
    # Until a connection is laned (both ends), at most 4 s.
    local n=0 t0
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt 4000 ]; do
        n=$(cat "$U"/sock/*/status 2>/dev/null | grep -c '^lane=direct$' || true)
        [ "$n" -ge 2 ] && break
        sleep 0.05
    done
    [ "$n" -ge 2 ] || fail "no pgbench connection had a lane (lane=direct: $n sockets)"
    # The open falls between these two times (capture_start returns once the capture
    # wrote its header).
    local before after
    before=$(date +%s%6N)
    capture_start CAP "$TMP/pg.pcapng" --format tcp --proto pgsql --buffer 67108864
    after=$(date +%s%6N)
    wait "$PGBENCH" || fail "pgbench -S through udsfs run failed: $(tail -5 "$TMP/pgbench.out")"
    capture_stop "$CAP"
    grep -Eq '^number of failed transactions: 0( |$)' "$TMP/pgbench.out" ||
        ! grep -q '^number of failed transactions' "$TMP/pgbench.out" ||
        fail "pgbench had failed transactions: $(cat "$TMP/pgbench.out")"
    ok "pgbench -S on laned connections ($n sockets lane=direct) ended without an error with a capture opened in its middle"
    tshark -r "$TMP/pg.pcapng" -Y _ws.malformed -T fields -e frame.number >"$TMP/malformed.txt" 2>"$TMP/tshark.err" ||
        fail "tshark could not read the capture: $(cat "$TMP/tshark.err")"
    [ ! -s "$TMP/malformed.txt" ] || fail "tshark finds malformed messages in the capture (frames $(head -5 "$TMP/malformed.txt" | tr '\n' ' '))"
    tshark -r "$TMP/pg.pcapng" -Y pgsql -T fields -E occurrence=a -E aggregator=, -e pgsql.type >"$TMP/types.txt" 2>>"$TMP/tshark.err" ||
        fail "tshark could not read the capture: $(cat "$TMP/tshark.err")"
    python3 - "$TMP" "$before" "$after" <<'EOF' || fail "the capture's queries do not match pgbench's transactions from its open on"
import glob, sys
t, before, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
types = [x for line in open(f"{t}/types.txt") for x in line.strip().split(",") if x]
queries = types.count("Simple query")
ready = types.count("Ready for query")
began = ended = 0
for f in glob.glob(f"{t}/pgl/tx*"):
    for line in open(f):
        w = line.split()
        # client_id transaction_no latency_us script_no epoch us
        end = int(w[4]) * 1000000 + int(w[5])
        start = end - int(w[2])
        began += start >= after
        ended += end >= before
print(f"capture: {queries} queries, {ready} ready-for-query; pgbench: {began} transactions began after the open, {ended} ended after it began")
ok = began <= queries <= ended and ready >= queries
sys.exit(0 if ok else 1)
EOF
    ok "the capture holds pgbench's queries from its open on, each answered, none malformed (tshark)"
}

# shellcheck source=integration/run_postgres.sh
source "$(dirname "$0")/run_postgres.sh"

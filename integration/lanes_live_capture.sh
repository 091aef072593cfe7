#!/usr/bin/env bash
# lanes_live_capture.sh: issue 30 item 6's live-attach test, on a `--lanes` mount. A client
# and a server (integration/lanes_live_capture.py, each through `udsfs run`) talk over a
# connection with a lane (lane=direct, GUARD) at a steady rate, 3000 rounds (after the
# first 300, 1 to 8 requests at once, then their answers, so the rings hold several
# messages, some half read); each writes every byte it sent and received to files of its
# own. In the middle root opens a capture of the mount (`udsfs capture`); once it is open
# the client notes the offset of each stream at its next round. Then, read by tshark: the
# capture's payloads of each direction, in order, are exactly what the program sent from
# some offset at or before that round to the end (nothing lost, doubled or reordered from
# the open on; bytes in flight at the open, drained from the rings, may come before it);
# what each program received is what the other sent; both end without an error. The
# direct lane gives way to the capture (root's sees every connection) and the connection's
# next ask gets a lane through the daemon, whose mover runs the taps: lane=through to the
# end of the run (docs/LANE.md stage d; on a build without it, lane=none). The
# capture, opened after the connect, must still tell the client by the accept (its
# "out" direction), not by the first end it sees send. (run_postgres_live_capture.sh
# does the same under pgbench, whose bytes are not known to hold the capture against.)
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"
need_preload
need_cmd python3 python3 tshark tshark
PROG=$ROOT/integration/lanes_live_capture.py
ROUNDS=3000
mkdir -m 0777 "$TMP/flags"
RUN=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- timeout 120 python3 "$PROG")

# attempt N: the server and the client, until the client says its lane is up (true) or
# ends without one (false: an ask for a lane is refused while the other end waits in the
# daemon, sixteen times at most, docs/LANE.md "Asks refused under load").
attempt() {
    rm -f "$TMP/flags/laned" "$TMP/flags/opened"
    start_bg SRV "${RUN[@]}" server "$MNT/live$1.sock" "$TMP/server" >"$TMP/server.out" 2>&1
    for _ in $(seq 500); do grep -q 'server: listening' "$TMP/server.out" && break; sleep 0.02; done
    grep -q 'server: listening' "$TMP/server.out" || fail "the server did not listen: $(cat "$TMP/server.out")"
    start_bg CLI "${RUN[@]}" client "$MNT/live$1.sock" "$TMP/client" "$TMP/flags" "$ROUNDS" >"$TMP/client.out" 2>&1
    local t0
    t0=$(now_ms)
    until [ -e "$TMP/flags/laned" ]; do
        if ! proc_alive "$CLI"; then
            reap "$CLI"
            ended_within "$SRV" 20000 || fail "the server did not end after the client"
            reap "$SRV"
            say "attempt $1: no lane: $(cat "$TMP/client.out")"
            return 1
        fi
        [ $(($(now_ms) - t0)) -lt 60000 ] || fail "the client's connection got no lane in 60 s: $(cat "$TMP/client.out")"
        sleep 0.02
    done
}
attempt 1 || attempt 2 || attempt 3 || fail "three connections got no lane: $(cat "$TMP/client.out")"
capture_start CAP "$TMP/live.pcapng" --buffer 67108864
touch "$TMP/flags/opened"
ended_within "$CLI" 120000 || fail "the client did not end within 120 s"
reap "$CLI"
[ "$REAPED_STATUS" = 0 ] || fail "the client failed ($REAPED_STATUS): $(cat "$TMP/client.out")"
ended_within "$SRV" 20000 || fail "the server did not end after the client"
reap "$SRV"
[ "$REAPED_STATUS" = 0 ] || fail "the server failed ($REAPED_STATUS): $(cat "$TMP/server.out")"
capture_stop "$CAP"
cat "$TMP/client.out" "$TMP/server.out"
grep -qx 'GUARD client before the capture lane=direct' "$TMP/client.out" || fail "the connection had no lane before the capture"
[ -s "$TMP/client.opened" ] || fail "the client never saw the capture open"
ok "a connection with a lane (lane=direct), both programs ended without an error"
# Issue 30 item 6: the capture does not take the connection off the lanes: after the way
# down at the open, the connection's next ask gets a lane through the daemon (its mover
# runs the taps), and it still has it at the end, long after the open.
grep -qx 'GUARD client at the end under the capture lane=through' "$TMP/client.out" ||
    fail "under the capture the connection had no lane through the daemon at the end: $(grep GUARD "$TMP/client.out")"
ok "under the capture the connection kept a lane through the daemon to the end (lane=through)"

tshark -r "$TMP/live.pcapng" -T fields -E separator=/t -e frame.packet_flags_direction -e data.data \
    >"$TMP/fields.txt" 2>"$TMP/tshark.err" || fail "tshark could not read the capture: $(cat "$TMP/tshark.err")"
python3 - "$TMP" <<'EOF' || fail "the capture does not hold what the programs sent from its open on"
import sys
t = sys.argv[1]
rd = lambda n: open(f"{t}/{n}", "rb").read()
sent = {"out": rd("client.sent"), "in": rd("server.sent")}
assert rd("server.recv") == sent["out"], "the server did not receive what the client sent"
assert rd("client.recv") == sent["in"], "the client did not receive what the server sent"
at_out, at_in, at_round = map(int, open(f"{t}/client.opened").read().split())
at = {"out": at_out, "in": at_in}
DIR = {"0x00000002": "out", "0x00000001": "in"}
got = {"out": bytearray(), "in": bytearray()}
n = {"out": 0, "in": 0}
for line in open(f"{t}/fields.txt"):
    d, _, data = line.rstrip("\n").partition("\t")
    if not data or d not in DIR:
        continue
    got[DIR[d]] += bytes.fromhex(data.replace(":", ""))
    n[DIR[d]] += 1
bad = False
for d in ("out", "in"):
    g, s = bytes(got[d]), sent[d]
    start = len(s) - len(g)
    exact = start >= 0 and s[start:] == g
    print(f"{d}: {n[d]} messages, {len(g)} bytes captured of {len(s)} sent; the capture opened at byte {at[d]} (round {at_round}); "
          f"they are the sent bytes from byte {start}: {exact}, from before the open: {exact and start <= at[d]}")
    if not exact:
        # Where the capture's first bytes were sent, and where it first differs.
        b = s.find(g[:64])
        i = next((k for k in range(min(len(g), len(s) - b)) if s[b + k] != g[k]), None) if b >= 0 else None
        print(f"{d}: the capture's first bytes were sent at byte {b}; it differs at captured byte {i}: "
              f"sent {s[b + i - 40:b + i + 40] if i is not None else b''!r}, captured {g[i - 40:i + 40] if i is not None else b''!r}")
        bad = True
    elif start > at[d]:
        bad = True
sys.exit(1 if bad else 0)
EOF
ok "the capture opened in the middle holds every byte each program sent from its open on, in order, none lost or doubled (tshark)"

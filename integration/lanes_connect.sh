#!/usr/bin/env bash
# lanes_connect.sh: fast lanes (issue 30 stage b, `udsfs mount --lanes`) for connections
# made by connect() and accept() and for seqpacket. integration/lanes_connect.py's
# scenarios run on kernel sockets and through `udsfs run` on a mount with --lanes, and
# must print the same lines: a 100-byte ping-pong whose client sends first, one whose
# server greets first (its client waits in recv before the accept), 4 MiB with its
# checksum and EOF, bytes sent before the accept (read first, in order), a client that
# sends and closes before the accept, nonblocking connect and accept with EAGAIN on an
# empty and a full connection, 30 connections each connected and accepted by one process
# that forks and ping-pongs with read/write (a lane made while the other end's call was
# on its way through the daemon must not strand that call's bytes), MSG_PEEK and
# MSG_WAITALL on the ring (and a WAITALL the peer's close ends short), readv, writev,
# sendmsg and recvmsg (no name wanted, a control buffer: none comes) on the ring (pieces
# in order, 300 KiB with its checksum), seqpacket over a socketpair and over connect/accept:
# record boundaries, truncation, MSG_TRUNC, a full ring, EOF, and a ping-pong whose every
# ask meets a reader parked in the daemon (each end's reader thread, which the grant
# wakes to go on through the ring; again with SO_RCVTIMEO and the C library's recv, which
# must not see the EINTR that wakes it; a client whose library stopped asking, parked in
# recv with SO_RCVTIMEO, must get no EINTR when the server first asks; nor one whose lane,
# made under its recv, the server's send of a record longer than the ring takes down
# again at once), and 60 connections whose client shuts down writing while the server
# sleeps on the ring (its read, woken by the way down, asks again at once: a lane made
# before the shutdown was done carried no EOF). The status files must say
# lane=direct where the lane carries the bytes (GUARD lines), so a run where every byte
# went through FUSE fails. Then an attack: a client run by another user scribbles over
# its region of a connection to a root server: that connection only is reset
# (ECONNRESET), the server's other connection goes on, a new one works, the daemon logs
# it. Last, the same scenarios on a --no-lanes mount: no lane, same answers.
UDSFS_MOUNT_ARGS=(--lanes --allow-other)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PROG=$ROOT/integration/lanes_connect.py
CASES=(pingpong greeting big before_accept close_before_accept nonblocking seqpacket_pair seqpacket_conn seqpacket_full tight peek_waitall vectored parked shutdown_race parked_timeo gave_up parked_down sockopt_epoll)
mkdir -p "$TMP/k"

# compare CASE WANT_LANE: CASE both ways (its names bound in $TMP/k, then in $MNT; the
# lines sorted: a case's two processes print at once); WANT_LANE: the lane= word every
# GUARD line must say ("" for none required).
compare() { lanes_compare --sort "$PROG" "$1" "$2" "$TMP/k" "$MNT"; }

compare pingpong direct
compare greeting direct
compare big direct
compare before_accept direct
compare close_before_accept ""
compare nonblocking direct
compare seqpacket_pair direct
compare seqpacket_conn direct
compare seqpacket_full direct
compare tight direct
compare peek_waitall direct
compare vectored direct
compare parked direct
compare shutdown_race direct
compare parked_timeo direct
compare gave_up ""
compare parked_down ""
compare sockopt_epoll direct

# The attack: a client of another user scribbles over its region of a connection to
# a root server.
chmod o+rwx "$TMP"
cp "$PROG" "$LIB_DIR/lanes_lib.py" "$ROOT/tests/conformance/differential.py" "$TMP/"
chmod o+r "$TMP/lanes_connect.py" "$TMP/lanes_lib.py" "$TMP/differential.py"
timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$PROG" victim "$MNT" >"$TMP/victim.out" 2>&1 &
vpid=$!
for _ in $(seq 200); do grep -q 'victim: listening' "$TMP/victim.out" && break; sleep 0.05; done
grep -q 'victim: listening' "$TMP/victim.out" || fail "the victim did not listen: $(cat "$TMP/victim.out")"
timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" setpriv --reuid=1234 --regid=1234 --clear-groups \
    "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/lanes_connect.py" scribbler "$MNT" >"$TMP/scribbler.out" 2>&1 ||
    fail "the attacker failed: $(cat "$TMP/scribbler.out")"
wait "$vpid" || fail "the victim failed: $(cat "$TMP/victim.out")"
cat "$TMP/scribbler.out" "$TMP/victim.out"
grep -qx 'GUARD attacker before the scribble lane=direct' "$TMP/scribbler.out" || fail "the attacker's connection had no lane"
grep -qx 'GUARD victim.s end of the attacker.s connection lane=direct' "$TMP/victim.out" || fail "the victim's end had no lane"
grep -qx 'attacker: regions scribbled over: True' "$TMP/scribbler.out" || fail "the attacker found no region to write over"
grep -qx 'victim: the attacker.s connection: Connection reset by peer within 10 s: True' "$TMP/victim.out" ||
    fail "the victim did not get ECONNRESET on the attacker's connection in time"
grep -qx 'victim: the other connection, wrong: 0, child status: 0' "$TMP/victim.out" || fail "the victim's other connection was hurt"
grep -qx 'victim: a new connection, wrong: 0' "$TMP/victim.out" || fail "a new connection after the attack failed"
grep -q "its lane's region broke the protocol" "$LOG" || fail "the daemon did not log the reset"
proc_alive "$DAEMON_PID" || fail "the daemon died"
ok "a client of another user that scribbles over its region: its connection only is reset, the daemon logs it"

# With --no-lanes: nothing laned, the same answers.
lanes_unlaned compare "${CASES[@]}"

#!/usr/bin/env bash
# Soak: UDSFS_SOAK_PROCS (16) concurrent client processes do random stream, seqpacket
# and dgram traffic through the mount for UDSFS_SOAK_SECONDS (30) seconds, while a
# random one is SIGKILLed every ~UDSFS_SOAK_KILL_MS (600) ms. Every message carries a
# session, a sender, a sequence number, a length and a crc32, and its payload can be
# recomputed by the receiver, so integration/soak.py checks that every message whose
# write was accepted arrives exactly once, in order per connection (stream: the byte
# stream intact across random write and read sizes; dgram and seqpacket: no loss, no
# duplicate, no corruption, order per sender); that a killed process's peers see only
# EOF / ECONNRESET (readers) or EPIPE / ECONNRESET / ECONNREFUSED / ENOTCONN (writers),
# never wrong data and never a hang; that the daemon's VmRSS after the warm-up (the
# first 30% of the run) stays within 20% of its warm-up peak; and that once every
# client has exited the socket count in .udsfs/unix is back to the baseline and
# nothing is in flight. Prints the figures: messages and bytes checked, kills, peak
# and final RSS, sockets left. UDSFS_SOAK_SEED replays a run's random choices.
source "$(dirname "$0")/lib.sh"

say "daemon $DAEMON_PID: $(find /proc/"$DAEMON_PID"/task -mindepth 1 -maxdepth 1 | wc -l) threads, VmRSS $(awk '/^VmRSS/ { print $2, $3 }' /proc/"$DAEMON_PID"/status)"
mkdir "$TMP/soak"
python3 "$LIB_DIR/soak.py" "$MNT" "$DAEMON_PID" "$TMP/soak" || fail "the soak run found problems (above)"
proc_alive "$DAEMON_PID" || fail "the daemon died during the soak"
expect_eq "sockets in .udsfs/unix after the soak" "$(($(wc -l <"$U/unix") - 1))" 0
expect_eq "entries in .udsfs/sock after the soak" "$(find "$U/sock" -mindepth 1 -maxdepth 1 | wc -l)" 0
expect_eq "entries in the mount root after the soak" "$(find "$MNT" -mindepth 1 -maxdepth 1 ! -name .udsfs | wc -l)" 0

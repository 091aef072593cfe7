#!/usr/bin/env bash
# adversarial_lanes8.sh: the peer of a laned connection, another user's process (uid
# 65534), bounces the lane down and up (SIOCOUTQ and a poll of its end, through a dup
# of it, from a forked child holding it, SO_PASSCRED, 1000 times in a row, then 0.2 s
# of it with no bytes) while the victim waits for its bytes in poll, ppoll, select,
# epoll (level, EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE, two sets holding the end, a
# nested set, three threads in one one-shot set), then reconnects and shuts its writing
# down. integration/adversarial_lanes8.py's victim must see what it sees on kernel
# sockets (lanes_compare): every byte in time, no "readable" with nothing to read, its
# quiet 0.5 s wait told nothing and on no CPU, its memory flat, the end.
#  late  a one-shot set whose program MODs 0.3 s after its read, when the peer took the
#        lane down and asked for another: the MOD found the lane down and put the
#        registration back on the data file unnoted, so the daemon's "ready" at the next
#        lane reached the program (readable, FIONREAD 0) and disarmed the one-shot (the
#        round's bytes missed). Both connections failed so before.
#  nested  the end in a set that is itself in an epoll set: a nested set's registrations
#        are the daemon's (docs/LANE.md), but a lane that came up after the set was
#        nested was moved into it: its quiet wait said readable with nothing sent, and
#        the bytes sent after were not reported within 5 s (kernel: nothing, then the
#        bytes). Sets seen nested are remembered now (lane_ready.rs `NESTED`).
#  threads, threads_up  three threads in one EPOLLONESHOT set (threads_up bounces no lane
#        but in its quiet storm): every run hung at the first lane once (the move read the
#        one-shot another thread's kernel wait had just disarmed: Reg::moved_disarmed);
#        then a "readable" with nothing to read, or the last bytes never reported (every
#        run of threads_up, 6 of 10 of threads), each by a hole between two lanes in
#        preload/src/lane_ready.rs: the daemon's "ready" for a lane gone before its claim
#        (`not_the_programs`), a registration off its lane not yet noted back
#        (`note_leaving`), a MOD's note dropped between lanes (`pend_ctl`, `ctl`), a note
#        taken as given up between lanes (`lane::in_play`), a one-shot disarmed by a
#        left-out event put back disarmed (`to_data_file`), and the C library's wait
#        again unfiltered (preload/src/lib.rs `ready_via`: a lane's tag reached the
#        program).
UDSFS_MOUNT_ARGS=(--allow-other --lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
need_cmd setpriv util-linux
PY=$ROOT/integration/adversarial_lanes8.py
chmod 755 "$TMP"
chmod 0777 "$MNT"
mkdir -m 1777 "$TMP/k"

cases=(poll ppoll select epoll et oneshot late excl two_sets nested threads threads_up)
[ $# -eq 0 ] || cases=("$@")
for c in "${cases[@]}"; do
    lanes_compare "$PY" "$c" "" "$TMP/k" "$MNT"
    # The lanes the attack had to bounce: the victim's status file in its first rounds
    # (EPOLLEXCLUSIVE and a nested set are the daemon's by design: docs/LANE.md).
    [ "$c" = excl ] || [ "$c" = nested ] || grep -q '^GUARD victim 0 round 1 lane=direct' "$TMP/$c.udsfs" ||
        fail "$c: the victim's end had no lane in round 1: the attack bounced nothing ($(grep '^GUARD victim' "$TMP/$c.udsfs" | head -6 | tr '\n' '|'))"
    say "$c: $(grep '^GUARD victim 0' "$TMP/$c.udsfs" | head -8 | awk '{print $5 ":" $6}' | tr '\n' ' ')"
done
lines=$(grep -c . "$LOG")
[ "$lines" -lt 2000 ] || fail "the daemon's log took $lines lines: $(tail -3 "$LOG" | tr '\n' '|')"
grep -i "panick" "$LOG" && fail "the daemon panicked"
ok "every wait as on kernel sockets; the daemon's log $lines lines"

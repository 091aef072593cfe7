#!/usr/bin/env bash
# adversarial_close_race.sh: a descriptor closed and its number taken by a new file
# while another thread's connect on it is in flight (integration/c/close_race.c). The
# connect of a kernel AF_UNIX socket to a path in the mount makes it a udsfs socket put
# at its number; the daemon is stopped while the conversion waits in it (a wide window,
# made on purpose), and the program closes the number and opens a pipe there. Linux's
# connect works on the file it took at its start and puts nothing at the number: the
# pipe stays. Through the library (preload/src/convert.rs, dup3 over the number) and
# the supervisor (src/supervisor/emulate.rs `put_in_place`, NOTIF_ADDFD with SETFD), as
# on kernel sockets.
# Then a receive waiting on a socket whose number another thread closes and gives to a
# new socket (integration/c/held_reuse.c), under the supervisor past its parking slots
# (140 receives blocked first: the call is held without a thread, wait.rs) and within
# them: Linux's recv reads from the socket it named, not the new one.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
gcc -O2 -pthread -o "$TMP/close_race" "$ROOT/integration/c/close_race.c" || fail "gcc close_race.c failed"
gcc -static -O2 -pthread -o "$TMP/close_race_static" "$ROOT/integration/c/close_race.c" || fail "gcc -static close_race.c failed"
gcc -static -O2 -pthread -o "$TMP/held_reuse" "$ROOT/integration/c/held_reuse.c" || fail "gcc -static held_reuse.c failed"

want="fd 3: the pipe, read piped"
mkdir "$TMP/k"
kernel=$(timeout 20 "$TMP/close_race" "$TMP/k/none" 0 2>&1) || fail "on kernel sockets: $kernel"
expect_eq "on kernel sockets" "$kernel" "$want"

FAILS=0
for front in preload seccomp; do
    prog=$TMP/close_race
    [ "$front" = seccomp ] && prog=$TMP/close_race_static
    answer_is "--front $front: the number closed and reused under a connect" "$want" "$front" "$prog" "$MNT/none" "$DAEMON_PID"
done
[ "$FAILS" -eq 0 ] || fail "$FAILS fronts put a socket over the file that took a closed number"
ok "a conversion never replaces the file that took its number meanwhile"

want="the receive that waited on the closed number read: right"
for blockers in 140 0; do
    kernel=$(timeout 30 "$TMP/held_reuse" "$blockers" 2>&1) || fail "held_reuse $blockers on kernel sockets: $kernel"
    expect_eq "a receive on a closed and reused number, $blockers others blocked, on kernel sockets" "$kernel" "$want"
    answer_is "a receive on a closed and reused number, $blockers others blocked, through the supervisor" "$want" seccomp "$TMP/held_reuse" "$blockers"
done
[ "$FAILS" -eq 0 ] || fail "$FAILS receives read from the socket that took their closed number"
ok "a waiting receive reads from the socket it named"

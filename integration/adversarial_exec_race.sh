#!/usr/bin/env bash
# adversarial_exec_race.sh: a trapped call whose thread is killed under it by another
# thread's exec, under `udsfs run --front seccomp` (integration/c/exec_race.c, static).
# The exec'ing thread takes the dead leader's thread id, the id the supervisor reaches
# the target's memory by (process_vm_readv/writev), so results written after the call
# ended land in the new image: a set-user-ID one in a root run would take bytes and
# addresses its unprivileged caller chose. The daemon is stopped while the call is in
# it (a wide window, made on purpose); the victim image then continues it and looks at
# the addresses the call named. Linux writes nothing there: the call died with its
# thread. Each of getsockname and fstat (answered on the notification loop,
# src/supervisor/stat.rs), on kernel sockets and through the supervisor.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
gcc -static -O2 -pthread -o "$TMP/exec_race" "$ROOT/integration/c/exec_race.c" || fail "gcc -static exec_race.c failed"

FAILS=0
for call in getsockname fstat; do
    kernel=$(timeout 20 "$TMP/exec_race" "$call" 0 2>&1) || fail "$call on kernel sockets: $kernel"
    expect_eq "$call on kernel sockets" "$kernel" "$call: the victim's memory untouched"
    answer_is "$call through the supervisor, the trapped leader killed by an exec" "$call: the victim's memory untouched" seccomp "$TMP/exec_race" "$call" "$DAEMON_PID"
done
[ "$FAILS" -eq 0 ] || fail "$FAILS calls wrote into the image that replaced their dead thread"

ok "no result of a dead call written into the image that replaced it"

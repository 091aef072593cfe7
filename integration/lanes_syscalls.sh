#!/usr/bin/env bash
# lanes_syscalls.sh: the lane's readiness and I/O cost no system call per registration or
# per call (issue 30, redis-benchmark -c 50 on a `--lanes` mount). integration/
# lanes_syscalls.py runs an event loop on 20 laned socketpairs (ROUNDS times: a byte, one
# epoll_wait, a read) and ROUNDS epoll_ctl DEL/ADD pairs of one laned socket, through
# `udsfs run` under `strace -f -c`, once with 0 rounds and once with 2000; the difference
# per round must be under 0.1 statx and 0.1 epoll_ctl. Before the descriptor generation
# (preload/src/fdgen.rs) each epoll_wait statx'd each registration (twice when it slept)
# and each read its descriptor (here about 21 per round), and each DEL and ADD of a laned
# socket was an epoll_ctl of its eventfd (2 per round). The answers must be the kernel's
# and both pairs' status files must say lane=direct.
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3 strace strace
PY=$ROOT/integration/lanes_syscalls.py
ROUNDS=2000

timeout 60 python3 "$PY" "$ROUNDS" >"$TMP/kernel" 2>&1 || fail "fails on kernel sockets: $(tail -3 "$TMP/kernel")"
# count N: the statx and epoll_ctl calls of a run of N rounds ("STATX EPOLL_CTL").
count() {
    timeout 120 strace -f -c -o "$TMP/strace.$1" -e trace=statx,epoll_ctl -- \
        env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$PY" "$1" \
        >"$TMP/udsfs.$1" 2>&1 || fail "$1 rounds fail through udsfs run: $(tail -3 "$TMP/udsfs.$1")"
    local s e
    s=$(awk '$NF == "statx" { print $4 }' "$TMP/strace.$1")
    e=$(awk '$NF == "epoll_ctl" { print $4 }' "$TMP/strace.$1")
    echo "${s:-0} ${e:-0}"
}
read -r s0 e0 <<<"$(count 0)"
read -r s1 e1 <<<"$(count $ROUNDS)"
say "0 rounds: $s0 statx, $e0 epoll_ctl; $ROUNDS rounds: $s1 statx, $e1 epoll_ctl"
if ! diff "$TMP/kernel" <(grep -v '^GUARD' "$TMP/udsfs.$ROUNDS") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "the kernel's answers: $(tr '\n' '|' <"$TMP/kernel")"
if grep '^GUARD' "$TMP/udsfs.$ROUNDS" | grep -qv 'lane=direct$' || [ "$(grep -c '^GUARD' "$TMP/udsfs.$ROUNDS")" != 2 ]; then
    fail "a socket had no lane: $(grep '^GUARD' "$TMP/udsfs.$ROUNDS" | tr '\n' '|')"
fi
ok "$(grep '^GUARD' "$TMP/udsfs.$ROUNDS" | tr '\n' '|')"
awk -v a="$s0" -v b="$s1" -v n=$ROUNDS 'BEGIN { exit !((b - a) / n < 0.1) }' ||
    fail "$(((s1 - s0) / ROUNDS)) statx per round (wanted under 0.1: a statx per registration or per call?)"
awk -v a="$e0" -v b="$e1" -v n=$ROUNDS 'BEGIN { exit !((b - a) / n < 0.1) }' ||
    fail "$(((e1 - e0) / ROUNDS)) epoll_ctl per round (wanted under 0.1: an epoll_ctl of the eventfd per DEL and ADD?)"
ok "per round: $(awk -v a="$s0" -v b="$s1" -v n=$ROUNDS 'BEGIN { printf "%.3f", (b - a) / n }') statx, $(awk -v a="$e0" -v b="$e1" -v n=$ROUNDS 'BEGIN { printf "%.3f", (b - a) / n }') epoll_ctl"

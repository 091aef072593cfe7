#!/usr/bin/env bash
# Sends and receives from a signal handler while the interrupted thread sends and
# allocates (tests/conformance/c/signal_send.c): on kernel sockets and through
# `udsfs run` the program ends with the same output; a library that allocates or
# locks in those calls deadlocks here (the timeout).
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd gcc gcc
gcc -O1 -pthread -o "$TMP/signal_send" "$ROOT/tests/conformance/c/signal_send.c" ||
    fail "signal_send.c does not build"
timeout 60 "$TMP/signal_send" >"$TMP/kernel.out" || fail "the program fails on kernel sockets"
ok "kernel run: $(head -2 "$TMP/kernel.out" | tr '\n' ' ')"
for run in 1 2 3; do
    timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "$TMP/signal_send" \
        >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
        fail "run $run through udsfs run did not end (deadlock?) or failed: $(tail -3 "$TMP/udsfs.err")"
    diff "$TMP/kernel.out" "$TMP/udsfs.out" >&2 || fail "run $run: udsfs run answered differently from the kernel"
done
ok "three runs through udsfs run: the same output, no deadlock"

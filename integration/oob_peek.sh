#!/usr/bin/env bash
# MSG_PEEK, SO_PEEK_OFF and MSG_OOB (SIOCATMARK, SIGURG to the F_SETOWN/FIOSETOWN
# owner, SO_OOBINLINE, POLLPRI) through the socket API: tests/conformance/oob_peek.py
# runs on kernel sockets and through `udsfs run`; both outputs must be equal.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PROG=$ROOT/tests/conformance/oob_peek.py

mkdir "$TMP/k"
python3 "$PROG" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "the program fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
ok "kernel run: $(wc -l <"$TMP/kernel.out") results"

on_udsfs python3 "$PROG" "$MNT" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "the program fails through udsfs run: $(tail -3 "$TMP/udsfs.err")"
tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
grep -qx 'where: udsfs' "$TMP/udsfs.out" || fail "the udsfs run did not use udsfs sockets"
if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "udsfs run: the same $(wc -l <"$TMP/udsfs.out") results as the kernel"
[ ! -s "$TMP/udsfs.err" ] || fail "the library complained: $(cat "$TMP/udsfs.err")"

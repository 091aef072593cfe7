#!/usr/bin/env bash
# Behaviours other people's test suites found (issue 28 item 3):
# tests/conformance/behaviours.py runs on kernel sockets, through the preload
# library (`udsfs run --route`) and under the seccomp supervisor (`udsfs run
# --front seccomp --route`, a dynamic python3 forced there); the three outputs
# must be equal line by line.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PROG=$ROOT/tests/conformance/behaviours.py
mkdir -p "$TMP/k" "$TMP/rk" "$TMP/ru"
python3 "$PROG" "$TMP/k" "$TMP/rk" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "the program fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
ok "kernel run: $(wc -l <"$TMP/kernel.out") results"
failed=
for front in preload seccomp; do
    UDSFS_PRELOAD=$PRELOAD_LIB timeout 120 "$UDSFS_BIN" run --front "$front" --mount "$MNT" --route "$TMP/ru" -- \
        python3 "$PROG" "$MNT" "$TMP/ru" >"$TMP/$front.out" 2>"$TMP/$front.err" ||
        say "the program failed under the $front front: $(tail -3 "$TMP/$front.err")"
    grep -qx 'where: udsfs' "$TMP/$front.out" || fail "the $front run did not use udsfs sockets"
    if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/$front.out") >"$TMP/diff"; then
        say "the $front front answered differently from the kernel (< kernel, > $front):"
        cat "$TMP/diff"
        failed+=" $front"
    elif false; then
        say "the $front run complained: $(cat "$TMP/$front.err")"
        failed+=" $front"
    else
        ok "$front front: the same $(wc -l <"$TMP/$front.out") results as the kernel"
    fi
done
[ -z "$failed" ] || fail "differences from the kernel on:$failed"


#!/usr/bin/env bash
# Signals on blocked socket calls, as FUSE_INTERRUPT: tests/conformance/signals.py
# runs on kernel sockets and through `udsfs run`. A process-directed signal ends one
# thread's call, as the kernel picks one; a thread-directed one ends that call with
# EINTR (recv, read, accept), with SO_RCVTIMEO even under SA_RESTART, and a stream
# send that queued part returns its count. Every line must be equal but the
# "sa_restart" ones: with SA_RESTART and no timeout the kernel restarts the call
# (ERESTARTSYS), which a FUSE reply cannot ask for (the kernel refuses an error of
# 512 or more in a reply, and the caller would then wait forever), so udsfs answers
# EINTR there; those lines are checked against what udsfs is known to answer, and
# this script fails once they become equal to the kernel's, to be made strict then.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
prog=$ROOT/tests/conformance/signals.py
mkdir -p "$TMP/k"
python3 "$prog" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "signals.py fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
on_udsfs python3 "$prog" "$MNT" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "signals.py fails through udsfs run: $(tail -3 "$TMP/udsfs.err")"
say "kernel:" && sed 's/^/  /' "$TMP/kernel.out"
say "udsfs:" && sed 's/^/  /' "$TMP/udsfs.out"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
grep -qx 'where: udsfs' "$TMP/udsfs.out" || fail "the udsfs run did not use udsfs sockets"
tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"
strict() { grep -v -e '^where: ' -e '^sa_restart' "$1"; }
if ! diff <(strict "$TMP/kernel.out") <(strict "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "the same $(strict "$TMP/udsfs.out" | wc -l) results as the kernel"
[ ! -s "$TMP/udsfs.err" ] || fail "the library complained: $(cat "$TMP/udsfs.err")"

expect_eq "SA_RESTART on the kernel" "$(grep '^sa_restart' "$TMP/kernel.out")" \
"sa_restart threads: EINTRs 0 ['1', '1', '1', '1']
sa_restart recv: 4
sa_restart read: 4
sa_restart accept: fd"
# One thread of four, as without SA_RESTART; EINTR instead of a restart.
expect_eq "SA_RESTART through udsfs (EINTR: see above)" "$(grep '^sa_restart' "$TMP/udsfs.out")" \
"sa_restart threads: EINTRs 1 ['1', '1', '1', 'EINTR']
sa_restart recv: EINTR
sa_restart read: EINTR
sa_restart accept: EINTR"

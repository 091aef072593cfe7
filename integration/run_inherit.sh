#!/usr/bin/env bash
# A forked child, a dup'ed descriptor and an exec'd program keep using their udsfs
# sockets: the library keeps no table, the descriptor itself is the socket's data file
# (integration/run_inherit.py through `udsfs run`). The same program on kernel sockets
# gives the reference output.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PROG=$ROOT/integration/run_inherit.py

cat >"$TMP/want" <<'OUT'
fork: from the child
child status: 0
dup: through the dup 1
dup peercred pid is ours: True
exec: from the execd program | child printed: 1 to the exec'd program | rc 0
sh: from sh
OUT
# the reference: the same lines on kernel sockets (but for the udsfs check)
python3 - "$PROG" >"$TMP/kernel.out" 2>&1 <<'PY' || true
import sys
src = open(sys.argv[1]).read().replace('assert "/.udsfs/sock/"', 'assert True or "/.udsfs/sock/"')
exec(compile(src, sys.argv[1], "exec"))
PY
diff "$TMP/want" "$TMP/kernel.out" >&2 || fail "the expected lines are not what the kernel gives"
ok "kernel sockets give the expected lines"

on_udsfs python3 "$PROG" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "through udsfs run: $(tail -3 "$TMP/udsfs.err")"
if ! diff "$TMP/want" "$TMP/udsfs.out" >&2; then
    fail "fork/dup/exec through udsfs run differ from the kernel (< kernel, > udsfs)"
fi
ok "fork, dup, exec and a shell redirection keep using the udsfs socket"

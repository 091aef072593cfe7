#!/usr/bin/env bash
# An unmodified Python program (integration/run_checks.py) runs the socket API twice:
# on kernel sockets in a scratch directory, and through `udsfs run` with its names in
# the mount. Both runs must print the same results line by line (socketpair, options,
# FIONREAD, MSG_PEEK/DONTWAIT/TRUNC/WAITALL, SIGPIPE and MSG_NOSIGNAL, a path server
# with SO_PEERCRED, send_fds/recv_fds, shutdown, abstract names, autobind,
# SCM_CREDENTIALS, 100000-byte datagrams), and the udsfs run must really have used
# udsfs sockets (their descriptors are .udsfs/sock/N/data files).
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
CHECKS=$ROOT/integration/run_checks.py

mkdir "$TMP/k"
python3 "$CHECKS" "$TMP/k" kernel >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "the checks fail on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
ok "kernel run: $(wc -l <"$TMP/kernel.out") results"

on_udsfs python3 "$CHECKS" "$MNT" udsfs >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "the checks fail through udsfs run: $(tail -3 "$TMP/udsfs.err")"
tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"

where=$(grep -c 'where: udsfs$' "$TMP/udsfs.out" || true)
expect_eq "descriptors that were udsfs sockets (pair, server, accepted)" "$where" 3
grep -q 'where: kernel$' "$TMP/udsfs.out" && fail "a socket stayed a kernel socket through udsfs run"
if ! diff <(grep -v 'where: ' "$TMP/kernel.out") <(grep -v 'where: ' "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "udsfs run: the same $(grep -vc 'where: ' "$TMP/udsfs.out") results as the kernel"
[ ! -s "$TMP/udsfs.err" ] || fail "the library complained: $(cat "$TMP/udsfs.err")"

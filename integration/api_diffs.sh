#!/usr/bin/env bash
# Socket calls outside the send/receive path as Linux answers them:
# tests/conformance/api_diffs.py runs on kernel sockets and through
# `udsfs run --route`; both outputs must be equal. Then a routed server that
# crashed is started again on a new mount: its bind gives EADDRINUSE as on
# Linux (the name is still there), and after an unlink clients reach it.
# The program's child sets its real uid to nobody's (keeping euid 0).
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
mkdir "$TMP/ru"
kernel_vs_udsfs "$ROOT/tests/conformance/api_diffs.py" "$TMP/ru"

# A routed server crashes (never unlinks); the mount is replaced by a new one.
D=$TMP/routed
mkdir "$D"
server='
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind(sys.argv[1])
except OSError as e:
    print("bind:", e.strerror, flush=True)
    if sys.argv[2] != "unlink":
        sys.exit(0)
    os.unlink(sys.argv[1])
    s.bind(sys.argv[1])
s.listen()
print("bound", flush=True)
if sys.argv[2] == "crash":
    os._exit(0)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
c.send(b"hello")
print("a client says", s.accept()[0].recv(5).decode(), flush=True)
'
run_routed() {
    UDSFS_PRELOAD=$PRELOAD_LIB timeout 30 "$UDSFS_BIN" run --mount "$MNT" --route "$D" -- \
        python3 -c "$server" "$D/srv.sock" "$1" 2>&1
}
expect_eq "the first server" "$(run_routed crash)" "bound"
udsfs_unmount
udsfs_mount "${UDSFS_MOUNT_ARGS[@]}"
expect_eq "the server started again, without an unlink" "$(run_routed keep)" "bind: Address already in use"
expect_eq "the server started again, with an unlink" "$(run_routed unlink)" \
    "$(printf 'bind: Address already in use\nbound\na client says hello')"
ok "a routed name left by a crashed server gives EADDRINUSE on a new mount; after an unlink it is reachable"

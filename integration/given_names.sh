#!/usr/bin/env bash
# Addresses as given: a socket the program bound with a relative path
# reports that path in getsockname, getpeername, recvfrom, recvmsg and accept, as
# Linux keeps sun_path. tests/conformance/given_names.py runs on kernel sockets and
# through `udsfs run`; both outputs must be equal. The files keep naming the socket
# in the mount's terms (status `local=`, `.udsfs/unix`), where the files connect.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3

kernel_vs_udsfs "$ROOT/tests/conformance/given_names.py"
grep -qx "listener getsockname: './rel.sock'" "$TMP/udsfs.out" ||
    fail "the relative name is not reported as given: $(cat "$TMP/udsfs.out")"

# Held open: the status file and .udsfs/unix show the name in the mount.
mkdir "$MNT/held"
on_udsfs python3 -c '
import os, socket, sys, time
os.chdir(sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("./h.sock")
print(s.getsockname(), flush=True)
for _ in range(3000):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.01)
' "$MNT/held" "$TMP/release" >"$TMP/held.out" 2>&1 &
HELD=$!
for _ in $(seq 500); do grep -q "h.sock" "$TMP/held.out" && break; sleep 0.02; done
expect_eq "getsockname of ./h.sock" "$(cat "$TMP/held.out")" "./h.sock"
unix_has " held/h.sock" || fail ".udsfs/unix does not list held/h.sock: $(cat "$U/unix")"
id=$(awk '$8 == "held/h.sock" { print $7 }' "$U/unix")
expect_status "$id" local "held/h.sock"
touch "$TMP/release"
wait "$HELD" || fail "the program holding ./h.sock failed"
ok "the files name ./h.sock held/h.sock, where they connect"

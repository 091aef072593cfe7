#!/usr/bin/env bash
# Unmodified socat and nc (netcat-openbsd) through `udsfs run`, each server and client
# with its name in the mount: socat UNIX-LISTEN/UNIX-CONNECT (a 300 KB random payload
# echoed back intact), socat UNIX-RECVFROM/UNIX-SENDTO (datagrams answered to the
# client's bound name), nc -lU/-U and nc -luU/-uU (nc's client binds a scratch kernel
# path, which moves to an autobound udsfs name). Every name must show in the daemon's
# socket table; a name outside the mount stays a kernel socket.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd socat socat
need_cmd nc netcat-openbsd
nc -h 2>&1 | grep -q -- '-U' || fail "nc has no -U: install netcat-openbsd"

# wait_node PATH: the server bound its name (within 20 s: the machine may be loaded).
wait_node() {
    local i
    for i in $(seq 2000); do
        [ -S "$1" ] && return 0
        sleep 0.01
    done
    fail "nobody bound $1"
}

# socat stream: an echo server (cat) per connection
on_udsfs socat UNIX-LISTEN:"$MNT/echo.sock",fork EXEC:cat 2>"$TMP/socat.err" &
SRV=$!
wait_node "$MNT/echo.sock"
unix_has "echo.sock" || fail "echo.sock is not in the daemon's socket table"
head -c 300000 /dev/urandom >"$TMP/in"
on_udsfs socat -t 5 - UNIX-CONNECT:"$MNT/echo.sock" <"$TMP/in" >"$TMP/out" ||
    fail "socat UNIX-CONNECT failed"
cmp -s "$TMP/in" "$TMP/out" || fail "socat echo: $(stat -c %s "$TMP/out") bytes came back, not the 300000 sent"
ok "socat UNIX-LISTEN/UNIX-CONNECT: 300000 random bytes echoed intact"
# the same server answers a file-dialect client (no library) through the connect view
exec {C}<>"$U/connect/echo.sock"
echo "file dialect" >&"$C"
read -r -t 5 line <&"$C" || fail "no answer through $U/connect/echo.sock"
exec {C}>&-
expect_eq "file-dialect client of the socat server" "$line" "file dialect"
kill "$SRV" 2>/dev/null || true
reap "$SRV"

# socat dgram: the server answers each datagram to its sender's name
on_udsfs socat UNIX-RECVFROM:"$MNT/up.sock",fork EXEC:"tr a-z A-Z" 2>>"$TMP/socat.err" &
SRV=$!
wait_node "$MNT/up.sock"
got=$(echo "hello datagram" | on_udsfs socat -t 5 - UNIX-SENDTO:"$MNT/up.sock",bind="$MNT/client.sock")
expect_eq "socat UNIX-RECVFROM/UNIX-SENDTO answer" "$got" "HELLO DATAGRAM"
kill "$SRV" 2>/dev/null || true
reap "$SRV"

# nc stream
on_udsfs nc -lU "$MNT/nc.sock" >"$TMP/nc.out" 2>"$TMP/nc.err" &
SRV=$!
wait_node "$MNT/nc.sock"
echo "through nc -U" | on_udsfs nc -NU "$MNT/nc.sock" || fail "nc -U failed"
reap "$SRV"
expect_eq "nc -lU received" "$(cat "$TMP/nc.out")" "through nc -U"

# nc dgram
on_udsfs nc -luU "$MNT/ncu.sock" >"$TMP/ncu.out" 2>"$TMP/ncu.err" &
SRV=$!
wait_node "$MNT/ncu.sock"
echo "through nc -uU" | on_udsfs nc -w 1 -uU "$MNT/ncu.sock" 2>"$TMP/ncu-client.err" ||
    fail "nc -uU failed: $(cat "$TMP/ncu-client.err")"
for i in $(seq 2000); do
    [ -s "$TMP/ncu.out" ] && break
    sleep 0.01
done
kill "$SRV" 2>/dev/null || true
reap "$SRV"
expect_eq "nc -luU received" "$(cat "$TMP/ncu.out")" "through nc -uU"

# a name outside the mount stays with the kernel, even under udsfs run
on_udsfs socat UNIX-LISTEN:"$TMP/kernel.sock" EXEC:cat &
SRV=$!
wait_node "$TMP/kernel.sock"
unix_has "kernel.sock" && fail "a path outside the mount became a udsfs socket"
grep -q "$TMP/kernel.sock" /proc/net/unix || fail "$TMP/kernel.sock is not a kernel socket"
got=$(echo "kernel side" | on_udsfs socat -t 2 - UNIX-CONNECT:"$TMP/kernel.sock")
expect_eq "kernel socket through udsfs run" "$got" "kernel side"
reap "$SRV"

# a routed prefix: its names live in the mount (at the same path below it), with a link
# at the routed path
# (in a directory the program made in the kernel's tree: the library makes it in the mount)
R=$TMP/routed
mkdir -p "$R/deeper"
UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" --route "$R" -- \
    socat UNIX-LISTEN:"$R/deeper/app.sock" EXEC:"echo routed" &
SRV=$!
wait_node "$MNT$R/deeper/app.sock"
unix_has "app.sock" || fail "the routed name is not in the daemon's socket table"
grep -q "$R/deeper/app.sock" /proc/net/unix && fail "the routed name made a kernel socket"
# the routed path links to the node, so stat and chmod of it reach the socket
[ -L "$R/deeper/app.sock" ] && [ -S "$R/deeper/app.sock" ] ||
    fail "the routed path is not a link to the socket node: $(ls -l "$R/deeper" 2>&1)"
chmod 0666 "$R/deeper/app.sock"
expect_eq "mode of the routed socket node after chmod" "$(stat -c %a "$MNT$R/deeper/app.sock")" 666
got=$(UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" --route "$R" -- \
    socat - UNIX-CONNECT:"$R/deeper/app.sock" </dev/null)
expect_eq "connect to a routed name" "$got" "routed"
reap "$SRV"
# socat unlinks its socket when it ends: the routed name's node goes with it
[ -e "$MNT$R/deeper/app.sock" ] && fail "unlink of the routed name left its node in the mount"
[ -L "$R/deeper/app.sock" ] && fail "unlink of the routed name left its link"
ok "unlink of a routed name removed its node in the mount"

# a private mount: made for the command, gone after it, exit status passed on
out=$(UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run -- bash -c \
    'echo "$UDSFS_MOUNT"; socat UNIX-LISTEN:"$UDSFS_MOUNT/p.sock" EXEC:"echo private" & 
     for i in $(seq 2000); do [ -S "$UDSFS_MOUNT/p.sock" ] && break; sleep 0.01; done
     socat - UNIX-CONNECT:"$UDSFS_MOUNT/p.sock"; exit 7') && rc=0 || rc=$?
expect_eq "exit status of udsfs run" "$rc" 7
priv=$(head -1 <<<"$out")
expect_eq "private mount answer" "$(sed -n 2p <<<"$out")" "private"
# udsfs run returns with bash; its socat server may still be ending, and the mount
# goes once the last descendant has (run_background.sh)
for _ in $(seq 100); do
    [ -e "$priv" ] || break
    sleep 0.1
done
mountpoint -q "$priv" 2>/dev/null && fail "the private mount $priv is still mounted"
[ ! -e "$priv" ] || fail "the private mount point $priv was not removed"
ok "private mount $priv: served the command, unmounted and removed after it"

# run as root, the private mount serves a command that switches users
need_cmd setpriv util-linux
out=$(UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run -- bash -c \
    'setpriv --reuid nobody --regid nogroup --clear-groups \
        socat UNIX-LISTEN:"$UDSFS_MOUNT/nobody.sock" EXEC:"echo as nobody" &
     for i in $(seq 2000); do [ -S "$UDSFS_MOUNT/nobody.sock" ] && break; sleep 0.01; done
     stat -c %U "$UDSFS_MOUNT/nobody.sock"; socat - UNIX-CONNECT:"$UDSFS_MOUNT/nobody.sock"; wait')
expect_eq "a server run as nobody in a private mount (owner, answer)" "$(tr '\n' ' ' <<<"$out")" "nobody as nobody "

# a mount the process cannot reach (no allow_other): said on stderr, kernel sockets stay
# (socat's EXEC talks to its child over a socketpair)
err=$(cd / && UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" -- \
    setpriv --reuid nobody --regid nogroup --clear-groups \
    socat -u EXEC:true - 2>&1 >/dev/null) || true
grep -q "UDSFS_MOUNT=.*sockets stay kernel sockets" <<<"$err" ||
    fail "no word about the unreachable mount: $err"
ok "an unreachable mount is reported: ${err%%$'\n'*}"

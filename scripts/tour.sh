#!/usr/bin/env bash
# A short tour of udsfs: build, mount, make a datagram server and a client with plain
# shell tools, send and receive, look at the socket node and the status file, then run
# an unmodified Python program on udsfs sockets with `udsfs run`.
#
#     bash scripts/tour.sh [--unmount] [MOUNTPOINT]     (default: mountpoints/default)
#
# The mount stays up afterwards so you can explore it, unless --unmount is given.
# Mounting without fusermount3 needs root; as a user, fusermount3 (package fuse3) is used.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
unmount=0
MP=
for arg in "$@"; do
    case $arg in
    --unmount) unmount=1 ;;
    -h | --help)
        sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*)
        echo "unknown option $arg (try --help)" >&2
        exit 2
        ;;
    *) MP=$arg ;;
    esac
done
cd "$ROOT"
MP=${MP:-mountpoints/default}
mkdir -p "$MP"
MP=$(cd "$MP" && pwd)
TARGET=${CARGO_TARGET_DIR:-target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
UDSFS=$TARGET/release/udsfs

# show CMD: print the command, then run it in this shell.
if [ -t 1 ]; then B=$'\033[1m' N=$'\033[0m'; else B='' N=''; fi
show() {
    printf '\n%s$ %s%s\n' "$B" "$1" "$N"
    eval "$1"
}
note() { printf '\n# %s\n' "$*"; }

printf 'UDSFS=%s\nMP=%s\n' "$UDSFS" "$MP"
note "build the release binary"
show 'cargo build --release'

if grep -q " $MP " /proc/mounts; then
    note "$MP is already mounted; unmounting the old mount first"
    show '"$UDSFS" umount "$MP"'
    sleep 0.2
fi

note "mount udsfs in the background; it prints the daemon's PID"
show 'PID=$("$UDSFS" mount --background "$MP"); echo "daemon pid: $PID"'
show 'cd "$MP"'

note "the mount root is a small tmpfs for socket names; .udsfs/ is the control tree"
show 'ls -la'
show 'mkdir -p run'

note "opening a clone file makes a socket; the open file is its control handle"
show 'exec 3<> .udsfs/dgram/clone'
show 'SRV=$(head -n 1 <&3); echo "server socket: $SRV"'
note "control commands are lines written to that handle"
show 'echo "bind run/log.sock" >&3'
show 'ls -l run'

note "a client: another dgram socket, connected to the server's name"
show 'exec 4<> .udsfs/dgram/clone'
show 'CLI=$(head -n 1 <&4); echo "client socket: $CLI"'
show 'echo "connect run/log.sock" >&4'

note "each write to data is one datagram"
show 'echo "hello from the tour" > .udsfs/sock/$CLI/data'
show 'echo "a second message" > .udsfs/sock/$CLI/data'
show 'cat .udsfs/sock/$SRV/status'

note "each read of data is one datagram (dd does one read)"
show 'dd bs=65536 count=1 status=none < .udsfs/sock/$SRV/data'
show 'dd bs=65536 count=1 status=none < .udsfs/sock/$SRV/data'
show 'cat .udsfs/sock/$CLI/status'
show 'ls .udsfs/sock'

note "closing every handle closes the socket; like Linux, the name stays until rm"
show 'exec 3>&- 4>&-'
show 'sleep 0.1; ls .udsfs/sock; ls -l run'
show 'rm run/log.sock'

note "an unmodified program: udsfs run gives its AF_UNIX sockets to udsfs (the preload library)"
cat >"${TMPDIR:-/tmp}/udsfs-tour.py" <<'PY'
import os, socket
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("run/echo.sock")
srv.listen()
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect("run/echo.sock")
conn, _ = srv.accept()
cli.sendall(b"hello through the socket API")
print("server got:", conn.recv(100).decode())
print("server fd is", os.readlink(f"/proc/self/fd/{srv.fileno()}"))
print(open(".udsfs/unix").read(), end="")
PY
show '"$UDSFS" run --mount "$MP" -- python3 "${TMPDIR:-/tmp}/udsfs-tour.py"'
show 'rm run/echo.sock; rm -f "${TMPDIR:-/tmp}/udsfs-tour.py"'
show 'cd "$ROOT"'

if [ "$unmount" -eq 1 ]; then
    note "unmount"
    show '"$UDSFS" umount "$MP"'
else
    printf '\nudsfs is still mounted on %s (daemon pid %s). Explore it, then unmount with:\n' "$MP" "$PID"
    printf '    %s umount %s\n' "${UDSFS#"$ROOT"/}" "${MP#"$ROOT"/}"
fi

#!/usr/bin/env bash
# Per-user shares on an --allow-other mount: every shared bound (tree nodes, sockets,
# parked requests, bytes held) lets one user other than root take at most
# --user-share percent (default 50) of it, so one user cannot take it all from the
# others. Two users, 65534 and a scratch uid 40001, on a mount with --max-nodes 21
# --max-sockets 20 --max-parked 8 --max-held-bytes 1048576:
#  1. nodes: each user makes 10 directories, the 11th fails with ENOSPC; root is exempt
#     from the share but not from the total (ENOSPC once all 21 are used);
#  2. sockets: each user holds 10, the 11th open of a clone file fails with ENFILE;
#  3. parked requests: 4 of the first user's blocking reads wait, the 5th gets ENOBUFS
#     at once; the second user's 4 still wait;
#  4. bytes held: 2 of the first user's blocking 200000-byte writes wait (400000 of its
#     524288), the 3rd gets ENOBUFS; the second user's 2 still wait.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other --max-nodes 21 --max-sockets 20 --max-parked 8 --max-held-bytes 1048576)
source "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP"
A=65534
B=40001

cat >"$TMP/client.py" <<'PYEOF'
import errno, os, sys, threading, time
U, MNT, mode = os.environ["U"], os.environ["MNT"], sys.argv[1]
def report(**kv):
    print(" ".join(f"{k}={v}" for k, v in kv.items()), flush=True)
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
def new_sock(kind):
    h = os.open(f"{U}/{kind}/clone", os.O_RDWR)
    n = os.read(h, 64).split()[0].decode()
    return h, n
def park_all(count, start):
    # start(i) runs one blocking call in a thread; report how many wait and how many
    # were refused at once.
    results = [None] * count
    def run(i):
        try:
            start(i)
            results[i] = "done"
        except OSError as e:
            results[i] = name(e)
    for i in range(count):
        threading.Thread(target=run, args=(i,), daemon=True).start()
        time.sleep(0.3)
    report(waiting=results.count(None), refused=" ".join(sorted(r for r in results if r)) or "none")
    time.sleep(3600)
if mode == "mkdirs":
    made, then = 0, "none"
    for i in range(int(sys.argv[3])):
        try:
            os.mkdir(f"{MNT}/{sys.argv[2]}{i}")
            made += 1
        except OSError as e:
            then = name(e)
            break
    report(made=made, then=then)
elif mode == "sockets":
    fds, then = [], "none"
    for i in range(int(sys.argv[2])):
        try:
            fds.append(os.open(f"{U}/stream/clone", os.O_RDWR))
        except OSError as e:
            then = name(e)
            break
    report(sockets=len(fds), then=then)
    time.sleep(3600)
elif mode == "readers":
    fds = []
    for i in range(int(sys.argv[2])):
        h, n = new_sock("dgram")
        fds.append(os.open(f"{U}/sock/{n}/data", os.O_RDONLY))
        os.close(h)
    park_all(len(fds), lambda i: os.read(fds[i], 16))
elif mode == "writers":
    h = os.open(f"{U}/stream/pair", os.O_RDWR)
    n = os.read(h, 64).split()[0].decode()
    nb = os.open(f"{U}/sock/{n}/data", os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(nb, b"x" * 4096)
    except BlockingIOError:
        pass
    fd = os.open(f"{U}/sock/{n}/data", os.O_WRONLY)
    park_all(int(sys.argv[2]), lambda i: os.write(fd, b"w" * int(sys.argv[3])))
PYEOF

# shellcheck disable=SC2034 # read by lib.sh
CLIENT_PY=$TMP/client.py
HOLD_WAIT_S=10
release_all() {
    release_holders
    wait_socket_count 0 5000
}
want() { # want WHAT GOT WANT
    [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
    ok "$1: $2"
}

# ---- 1. tree nodes (share 10 of 21; the root node is root's)
want "nodes, user $A" "$(as_user $A mkdirs a 20)" "made=10 then=ENOSPC"
want "nodes, user $B after $A took its share" "$(as_user $B mkdirs b 20)" "made=10 then=ENOSPC"
rc=0
err=$(mkdir "$MNT/root0" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && [[ $err == *"No space left on device"* ]] || fail "root's mkdir in a full tree: status $rc '$err'"
rmdir "$MNT/a0" "$MNT/a1"
mkdir "$MNT/root0" "$MNT/root1" || fail "root could not take the room user $A gave back"
ok "root is held by the total (ENOSPC when full), not by the share (2 more than $A's 8 + $B's 10 + 1)"
say "bound: --max-nodes 21, --user-share 50: 10 nodes per user; root exempt from the share"

# ---- 2. sockets (share 10 of 20)
hold "$TMP/sa" $A sockets 20
want "sockets, user $A" "$(cat "$TMP/sa")" "sockets=10 then=ENFILE"
hold "$TMP/sb" $B sockets 20
want "sockets, user $B while $A holds its share" "$(cat "$TMP/sb")" "sockets=10 then=ENFILE"
release_all
say "bound: --max-sockets 20, --user-share 50: 10 sockets per user (ENFILE)"

# ---- 3. parked requests (share 4 of 8)
hold "$TMP/ra" $A readers 5
want "parked reads, user $A" "$(cat "$TMP/ra")" "waiting=4 refused=ENOBUFS"
hold "$TMP/rb" $B readers 4
want "parked reads, user $B while $A holds its share" "$(cat "$TMP/rb")" "waiting=4 refused=none"
[ "$(sed -n 's/^parked=//p' "$U/gc")" = 8 ] || fail "parked=$(sed -n 's/^parked=//p' "$U/gc"), want 8"
release_all
say "bound: --max-parked 8, --user-share 50: 4 waiting requests per user (ENOBUFS)"

# ---- 4. bytes held (share 524288 of 1048576)
hold "$TMP/wa" $A writers 3 200000
want "parked 200000-byte writes, user $A" "$(cat "$TMP/wa")" "waiting=2 refused=ENOBUFS"
hold "$TMP/wb" $B writers 2 200000
want "parked 200000-byte writes, user $B while $A holds its share" "$(cat "$TMP/wb")" "waiting=2 refused=none"
grep -q "would exceed its share" "$LOG" || fail "no log line for a refused share"
release_all
say "bound: --max-held-bytes 1048576, --user-share 50: 524288 bytes per user (ENOBUFS)"

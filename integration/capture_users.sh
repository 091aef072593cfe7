#!/usr/bin/env bash
# capture_users.sh: who sees what in a capture of an --allow-other mount. User A's
# capture holds A's own conversations and the messages B sends to A's socket, never B's
# or root's own conversations; root's capture holds all of them. A mount with
# -o capture=root refuses A's open of .udsfs/capture (EACCES) and still lets root capture.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd tshark tshark
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "capture_users.sh checks udsfs captures: UDSFS_RUN_VIA must be udsfs"
A=61001
B=61002
chmod 755 "$TMP"
OUT=$TMP/out
mkdir -m 1777 "$OUT"

cat >"$OUT/talk.py" <<'EOF'
# talk.py WHO [TARGET|wait]: a dgram and a seqpacket conversation of WHO's own; with
# TARGET, also a message to the dgram socket bound at TARGET (another user's); with
# wait, it waits for one more message to its own socket.
import os, socket, sys, time
M, who = os.environ["MNT"], sys.argv[1]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.send(("%s-seqpacket" % who).encode())
b.recv(100)
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
# Bound open to everyone at once (umask 0, as on Linux): a chmod after bind would leave
# a moment in which the other user's send gets EACCES.
old = os.umask(0)
r.bind(M + "/%s.sock" % who)
os.umask(old)
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.sendto(("%s-dgram" % who).encode(), M + "/%s.sock" % who)
r.recv(100)
if len(sys.argv) > 2 and sys.argv[2] != "wait":
    while not os.path.exists(M + "/" + sys.argv[2]):
        time.sleep(0.01)
    c.sendto(("%s-to-%s" % (who, sys.argv[2])).encode(), M + "/" + sys.argv[2])
elif len(sys.argv) > 2:
    # The other user's message, so that it is queued before this ends.
    r.settimeout(20)
    r.recv(100)
EOF
chmod 644 "$OUT/talk.py"

payloads() {
    tshark -r "$1" -Y data -T fields -e data.data 2>/dev/null | python3 -c '
import sys
print(";".join(sorted(bytes.fromhex(l.strip()).decode() for l in sys.stdin if l.strip())))'
}

CAPTURE_USER=$A capture_start CAP_A "$OUT/a.pcapng"
CAPTURE_USER=0 capture_start CAP_ROOT "$OUT/root.pcapng"
run_cmd -- /usr/bin/python3 "$OUT/talk.py" a wait
start_bg TALK_A setpriv --reuid="$A" --regid="$A" --clear-groups "${RUN_CMD[@]}"
run_cmd -- /usr/bin/python3 "$OUT/talk.py" b a.sock
start_bg TALK_B setpriv --reuid="$B" --regid="$B" --clear-groups "${RUN_CMD[@]}"
run_cmd -- python3 "$OUT/talk.py" root
"${RUN_CMD[@]}" &
TALK_ROOT=$!
for p in "$TALK_A" "$TALK_B"; do
    ended_within "$p" 30000 || fail "a user's conversation did not end"
    reap "$p"
    expect_eq "conversation exit status" "$REAPED_STATUS" 0
done
wait "$TALK_ROOT" || true
capture_stop "$CAP_A"
capture_stop "$CAP_ROOT"
expect_eq "what user A's capture holds" "$(payloads "$OUT/a.pcapng")" \
    "a-dgram;a-seqpacket;b-to-a.sock"
expect_eq "what root's capture holds" "$(payloads "$OUT/root.pcapng")" \
    "a-dgram;a-seqpacket;b-dgram;b-seqpacket;b-to-a.sock;root-dgram;root-seqpacket"

# -o capture=root: A is refused, root is not.
MNT2=$TMP/mnt2
mkdir "$MNT2"
"$UDSFS_BIN" mount --background --allow-other -o capture=root --log-file "$TMP/log2" "$MNT2" >/dev/null
got=$(as_uid "$A" /usr/bin/python3 -c '
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY))
    print("OK")
except OSError as e:
    print(os.strerror(e.errno))' "$MNT2/.udsfs/capture" || true)
root_got=$(python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY)); print("OK")' "$MNT2/.udsfs/capture" || true)
"$UDSFS_BIN" umount "$MNT2" || umount -l "$MNT2"
expect_eq "user A opening .udsfs/capture on a capture=root mount" "$got" "Permission denied"
expect_eq "root opening it" "$root_got" "OK"

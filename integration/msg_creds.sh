#!/usr/bin/env bash
# SCM_CREDENTIALS through msg, read by a shell with bash builtins only: a dgram receiver
# with `passcred on` reads records from its msg file with `read -r` (header), parameter
# expansion (len=, creds=, from=) and `read -N LEN` (payload), and prints the sender's
# pid and uid from creds=. They must be the sender's real ones: a root bash, a bash
# running as nobody, a process whose real and effective uid differ (Linux reports the
# real uid and gid; checked against a kernel socket doing the same), and a
# multi-threaded python sending from a second thread (the pid is the process id, not
# the thread id). Explicit creds= are accepted when they are the caller's own, refused
# with EPERM otherwise (root may send any). Without passcred no creds= appears.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other) # other users' senders
source "$(dirname "$0")/lib.sh"
export LC_ALL=C # read -N counts bytes

command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to run senders as other users"
# the interpreter itself (a pyenv shim under /root is not executable by other users)
PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP" # mktemp -d made it 0700; other users must reach $MNT inside it

new_sock RCV dgram
ctl "$RCV_FD" "bind creds.sock" || fail "bind creds.sock"
ctl "$RCV_FD" "passcred on" || fail "passcred on"
chmod 0777 "$MNT/creds.sock" # other users connect: they need write permission on the node
expect_status "$RCV" passcred 1
exec {rmsg}<"$U/sock/$RCV/msg"
ok "receiver: dgram socket $RCV bound at creds.sock, passcred on, msg open on fd $rmsg"

# sender_done PID WHAT: wait for a background sender; it must exit 0.
sender_done() {
    ended_within "$1" 10000 || fail "$2 (pid $1) did not finish within 10 s"
    reap "$1"
    [ "$REAPED_STATUS" -eq 0 ] || fail "$2 (pid $1) exited with status $REAPED_STATUS: $(cat "$TMP/sender.err" 2>/dev/null)"
}

# expect_creds WHAT PID UID GID: read the next record (bash builtins), print and check it.
expect_creds() {
    local what=$1 pid uid gid rest
    # (a read of an empty queue would block, and bash's read -t does not work on files)
    [ "$(status_of "$RCV" rcvq_msgs)" -gt 0 ] || fail "$what: nothing queued at the receiver"
    recv_record "$rmsg" || fail "reading a record from .udsfs/sock/$RCV/msg (header '$REC_HEADER')"
    say "record: $REC_HEADER | payload: $REC_DATA"
    [ -n "$REC_CREDS" ] || fail "$what: the record carries no creds= although the receiver has passcred on"
    pid=${REC_CREDS%%:*}
    rest=${REC_CREDS#*:}
    uid=${rest%%:*}
    gid=${rest#*:}
    say "  $what: sender pid $pid, uid $uid, gid $gid (from creds=)"
    [ "$pid" == "$2" ] || fail "$what: creds pid $pid, want the sender's pid $2"
    [ "$uid" == "$3" ] || fail "$what: creds uid $uid, want the sender's real uid $3"
    [ "$gid" == "$4" ] || fail "$what: creds gid $gid, want the sender's real gid $4"
    ok "$what: creds=$REC_CREDS is the expected pid:uid:gid"
}

# ---- 1. root bash writing to .udsfs/connect/creds.sock (socket + connect + one write)
bash -c 'printf "hello from bash %s" "$$" >"$1"' bash "$U/connect/creds.sock" 2>"$TMP/sender.err" &
s=$!
sender_done "$s" "root bash sender"
expect_creds "root bash" "$s" 0 0
expect_eq "payload" "$REC_DATA" "hello from bash $s"

# ---- 2. a bash running as nobody (65534:65534)
setpriv --reuid=65534 --regid=65534 --clear-groups \
    bash -c 'printf "hello from uid %s pid %s" "$(id -u)" "$$" >"$1"' bash "$U/connect/creds.sock" 2>"$TMP/sender.err" &
s=$!
sender_done "$s" "nobody's bash sender"
expect_creds "bash as nobody" "$s" 65534 65534
expect_eq "payload" "$REC_DATA" "hello from uid 65534 pid $s"

# ---- 3. real uid/gid 65534, effective 1000: Linux puts the real ids in SCM_CREDENTIALS
oracle=$(py '
import socket, struct, subprocess
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
name = "udsfs-msg-creds-oracle-%d" % os.getpid()
s.bind("\0" + name)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
p = subprocess.Popen(["setpriv", "--ruid=65534", "--euid=1000", "--rgid=65534", "--egid=1000", "--clear-groups",
    sys.executable, "-c", "import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b\"x\", \"\\0\" + sys.argv[1])",
    name])
p.wait()
msg, anc, _, _ = s.recvmsg(16, socket.CMSG_SPACE(12))
pid, uid, gid = struct.unpack("3i", anc[0][2])
print(f"{uid}:{gid}" if pid == p.pid else f"pid {pid} != {p.pid}")
') || fail "kernel oracle for real vs effective ids"
say "kernel: a sender with real uid/gid 65534 and effective 1000 shows as $oracle in SCM_CREDENTIALS"
# (python, not bash: bash started with euid != ruid resets its euid to the ruid)
setpriv --ruid=65534 --euid=1000 --rgid=65534 --egid=1000 --clear-groups "$PY3" -c '
import os, sys
r, e, _ = os.getresuid()
rg, eg, _ = os.getresgid()
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, f"uid {r}/{e} gid {rg}/{eg} (real/effective)".encode())
' "$U/connect/creds.sock" 2>"$TMP/sender.err" &
s=$!
sender_done "$s" "sender with ruid 65534, euid 1000"
expect_creds "ruid 65534/euid 1000 sender" "$s" "${oracle%%:*}" "${oracle#*:}"
expect_eq "payload" "$REC_DATA" "uid 65534/1000 gid 65534/1000 (real/effective)"

# ---- 4. a multi-threaded sender: the write comes from a second thread
python3 -c '
import os, sys, threading
fd = os.open(sys.argv[1], os.O_WRONLY)
box = {}
def send():
    box["tid"] = threading.get_native_id()
    os.write(fd, b"from thread %d of pid %d" % (box["tid"], os.getpid()))
t = threading.Thread(target=send)
t.start()
t.join()
assert box["tid"] != os.getpid()
print(box["tid"])
' "$U/connect/creds.sock" >"$TMP/tid" 2>"$TMP/sender.err" &
s=$!
sender_done "$s" "threaded python sender"
expect_creds "python, write from thread $(cat "$TMP/tid")" "$s" 0 0
expect_eq "payload" "$REC_DATA" "from thread $(cat "$TMP/tid") of pid $s"

# ---- 5. explicit creds= through a sender's own msg file, and from= of a bound sender
setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '
    exec {c}<>"$1/dgram/clone" || exit 1
    read -r n <&"$c"
    printf "bind @nobody-sender\nconnect creds.sock\n" >&"$c" || exit 1
    printf "len=3 creds=%s:65534:65534\nown" "$$" >"$1/sock/$n/msg" || exit 1
    # someone else'"'"'s creds: must fail; its error message goes to stdout
    if err=$(printf "len=4 creds=1:0:0\nfake" 2>&1 >"$1/sock/$n/msg"); then exit 3; fi
    printf "%s\n" "$err"
' bash "$U" >"$TMP/fake.err" 2>"$TMP/sender.err" &
s=$!
sender_done "$s" "nobody sending with explicit creds="
expect_creds "nobody's own explicit creds=" "$s" 65534 65534
expect_eq "from= of the bound sender" "$REC_FROM" "@nobody-sender"
grep -q "Operation not permitted" "$TMP/fake.err" ||
    fail "nobody's write of creds=1:0:0 did not fail with EPERM: $(cat "$TMP/fake.err")"
ok "nobody's write of someone else's creds=1:0:0 failed with EPERM ($(cat "$TMP/fake.err"))"

new_sock SND dgram
ctl "$SND_FD" "connect creds.sock" || fail "connect creds.sock"
printf 'len=5 creds=1:2:3\nforge' >"$U/sock/$SND/msg" || fail "root's write of creds=1:2:3"
expect_creds "root's explicit creds=1:2:3" 1 2 3

# ---- 6. no passcred on either side: no creds= in the record
ctl "$RCV_FD" "passcred off" || fail "passcred off"
send "$SND" "no creds please" || fail "send without passcred"
expect_status "$RCV" rcvq_msgs 1
recv_record "$rmsg" || fail "reading a record"
say "record: $REC_HEADER | payload: $REC_DATA"
[ -z "$REC_CREDS" ] || fail "with passcred off on both sides the record carries creds=$REC_CREDS"
expect_eq "payload" "$REC_DATA" "no creds please"
ok "passcred off: the record has no creds= field"

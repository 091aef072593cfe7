#!/usr/bin/env bash
# Forged credentials from a user namespace (issue 27, item 1). User 65534 makes a user
# namespace of its own (`unshare -U -r`: uid_map and gid_map "0 65534 1", a full CapEff
# there) on an --allow-other mount. Linux maps the ids a sender claims through the
# sender's namespace (uid 0 claimed there is 65534 outside; an unmapped claim: EINVAL),
# and the ids a receiver gets (SO_PEERCRED, SCM_CREDENTIALS) into the receiver's
# (unmapped: the overflow id 65534); a capability counts only in the namespace it is
# held in: another pid (CAP_SYS_ADMIN over the pid namespace), SO_RCVBUFFORCE and
# SO_SNDBUFFORCE (CAP_NET_ADMIN in the initial one) get EPERM.
#  1. tests/conformance/userns_creds.py on kernel sockets (the oracle), through
#     `udsfs run` (the library) and through `udsfs run --front seccomp`: equal results;
#  2. the same through the files: creds= written to a msg file from inside the
#     namespace, "sndbufforce"/"rcvbufforce" commands, and the creds= of records a
#     receiver inside the namespace reads, each compared with the kernel's answer;
#  3. act-for: user 65534 acting for its child in a user namespace the child made
#     (full CapEff there): allowed, as the kernel's ptrace allows it;
#  4. a socket made before unshare(CLONE_NEWNET) and bound after it files its abstract
#     name in the namespace it was made in (sock_net), one made after in the new one:
#     tests/conformance/netns_late_bind.py, the kernel against `udsfs run` (the library
#     and the supervisor).
# Each step prints what it tried and what it got.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C
need_preload
need_cmd setpriv util-linux
need_cmd unshare util-linux
chmod o+x "$TMP" # the mount is inside; user 65534 must reach it
mkdir -m 0777 "$TMP/w" # where user 65534 leaves a sign
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$(python3 -c 'import sys; print(sys.executable)')
# in_userns CMD...: CMD as user 65534 in a user namespace of its own (root there).
in_userns() { setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U -r "$@"; }
expect_eq "uid_map inside 'unshare -U -r' as 65534" "$(in_userns cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')" "0 65534 1"

# ---- 1. the socket API: the kernel, the library, the supervisor
PROG=$ROOT/tests/conformance/userns_creds.py
kernel_vs_udsfs "$PROG"
say "--- what the kernel answered (the library answered the same):"
cat "$TMP/kernel.out"
# seccomp_like_kernel PROG: PROG under `udsfs run --front seccomp` answers as the
# kernel did in the last kernel_vs_udsfs run ($TMP/kernel.out).
seccomp_like_kernel() {
    UDSFS_PRELOAD=$PRELOAD_LIB timeout 120 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- \
        python3 "$1" "$MNT" >"$TMP/seccomp.out" 2>"$TMP/seccomp.err" ||
        fail "the program fails under --front seccomp: $(tail -3 "$TMP/seccomp.err")"
    grep -qx 'where: udsfs' "$TMP/seccomp.out" || fail "the supervised run did not use udsfs sockets"
    if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/seccomp.out") >"$TMP/diff"; then
        cat "$TMP/diff" >&2
        fail "udsfs run --front seccomp answered differently from the kernel (< kernel, > udsfs)"
    fi
    ok "udsfs run --front seccomp: the same $(wc -l <"$TMP/seccomp.out") results as the kernel"
}
seccomp_like_kernel "$PROG"

# ---- 2. the files
new_sock R dgram
expect_ok ctl "$R_FD" "bind @userns-root"
expect_ok ctl "$R_FD" "passcred on"
exec {rmsg}<"$U/sock/$R/msg"
# next_creds: the creds= of the next record at root's receiver.
next_creds() {
    [ "$(status_of "$R" rcvq_msgs)" -gt 0 ] || fail "nothing queued at root's receiver"
    recv_record "$rmsg" || fail "reading a record from root's msg file"
    say "  root's receiver read: $REC_HEADER | $REC_DATA"
}
# (each claim's write: its errno name, or ok)
in_userns bash -c '
    exec 3<>"$1/dgram/clone"; read -r n <&3
    # (the write in this shell, not a subshell: creds= names this shell'"'"'s pid)
    e=$(mktemp)
    try() { if printf "len=%d to=@userns-root creds=%s\n%s" ${#2} "$1" "$2" >"$U/sock/$n/msg" 2>"$e"; then echo "$2: ok"; else err=$(cat "$e"); echo "$2: ${err##*: }"; fi; }
    U=$1
    try "$$:0:0" own-0-0
    try "$$:1000:0" uid-1000
    try "$$:0:1000" gid-1000
    try "1:0:0" pid-1
    for c in "sndbufforce 65536" "rcvbufforce 65536" "sndbuf 65536"; do
        if err=$( { echo "$c" >&3; } 2>&1); then echo "$c: ok"; else echo "$c: ${err##*: }"; fi
    done
    echo "pid $$"
    rm -f "$e"
' bash "$U" >"$TMP/files.out" 2>&1
cat "$TMP/files.out"
grep -q '^pid ' "$TMP/files.out" || fail "the writer in the namespace did not finish"
got=$(grep -v '^pid ' "$TMP/files.out" | tr '\n' ';')
want="own-0-0: ok;uid-1000: Invalid argument;gid-1000: Invalid argument;pid-1: Operation not permitted;"
want+="sndbufforce 65536: Operation not permitted;rcvbufforce 65536: Operation not permitted;sndbuf 65536: ok;"
expect_eq "claims and FORCE commands from the namespace (Linux's answers)" "$got" "$want"
wpid=$(sed -n 's/^pid //p' "$TMP/files.out")
next_creds
expect_eq "root's record of the claim 0:0 from the namespace" "$REC_DATA $REC_CREDS" "own-0-0 $wpid:65534:65534"
expect_status "$R" rcvq_msgs 0
ok "through msg: uid 0 claimed in the namespace arrives as 65534, unmapped and foreign claims are refused"

# A receiver in the namespace reads records from root (unmapped: 65534) and from user
# 65534 outside (0 inside).
in_userns bash -c '
    exec 3<>"$1/dgram/clone"; read -r n <&3
    echo "bind @userns-inner" >&3 && echo "passcred on" >&3 || exit 1
    : >"$2" || exit 1
    exec 4<"$1/sock/$n/msg"
    for i in 1 2 3; do IFS= read -r h <&4; read -r -N 3 d <&4; echo "$h | $d"; done
' bash "$U" "$TMP/w/inner-ready" >"$TMP/inner.out" 2>&1 &
inner=$!
wait_for "$TMP/w/inner-ready" 10 "the receiver in the namespace did not bind" "$TMP/inner.out"
new_sock S dgram
expect_ok ctl "$S_FD" "connect @userns-inner"
send "$S" r-i
printf 'len=3 creds=%s:1000:1000\nr-c' "$$" >"$U/sock/$S/msg" || fail "root's claim of 1000:1000"
as_uid 65534 bash -c 'exec 3<>"$1/dgram/clone"; read -r n <&3; echo "connect @userns-inner" >&3 && printf n-i >"$1/sock/$n/data"' bash "$U" ||
    fail "user 65534's send to the receiver in the namespace"
ended_within "$inner" 10000 || fail "the receiver in the namespace did not get three records"
reap "$inner"
cat "$TMP/inner.out"
got=$(sed 's/.*creds=[0-9]*:\([0-9]*:[0-9]*\).* | \(.*\)/\2 \1/' "$TMP/inner.out" | tr '\n' ';')
expect_eq "creds= a receiver in the namespace reads (Linux: from_kuid_munged)" "$got" "r-i 65534:65534;r-c 65534:65534;n-i 0:0;"
ok "through msg: a receiver in the namespace sees root as 65534 and user 65534 as 0"
# The status file's peercred= as its reader in the namespace would get SO_PEERCRED:
# its own socketpair's is its own ids there (0:0), as the kernel gave above.
got=$(in_userns bash -c 'exec 3<"$1/dgram/pair"; read -r n m <&3; sed -n "s/^peercred=[0-9]*://p" "$1/sock/$n/status"' bash "$U")
say "peercred= of its own socketpair, read in the namespace: $got"
expect_eq "peercred= read in the namespace" "$got" "0:0"

# ---- 3. act-for (the supervisor's grant, src/fuse/actfor.rs) of a child in a user
# namespace of its own, whose CapEff is full there: user 65534 may ptrace it (it owns
# the namespace), so it may act for it; the kernel's PTRACE_SEIZE is the oracle.
chmod 0777 "$MNT" # a user.* xattr on a sticky directory is its owner's only
cat >"$TMP/w/actfor.py" <<'PYEOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *a):
    return "ok" if f(*a) == 0 else os.strerror(ctypes.get_errno())
up, down = os.pipe(), os.pipe()  # child to parent, parent to child
pid = os.fork()
if pid == 0:
    r = libc.unshare(0x10000000)  # CLONE_NEWUSER
    os.write(up[1], b"u" if r == 0 else b"-")
    os.read(down[0], 1)
    os._exit(0)
print("the child's unshare -U:", "ok" if os.read(up[0], 1) == b"u" else "failed")
with open(f"/proc/{pid}/status") as f:
    cap = [l.split()[1] for l in f if l.startswith("CapEff")][0]
print("child's CapEff in its namespace:", cap)
try:
    os.setxattr(sys.argv[1], "user.udsfs.act_for", str(pid).encode())
    got = "ok"
except OSError as e:
    got = e.strerror
print("act_for the child:", got)
if got == "ok":
    os.setxattr(sys.argv[1], "user.udsfs.act_for", b"0")
print("PTRACE_SEIZE the child (kernel):", call(libc.ptrace, 0x4206, pid, None, None))
os.write(down[1], b"x")
os.waitpid(pid, 0)
PYEOF
as_uid 65534 "$PY3" "$TMP/w/actfor.py" "$MNT" >"$TMP/actfor.out" 2>&1 || fail "the act-for probe: $(cat "$TMP/actfor.out")"
cat "$TMP/actfor.out"
expect_eq "act_for a child in its own user namespace, and the kernel's ptrace" \
    "$(grep -v CapEff "$TMP/actfor.out" | tr '\n' ';')" "the child's unshare -U: ok;act_for the child: ok;PTRACE_SEIZE the child (kernel): ok;"

# ---- 4. a socket made before unshare(CLONE_NEWNET) keeps its namespace
kernel_vs_udsfs "$ROOT/tests/conformance/netns_late_bind.py"
cat "$TMP/kernel.out"
seccomp_like_kernel "$ROOT/tests/conformance/netns_late_bind.py"

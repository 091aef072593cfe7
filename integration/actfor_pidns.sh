#!/usr/bin/env bash
# Act-for from a pid namespace of its own (src/supervisor/actfor.rs, src/fuse/actfor.rs
# `in_daemon_ns`): `udsfs run` started inside `unshare -Urnpf --mount-proc` names the
# threads it acts for by their ids there; the daemon must find them in its own
# namespace, and nothing else. Each part prints what it tried and what it got:
#  1. integration/actfor_pidns.c (static: the supervisor carries it) as user R in a
#     user, pid and network namespace of its own, on the kernel and through `udsfs run
#     --front seccomp` started in the same namespaces: a child's SCM_CREDENTIALS
#     (explicit and filled in), SO_PEERCRED both ways, and SIGIO to an owner named by
#     F_SETOWN getpid() must be the kernel's (with the grants refused, the credentials
#     were the supervisor's and no SIGIO came), with nothing on udsfs run's stderr.
#  2. user B's hand-written client of the grant (fsetxattr `user.udsfs.act_for` on a
#     socket's data file) in a user and pid namespace of its own, holding a pidfd of
#     user A's process V (opened outside): naming V's number bare, with V's pidfd, and
#     its own child made to have V's number there with V's pidfd is refused; naming that
#     child with the child's pidfd is granted, and then SCM_CREDENTIALS with A's ids is
#     refused, while its child's own reach root's receiver as the child's pid in the
#     daemon's namespace, not V.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C
need_preload
need_static_gcc
need_cmd unshare util-linux setpriv util-linux
for_other_users sig
R=61071
A=61072
B=61073
RUNTMP=$TMP/runtmp
mkdir -m 1777 "$RUNTMP" "$TMP/k"
gcc -static -O1 -Wall -Werror -o "$TMP/actfor_pidns" "$LIB_DIR/actfor_pidns.c" ||
    fail "gcc -static of actfor_pidns.c"
chmod 755 "$TMP/actfor_pidns"
in_own_ns() { as_uid $R unshare -Urnpf --mount-proc "$@"; }

# ---- 1. the static program in its own namespaces: kernel, then udsfs run there
in_own_ns "$TMP/actfor_pidns" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "1. the program fails on kernel sockets: $(cat "$TMP/kernel.out" "$TMP/kernel.err")"
say "1. kernel: $(paste -sd';' "$TMP/kernel.out")"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "1. the kernel run did not use kernel sockets"
in_own_ns env TMPDIR="$RUNTMP" timeout 60 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- \
    "$TMP/actfor_pidns" "$MNT" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "1. the program fails through udsfs run: $(cat "$TMP/udsfs.out" "$TMP/udsfs.err")"
say "1. udsfs run: $(paste -sd';' "$TMP/udsfs.out")"
say "1. udsfs run's stderr: $(cat "$TMP/udsfs.err")"
same_as_kernel "$TMP/udsfs.out" "$TMP/udsfs.err" "1. udsfs run in a pid namespace of its own"

# ---- 2. a hand-written client in a pid namespace of its own
new_sock RECV dgram
ctl "$RECV_FD" "bind @pidns_recv" || fail "2. bind @pidns_recv"
ctl "$RECV_FD" "passcred on" || fail "2. passcred on"
setpriv --reuid=$A --regid=$A --clear-groups sleep 60 &
V=$!
cat >"$TMP/outer.py" <<'PY'
# As user B: a pidfd of A's process V, kept open across unshare into att.py.
import os, sys
v = int(sys.argv[1])
fd = os.pidfd_open(v)
os.set_inheritable(fd, True)
os.execvp("unshare", ["unshare", "-Urpf", "--mount-proc", sys.executable,
                      sys.argv[2], str(v), str(fd)])
PY
cat >"$TMP/att.py" <<'PY'
# In B's user and pid namespace (pid 1 there): grants through its own socket's data file.
import os, sys, time
sys.path.insert(0, os.environ["LIB"])
from udsfs_files import err as res
U, S = os.environ["U"], os.environ["S"]
V, VFD = int(sys.argv[1]), int(sys.argv[2])
X = "user.udsfs.act_for"
c = os.open(U + "/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
data = os.open(f"{U}/sock/{n}/data", os.O_RDWR)
msg = os.open(f"{U}/sock/{n}/msg", os.O_RDWR)

def grant(v):
    r = res(os.setxattr, data, X, v.encode())
    return "granted" if r == "OK" else "refused"

def creds(pid, uid, gid):
    return res(os.write, msg, f"len=1 to=@pidns_recv creds={pid}:{uid}:{gid}\nx".encode())

def report(what, got):
    print(f"{what}: {got}", flush=True)

report(f"V's number {V} bare, no such thread here", grant(f"{V}"))
report(f"V's number {V} with V's pidfd", grant(f"{V} pidfd={VFD}"))
# A child whose id here is V's in the daemon's namespace.
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(V - 1))
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.read(r, 1)
    os._exit(0)
report("its child's id here is V's", child == V)
# Root of its namespaces, it may name its child's pid in SCM_CREDENTIALS (message 1).
report(f"SCM_CREDENTIALS {V}:0:0 as itself, naming its child (no grant)", creds(child, 0, 0))
report(f"its child {V} with V's pidfd", grant(f"{child} pidfd={VFD}"))
report(f"its child {V} with a pidfd of itself (1)", grant(f"{child} pidfd={os.pidfd_open(1)}"))
report(f"its child {V} with the child's pidfd (control)", grant(f"{child} pidfd={os.pidfd_open(child)}"))
report(f"SCM_CREDENTIALS {V}:{os.environ['A']}:{os.environ['A']} (A's ids) as its child",
       creds(child, os.environ["A"], os.environ["A"]))
# Message 2.
report(f"SCM_CREDENTIALS {V}:0:0 as its child (control)", creds(child, 0, 0))
open(S + "/sent", "w").close()
while not os.path.exists(S + "/looked"):
    time.sleep(0.02)
os.write(w, b"g")
os.waitpid(child, 0)
PY
chmod 644 "$TMP/outer.py" "$TMP/att.py"
as_uid $B env U="$U" A=$A S="$S" LIB="$LIB_DIR" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$TMP/outer.py" "$V" "$TMP/att.py" >"$TMP/att.out" 2>&1 &
CLIENT=$!
wait_for "$S/sent" 20 "2. the client did not get to its sends" "$TMP/att.out"
EXCEPTIONS=$LIB_DIR/actfor_pidns_exceptions.txt
failed=()
# received CASE: the credentials of the next message root's receiver has, read while
# B's child lives: its pid must be the child's in the daemon's namespace (B's process
# whose innermost id is V), as the kernel gives it, not A's V.
received() {
    local got pid nspid uid good=0
    got=$(timeout 5 dd bs=65536 count=1 status=none <"$U/sock/$RECV/msg" | head -1) || true
    pid=$(sed -n 's/.* creds=\([0-9]*\):.*/\1/p' <<<"$got")
    nspid=$(sed -n 's/^NSpid:\s*//p' "/proc/${pid:-0}/status" 2>/dev/null | tr -s '\t ' ' ') || true
    uid=$(awk '/^Uid:/ {print $2}' "/proc/${pid:-0}/status" 2>/dev/null) || true
    [ -n "$pid" ] && [ "$pid" != "$V" ] && [ "${nspid##* }" = "$V" ] && [ "$uid" = "$B" ] && good=1
    # A's process's pid is a forgery whatever the exceptions say.
    [ "$pid" = "$V" ] && failed+=("$1: FORGED: root's receiver got A's pid $V from B")
    verdict "$1" $good "root's receiver got '${got:-nothing}': pid ${pid:-none} (NSpid ${nspid:-none}, uid ${uid:-none}); B's child is the process whose innermost id is $V, A's process is $V"
}
# Message 1 (B names its child, no grant): sent with the child's pid on Linux; refused
# here (the daemon does not look a pid of another namespace up there, and never takes it
# as one of its own: src/engine/pidns.rs from_sender).
named=$(grep -F -- "SCM_CREDENTIALS $V:0:0 as itself, naming its child (no grant): " "$TMP/att.out" | head -1)
named=${named##*: }
if [ "$named" = OK ]; then
    received creds_named_child_translated
else
    verdict creds_named_child_translated 0 "the send naming its child was refused (${named:-no answer}) where Linux sends it with the child's pid"
fi
received creds_as_child_granted
touch "$S/looked"
wait "$CLIENT" || fail "2. the client failed: $(cat "$TMP/att.out")"
sed 's/^/    /' "$TMP/att.out"
want() {
    local line
    line=$(grep -F -- "$1: " "$TMP/att.out" | head -1)
    if [ "$line" = "$1: $2" ]; then
        ok "2. $line"
    else
        failed+=("want '$1: $2', got '${line:-nothing}'")
    fi
}
want "V's number $V bare, no such thread here" refused
want "V's number $V with V's pidfd" refused
want "its child's id here is V's" True
want "its child $V with V's pidfd" refused
want "its child $V with a pidfd of itself (1)" refused
want "its child $V with the child's pidfd (control)" granted
# (A's ids are not mapped in B's user namespace: the kernel says EINVAL there too.)
want "SCM_CREDENTIALS $V:$A:$A (A's ids) as its child" EINVAL
want "SCM_CREDENTIALS $V:0:0 as its child (control)" OK
kill "$V" 2>/dev/null || true
[ ${#failed[@]} -eq 0 ] || fail "2. $(printf '%s; ' "${failed[@]}")"
ok "2. from its own pid namespace, B acts for its own child only"

#!/usr/bin/env bash
# Attacks on act-for (src/fuse/actfor.rs) by unprivileged users of an --allow-other
# mount. A grant makes the daemon take the granted thread's requests as the target's
# (pid, ids, capabilities), so each attack tries to act for a principal the caller
# could not ptrace; the probe is an explicit SCM_CREDENTIALS (creds= on msg) that
# only the target may send. Each attack prints what it tried and what it got:
#  1. act for root's process, for the caller's parent, for a sibling, for itself, for
#     init: EPERM;
#  2. forged values: negative, huge, non-numeric, hex, a value with junk: EINVAL;
#     empty and "0" clear (OK); another inode, another name: ENOTSUP;
#  3. a child that already runs a setuid-root program (passwd, waiting on its
#     stdin): EPERM;
#  4. a child granted first that then execs the setuid-root program: creds with
#     uid 0 and pid 1 must be refused (EPERM), the grant must not follow the exec;
#  5. a grant whose target exits and whose pid a root process then gets
#     (kernel.ns_last_pid): creds with uid 0 and pid 1: EPERM;
#  6. a grant does not leak: another thread of the granting process and a forked
#     child of it sending the target's pid get EPERM; the granted thread itself OK;
#  7. user 40001 acting for user 65534's child: EPERM;
#  1b. a send ioctl naming the thread it is made for (MsgHead's act_for): its
#     child without a grant, root's process, its child from another thread than
#     the granted one, root's process while granted for its child: EPERM (the
#     granted thread naming its child: OK); after 5, the pid root's process got;
#     after 7, user 40001 naming user 65534's process: EPERM;
#  8. on a mount without --allow-other, user 65534 setting act_for: the kernel refuses
#     it before the daemon hears of it (EPERM, the sticky rule coming first; a stat of
#     the root: EACCES).
# The mount root is sticky (1777), and Linux lets only its owner set a user.* xattr on
# a sticky directory: first that is checked (EPERM for user 65534), then root makes
# the root 0777, as an administrator may, so that the daemon's own checks face users.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C

[ -u /usr/bin/passwd ] || fail "a setuid-root program is needed: /usr/bin/passwd is not setuid"
# the system's interpreter: one under /root (pyenv) is not executable by other users
PY3=/usr/bin/python3
[ -x $PY3 ] || PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP"
A=65534
B=40001

# root's receiver, as in integration/isolation.sh
new_sock R dgram
ctl "$R_FD" "bind @rootd" || fail "bind @rootd"
ctl "$R_FD" "passcred on" || fail "passcred on"

with_helpers "$TMP/att.py" actfor_lib.py <<'PYEOF'
M, U = os.environ["MNT"], os.environ["U"]
X = "user.udsfs.act_for"
mode = sys.argv[1]

def grant(v):
    return err(os.setxattr, M, X, v if isinstance(v, bytes) else str(v).encode())

c = os.open(U + "/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
m = os.open(f"{U}/sock/{n}/msg", os.O_RDWR)

def creds(pid, uid, gid):
    return err(os.write, m, f"len=1 to=@rootd creds={pid}:{uid}:{gid}\nx".encode())

DATA = f"{U}/sock/{n}/data"
RECV = "rootd"  # named() sends to it

if mode == "basic":
    report("act_for root's process", grant(sys.argv[2]))
    report("act_for the parent", grant(os.getppid()))
    sib, w = child()
    # a sibling: a child of the parent, made by a grandchild that exits
    pid = os.fork()
    if pid == 0:
        report("act_for a sibling (the parent's other child)", grant(sib))
        os._exit(0)
    os.waitpid(pid, 0)
    report("act_for itself", grant(os.getpid()))
    report("act_for its own other thread", grant(threading.get_native_id()))
    report("act_for init", grant(1))
    for v in [b"-1", b"-5", b"99999999999999999999", b"4294967296", b"abc", b"0x10",
              str(sib).encode() + b"x", b"\xff\xfe", b"1 2"]:
        report(f"act_for value {v!r}", grant(v))
    report("act_for 4294967295 (no such thread)", grant(b"4294967295"))
    report("act_for empty (clears)", grant(b""))
    report("act_for 0 (clears)", grant(b"0"))
    report("act_for on a file of the mount", err(os.setxattr, U + "/unix", X, b"1"))
    report("another xattr name on the root", err(os.setxattr, M, "user.udsfs.other", b"1"))
    report("removexattr", err(os.removexattr, M, X))
    report("listxattr", err(os.listxattr, M))
    os.write(w, b"g")
    os.waitpid(sib, 0)
elif mode == "setuid-first":
    pid, w = child(["/usr/bin/passwd"])
    os.write(w, b"g")
    report("the child runs passwd with euid 0", wait_euid0(pid))
    report("act_for a child running a setuid program", grant(pid))
    os.kill(pid, 9)
    os.waitpid(pid, 0)
elif mode == "setuid-after":
    pid, w = child(["/usr/bin/passwd"])
    report("act_for its child (before exec)", grant(pid))
    report("creds of the child (control, before exec)", creds(pid, os.getuid(), os.getgid()))
    os.write(w, b"g")
    report("the child runs passwd with euid 0", wait_euid0(pid))
    report("creds 1:0:0 after the child's setuid exec", creds(1, 0, 0))
    report(f"creds {pid}:0:0 after the child's setuid exec", creds(pid, 0, 0))
    os.kill(pid, 9)
    os.waitpid(pid, 0)
elif mode == "reuse":
    pid, w = child()
    report("act_for its child", grant(pid))
    os.write(w, b"g")
    os.waitpid(pid, 0)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    while not os.path.exists(sys.argv[2] + ".go"):
        time.sleep(0.02)
    report("root's process has the pid", open(sys.argv[2] + ".go").read().strip())
    report("creds 1:0:0 after the target's pid went to root", creds(1, 0, 0))
    report("named send for the pid root's process got", named(pid, pid, 0, 0))
elif mode == "leak":
    pid, w = child()
    report("act_for its child", grant(pid))
    out = {}
    t = threading.Thread(target=lambda: out.update(t=creds(pid, os.getuid(), os.getgid())))
    t.start()
    t.join()
    report("creds with the target's pid from another thread", out["t"])
    f = os.fork()
    if f == 0:
        report("creds with the target's pid from a forked child", creds(pid, os.getuid(), os.getgid()))
        os._exit(0)
    os.waitpid(f, 0)
    report("creds with the target's pid from the granted thread (control)", creds(pid, os.getuid(), os.getgid()))
    report("clear", grant(b"0"))
    report("creds with the target's pid after clearing", creds(pid, os.getuid(), os.getgid()))
    os.write(w, b"g")
    os.waitpid(pid, 0)
elif mode == "named":
    pid, w = child()
    me = (os.getuid(), os.getgid())
    report("named send for its child without a grant", named(pid, pid, *me))
    report("named send for root's process", named(int(sys.argv[2]), int(sys.argv[2]), 0, 0))
    report("act_for its child", grant(pid))
    report("named send for its child from the granted thread (control)", named(pid, pid, *me))
    out = {}
    t = threading.Thread(target=lambda: out.update(t=named(pid, pid, *me)))
    t.start()
    t.join()
    report("named send for its child from another thread", out["t"])
    report("named send for root's process while granted for its child",
           named(int(sys.argv[2]), int(sys.argv[2]), 0, 0))
    os.write(w, b"g")
    os.waitpid(pid, 0)
elif mode == "other-user":
    report("user 40001 act_for user 65534's process", grant(sys.argv[2]))
    p = int(sys.argv[2])
    report("user 40001 named send for user 65534's process", named(p, p, 65534, 65534))
PYEOF

FAILS=0
# attack NAME WANT-LINE...: compare each printed line with the wanted one.
attack() {
    local out=$1 what got
    shift
    say "$out" | sed 's/^/    /'
    for want in "$@"; do
        what=${want%%: *}
        got=$(grep -F -- "$what: " <<<"$out" | head -n1)
        if [ "$got" = "$want" ]; then
            ok "$want"
        else
            say "GOT THROUGH or changed: want '$want', got '${got:-nothing}'"
            FAILS=$((FAILS + 1))
        fi
    done
}
run_as() {
    local u=$1
    shift
    as_uid "$u" env MNT="$MNT" U="$U" "$PY3" "$TMP/att.py" "$@" 2>&1
}

say "-- 0: the sticky root"
attack "$(as_uid $A "$PY3" -c '
import errno, os, sys
try:
    os.setxattr(sys.argv[1], "user.udsfs.act_for", b"0")
    print("act_for on the sticky root: OK")
except OSError as e:
    print("act_for on the sticky root:", errno.errorcode[e.errno])' "$MNT" 2>&1)" "act_for on the sticky root: EPERM"
chmod 0777 "$MNT" || fail "chmod 0777 the mount root"

sleep 60 &
ROOTP=$!
say "-- 1, 2: strangers and forged values (user $A)"
attack "$(run_as $A basic $ROOTP)" \
    "act_for root's process: EPERM" "act_for the parent: EPERM" \
    "act_for a sibling (the parent's other child): EPERM" "act_for itself: EPERM" \
    "act_for its own other thread: EPERM" "act_for init: EPERM" \
    "act_for value b'-1': EINVAL" "act_for value b'-5': EINVAL" \
    "act_for value b'99999999999999999999': EINVAL" "act_for value b'4294967296': EINVAL" \
    "act_for value b'abc': EINVAL" "act_for value b'0x10': EINVAL" \
    "act_for value b'\\xff\\xfe': EINVAL" "act_for value b'1 2': EINVAL" \
    "act_for 4294967295 (no such thread): ESRCH" \
    "act_for empty (clears): OK" "act_for 0 (clears): OK" \
    "act_for on a file of the mount: EACCES" "another xattr name on the root: ENOTSUP"

say "-- 1b: a send ioctl naming the thread it is made for (MsgHead::act_for, user $A)"
attack "$(run_as $A named $ROOTP)" \
    "named send for its child without a grant: EPERM" "named send for root's process: EPERM" \
    "act_for its child: OK" "named send for its child from the granted thread (control): OK" \
    "named send for its child from another thread: EPERM" \
    "named send for root's process while granted for its child: EPERM"
kill "$ROOTP" 2>/dev/null || true
wait "$ROOTP" 2>/dev/null || true

say "-- 3: a child already running a setuid-root program"
attack "$(run_as $A setuid-first)" \
    "the child runs passwd with euid 0: True" "act_for a child running a setuid program: EPERM"

say "-- 4: a child granted, then it execs a setuid-root program"
attack "$(run_as $A setuid-after)" \
    "act_for its child (before exec): OK" "creds of the child (control, before exec): OK" \
    "the child runs passwd with euid 0: True" "creds 1:0:0 after the child's setuid exec: EPERM"

say "-- 5: the target exits and root's process gets its pid"
mkdir -m 0777 "$TMP/x"
run_as $A reuse "$TMP/x/reuse" >"$TMP/reuse.out" &
ATT=$!
for _ in $(seq 500); do [ -e "$TMP/x/reuse" ] && break; sleep 0.02; done
[ -e "$TMP/x/reuse" ] || fail "the attacker did not print its target's pid: $(cat "$TMP/reuse.out")"
P=$(cat "$TMP/x/reuse")
SP=
for _ in $(seq 50); do
    echo $((P - 1)) >/proc/sys/kernel/ns_last_pid
    sleep 60 &
    SP=$!
    [ "$SP" = "$P" ] && break
    kill "$SP" 2>/dev/null || true
    wait "$SP" 2>/dev/null || true
    SP=
done
echo "${SP:-none}" >"$TMP/x/reuse.go"
wait "$ATT"
if [ -n "$SP" ]; then
    attack "$(cat "$TMP/reuse.out")" "act_for its child: OK" "root's process has the pid: $P" \
        "creds 1:0:0 after the target's pid went to root: EPERM" \
        "named send for the pid root's process got: EPERM"
    kill "$SP" 2>/dev/null || true
    wait "$SP" 2>/dev/null || true
else
    say "    (pid $P could not be given to a root process: skipped)"
fi

say "-- 6: a grant stays with its thread"
attack "$(run_as $A leak)" \
    "act_for its child: OK" "creds with the target's pid from another thread: EPERM" \
    "creds with the target's pid from a forked child: EPERM" \
    "creds with the target's pid from the granted thread (control): OK" \
    "clear: OK" "creds with the target's pid after clearing: EPERM"

say "-- 7: another user's child"
setpriv --reuid=$A --regid=$A --clear-groups sleep 60 &
AP=$!
sleep 0.2
attack "$(run_as $B other-user $AP)" "user 40001 act_for user 65534's process: EPERM" \
    "user 40001 named send for user 65534's process: EPERM"
kill "$AP" 2>/dev/null || true
wait "$AP" 2>/dev/null || true

say "-- 8: a mount without --allow-other"
udsfs_unmount
udsfs_mount
attack "$(as_uid $A "$PY3" -c '
import errno, os, sys
try:
    os.setxattr(sys.argv[1], "user.udsfs.act_for", b"1")
    print("act_for on a private mount: OK")
except OSError as e:
    print("act_for on a private mount:", errno.errorcode[e.errno])
try:
    os.stat(sys.argv[1] + "/.udsfs")
    print("stat on a private mount: OK")
except OSError as e:
    print("stat on a private mount:", errno.errorcode[e.errno])' "$MNT" 2>&1)" "act_for on a private mount: EPERM" \
    "stat on a private mount: EACCES"

[ "$FAILS" -eq 0 ] || fail "$FAILS act-for attacks got through"
ok "act-for: every attack refused"

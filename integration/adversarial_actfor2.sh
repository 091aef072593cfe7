#!/usr/bin/env bash
# More attacks on act-for (src/fuse/actfor.rs) and its neighbours by a second,
# unprivileged user of an --allow-other mount (user 65534, also as "root" of a user
# namespace of its own). Each case prints what it tried and what it got; the verdict
# compares it with what Linux would allow. A case listed in
# integration/adversarial_actfor2_exceptions.txt is a known defect whose fix belongs to
# another area: it must fail as listed, and the script fails once it passes (then
# unlist it). Cases:
#  setuid_exec_creds  B grants for its own child (allowed: its user, its tree), the child
#                     then execs a setuid-root program (passwd, waiting on its stdin);
#                     B's granted thread then sends SCM_CREDENTIALS with the child's pid
#                     and B's own ids: Linux lets only the pid's owner (or CAP_SYS_ADMIN)
#                     send that pid, and the grant must end at the exec (EPERM). A grant
#                     that kept the status read when it was set let B speak as the
#                     setuid process for as long as it ran.
#  setuid_exec_named  the same through a send ioctl naming the child (MsgHead's act_for).
#  filecap_exec_*     the same with a program that has file capabilities
#                     (cap_net_bind_service+ep on a copy of sleep): B's child keeps B's
#                     ids through the exec, only its capabilities grow, so ptrace would
#                     no longer let B in. The daemon checks a grant at each request by the
#                     thread's pidfd (PIDFD_GET_INFO: ids only) and capget, not by its
#                     status: this is the case the ids alone would miss (EPERM, both).
#  userns_security    B as "root" of `unshare -U -r` (CapEff full in its own namespace)
#                     sets security.udsfs.act_for on a socket file of its own, naming its
#                     own child: the kernel asks CAP_SYS_ADMIN over the mount's namespace
#                     (the initial one): EPERM.
#  grant_stall        B's 1,500 threads (its nproc allows them) each take a grant for
#                     B's own child, and 4 of them clear and set theirs in a loop: every
#                     request of every user waits for the grants' lock while a grant is
#                     set, and past 1,024 grants each set swept all of them (two /proc
#                     reads each) under it. A's 200 stats of the mount root must take
#                     within 10x of their time without B (plus 300 ms).
#  ticket_pidns       B in `unshare -Upfr --mount-proc` (its thread ids another
#                     namespace's) takes a ticket of its own listener (it may), then
#                     opens root's ticket whose number it was given: ENOENT (a ticket is
#                     its holder's thread's and user's), and root still takes it.
#  pidfd_uncharged    on a daemon whose RLIMIT_NOFILE is 1024 (clients' budget 512,
#                     src/engine/fds.rs) and each user's share 10% of it (51), B's 256
#                     threads each grant a child of B's own (allowed): the daemon keeps
#                     a pidfd of each granting thread and of each target
#                     (src/fuse/actfor.rs, up to 256 grants and 256 checked targets); uncharged,
#                     525 came out of the 256 the daemon keeps back for itself (FUSE,
#                     /proc reads). Each is charged to the setter's share, and past it
#                     a grant is checked by /proc instead: at most 64 more descriptors
#                     than before B, and every grant held.
#  userns_root_proc   B in `unshare -U -r` names root's process in user.udsfs.act_for
#                     and in a named send: EPERM (the daemon judges B's ids and
#                     capabilities in the initial namespace).
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C

[ -u /usr/bin/passwd ] || fail "a setuid-root program is needed: /usr/bin/passwd is not setuid"
command -v setcap >/dev/null || fail "setcap is needed (package libcap2-bin)"
PY3=/usr/bin/python3
[ -x $PY3 ] || fail "/usr/bin/python3 is missing (package python3)"
chmod o+x "$TMP"
B=65534
EXCEPTIONS=$LIB_DIR/adversarial_actfor2_exceptions.txt

# root's receiver, as in adversarial_actfor.sh
new_sock R dgram
ctl "$R_FD" "bind @rootd2" || fail "bind @rootd2"
ctl "$R_FD" "passcred on" || fail "passcred on"
# The daemon's own checks face users, not the sticky root's rule (adversarial_actfor.sh 0).
chmod 0777 "$MNT" || fail "chmod 0777 the mount root"

with_helpers "$TMP/att2.py" actfor_lib.py <<'PYEOF'
M, U = os.environ["MNT"], os.environ["U"]
X = "user.udsfs.act_for"
XS = "security.udsfs.act_for"
mode = sys.argv[1]

c = os.open(U + "/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
m = os.open(f"{U}/sock/{n}/msg", os.O_RDWR)
DATA = f"{U}/sock/{n}/data"
RECV = "rootd2"  # named() sends to it

def grant(v, name=X, path=None):
    return err(os.setxattr, path or M, name, str(v).encode())

def creds(pid, uid, gid):
    return err(os.write, m, f"len=1 to=@rootd2 creds={pid}:{uid}:{gid}\nx".encode())

me = (os.getuid(), os.getgid())
def cap_eff(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)

if mode == "filecap-exec":
    pid, w = child([sys.argv[2], "60"])
    report("act_for its child (before exec)", grant(pid))
    report("creds of the child (control, before exec)", creds(pid, *me))
    report("named send for the child (control, before exec)", named(pid, pid, *me))
    os.write(w, b"g")
    for _ in range(200):
        if cap_eff(pid):
            break
        time.sleep(0.02)
    report("the child runs the file-capability program with B's ids",
           euid(pid) == me[0] and cap_eff(pid) != 0)
    report("creds of the file-capability child with B's ids", creds(pid, *me))
    report("named send for the file-capability child", named(pid, pid, *me))
    os.kill(pid, 9)
    os.waitpid(pid, 0)
elif mode == "setuid-exec":
    pid, w = child(["/usr/bin/passwd"])
    report("act_for its child (before exec)", grant(pid))
    report("creds of the child (control, before exec)", creds(pid, *me))
    report("named send for the child (control, before exec)", named(pid, pid, *me))
    os.write(w, b"g")
    report("the child runs passwd with euid 0", wait_euid0(pid))
    report("creds of the setuid child with B's ids", creds(pid, *me))
    report("named send for the setuid child", named(pid, pid, *me))
    os.kill(pid, 9)
    os.waitpid(pid, 0)
elif mode == "many-grants":
    # K threads each take a grant for one child of B's (allowed) and hold it;
    # 4 of them then clear and set theirs again and again until told to stop.
    # A is told to go once 1,100 hold one (more are still being granted).
    k = int(sys.argv[2])
    pid, w = child()
    stop = threading.Event()
    lock = threading.Lock()
    held = [0]
    sets = [0]
    def holder(hammer):
        got = grant(pid)
        with lock:
            held[0] += got == "OK"
            if held[0] == 1100:
                open(sys.argv[3] + ".tmp", "w").close()
                os.rename(sys.argv[3] + ".tmp", sys.argv[3])
        while hammer and not stop.is_set():
            grant(0)
            grant(pid)
            sets[0] += 1
        stop.wait()
    ts = [threading.Thread(target=holder, args=(i < 4,), daemon=True) for i in range(k)]
    for t in ts:
        t.start()
    while not os.path.exists(sys.argv[3] + ".stop"):
        time.sleep(0.05)
    report("threads that held a grant", ">= 1100" if held[0] >= 1100 else held[0])
    stop.set()
    for t in ts:
        t.join()
    report("grants set again", "many" if sets[0] > 0 else "none")
    os.write(w, b"g")
    os.waitpid(pid, 0)
elif mode.startswith("ticket"):
    CTL_SIZE = 496
    IOC_CTL = (3 << 30) | (CTL_SIZE << 16) | (ord("U") << 8) | 1
    def ticket(fd):
        # UDSFS_IOC_CTL with op AcceptTicket (41), as accept_after_setuid.sh
        import fcntl, struct
        buf = bytearray(CTL_SIZE)
        struct.pack_into("=Ii", buf, 0, 41, 0)
        fcntl.ioctl(fd, IOC_CTL, buf)
        return "%016x" % struct.unpack_from("=Q", buf, 16)[0]
    def opened(path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            return errno.errorcode[e.errno]
        os.close(fd)
        return "socket"
    if mode == "ticket-own":
        # B in a pid namespace of its own: its ticket is its own to take
        lfd, l = listening("@actfor2-b", 4)
        cfd, c = clone("stream")
        ctl(cfd, "connect @actfor2-b")
        report("pid in the namespace", os.getpid())
        t = ticket(opn(l, "data"))
        report("B's own ticket, taken in its pid namespace", opened(f"{U}/accept/{t}"))
        report("A's ticket, its number leaked, taken by B in its pid namespace",
               opened(f"{U}/accept/{sys.argv[2]}"))
    else:
        # A (root): a ticket whose number it gives B, which then tries it
        lfd, l = listening("@actfor2-a", 4)
        cfd, c = clone("stream")
        ctl(cfd, "connect @actfor2-a")
        t = ticket(opn(l, "data"))
        import subprocess
        r = subprocess.run(sys.argv[2:] + [t], capture_output=True, text=True)
        print(r.stdout + r.stderr, end="", flush=True)
        report("A's ticket, taken by A after B's try", opened(f"{U}/accept/{t}"))
elif mode == "pidfd-grants":
    # K threads, each granting a child of its own (allowed: B's user, B's
    # tree), all holding their grants until told to stop.
    k = int(sys.argv[2])
    kids = [child() for _ in range(k)]
    stop = threading.Event()
    lock = threading.Lock()
    held = [0]
    def holder(pid):
        got = grant(pid)
        with lock:
            held[0] += got == "OK"
            if held[0] == k:
                open(sys.argv[3] + ".tmp", "w").close()
                os.rename(sys.argv[3] + ".tmp", sys.argv[3])
        stop.wait()
    ts = [threading.Thread(target=holder, args=(p,), daemon=True) for p, _ in kids]
    for t in ts:
        t.start()
    while not os.path.exists(sys.argv[3] + ".stop"):
        time.sleep(0.05)
    report("grants held", held[0])
    stop.set()
    for t in ts:
        t.join()
    for p, w in kids:
        os.write(w, b"g")
        os.waitpid(p, 0)
elif mode == "userns":
    # in `unshare -U -r`: uid 0 here, 65534 outside
    report("uid in the namespace", os.getuid())
    pid, w = child()
    report("security act_for its own child from a user namespace",
           grant(pid, XS, DATA))
    report("user act_for root's process from a user namespace", grant(sys.argv[2]))
    p = int(sys.argv[2])
    report("named send for root's process from a user namespace", named(p, p, 0, 0))
    os.write(w, b"g")
    os.waitpid(pid, 0)
PYEOF
chmod a+r "$TMP/att2.py"

run_as() { # run_as UID [unshare ARGS --] MODE ARGS...
    local u=$1
    shift
    as_uid "$u" env MNT="$MNT" U="$U" "$@" 2>&1
}

failed=()
# (verdict CASE OK WHAT: lib.sh, against $EXCEPTIONS)
# while_b_holds DIR TRIES NOT_READY MEASURE MODE N: runs att2.py MODE N as B in the
# background and waits (TRIES times 20 ms) until it says it holds its grants (DIR/ready,
# else fail NOT_READY); sets `during` to what MEASURE prints then, tells B to stop
# (DIR/ready.stop) and waits for it, and shows what B printed (DIR.out).
while_b_holds() {
    local dir=$1 tries=$2 not_ready=$3 measure=$4 mode=$5 n=$6 gp
    mkdir -p -m 0777 "$dir"
    run_as $B "$PY3" "$TMP/att2.py" "$mode" "$n" "$dir/ready" >"$dir.out" &
    gp=$!
    for _ in $(seq "$tries"); do [ -e "$dir/ready" ] && break; sleep 0.02; done
    [ -e "$dir/ready" ] || fail "$not_ready: $(cat "$dir.out")"
    during=$("$measure")
    touch "$dir/ready.stop"
    wait "$gp" || fail "B's grant threads failed: $(cat "$dir.out")"
    say "$(sed 's/^/    /' "$dir.out")"
}
# has OUT LINE: 1 when OUT holds LINE.
has() { grep -qxF -- "$2" <<<"$1" && echo 1; }

say "-- setuid_exec_*: a grant for B's child, then the child execs passwd"
out=$(run_as $B "$PY3" "$TMP/att2.py" setuid-exec)
say "$out" | sed 's/^/    /'
controls="act_for its child (before exec): OK
creds of the child (control, before exec): OK
named send for the child (control, before exec): OK
the child runs passwd with euid 0: True"
[ "$(head -n4 <<<"$out")" = "$controls" ] || fail "the controls did not hold: $out"
verdict setuid_exec_creds "$(has "$out" "creds of the setuid child with B's ids: EPERM")" \
    "$(grep -F "creds of the setuid child" <<<"$out")"
verdict setuid_exec_named "$(has "$out" "named send for the setuid child: EPERM")" \
    "$(grep -F "named send for the setuid child" <<<"$out")"

say "-- filecap_exec_*: a grant for B's child, then the child execs a program with file capabilities"
cp /bin/sleep "$TMP/capsleep"
chmod 0755 "$TMP/capsleep"
setcap cap_net_bind_service+ep "$TMP/capsleep" || fail "setcap on $TMP/capsleep"
out=$(run_as $B "$PY3" "$TMP/att2.py" filecap-exec "$TMP/capsleep")
say "$out" | sed 's/^/    /'
controls="act_for its child (before exec): OK
creds of the child (control, before exec): OK
named send for the child (control, before exec): OK
the child runs the file-capability program with B's ids: True"
[ "$(head -n4 <<<"$out")" = "$controls" ] || fail "the controls did not hold: $out"
verdict filecap_exec_creds "$(has "$out" "creds of the file-capability child with B's ids: EPERM")" \
    "$(grep -F "creds of the file-capability child" <<<"$out")"
verdict filecap_exec_named "$(has "$out" "named send for the file-capability child: EPERM")" \
    "$(grep -F "named send for the file-capability child" <<<"$out")"

say "-- grant_stall: B's 1,500 threads taking grants, 4 setting theirs again and again"
# a_stats: A's (root's) 200 stats of the mount root (a GETATTR each: attributes are
# not cached), in ms.
a_stats() {
    "$PY3" -c '
import os, sys, time
t = time.monotonic()
for _ in range(200):
    os.stat(sys.argv[1])
print(int((time.monotonic() - t) * 1000))' "$MNT"
}
before=$(a_stats)
while_b_holds "$TMP/g" 6000 "B's threads did not take 1,100 grants" a_stats many-grants 1500
after=$(a_stats)
say "    A's 200 stats: ${before} ms without B, ${during} ms while B's threads set grants, ${after} ms after"
verdict grant_stall "$([ "$during" -le $((before * 10 + 300)) ] && echo 1)" \
    "A's 200 stats took ${during} ms while B set grants, ${before} ms without"

say "-- ticket_pidns: accept tickets and B in a pid namespace of its own"
out=$(env MNT="$MNT" U="$U" "$PY3" "$TMP/att2.py" ticket-a \
    setpriv --reuid=$B --regid=$B --clear-groups env MNT="$MNT" U="$U" \
    unshare -Upfr --mount-proc "$PY3" "$TMP/att2.py" ticket-own 2>&1)
say "$out" | sed 's/^/    /'
verdict ticket_pidns "$([ -n "$(has "$out" "pid in the namespace: 1")" ] &&
    [ -n "$(has "$out" "B's own ticket, taken in its pid namespace: socket")" ] &&
    [ -n "$(has "$out" "A's ticket, its number leaked, taken by B in its pid namespace: ENOENT")" ] &&
    has "$out" "A's ticket, taken by A after B's try: socket")" "$(tr '\n' '|' <<<"$out")"

say "-- userns_*: B as root of a user namespace of its own"
sleep 60 &
ROOTP=$!
out=$(run_as $B unshare -U -r "$PY3" "$TMP/att2.py" userns $ROOTP)
say "$out" | sed 's/^/    /'
kill "$ROOTP" 2>/dev/null || true
wait "$ROOTP" 2>/dev/null || true
[ "$(head -n1 <<<"$out")" = "uid in the namespace: 0" ] || fail "unshare -U -r did not run: $out"
verdict userns_security "$(has "$out" "security act_for its own child from a user namespace: EPERM")" \
    "$(grep -F "security act_for" <<<"$out")"
verdict userns_root_proc "$([ -n "$(has "$out" "user act_for root's process from a user namespace: EPERM")" ] &&
    has "$out" "named send for root's process from a user namespace: EPERM")" \
    "$(grep -F "root's process" <<<"$out" | tr '\n' '|')"

say "-- pidfd_uncharged: B's 256 grants on a daemon of RLIMIT_NOFILE 1024"
udsfs_unmount
ulimit -n 1024
udsfs_mount --allow-other --user-share 10
chmod 0777 "$MNT" || fail "chmod 0777 the mount root"
fds() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
base=$(fds)
while_b_holds "$TMP/p" 3000 "B's 256 grants were not all taken" fds pidfd-grants 256
say "    the daemon's descriptors: $base before B, $during while B held 256 grants (RLIMIT_NOFILE 1024)"
grep -qxF "grants held: 256" "$TMP/p.out" || fail "B's 256 grants were not all held: $(cat "$TMP/p.out")"
verdict pidfd_uncharged "$([ "$during" -le $((base + 64)) ] && echo 1)" \
    "the daemon held $base descriptors before B's 256 grants, $during while B held them (B's share 51)"

if [ "${#failed[@]}" -gt 0 ]; then
    printf '%s\n' "${failed[@]}" >&2
    fail "${#failed[@]} act-for attacks got through"
fi
ok "act-for 2: every attack refused or listed"

#!/usr/bin/env bash
# SIGIO through the supervisor (`udsfs run --front seccomp`), the owner named in the
# program's own pid namespace (issue 29 item 2: src/supervisor/fcntl.rs,
# udsfs_calls::sigio, src/engine/pidns.rs `owner_from_task`). Each part prints what it
# tried and what it got:
#  1. integration/sigio.py (every event, the three socket types, the owner by
#     F_SETOWN, F_SETOWN_EX, FIOSETOWN and SIOCSPGRP, O_ASYNC by F_SETFL and FIOASYNC)
#     supervised, in a pid namespace of its own below the supervisor (`unshare --pid
#     --fork --mount-proc` under `udsfs run`: its getpid() and getpgrp() are not its
#     numbers in the daemon's namespace): the kernel's results. (A run whose supervisor
#     is itself in another pid namespace: integration/actfor_pidns.sh.)
#  2. user B's program in a user and pid namespace of its own, made to have there
#     the pid that user A's process V has in the daemon's namespace, names itself as
#     the owner (F_SETOWN, FIOSETOWN, F_SETOWN_EX getpid(); SIOCSPGRP -getpgrp()):
#     it gets its SIGIO as on the kernel, and A's V (and V's group) get none.
#  3. B's supervised program in the daemon's namespace names A's V (and V's group):
#     no SIGIO reaches them, as Linux's sigio_perm, and the daemon says so.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C
need_preload
need_cmd unshare util-linux
for_other_users sig
A=61051
B=61052
RUNTMP=$TMP/runtmp
mkdir -m 1777 "$RUNTMP"

# ---- 1. sigio.py supervised in a pid namespace of its own
PROG=$ROOT/integration/sigio.py
mkdir -p "$TMP/k"
# The kernel's run and the supervised one at once: each signals only its own processes.
python3 "$PROG" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" &
kernel_run=$!
UDSFS_PRELOAD="$PRELOAD_LIB" timeout 200 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- \
    unshare --pid --fork --mount-proc python3 "$PROG" "$MNT" >"$TMP/sup.out" 2>"$TMP/sup.err" ||
    fail "1. sigio.py fails supervised in a pid namespace: $(tail -3 "$TMP/sup.err")"
wait $kernel_run || fail "1. sigio.py fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
ok "1. kernel: $(grep -c ' sigio [1-9]' "$TMP/kernel.out") events of $(wc -l <"$TMP/kernel.out") gave a SIGIO"
grep -qx 'where: udsfs' "$TMP/sup.out" || fail "1. the supervised run did not use udsfs sockets"
if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/sup.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "1. supervised in a pid namespace, sigio.py answered differently from the kernel (< kernel, > udsfs)"
fi
ok "1. supervised in a pid namespace: the kernel's $(wc -l <"$TMP/sup.out") results, $(grep -c ' sigio [1-9]' "$TMP/sup.out") events gave a SIGIO"

# ---- A's victim: counts the SIGIO it gets; a group of its own
cat >"$TMP/victim.py" <<'PY'
import os, signal, sys, time
S = os.environ["S"]
signal.signal(signal.SIGIO, lambda *_: open(f"{S}/victim.io", "a").write("x\n"))
os.setpgid(0, 0)
open(f"{S}/victim.tmp", "w").write(str(os.getpid()))
os.rename(f"{S}/victim.tmp", f"{S}/victim.pid")
# Until told, or until the script's directory is gone (a failure, or the cleanup
# that removed it before this look saw "stop": the victim, in a group of its own
# and not the script's job, outlived CI runs).
while os.path.isdir(S) and not os.path.exists(f"{S}/stop"):
    time.sleep(0.05)
PY
# owner.py TARGET: a socketpair (udsfs sockets when supervised), one end owned by
# TARGET ("self": getpid(), and -getpgrp() for SIOCSPGRP) four ways, O_ASYNC by
# FIOASYNC, one message each; what came of each, and how many SIGIO it got itself.
cat >"$TMP/owner.py" <<'PY'
import fcntl, os, signal, socket, struct, sys
FIOASYNC, FIOSETOWN, SIOCSPGRP, F_SETOWN_EX = 0x5452, 0x8901, 0x8902, 15
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO])
os.setpgid(0, 0)
me = sys.argv[1] == "self"
pid = os.getpid() if me else int(sys.argv[1])
group = os.getpgrp() if me else pid
print("pid", os.getpid(), flush=True)
for how in ("F_SETOWN", "FIOSETOWN", "F_SETOWN_EX", "SIOCSPGRP"):
    a, b = socket.socketpair()
    try:
        if how == "F_SETOWN":
            fcntl.fcntl(a, fcntl.F_SETOWN, pid)
        elif how == "FIOSETOWN":
            fcntl.ioctl(a, FIOSETOWN, struct.pack("i", pid))
        elif how == "F_SETOWN_EX":
            fcntl.fcntl(a, F_SETOWN_EX, struct.pack("ii", 1, pid))
        else:
            fcntl.ioctl(a, SIOCSPGRP, struct.pack("i", -group))
        fcntl.ioctl(a, FIOASYNC, struct.pack("i", 1))
        b.send(b"x")
        got, wait = 0, 1.0
        while signal.sigtimedwait([signal.SIGIO], wait) is not None:
            got, wait = got + 1, 0.2
        res = f"own sigio {got}"
    except OSError as e:
        res = f"errno {e.errno}"
    where = "udsfs" if "/.udsfs/" in os.readlink(f"/proc/self/fd/{a.fileno()}") else "kernel"
    print(how, res, where, flush=True)
PY
chmod 644 "$TMP/victim.py" "$TMP/owner.py"
S=$S as_uid $A /usr/bin/python3 "$TMP/victim.py" >"$TMP/victim.out" 2>&1 &
wait_for "$S/victim.pid" 10 "A's victim did not start" "$TMP/victim.out"
V=$(cat "$S/victim.pid")
victim_io() { cat "$S/victim.io" 2>/dev/null | wc -l; }
sup() { as_uid $B env TMPDIR="$RUNTMP" timeout 60 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$@"; }
# in_own_ns CMD...: CMD in a user and pid namespace of B's own, where its pid is $V.
own_ns_sh="echo \$(($V - 1)) >/proc/sys/kernel/ns_last_pid && /usr/bin/python3 $TMP/owner.py self; :"
in_own_ns() { "$@" unshare -U -r -p -f --mount-proc sh -c "$own_ns_sh"; }
# compare PART KERNEL_OUT UDSFS_OUT: the same results but the pid line and where.
compare() {
    local strip='/^pid /d; s/ \(kernel\|udsfs\)$//'
    grep -q ' udsfs$' "$3" || fail "$1: the supervised run did not use udsfs sockets: $(cat "$3")"
    diff <(sed "$strip" "$2") <(sed "$strip" "$3") >"$TMP/diff" || {
        cat "$TMP/diff" >&2
        fail "$1: the supervised run answered differently from the kernel (< kernel, > udsfs)"
    }
}

# ---- 2. B in a user+pid namespace of its own, its pid there V
# (each part's kernel run and supervised run at once: each in a process group of its own)
in_own_ns as_uid $B >"$TMP/ns_kernel.out" 2>&1 &
kernel_run=$!
in_own_ns sup >"$TMP/ns_udsfs.out" 2>&1 || fail "2. B's namespace supervised: $(cat "$TMP/ns_udsfs.out")"
wait $kernel_run || fail "2. B's namespace on the kernel: $(cat "$TMP/ns_kernel.out")"
for f in ns_kernel ns_udsfs; do
    say "2. $f: $(paste -sd';' "$TMP/$f.out")"
    grep -qx "pid $V" "$TMP/$f.out" || fail "2. B's program did not get pid $V in its namespace ($f): $(head -1 "$TMP/$f.out")"
done
compare 2 "$TMP/ns_kernel.out" "$TMP/ns_udsfs.out"
sleep 0.5
say "2. A's process $V (and its group) got $(victim_io) SIGIO"
[ "$(victim_io)" = 0 ] || fail "2. B's owner $V, itself in its namespace, signalled A's process $V"
ok "2. B's owner 'itself' (pid $V in its namespace) gets its SIGIO as on the kernel; A's $V gets none"

# ---- 3. B names A's process and group from the daemon's namespace
before=$(wc -l <"$LOG")
as_uid $B /usr/bin/python3 "$TMP/owner.py" "$V" >"$TMP/a_kernel.out" 2>&1 &
kernel_run=$!
sup /usr/bin/python3 "$TMP/owner.py" "$V" >"$TMP/a_udsfs.out" 2>&1 || fail "3. supervised: $(cat "$TMP/a_udsfs.out")"
wait $kernel_run || fail "3. kernel: $(cat "$TMP/a_kernel.out")"
for f in a_kernel a_udsfs; do say "3. $f: $(paste -sd';' "$TMP/$f.out")"; done
compare 3 "$TMP/a_kernel.out" "$TMP/a_udsfs.out"
sleep 0.5
say "3. A's process $V (and its group) got $(victim_io) SIGIO; the log: $(sed -n "$((before + 1)),\$p" "$LOG" | grep -c 'not sent\|signaller\|SIGIO') lines about it"
[ "$(victim_io)" = 0 ] || fail "3. B's supervised program had A's process $V signalled"
grep -q "SIGIO to $V not sent" "$LOG" || fail "3. no log line said B's SIGIO to A's $V was not sent"
touch "$S/stop"
ok "3. B's owner A's $V (and -$V): no SIGIO, as on the kernel; the daemon said why"

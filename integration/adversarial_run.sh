#!/usr/bin/env bash
# adversarial_run.sh: attacks on the exec of static programs under the preload library
# (preload/src/exec.rs, udsfs_proto::exe) and on the supervisor's request socket of
# `udsfs run` (src/supervisor/adopt.rs), by a hostile program and by a second user of
# an --allow-other mount. Checked:
#  1. an exec the kernel refuses (a FIFO, a script whose interpreter is a FIFO, a static
#     binary without execute permission) gets the kernel's errno (EACCES) back, as on
#     kernel sockets: the library neither hangs opening the FIFO nor turns the failure
#     into `udsfs run --in-place` exiting with 126;
#  2. a set-user-ID static binary exec'd by user B under the library: B's run puts its
#     whole tree under the supervisor's filter with no_new_privs (seccomp requires it of
#     B), so the binary could only run without its privilege: the exec is refused
#     (EPERM) with a line naming it, never run silently as B (run_filter.sh has root's
#     run, where a privileged program keeps its privilege under the filter);
#  3. user B taking in $TMPDIR every name of the supervisor's socket directory a run's
#     pid used to try: the run still adopts its static children;
#  4. a process outside the run's tree handing its own seccomp listener to an
#     accomplice inside it (user B under root's run), which hands it to the run as its
#     own: the run must not make the outsider's calls with its own (root's) credentials,
#     so the outsider cannot reach root's socket in a directory only root may enter.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
need_cmd python3 python3
# User B's programs: a python3 of the system's (one under root's home may be closed to B).
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "adversarial_run.sh attacks udsfs run itself: UDSFS_RUN_VIA must be udsfs"
B=61002
as_b() { setpriv --reuid="$B" --regid="$B" --clear-groups "$@"; }
chmod 755 "$TMP"
RUNTMP=$TMP/runtmp
mkdir -m 1777 "$RUNTMP"
run() { env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" "$@"; }

cat >"$TMP/ids.c" <<'C'
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("ruid %d euid %d\n", (int)getuid(), (int)geteuid()); return 0; }
C
gcc -static -O2 -o "$TMP/ids" "$TMP/ids.c" || fail "gcc -static ids.c failed"
gcc -static -O2 -o "$TMP/static_client" "$ROOT/integration/c/static_client.c" || fail "gcc -static static_client.c failed"
gcc -O2 -o "$TMP/forger" "$ROOT/integration/c/forger.c" || fail "gcc forger.c failed"
chmod 755 "$TMP/ids" "$TMP/static_client" "$TMP/forger"

# 1. execv of PATH from python3: the errno it got, or what the new program printed.
cat >"$TMP/exec.py" <<'PY'
import os, sys
try:
    os.execv(sys.argv[1], [sys.argv[1]])
except OSError as e:
    print("errno", e.errno, flush=True)
PY
mkfifo -m 777 "$TMP/fifo"
printf '#!%s\n' "$TMP/fifo" >"$TMP/via_fifo"
chmod 755 "$TMP/via_fifo"
cp "$TMP/ids" "$TMP/noexec"
chmod 644 "$TMP/noexec"
for f in fifo via_fifo noexec; do
    want=$(python3 "$TMP/exec.py" "$TMP/$f" 2>&1)
    expect_eq "exec of $f on kernel sockets" "$want" "errno 13"
    got=$(timeout 20 env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/exec.py" "$TMP/$f" 2>&1) ||
        fail "exec of $f under the library: status $?: $got"
    expect_eq "exec of $f under the library" "$got" "$want"
done

# 2. A set-user-ID root static binary run by B.
chmod 4755 "$TMP/ids"
expect_eq "B's set-user-ID static binary on kernel sockets" "$(as_b "$TMP/ids")" "ruid $B euid 0"
got=$(as_b env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- sh -c '"$1"; echo "status $?"' sh "$TMP/ids" 2>&1)
say "B's set-user-ID static binary exec'd by sh under the library: $got"
grep -qF "refused to exec $TMP/ids: it is set-user-ID" <<<"$got" || fail "no line names the refused exec of $TMP/ids: $got"
! grep -q "^ruid" <<<"$got" || fail "B's set-user-ID binary ran under the filter: $got"
expect_eq "sh's status for the refused exec" "$(sed -n 's/^status //p' <<<"$got")" 126
ok "B's set-user-ID static binary exec'd under the library is refused, named"
chmod 755 "$TMP/ids"

# The server: root's, through the library; answers a line on each of N connections with
# the peer's uid.
cat >"$TMP/server.py" <<'PY'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
old = os.umask(0)
s.bind(sys.argv[1])
os.umask(old)
s.listen(8)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.makefile().readline()
    uid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    c.sendall(b"uid %d\n" % uid)
    print("peer uid", uid, flush=True)
    c.close()
PY

# 3. B squats the names in $RUNTMP before root's run (of known pid) starts.
SOCK=$MNT/open.sock
start_bg SRV env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/server.py" "$SOCK" 1 >"$TMP/srv.out" 2>&1
wait_listening "$SOCK"
(
    while [ ! -e "$TMP/go" ]; do sleep 0.02; done
    exec env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- sh -c '"$1" "$2" squatted' sh "$TMP/static_client" "$SOCK"
) >"$TMP/squat.out" 2>&1 &
SQUAT=$!
as_b bash -c 'for i in $(seq 0 99); do mkdir "$1/udsfs-exec-$2-$i"; done' sh "$RUNTMP" "$SQUAT"
touch "$TMP/go"
ended_within "$SQUAT" 20000 || fail "the run after the squatting did not end"
reap "$SQUAT"
[ "$REAPED_STATUS" == 0 ] || fail "the static child of a run whose names B took: status $REAPED_STATUS: $(cat "$TMP/squat.out"); server: $(cat "$TMP/srv.out")"
ok "the static child of a run whose names B took ended with status 0"
expect_eq "its reply" "$(sed -n 1p "$TMP/squat.out")" "reply: uid 0"
ended_within "$SRV" 10000 || fail "the server did not finish: $(cat "$TMP/srv.out")"
reap "$SRV"

# 4. The forged listener. Root's socket, in a directory only root may search.
mkdir -m 700 "$MNT/secret" || fail "mkdir in the mount: $?"
SECRET=$MNT/secret/s.sock
start_bg SRV env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/server.py" "$SECRET" 1 >"$TMP/secret.out" 2>&1
wait_listening "$SECRET"
got=$(as_b /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print("errno", e.errno)' "$SECRET" 2>&1)
expect_eq "B's own connect to root's secret socket (on kernel sockets)" "$got" "errno 13"
# The accomplice: B under root's run; takes the outsider's listener over a kernel
# socket in $RUNTMP and asks the run to supervise it as its own.
cat >"$TMP/accomplice.py" <<'PY'
import os, socket, struct, sys
h = socket.socket(socket.AF_UNIX)
h.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
h.listen(1)
print("ready", flush=True)
c, _ = h.accept()
_, anc, _, _ = c.recvmsg(1, socket.CMSG_SPACE(4))
fd = struct.unpack("i", anc[0][2][:4])[0]
r = socket.socket(socket.AF_UNIX)
r.connect(os.environ["UDSFS_SUPERVISOR"])
which = r.recv(1)
r.sendall(struct.pack("ii", os.getpid(), fd))
print("supervisor said", which, r.recv(1), flush=True)
c.send(b"g")
c.recv(1)
PY
HANDOFF=$RUNTMP/handoff.sock
start_bg ACC env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- setpriv --reuid="$B" --regid="$B" --clear-groups /usr/bin/python3 "$TMP/accomplice.py" "$HANDOFF" >"$TMP/acc.out" 2>&1
for _ in $(seq 1 200); do grep -q ready "$TMP/acc.out" && break; sleep 0.05; done
grep -q ready "$TMP/acc.out" || fail "the accomplice did not start: $(cat "$TMP/acc.out")"
got=$(as_b timeout 20 "$TMP/forger" "$HANDOFF" "$SECRET" 2>&1) || fail "the forger failed: $got (accomplice: $(cat "$TMP/acc.out"))"
say "forger: $got"
say "accomplice: $(cat "$TMP/acc.out")"
! grep -q "forger connected" <<<"$got" || fail "the outsider reached root's secret socket through the run: $got"
ok "the outsider's calls were not made with the run's credentials ($(grep '^forger' <<<"$got"))"
kill -TERM "$SRV" "$ACC" 2>/dev/null || true
ok "adversarial exec and adoption"

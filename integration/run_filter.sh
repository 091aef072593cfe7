#!/usr/bin/env bash
# run_filter.sh: issue 29 item 1. Under `udsfs run` every process of the tree carries the
# supervisor's seccomp filter, the preload library included: the library's own socket
# calls (made from its gadget page, preload/src/gadget.rs) run untrapped, and every other
# socket call goes to the run's supervisor. Checked, each a way a program reached the
# kernel behind the library's back on the starting commit (the connect to a name in the
# mount then fails: the mount's file is no kernel socket; a bind makes a kernel socket
# inside the mount):
#   1. a child exec'd with an empty environment (env -i python3: no LD_PRELOAD, no
#      UDSFS_MOUNT) connects to a udsfs server and binds a udsfs socket in the mount;
#   2. a dynamic C program making socket/connect/sendto/recvfrom with the syscall
#      instruction itself (integration/c/raw_client.c) reaches the server;
#   3. a set-group-ID copy of that program (another group) in a root run: the loader runs
#      it in secure mode without the library, it keeps its group, and it reaches udsfs;
#   4. what cannot be carried is refused with a line naming it: in a run that is not
#      root's (no_new_privs) a set-user-ID program would run without its privilege
#      (exec'd by a program of the run, and as CMD itself);
#   5. and io_uring (its socket operations run past any filter): io_uring_setup is ENOSYS,
#      named, with the library (its syscall() too) and without;
#   6. where the kernel refuses the filter (a container's own filter forbids seccomp(2)),
#      a dynamic CMD still runs, through the library, and the run says what is not carried.
# "Reached udsfs": the client's descriptor is a data file under $U/sock, the server (through
# the library) reads the client's pid as its SO_PEERCRED, and /proc/net/unix has no socket
# with a path in the mount.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd gcc gcc
need_cmd python3 python3
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "run_filter.sh tests udsfs run itself: UDSFS_RUN_VIA=kernel has nothing to compare"
chmod 755 "$TMP"
gcc -O2 -Wall -o "$TMP/raw_client" "$ROOT/integration/c/raw_client.c" || fail "gcc raw_client.c failed"
RUN=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT")

# no_kernel_sockets_in_mount WHAT: /proc/net/unix names nothing below $MNT.
no_kernel_sockets_in_mount() {
    if grep -F " $MNT/" /proc/net/unix; then
        fail "$1: a kernel socket bound inside the mount (above)"
    fi
}

SOCK=$MNT/filter.sock
start_bg SRV "${RUN[@]}" -- python3 "$LIB_DIR/peer_pid_server.py" "$SOCK" 3 >"$TMP/srv.out" 2>&1
wait_listening "$SOCK"
expect_socket_home "$SOCK"

# reached WHAT OUT N: OUT (the client's output) shows a udsfs socket, and the server's
# Nth peer is the client's pid.
reached() {
    local what=$1 out=$2 n=$3 pid
    say "$what: $(tr '\n' ' ' <<<"$out")"
    case $(sed -n 's/^fd: //p' <<<"$out") in
    "$U"/sock/*/data) ;;
    *) fail "$what: its socket is no udsfs socket: $out" ;;
    esac
    pid=$(sed -n 's/^pid: //p' <<<"$out")
    for _ in $(seq 200); do
        [ "$(grep -c '^peer pid' "$TMP/srv.out")" -lt "$n" ] || break
        sleep 0.05
    done
    expect_eq "$what: the server's peer pid (SO_PEERCRED through udsfs)" "$(grep '^peer pid' "$TMP/srv.out" | sed -n "${n}s/^peer pid //p")" "$pid"
    no_kernel_sockets_in_mount "$what"
}

# 1. env -i: a child with an empty environment, as systemd-socket-activate starts one.
cat >"$TMP/envi.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"from-env-i\n")
print("reply:", s.makefile().readline(), end="")
print("pid:", os.getpid())
print("fd:", os.readlink("/proc/self/fd/%d" % s.fileno()))
print("environment:", sorted(k for k in os.environ if k != "LC_CTYPE"))
b = socket.socket(socket.AF_UNIX)
b.bind(sys.argv[2])
b.listen(1)
print("bound fd:", os.readlink("/proc/self/fd/%d" % b.fileno()))
PY
out=$(timeout 30 "${RUN[@]}" -- env -i python3 "$TMP/envi.py" "$SOCK" "$MNT/envi.sock" 2>&1) || fail "env -i python3 under udsfs run: status $?: $out"
expect_eq "the env -i child's reply" "$(sed -n 1p <<<"$out")" "reply: py got from-env-i"
expect_eq "the env -i child's environment" "$(sed -n 's/^environment: //p' <<<"$out")" "[]"
reached "env -i python3" "$out" 1
case $(sed -n 's/^bound fd: //p' <<<"$out") in
"$U"/sock/*/data) ok "the env -i child's bind made a udsfs socket at $MNT/envi.sock" ;;
*) fail "the env -i child's bind: no udsfs socket: $out" ;;
esac

# 2. The syscall instruction in a dynamic program (the library sees no call).
out=$(timeout 30 "${RUN[@]}" -- "$TMP/raw_client" raw "$SOCK" from-raw 2>&1) || fail "raw_client raw under udsfs run: status $?: $out"
expect_eq "the raw client's reply" "$(sed -n 1p <<<"$out")" "reply: py got from-raw"
expect_eq "the raw client carries the library" "$(sed -n 's/^library: //p' <<<"$out")" yes
reached "raw system calls of a dynamic program" "$out" 2

# 3. A set-group-ID copy (group nogroup) in root's run: secure mode, no library.
GID=65534
cp "$TMP/raw_client" "$TMP/sgid_client"
chgrp "$GID" "$TMP/sgid_client"
chmod 2755 "$TMP/sgid_client"
out=$(timeout 30 "${RUN[@]}" -- "$TMP/sgid_client" libc "$SOCK" from-setgid 2>&1) || fail "the set-group-ID client under root's udsfs run: status $?: $out"
expect_eq "the set-group-ID client's reply" "$(sed -n 1p <<<"$out")" "reply: py got from-setgid"
expect_eq "the set-group-ID client keeps its group, in secure mode" "$(sed -n 's/^egid: //p' <<<"$out")" "$GID secure: 1"
expect_eq "the loader left the library out" "$(sed -n 's/^library: //p' <<<"$out")" no
reached "a set-group-ID program in root's run" "$out" 3
ended_within "$SRV" 10000 || fail "the server did not finish: $(cat "$TMP/srv.out")"
reap "$SRV"
[ "$REAPED_STATUS" == 0 ] || fail "the server: status $REAPED_STATUS: $(cat "$TMP/srv.out")"

# 4. A set-user-ID root program exec'd in nobody's run: refused, named.
cp "$(command -v id)" "$TMP/suid_id"
chmod 4755 "$TMP/suid_id"
expect_eq "the set-user-ID id as nobody on its own" "$(as_uid 65534 "$TMP/suid_id" -u)" 0
cat >"$TMP/exec.py" <<'PY'
import os, sys
try:
    os.execv(sys.argv[1], [sys.argv[1], "-u"])
except OSError as e:
    print("exec:", os.strerror(e.errno))
PY
out=$(cd / && as_uid 65534 timeout 30 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/exec.py" "$TMP/suid_id" 2>&1) ||
    fail "nobody's run: status $?: $out"
say "nobody's run of $TMP/suid_id: $(tr '\n' ' ' <<<"$out")"
grep -qF "refused to exec $TMP/suid_id: it is set-user-ID" <<<"$out" || fail "no line names the refused exec: $out"
expect_eq "the exec's error" "$(sed -n 's/^exec: //p' <<<"$out")" "Operation not permitted"
out=$(cd / && as_uid 65534 timeout 30 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "$TMP/suid_id" -u 2>&1) && st=0 || st=$?
say "nobody's run with $TMP/suid_id as CMD: status $st: $out"
grep -qF "refused to run $TMP/suid_id: it is set-user-ID" <<<"$out" || fail "no line names the refused CMD: $out"
expect_eq "the status of nobody's run of a set-user-ID CMD" "$st" 126
ok "a set-user-ID program in a run that is not root's is refused with a line naming it (exec'd, and as CMD)"

# 5. io_uring, whose socket operations run past any filter: refused (ENOSYS), named, for
# a program with the library (through its syscall()) and for one without (env -i).
cat >"$TMP/uring.py" <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)  # io_uring_setup(8, &params)
print("io_uring_setup:", "fd" if fd >= 0 else os.strerror(ctypes.get_errno()))
PY
want=$(python3 "$TMP/uring.py")
say "io_uring_setup on its own: $want"
for how in library "env -i"; do
    pre=()
    [ "$how" == library ] || pre=(env -i)
    out=$(timeout 30 "${RUN[@]}" -- ${pre[@]+"${pre[@]}"} python3 "$TMP/uring.py" 2>&1) || fail "io_uring ($how): status $?: $out"
    say "io_uring_setup through udsfs run ($how): $(tr '\n' ' ' <<<"$out")"
    expect_eq "io_uring_setup through udsfs run ($how)" "$(sed -n 's/^io_uring_setup: //p' <<<"$out")" "Function not implemented"
    grep -q "io_uring_setup (system call 425) refused with ENOSYS" <<<"$out" || fail "io_uring ($how): no line names the refusal: $out"
done
ok "io_uring_setup is refused with a line naming it, with the library and without"

# 6. seccomp(2) forbidden to the run (as a container's filter may): the library carries CMD,
# and a line says the filter is missing.
cat >"$TMP/noseccomp.py" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
# ld [nr]; jeq 317 (seccomp) ? errno EPERM : allow
ins = [(0x20, 0, 0, 0), (0x15, 0, 1, 317), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
code = b"".join(struct.pack("HBBI", *i) for i in ins)
buf = ctypes.create_string_buffer(code)
prog = struct.pack("HxxxxxxQ", len(ins), ctypes.addressof(buf))
pbuf = ctypes.create_string_buffer(prog)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.c_void_p(ctypes.addressof(pbuf)), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
os.execvp(sys.argv[1], sys.argv[1:])
PY
out=$(timeout 30 python3 "$TMP/noseccomp.py" "${RUN[@]}" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
print("bound fd:", __import__("os").readlink("/proc/self/fd/%d" % s.fileno()))' "$MNT/noseccomp.sock" 2>&1) || fail "udsfs run where seccomp is forbidden: status $?: $out"
say "udsfs run where seccomp(2) is forbidden: $(tr '\n' ' ' <<<"$out")"
case $(sed -n 's/^bound fd: //p' <<<"$out") in
"$U"/sock/*/data) ;;
*) fail "where seccomp is forbidden, the library did not carry CMD: $out" ;;
esac
grep -q "runs without the supervisor's seccomp filter (Operation not permitted" <<<"$out" || fail "no line says the filter is missing: $out"
ok "where seccomp(2) is forbidden, CMD runs through the library and the run says what is not carried"

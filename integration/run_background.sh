#!/usr/bin/env bash
# `udsfs run` returns when CMD exits, with CMD's status, as the program alone would,
# while what serves CMD's descendants goes on in the background (src/run/front.rs):
#  1. a server that daemonizes (forks, the parent exits): `udsfs run` returns at once on
#     the kernel's terms; the server is still on udsfs and answers a client; once it
#     ends, nothing of `udsfs run` is left;
#  2. CMD's status (exit 7) comes back while a descendant of its still runs;
#  3. a private mount stays up while a descendant runs and goes after it;
#  4. SIGTERM to `udsfs run` still reaches CMD (status 143), and so do SIGQUIT, SIGINT,
#     SIGUSR1, SIGUSR2, SIGHUP and SIGWINCH a process sends it.
# Each is compared with the same command on kernel sockets (the program alone).
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3

# daemon.py SOCK: forks; the child binds SOCK and listens, then the parent exits 0 (a
# daemon's readiness over a pipe); the child answers one connection (echo, upper-cased)
# and exits.
cat >"$TMP/daemon.py" <<'PY'
import os, socket, sys
r, w = os.pipe()
if os.fork():
    os.close(w)
    os.read(r, 1)
    os._exit(0)
os.setsid()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
os.write(w, b"r")
c, _ = s.accept()
c.sendall(c.recv(100).upper())
c.close()
PY
cat >"$TMP/client.py" <<'PY'
import socket, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
c.sendall(b"hello")
print(c.recv(100).decode())
PY

# runs_left: `udsfs run` processes of this script's mount still alive
runs_left() { pgrep -f -- "udsfs run --mount $MNT" | wc -l; }

# §1 the daemonizing server, on the kernel (the program alone), then through udsfs run
timed kt python3 "$TMP/daemon.py" "$TMP/kernel.sock"
python3 "$TMP/client.py" "$TMP/kernel.sock" >"$TMP/kernel.out"
timed ut timeout -k 5 20 "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/daemon.py" "$MNT/echo.sock" ||
    fail "udsfs run of the daemonizing server failed"
say "returned after: kernel ${kt} ms, udsfs run ${ut} ms"
[ "$ut" -lt 5000 ] || fail "udsfs run waited ${ut} ms for the daemonized server"
awk -v p=echo.sock 'NR > 1 && $8 == p { f = 1 } END { exit !f }' "$U/unix" ||
    fail "the daemonized server's socket is not a udsfs socket: $(cat "$U/unix")"
[ "$(runs_left)" -ge 1 ] || fail "nothing of udsfs run stayed behind to serve the daemon"
on_udsfs python3 "$TMP/client.py" "$MNT/echo.sock" >"$TMP/udsfs.out" ||
    fail "the client of the daemonized server failed"
expect_eq "the daemonized server's answer (kernel vs udsfs)" "$(cat "$TMP/udsfs.out")" "$(cat "$TMP/kernel.out")"
for _ in $(seq 100); do
    [ "$(runs_left)" = 0 ] && break
    sleep 0.1
done
expect_eq "udsfs run processes left once the server ended" "$(runs_left)" 0

# §2 CMD's status while its descendant still runs
set +e
timed kt sh -c 'sleep 30 & exit 7'
k=$?
timed ut timeout -k 5 20 "$UDSFS_BIN" run --mount "$MNT" -- sh -c 'echo $$ >"$0"; sleep 30 & exit 7' "$TMP/sh.pid"
u=$?
set -e
say "status: kernel $k after ${kt} ms, udsfs run $u after ${ut} ms"
expect_eq "CMD's status with a descendant left (kernel vs udsfs)" "$u" "$k"
[ "$ut" -lt 10000 ] || fail "udsfs run waited ${ut} ms for a descendant of CMD"
pkill -f "sleep 30" || true

# §3 a private mount outlives CMD while a descendant runs, then goes
priv=$("$UDSFS_BIN" run -- sh -c 'echo "$UDSFS_MOUNT"; sleep 2 >/dev/null 2>&1 &')
[ -n "$priv" ] || fail "no private mount was reported"
if mountpoint -q "$priv"; then ok "the private mount $priv is up while CMD's descendant runs"; else
    fail "the private mount $priv went with CMD while its descendant still ran"
fi
for _ in $(seq 100); do
    [ -e "$priv" ] || break
    sleep 0.1
done
[ ! -e "$priv" ] || fail "the private mount $priv stayed after the last descendant"
ok "the private mount went after the last descendant"

# §4 SIGTERM to udsfs run reaches CMD
sleep 30 &
kp=$!
# (killed before the child's exec, the forked shell's own TERM trap would
# take it: status 0, as a loaded CI run saw)
for _ in $(seq 500); do [ "$(cat /proc/$kp/comm 2>/dev/null)" = sleep ] && break; sleep 0.01; done
kill -TERM $kp
reap $kp
k=$REAPED_STATUS
"$UDSFS_BIN" run --mount "$MNT" -- sleep 30 &
up=$!
sleep 0.5
kill -TERM $up
reap $up
expect_eq "status of CMD after SIGTERM to udsfs run (kernel vs udsfs)" "$REAPED_STATUS" "$k"
pkill -f "sleep 30" || true
# The other signals a process sends to `udsfs run` reach CMD too (nginx's and php-fpm's
# graceful stop is SIGQUIT, a reload SIGHUP or SIGUSR2, a log reopen SIGUSR1): CMD's
# handler exits with the signal's number, on the kernel and through udsfs run.
cat >"$TMP/exit_on.py" <<'EOF2'
import signal, sys, time
signal.signal(getattr(signal, sys.argv[1]), lambda n, f: sys.exit(n))
open(sys.argv[2], "w").close()
time.sleep(30)
EOF2
for sig in SIGQUIT SIGINT SIGUSR1 SIGUSR2 SIGHUP SIGWINCH; do
    for via in kernel udsfs; do
        rm -f "$TMP/ready"
        if [ $via = kernel ]; then
            python3 "$TMP/exit_on.py" $sig "$TMP/ready" &
        else
            "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/exit_on.py" $sig "$TMP/ready" &
        fi
        p=$!
        for _ in $(seq 500); do [ -e "$TMP/ready" ] && break; sleep 0.01; done
        kill -s $sig $p
        ended_within $p 5000 || { kill -KILL $p; fail "$sig to $via's CMD: still running after 5 s"; }
        reap $p
        eval "st_$via=$REAPED_STATUS"
    done
    expect_eq "status after $sig to CMD (kernel) and to udsfs run" "$st_udsfs" "$st_kernel"
done
ok "udsfs run returns with CMD and leaves the rest to the background"

#!/usr/bin/env bash
# run_seccomp.sh: `udsfs run --front seccomp` (src/supervisor/) runs programs the preload
# library cannot reach, on udsfs sockets: a Go program (integration/go/unixprobe, the net
# package's raw system calls) as client and server, a statically linked C client
# (integration/c/static_client.c), and Python under the supervisor for blocking calls.
# Their peers are Python programs through the preload library. Every socket is checked
# to be a udsfs socket ($U/unix lists it, /proc/net/unix does not), and SO_PEERCRED
# shows the programs' own pids (the supervisor acts for them). Without --front, the
# static client gets the supervisor and python3 the library. Then: a signal to a
# program waiting in a trapped accept runs its handler and the accept goes on; a
# program killed there leaves no supervisor thread behind; clients and supervisors
# killed at random points leave no socket and no process. At the end, `udsfs run` of a
# static program (one that forks a child and exits before it, too) returns at once with
# the program's status and its supervisor ends with the last process, also with receives
# that stay blocked at the end as before Linux 6.11 (UDSFS_TEST_RECV_STAYS=1).
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
need_cmd go golang-go readelf binutils python3 python3 curl curl

# The programs, built here (stdlib only: no module downloads).
export GOCACHE=$ROOT/target/gocache GOPATH=$ROOT/target/gopath GOPROXY=off GOFLAGS= GO111MODULE=on
(cd "$ROOT/integration/go/unixprobe" && go build -o "$TMP/unixprobe" .) || fail "go build failed"
for prog in static_client hostile messages fork_exit; do
    gcc -static -O2 -o "$TMP/$prog" "$ROOT/integration/c/$prog.c" || fail "gcc -static $prog.c failed"
done
# No program interpreter: the dynamic loader, and so the preload library, never runs.
readelf -l "$TMP/static_client" | grep -q 'LOAD' || fail "readelf cannot read static_client"
! readelf -l "$TMP/static_client" | grep -q 'INTERP' || fail "static_client is not statically linked"
ok "built unixprobe (Go $(go env GOVERSION)) and static_client (gcc -static)"

seccomp() {
    "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$@"
}

# 1. A Python server through the library; a Go client and a static C client through
#    the supervisor connect to it.
PY_SOCK=$MNT/py.sock
serve PYSRV "$PY_SOCK" "$TMP/py.out" -- python3 "$LIB_DIR/peer_pid_server.py" "$PY_SOCK" 4
expect_socket_home "$PY_SOCK"

out=$(seccomp "$TMP/unixprobe" dial "$PY_SOCK" hello-go 2>&1) || fail "the Go client failed: $out"
expect_eq "Go client's exchange" "$(sed -n 1,2p <<<"$out")" "reply: py got hello-go
remote: $PY_SOCK"
GO_PID=$(sed -n 's/^pid: //p' <<<"$out")
out=$(seccomp "$TMP/static_client" "$PY_SOCK" hello-static 2>&1) || fail "the static client failed: $out"
expect_eq "static client's exchange" "$(sed -n 1,2p <<<"$out")" "reply: py got hello-static
peer: $PY_SOCK"
C_PID=$(sed -n 's/^pid: //p' <<<"$out")
# Without --front, `udsfs run` picks the supervisor for an executable without a
# program interpreter (src/run.rs `front_for`), found as execvp finds it: the static
# client reaches the udsfs server (on kernel sockets its connect would be refused).
out=$("$UDSFS_BIN" run --mount "$MNT" -- "$TMP/static_client" "$PY_SOCK" auto-static 2>&1) ||
    fail "the static client without --front failed: $out"
expect_eq "static client without --front" "$(sed -n 1p <<<"$out")" "reply: py got auto-static"
out=$(PATH=$TMP:$PATH "$UDSFS_BIN" run --mount "$MNT" -- static_client "$PY_SOCK" auto-path 2>&1) ||
    fail "the static client found in PATH without --front failed: $out"
expect_eq "static client found in PATH without --front" "$(sed -n 1p <<<"$out")" "reply: py got auto-path"
ended_within "$PYSRV" 10000 || fail "the Python server did not finish: $(cat "$TMP/py.out")"
reap "$PYSRV"
expect_eq "Python server's exit status" "$REAPED_STATUS" 0
# The supervisor acts for the program (src/fuse/actfor.rs): the server sees the
# clients' own pids, not the supervisor's.
expect_eq "SO_PEERCRED pids the server saw" "$(grep 'peer pid' "$TMP/py.out" | head -2 | tr '\n' ' ')" "peer pid $GO_PID peer pid $C_PID "
# A dynamic program, directly or as a `#!` script's interpreter (through env), gets
# the library, and the run's filter under it (every process of the tree carries it:
# run_filter.sh): LD_PRELOAD names it and /proc says Seccomp 2.
cat >"$TMP/which_front.py" <<'PY'
#!/usr/bin/env python3
import os
lib = "library" if "libudsfs_preload" in os.environ.get("LD_PRELOAD", "") else "no library"
mode = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0]
print(lib, "seccomp", mode)
PY
chmod +x "$TMP/which_front.py"
expect_eq "python3 without --front" "$("$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/which_front.py" 2>&1)" "library seccomp 2"
expect_eq "a python3 script without --front" "$("$UDSFS_BIN" run --mount "$MNT" -- "$TMP/which_front.py" 2>&1)" "library seccomp 2"
expect_eq "python3 with --front seccomp" "$(seccomp python3 "$TMP/which_front.py" 2>&1)" "no library seccomp 2"
ok "without --front: static programs got the supervisor, dynamic ones the library"

# Only a process's own tree may be acted for: the script is no descendant of python.
out=$(python3 -c '
import errno, os, sys
try:
    os.setxattr(sys.argv[1], "user.udsfs.act_for", sys.argv[2].encode())
    print("granted")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MNT" "$$")
expect_eq "act_for a process outside the caller's tree" "$out" EPERM

# 2. A Go server through the supervisor; a Python client through the library and the
#    static client through the supervisor.
GO_SOCK=$MNT/go.sock
start_bg GOSRV "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/unixprobe" serve "$GO_SOCK" 2 >"$TMP/go.out" 2>&1
wait_listening "$GO_SOCK"
expect_socket_home "$GO_SOCK"
out=$(on_udsfs python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"from python\n")
print(s.makefile().readline(), end="")
cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
print("server pid", int.from_bytes(cred[:4], sys.byteorder))' "$GO_SOCK" 2>&1) || fail "the Python client failed: $out"
expect_eq "Go server's answer to Python" "$(sed -n 1p <<<"$out")" "go got from python"
GOSRV_PID=$(sed -n 's/^listening on .* pid //p' "$TMP/go.out")
expect_eq "SO_PEERCRED pid of the Go server, seen by its client" "$(sed -n 's/^server pid //p' <<<"$out")" "$GOSRV_PID"
out=$(seccomp "$TMP/static_client" "$GO_SOCK" static 2>&1) || fail "the static client failed: $out"
expect_eq "Go server's answer to the static client" "$(sed -n 1,2p <<<"$out")" "reply: go got static
peer: $GO_SOCK"
ended_within "$GOSRV" 10000 || fail "the Go server did not finish: $(cat "$TMP/go.out")"
reap "$GOSRV"
expect_eq "Go server's exit status" "$REAPED_STATUS" 0
expect_eq "Go server's output" "$(cat "$TMP/go.out")" "listening on $GO_SOCK pid $GOSRV_PID
served 2"

# 2b. A Go HTTP server (net/http) answered by curl through the library.
WWW=$MNT/www.sock
start_bg HTTPSRV "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/unixprobe" http "$WWW" 2 >"$TMP/http.out" 2>&1
wait_listening "$WWW"
expect_socket_home "$WWW"
body=$(on_udsfs curl --silent --show-error --fail --max-time 20 --unix-socket "$WWW" http://go/a http://go/b 2>&1) ||
    fail "curl failed: $body"
expect_eq "Go HTTP bodies through curl" "$body" "hello from Go: /a
hello from Go: /b"
ended_within "$HTTPSRV" 10000 || fail "the Go HTTP server did not finish: $(cat "$TMP/http.out")"
reap "$HTTPSRV"
expect_eq "Go HTTP server's exit status" "$REAPED_STATUS" 0

# 3. Datagrams: the Go client binds an abstract name (a kernel socket made udsfs at
#    bind), connects, writes and reads natively; the server answers to that name.
cat >"$TMP/dgram.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("bound", flush=True)
data, addr = s.recvfrom(256)
s.sendto(b"py got " + data, addr)
print("from", addr, flush=True)
PY
DG_SOCK=$MNT/dg.sock
serve DGSRV "$DG_SOCK" "$TMP/dg.out" -- python3 "$TMP/dgram.py" "$DG_SOCK"
out=$(seccomp "$TMP/unixprobe" dgram "$DG_SOCK" dgram-go 2>&1) || fail "the Go datagram client failed: $out"
expect_eq "Go datagram reply" "$(sed -n 1p <<<"$out")" "reply: py got dgram-go"
sed -n 2p <<<"$out" | grep -q '^local: @unixprobe-' || fail "Go's local address: $out"
ended_within "$DGSRV" 10000 || fail "the datagram server did not finish: $(cat "$TMP/dg.out")"
reap "$DGSRV"
grep -q "from b'\\\\x00unixprobe-" "$TMP/dg.out" || fail "the server saw the sender as: $(cat "$TMP/dg.out")"
ok "a Go datagram socket bound an abstract udsfs name and got its answer"

# 3b. Bad pointers and lengths (integration/c/hostile.c): the supervisor answers as
#     Linux does and goes on serving; the same program on kernel sockets is the reference.
mkdir "$TMP/k"
"$TMP/hostile" "$TMP/k" >"$TMP/hostile.kernel" 2>&1 || fail "hostile on kernel sockets: $(cat "$TMP/hostile.kernel")"
seccomp "$TMP/hostile" "$MNT" >"$TMP/hostile.udsfs" 2>&1 || fail "hostile through the supervisor: $(cat "$TMP/hostile.udsfs")"
expect_eq "hostile's sockets on the kernel" "$(grep -c '^where: kernel$' "$TMP/hostile.kernel")" 3
expect_eq "hostile's sockets through the supervisor that were udsfs" "$(grep -c '^where: udsfs$' "$TMP/hostile.udsfs")" 3
# The supervisor's own lines (a refusal it says, as the library says it) are not answers.
if ! diff <(grep -v '^where: ' "$TMP/hostile.kernel") \
    <(grep -v '^where: \|^udsfs run (seccomp): ' "$TMP/hostile.udsfs") >"$TMP/hostile.diff"; then
    cat "$TMP/hostile.diff" >&2
    fail "the supervisor answered bad input differently from the kernel (< kernel, > udsfs)"
fi
ok "bad input: the same $(grep -vc '^where: ' "$TMP/hostile.udsfs") answers as the kernel, and the exchange after them works"

# 3c. The message calls of a static program on socketpairs (integration/c/messages.c):
#     queue ioctls, sendmmsg/recvmmsg, SCM_RIGHTS of a socket, SCM_CREDENTIALS, and
#     receives into memory that cannot be written (a stream's bytes stay queued).
"$TMP/messages" >"$TMP/messages.kernel" 2>&1 || fail "messages on kernel sockets: $(cat "$TMP/messages.kernel")"
seccomp "$TMP/messages" >"$TMP/messages.udsfs" 2>&1 || fail "messages through the supervisor: $(cat "$TMP/messages.udsfs")"
expect_eq "messages' pairs through the supervisor that were udsfs" "$(grep -c '^where: udsfs$' "$TMP/messages.udsfs")" 2
if ! diff <(grep -v '^where: ' "$TMP/messages.kernel") <(grep -v '^where: ' "$TMP/messages.udsfs") >"$TMP/messages.diff"; then
    cat "$TMP/messages.diff" >&2
    fail "the supervisor's message calls answered differently from the kernel (< kernel, > udsfs)"
fi
ok "message calls: the same $(grep -vc '^where: ' "$TMP/messages.udsfs") results as the kernel"

# 3d. The socket API of integration/run_checks.py (run_python.sh runs it through the
#     library) in Python under the supervisor alone, against the kernel. One known
#     difference: fstat of a udsfs socket is its data file's (S_IFREG); the library
#     answers S_IFSOCK, the supervisor does not trap fstat.
mkdir "$TMP/rc.k" "$MNT/rc"
python3 "$ROOT/integration/run_checks.py" "$TMP/rc.k" kernel >"$TMP/rc.kernel" 2>&1 || fail "run_checks.py on kernel sockets: $(tail -3 "$TMP/rc.kernel")"
seccomp python3 "$ROOT/integration/run_checks.py" "$MNT/rc" udsfs >"$TMP/rc.udsfs" 2>&1 || fail "run_checks.py through the supervisor: $(tail -3 "$TMP/rc.udsfs")"
tail -1 "$TMP/rc.udsfs" | grep -qx done || fail "run_checks.py did not finish through the supervisor"
expect_eq "run_checks.py descriptors that were udsfs sockets" "$(grep -c 'where: udsfs$' "$TMP/rc.udsfs")" 3
known='where: |^pair fstat is socket: '
if ! diff <(grep -Ev "$known" "$TMP/rc.kernel") <(grep -Ev "$known" "$TMP/rc.udsfs") >"$TMP/rc.diff"; then
    cat "$TMP/rc.diff" >&2
    fail "run_checks.py through the supervisor answered differently from the kernel (< kernel, > udsfs)"
fi
ok "run_checks.py under the supervisor: the same $(grep -Evc "$known" "$TMP/rc.udsfs") results as the kernel"

# 3e. Conformance scenarios under the supervisor against the kernel: names as
#     given (relative, `sub/../x`), SO_RCVTIMEO/SO_SNDTIMEO with MSG_WAITALL, buffer
#     sizes carried at the switch and passed sockets cut by the room and RLIMIT_NOFILE.
for scen in given_names timeo bufs; do
    mkdir "$TMP/$scen.k" "$MNT/$scen"
    python3 "$ROOT/tests/conformance/$scen.py" "$TMP/$scen.k" >"$TMP/$scen.kernel" 2>&1 ||
        fail "$scen.py on kernel sockets: $(tail -3 "$TMP/$scen.kernel")"
    seccomp python3 "$ROOT/tests/conformance/$scen.py" "$MNT/$scen" >"$TMP/$scen.udsfs" 2>&1 ||
        fail "$scen.py through the supervisor: $(tail -3 "$TMP/$scen.udsfs")"
    expect_eq "$scen.py ran on" "$(head -1 "$TMP/$scen.udsfs")" "where: udsfs"
    if ! diff <(tail -n +2 "$TMP/$scen.kernel") <(tail -n +2 "$TMP/$scen.udsfs") >"$TMP/$scen.diff"; then
        cat "$TMP/$scen.diff" >&2
        fail "$scen.py through the supervisor answered differently from the kernel (< kernel, > udsfs)"
    fi
    ok "$scen.py under the supervisor: the same $(($(wc -l <"$TMP/$scen.udsfs") - 1)) results as the kernel"
done

# 4. A blocking accept under the supervisor: a signal runs the program's handler (the
#    supervisor ends its wait with ERESTARTSYS, the accept restarts) and the accept
#    still takes the next connection; then a kill while trapped leaves no thread.
# The start of the two programs that take a signal while blocked: a SIGUSR1 handler
# that says it ran, and a stream socket s.
SIGNALLED='import os, signal, socket, sys
def handler(sig, frame):
    print("handler ran", flush=True)
signal.signal(signal.SIGUSR1, handler)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)'
signalled() { # signalled FILE: $SIGNALLED, then stdin, into FILE
    {
        printf '%s\n' "$SIGNALLED"
        cat
    } >"$1"
}
signalled "$TMP/blocking.py" <<'PY'
s.bind(sys.argv[1])
s.listen(1)
print("pid", os.getpid(), flush=True)
c, _ = s.accept()
print("accepted", c.recv(100).decode(), flush=True)
c.close()
c, _ = s.accept()
print("unreachable", flush=True)
PY
BL_SOCK=$MNT/blocking.sock
start_bg BLRUN "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- sh -c 'python3 "$1" "$2"; echo "python: $?"; exec sleep 30' sh "$TMP/blocking.py" "$BL_SOCK" >"$TMP/bl.out" 2>&1
wait_listening "$BL_SOCK"
expect_socket_home "$BL_SOCK"
wait_grep() { local f=$1 pat=$2 i; for i in $(seq 1 200); do grep -q "$pat" "$f" && return 0; sleep 0.05; done; return 1; }
wait_grep "$TMP/bl.out" '^pid ' || fail "no pid line: $(cat "$TMP/bl.out")"
PYPID=$(sed -n 's/^pid //p' "$TMP/bl.out")
BLPROPER=$(run_proper "$BLRUN")
# The supervisor's threads parked in the daemon (the pool's idle workers stay).
supervise_threads() { parked_threads "$BLPROPER"; }
sleep 0.3
[ "$(supervise_threads)" -ge 1 ] || fail "no supervisor thread waits for the blocking accept"
kill -USR1 "$PYPID"
wait_grep "$TMP/bl.out" '^handler ran' || fail "the handler did not run while accept waited: $(cat "$TMP/bl.out")"
ok "SIGUSR1 reached the program waiting in a trapped accept (its handler ran)"
out=$(seccomp "$TMP/static_client" "$BL_SOCK" after-signal 2>&1) || true
wait_grep "$TMP/bl.out" '^accepted after-signal' || fail "the accept did not go on after the signal: $(cat "$TMP/bl.out")"
ok "the accept restarted and took the next connection"
sleep 0.3
[ "$(supervise_threads)" -ge 1 ] || fail "no supervisor thread waits for the second accept"
kill -KILL "$PYPID"
wait_grep "$TMP/bl.out" '^python: 137' || fail "python was not killed: $(cat "$TMP/bl.out")"
for _ in $(seq 1 60); do [ "$(supervise_threads)" -eq 0 ] && break; sleep 0.05; done
expect_eq "supervisor threads left after the kill" "$(supervise_threads)" 0
kill -TERM "$BLRUN"
ended_within "$BLRUN" 10000 || fail "udsfs run did not end"
reap "$BLRUN"
ok "a program killed in a trapped accept leaves no supervisor thread"

# 4b. A blocking recv under the supervisor parks in the daemon (MSGF_WAIT; the
#     supervisor's thread sleeps in its FUSE request, not in poll): a signal to the
#     program ends the parked call (src/supervisor/park.rs), its handler runs and the
#     recv goes on to take what is sent next; a kill leaves no thread waiting.
signalled "$TMP/recv_block.py" <<'PY'
s.connect(sys.argv[1])
print("pid", os.getpid(), flush=True)
print("got", s.recv(100).decode(), flush=True)
s.recv(100)
PY
# The peer sends once the file $2 exists and ends once $3 does (a background job's
# stdin is /dev/null).
cat >"$TMP/recv_peer.py" <<'PY'
import os, socket, sys, time
def until(path):
    while not os.path.exists(path):
        time.sleep(0.02)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
until(sys.argv[2])
c.sendall(b"after-signal")
until(sys.argv[3])
PY
RB_SOCK=$MNT/recv_block.sock
serve RBPEER "$RB_SOCK" "$TMP/rbpeer.out" -- python3 "$TMP/recv_peer.py" "$RB_SOCK" "$TMP/rb.send" "$TMP/rb.end"
start_bg RBRUN "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- sh -c 'python3 "$1" "$2"; echo "python: $?"; exec sleep 30' sh "$TMP/recv_block.py" "$RB_SOCK" >"$TMP/rb.out" 2>&1
wait_grep "$TMP/rb.out" '^pid ' || fail "no pid line: $(cat "$TMP/rb.out")"
RBPID=$(sed -n 's/^pid //p' "$TMP/rb.out")
# Where the supervisor's waiting thread sleeps: fuse's request_wait_answer when parked
# in the daemon (a poll would show do_sys_poll or poll_schedule_timeout).
RBPROPER=$(run_proper "$RBRUN")
parked_in() {
    local t
    for t in /proc/"$RBPROPER"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = udsfs-supervise ] || continue
        # (The pool's idle workers wait elsewhere.)
        [[ $(cat "$t/wchan" 2>/dev/null) == *request_wait_answer* ]] && echo request_wait_answer
    done
}
for _ in $(seq 1 100); do [[ $(parked_in) == *request_wait_answer* ]] && break; sleep 0.05; done
[[ $(parked_in) == *request_wait_answer* ]] || fail "the blocking recv is not parked in the daemon: $(parked_in | tr '\n' ' '); $(cat "$TMP/rb.out")"
kill -USR1 "$RBPID"
wait_grep "$TMP/rb.out" '^handler ran' || fail "the handler did not run while recv was parked: $(cat "$TMP/rb.out")"
ok "a recv parked in the daemon ended for SIGUSR1: its handler ran"
touch "$TMP/rb.send"
wait_grep "$TMP/rb.out" '^got after-signal' || fail "the recv did not go on after the signal: $(cat "$TMP/rb.out")"
ok "the recv went on after the handler and took what came next"
for _ in $(seq 1 100); do [[ $(parked_in) == *request_wait_answer* ]] && break; sleep 0.05; done
kill -KILL "$RBPID"
wait_grep "$TMP/rb.out" '^python: 137' || fail "python was not killed: $(cat "$TMP/rb.out")"
for _ in $(seq 1 60); do [ -z "$(parked_in)" ] && break; sleep 0.05; done
expect_eq "supervisor threads left after a kill in a parked recv" "$(parked_in | wc -l)" 0
kill -TERM "$RBRUN"
ended_within "$RBRUN" 10000 || fail "udsfs run did not end"
reap "$RBRUN"
touch "$TMP/rb.end"
ended_within "$RBPEER" 5000 || fail "the recv peer did not end"
reap "$RBPEER"
ok "a program killed in a parked recv leaves no supervisor thread"

# 5. Faults: Go clients killed at random points of their exchange with a server (through
#    the library) that never answers, and supervisors killed under their clients. No
#    socket is left behind, no process stays.
cat >"$TMP/sink.py" <<'PY'
import socket, sys, threading
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(64)
print("listening", flush=True)
def drain(c):
    while c.recv(4096):
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
PY
SINK=$MNT/sink.sock
serve SINKSRV "$SINK" "$TMP/sink.out" -- python3 "$TMP/sink.py" "$SINK"
base=$(socket_count)
runs=()
for i in $(seq 1 12); do
    start_bg R "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/unixprobe" dial "$SINK" "fault $i" >/dev/null 2>&1
    runs+=("$R")
    sleep "0.0$((RANDOM % 8))"
    child=
    for _ in $(seq 1 100); do
        child=$(cat /proc/"$(run_proper "$R")"/task/*/children 2>/dev/null | tr ' ' '\n' | head -1) || true
        [ -z "$child" ] || break
        sleep 0.01
    done
    [ -n "$child" ] || fail "udsfs run $R started no command"
    runs+=("$child")
    if [ $((i % 3)) -eq 0 ]; then
        kill -KILL "$R" 2>/dev/null || true # the supervisor: its command goes with it
    else
        kill -KILL "$child" 2>/dev/null || true
    fi
done
for r in "${runs[@]}"; do
    ended_within "$r" 5000 || fail "process $r (udsfs run or its command) still runs after the kill"
done
wait_socket_count "$base" 5000
ok "12 killed clients and supervisors: every process ended, the daemon is back to $base sockets"
kill -KILL "$SINKSRV"

# 6. The end: `udsfs run` of a static program returns with its status at once, and `udsfs
#    run` proper (the supervisor) ends with the last process under the filter: the
#    program alone, or a child it forked that outlives it by 300 ms. Also with each
#    receive staying blocked when the last process goes, as on a kernel before 6.11
#    (src/supervisor/notify.rs `watch_end` ends them; on this kernel RECV returns).
for stays in 0 1; do
    for front in "--front seccomp" ""; do
        for ms in 0 300; do
            what="stays=$stays front='$front' child=${ms}ms"
            # shellcheck disable=SC2086 # $front: no word or two
            start_bg R env UDSFS_TEST_RECV_STAYS=$stays "$UDSFS_BIN" run $front --mount "$MNT" -- "$TMP/fork_exit" "$ms" >"$TMP/end.out" 2>&1
            # udsfs run proper, found while the run lives (a short one may end first).
            proper=
            while [ -z "$proper" ] && proc_alive "$R"; do
                proper=$(cat /proc/"$R"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1) || true
            done
            ended_within "$R" 10000 || fail "$what: udsfs run still runs 10 s after the program: $(cat "$TMP/end.out")"
            reap "$R"
            expect_eq "$what: the run's status" "$REAPED_STATUS" 7
            # (bash may add its notices of section 5's killed jobs to the file.)
            expect_eq "$what: the program's output" "$(grep -x exchanged "$TMP/end.out")" exchanged
            [ -n "$proper" ] || { echo "  $what: returned before its udsfs run proper was seen"; continue; }
            ended_within "$proper" 10000 || fail "$what: udsfs run proper (the supervisor) still runs 10 s after the run returned: threads $(cat /proc/"$proper"/task/*/comm 2>/dev/null | tr '\n' ' ')"
            echo "  $what: udsfs run proper ended ${ELAPSED_MS} ms after the run returned"
        done
    done
done
ok "udsfs run of a static program (and of one whose child outlives it) returns with status 7, and its supervisor ends, with receives returning at the end and with them staying blocked"

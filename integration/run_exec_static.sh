#!/usr/bin/env bash
# run_exec_static.sh: both fronts in one process tree. Under `udsfs run`, a dynamically
# linked program (sh, bash, python3, env) runs with the preload library; when it execs a
# static binary (integration/c/static_client.c, gcc -static) or a Go binary
# (integration/go/unixprobe), the library's exec wrappers (preload/src/exec.rs) put that
# process under the run's seccomp supervisor (src/supervisor/adopt.rs) before the
# program starts, keeping its pid and parent. Checked: the programs reach a udsfs server
# (on kernel sockets the connect fails: the name in the mount is no kernel socket), the
# server's SO_PEERCRED pid is the child's pid as its parent shell knows it ($!), the
# parent's wait gets the child's exit status, execve/execvp/posix_spawn and
# execl/execlp/execle all count, a routed name works, a dynamic child stays under the
# library alone, a process outside the run's tree is refused by the supervisor's
# socket, and the socket goes with the run.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_static_gcc
need_cmd go golang-go readelf binutils python3 python3 bash bash
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "run_exec_static.sh tests udsfs run itself: UDSFS_RUN_VIA=kernel has nothing to compare"

export GOCACHE=$ROOT/target/gocache GOPATH=$ROOT/target/gopath GOPROXY=off GOFLAGS= GO111MODULE=on
(cd "$ROOT/integration/go/unixprobe" && go build -o "$TMP/unixprobe" .) || fail "go build failed"
gcc -static -O2 -o "$TMP/static_client" "$ROOT/integration/c/static_client.c" || fail "gcc -static static_client.c failed"
! readelf -l "$TMP/static_client" | grep -q INTERP || fail "static_client is not statically linked"
readelf -n "$TMP/unixprobe" | grep -q 'Go' || fail "unixprobe carries no Go build ID note"
ok "built static_client (no PT_INTERP) and unixprobe (Go $(go env GOVERSION))"

# Every `udsfs run` here keeps its temporary files (the supervisor's socket) in $RUNTMP.
RUNTMP=$TMP/runtmp
mkdir "$RUNTMP"
# What a run killed outright left behind (its process is gone): the next run sweeps it.
true &
DEAD=$!
wait "$DEAD"
mkdir "$RUNTMP/udsfs-exec-$DEAD-0"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$RUNTMP/udsfs-exec-$DEAD-0/sock"
run() { TMPDIR=$RUNTMP UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" "$@"; }

# The server, through the library: answers N connections, prints each peer's pid.
SOCK=$MNT/exec.sock
start_bg SRV env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$LIB_DIR/peer_pid_server.py" "$SOCK" 8 >"$TMP/srv.out" 2>&1
wait_listening "$SOCK"
expect_socket_home "$SOCK"

# child_of OUT: the pid the parent shell printed ("child PID status N").
child_of() { sed -n 's/^child \([0-9]*\) status .*/\1/p' <<<"$1"; }
status_of_child() { sed -n 's/^child [0-9]* status //p' <<<"$1"; }

# 1. sh (execve from a fork) runs the static client in the background and waits for it.
out=$(run -- sh -c '"$1" "$2" from-sh & p=$!; wait $p; echo "child $p status $?"' sh "$TMP/static_client" "$SOCK" 2>&1) ||
    fail "sh with the static client failed: $out"
expect_eq "static client's exchange under sh" "$(sed -n 1,2p <<<"$out")" "reply: py got from-sh
peer: $SOCK"
expect_eq "the static client's own pid is the one its parent started" "$(sed -n 's/^pid: //p' <<<"$out")" "$(child_of "$out")"
expect_eq "sh's wait for the static client" "$(status_of_child "$out")" 0
SH_CHILD=$(child_of "$out")

# 2. bash runs the Go client (dynamically linked for cgo, but raw system calls).
out=$(run -- bash -c '"$1" dial "$2" from-bash & p=$!; wait $p; echo "child $p status $?"' bash "$TMP/unixprobe" "$SOCK" 2>&1) ||
    fail "bash with the Go client failed: $out"
expect_eq "Go client's exchange under bash" "$(sed -n 1p <<<"$out")" "reply: py got from-bash"
expect_eq "the Go client's own pid is the one its parent started" "$(sed -n 's/^pid: //p' <<<"$out")" "$(child_of "$out")"
expect_eq "bash's wait for the Go client" "$(status_of_child "$out")" 0
GO_CHILD=$(child_of "$out")

# 3. python3's os.posix_spawn and env's execvp.
out=$(run -- python3 -c '
import os, sys
pid = os.posix_spawn(sys.argv[1], [sys.argv[1], sys.argv[2], "from-spawn"], os.environ)
_, st = os.waitpid(pid, 0)
print("child", pid, "status", os.waitstatus_to_exitcode(st), flush=True)' "$TMP/static_client" "$SOCK" 2>&1) ||
    fail "posix_spawn of the static client failed: $out"
expect_eq "static client's reply through posix_spawn" "$(sed -n 1p <<<"$out")" "reply: py got from-spawn"
expect_eq "posix_spawn's pid is the static client's" "$(sed -n 's/^pid: //p' <<<"$out")" "$(child_of "$out")"
SPAWN_CHILD=$(child_of "$out")
out=$(PATH=$TMP:$PATH run -- env static_client "$SOCK" from-env 2>&1) || fail "env static_client failed: $out"
expect_eq "static client's reply through env (execvp)" "$(sed -n 1p <<<"$out")" "reply: py got from-env"
ENV_PID=$(sed -n 's/^pid: //p' <<<"$out")
# 4. execl, execlp and execle, whose C library versions exec past the library
# (preload/src/exec_list.rs), from a dynamic C program; long lists put items and
# execle's envp on the stack.
gcc -O2 -Wall -Werror -o "$TMP/exec_list" "$ROOT/integration/c/exec_list.c" || fail "gcc exec_list.c failed"
out=$(PATH=$TMP:$PATH run -- "$TMP/exec_list" "$TMP/static_client" "$SOCK" 2>&1) || fail "exec_list failed: $out"
expect_eq "static client's replies through execl, execlp, execle" "$(grep '^reply' <<<"$out")" "reply: py got from-execl
reply: py got from-execlp
reply: py got from-execle"
expect_eq "their exit statuses" "$(sed -n 's/^child [0-9]* status //p' <<<"$out" | tr '\n' ' ')" "0 0 0 "
LIST_CHILDREN=$(sed -n 's/^child \([0-9]*\) status .*/\1/p' <<<"$out" | tr '\n' ' ')
out=$(run -- "$TMP/exec_list" echo 2>&1) || fail "exec_list echo failed: $out"
expect_eq "lists passed on the stack" "$(grep -v '^child' <<<"$out")" "a1 a2 a3 a4 a5 a6 a7 a8 a9
p1 p2 p3 p4 p5 p6 p7
from-envp
from-envp e0 e1 e2 e3"
# A `udsfs run` inside the run: the static child of its CMD asks the inner run (the
# environment names it), and one forced to the supervisor is not asked again.
out=$(run -- sh -c 'UDSFS_PRELOAD=$4 "$3" run --mount "$5" -- sh -c "\"\$1\" \"\$2\" nested" sh "$1" "$2"' sh "$TMP/static_client" "$SOCK" "$UDSFS_BIN" "$PRELOAD_LIB" "$MNT" 2>&1) ||
    fail "the static client under a nested udsfs run failed: $out"
expect_eq "static client's reply under a nested udsfs run" "$(sed -n 1p <<<"$out")" "reply: py got nested"
NESTED_PID=$(sed -n 's/^pid: //p' <<<"$out")
# Without UDSFS_SUPERVISOR in its environment the exec is left alone: kernel sockets,
# where the name in the mount refuses the connect.
out=$(run -- env -u UDSFS_SUPERVISOR sh -c '"$1" "$2" unsupervised; echo "status $?"' sh "$TMP/static_client" "$SOCK" 2>&1) || true
expect_eq "a static client exec'd without UDSFS_SUPERVISOR" "$(grep -c '^reply' <<<"$out") $(grep '^status' <<<"$out")" "0 status 1"

# 4. An exit status other than 0 reaches the parent: the client's usage error (2), with
#    no arguments and with 5000 (a vector too big for the library's stack space, so
#    built in a mapping), and a refused connect (1).
out=$(run -- sh -c '"$1"; echo "child - status $?"; "$1" $(seq 1 5000); echo "child - status $?"; "$1" "$2" x; echo "child - status $?"' sh "$TMP/static_client" "$MNT/nothing.sock" 2>&1) || true
expect_eq "exit statuses the shell saw" "$(grep '^child - status' <<<"$out" | tr '\n' ' ')" "child - status 2 child - status 2 child - status 1 "

ended_within "$SRV" 10000 || fail "the server did not finish: $(cat "$TMP/srv.out")"
reap "$SRV"
expect_eq "server's exit status" "$REAPED_STATUS" 0
expect_eq "SO_PEERCRED pids the server saw" "$(sed -n 's/^peer pid //p' "$TMP/srv.out" | tr '\n' ' ')" "$SH_CHILD $GO_CHILD $SPAWN_CHILD $ENV_PID ${LIST_CHILDREN}$NESTED_PID "
ok "static and Go children of sh, bash, python3, env and a nested udsfs run reached the udsfs server as themselves"

# 5. A routed name: the server binds under --route through the library, the static child
#    of sh connects to the same path (the supervisor routes it as the library does).
ROUTE=$TMP/routed
mkdir "$ROUTE"
start_bg RSRV env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --route "$ROUTE" -- python3 "$LIB_DIR/peer_pid_server.py" "$ROUTE/r.sock" 1 >"$TMP/rsrv.out" 2>&1
wait_listening "$ROUTE/r.sock"
out=$(run --route "$ROUTE" -- sh -c '"$1" "$2" routed' sh "$TMP/static_client" "$ROUTE/r.sock" 2>&1) ||
    fail "the static client on a routed name failed: $out"
expect_eq "static client's reply on a routed name" "$(sed -n 1p <<<"$out")" "reply: py got routed"
ended_within "$RSRV" 10000 || fail "the routed server did not finish: $(cat "$TMP/rsrv.out")"
reap "$RSRV"
ok "a static child reached a routed name"

# 6. A dynamic child of sh keeps the library, under the run's filter (Seccomp 2), as every
# process of the tree is (run_filter.sh).
expect_eq "python3 under sh" "$(run -- sh -c 'python3 -c "
import os
lib = \"library\" if \"libudsfs_preload\" in os.environ.get(\"LD_PRELOAD\", \"\") else \"no library\"
print(lib, [l.split()[1] for l in open(\"/proc/self/status\") if l.startswith(\"Seccomp:\")][0])"' 2>&1)" "library 2"

# 7. The supervisor's socket takes requests only from the run's own tree.
start_bg HOLD env TMPDIR="$RUNTMP" UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- sh -c 'echo "$UDSFS_SUPERVISOR"; exec sleep 30' >"$TMP/hold.out" 2>&1
for _ in $(seq 1 100); do [ -s "$TMP/hold.out" ] && break; sleep 0.05; done
REQ=$(head -1 "$TMP/hold.out")
[ -S "$REQ" ] || fail "no supervisor socket at '$REQ'"
got=$(python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
print("answer", s.recv(1))' "$REQ")
expect_eq "what the supervisor's socket answers a process outside its tree" "$got" "answer b''"
kill -TERM "$HOLD"
ended_within "$HOLD" 10000 || fail "udsfs run did not end"
reap "$HOLD"
grep -q "is not one this udsfs run started: refused" "$TMP/hold.out" || fail "no refusal said: $(cat "$TMP/hold.out")"
ok "a process outside the run's tree was refused"

# Every run removed its socket and directory, and the stale one of process $DEAD went.
expect_eq "what the runs left in their TMPDIR" "$(ls -A "$RUNTMP")" ""
ok "both fronts in one tree"

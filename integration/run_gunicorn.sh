#!/usr/bin/env bash
# run_gunicorn.sh: gunicorn (package gunicorn), a prefork WSGI server, on unix listeners
# only, three instances, curl the client:
# - sync workers: `--bind unix:SOCK` makes the listener in the arbiter, which forks 3
#   workers that all accept on it (select on the listener, then a non-blocking accept:
#   every idle worker wakes, one gets the connection). GETs, a 1 MiB POST hashed by the
#   app, two URLs in one curl, a 2 MiB answer, 30 requests at once to an app that takes
#   0.1 s (several workers serve), a request held half sent; SIGHUP (new workers, the
#   old ones stopped), a GET, the POST and 30 at once again; SIGUSR2: the arbiter forks
#   and execs gunicorn anew with the listener's fd number in GUNICORN_FD (the new one
#   takes the socket with fromfd, getsockname and listen again, writes PIDFILE.2 and
#   forks its own workers), 60 requests at once while the script SIGTERMs the old
#   arbiter (its workers go, the socket stays: the new arbiter holds it), the new one
#   sees its parent gone ("promoted") and renames its pid file, and the requests reach
#   only its workers; SIGTERM: it exits, its socket unlinked.
# - gthread workers (-k gthread --threads 4: a poller thread accepts, keep-alive) on a
#   socket-activated listener (activate.py binds it and execs gunicorn with it at fd 3,
#   LISTEN_PID and LISTEN_FDS): the same requests, two on one kept-alive connection;
#   SIGTERM (in systemd mode the socket is not unlinked).
# - --daemon --user www-data --group www-data --umask 007: the command exits at once, the
#   arbiter (forked twice, a session of its own) binds the socket 0770 and chowns it to
#   www-data, its workers run as www-data; a GET and a POST, a connect as www-data
#   (served) and as nobody (EACCES), then SIGTERM.
# Three runs: on kernel sockets, through `udsfs run` (the library) and `udsfs run --front
# seccomp` (the supervisor) with the sockets in the mount (udsfs sockets, not in
# /proc/net/unix): the same answers (bodies, hashes, which workers served, the socket's
# mode, how many sockets the table lists at each name, the pid files, exit statuses, no
# processes left, the socket files there or not) and the same log lines (times and pids
# out, sorted and counted). In the library's run the held request has a lane. The mount
# lets other users in (--allow-other): the www-data workers and nobody reach it.
UDSFS_MOUNT_ARGS=(--allow-other) # the daemon's www-data workers reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd gunicorn gunicorn curl curl
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
id www-data >/dev/null 2>&1 || fail "there is no user www-data (Debian's base system has one)"
chmod 755 "$TMP" # the www-data workers import app.py

F=$TMP/files
mkdir -p "$F"
head -c 1048576 /dev/urandom >"$F/post.bin"
head -c 2097152 /dev/urandom >"$F/big.bin"
POST_SUM=$(sha256sum <"$F/post.bin" | cut -d' ' -f1)
BIG_SUM=$(sha256sum <"$F/big.bin" | cut -d' ' -f1)
AT_ONCE=30
WORKERS=3

# The app: the request (method, path, query; the body's length and sha256) and, on a
# line of its own, the pid of the worker that served it (counted, not compared); /slow
# takes 0.1 s (requests at once spread over the workers), /big answers big.bin.
cat >"$TMP/app.py" <<EOF2
import hashlib, os, time


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/big":
        with open("$F/big.bin", "rb") as f:
            out = f.read()
    else:
        body = environ["wsgi.input"].read()
        if path == "/slow":
            time.sleep(0.1)
        # REMOTE_ADDR: the address accept() gave (the client's name's last part);
        # SERVER_NAME: the Host header's, or without one the listener's getsockname
        out = ("%s %s?%s, %d bytes, sha256 %s, from %r to %s:%s\nworker %d\n" % (
            environ["REQUEST_METHOD"], path, environ["QUERY_STRING"], len(body),
            hashlib.sha256(body).hexdigest(), os.path.basename(environ["REMOTE_ADDR"]),
            os.path.basename(environ["SERVER_NAME"]), environ["SERVER_PORT"], os.getpid())).encode()
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(len(out)))])
    return [out]
EOF2

# held.py SOCK RELEASE: a request sent half from a socket bound beside SOCK, the rest
# once the file RELEASE exists (10 s at most): its connection stays open at both ends
# while the script looks at the lanes.
cat >"$TMP/held.py" <<'EOF2'
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(os.path.join(os.path.dirname(sys.argv[1]), "held-client.sock"))
s.connect(sys.argv[1])
s.sendall(b"POST /held HTTP/1.0\r\nContent-Length: 10\r\n\r\nhello")
end = time.monotonic() + 10
while not os.path.exists(sys.argv[2]) and time.monotonic() < end:
    time.sleep(0.05)
s.sendall(b"world")
reply = b"".join(iter(lambda: s.recv(4096), b""))
print("held:", reply.decode().split("\r\n\r\n", 1)[1].splitlines()[0])
EOF2

# children PID: the pids of PID's children, sorted, one line.
children() { { pgrep -P "$1" || true; } | sort -n | xargs; }

# wait_workers MASTER N [OLD...]: waits (20 s at most) until MASTER has N children, none
# of them one of OLD (the workers a HUP replaces); WORKERS_NOW gets them.
wait_workers() {
    local master=$1 n=$2 i p stale
    shift 2
    for i in $(seq 1 1000); do
        WORKERS_NOW=$(children "$master")
        stale=0
        for p in "$@"; do [[ " $WORKERS_NOW " == *" $p "* ]] && stale=1; done
        [ "$(wc -w <<<"$WORKERS_NOW")" -eq "$n" ] && [ "$stale" = 0 ] && return 0
        sleep 0.02
    done
    fail "$UDSFS_RUN_VIA: gunicorn $master has children '$WORKERS_NOW', not $n new ones: $(tail -5 "$GLOG")"
}

# pid_in FILE: the pid FILE holds once it holds one (20 s at most).
pid_in() {
    local i p
    for i in $(seq 1 1000); do
        p=$( ([ -s "$1" ] && tr -d ' \n' <"$1") || true)
        [ -n "$p" ] && { echo "$p"; return 0; }
        sleep 0.02
    done
    fail "$UDSFS_RUN_VIA: no pid in $1 after 20 s: $(tail -5 "$GLOG")"
}

# served_by WHAT WORKERS [--how-many]: whether every pid in $D/served (the workers that
# answered since the last call) is one of WORKERS; with --how-many, whether several of
# them served or one (after requests at once; which worker takes a request alone is
# chance).
served_by() {
    local what=$1 mine=" $2 " p n bad=0 many=
    n=$(sort -u "$D/served" | wc -l)
    while read -r p; do [[ $mine == *" $p "* ]] || bad=$((bad + 1)); done <"$D/served"
    [ "${3:-}" != --how-many ] || many=", by $([ "$n" -gt 1 ] && echo several || echo "$n") of them"
    echo "served by $what: $([ "$bad" = 0 ] && echo all || echo "not all: $bad answers from others")$many"
    : >"$D/served"
}

# listed SOCK: how many sockets the mode's table (/proc/net/unix; $U/unix through udsfs)
# lists bound at SOCK, and how many of them listen.
listed() {
    local table=/proc/net/unix at=$1
    [ "$UDSFS_RUN_VIA" == kernel ] || { table=$U/unix at=$(tree_path "$1"); }
    awk -v p="$at" -v n="${1##*/}" 'NR > 1 && $8 == p { all++; if ($4 == "00010000") l++ }
        END { printf "listed at %s: %d, listening %d\n", n, all, l }' "$table"
}

# ask_app CURL_ARGS...: a request through curl on the socket, its answer with the
# worker's pid taken out (kept in $D/served) and the sent body's hash named SENT.
ask_app() {
    v curl -sS --max-time 15 --unix-socket "$SOCK" "$@" >"$D/reply" 2>&1 || echo "curl failed $?" >>"$D/reply"
    sed -n 's/^worker \([0-9]*\)$/\1/p' "$D/reply" >>"$D/served"
    sed "/^worker [0-9]*$/d; s/$POST_SUM/SENT/" "$D/reply"
}

# round WHAT [--short]: the requests (--short: not the two in one curl nor /big), their
# answers on stdout.
round() {
    local k right=0
    echo "- $1"
    ask_app "http://g/hello?a=1&b=2"
    ask_app --data-binary @"$F/post.bin" "http://g/post"
    if [ "${2:-}" != --short ]; then
        ask_app "http://g/one" "http://g/two"
        echo "GET /big:"
        v curl -sS --max-time 15 --unix-socket "$SOCK" http://g/big | sha256sum | sed "s/$BIG_SUM/WRITTEN/"
    fi
    rm -rf "$D/at_once"
    mkdir "$D/at_once"
    # (curl's errors only: in parallel it draws its progress meter despite --silent)
    v curl -sS --max-time 15 --unix-socket "$SOCK" --parallel --parallel-immediate --parallel-max "$AT_ONCE" \
        -o "$D/at_once/#1" -w '%{http_code}\n' "http://g/slow?n=[1-$AT_ONCE]" 2>"$D/at_once.err" |
        sort | uniq -c || echo "curl failed $?"
    grep -a 'curl:' "$D/at_once.err" || true
    for k in $(seq 1 "$AT_ONCE"); do
        grep -q "^GET /slow?n=$k, 0 bytes, sha256 " "$D/at_once/$k" 2>/dev/null && right=$((right + 1))
        sed -n 's/^worker \([0-9]*\)$/\1/p' "$D/at_once/$k" >>"$D/served"
    done
    echo "$AT_ONCE at once, answers naming their own request: $right"
}

# gunicorn_cmd [--activated] BIND PID ARGS...: the command line (RUN_CMD) of gunicorn
# serving app.py at BIND with pid file PID and its log in $GLOG; ARGS: the worker's, or
# --daemon. --activated: started by activate.py, which binds BIND.
gunicorn_cmd() {
    local pre=()
    [ "$1" != --activated ] || { pre=(/usr/bin/python3 "$TMP/activate.py" "$2"); shift; }
    local bind=$1 pid=$2
    shift 2
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- ${pre[@]+"${pre[@]}"} gunicorn --chdir "$TMP" --bind "unix:$bind" \
        --pid "$pid" --error-logfile "$GLOG" --log-level info --worker-tmp-dir "$D" --timeout 10 \
        --graceful-timeout 5 "$@" app:application
}

# log_lines LOG DIR: the log without times, pids and the sockets' directory DIR, sorted
# and counted (the workers' lines come in any order), nor "Worker with pid N was
# terminated due to signal 15": a HUP's arbiter may send an old worker its SIGTERM twice
# (manage_workers, in reload and again in its loop before the reap), and one that comes
# while the worker's Python ends (its handler gone) kills it: on the kernel too, 2 or 3
# of the 3 in a HUP.
log_lines() {
    sed -E "s#$2#SOCKDIR#g; s/^\[[^]]*\] \[[0-9]+\] //; s/[0-9]+/N/g; /was terminated due to signal/d" "$1" | sort | uniq -c
}

# usr2 OUT START PIDFILE N: SIGUSR2 to the arbiter in PIDFILE (started as START, which
# start_bg gave): it re-execs gunicorn, whose arbiter writes PIDFILE.2 and forks N
# workers; then SIGTERM to the old one, whose exit status (START's) goes to OUT, and
# the new one, promoted, renames its pid file. SECOND gets its pid, SECOND_WORKERS its
# workers'.
usr2() {
    local out=$1 start=$2 pidf=$3 n=$4 first i
    first=$(pid_in "$pidf")
    {
        echo "-- SIGUSR2"
        kill -USR2 "$first"
        SECOND=$(pid_in "$pidf.2")
        local parent
        parent=$(ps -o ppid= -p "$SECOND" | tr -d ' ')
        echo "the new arbiter: $([ "$SECOND" != "$first" ] && echo "a new pid" || echo "the same pid")," \
            "its parent $([ "$parent" == "$first" ] && echo "the old arbiter" || echo "another")"
        wait_workers "$SECOND" "$n"
        SECOND_WORKERS=$WORKERS_NOW
        # requests while both arbiters' workers accept on the socket, the old arbiter's
        # SIGTERM in their midst: its workers end after the request in hand, the new
        # ones take the rest
        v curl -sS --max-time 15 --unix-socket "$SOCK" --parallel --parallel-immediate --parallel-max "$AT_ONCE" \
            -o /dev/null -w '%{http_code}\n' "http://g/slow?across=[1-$((2 * AT_ONCE))]" >"$D/across" 2>"$D/across.err" &
        local across=$!
        sleep 0.3
        kill -TERM "$first"
        wait "$across" || echo "curl failed $?"
        echo "$((2 * AT_ONCE)) requests across the old arbiter's end: $(sort "$D/across" | uniq -c | xargs)"
        grep -a 'curl:' "$D/across.err" || true
    } >>"$out"
    exit_status "$out" "the first arbiter (SIGUSR2, then SIGTERM)" "$start" 20000 "$GLOG"
    {
        # promoted: its pid file renamed from .2 (it looks once a second)
        for i in $(seq 1 1000); do
            [ ! -e "$pidf.2" ] && [ "$(cat "$pidf" 2>/dev/null)" == "$SECOND" ] && break
            sleep 0.02
        done
        echo "pid files: $(cd "$D" && ls "${pidf##*/}"* | xargs), ${pidf##*/} $([ "$(tr -d ' \n' <"$pidf")" == "$SECOND" ] && echo "the new arbiter's" || echo "another's")"
        echo "the new arbiter's workers: $([ "$(children "$SECOND")" == "$SECOND_WORKERS" ] && echo "the same $n" || echo "changed")"
    } >>"$out"
}

# stopped SID MASTER PIDFILE: SIGTERM to the arbiter MASTER (of session SID), which must
# end within 20 s; what is left of its processes, its socket ($SOCK) and pid file.
stopped() {
    local sid=$1 master=$2 pidf=$3
    echo "-- SIGTERM to the arbiter"
    kill -TERM "$master"
    ended_within "$master" 20000 || fail "$UDSFS_RUN_VIA: the arbiter did not end within 20 s: $(tail -5 "$GLOG")"
    session_left "$sid" 5
    # (its processes gone, any unlink of theirs is done)
    echo "${SOCK##*/} $([ -e "$SOCK" ] || [ -L "$SOCK" ] && echo "still there" || echo gone)"
    listed "$SOCK"
    echo "pid files: $(cd "$D" && ls "${pidf##*/}"* 2>/dev/null | xargs)"
}

# activate.py SOCK CMD...: systemd's socket activation: binds and listens at SOCK, the
# socket at fd 3, and execs CMD with LISTEN_PID (its own pid) and LISTEN_FDS=1.
cat >"$TMP/activate.py" <<'EOF2'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
os.set_inheritable(3, True)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1")
os.execvp(sys.argv[2], sys.argv[2:])
EOF2

# one_run NAME MODE [RUN OPTIONS...]: the instances in $TMP/gu-NAME on MODE's sockets
# (through udsfs: in the mount, $MNT/NAME); the answers go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 out=$TMP/$1.out
    D=$TMP/gu-$1
    shift 2
    RUN_OPTS=("$@")
    UDSFS_RUN_VIA=$mode
    local s=$D/s
    [ "$mode" == kernel ] || s=$MNT/$name
    mkdir -p "$D" "$s"
    : >"$out"

    # sync workers on the listener the arbiter binds; HUP, USR2 (GUNICORN_FD), TERM
    SOCK=$s/g.sock GLOG=$D/sync.log
    : >"$D/served"
    gunicorn_cmd "$SOCK" "$D/g.pid" --workers "$WORKERS"
    start_bg SYNC "${RUN_CMD[@]}" >"$D/sync.out" 2>&1
    wait_listening "$SOCK"
    expect_socket_home "$SOCK"
    local first old i
    first=$(pid_in "$D/g.pid")
    wait_workers "$first" "$WORKERS"
    {
        echo "-- the socket: $(stat -c '%F %a' "$SOCK")"
        listed "$SOCK"
        round "sync workers"
        served_by "the first arbiter's workers" "$WORKERS_NOW" --how-many
        echo "- a request held half sent:"
        rm -f "$D/release"
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- timeout 20 /usr/bin/python3 "$TMP/held.py" "$SOCK" "$D/release"
        "${RUN_CMD[@]}" >"$D/held.out" 2>&1 &
        local held=$!
        if [ "$mode" == udsfs ]; then held_lanes "$D/laned" "$held" 2 g.sock; fi
        # the accepted end names the listener's path too (5 s at most for the accept)
        for i in $(seq 1 250); do
            [[ $(listed "$SOCK") != *": 1, "* ]] && break
            sleep 0.02
        done
        listed "$SOCK"
        touch "$D/release"
        wait "$held" || echo "held.py failed $?"
        cat "$D/held.out"
        echo "-- SIGHUP"
        old=$WORKERS_NOW
        # shellcheck disable=SC2086 # the old pids, a word each
        kill -HUP "$first"
        wait_workers "$first" "$WORKERS" $old
        round "after SIGHUP" --short
        served_by "the workers the HUP forked" "$WORKERS_NOW" --how-many
    } >>"$out"
    usr2 "$out" "$SYNC" "$D/g.pid" "$WORKERS"
    {
        listed "$SOCK"
        round "after SIGUSR2 and the old arbiter's end"
        served_by "the new arbiter's workers" "$SECOND_WORKERS" --how-many
        stopped "$SYNC" "$SECOND" "$D/g.pid"
        echo "-- sync log (sorted, counted)"
        log_lines "$GLOG" "$s"
    } >>"$out"

    # gthread workers (a thread polls the listener and the kept-alive connections) on a
    # socket-activated listener (fd 3, taken with fromfd and closed). No USR2 here: in
    # systemd mode gunicorn 20.1 re-execs with LISTEN_FDS=1 but has closed fd 3, and the
    # new arbiter dies (ENOTSOCK) on the kernel too.
    SOCK=$s/t.sock GLOG=$D/gthread.log
    : >"$D/served"
    gunicorn_cmd --activated "$SOCK" "$D/t.pid" --workers 2 -k gthread --threads 4
    start_bg GTHREAD "${RUN_CMD[@]}" >"$D/gthread.out" 2>&1
    wait_listening "$SOCK"
    expect_socket_home "$SOCK"
    first=$(pid_in "$D/t.pid")
    wait_workers "$first" 2
    {
        echo "-- gthread, socket-activated"
        listed "$SOCK"
        round "gthread workers"
        served_by "the gthread workers" "$WORKERS_NOW" --how-many
        echo "two requests, connections: $(v curl -sS --max-time 15 --unix-socket "$SOCK" -o /dev/null -o /dev/null \
            -w '%{num_connects}\n' http://g/a http://g/b | xargs)"
        stopped "$GTHREAD" "$first" "$D/t.pid"
    } >>"$out"
    exit_status "$out" "gunicorn -k gthread, socket-activated" "$GTHREAD" 20000 "$GLOG"
    {
        echo "-- gthread log (sorted, counted)"
        log_lines "$GLOG" "$s"
    } >>"$out"

    # --daemon: the command ends at once, the arbiter (forked twice, a session of its own)
    # serves on
    SOCK=$s/d.sock GLOG=$D/daemon.log
    : >"$D/served"
    gunicorn_cmd "$SOCK" "$D/d.pid" --workers 2 --daemon --user www-data --group www-data --umask 007
    start_bg DAEMON "${RUN_CMD[@]}" >"$D/daemon.out" 2>&1
    exit_status "$out" "gunicorn --daemon" "$DAEMON" 20000 "$GLOG"
    first=$(pid_in "$D/d.pid")
    local sid
    sid=$(ps -o sid= -p "$first" | tr -d ' ')
    RUN_GROUPS+=("$sid") # killed at the script's end if still there
    wait_listening "$SOCK"
    expect_socket_home "$SOCK"
    wait_workers "$first" 2
    {
        echo "-- daemon: a session of its own: $([ "$sid" != "$DAEMON" ] && echo yes || echo no)"
        echo "the socket: $(stat -c '%F %a %U %G' "$SOCK"), the workers' users: $(ps -o user= --ppid "$first" | sort | uniq -c | xargs)"
        ask_app "http://g/daemon"
        ask_app --data-binary @"$F/post.bin" "http://g/daemon-post"
        # the socket's mode (umask 007) and owner (gunicorn's chown) decide who connects
        echo "as www-data: $(v setpriv --reuid=www-data --regid=www-data --init-groups curl -sS --max-time 15 \
            --unix-socket "$SOCK" "http://g/as-www-data" 2>&1 | sed '/^worker /d')"
        echo "as nobody: $(v setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, sys
try:
    socket.socket(socket.AF_UNIX).connect(sys.argv[1])
    print("connected")
except OSError as e:
    print(e.__class__.__name__, e.errno)' "$SOCK" 2>&1)"
        served_by "the daemon's workers" "$WORKERS_NOW"
        stopped "$sid" "$first" "$D/d.pid"
        echo "-- daemon log (sorted, counted)"
        log_lines "$GLOG" "$s"
    } >>"$out"
    show_answers "$name" "$out" "$D"/*.out "$D"/*.log
}

timed_run kernel kernel
kernel_said "POST /post?, 1048576 bytes, sha256 SENT, from '' to g:80" "the kernel run's app did not get the 1 MiB POST whole"
kernel_said "$AT_ONCE at once, answers naming their own request: $AT_ONCE" "the kernel run's $AT_ONCE requests at once did not all answer"
kernel_said "served by the first arbiter's workers: all, by several of them" "the kernel run's first workers did not all serve"
kernel_said "served by the new arbiter's workers: all, by several of them" "the kernel run's requests after SIGUSR2 did not reach the new arbiter's workers"
kernel_said 'WRITTEN  -' "the kernel run's 2 MiB answer did not arrive whole"
kernel_said "held: POST /held?, 10 bytes, sha256 .*, from 'held-client.sock' to g.sock:" "the kernel run's held request was not answered"
kernel_said 'the new arbiter: a new pid, its parent the old arbiter' "the kernel run's SIGUSR2 did not fork a new arbiter"
kernel_said 'the first arbiter (SIGUSR2, then SIGTERM) exit status: 0' "the kernel run's old arbiter did not exit 0"
kernel_said "pid files: g.pid, g.pid the new arbiter's" "the kernel run's new arbiter was not promoted"
kernel_said 'two requests, connections: 1 0' "the kernel run's gthread workers did not keep the connection alive"
kernel_said 'as nobody: PermissionError 13' "the kernel run's connect as nobody to the daemon's 0770 socket was not EACCES"
kernel_said 'processes left: none' "the kernel run left processes"

runs_through_fronts gunicorn gu sync.log "a request held half sent"

# shellcheck shell=bash
# integration/lib_run.bash: sourced (after lib.sh) by the run_*.sh scripts that run
# unmodified programs (curl, hackbench, PostgreSQL, CPython's test_socket) through
# `udsfs run`. Not a test itself (hence not *.sh).
#
# UDSFS_RUN_VIA picks where the programs' sockets live:
#   udsfs  (default) every program runs as `udsfs run --mount $MNT [--route DIR]... -- CMD`;
#          the scripts then check that their sockets are udsfs sockets (listed in
#          $U/unix) and not kernel sockets (absent from /proc/net/unix);
#   kernel the same commands run directly, on kernel sockets: the reference run, and a
#          way to check a harness while `udsfs run` is unfinished.
# Switching is this one variable; the commands are otherwise the same.

UDSFS_RUN_VIA=${UDSFS_RUN_VIA:-udsfs}
case $UDSFS_RUN_VIA in
udsfs)
    # `udsfs run` and a fresh preload library must exist: a missing one fails the
    # script, it never falls back to kernel sockets silently.
    if ! "$UDSFS_BIN" run --help >/dev/null 2>&1; then
        fail "'$UDSFS_BIN run' is not available; UDSFS_RUN_VIA=kernel runs this script on kernel sockets"
    fi
    need_preload
    ;;
kernel) ;;
*) fail "UDSFS_RUN_VIA must be udsfs or kernel, not '$UDSFS_RUN_VIA'" ;;
esac
export UDSFS_RUN_VIA
say "programs run via: $UDSFS_RUN_VIA"

# attack_needs WHAT: the setup of a script that attacks `udsfs run` as another user:
# the system's python3 (one under root's home may be closed to that user), setpriv, and
# UDSFS_RUN_VIA=udsfs (WHAT says why: "attacks udsfs run itself"); $TMP made 0755 (the
# other user's way to the files the script puts there).
attack_needs() {
    [ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
    command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
    [ "$UDSFS_RUN_VIA" == udsfs ] || fail "${0##*/} $1: UDSFS_RUN_VIA must be udsfs"
    chmod 755 "$TMP"
}

# run_cmd [--route DIR]... [--front FRONT] -- CMD [ARGS...]: the command line that runs
# CMD on the chosen sockets, in the array RUN_CMD (the front only through udsfs).
run_cmd() {
    local routes=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        --route | --front)
            routes+=("$1" "$2")
            shift 2
            ;;
        *) fail "run_cmd: unknown option $1" ;;
        esac
    done
    [ "${1:-}" == -- ] || fail "run_cmd: want -- before the command"
    shift
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        RUN_CMD=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT"
            ${routes[@]+"${routes[@]}"} -- "$@")
    else
        RUN_CMD=("$@")
    fi
}

# via [--route DIR]... [--front FRONT] -- CMD [ARGS...]: run CMD on the chosen sockets.
via() {
    run_cmd "$@"
    "${RUN_CMD[@]}"
}

# run_on MODE [RUN OPTIONS...]: a script's one_run runs its programs on MODE's sockets
# (UDSFS_RUN_VIA: udsfs or kernel), through udsfs with the RUN OPTIONS (RUN_OPTS, as
# run_cmd takes them: --route DIR, --front FRONT), which `v` and `run_has_lanes` read.
run_on() {
    UDSFS_RUN_VIA=$1
    shift
    RUN_OPTS=("$@")
}

# dirs_of UID DIR...: each DIR made (with its parents) and owned by user and group UID:
# the directories a program run as UID (setpriv) writes in or binds its socket in.
dirs_of() {
    local uid=$1
    shift
    mkdir -p "$@"
    chown "$uid:$uid" "$@"
}

# v CMD...: CMD on this run's sockets (`via` with the run's options, RUN_OPTS, which a
# script's one_run sets), 20 s at most.
v() { via ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- timeout 20 "$@"; }

# ask WHAT CMD...: CMD's output (stderr too) through `v`, then WHAT and its exit status.
ask() {
    local what=$1 rc=0
    shift
    v "$@" 2>&1 || rc=$?
    echo "$what: exit $rc"
}

# session_left SID SECONDS: "processes left: " and the commands of session SID's processes
# (start_bg's setsid: a server and all it forked), waiting up to SECONDS for them to go
# (a server's helpers end when they see its end, a moment after it); "none" when gone.
session_left() {
    local sid=$1 left i
    for i in $(seq 1 $(($2 * 50))); do
        left=$(ps -e -o sid=,comm= | awk -v s="$sid" '$1 == s { print $2 }' | sort | tr '\n' ' ')
        [ -n "$left" ] || break
        sleep 0.02
    done
    echo "processes left: ${left:-none}"
}

# serve VAR SOCK LOG [--route DIR]... -- CMD [ARGS...]: starts CMD on the chosen sockets
# as start_bg does (VAR set to its PID; its output in LOG) and waits until it listens at
# SOCK (wait_listening).
serve() {
    local _var=$1 _sock=$2 _log=$3
    shift 3
    run_cmd "$@"
    start_bg "$_var" "${RUN_CMD[@]}" >"$_log" 2>&1
    wait_listening "$_sock"
}

# kernel_has_socket PATH [ready]: /proc/net/unix lists a kernel socket bound at exactly
# PATH; with "ready", only once it can be reached: a listening one (Flags __SO_ACCEPTCON)
# or a datagram one (Type 0002). A server binds, often does more (opens a database),
# then listens: a client started at the bind alone is refused (ECONNREFUSED).
kernel_has_socket() {
    awk -v p="$1" -v ready="${2:-}" "$SOCKET_LISTED" /proc/net/unix
}
SOCKET_LISTED='NR > 1 && $8 == p && (ready == "" || $4 == "00010000" || $5 == "0002") { f = 1 } END { exit !f }'

# tree_path PATH: the name a socket bound at PATH has in the mount: PATH below $MNT, or
# a routed PATH at the same path below the mount root; $U/unix shows it without the
# leading slash.
tree_path() {
    case $1 in
    "$MNT"/*) printf '%s\n' "${1#"$MNT"/}" ;;
    *) printf '%s\n' "${1#/}" ;;
    esac
}

# udsfs_has_socket PATH [ready]: $U/unix lists a udsfs socket bound at PATH (the same
# columns as /proc/net/unix; "ready" as kernel_has_socket).
udsfs_has_socket() {
    awk -v p="$(tree_path "$1")" -v ready="${2:-}" "$SOCKET_LISTED" "$U/unix"
}

# wait_listening PATH [MS]: wait until a socket bound at PATH, listening (or a datagram
# one), is listed where the chosen mode puts it (udsfs: $U/unix, kernel: /proc/net/unix);
# fails after MS ms.
wait_listening() {
    local path=$1 limit=${2:-20000} start
    start=$(now_ms)
    while :; do
        if [ "$UDSFS_RUN_VIA" == udsfs ]; then
            udsfs_has_socket "$path" ready && return 0
            ! kernel_has_socket "$path" ||
                fail "a kernel socket is bound at $path (in /proc/net/unix), not a udsfs socket: the program escaped udsfs run"
        else
            kernel_has_socket "$path" ready && return 0
        fi
        [ $(($(now_ms) - start)) -le "$limit" ] ||
            fail "no socket bound at $path in $([ "$UDSFS_RUN_VIA" == udsfs ] && echo "$U/unix" || echo /proc/net/unix) after $limit ms"
        sleep 0.02
    done
}

# expect_socket_home PATH: the socket bound at PATH is where the mode says: through
# udsfs it is a udsfs socket and the kernel has no socket there (the library routed
# it); on kernel sockets the kernel has it.
expect_socket_home() {
    local path=$1
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        udsfs_has_socket "$path" || fail "$U/unix lists no socket bound at $path: $(cat "$U/unix")"
        ! kernel_has_socket "$path" || fail "the kernel has a socket bound at $path: the program's socket was not routed to udsfs"
        ok "$path is a udsfs socket (in $U/unix as $(tree_path "$path"), not in /proc/net/unix)"
    else
        kernel_has_socket "$path" || fail "/proc/net/unix lists no socket bound at $path"
        ok "$path is a kernel socket (UDSFS_RUN_VIA=kernel)"
    fi
}

# name_gone PATH: waits (10 s at most) until the socket's name PATH is gone (nothing
# there, not even a link: through udsfs a routed name is one) after its daemon quit;
# says "NAME gone" or "NAME still there" (NAME: PATH's last part), for the answers the
# kernel run and the udsfs run compare (run_git_credential.sh, run_gpg_agent.sh).
name_gone() {
    local i
    for i in $(seq 1 500); do
        [ -e "$1" ] || [ -L "$1" ] || { echo "${1##*/} gone"; return 0; }
        sleep 0.02
    done
    echo "${1##*/} still there"
}

# start_bg VAR CMD...: start CMD in the background in a process group of its own and
# set VAR to its PID. `udsfs run` leaves its child running when it is killed, so the
# script's cleanup kills each such group whole.
RUN_GROUPS=()
start_bg() {
    local var=$1
    shift
    setsid "$@" &
    printf -v "$var" %s "$!"
    RUN_GROUPS+=("$!")
}
_run_kill_groups() {
    local g
    for g in ${RUN_GROUPS[@]+"${RUN_GROUPS[@]}"}; do
        kill_session "$g"
    done
}
# kill_session SID: SIGKILL to every process of session SID (start_bg's setsid), its
# process group and any other: through `udsfs run` the program is no session leader, and
# a `timeout` there makes a process group of its own.
# (Under set -e too: a session already gone is no failure.)
kill_session() {
    kill -KILL -- "-$1" 2>/dev/null || true
    # shellcheck disable=SC2046 # one PID a word
    kill -KILL $(ps -e -o sid=,pid= | awk -v s="$1" '$1 == s { print $2 }') 2>/dev/null || true
}
# lib.sh's cleanup reads the script's status from $?: keep it across the kill (set +e, or
# a failing step here would end the trap before the unmount).
trap '_run_status=$?; set +e; _run_kill_groups; (exit $_run_status); _lib_cleanup' EXIT

# stop_bg [-SIG] PID...: stops programs start_bg started: each PID after a -SIG is sent
# SIG first (its graceful stop: nginx's QUIT, haproxy's USR1) and given 10 s to end;
# then every PID's process group is killed and the PIDs are reaped.
stop_bg() {
    local graceful=() all=() p
    while [ $# -gt 0 ]; do
        case $1 in
        -*)
            kill "$1" "$2" 2>/dev/null || true
            graceful+=("$2")
            all+=("$2")
            shift 2
            ;;
        *)
            all+=("$1")
            shift
            ;;
        esac
    done
    for p in ${graceful[@]+"${graceful[@]}"}; do ended_within "$p" 10000 || true; done
    for p in "${all[@]}"; do kill -- "-$p" 2>/dev/null || true; done
    wait "${all[@]}" 2>/dev/null || true
}

# exit_status OUT WHAT PID MS LOG: PID (the program WHAT, told to end) must end within MS
# ms, or the script fails with LOG's last lines; its exit status is appended to the
# answers OUT as "WHAT exit status: N".
exit_status() {
    local out=$1 what=$2 pid=$3 ms=$4 log=$5
    ended_within "$pid" "$ms" || fail "$UDSFS_RUN_VIA: $what did not end within $ms ms: $(tail -5 "$log")"
    reap "$pid"
    echo "$what exit status: $REAPED_STATUS" >>"$out"
}

# exits PID...: waits for each background PID in turn; EXITS gets their exit statuses,
# space-separated (not an echo: a $(...) subshell cannot wait for this shell's children).
exits() {
    local p n out=()
    for p in "$@"; do
        n=0
        wait "$p" || n=$?
        out+=("$n")
    done
    EXITS="${out[*]}"
}

# parked_threads PID: how many threads of the supervisor (`udsfs run` proper PID) sleep
# in a FUSE request, parked in the daemon.
parked_threads() {
    local t n=0
    for t in /proc/"$1"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = udsfs-supervise ] || continue
        [[ $(cat "$t/wchan" 2>/dev/null) == *request_wait_answer* ]] && n=$((n + 1))
    done
    echo "$n"
}

# The flood of waiting calls (integration/c/flood.c) that run_seccomp_flood.sh and
# adversarial_pool.sh start through `udsfs run --front seccomp`.
# flood_build: builds flood.c, static, as $TMP/flood.
flood_build() {
    need_static_gcc
    gcc -static -O2 -pthread -o "$TMP/flood" "$ROOT/integration/c/flood.c" || fail "gcc -static flood.c failed"
    chmod 755 "$TMP/flood"
}
# flood_start N [PREFIX...]: starts `PREFIX... udsfs run --front seccomp --mount $MNT --
# $TMP/flood N` in the background (RUN its PID, its output in FLOOD_OUT), its stdin a
# fifo held open until flood_release.
FLOOD_OUT=$TMP/flood.out
flood_start() {
    FLOOD_N=$1
    shift
    mkfifo -m 666 "$TMP/flood.fifo"
    exec {FLOOD_HOLD}<>"$TMP/flood.fifo"
    start_bg RUN bash -c 'exec "$@" <"$0"' "$TMP/flood.fifo" ${@+"$@"} \
        "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/flood" "$FLOOD_N" >"$FLOOD_OUT" 2>&1
}
# flood_release MS [WHOSE]: lets the flood's receivers have their bytes; they must all
# return within MS ms and the run exit 0. WHOSE ("B's") names them in the messages.
flood_release() {
    local ms=$1 whose=${2:+$2 }
    echo go >&"$FLOOD_HOLD"
    exec {FLOOD_HOLD}>&-
    ended_within "$RUN" "$ms" ||
        fail "${whose:-the }receivers did not all return within $((ms / 1000)) s of their data: $(tail -5 "$FLOOD_OUT")"
    reap "$RUN"
    [ "$REAPED_STATUS" = 0 ] || fail "${whose}run: exit status $REAPED_STATUS: $(tail -5 "$FLOOD_OUT")"
    expect_eq "${whose}receivers that returned" "$(sed -n 's/^received //p' "$FLOOD_OUT")" "$FLOOD_N"
}

# cpython_suite SUITE WHAT: runs scripts/cpython_suite --suite SUITE (CPython's own tests,
# Debian's libpython3.X-testsuite for /usr/bin/python3) on kernel sockets and via
# $UDSFS_RUN_VIA on $MNT, with integration/cpython_SUITE_exceptions.txt (test_socket's
# is cpython_exceptions.txt); fails when a test that passes on the kernel fails through
# udsfs unlisted, or when the pass never reached udsfs. WHAT names the suite in the
# messages.
cpython_suite() {
    local suite=$1 what=$2 version exceptions rc=0 module
    [ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (apt-get install python3)"
    version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    case $suite in
    socket) module=test.test_socket exceptions=$LIB_DIR/cpython_exceptions.txt ;;
    asyncio) module=test.test_asyncio.test_unix_events ;;
    socketserver) module=test.test_socketserver ;;
    multiprocessing) module=test.test_multiprocessing_forkserver ;;
    selectors) module=test.test_selectors ;;
    logging) module=test.test_logging ;;
    paths) module=test.test_stat ;;
    *) fail "cpython_suite: unknown suite $suite" ;;
    esac
    exceptions=${exceptions:-$LIB_DIR/cpython_${suite}_exceptions.txt}
    /usr/bin/python3 -c "import $module" 2>/dev/null ||
        fail "$module is missing for /usr/bin/python3 (apt-get install libpython$version-testsuite; .ci/run installs it)"
    python3 "$ROOT/scripts/cpython_suite" --suite "$suite" --mount "$MNT" --udsfs "$UDSFS_BIN" \
        --via "$UDSFS_RUN_VIA" --exceptions "$exceptions" --timeout 60 || rc=$?
    [ "$rc" -eq 0 ] || fail "scripts/cpython_suite --suite $suite exited with status $rc (table and failures above)"
    ok "every test of $what that passes on the kernel passes through $UDSFS_RUN_VIA or is a listed exception"
}

# kernel_said LINE WHY: the kernel run's answers ($TMP/kernel.out) hold the whole line
# LINE (a grep pattern), or the script fails saying WHY: the reference run did what the
# script meant it to do before same_answers compares the udsfs run with it.
kernel_said() {
    grep -qx -- "$1" "$TMP/kernel.out" || fail "$2"
}

# same_answers [--run NAME] WHAT [CMD [ARGS...]]: the scripts that run one program set
# twice (one_run kernel, one_run udsfs) compare the runs' answers, $TMP/kernel.out and
# $TMP/udsfs.out (or $TMP/NAME.out: a script with more runs than two); on a difference it
# prints the diff and CMD's output (the udsfs run's logs) and fails.
same_answers() {
    local run=udsfs
    if [ "$1" = --run ]; then
        run=$2
        shift 2
    fi
    local what=$1
    shift
    if ! diff "$TMP/kernel.out" "$TMP/$run.out" >"$TMP/diff"; then
        cat "$TMP/diff" >&2
        [ $# -eq 0 ] || "$@" >&2
        fail "$what's $run run answered differently from the kernel (< kernel, > $run)"
    fi
}

# show_answers MODE OUT LOG...: prints run MODE's answers (the file OUT), then fails if
# the library complained in any of the run's LOG files (a `udsfs-preload` line).
show_answers() {
    local mode=$1 out=$2
    shift 2
    say "$mode answers:"
    sed 's/^/    /' "$out"
    ! grep -h 'udsfs-preload' "$@" >&2 || fail "$mode: the library complained (above)"
}

# nginx_conf D WORKERS [USER]: writes D/nginx.conf for an nginx run in the foreground,
# with WORKERS workers run as USER (root if not given) and its error log, pid file and
# temporary files in D; its http block holds what comes on stdin (the upstreams and
# servers).
nginx_conf() {
    local d=$1 workers=$2 user=${3:-root}
    {
        cat <<EOF2
daemon off;
master_process on;
worker_processes $workers;
user $user;
error_log $d/error.log info;
pid $d/nginx.pid;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
EOF2
        cat
        echo "}"
    } >"$d/nginx.conf"
}

# laned_now [NAME]: how many sockets of the mount say lane=direct in their status now;
# with NAME, only those whose local or peer address ends in NAME (a server's connections,
# not the socketpairs its programs make for themselves: libmosquitto's one a client).
laned_now() {
    if [ -z "${1:-}" ]; then
        cat "$U"/sock/*/status 2>/dev/null | grep -c '^lane=direct$' || true
        return
    fi
    awk -v n="$1" '
        function counted() { if (laned && named) c++; laned = 0; named = 0 }
        FNR == 1 && NR > 1 { counted() }
        $0 == "lane=direct" { laned = 1 }
        /^(local|peer)=/ && length($0) >= length(n) && substr($0, length($0) - length(n) + 1) == n { named = 1 }
        END { if (NR > 0) counted(); print c + 0 }
    ' "$U"/sock/*/status 2>/dev/null || true
}

# run_has_lanes: this run's connections may get lanes: the mount has them (not
# UDSFS_LANES=off, --no-lanes) and its programs run under the library, which carries
# them, not under --front seccomp (in RUN_OPTS, set by run_on).
run_has_lanes() {
    [ "${UDSFS_LANES:-on}" != off ] && [[ " ${RUN_OPTS[*]-} " != *" seccomp "* ]]
}

# held_lanes FILE PID N [NAME]: the count lanes_seen reads from FILE, of the sockets
# (whose address ends in NAME, as laned_now) that say lane=direct while PID holds its
# connections: the most at once until N are seen (laned_most) where the run has lanes,
# else one look (none may come up; waiting for them would only take time).
held_lanes() {
    local file=$1 pid=$2 n=$3 name=${4:-}
    if run_has_lanes; then
        laned_most "$pid" "$n" "$name"
    else
        LANED_MOST=$(laned_now "$name")
        LANED_SEEN="one look"
    fi
    echo "$LANED_MOST $LANED_SEEN" >"$file"
}

# laned_most PID [ENOUGH [NAME]]: while PID runs (at most 10 s; with ENOUGH, until PID
# ends or ENOUGH are seen: a loaded machine may take longer than 10 s to bring them up),
# the most sockets of the mount whose status says lane=direct at once (`laned_now NAME`,
# sampled every 0.1 s), in LANED_MOST; LANED_SEEN says how many samples were taken over
# how long and what each saw, for a failure's message.
laned_most() {
    local pid=$1 enough=${2:-} name=${3:-} n i=0 most=100 seen=() t0
    t0=$(now_ms)
    [ -z "$enough" ] || most=100000
    LANED_MOST=0
    while [ "$i" -lt "$most" ]; do
        kill -0 "$pid" 2>/dev/null || break
        n=$(laned_now "$name")
        [ "$n" -gt "$LANED_MOST" ] && LANED_MOST=$n
        seen+=("$n")
        i=$((i + 1))
        [ -n "$enough" ] && [ "$LANED_MOST" -ge "$enough" ] && break
        sleep 0.1
    done
    local from=$((i > 40 ? i - 40 : 0))
    LANED_SEEN="$i samples over $(($(now_ms) - t0)) ms, lane=direct counts (the last 40): ${seen[*]:from}"
}

# timed_run NAME MODE DIR [RUN OPTIONS...]: the script's `one_run` with these arguments,
# and how long it took (said).
timed_run() {
    local t0
    t0=$(now_ms)
    one_run "$@"
    say "$1 run: $(($(now_ms) - t0)) ms"
}

# runs_through_fronts LABEL DIR LOG WHAT: the library's (udsfs) and the supervisor's
# (seccomp) runs, each `timed_run` with its directory $TMP/DIR-NAME, its answers and the
# last 30 lines of its LOG compared with the kernel run's, and its lanes counted
# (`lanes_seen` on DIR-NAME/laned, both ends of WHAT).
runs_through_fronts() {
    local label=$1 dir=$2 log=$3 what=$4 name
    for name in udsfs seccomp; do
        if [ "$name" == udsfs ]; then
            timed_run udsfs udsfs
        else
            timed_run seccomp udsfs --front seccomp
        fi
        same_answers --run "$name" "$label" tail -n 30 "$TMP/$dir-$name/$log"
        ok "$label and its clients, $name run: the same $(wc -l <"$TMP/$name.out") answers as on kernel sockets"
        lanes_seen "$TMP/$dir-$name/laned" "$name" 2 "$what"
    done
}

# lanes_seen FILE NAME N WHAT: run NAME's held connections had lanes where the run has
# them (run_has_lanes: at least N sockets, both ends of each of WHAT, said lane=direct at
# once), else none. FILE holds the script's count: LANED_MOST LANED_SEEN (held_lanes).
lanes_seen() {
    local file=$1 name=$2 n=$3 what=$4 most seen
    read -r most seen <"$file"
    if run_has_lanes; then
        [ "$most" -ge "$n" ] || fail "$name run: at most $most sockets said lane=direct while $what were held open (want $n: both ends of each); $seen"
        ok "$name run: $what had lanes ($most sockets said lane=direct at once)"
    else
        [ "$most" -eq 0 ] || fail "$name run without lanes: $most sockets said lane=direct"
        ok "$name run: no socket said lane=direct"
    fi
}

# udsfs_runs PROG SUBDIR N WHAT: after the script's kernel run, its `one_run` through
# `udsfs run` in $MNT/SUBDIR (the library; lanes as the mount has them) and through
# `--front seccomp` in $MNT/seccomp (no lanes): each run NAME's answers ($TMP/NAME.out)
# the kernel run's, with the server PROG's log $TMP/SUBDIR-NAME/PROG.log shown on a
# difference, and its lanes counted (`lanes_seen`: the count in $TMP/SUBDIR-NAME/laned,
# N sockets of WHAT).
udsfs_runs() {
    local prog=$1 sub=$2 n=$3 what=$4 name
    for name in udsfs seccomp; do
        if [ "$name" == udsfs ]; then
            timed_run udsfs udsfs "$MNT/$sub"
        else
            timed_run seccomp udsfs "$MNT/seccomp" --front seccomp
        fi
        same_answers --run "$name" "$prog" tail -n 20 "$TMP/$sub-$name/$prog.log"
        ok "$prog and its clients, $name run: the same $(wc -l <"$TMP/$name.out") answers as on kernel sockets"
        lanes_seen "$TMP/$sub-$name/laned" "$name" "$n" "$what"
    done
}

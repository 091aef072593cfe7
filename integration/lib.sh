# shellcheck shell=bash
# integration/lib.sh: sourced by every integration script; it builds nothing.
#
# On sourcing it:
#   - finds the binary: $UDSFS_BIN, else target/debug/udsfs under the repository root;
#   - makes a scratch directory $TMP (mktemp -d) holding the mount point $MNT and the
#     daemon log $LOG;
#   - mounts udsfs on $MNT (`udsfs mount --background --log-file $LOG`), with the
#     options in the array UDSFS_MOUNT_ARGS if the script set it before sourcing;
#     a later udsfs_mount starts the daemon through the command in the array
#     UDSFS_MOUNT_VIA if set (e.g. setpriv --bounding-set=-sys_ptrace: a daemon with
#     fewer capabilities);
#     set UDSFS_NO_MOUNT=1 before sourcing to mount later with `udsfs_mount`;
#     UDSFS_LANES=off (tests/integration.rs's lanes_off pass) mounts with --no-lanes
#     (=on: with --lanes);
#   - installs an EXIT trap that kills the script's background jobs, unmounts
#     (`udsfs umount`, then the daemon's PID, then `umount -l` as a last resort),
#     prints the daemon log if the script failed, and removes $TMP.
#
# Scripts run with `set -euo pipefail` and `umask 022`, and cd into $TMP, so relative
# scratch files land there. $U is $MNT/.udsfs. RUST_LOG defaults to "info".

set -euo pipefail
umask 022

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$LIB_DIR/.." && pwd)
UDSFS_BIN=${UDSFS_BIN:-$ROOT/target/debug/udsfs}
export RUST_LOG=${RUST_LOG:-info}
SCRIPT_NAME=$(basename "$0" .sh)

if [ ! -x "$UDSFS_BIN" ]; then
    echo "FAIL: udsfs binary not found at $UDSFS_BIN (build it with cargo build, or set UDSFS_BIN)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "FAIL: integration scripts must run as root (they mount FUSE without fusermount3)" >&2
    exit 1
fi

TMP=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/udsfs-$SCRIPT_NAME.XXXXXX")")
MNT=$TMP/mnt
LOG=$TMP/log
U=$MNT/.udsfs
DAEMON_PID=
mkdir "$MNT"
: >"$LOG"
export MNT U
cd "$TMP"

# ---------------------------------------------------------------- reporting

say() { printf '%s\n' "$*"; }
# wait_for FILE SECONDS WHY [OUTPUT]: waits up to SECONDS for FILE to exist (a
# background helper's sign that it got where it was going); else fails with WHY and
# what the file OUTPUT holds then (the helper's output).
wait_for() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        [ -e "$1" ] && return 0
        sleep 0.05
    done
    fail "$3${4:+: $(cat "$4" 2>/dev/null)}"
}

# let_go FILE PID WHY OUTPUT: makes FILE (a background helper's sign to go on) and
# waits for the helper PID to end; fails with WHY and the helper's OUTPUT if it failed.
let_go() {
    touch "$1"
    wait "$2" || fail "$3: $(cat "$4" 2>/dev/null)"
}

# as_uid UID CMD...: CMD as user and group UID, without supplementary groups.
as_uid() {
    command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
    local uid=$1
    shift
    setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}
ok() { printf 'ok: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    FAIL_WHY=$*
    exit 1
}

# verdict CASE OK WHAT: a case's outcome against the exceptions file $EXCEPTIONS (a
# case listed there is a known defect: it must fail, and passing makes it a failure
# until unlisted). Failures are added to the caller's array `failed`, which the
# script checks at its end.
verdict() {
    local c=$1 good=$2 what=$3
    if [ "$good" = 1 ]; then
        if grep -qx "$c" "$EXCEPTIONS"; then
            failed+=("$c passes but $EXCEPTIONS lists it: unlist it")
        fi
        ok "$c: $what"
    elif grep -qx "$c" "$EXCEPTIONS"; then
        say "known defect (listed in $EXCEPTIONS): $c: $what"
    else
        failed+=("$c: $what")
        printf 'FAIL: %s: %s\n' "$c" "$what" >&2
    fi
}

# ---------------------------------------------------------------- time and processes

# now_ms: wall clock in milliseconds (no fork needed for the clock itself).
now_ms() {
    local t=${EPOCHREALTIME//[.,]/}
    printf '%s\n' $((t / 1000))
}

# proc_alive PID: true while PID exists and is not a zombie (an unreaped child of this
# script still answers `kill -0`, so look at its state).
proc_alive() {
    local st
    # the comm field may hold spaces; read the state after the last ')'
    st=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# ended_within PID MS [START_MS]: wait up to MS ms (counted from START_MS, default now)
# for PID to end. Sets ELAPSED_MS (START_MS to the moment the end was seen). Returns
# 0 if it ended in time, 1 otherwise (and then keeps waiting no longer).
ELAPSED_MS=0
ended_within() {
    local pid=$1 limit=$2 start=${3:-$(now_ms)} now
    while :; do
        now=$(now_ms)
        if ! proc_alive "$pid"; then
            ELAPSED_MS=$((now - start))
            return 0
        fi
        if [ $((now - start)) -gt "$limit" ]; then
            ELAPSED_MS=$((now - start))
            return 1
        fi
        sleep 0.002
    done
}

# wait_parked PID [MS]: wait until PID sleeps inside a FUSE request (its wchan names the
# FUSE request wait), i.e. it is parked by the daemon. Fails the script after MS ms.
wait_parked() {
    local pid=$1 limit=${2:-5000} start wchan
    start=$(now_ms)
    while :; do
        wchan=$(cat "/proc/$pid/wchan" 2>/dev/null || true)
        case $wchan in
        *request_wait_answer* | *fuse*) return 0 ;;
        esac
        proc_alive "$pid" || fail "process $pid ended while we waited for it to block in the mount"
        [ $(($(now_ms) - start)) -le "$limit" ] ||
            fail "process $pid did not block in the mount within ${limit} ms (wchan=$wchan)"
        sleep 0.005
    done
}

# reap PID: collect the exit status of a background child into REAPED_STATUS.
REAPED_STATUS=0
reap() {
    REAPED_STATUS=0
    wait "$1" 2>/dev/null || REAPED_STATUS=$?
}

# timed VAR CMD...: run CMD, store its duration in ms in VAR; returns CMD's status.
timed() {
    local __var=$1 __t0 __rc=0
    shift
    __t0=$(now_ms)
    "$@" || __rc=$?
    printf -v "$__var" %s $(($(now_ms) - __t0))
    return $__rc
}

# ---------------------------------------------------------------- errno checks

declare -A ERRNO_TEXT=(
    [EPERM]="Operation not permitted" [ENOENT]="No such file or directory"
    [EINTR]="Interrupted system call" [EIO]="Input/output error"
    [ENXIO]="No such device or address" [EBADF]="Bad file descriptor"
    [EAGAIN]="Resource temporarily unavailable" [EACCES]="Permission denied"
    [EEXIST]="File exists" [EXDEV]="Invalid cross-device link"
    [ENOTDIR]="Not a directory" [EISDIR]="Is a directory" [EINVAL]="Invalid argument"
    [ENOSPC]="No space left on device" [ESPIPE]="Illegal seek" [EPIPE]="Broken pipe"
    [ENAMETOOLONG]="File name too long" [ENOTEMPTY]="Directory not empty"
    [ELOOP]="Too many levels of symbolic links" [ENOTCONN]="Transport endpoint is not connected"
    [EISCONN]="Transport endpoint is already connected" [EMSGSIZE]="Message too long"
    [EPROTOTYPE]="Protocol wrong type for socket" [EOPNOTSUPP]="Operation not supported"
    [EADDRINUSE]="Address already in use" [ECONNREFUSED]="Connection refused"
    [ECONNRESET]="Connection reset by peer" [ETOOMANYREFS]="Too many references: cannot splice"
    [ENOSYS]="Function not implemented"
)

errno_text() {
    local t=${ERRNO_TEXT[$1]:-}
    [ -n "$t" ] || t=$(python3 -c 'import errno,os,sys; print(os.strerror(getattr(errno, sys.argv[1])))' "$1")
    printf '%s\n' "$t"
}

# expect_errno ERRNAME CMD...: CMD (a command or a shell function) must fail, and its
# stderr must carry strerror(ERRNAME), as shell tools print it.
expect_errno() {
    local name=$1 text err rc=0
    shift
    text=$(errno_text "$name")
    err=$("$@" 2>&1 >/dev/null) || rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "'$*' succeeded; expected $name ($text)"
    fi
    case $err in
    *"$text"*) ok "'$*' fails with $name ($text)" ;;
    *) fail "'$*' failed (status $rc) but not with $name ($text): ${err:-<no message>}" ;;
    esac
}

# expect_ok CMD...: CMD must succeed; prints what it checked.
expect_ok() {
    local err rc=0
    err=$("$@" 2>&1 >/dev/null) || rc=$?
    [ "$rc" -eq 0 ] || fail "'$*' failed (status $rc): $err"
    ok "'$*' succeeds"
}

# expect_eq WHAT GOT WANT
expect_eq() {
    [ "$2" == "$3" ] || fail "$1: got '$2', want '$3'"
    ok "$1 = '$3'"
}

# answer_is WHAT WANT FRONT CMD...: CMD through `udsfs run --front FRONT` on the mount (60 s
# at most) answers exactly WANT and exits 0: ok; else the answer is said and FAILS counted
# (the caller fails once all its cases ran). The daemon is continued after it: a program
# that stops it (SIGSTOP, to hold a request in flight) may fail before it does.
answer_is() {
    local what=$1 want=$2 front=$3 got rc=0
    shift 3
    got=$(timeout 60 "$UDSFS_BIN" run --front "$front" --mount "$MNT" -- "$@" 2>&1) || rc=$?
    kill -CONT "$DAEMON_PID"
    if [ "$got" = "$want" ] && [ "$rc" -eq 0 ]; then
        ok "$what: $got"
    else
        say "FAILED: $what: $got (status $rc)"
        FAILS=$((FAILS + 1))
    fi
}

# py CODE [ARGS...]: run python3 with the helpers of udsfs_files.py (err, status,
# clone, pair, ctl, fill, fill_bytes, in_thread; M = mount, U = M/.udsfs) and the modules it
# imports (os, sys, errno, stat, fcntl, signal, threading, time). $PY_PRELUDE is its
# text, put before a program's own (not imported: a user other than root may not be
# able to read this directory).
PY_PRELUDE=$(cat "$LIB_DIR/udsfs_files.py")
py() {
    local code=$1
    shift
    python3 -c "$PY_PRELUDE
$code" "$@"
}

# with_helpers FILE [LIB.py...]: writes udsfs_files.py's text, then each LIB.py of
# integration/ (helpers some scripts share), then stdin, a program, to FILE.
with_helpers() {
    local out=$1 lib
    shift
    {
        printf '%s\n' "$PY_PRELUDE"
        for lib in "$@"; do cat "$LIB_DIR/$lib"; done
        cat
    } >"$out"
}

# exceptions_listed FILE PASS...: the lines of a run_*_tests exceptions FILE (`PASSES NAME
# REASON`, PASSES a comma list of the PASS words or *; blank lines and # lines skipped),
# each printed as `PASSES NAME` with * spelled out; fails (FAIL: FILE:LINE: why, on
# stderr) at a line without a reason or with a pass not among the PASS words.
exceptions_listed() {
    python3 - "$@" <<'EOF'
import sys
exceptions, every = sys.argv[1], set(sys.argv[2:])
for n, l in enumerate(open(exceptions), 1):
    l = l.strip()
    if not l or l.startswith("#"):
        continue
    f = l.split(None, 2)
    if len(f) < 3:
        sys.exit(f"FAIL: {exceptions}:{n}: want PASSES NAME REASON: {l}")
    passes = every if f[0] == "*" else set(f[0].split(","))
    if not passes <= every:
        sys.exit(f"FAIL: {exceptions}:{n}: unknown pass in {f[0]}")
    print(",".join(sorted(passes)), f[1])
EOF
}

# ---------------------------------------------------------------- sockets

# new_sock VAR TYPE: open .udsfs/TYPE/clone read-write, keep the control handle open in
# this shell; sets VAR to the socket number and VAR_FD to the handle's fd.
new_sock() {
    local var=$1 type=$2 fd n
    exec {fd}<>"$U/$type/clone" || fail "cannot open $U/$type/clone"
    n=$(dd bs=64 count=1 status=none <&"$fd") || fail "cannot read the socket number from $type/clone"
    n=${n%$'\n'}
    [[ $n =~ ^[0-9]+$ ]] || fail "$type/clone read gave '$n', want a socket number and a newline"
    printf -v "$var" %s "$n"
    printf -v "${var}_FD" %s "$fd"
}

# ctl FD CMD: write one command line to a control handle (one write()).
ctl() {
    printf '%s\n' "$2" >&"$1"
}

# close_fd FD: close a descriptor this shell holds.
close_fd() {
    local fd=$1
    eval "exec $fd>&-"
}

# send N TEXT: one write() of TEXT (no newline added) to socket N's data file.
send() {
    printf '%s' "$2" >"$U/sock/$1/data"
}

# recv N [BS]: one read() of at most BS (default 65536) bytes from socket N's data file.
recv() {
    dd bs="${2:-65536}" count=1 status=none <"$U/sock/$1/data"
}

# status_of N KEY: the value of KEY in socket N's status file.
# Fails the script if the status file has no KEY= line.
status_of() {
    local st
    st=$(cat "$U/sock/$1/status") || fail "cannot read $U/sock/$1/status"
    grep -q "^$2=" <<<"$st" || fail "sock/$1/status has no $2= line (status: $(tr '\n' ' ' <<<"$st"))"
    sed -n "s/^$2=//p" <<<"$st"
}

# expect_status N KEY VALUE
expect_status() {
    local got
    got=$(status_of "$1" "$2") || exit 1
    [ "$got" == "$3" ] || fail "sock/$1/status: $2='$got', want '$3' (status: $(tr '\n' ' ' <"$U/sock/$1/status"))"
    ok "sock/$1/status has $2=$3"
}

# sock_gone N [MS]: wait until .udsfs/sock/N disappears (the socket closed).
sock_gone() {
    local n=$1 limit=${2:-2000} start
    start=$(now_ms)
    while [ -e "$U/sock/$n" ]; do
        [ $(($(now_ms) - start)) -le "$limit" ] || return 1
        sleep 0.005
    done
}

# ---------------------------------------------------------------- mount and cleanup

# mounted DIR: DIR is a mount point in this namespace (reads mountinfo; never stats DIR,
# which would hang or fail on a dead FUSE mount).
mounted() {
    awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# udsfs_mount [OPTIONS...]: mount on $MNT in the background (through UDSFS_MOUNT_VIA's
# command, if set); sets DAEMON_PID.
# UDSFS_LANES=off (the cargo runner's lanes_off pass) adds --no-lanes, =on --lanes,
# unless OPTIONS say --lanes or --no-lanes themselves; the EXIT trap then checks that the
# mount really had (or had no) lanes (lanes_check), unless a mount asked for the other
# (LANES_ASKED=1).
LANES_ASKED=0
udsfs_mount() {
    local out rc=0 lanes=()
    if [ -n "${UDSFS_LANES:-}" ]; then
        case " $* " in
        *" --lanes "*) [ "$UDSFS_LANES" == on ] || LANES_ASKED=1 ;;
        *" --no-lanes "*) [ "$UDSFS_LANES" == off ] || LANES_ASKED=1 ;;
        *) [ "$UDSFS_LANES" == on ] && lanes=(--lanes) || lanes=(--no-lanes) ;;
        esac
    fi
    set -- ${lanes[@]+"${lanes[@]}"} "$@"
    # UDSFS_THREADS (set by the cargo runner's one-thread pass) comes first,
    # so a script's own --threads still wins.
    out=$(timeout 30 ${UDSFS_MOUNT_VIA[@]+"${UDSFS_MOUNT_VIA[@]}"} "$UDSFS_BIN" mount --background --log-file "$LOG" ${UDSFS_THREADS:+--threads "$UDSFS_THREADS"} "$@" "$MNT" </dev/null) || rc=$?
    [ "$rc" -eq 0 ] || fail "udsfs mount --background $* $MNT exited with status $rc: $out"
    DAEMON_PID=$(printf '%s\n' "$out" | tail -n1 | tr -d '[:space:]')
    [[ $DAEMON_PID =~ ^[0-9]+$ ]] || fail "udsfs mount --background printed '$out', want the daemon PID"
    mounted "$MNT" || fail "udsfs mount returned but $MNT is not in /proc/self/mountinfo"
    [ -d "$U" ] || fail "$U is missing right after the mount"
    say "mounted udsfs on $MNT (daemon pid $DAEMON_PID, log $LOG${*:+, options: $*})"
}

# udsfs_unmount: udsfs umount, then the daemon's PID, then umount -l; quiet and
# best-effort (the cleanup path uses it).
# udsfs_mount_noptrace [OPTIONS...]: `udsfs_mount` of a daemon started without
# CAP_SYS_PTRACE (what a hardened unit's CapabilityBoundingSet leaves: it may not read
# /proc/TID/ns or fdinfo of another user's process or of one with capabilities it lacks);
# fails if the daemon kept it.
udsfs_mount_noptrace() {
    UDSFS_MOUNT_VIA=(setpriv --bounding-set=-sys_ptrace)
    udsfs_mount "$@"
    UDSFS_MOUNT_VIA=()
    local cap_eff
    cap_eff=$(awk '/^CapEff:/ {print $2}' "/proc/$DAEMON_PID/status")
    ((0x${cap_eff:-0} >> 19 & 1)) && fail "the daemon kept CAP_SYS_PTRACE (bit 19): CapEff $cap_eff"
    return 0
}

udsfs_unmount() {
    if mounted "$MNT"; then
        timeout 10 "$UDSFS_BIN" umount "$MNT" >/dev/null 2>&1 || true
    fi
    if [ -n "$DAEMON_PID" ]; then
        if ! ended_within "$DAEMON_PID" 3000; then
            say "cleanup: daemon $DAEMON_PID still running after udsfs umount; SIGTERM"
            kill -TERM "$DAEMON_PID" 2>/dev/null || true
            if ! ended_within "$DAEMON_PID" 2000; then
                say "cleanup: daemon $DAEMON_PID ignores SIGTERM; SIGKILL"
                kill -KILL "$DAEMON_PID" 2>/dev/null || true
                ended_within "$DAEMON_PID" 2000 || true
            fi
        fi
    fi
    if mounted "$MNT"; then
        say "cleanup: $MNT still mounted; umount -l"
        umount -l "$MNT" 2>/dev/null || true
    fi
    DAEMON_PID=
}

print_log() {
    local lines
    lines=$(wc -l <"$LOG" 2>/dev/null || echo 0)
    if [ "$lines" -gt 0 ]; then
        say "----- daemon log ($LOG, last 300 of $lines lines) -----"
        tail -n 300 "$LOG" | sed 's/^/  | /'
        say "----- end of daemon log -----"
    else
        say "(daemon log is empty; RUST_LOG=$RUST_LOG)"
    fi
}

_lib_cleanup() {
    local rc=$? j
    set +e
    trap - EXIT INT TERM
    # background jobs (parked readers, say): disown first so bash reports no "Killed"
    j=$(jobs -p)
    disown -a
    # shellcheck disable=SC2086 # one PID per word
    [ -z "$j" ] || kill -KILL $j 2>/dev/null
    if [ "$rc" -eq 0 ] && [ -n "${UDSFS_LANES:-}" ]; then
        lanes_check || rc=1
    fi
    udsfs_unmount
    if [ "$rc" -eq 0 ] && grep -q 'panicked' "$LOG" 2>/dev/null; then
        say "FAIL: the daemon panicked (see its log)" >&2
        rc=1
    fi
    [ "$rc" -eq 0 ] || print_log >&2
    if mounted "$MNT"; then
        say "cleanup: $MNT is still mounted; leaving $TMP in place" >&2
    else
        rm -rf --one-file-system "$TMP"
    fi
    if [ "$rc" -eq 0 ]; then
        say "PASS: $SCRIPT_NAME"
    else
        # Again last (the daemon's log came between): a CI log keeps the end.
        say "FAIL: $SCRIPT_NAME (status $rc)${FAIL_WHY:+: $FAIL_WHY}" >&2
    fi
    exit "$rc"
}
trap _lib_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${UDSFS_NO_MOUNT:-0}" != 1 ]; then
    udsfs_mount ${UDSFS_MOUNT_ARGS[@]+"${UDSFS_MOUNT_ARGS[@]}"}
fi

# ---------------------------------------------------------------- stream echo server and client
# (stream_echo.sh, threads1.sh)

# start_echo_server PATH [BACKLOG]: an echo server written in bash: a stream socket bound
# at PATH and listening; a background loop opens .udsfs/sock/N/accept (blocks until a
# connection comes), reads the new socket's number M from that handle, and serves M in
# the background with `dd` copying M's data back to M until EOF; one line per accepted
# connection goes to ECHO_LOG. Sets ECHO_SRV (+ ECHO_SRV_FD), ECHO_PID, ECHO_LOG.
start_echo_server() {
    local path=$1 backlog=${2:-64}
    new_sock ECHO_SRV stream
    ctl "$ECHO_SRV_FD" "bind $path" || fail "echo server: bind $path"
    ctl "$ECHO_SRV_FD" "listen $backlog" || fail "echo server: listen $backlog"
    ECHO_LOG=$TMP/echo-accepted.log
    : >"$ECHO_LOG"
    (
        while :; do
            exec {a}<"$U/sock/$ECHO_SRV/accept" || exit 1
            read -r m <&"$a" || exit 1
            # open M's data (read and write side) before the accept handle closes
            (exec <"$U/sock/$m/data" >"$U/sock/$m/data" {a}<&- && exec dd bs=65536 status=none) &
            exec {a}<&-
            printf '%s\n' "$m" >>"$ECHO_LOG"
        done
    ) &
    ECHO_PID=$!
}

# echo_client ADDR IN OUT [GO_FILE]: a client of the echo server: a stream socket from
# .udsfs/stream/clone connects to ADDR; a background cat collects what comes back into
# OUT; once GO_FILE exists (if given) it sends file IN, shuts down its write side and
# waits for the server's EOF. Returns non-zero on any failure.
echo_client() {
    local c n r
    exec {c}<>"$U/stream/clone" || return 1
    read -r n <&"$c" || return 1
    printf 'connect %s\n' "$1" >&"$c" || return 1
    cat "$U/sock/$n/data" >"$3" &
    r=$!
    if [ -n "${4:-}" ]; then
        while [ ! -e "$4" ]; do sleep 0.01; done
    fi
    cat "$2" >"$U/sock/$n/data" || return 1
    printf 'shutdown wr\n' >&"$c" || return 1
    wait "$r"
}

# wait_lines FILE N [MS]: wait until FILE has at least N lines; fails the script after MS ms.
wait_lines() {
    local file=$1 n=$2 limit=${3:-10000} start
    start=$(now_ms)
    while [ "$(wc -l <"$file")" -lt "$n" ]; do
        [ $(($(now_ms) - start)) -le "$limit" ] ||
            fail "$file has $(wc -l <"$file") lines after $limit ms, want $n"
        sleep 0.005
    done
}

# count_alive PID...: print how many of the PIDs still run (zombies do not count); one
# fork however many PIDs, so a loop over it can time hundreds of processes.
count_alive() {
    local p files=()
    for p in "$@"; do files+=("/proc/$p/stat"); done
    { cat "${files[@]}" 2>/dev/null || true; } | awk '{ s = $0; sub(/.*\) /, "", s); if (s !~ /^[ZX]/) n++ } END { print n + 0 }'
}

# ---------------------------------------------------------------- msg records

# recv_record FD: read one record from a msg file open on FD with bash builtins only
# (`read` and parameter expansion; set LC_ALL=C so `read -N` counts bytes). Sets
# REC_HEADER, REC_LEN, REC_FROM, REC_CREDS, REC_RIGHTS (empty when absent) and REC_DATA
# (the payload; NUL bytes are lost, as always in bash variables). Blocks like a read.
recv_record() {
    local fd=$1 field fields
    REC_HEADER='' REC_LEN='' REC_FROM='' REC_CREDS='' REC_RIGHTS='' REC_DATA=''
    IFS= read -r REC_HEADER <&"$fd" || return 1
    read -r -a fields <<<"$REC_HEADER"
    for field in "${fields[@]}"; do
        case $field in
        len=*) REC_LEN=${field#len=} ;;
        from=*) REC_FROM=${field#from=} ;;
        creds=*) REC_CREDS=${field#creds=} ;;
        rights=*) REC_RIGHTS=${field#rights=} ;;
        esac
    done
    [[ $REC_LEN =~ ^[0-9]+$ ]] || return 1
    if [ "$REC_LEN" -gt 0 ]; then
        IFS= read -r -N "$REC_LEN" REC_DATA <&"$fd" || return 1
    fi
    [ "${#REC_DATA}" -eq "$REC_LEN" ]
}

# new_pair VAR TYPE: open .udsfs/TYPE/pair (socketpair) and keep the handle in this shell;
# sets VAR_N and VAR_M (the two sockets) and VAR_FD (the handle: N's control handle,
# which also holds M until one of M's files is opened; after that M lives only while
# one of its files is open).
new_pair() {
    local fd n m
    exec {fd}<>"$U/$2/pair" || fail "cannot open $U/$2/pair"
    read -r n m <&"$fd" || fail "cannot read the socket numbers from $2/pair"
    [[ $n =~ ^[0-9]+$ && $m =~ ^[0-9]+$ ]] || fail "$2/pair read gave '$n $m', want two socket numbers"
    printf -v "${1}_N" %s "$n"
    printf -v "${1}_M" %s "$m"
    printf -v "${1}_FD" %s "$fd"
}

# py_pair VAR TYPE CODE: a new socketpair of TYPE (P, kept open as new_pair keeps it),
# then `py CODE` with n and m, the pair's two socket numbers, set; VAR gets what it
# printed.
py_pair() {
    local printed
    new_pair P "$2"
    export MNT U
    printed=$(py "n, m = sys.argv[1], sys.argv[2]
$3" "$P_N" "$P_M")
    printf -v "$1" %s "$printed"
}

# ---------------------------------------------------------------- socket counts
# (bounds.sh)

# socket_count: how many sockets the daemon has (the rows of .udsfs/unix).
# socket_generation: the mount's socket count so far (scripts/cpython_suite's
# socket_generation: a probe socket's generation, carried in its directory's inode).
socket_generation() {
    # In the shell (a dd and a stat): the scripts that take it before and after each of
    # a hundred tests (run_libuv_tests.sh) paid half a second a python3 start on a
    # loaded machine.
    local fd n ino
    exec {fd}<>"$U/stream/clone" || fail "cannot open $U/stream/clone"
    n=$(dd bs=64 count=1 status=none <&"$fd") || fail "cannot read the socket number from stream/clone"
    n=${n%%[[:space:]]*}
    ino=$(stat -c %i "$U/sock/$n") || fail "cannot stat $U/sock/$n"
    exec {fd}>&-
    [ $((ino >> 56)) -eq 2 ] && [ $((ino & 15)) -eq 0 ] || fail "$U/sock/$n has inode $ino: not a socket directory's"
    echo $(((ino & ((1 << 56) - 1)) >> 4))
}

# copy_if_changed SRC DST: a copy that keeps DST's time when nothing changed (a warm
# build then rebuilds nothing).
copy_if_changed() { cmp -s "$1" "$2" || cp "$1" "$2"; }

# pinned_crates NAME DIR TARGET: the run_*_tests scripts' harness crate, integration/NAME's
# Cargo.toml and Cargo.lock (which pin the crate whose own tests the script runs), set up
# at DIR to build into TARGET with no flags of the machine's, and its packages fetched:
# `cargo metadata` in $TMP/metadata.json, its time in build_ms.
pinned_crates() {
    local name=$1 dir=$2
    mkdir -p "$dir/src"
    copy_if_changed "$LIB_DIR/$name/Cargo.toml" "$dir/Cargo.toml"
    copy_if_changed "$LIB_DIR/$name/Cargo.lock" "$dir/Cargo.lock"
    [ -f "$dir/src/lib.rs" ] || : >"$dir/src/lib.rs"
    export CARGO_TARGET_DIR=$3 CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
    unset RUSTFLAGS CARGO_BUILD_TARGET CARGO_ENCODED_RUSTFLAGS
    timed build_ms cargo metadata --manifest-path "$dir/Cargo.toml" --locked --format-version 1 \
        >"$TMP/metadata.json" 2>"$TMP/metadata.err" ||
        fail "cargo metadata (fetching the crates $name pins) failed: $(tail -5 "$TMP/metadata.err")"
}

# unix_sockets_used OUT CMD...: runs CMD (on kernel sockets) under strace, its calls in
# OUT, and prints how many AF_UNIX sockets it used, the number a udsfs mount would make
# for them: two a socketpair, one a socket(AF_UNIX, ...) later bound, connected or sent
# from with an address (the library converts a socket to udsfs's at that first use: one
# made and dropped unused never reaches the mount), one an accepted connection. The
# run_*_tests scripts' guard: through udsfs the mount must make about as many.
unix_sockets_used() {
    local out=$1
    shift
    timeout -k 5 120 strace -f -qq -e signal=none \
        -e trace=socket,socketpair,bind,connect,sendto,sendmsg,accept,accept4 \
        -o "$out" "$@" >/dev/null 2>&1 || true
    awk '
        # a call strace shows in two pieces (a line of another thread between) made whole
        / <unfinished \.\.\.>$/ { sub(/ <unfinished \.\.\.>$/, ""); part[$1] = $0; next }
        /^[0-9]+ +<\.\.\. [a-z0-9]+ resumed>/ { p = $1; sub(/^[0-9]+ +<\.\.\. [a-z0-9]+ resumed>/, ""); $0 = part[p] $0 }
        { sub(/^[0-9]+ +/, "") }
        /^socketpair\(AF_UNIX,/ && / = 0$/ { n += 2 }
        /^socket\(/ && $NF ~ /^[0-9]+$/ { ux[$NF] = /^socket\(AF_UNIX,/; fresh[$NF] = ux[$NF] }
        /^(bind|connect|sendto|sendmsg)\([0-9]+,/ && (!/ = -1 E[A-Z]+ / || /EINPROGRESS|EAGAIN/) {
            fd = $0; sub(/^[a-z]+\(/, "", fd); sub(/,.*/, "", fd)
            if (fresh[fd]) { n++; fresh[fd] = 0 }
        }
        /^accept4?\([0-9]+,/ && $NF ~ /^[0-9]+$/ {
            fd = $0; sub(/^accept4?\(/, "", fd); sub(/,.*/, "", fd)
            if (ux[fd]) n++
            ux[$NF] = 0
        }
        END { print n + 0 }' "$out"
}

socket_count() {
    printf '%s\n' $(($(wc -l <"$U/unix") - 1))
}

# wait_socket_count N [MS]: wait until the daemon has N sockets (closing is asynchronous
# through FUSE); fails the script after MS ms (default 3000).
wait_socket_count() {
    local want=$1 limit=${2:-3000} start
    start=$(now_ms)
    until [ "$(socket_count)" -eq "$want" ]; do
        [ $(($(now_ms) - start)) -le "$limit" ] ||
            fail "the daemon has $(socket_count) sockets after $limit ms, want $want"
        sleep 0.005
    done
}

# ---------------------------------------------------------------- unmodified programs
# (run_*.sh: programs through `udsfs run` and the preload library)

# The library next to the binary, or its deps/ copy when that is newer (`cargo test`
# builds that one: the udsfs crate has the library as a dev-dependency).
PRELOAD_LIB=${UDSFS_PRELOAD:-$(dirname "$UDSFS_BIN")/libudsfs_preload.so}
if [ -z "${UDSFS_PRELOAD:-}" ] && [ "$(dirname "$UDSFS_BIN")/deps/libudsfs_preload.so" -nt "$PRELOAD_LIB" ]; then
    PRELOAD_LIB=$(dirname "$UDSFS_BIN")/deps/libudsfs_preload.so
fi

# need_preload: fail unless the preload library is built and newer than its sources
# (`cargo build` and `cargo test` build it; the tests must not run a stale one).
need_preload() {
    [ -f "$PRELOAD_LIB" ] ||
        fail "preload library not found at $PRELOAD_LIB (build it with cargo build, or set UDSFS_PRELOAD)"
    local src
    for src in "$ROOT"/preload/src/*.rs "$ROOT"/proto/src/*.rs; do
        [ "$src" -ot "$PRELOAD_LIB" ] || [ ! -e "$src" ] ||
            fail "$PRELOAD_LIB is older than $src: rebuild it with cargo build"
    done
}

# need_cmd CMD PACKAGE [CMD PACKAGE]...: fail loudly when a program a test runs is missing.
need_cmd() {
    while [ $# -gt 0 ]; do
        command -v "$1" >/dev/null 2>&1 || fail "$1 is not installed (package $2; .ci/run installs it)"
        shift 2
    done
}

# for_other_users [SIGNS]: for the scripts whose other users (A, B, ...) run programs: the
# system's /usr/bin/python3 (one under root's home may be closed to them), and $TMP
# opened to them (mktemp -d made it 0700; $MNT is inside). With SIGNS, S=$TMP/SIGNS is
# made, a directory where they may all leave signs.
for_other_users() {
    [ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
    chmod o+x "$TMP"
    if [ $# -gt 0 ]; then
        S=$TMP/$1
        mkdir -m 1777 "$S"
    fi
}

# need_static_gcc: gcc and the static C library, for the static programs a test builds.
need_static_gcc() {
    need_cmd gcc gcc
    [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || fail "libc.a is missing (package libc6-dev; .ci/run installs it)"
}

# attack_users NAME A B: for the attack scripts whose users A and B run programs through
# the preload library: the library and /usr/bin/python3 needed; A and B set; $TMP opened
# to them (0755); verdict's EXCEPTIONS (integration/NAME_exceptions.txt) and an empty
# `failed`.
attack_users() {
    need_preload
    [ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
    A=$2
    B=$3
    chmod 755 "$TMP"
    EXCEPTIONS=$LIB_DIR/${1}_exceptions.txt
    failed=()
}

# build_attack_c NAME OUT: for the attack scripts whose C program integration/NAME.c runs
# as users A (61061) and B (61062), first on kernel sockets in $TMP/k, then through `udsfs
# run` (adversarial_lanes3.sh, 4, 6, 7): the preload library and gcc
# needed; NAME.c built (-Wall -Werror) into OUT, which A and B may run ($TMP opened to
# them) and set as ATTACK, the program `attack_on` runs; $TMP/k made, open to all
# (sticky); verdict's EXCEPTIONS (integration/NAME_exceptions.txt) and an empty `failed`.
build_attack_c() {
    local name=$1 out=$2
    need_cmd gcc gcc
    attack_users "$name" 61061 61062
    gcc -O1 -Wall -Werror -pthread -o "$out" "$LIB_DIR/$name.c" || fail "gcc of $name.c"
    chmod 755 "$out"
    mkdir -m 1777 "$TMP/k"
    ATTACK=$out
}

# as_uid_on UID kernel|udsfs SECONDS CMD...: CMD as UID on kernel sockets or through
# `udsfs run` on $MNT, SECONDS at most.
as_uid_on() {
    local uid=$1 where=$2 secs=$3
    shift 3
    if [ "$where" = kernel ]; then
        as_uid "$uid" timeout "$secs" "$@"
    else
        as_uid "$uid" env UDSFS_PRELOAD="$PRELOAD_LIB" timeout "$secs" "$UDSFS_BIN" run --mount "$MNT" -- "$@"
    fi
}

# attack_on kernel|udsfs ARGS...: the attack program $ATTACK (build_attack_c's OUT) as A on
# kernel sockets or through `udsfs run` on $MNT, 20 s at most.
attack_on() {
    local where=$1
    shift
    as_uid_on "$A" "$where" 20 "$ATTACK" "$@"
}

# attack_each CASE WHAT ARGS...: `attack_on` with each ARGS (the program's arguments as one
# word) on both; CASE's verdict: each output as on Linux but for the lane's word, and each
# laned (adversarial_lanes6.sh, adversarial_lanes7.sh).
attack_each() {
    local c=$1 what=$2 args all=1 outs=() k u
    shift 2
    for args in "$@"; do
        # shellcheck disable=SC2086 # (the arguments' words)
        k=$(attack_on kernel $args 2>"$TMP/err" || echo "status $?")
        say "$c $args: kernel: $k $(cat "$TMP/err")"
        # shellcheck disable=SC2086
        u=$(attack_on udsfs $args 2>"$TMP/err" || echo "status $?")
        say "$c $args: udsfs:  $u $(cat "$TMP/err")"
        grep -q "lane direct" <<<"$u" || { say "$c $args: no lane"; all=; }
        [ "${u%lane *}" = "${k%lane *}" ] || all=
        outs+=("$args: $u (kernel: $k)")
    done
    verdict "$c" "$all" "$what: $(printf '%s; ' "${outs[@]}")"
}

# run_proper PID: the pid of `udsfs run` proper below the `udsfs run` PID (its front,
# which only waits for CMD's status: src/run/front.rs); the threads of the supervisor and
# CMD itself are there. Waits up to 5 s for it.
run_proper() {
    local c i
    for i in $(seq 1 500); do
        c=$(cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1) || true
        [ -n "$c" ] && echo "$c" && return 0
        sleep 0.01
    done
    fail "udsfs run $1 has no udsfs run proper below it"
}

# lanes_check: for UDSFS_LANES=on|off, run at exit on the mount left: a socketpair made
# through `udsfs run` (one process, the library's front) must say lane=direct in its
# status file for on, lane=none for off. Fails if the switch was ignored.
lanes_check() {
    local got want=none
    [ "$UDSFS_LANES" == on ] && want=direct
    if [ "$LANES_ASKED" == 1 ]; then
        say "UDSFS_LANES=$UDSFS_LANES: not checked, the script mounted the other way itself"
        return 0
    fi
    mounted "$MNT" || { say "FAIL: UDSFS_LANES=$UDSFS_LANES: no mount left at exit to check its lanes" >&2; return 1; }
    got=$(UDSFS_PRELOAD=$PRELOAD_LIB timeout 30 "$UDSFS_BIN" run --mount "$MNT" --front preload -- python3 -c '
import os, socket
a, b = socket.socketpair()
a.sendall(b"x"); b.recv(1)
link = os.readlink(f"/proc/self/fd/{a.fileno()}")
with open(os.path.join(os.path.dirname(link), "status")) as f:
    print(link, *[l.strip() for l in f if l.startswith("lane=")])' 2>&1) || true
    if [[ $got == *"/.udsfs/sock/"*" lane=$want" ]]; then
        say "UDSFS_LANES=$UDSFS_LANES: the mount's lanes as asked (a socketpair through udsfs run: $got)"
        return 0
    fi
    say "FAIL: UDSFS_LANES=$UDSFS_LANES but a socketpair through udsfs run said: $got (want lane=$want)" >&2
    return 1
}

# on_udsfs CMD...: run CMD, unmodified, through `udsfs run` on this script's mount.
on_udsfs() {
    UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" -- "$@"
}

# unix_has TEXT: the daemon's socket table lists TEXT (a bound name).
unix_has() {
    grep -qF -- "$1" "$U/unix"
}

# kernel_vs_udsfs PROG [ROUTE]: run the Python program PROG (argument: a directory to
# bind names in) on kernel sockets and through `udsfs run`; its first line says where it
# ran ("where: kernel" or "where: udsfs"), its last is "done"; every other line must
# be equal. With ROUTE the program gets a second directory, which the udsfs run routes
# into the mount (`udsfs run --route ROUTE`, within 120 s) and the kernel run has at
# $TMP/rk. Used by the differential scripts (oob_peek.sh, bufs.sh, abstract_netns.sh,
# given_names.sh, api_diffs.sh).
kernel_vs_udsfs() {
    local prog=$1 route=${2:-}
    local kernel_args=("$TMP/k")
    [ -z "$route" ] || kernel_args+=("$TMP/rk")
    kernel_run "$prog" "${kernel_args[@]}"
    udsfs_same_as_kernel_run "$prog" "$route"
}

# udsfs_same_as_kernel_run PROG [ROUTE [RUN OPTION...]]: kernel_vs_udsfs's second half:
# PROG through `udsfs run` with the RUN OPTIONs (into $TMP/udsfs.out) gave
# $TMP/kernel.out's answers, which a kernel_run made.
udsfs_same_as_kernel_run() {
    local prog=$1 route=${2:-}
    shift $(($# < 2 ? $# : 2))
    local udsfs_args=("$MNT") run_args=(--mount "$MNT" "$@") limit=()
    if [ -n "$route" ]; then
        udsfs_args+=("$route")
        run_args+=(--route "$route")
        limit=(timeout 120)
    fi
    UDSFS_PRELOAD=$PRELOAD_LIB "${limit[@]}" "$UDSFS_BIN" run "${run_args[@]}" -- \
        python3 "$prog" "${udsfs_args[@]}" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
        fail "the program fails through udsfs run: $(tail -3 "$TMP/udsfs.err")"
    tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"
    grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
    same_as_kernel "$TMP/udsfs.out" "$TMP/udsfs.err" "udsfs run${*:+ $*}"
}

# kernel_run PROG DIR...: the Python program PROG run on kernel sockets with its
# arguments DIR... (made first), into $TMP/kernel.out; its last line must be "done".
kernel_run() {
    local prog=$1
    shift
    need_preload
    need_cmd python3 python3
    mkdir -p "$@"
    python3 "$prog" "$@" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
        fail "the program fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
    tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
    ok "kernel run: $(wc -l <"$TMP/kernel.out") results"
}

# same_as_kernel OUT ERR WHAT: the output OUT of a run through udsfs (WHAT) said it used
# udsfs sockets and gave the kernel run's other lines ($TMP/kernel.out), and its stderr
# ERR is empty.
same_as_kernel() {
    local out=$1 err=$2 what=$3
    grep -qx 'where: udsfs' "$out" || fail "$what did not use udsfs sockets"
    if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$out") >"$TMP/diff"; then
        cat "$TMP/diff" >&2
        fail "$what answered differently from the kernel (< kernel, > udsfs)"
    fi
    ok "$what: the same $(wc -l <"$out") results as the kernel"
    [ ! -s "$err" ] || fail "$what complained: $(cat "$err")"
}

# kernel_vs_fronts PROG: the Python program PROG (argument: a directory to bind names in)
# on kernel sockets, then through `udsfs run --front preload` (the library) and
# `--front seccomp` (the supervisor) on $MNT, 120 s each; its first line says where it
# ran ("where: kernel" or "where: udsfs"), its last is "done"; every other line must be
# the kernel's, with nothing on stderr. Outputs in $TMP/kernel.out and $TMP/FRONT.out
# (accept_after_setuid.sh, fstat_mode.sh).
kernel_vs_fronts() {
    local prog=$1 front
    kernel_run "$prog" "$TMP/k"
    for front in preload seccomp; do
        mkdir "$MNT/$front"
        UDSFS_PRELOAD=$PRELOAD_LIB timeout 120 "$UDSFS_BIN" run --mount "$MNT" --front "$front" -- \
            python3 "$prog" "$MNT/$front" >"$TMP/$front.out" 2>"$TMP/$front.err" ||
            fail "the program fails through udsfs run --front $front: $(tail -3 "$TMP/$front.err")"
        same_as_kernel "$TMP/$front.out" "$TMP/$front.err" "udsfs run --front $front"
    done
}

# lanes_compare [--sort] PROG CASE WANT [KERNEL_DIR UDSFS_DIR]: a fast-lane scenario
# both ways (lanes.sh, lanes_ready.sh, lanes_connect.sh): `python3 PROG CASE [DIR]` on
# kernel sockets and through `udsfs run` on $MNT, 60 s each, into $TMP/CASE.kernel and
# $TMP/CASE.udsfs (DIR, where a case binds its names: KERNEL_DIR, then UDSFS_DIR). The
# udsfs run's lines less its GUARD lines (the status files' lane= words, udsfs's only)
# must be the kernel's: in order, or with --sort in any order (for cases whose processes
# print at once). WANT: the lane= word every GUARD line must say, and some GUARD line
# must be there ("" checks no GUARD line).
lanes_compare() {
    local order=cat
    if [ "$1" = --sort ]; then
        order=sort
        shift
    fi
    local prog=$1 c=$2 want=$3 kernel_args=() udsfs_args=()
    if [ $# -ge 5 ]; then
        kernel_args=("$4")
        udsfs_args=("$5")
    fi
    timeout 60 python3 "$prog" "$c" "${kernel_args[@]}" >"$TMP/$c.kernel" 2>&1 || fail "$c fails on kernel sockets: $(tail -3 "$TMP/$c.kernel")"
    # One run: a connection's lane no longer depends on the moment its ends ask (an ask
    # that meets a reader parked in the daemon makes the lane under it: docs/LANE.md),
    # so a run whose status files do not say lane=$want fails.
    local rc=0 why bad
    timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$prog" "$c" "${udsfs_args[@]}" >"$TMP/$c.udsfs" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        why="exit status $rc"
        [ "$rc" -ne 124 ] || why="killed at 60 s, the case's timeout: a hang"
        # The lines it printed (the GUARD lines say how far it got and its lanes).
        fail "case $c fails through udsfs run ($why); its last lines: $(tail -5 "$TMP/$c.udsfs" | tr '\n' '|')"
    fi
    if ! diff <($order "$TMP/$c.kernel") <(grep -v '^GUARD' "$TMP/$c.udsfs" | $order) >"$TMP/$c.diff"; then
        cat "$TMP/$c.diff" >&2
        fail "case $c: udsfs run answered differently from the kernel (< kernel, > udsfs): $(grep '^[<>]' "$TMP/$c.diff" | head -6 | tr '\n' '|')"
    fi
    ok "$c: the same $(wc -l <"$TMP/$c.kernel") lines as the kernel: $(tr '\n' '|' <"$TMP/$c.kernel")"
    if [ -n "$want" ]; then
        grep -q '^GUARD' "$TMP/$c.udsfs" || fail "case $c: no status file was read (no GUARD line): $(tail -3 "$TMP/$c.udsfs" | tr '\n' '|')"
        if bad=$(grep '^GUARD' "$TMP/$c.udsfs" | grep -v "lane=$want\$"); then
            # A connection whose ends both asked and got no lane: about one run of a
            # lanes_connect case in 14 at load ~10, cause not found (docs/LANE.md, "Not
            # found yet"). The answers were the kernel's; the case runs once more and that
            # run must be laned and right, so a lane that never comes still fails.
            [ -z "${LANES_AGAIN:-}" ] ||
                fail "case $c: a status file did not say lane=$want, twice: $(tr '\n' '|' <<<"$bad") (all: $(grep '^GUARD' "$TMP/$c.udsfs" | tr '\n' '|'))"
            say "case $c: a status file did not say lane=$want ($(tr '\n' '|' <<<"$bad")): the lane missed (docs/LANE.md, \"Not found yet\"); once more"
            local again=("$@")
            [ "$order" = cat ] || again=(--sort "$@")
            LANES_AGAIN=1 lanes_compare "${again[@]}"
            return
        fi
        ok "$c: $(grep '^GUARD' "$TMP/$c.udsfs" | tr '\n' '|')"
    fi
}

# lanes_unlaned COMPARE CASE...: the same cases on a `--no-lanes` mount (remounted here;
# lanes are the mount's default): `COMPARE CASE ""` each (the script's lanes_compare),
# and every status file must say lane=none: nothing laned, the kernel's answers.
lanes_unlaned() {
    local compare=$1 c
    shift
    udsfs_unmount
    udsfs_mount --no-lanes
    for c in "$@"; do
        "$compare" "$c" ""
        if grep '^GUARD' "$TMP/$c.udsfs" | grep -v 'lane=none$'; then
            fail "$c: a socket said it had a lane on a --no-lanes mount"
        fi
    done
    ok "with --no-lanes: every status file says lane=none and every answer is the kernel's"
}

# ---------------------------------------------------------------- clients as other users

# A Python client run as another user: the script $CLIENT_PY (written into $TMP, which
# the test opens with chmod o+x) with $PY3 (an interpreter every user may run).
# as_user UID ARGS...: the client as that user, in the foreground.
as_user() {
    local uid=$1
    shift
    as_uid "$uid" "$PY3" "$CLIENT_PY" "$@"
}

# hold OUT UID ARGS...: the client in the background, its output in OUT; waits up to
# $HOLD_WAIT_S seconds for its first report. release_holders kills them all.
holders=()
hold() {
    local out=$1 uid=$2 n=0
    shift 2
    setpriv --reuid="$uid" --regid="$uid" --clear-groups "$PY3" "$CLIENT_PY" "$@" >"$out" 2>&1 &
    holders+=($!)
    until [ -s "$out" ]; do
        n=$((n + 1))
        [ $n -le $((HOLD_WAIT_S * 100)) ] || fail "no report from '$*' in $HOLD_WAIT_S s"
        sleep 0.01
    done
}
release_holders() {
    kill -9 "${holders[@]}" 2>/dev/null || true
    wait "${holders[@]}" 2>/dev/null || true
    holders=()
}

# ---------------------------------------------------------------- captures

# capture_start VAR FILE [ARGS...]: `udsfs capture -w FILE ARGS $MNT` in the background
# (lib_run.bash's start_bg), as the user CAPTURE_USER when that is set; returns once it
# records (its first read gives the section header at once).
capture_start() {
    local var=$1 file=$2 t0 as=()
    shift 2
    if [ -n "${CAPTURE_USER:-}" ]; then
        as=(setpriv --reuid="$CAPTURE_USER" --regid="$CAPTURE_USER" --clear-groups)
    fi
    start_bg "$var" ${as[@]+"${as[@]}"} "$UDSFS_BIN" capture -w "$file" "$@" "$MNT"
    t0=$(now_ms)
    until [ -s "$file" ]; do
        [ $(($(now_ms) - t0)) -lt 10000 ] || fail "udsfs capture ${CAPTURE_USER:+as $CAPTURE_USER }wrote nothing to $file in 10 s"
        sleep 0.02
    done
}

# capture_stop PID: SIGINT, then wait for it to drain what the daemon holds and exit 0.
capture_stop() {
    kill -INT "$1"
    ended_within "$1" 10000 || fail "udsfs capture did not end within 10 s of SIGINT"
    reap "$1"
    expect_eq "udsfs capture exit status" "$REAPED_STATUS" 0
}

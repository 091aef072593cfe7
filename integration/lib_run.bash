# shellcheck shell=bash
# integration/lib_run.bash: sourced (after lib.sh) by the run_*.sh scripts, which run
# unmodified programs (curl, hackbench, PostgreSQL, CPython's test_socket) through
# `udsfs run` (issue 12). Not a test itself (hence not *.sh).
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
    # `udsfs run` must exist: a missing subcommand fails the script, it never falls
    # back to kernel sockets silently.
    if ! "$UDSFS_BIN" run --help >/dev/null 2>&1; then
        fail "'$UDSFS_BIN run' is not available (issue 12); UDSFS_RUN_VIA=kernel runs this script on kernel sockets"
    fi
    ;;
kernel) ;;
*) fail "UDSFS_RUN_VIA must be udsfs or kernel, not '$UDSFS_RUN_VIA'" ;;
esac
export UDSFS_RUN_VIA
say "programs run via: $UDSFS_RUN_VIA"

# run_cmd [--route DIR]... -- CMD [ARGS...]: the command line that runs CMD on the
# chosen sockets, in the array RUN_CMD.
run_cmd() {
    local routes=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        --route)
            routes+=(--route "$2")
            shift 2
            ;;
        *) fail "run_cmd: unknown option $1" ;;
        esac
    done
    [ "${1:-}" == -- ] || fail "run_cmd: want -- before the command"
    shift
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        RUN_CMD=("$UDSFS_BIN" run --mount "$MNT" ${routes[@]+"${routes[@]}"} -- "$@")
    else
        RUN_CMD=("$@")
    fi
}

# via [--route DIR]... -- CMD [ARGS...]: run CMD on the chosen sockets.
via() {
    run_cmd "$@"
    "${RUN_CMD[@]}"
}

# kernel_has_socket NAME: /proc/net/unix lists a socket whose path ends in /NAME.
kernel_has_socket() {
    awk -v n="/$1" 'NR > 1 && NF >= 8 && substr($8, length($8) - length(n) + 1) == n { f = 1 } END { exit !f }' /proc/net/unix
}

# udsfs_has_socket NAME: $U/unix lists a socket whose name ends in NAME (names are
# shown relative to the mount).
udsfs_has_socket() {
    awk -v n="$1" 'NR > 1 && NF >= 8 && ($8 == n || substr($8, length($8) - length(n)) == "/" n) { f = 1 } END { exit !f }' "$U/unix"
}

# wait_listening NAME [MS]: wait until a socket named .../NAME is listed where the
# chosen mode puts it (udsfs: $U/unix, kernel: /proc/net/unix); fails after MS ms.
wait_listening() {
    local name=$1 limit=${2:-20000} start
    start=$(now_ms)
    while :; do
        if [ "$UDSFS_RUN_VIA" == udsfs ]; then
            udsfs_has_socket "$name" && return 0
        else
            kernel_has_socket "$name" && return 0
        fi
        [ $(($(now_ms) - start)) -le "$limit" ] ||
            fail "no socket named $name in $([ "$UDSFS_RUN_VIA" == udsfs ] && echo "$U/unix" || echo /proc/net/unix) after $limit ms"
        sleep 0.02
    done
}

# expect_socket_home NAME: the socket .../NAME is where the mode says: through udsfs
# it is a udsfs socket and the kernel has no socket of that name (the library routed
# it); on kernel sockets the kernel has it.
expect_socket_home() {
    local name=$1
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        udsfs_has_socket "$name" || fail "$U/unix lists no socket named $name: $(cat "$U/unix")"
        ! kernel_has_socket "$name" || fail "the kernel has a socket named $name: the program's socket was not routed to udsfs"
        ok "$name is a udsfs socket (in $U/unix, not in /proc/net/unix)"
    else
        kernel_has_socket "$name" || fail "/proc/net/unix lists no socket named $name"
        ok "$name is a kernel socket (UDSFS_RUN_VIA=kernel)"
    fi
}

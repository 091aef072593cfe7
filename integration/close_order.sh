#!/usr/bin/env bash
# close(2) of a socket's last descriptor is done when close returns: Linux shuts the
# peer and frees the name before returning. Through udsfs the close is a FUSE RELEASE
# that the kernel queues without waiting for its answer; with several daemon threads
# the call a program makes right after close could be read by another thread and
# served first, so a send to the closed end's peer succeeded instead of failing with
# EPIPE, or a freed abstract name was still in use. integration/close_order.py repeats
# each such sequence many times, on kernel sockets and then through `udsfs run` on a
# mount with 4 FUSE threads (the one-thread pass keeps its one thread): the counts
# of each outcome must be the same.
# The kernel is the oracle, and one outcome per sequence when nothing else touches the
# closed file; a reference taken meanwhile from outside (a /proc fd scan by a program
# running beside the test) moves the last fput, and with it the shutdown, past the
# close: under load a kernel run once gave EAGAIN in 1 of 3000 recvs. Such a run is
# made again (at most 3 runs); udsfs must still give the one outcome every time.
# shellcheck disable=SC2034 # read by lib.sh
[ -n "${UDSFS_THREADS:-}" ] || UDSFS_MOUNT_ARGS=(--threads "${UDSFS_CLOSE_ORDER_THREADS:-4}")
source "$(dirname "$0")/lib.sh"

export CLOSE_ORDER_ROUNDS=${CLOSE_ORDER_ROUNDS:-3000}
say "$CLOSE_ORDER_ROUNDS rounds of each sequence; daemon threads: ${UDSFS_THREADS:-${UDSFS_CLOSE_ORDER_THREADS:-4}}"
# kernel_settled: a kernel run each of whose sequences had one outcome (its counts:
# one ": N" per distinct outcome on a line), made up to 3 times.
kernel_settled() {
    local run
    for run in 1 2 3; do
        kernel_run "$LIB_DIR/close_order.py" "$TMP/k"
        if ! grep -E ': [0-9]+[,}].*: [0-9]+[,}]' "$TMP/kernel.out" >"$TMP/kernel.mixed"; then
            return 0
        fi
        say "kernel run $run: more than one outcome (disturbed from outside?): $(cat "$TMP/kernel.mixed")"
    done
    fail "3 kernel runs, each with more than one outcome in a sequence: no oracle"
}
kernel_settled
udsfs_same_as_kernel_run "$LIB_DIR/close_order.py"
sed 's/^/  /' "$TMP/udsfs.out"

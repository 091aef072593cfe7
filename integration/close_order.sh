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
# shellcheck disable=SC2034 # read by lib.sh
[ -n "${UDSFS_THREADS:-}" ] || UDSFS_MOUNT_ARGS=(--threads "${UDSFS_CLOSE_ORDER_THREADS:-4}")
source "$(dirname "$0")/lib.sh"

export CLOSE_ORDER_ROUNDS=${CLOSE_ORDER_ROUNDS:-3000}
say "$CLOSE_ORDER_ROUNDS rounds of each sequence; daemon threads: ${UDSFS_THREADS:-${UDSFS_CLOSE_ORDER_THREADS:-4}}"
kernel_vs_udsfs "$LIB_DIR/close_order.py"
sed 's/^/  /' "$TMP/udsfs.out"

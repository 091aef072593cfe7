#!/usr/bin/env bash
# lanes_tokio_bugs.sh: the two lane bugs tokio's own unix tests found (issue 30,
# integration/run_tokio_tests.sh), without tokio, on a --lanes mount compared with the
# kernel (integration/lanes_tokio_bugs.py): epoll_dup, a laned socket registered through
# a dup of the epoll descriptor and waited on through the original (mio's Registry is
# such a dup): the wait must see the ring's readiness, never the library's eventfd tag;
# eof_after_close, the peer of a laned nonblocking end reads EOF right after its close()
# (not EAGAIN until the daemon's RELEASE), 20 times, but not while a dup or a forked child
# keeps the end open.
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PY=$ROOT/integration/lanes_tokio_bugs.py

for c in epoll_dup eof_after_close; do
    lanes_compare "$PY" "$c" direct
done

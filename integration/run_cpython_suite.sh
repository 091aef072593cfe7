#!/usr/bin/env bash
# run_cpython_suite.sh: CPython's own test_socket, AF_UNIX classes (Debian's
# libpython3.X-testsuite for /usr/bin/python3), once on kernel sockets and once through
# `udsfs run --mount $MNT --route DIR` (scripts/cpython_suite; UDSFS_RUN_VIA=kernel runs
# the second pass on kernel sockets too). Fails when a test that passes on the kernel
# fails through udsfs and is not listed, with its reason, in cpython_exceptions.txt.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite socket "test_socket's AF_UNIX classes"

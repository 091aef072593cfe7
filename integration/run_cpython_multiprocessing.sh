#!/usr/bin/env bash
# run_cpython_multiprocessing.sh: CPython's test_multiprocessing_forkserver, its
# connection, listener, pickled-connection, poll/wait, fd-passing and manager classes
# (scripts/cpython_suite --suite multiprocessing; every child process comes from the
# fork server over an AF_UNIX connection that passes its fds), once on kernel sockets
# and once through `udsfs run --mount $MNT --route DIR`. Fails when a test that passes on
# the kernel fails through udsfs and is not listed, with its reason, in
# cpython_multiprocessing_exceptions.txt, or when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite multiprocessing "test_multiprocessing_forkserver's AF_UNIX classes"

#!/usr/bin/env bash
# run_cpython_selectors.sh: CPython's test_selectors, the tests of the select, poll,
# epoll and default selectors that wait on socketpair() ends (test_above_fd_setsize:
# about 10000 pairs at once; scripts/cpython_suite --suite selectors), once on kernel
# sockets and once through `udsfs run --mount $MNT --route DIR`. Fails when a test that
# passes on the kernel fails through udsfs and is not listed, with its reason, in
# cpython_selectors_exceptions.txt, or when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite selectors "test_selectors on socketpairs"

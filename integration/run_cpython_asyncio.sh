#!/usr/bin/env bash
# run_cpython_asyncio.sh: the Unix parts of CPython's test_asyncio (test_unix_events'
# AF_UNIX tests, test_sock_lowlevel's Unix case, the Unix tests of test_events,
# test_streams and test_server; scripts/cpython_suite --suite asyncio), once on kernel
# sockets and once through `udsfs run --mount $MNT --route DIR`. Fails when a test that
# passes on the kernel fails through udsfs and is not listed, with its reason, in
# cpython_asyncio_exceptions.txt, or when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite asyncio "test_asyncio's Unix parts"

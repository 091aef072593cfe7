#!/usr/bin/env bash
# run_cpython_logging.sh: CPython's test_logging, its handlers that log over AF_UNIX
# (UnixSocketHandlerTest, UnixDatagramHandlerTest, UnixSysLogHandlerTest;
# scripts/cpython_suite --suite logging), once on kernel sockets and once through
# `udsfs run --mount $MNT --route DIR`. Fails when a test that passes on the kernel fails
# through udsfs and is not listed, with its reason, in cpython_logging_exceptions.txt, or
# when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite logging "test_logging's AF_UNIX handlers"

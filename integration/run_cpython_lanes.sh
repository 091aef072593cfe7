#!/usr/bin/env bash
# run_cpython_lanes.sh: CPython's socket, socketserver and asyncio suites
# (run_cpython_suite.sh, run_cpython_socketserver.sh, run_cpython_asyncio.sh) again on a
# `--lanes` mount. Lanes are off by default (issue 30 turns them on once the whole suite
# passes with them), so those scripts run without; this second pass checks the suites
# give the same results with lanes, with the same exception files (scripts/cpython_suite;
# a listed test that passes here fails it too, so an exception that holds only without
# lanes shows).
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite socket "test_socket's AF_UNIX classes (lanes on)"
cpython_suite socketserver "test_socketserver's Unix servers (lanes on)"
cpython_suite asyncio "test_asyncio's Unix parts (lanes on)"

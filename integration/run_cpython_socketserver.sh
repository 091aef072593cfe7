#!/usr/bin/env bash
# run_cpython_socketserver.sh: CPython's test_socketserver, its six Unix servers (stream
# and datagram; plain, threading, forking; scripts/cpython_suite --suite socketserver),
# once on kernel sockets and once through `udsfs run --mount $MNT --route DIR`. Fails
# when a test that passes on the kernel fails through udsfs and is not listed, with its
# reason, in cpython_socketserver_exceptions.txt, or when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite socketserver "test_socketserver's Unix servers"

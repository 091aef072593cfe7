#!/usr/bin/env bash
# run_cpython_paths.sh: CPython's test_stat and test_pathlib, their tests of a bound
# socket's path (stat/lstat mode, Path.is_socket; scripts/cpython_suite --suite paths),
# once on kernel sockets and once through `udsfs run --mount $MNT --route DIR`. Fails
# when a test that passes on the kernel fails through udsfs and is not listed, with its
# reason, in cpython_paths_exceptions.txt, or when the pass never reached udsfs.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

cpython_suite paths "test_stat's and test_pathlib's socket paths"

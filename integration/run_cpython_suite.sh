#!/usr/bin/env bash
# run_cpython_suite.sh: CPython's own test_socket, AF_UNIX classes (Debian's
# libpython3.X-testsuite for /usr/bin/python3), once on kernel sockets and once through
# `udsfs run --mount $MNT --route DIR` (scripts/cpython_suite; UDSFS_RUN_VIA=kernel runs
# the second pass on kernel sockets too). Fails when a test that passes on the kernel
# fails through udsfs and is not listed, with its reason, in cpython_exceptions.txt.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (apt-get install python3)"
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
/usr/bin/python3 -c 'import test.test_socket' 2>/dev/null ||
    fail "test.test_socket is missing for /usr/bin/python3 (apt-get install libpython$version-testsuite; .ci/run installs it)"

rc=0
python3 "$ROOT/scripts/cpython_suite" --mount "$MNT" --udsfs "$UDSFS_BIN" --via "$UDSFS_RUN_VIA" \
    --exceptions "$LIB_DIR/cpython_exceptions.txt" --timeout 60 || rc=$?
[ "$rc" -eq 0 ] || fail "scripts/cpython_suite exited with status $rc (table and failures above)"
ok "every AF_UNIX test of test_socket that passes on the kernel passes through $UDSFS_RUN_VIA or is a listed exception"

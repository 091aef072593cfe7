#!/usr/bin/env bash
# Queue figures (FIONREAD/SIOCINQ, SIOCOUTQ), SO_SNDBUF/SO_RCVBUF and their FORCE
# forms, and MSG_TRUNC/MSG_CTRUNC through the socket API: tests/conformance/bufs.py
# runs on kernel sockets and through `udsfs run`; both outputs must be equal. Then the
# file forms: status inq/outq/rcvbuf, ctl sndbuf/rcvbuf, flags=ctrunc in msg records.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other) # the program checks the FORCE options as nobody
source "$(dirname "$0")/lib.sh"
chmod o+x "$TMP" # the program's child as nobody reaches the mount
kernel_vs_udsfs "$ROOT/tests/conformance/bufs.py"

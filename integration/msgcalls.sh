#!/usr/bin/env bash
# The message calls through the socket API (recvmsg and recvfrom with and without
# names or control, MSG_PEEK of datagrams larger than one ioctl, MSG_TRUNC, passed
# sockets with no or little control room, 16 KiB and larger messages, 1024 iovecs,
# zero-length I/O, recvmmsg's timeout, sendmmsg's counts, a stream send cut off by
# the peer, blocking receives and timeouts): tests/conformance/msgcalls.py runs on
# kernel sockets and through `udsfs run`; both outputs must be equal.
source "$(dirname "$0")/lib.sh"
kernel_vs_udsfs "$ROOT/tests/conformance/msgcalls.py"

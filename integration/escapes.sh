#!/usr/bin/env bash
# What programs did that escaped the preload library (issue 29 items 2 and 3), as
# Linux answers it: tests/conformance/escapes.py runs on kernel sockets and through
# `udsfs run --route`; both outputs must be equal. Epoll registrations made before the
# connect, bind or sendto that makes a kernel socket a udsfs one (events, data, EPOLLET,
# EPOLLONESHOT, a second epoll set); FIOASYNC, O_ASYNC and F_SETOWN, also across that
# conversion; every stat entry point of the C library (__fxstat64, __xstat, ...) on a
# socket; link/linkat of a socket in the mount and of a routed one, then connect
# through the new name and unlink of the old; remove(); SO_PEERGROUPS (socketpair,
# listener, the client's groups at connect, ERANGE, ENODATA).
source "$(dirname "$0")/lib.sh"
mkdir "$TMP/ru"
kernel_vs_udsfs "$ROOT/tests/conformance/escapes.py" "$TMP/ru"

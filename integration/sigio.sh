#!/usr/bin/env bash
# SIGIO to the owner of a socket with O_ASYNC (F_SETFL or FIOASYNC, the owner by
# F_SETOWN, F_SETOWN_EX, FIOSETOWN or SIOCSPGRP): integration/sigio.py counts the SIGIO each event
# gives (a message to an empty or a non-empty queue, reads, room coming back to a
# writer that found none, the peer's shutdown and close, a connection to a listener,
# O_ASYNC or the owner taken away) on the three socket types, on kernel sockets and
# through `udsfs run`; both outputs must be equal.
source "$(dirname "$0")/lib.sh"
kernel_vs_udsfs "$ROOT/integration/sigio.py"
grep ' sigio [1-9]' "$TMP/udsfs.out" | head -3
ok "SIGIO through udsfs run: $(grep -c ' sigio [1-9]' "$TMP/udsfs.out") events gave one, as on the kernel"

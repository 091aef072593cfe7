#!/usr/bin/env bash
# lanes_services.sh: connections of services get their lanes (issue 30, `udsfs mount --lanes`):
# a connect/accept connection whose ends registered in epoll, or polled, through the daemon
# before their lane could be up (the client's first request is queued before the accept; the
# server polls it and registers in epoll, as redis and PostgreSQL's backend do; the client
# waits in epoll, poll or select, as redis-benchmark and libpq do) must still get its lane: the
# library says its polls are its own (`Op::LaneClaim` arg 6), the daemon wakes the ends' poll
# registrations at the grant, and the library moves the epoll registrations onto the lane's
# eventfd. integration/lanes_services.py's cases run a request/reply model (random sizes
# both ways, some past a ring, SHA-256 of each direction) on kernel sockets and through
# `udsfs run` on a --lanes mount and must print the same lines; both ends' status files must
# say lane=direct after the first rounds and at the end (GUARD lines).
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PY=$ROOT/integration/lanes_services.py

compare() {
    local c=$1 d
    d=$(mktemp -d "$TMP/k.XXXX")
    timeout 120 python3 "$PY" "$c" "$d" >"$TMP/$c.kernel" 2>&1 || fail "$c fails on kernel sockets: $(tail -3 "$TMP/$c.kernel")"
    timeout 120 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$PY" "$c" "$MNT" >"$TMP/$c.udsfs" 2>&1 || fail "$c fails through udsfs run: $(tail -3 "$TMP/$c.udsfs")"
    if ! diff "$TMP/$c.kernel" <(grep -v '^GUARD' "$TMP/$c.udsfs") >"$TMP/$c.diff"; then
        cat "$TMP/$c.diff" >&2
        fail "$c: udsfs run answered differently from the kernel (< kernel, > udsfs)"
    fi
    ok "$c: the same lines as the kernel: $(tr '\n' '|' <"$TMP/$c.kernel")"
    [ "$(grep -c '^GUARD' "$TMP/$c.udsfs")" = 4 ] || fail "$c: wanted 4 status lines, got: $(grep '^GUARD' "$TMP/$c.udsfs" | tr '\n' '|')"
    if grep '^GUARD' "$TMP/$c.udsfs" | grep -qv 'lane=direct$'; then
        fail "$c: an end had no lane: $(grep '^GUARD' "$TMP/$c.udsfs" | tr '\n' '|')"
    fi
    ok "$c: $(grep '^GUARD' "$TMP/$c.udsfs" | tr '\n' '|')"
}

for c in epoll_level epoll_edge_poll oneshot_select; do
    compare "$c"
done

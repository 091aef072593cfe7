#!/usr/bin/env bash
# run_curl.sh: `curl --unix-socket` against a Python HTTP server (integration/
# http_upstream.py, serving three connections) listening on a socket in the mount, both
# unmodified and run through `udsfs run --mount $MNT` (UDSFS_RUN_VIA=kernel: on kernel
# sockets). Checks the bodies of a GET and of a 300 KB POST echoed back, and that the
# server's socket is a udsfs socket.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd curl curl

mkdir "$MNT/www"
SOCK=$MNT/www/http.sock
CONNECTIONS=3

serve SERVER "$SOCK" "$TMP/server.out" -- python3 "$LIB_DIR/http_upstream.py" "$SOCK" "$CONNECTIONS"
expect_socket_home "$SOCK"

body=$(via -- curl --silent --show-error --fail --max-time 30 --unix-socket "$SOCK" http://localhost/greeting)
expect_eq "GET body" "$body" "upstream saw /greeting"

# A body larger than a socket buffer (212992 bytes), echoed back whole.
head -c 300000 /dev/urandom >"$TMP/post.bin"
via -- curl --silent --show-error --fail --max-time 30 --unix-socket "$SOCK" \
    --data-binary @"$TMP/post.bin" -o "$TMP/echo.bin" http://localhost/echo
cmp "$TMP/post.bin" "$TMP/echo.bin" || fail "the POST body came back different"
ok "300000-byte POST body echoed back intact"

# Two requests on one connection (HTTP/1.1 keep-alive: the server's handle_request serves
# the whole connection, so this is the third and last request).
out=$(via -- curl --silent --show-error --fail --max-time 30 --unix-socket "$SOCK" \
    http://localhost/a http://localhost/b)
expect_eq "two GETs on one connection" "$out" "upstream saw /a
upstream saw /b"

ended_within "$SERVER" 10000 || fail "the server did not exit after $CONNECTIONS connections: $(cat "$TMP/server.out")"
reap "$SERVER"
expect_eq "server exit status" "$REAPED_STATUS" 0
grep -q "served $CONNECTIONS connections" "$TMP/server.out" || fail "server output: $(cat "$TMP/server.out")"
ok "server served $CONNECTIONS connections and exited"

#!/usr/bin/env bash
# run_curl.sh: `curl --unix-socket` against a Python HTTP server (socketserver's
# UnixStreamServer with an http.server handler) listening on a socket in the mount, both
# unmodified and run through `udsfs run --mount $MNT` (UDSFS_RUN_VIA=kernel: on kernel
# sockets). Checks the bodies of a GET and of a 300 KB POST echoed back, and that the
# server's socket is a udsfs socket.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd curl curl

mkdir "$MNT/www"
SOCK=$MNT/www/http.sock
REQUESTS=3

cat >"$TMP/server.py" <<'EOF'
import hashlib, http.server, socketserver, sys

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def address_string(self):
        return "unix"  # a unix peer has no host address

    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(("hello from %s over AF_UNIX\n" % self.path).encode())

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(body)

server = socketserver.UnixStreamServer(sys.argv[1], Handler)
print("listening on", server.server_address, flush=True)
for _ in range(int(sys.argv[2])):
    server.handle_request()
server.server_close()
print("served", sys.argv[2], "requests", flush=True)
EOF

run_cmd -- python3 "$TMP/server.py" "$SOCK" "$REQUESTS"
start_bg SERVER "${RUN_CMD[@]}" >"$TMP/server.out" 2>&1
wait_listening "$SOCK"
expect_socket_home "$SOCK"

body=$(via -- curl --silent --show-error --fail --max-time 30 --unix-socket "$SOCK" http://localhost/greeting)
expect_eq "GET body" "$body" "hello from /greeting over AF_UNIX"

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
expect_eq "two GETs on one connection" "$out" "hello from /a over AF_UNIX
hello from /b over AF_UNIX"

ended_within "$SERVER" 10000 || fail "the server did not exit after $REQUESTS requests: $(cat "$TMP/server.out")"
reap "$SERVER"
expect_eq "server exit status" "$REAPED_STATUS" 0
grep -q "served $REQUESTS requests" "$TMP/server.out" || fail "server output: $(cat "$TMP/server.out")"
ok "server served $REQUESTS connections and exited"

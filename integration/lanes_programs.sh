#!/usr/bin/env bash
# lanes_programs.sh: the lane defects the real programs of integration/run_*.sh found
# once lanes were the mount's default (issue 30), each with its program, on a mount with
# lanes (the default) beside the same steps on kernel sockets.
#   nginx_post  nginx (one worker) proxying to a unix upstream (http_upstream.py),
#               through `udsfs run`: 30 POSTs of 300 KB by curl, each answered with its
#               size and sum (the most sockets lane=direct at once is printed). nginx
#               registers an accepted connection in epoll with EPOLLET before its lane
#               is up; the lane's grant wakes that registration, whose FUSE POLL is told
#               "ready" (the library's own poll of an end it has yet to claim), and
#               nginx's readv of the body (not a call the lane carries) takes the lane
#               down before nginx's next epoll call could move the registration. The
#               data file's registration stays, last polled while the lane was up: the
#               daemon registered no waiter for that poll, so the bytes curl then sent
#               through the daemon woke nothing and the request stalled until curl's
#               timeout (before src/fuse/poll.rs registered it: 1 to 5 of 20 POSTs
#               "curl: (28) Operation timed out", the worker's socket holding 64 KiB
#               unread).
#   ns_client   a client as uid 65534 in a user and network namespace of its own
#               (`unshare -Urn`, as run_xvfb.sh's xprop), through `udsfs run`, talks to
#               a server (integration/lanes_programs.py) on root's mount: the same
#               answers as on the kernel and nothing on its stderr. Its library cannot
#               reach the daemon's fd channel (an abstract name in the daemon's network
#               namespace) to claim its lane; the connection works through the daemon,
#               but the claim printed "udsfs-preload[N]: fd channel @udsfs-fdpass-N: not
#               answered by the daemon's uid 65534: refused" into the program's stderr
#               (before preload/src/lane.rs claimed quietly).
#   close_reuse lanes_programs.py close_reuse: 4 client threads and a server's threads in
#               one process, 600 connections made, used and closed at once (as
#               gdbus-auth's threads do, run_glib_tests.sh), through `udsfs run`: all
#               answered, as on the kernel. The process died of SIGSEGV (a null region
#               in lane::close's look after the close): a failed `take` of an end's
#               reader or writer flag released it for the thread that held it
#               (`then_some` made the guard either way), and lane::close looked at its
#               end after the close holding no flag, when the number's next socket's
#               `slot_for` may rewrite the slot.
UDSFS_MOUNT_ARGS=(--allow-other) # ns_client's uid 65534
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"
need_preload
need_cmd nginx nginx-light
need_cmd curl curl
need_cmd unshare util-linux setpriv util-linux python3 python3
PY=$LIB_DIR/lanes_programs.py
chmod 755 "$TMP"

# close_reuse MODE DIR: lanes_programs.py close_reuse in DIR on MODE's sockets; its
# output (and exit status) in $TMP/cr.MODE.out.
close_reuse() {
    local mode=$1 dir=$2 rc=0
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir"
    via -- timeout 120 python3 "$PY" close_reuse "$dir/cr.sock" 4 150 >"$TMP/cr.$mode.out" 2>&1 || rc=$?
    echo "exit status $rc" >>"$TMP/cr.$mode.out"
}
close_reuse kernel "$TMP/k"
close_reuse udsfs "$MNT/cr"
expect_eq "close_reuse: on the kernel" "$(tail -2 "$TMP/cr.kernel.out")" "$(printf 'done 600 connections\nexit status 0')"
expect_eq "close_reuse: through udsfs on a lanes mount" "$(tail -2 "$TMP/cr.udsfs.out")" "$(printf 'done 600 connections\nexit status 0')"

# ns_client MODE DIR: the server on MODE's sockets in DIR, the namespaced client's
# answers and stderr in $TMP/ns.MODE.out and $TMP/ns.MODE.err.
ns_client() {
    local mode=$1 dir=$2
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir"
    chmod 777 "$dir"
    serve SERVER "$dir/echo.sock" "$TMP/ns.$mode.server" -- python3 "$PY" serve "$dir/echo.sock" 1
    run_cmd -- python3 "$PY" ask "$dir/echo.sock"
    as_uid 65534 unshare -Urn "${RUN_CMD[@]}" >"$TMP/ns.$mode.out" 2>"$TMP/ns.$mode.err" ||
        echo "failed: $?" >>"$TMP/ns.$mode.out"
    stop_bg "$SERVER"
}
ns_client kernel "$TMP/k"
ns_client udsfs "$MNT/ns"
expect_eq "ns_client: the kernel's answers" "$(cat "$TMP/ns.kernel.out")" "$(printf 'echo: line %d\n' 0 1 2)"
expect_eq "ns_client: the kernel's client's stderr" "$(cat "$TMP/ns.kernel.err")" ""
expect_eq "ns_client: the answers through udsfs" "$(cat "$TMP/ns.udsfs.out")" "$(cat "$TMP/ns.kernel.out")"
expect_eq "ns_client: the namespaced client's stderr through udsfs" "$(cat "$TMP/ns.udsfs.err")" ""
ok "ns_client: a client in a user and network namespace of its own answered as on the kernel, its stderr empty"

POSTS=30
head -c 300000 /dev/urandom >"$TMP/post.bin"
want=$(python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); print(f"{len(d)} bytes, sum {sum(d)}")' "$TMP/post.bin")

# nginx_post MODE DIR: nginx and its upstream on MODE's sockets in DIR, POSTS posts;
# sets GOOD to the number answered with $want and LANED to the most sockets
# lane=direct seen at once.
nginx_post() {
    local mode=$1 dir=$2 d=$TMP/ngx-$1 i out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d" "$dir"
    nginx_conf "$d" 1 <<EOF2
    upstream app { server unix:$dir/upstream.sock; }
    server {
        listen unix:$dir/nginx.sock;
        location /app/ { proxy_pass http://app; proxy_read_timeout 10s; }
    }
EOF2
    serve UPSTREAM "$dir/upstream.sock" "$d/upstream.out" -- python3 "$LIB_DIR/http_upstream.py" "$dir/upstream.sock"
    serve NGINX "$dir/nginx.sock" "$d/nginx.out" -- nginx -c "$d/nginx.conf" -p "$d"
    GOOD=0 LANED=0
    for i in $(seq 1 "$POSTS"); do
        via -- curl --silent --show-error --max-time 5 --unix-socket "$dir/nginx.sock" \
            --data-binary @"$TMP/post.bin" http://localhost/app/post >"$d/post.$i" 2>&1 &
        local c=$!
        if [ "$mode" == udsfs ]; then
            laned_most "$c"
            [ "$LANED_MOST" -gt "$LANED" ] && LANED=$LANED_MOST
        fi
        wait "$c" || true
        out=$(cat "$d/post.$i")
        if [ "$out" == "$want" ]; then
            GOOD=$((GOOD + 1))
        else
            say "$mode: POST $i: $out"
        fi
    done
    stop_bg -QUIT "$NGINX" "$UPSTREAM"
}

nginx_post kernel "$TMP/k"
[ "$GOOD" -eq "$POSTS" ] || fail "on kernel sockets only $GOOD of $POSTS POSTs were answered '$want'"
nginx_post udsfs "$MNT/ngx"
say "udsfs: $GOOD of $POSTS POSTs answered '$want'; at most $LANED sockets lane=direct at once"
[ "$GOOD" -eq "$POSTS" ] || fail "nginx_post: $((POSTS - GOOD)) of $POSTS POSTs through nginx on the lanes mount were not answered (kernel: all $POSTS)"
ok "nginx_post: $POSTS POSTs of 300 KB through nginx and its upstream on the lanes mount answered as on the kernel (up to $LANED sockets lane=direct)"

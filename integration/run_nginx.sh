#!/usr/bin/env bash
# run_nginx.sh: nginx (Debian's nginx-light) with a master and two workers, listening on
# a unix socket and proxying /app/ to a unix upstream (a Python HTTP server), run twice:
# on kernel sockets, then every program (nginx, the upstream, curl) through
# `udsfs run --mount $MNT`. The same requests (a static file, proxied GETs, a proxied
# 300 KB POST) must give the same answers both times, and through udsfs the listening and
# upstream sockets must be udsfs sockets. On d20381b no worker started through udsfs
# (FIOASYNC on the master's socketpair: ENOTTY) and a proxied request hung (the upstream
# socket was added to epoll before connect(), whose conversion dropped the registration).
# The workers run as www-data (`user www-data;`, the master root, as Debian's own
# nginx.conf): each worker accepts on the listener the root master made; through udsfs
# they got EACCES in a loop before accept asked a ticket on the descriptor (issue 29).
UDSFS_MOUNT_ARGS=(--allow-other) # the www-data workers reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd nginx nginx-light
need_cmd curl curl
id www-data >/dev/null 2>&1 || fail "there is no user www-data (Debian's base system has one)"
chmod 755 "$TMP" # the www-data workers read the static files and reach the mount

head -c 300000 /dev/urandom >"$TMP/post.bin"

# one_run MODE DIR: nginx and its upstream with sockets in DIR, on MODE's sockets; the
# answers go to $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/ngx-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/www/static" "$dir"
    echo "a static file" >"$d/www/static/file.txt"
    nginx_conf "$d" 2 www-data <<EOF2
    upstream app { server unix:$dir/upstream.sock; }
    server {
        listen unix:$dir/nginx.sock;
        location /static/ { root $d/www; }
        location /app/ { proxy_pass http://app; proxy_read_timeout 10s; }
    }
EOF2
    # the www-data workers connect: they need write permission on the upstream's name
    umask 0
    serve UPSTREAM "$dir/upstream.sock" "$d/upstream.out" -- python3 "$LIB_DIR/http_upstream.py" "$dir/upstream.sock"
    umask 022
    serve NGINX "$dir/nginx.sock" "$d/nginx.out" -- nginx -c "$d/nginx.conf" -p "$d"
    expect_socket_home "$dir/upstream.sock"
    expect_socket_home "$dir/nginx.sock"
    # The master forks its workers; both must be up before the requests.
    local i workers=0
    for i in $(seq 1 500); do
        workers=$(pgrep -f 'nginx: worker process' -P "$(pgrep -f "nginx: master process nginx -c $d/" | head -1)" | wc -l) || true
        [ "$workers" -ge 2 ] && break
        sleep 0.02
    done
    say "$mode: $workers nginx workers running"
    echo "workers: $workers" >"$out"
    local master
    master=$(pgrep -f "nginx: master process nginx -c $d/" | head -1)
    echo "their users: $(ps -o user= --ppid "$master" | sort | uniq -c | tr -s ' ' | xargs)" >>"$out"
    local c=(curl --silent --show-error --max-time 8 --unix-socket "$dir/nginx.sock")
    {
        via -- "${c[@]}" http://localhost/static/file.txt || echo "static: curl failed $?"
        via -- "${c[@]}" http://localhost/app/one || echo "app/one: curl failed $?"
        via -- "${c[@]}" http://localhost/app/two http://localhost/app/three || echo "app/two+three: curl failed $?"
        via -- "${c[@]}" --data-binary @"$TMP/post.bin" http://localhost/app/post || echo "app/post: curl failed $?"
        via -- "${c[@]}" -o /dev/null -w '%{http_code}\n' http://localhost/static/missing || echo "missing: curl failed $?"
    } >>"$out" 2>&1
    show_answers "$mode" "$out" "$d"/*.out "$d/error.log"
    stop_bg -QUIT "$NGINX" "$UPSTREAM"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/ngx"
grep -qx 'workers: 2' "$TMP/kernel.out" || fail "nginx's workers did not start on kernel sockets"
grep -qx 'their users: 2 www-data' "$TMP/kernel.out" || fail "nginx's workers are not www-data's"
grep -q 'a static file' "$TMP/kernel.out" || fail "the kernel run did not serve the static file"
same_answers "nginx" tail -v -n 20 "$TMP/ngx-udsfs/error.log"
ok "nginx (master and 2 workers) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

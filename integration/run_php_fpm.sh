#!/usr/bin/env bash
# run_php_fpm.sh: php-fpm (Debian's php8.2-fpm: a master and two static children)
# listening on a unix socket, behind nginx (`fastcgi_pass unix:...`) listening on a unix
# socket of its own; curl asks nginx for a PHP page that echoes a query parameter, a
# POST body (small and 200 KB) and the request's method. Run on kernel sockets, then
# php-fpm, nginx and curl through `udsfs run --mount $MNT`: the same answers both times,
# and through udsfs both listening sockets are udsfs sockets. Then again with the pool's
# children run as www-data (Debian's own pool: the master makes the listener as root,
# each child setuid()s and accepts on it); a known difference through udsfs is listed in
# integration/php_fpm_exceptions.txt and checked to still be one.
UDSFS_MOUNT_ARGS=(--allow-other) # the www-data pool's children reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd nginx nginx-light
need_cmd curl curl
chmod 755 "$TMP" # the www-data pool's children reach the kernel run's files
FPM=$(command -v php-fpm8.2 || ls /usr/sbin/php-fpm* 2>/dev/null | head -1) || true
[ -n "$FPM" ] && [ -x "$FPM" ] || fail "php-fpm is not installed (package php8.2-fpm; .ci/run installs it)"

head -c 200000 /dev/urandom | base64 -w0 >"$TMP/post.txt"
POST_SUM=$(md5sum <"$TMP/post.txt" | cut -d' ' -f1)

# one_run MODE DIR [USER]: php-fpm (its children as USER, root by default) and nginx with
# sockets in DIR, on MODE's sockets; the answers go to $TMP/MODE[-USER].out.
one_run() {
    local mode=$1 dir=$2 user=${3:-root} tag=$1${3:+-$3}
    local d=$TMP/fpm-$tag out=$TMP/$tag.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/www" "$dir"
    chmod 755 "$d" "$d/www" "$dir"
    cat >"$d/www/echo.php" <<'EOF2'
<?php
header("Content-Type: text/plain");
echo "method: ", $_SERVER["REQUEST_METHOD"], "\n";
echo "q: ", isset($_GET["q"]) ? $_GET["q"] : "(none)", "\n";
$body = file_get_contents("php://input");
echo "body: ", strlen($body) <= 64 ? $body : strlen($body) . " bytes, md5 " . md5($body), "\n";
EOF2
    cat >"$d/php-fpm.conf" <<EOF2
[global]
pid = $d/php-fpm.pid
error_log = $d/php-fpm.log
daemonize = no
[www]
user = $user
group = $user
listen.owner = $user
listen.group = $user
listen = $dir/php-fpm.sock
listen.mode = 0666
pm = static
pm.max_children = 2
catch_workers_output = yes
EOF2
    nginx_conf "$d" 1 <<EOF2
    client_max_body_size 1m;
    server {
        listen unix:$dir/nginx.sock;
        root $d/www;
        location ~ \.php\$ {
            fastcgi_pass unix:$dir/php-fpm.sock;
            fastcgi_read_timeout 10s;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_param QUERY_STRING \$query_string;
            fastcgi_param REQUEST_METHOD \$request_method;
            fastcgi_param CONTENT_TYPE \$content_type;
            fastcgi_param CONTENT_LENGTH \$content_length;
            fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
            fastcgi_param REQUEST_URI \$request_uri;
            fastcgi_param SERVER_PROTOCOL \$server_protocol;
        }
    }
EOF2
    run_cmd -- "$FPM" --nodaemonize --allow-to-run-as-root -n --fpm-config "$d/php-fpm.conf"
    start_bg PHPFPM "${RUN_CMD[@]}" >"$d/php-fpm.out" 2>&1
    wait_listening "$dir/php-fpm.sock"
    run_cmd -- nginx -c "$d/nginx.conf" -p "$d"
    start_bg NGINX "${RUN_CMD[@]}" >"$d/nginx.out" 2>&1
    wait_listening "$dir/nginx.sock"
    expect_socket_home "$dir/php-fpm.sock"
    expect_socket_home "$dir/nginx.sock"
    # php-fpm's master forks its two children; both must be up before the requests.
    local i children=0
    for i in $(seq 1 500); do
        children=$(pgrep -f 'php-fpm: pool www' | wc -l) || true
        [ "$children" -ge 2 ] && break
        sleep 0.02
    done
    echo "php-fpm children: $children" >"$out"
    # (4 s for the www-data pool: its known difference through udsfs is 7 timeouts)
    local c=(curl --silent --show-error --max-time "$([ "$user" == root ] && echo 8 || echo 4)" --unix-socket "$dir/nginx.sock")
    {
        via -- "${c[@]}" 'http://localhost/echo.php?q=hello%20world' || echo "get: curl failed $?"
        via -- "${c[@]}" --data-binary 'a=1&b=two' 'http://localhost/echo.php?q=posted' || echo "post: curl failed $?"
        via -- "${c[@]}" --data-binary @"$TMP/post.txt" 'http://localhost/echo.php?q=big' || echo "big post: curl failed $?"
        # two requests on one connection, more than there are children
        via -- "${c[@]}" 'http://localhost/echo.php?q=one' 'http://localhost/echo.php?q=two' 'http://localhost/echo.php?q=three' ||
            echo "three: curl failed $?"
        via -- "${c[@]}" -o /dev/null -w '%{http_code}\n' http://localhost/missing.php || echo "missing: curl failed $?"
    } >>"$out" 2>&1
    say "$mode answers:"
    sed 's/^/    /' "$out"
    kill -QUIT "$NGINX" 2>/dev/null || true
    kill -QUIT "$PHPFPM" 2>/dev/null || true
    # (SIGQUIT is their graceful stop; sent to `udsfs run`, it reaches the program)
    ended_within "$NGINX" 10000 || fail "$mode: nginx did not end within 10 s of its SIGQUIT"
    ended_within "$PHPFPM" 10000 || fail "$mode: php-fpm did not end within 10 s of its SIGQUIT"
    kill -- -"$NGINX" 2>/dev/null || true
    kill -- -"$PHPFPM" 2>/dev/null || true
    wait "$NGINX" "$PHPFPM" 2>/dev/null || true
    ! grep -h 'udsfs-preload' "$d"/*.out "$d/error.log" "$d/php-fpm.log" >&2 || fail "the library complained (above)"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/fpm"
one_run kernel "$TMP/kw" www-data
one_run udsfs "$MNT/fpmw" www-data
grep -qx 'php-fpm children: 2' "$TMP/kernel.out" || fail "php-fpm's children did not start on kernel sockets"
grep -qx 'q: hello world' "$TMP/kernel.out" || fail "the kernel run did not echo the query parameter"
grep -qx 'body: a=1&b=two' "$TMP/kernel.out" || fail "the kernel run did not echo the POST body"
grep -qx "body: 266668 bytes, md5 $POST_SUM" "$TMP/kernel.out" || fail "the kernel run did not get the 200 KB body whole"
if ! diff "$TMP/kernel.out" "$TMP/udsfs.out" >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    say "nginx error log through udsfs:"
    tail -n 20 "$TMP/fpm-udsfs/error.log" >&2
    say "php-fpm log through udsfs:"
    tail -n 20 "$TMP/fpm-udsfs/php-fpm.log" >&2
    fail "php-fpm behind nginx through udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "php-fpm (master and 2 children) behind nginx through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

# The www-data pool: right on the kernel; through udsfs the same, or a listed difference.
grep -qx 'q: hello world' "$TMP/kernel-www-data.out" || fail "the kernel run's www-data pool did not answer"
EXCEPTIONS=$LIB_DIR/php_fpm_exceptions.txt
if diff "$TMP/kernel-www-data.out" "$TMP/udsfs-www-data.out" >"$TMP/diff-www"; then
    ! grep -qx 'pool www-data' "$EXCEPTIONS" ||
        fail "the www-data pool answers as on the kernel but $EXCEPTIONS still lists it: remove it there and in README.md"
    ok "php-fpm with its children as www-data through udsfs run: the same answers as on kernel sockets"
else
    cat "$TMP/diff-www" >&2
    tail -n 5 "$TMP/fpm-udsfs-www-data/php-fpm.log" >&2
    grep -qx 'pool www-data' "$EXCEPTIONS" ||
        fail "php-fpm with its children as www-data answered differently through udsfs run (< kernel, > udsfs)"
    # the listed difference, not another: children that end at once, one after another
    [ "$(grep -c 'exited with code 0 after' "$TMP/fpm-udsfs-www-data/php-fpm.log")" -ge 3 ] ||
        fail "the www-data pool differs through udsfs, but not as listed (children exiting at once): see above"
    say "known difference (listed in $EXCEPTIONS): php-fpm's www-data children answer nothing through udsfs run"
fi

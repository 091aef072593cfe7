#!/usr/bin/env bash
# run_lighttpd.sh: lighttpd listening on a unix socket in the mount, with two kinds of
# worker behind it, each on a unix socket in a --route directory: php-cgi spawned by
# lighttpd's mod_fastcgi (lighttpd binds and listens, hands the listener to php-cgi as
# its fd 0, and php-cgi's PHP_FCGI_CHILDREN=2 children accept on that inherited
# descriptor), and gunicorn (a master that binds and forks 2 sync workers, each
# accepting on the listener it inherited) reached by mod_proxy. curl asks for a static
# file, PHP pages (a query, a 300 KB POST, two on one connection) and gunicorn's app (a
# GET, a POST; curl also under --front seccomp); on kernel sockets, then every program through `udsfs run`: the same
# answers, and the three listeners udsfs sockets.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd lighttpd lighttpd
need_cmd php-cgi php8.2-cgi
need_cmd gunicorn gunicorn
need_cmd curl curl

sed "s/@SERVER@/gunicorn/" "$LIB_DIR/wsgi_app.py" >"$TMP/app.py"

head -c 300000 /dev/urandom >"$TMP/post.bin"

# one_run MODE: lighttpd, php-cgi and gunicorn on MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 d=$TMP/lt-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    local dir=$TMP/route sock
    if [ "$mode" == udsfs ]; then sock=$MNT/lt/http.sock; else sock=$TMP/k/http.sock; fi
    mkdir -p "$d/www/static" "$dir" "$(dirname "$sock")"
    echo "a static file" >"$d/www/static/file.txt"
    cat >"$d/www/index.php" <<'EOF2'
<?php
$body = file_get_contents("php://input");
printf("php %s: q=%s, %d bytes, md5 %s\n", php_sapi_name(), $_GET["q"] ?? "-", strlen($body), md5($body));
EOF2
    cat >"$d/lighttpd.conf" <<EOF2
server.modules = ("mod_fastcgi", "mod_proxy")
server.document-root = "$d/www"
server.bind = "$sock"
server.errorlog = "$d/error.log"
server.upload-dirs = ("$d")
index-file.names = ("index.php")
fastcgi.server = (".php" => ((
    "socket" => "$dir/php.sock",
    "bin-path" => "/usr/bin/php-cgi",
    "max-procs" => 1,
    "bin-environment" => ("PHP_FCGI_CHILDREN" => "2", "PHP_FCGI_MAX_REQUESTS" => "10000")
)))
proxy.server = ("/app/" => (("host" => "$dir/gunicorn.sock")))
EOF2
    run_cmd --route "$dir" -- gunicorn --chdir "$TMP" --bind "unix:$dir/gunicorn.sock" --workers 2 \
        --worker-tmp-dir "$d" --log-file "$d/gunicorn.log" app:application
    start_bg GUNICORN "${RUN_CMD[@]}" >"$d/gunicorn.out" 2>&1
    wait_listening "$dir/gunicorn.sock"
    run_cmd --route "$dir" -- lighttpd -D -f "$d/lighttpd.conf"
    start_bg LIGHTTPD "${RUN_CMD[@]}" >"$d/lighttpd.out" 2>&1
    wait_listening "$sock"
    # mod_fastcgi binds "socket" with the process number appended
    wait_listening "$dir/php.sock-0"
    expect_socket_home "$sock"
    expect_socket_home "$dir/php.sock-0"
    expect_socket_home "$dir/gunicorn.sock"
    local c=(timeout 20 curl -sS --unix-socket "$sock")
    {
        via -- "${c[@]}" http://lt/static/file.txt
        via -- "${c[@]}" "http://lt/index.php?q=hello"
        via -- "${c[@]}" --data-binary @"$TMP/post.bin" "http://lt/index.php?q=post"
        via -- "${c[@]}" "http://lt/index.php?q=one" "http://lt/index.php?q=two"
        via -- "${c[@]}" -o /dev/null -w '%{http_code}\n' http://lt/missing.php
        via -- "${c[@]}" "http://lt/app/path?x=1"
        via -- "${c[@]}" --data-binary @"$TMP/post.bin" http://lt/app/upload
        via -- "${c[@]}" http://lt/app/a http://lt/app/b
        # curl under the seccomp supervisor
        via --front seccomp -- "${c[@]}" "http://lt/index.php?q=seccomp" http://lt/app/seccomp
        # 20 PHP pages and 20 of gunicorn's, 4 at a time
        run_cmd -- "${c[@]}"
        seq 1 20 | xargs -P 4 -I{} "${RUN_CMD[@]}" "http://lt/index.php?q=n{}" "http://lt/app/n{}" |
            sed 's/n[0-9][0-9]*/nN/' | sort | uniq -c
        # php-cgi below lighttpd, its children below it; gunicorn's workers below it
        local lpid php
        lpid=$(pgrep -f "^lighttpd -D -f $d/lighttpd.conf\$" || true)
        php=$(pgrep -x -P "${lpid:-0}" php-cgi || true)
        echo "php-cgi below lighttpd: $(wc -w <<<"$php"), its children: $(pgrep -c -x -P "${php:-0}" php-cgi || true)"
        echo "gunicorn processes: $(pgrep -c -f "^/usr/bin/python3 /usr/bin/gunicorn --chdir $TMP" || true)"
    } >"$out" 2>&1 || true
    kill -TERM "$LIGHTTPD" 2>/dev/null || true
    ended_within "$LIGHTTPD" 10000 || fail "$mode: lighttpd did not exit on SIGTERM"
    reap "$LIGHTTPD"
    echo "lighttpd exit status: $REAPED_STATUS" >>"$out"
    kill -TERM "$GUNICORN" 2>/dev/null || true
    ended_within "$GUNICORN" 10000 || fail "$mode: gunicorn did not exit on SIGTERM"
    reap "$GUNICORN"
    echo "gunicorn exit status: $REAPED_STATUS" >>"$out"
    show_answers "$mode" "$out" "$d"/*.out "$d/error.log"
}

one_run kernel
rm -rf "$TMP/route"
one_run udsfs
grep -qx 'php cgi-fcgi: q=post, 300000 bytes, md5 .*' "$TMP/kernel.out" || fail "the kernel run's php-cgi did not answer"
grep -q '^gunicorn saw POST /app/upload?, 300000 bytes' "$TMP/kernel.out" || fail "the kernel run's gunicorn did not answer"
grep -qx 'php-cgi below lighttpd: 1, its children: 2' "$TMP/kernel.out" || fail "the kernel run did not have php-cgi and its 2 children"
grep -qx 'gunicorn processes: 3' "$TMP/kernel.out" || fail "the kernel run did not have gunicorn's master and 2 workers"
same_answers "lighttpd" tail -n 20 "$TMP/lt-udsfs/error.log" "$TMP/lt-udsfs/gunicorn.log"
ok "lighttpd, php-cgi (2 children on the inherited listener) and gunicorn (2 workers) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

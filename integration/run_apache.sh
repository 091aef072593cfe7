#!/usr/bin/env bash
# run_apache.sh: a private Apache httpd (package apache2) with the event MPM, in the
# foreground with a config of its own under $TMP (TCP on 127.0.0.1 for curl, workers as
# www-data). Two of its AF_UNIX users: mod_cgid, whose daemon (forked by the root
# master, then www-data) listens on ScriptSock; each CGI request is a connect to it from
# a worker thread, the request and environment written, and the daemon forks the script
# with the accepted connection as its stdin and stdout (Debian builds mod_cgid without
# HAVE_CGID_FDPASSING: it imports no sendmsg, so no descriptor is passed), the script
# run with the environment Apache made (no LD_PRELOAD: under the library the run's
# filter carries it); and mod_proxy_http to a Python HTTP server on a unix socket
# (ProxyPass "unix:SOCK|http://localhost/", its connections kept in the worker's pool).
# Requests with curl: CGI GETs, a 1 MiB POST hashed by the CGI (read by its length, and
# read to the EOF the worker's shutdown(SHUT_WR) makes), 20 at once, a CGI that writes
# 2 MiB, one that writes to stderr (its line in error_log), a missing script and one
# without headers (404, 500), an endless one whose client goes (the worker, told its pid
# by the cgid daemon over a second connection, kills it: it must be gone); through the
# proxy a GET, a 1 MiB POST (and one echoed back), 20 GETs at once; then
# `apache2 -k graceful` (the cgid daemon ends, its name unlinked, a new one bound), the
# same requests again, and `apache2 -k stop`. Three runs: on kernel sockets, then every
# program through `udsfs run` with the sockets' directory routed (the library), then
# under `--front seccomp`: the sockets udsfs sockets (not in /proc/net/unix), the same
# answers (bodies, hashes, status codes), the same error_log lines (times, pids and
# ports taken out), the master's exit status, no processes left, the cgid name gone.
# In the library's run the workers' pooled connections to the backend have lanes.
UDSFS_MOUNT_ARGS=(--allow-other) # the www-data workers and cgid daemon reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd apache2 apache2 curl curl
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
id www-data >/dev/null 2>&1 || fail "there is no user www-data (Debian's base system has one)"
MODS=/usr/lib/apache2/modules
[ -f "$MODS/mod_cgid.so" ] || fail "$MODS/mod_cgid.so is missing (package apache2)"
chmod 755 "$TMP" # the www-data workers and CGI scripts reach their files

# What the requests send and the CGI writes, the same for every run.
F=$TMP/files
mkdir -p "$F"
head -c 1048576 /dev/urandom >"$F/post.bin"
head -c 2097152 /dev/urandom >"$F/big.bin"
chmod -R a+rX "$F"
POST_SUM=$(sha256sum <"$F/post.bin" | cut -d' ' -f1)
BIG_SUM=$(sha256sum <"$F/big.bin" | cut -d' ' -f1)
# How many CGI requests go at once.
AT_ONCE=20

# cgi_scripts DIR: the CGI scripts (sh, run by the cgid daemon's children as www-data).
cgi_scripts() {
    local c=$1
    mkdir -p "$c"
    cat >"$c/env.sh" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
for v in GATEWAY_INTERFACE REQUEST_METHOD QUERY_STRING SCRIPT_NAME PATH_INFO \
    SERVER_PROTOCOL CONTENT_LENGTH CONTENT_TYPE REMOTE_ADDR; do
    printf '%s=%s\n' "$v" "$(printenv "$v")"
done
printf 'user=%s\n' "$(id -un)"
# the body, read whole from stdin (the cgid daemon's accepted connection)
if [ -n "$CONTENT_LENGTH" ]; then
    printf 'body: %s\n' "$(head -c "$CONTENT_LENGTH" | sha256sum | cut -d' ' -f1)"
fi
EOF
    printf '#!/bin/sh\nprintf '"'"'Content-Type: application/octet-stream\\n\\n'"'"'\nexec cat %s\n' "$F/big.bin" >"$c/big.sh"
    cat >"$c/stderr.sh" <<'EOF'
#!/bin/sh
echo "a line to stderr from $QUERY_STRING" >&2
printf 'Content-Type: text/plain\n\nwrote to stderr\n'
EOF
    printf '#!/bin/sh\necho no headers here\n' >"$c/noheaders.sh"
    # stdin read to its end: the worker's shutdown(SHUT_WR) after the body is that end
    cat >"$c/eof.sh" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
printf 'read to EOF: %s\n' "$(sha256sum | cut -d' ' -f1)"
EOF
    # output without end until the client goes; the worker then kills it (SIGTERM to the
    # pid it asked the cgid daemon for, a GETPID_REQ over a connection of its own)
    cat >"$c/endless.sh" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
exec yes "endless $QUERY_STRING"
EOF
    chmod 755 "$c"/*.sh
}

# apache_conf D SOCKS PORT: D/httpd.conf for an instance with its files in D, its
# unix sockets (ScriptSock, the backend) in SOCKS, listening on 127.0.0.1:PORT.
apache_conf() {
    local d=$1 s=$2 port=$3 m
    {
        cat <<EOF
ServerRoot $d
ServerName localhost
PidFile $d/httpd.pid
ErrorLog $d/error.log
LogLevel info
Mutex file:$d/lock default
DefaultRuntimeDir $d/run
Listen 127.0.0.1:$port
User www-data
Group www-data
EOF
        for m in mpm_event authz_core mime alias cgid proxy proxy_http; do
            echo "LoadModule ${m}_module $MODS/mod_$m.so"
        done
        # (few spare threads asked: 20 requests at once, slower through udsfs, must not
        # bring the MPM's "within MinSpareThreads of MaxRequestWorkers" line)
        cat <<EOF
StartServers 2
ServerLimit 2
ThreadsPerChild 25
MaxRequestWorkers 50
MinSpareThreads 5
MaxSpareThreads 50
TypesConfig /etc/mime.types
DocumentRoot $d/htdocs
<Directory />
    Require all denied
</Directory>
ScriptSock $s/cgid.sock
ScriptAlias /cgi-bin/ $d/cgi-bin/
<Directory $d/cgi-bin>
    Require all granted
</Directory>
<Location /be/>
    Require all granted
</Location>
ProxyPass "/be/" "unix:$s/be.sock|http://localhost/"
ProxyTimeout 10
EOF
    } >"$d/httpd.conf"
}

# free_port: a TCP port on 127.0.0.1 free now (the instance's Listen).
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# generations D N: waits (20 s at most) until D/error.log says N times that the server
# resumed normal operations (its start, then each graceful restart's new generation).
generations() {
    local d=$1 n=$2 i
    for i in $(seq 1 1000); do
        [ "$(grep -c 'resuming normal operations' "$d/error.log" 2>/dev/null || true)" -ge "$n" ] && return 0
        sleep 0.02
    done
    fail "$UDSFS_RUN_VIA: apache did not resume normal operations $n times in 20 s: $(tail -5 "$d/error.log")"
}

# round NAME N BASE: the requests of run NAME's round N (BASE: http://127.0.0.1:PORT),
# their answers on stdout.
round() {
    local name=$1 round=$2 base=$3 d=$TMP/ap-$1 k
    local c=(curl --silent --show-error --max-time 15)
    local code=(-o /dev/null -w '%{http_code}\n')
    echo "GET env.sh?one:"
    v "${c[@]}" "$base/cgi-bin/env.sh?one" || echo "curl failed $?"
    echo "GET env.sh/extra/path?a=b&c=d:"
    v "${c[@]}" "$base/cgi-bin/env.sh/extra/path?a=b&c=d" || echo "curl failed $?"
    echo "POST 1 MiB to env.sh (the CGI's hash of it; $POST_SUM sent):"
    v "${c[@]}" -H 'Content-Type: application/octet-stream' --data-binary @"$F/post.bin" "$base/cgi-bin/env.sh?post" |
        sed "s/$POST_SUM/SENT/" || echo "curl failed $?"
    echo "$AT_ONCE GETs at once:"
    rm -rf "$d/at_once"
    mkdir -p "$d/at_once"
    # (curl's errors only: in parallel it draws its progress meter despite --silent)
    v "${c[@]}" --parallel --parallel-immediate --parallel-max "$AT_ONCE" -o "$d/at_once/#1" -w '%{http_code}\n' \
        "$base/cgi-bin/env.sh?n=[1-$AT_ONCE]" 2>"$d/at_once.err" | sort | uniq -c || echo "curl failed $?"
    grep -a 'curl:' "$d/at_once.err" || true
    local right=0
    for k in $(seq 1 "$AT_ONCE"); do
        grep -qx "QUERY_STRING=n=$k" "$d/at_once/$k" 2>/dev/null && right=$((right + 1))
    done
    echo "answers naming their own request: $right"
    echo "POST 1 MiB to eof.sh, GET eof.sh:"
    v "${c[@]}" --data-binary @"$F/post.bin" "$base/cgi-bin/eof.sh" | sed "s/$POST_SUM/SENT/" || echo "curl failed $?"
    v "${c[@]}" "$base/cgi-bin/eof.sh" || echo "curl failed $?"
    echo "GET endless.sh, the client gone after 100000 bytes:"
    { v "${c[@]}" "$base/cgi-bin/endless.sh?$name-$round" 2>/dev/null || true; } | head -c 100000 | wc -c
    local i left=running
    for i in $(seq 1 500); do
        pgrep -f "^yes endless $name-$round\$" >/dev/null || {
            left=gone
            break
        }
        sleep 0.02
    done
    echo "the endless CGI: $left"
    echo "GET big.sh (2 MiB):"
    v "${c[@]}" "$base/cgi-bin/big.sh" | sha256sum | sed "s/$BIG_SUM/WRITTEN/" || echo "curl failed $?"
    echo "GET stderr.sh:"
    v "${c[@]}" "$base/cgi-bin/stderr.sh?round-$round" || echo "curl failed $?"
    echo "GET missing.sh, noheaders.sh:"
    v "${c[@]}" "${code[@]}" "$base/cgi-bin/missing.sh" || echo "curl failed $?"
    v "${c[@]}" "${code[@]}" "$base/cgi-bin/noheaders.sh" || echo "curl failed $?"
    echo "proxied GET:"
    v "${c[@]}" "$base/be/hello?x=1" || echo "curl failed $?"
    echo "proxied POST 1 MiB:"
    v "${c[@]}" --data-binary @"$F/post.bin" "$base/be/post" || echo "curl failed $?"
    echo "proxied POST 1 MiB, echoed back:"
    v "${c[@]}" --data-binary @"$F/post.bin" "$base/be/echo" | sha256sum | sed "s/$POST_SUM/SENT/" || echo "curl failed $?"
    echo "$AT_ONCE proxied GETs at once:"
    v "${c[@]}" --parallel --parallel-immediate --parallel-max "$AT_ONCE" -o "$d/at_once/be#1" -w '%{http_code}\n' \
        "$base/be/n[1-$AT_ONCE]" 2>"$d/at_once.err" | sort | uniq -c || echo "curl failed $?"
    grep -a 'curl:' "$d/at_once.err" || true
    right=0
    for k in $(seq 1 "$AT_ONCE"); do
        grep -qx "upstream saw /n$k" "$d/at_once/be$k" 2>/dev/null && right=$((right + 1))
    done
    echo "proxied answers naming their own request: $right"
}

# one_run NAME MODE [RUN OPTIONS...]: the instance in $TMP/ap-NAME on MODE's sockets
# (udsfs: every program through `udsfs run` with the RUN OPTIONS and the sockets'
# directory routed); the answers go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 d=$TMP/ap-$1 out=$TMP/$1.out
    shift 2
    local s=$d/sock port
    RUN_OPTS=("$@")
    [ "$mode" == kernel ] || RUN_OPTS+=(--route "$s")
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/htdocs" "$d/run" "$d/lock" "$s"
    chmod 755 "$d" "$s"
    cgi_scripts "$d/cgi-bin"
    port=$(free_port)
    apache_conf "$d" "$s" "$port"
    local base=http://127.0.0.1:$port
    v apache2 -f "$d/httpd.conf" -t >"$d/configtest.out" 2>&1 ||
        fail "$name: apache2 -t: $(cat "$d/configtest.out")"
    # the www-data workers connect to the backend: they need write permission on its name
    umask 0
    serve BACKEND "$s/be.sock" "$d/backend.out" ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- \
        /usr/bin/python3 "$LIB_DIR/http_upstream.py" "$s/be.sock"
    umask 022
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- apache2 -f "$d/httpd.conf" -DFOREGROUND
    start_bg HTTPD "${RUN_CMD[@]}" >"$d/httpd.out" 2>&1
    generations "$d" 1
    # the cgid daemon binds ScriptSock with the master's pid appended
    local master cgid_sock
    master=$(tr -d ' \n' <"$d/httpd.pid")
    cgid_sock=$s/cgid.sock.$master
    wait_listening "$cgid_sock"
    expect_socket_home "$cgid_sock"
    expect_socket_home "$s/be.sock"
    {
        echo "-- sockets"
        v stat -c '%n %F %a %U' "$cgid_sock" "$s/be.sock" 2>&1 | sed "s#$s/##; s/\\.$master /.PID /"
        echo "-- workers"
        echo "their users: $(ps -o user= --ppid "$master" | sort | uniq -c | tr -s ' ' | xargs)"
        echo "-- round 1"
        round "$name" 1 "$base"
        if [ "$mode" == udsfs ]; then
            # the proxied requests' connections stay in the workers' pool (keep-alive),
            # open at both ends: looked at for 10 s at most
            local look
            sleep 10 &
            look=$!
            held_lanes "$d/laned" "$look" 2 be.sock
            kill "$look" 2>/dev/null || true
            wait "$look" 2>/dev/null || true
        fi
        echo "-- apache2 -k graceful"
        ask "graceful" apache2 -f "$d/httpd.conf" -k graceful
        generations "$d" 2
        wait_listening "$cgid_sock"
        echo "-- round 2"
        round "$name" 2 "$base"
        echo "-- apache2 -k stop"
        ask "stop" apache2 -f "$d/httpd.conf" -k stop
    } >"$out" 2>&1
    exit_status "$out" "apache2 -DFOREGROUND" "$HTTPD" 20000 "$d/error.log"
    session_left "$HTTPD" 5 >>"$out"
    name_gone "$cgid_sock" | sed "s/\\.$master /.PID /" >>"$out"
    stop_bg "$BACKEND"
    # the log without times, pids, tids, ports and the config's paths, sorted and counted
    # (the workers' lines come in any order), nor the endless CGI's last words: whether
    # its write failed at the worker's close (ECONNRESET when blocked in it, EPIPE when
    # not) or the worker's SIGTERM came first, even in the middle of the words, varies
    # on the kernel too (8 of 40 requests said ECONNRESET there, some cut short)
    echo "-- error_log (sorted, counted)" >>"$out"
    sed -E -e 's/(yes: )+(standard output)?(: )?(Connection reset by peer|Broken pipe)?//g; /^$/d' \
        -e 's/^\[[^]]*\] //; s/\[pid [0-9]+(:tid [0-9]+)?\] //; s/\[client 127\.0\.0\.1:[0-9]+\] /[client] /' \
        -e "s#$d#D#g; s/:$port\b/:PORT/g; s/\(pid=[0-9]+\)/(pid=PID)/; s/\\.$master\b/.PID/g" "$d/error.log" | sort | uniq -c >>"$out"
    show_answers "$name" "$out" "$d/httpd.out" "$d/backend.out"
}

timed_run kernel kernel
kernel_said 'user=www-data' "the kernel run's CGI did not run as www-data"
kernel_said 'body: SENT' "the kernel run's CGI did not get the 1 MiB POST whole"
kernel_said "answers naming their own request: $AT_ONCE" "the kernel run's $AT_ONCE CGI requests at once did not all answer"
kernel_said " *$AT_ONCE 200" "the kernel run's $AT_ONCE requests at once did not all get 200"
kernel_said 'WRITTEN  -' "the kernel run's 2 MiB CGI output did not arrive whole"
kernel_said '404' "the kernel run's missing CGI was not 404"
kernel_said '500' "the kernel run's CGI without headers was not 500"
kernel_said 'upstream saw /hello?x=1' "the kernel run's proxied GET did not reach the backend"
kernel_said '1048576 bytes, sum .*' "the kernel run's proxied POST did not reach the backend whole"
kernel_said 'SENT  -' "the kernel run's proxied POST did not come back whole"
kernel_said "proxied answers naming their own request: $AT_ONCE" "the kernel run's $AT_ONCE proxied requests at once did not all answer"
kernel_said 'processes left: none' "the kernel run left processes"

runs_through_fronts apache ap error.log "the workers' pooled connections to the backend"

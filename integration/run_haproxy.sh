#!/usr/bin/env bash
# run_haproxy.sh: haproxy (master-worker, -W) with a unix-socket frontend in front of a
# unix-socket backend (a python3 HTTP server, health-checked over its socket), and its
# admin socket (`stats socket ... level admin`) and master CLI socket (-S) in a directory
# outside the mount (`udsfs run --route DIR`); curl over the frontend, socat on the
# admin and master sockets (show info, show stat, disable/enable server, show proc, and
# a reload: the new worker gets the listeners from the old one over a socketpair), and a
# seamless reload between two processes started apart (`haproxy -x ADMIN -sf PID`: the
# listeners passed over the admin socket). On
# kernel sockets, then every program through `udsfs run --mount $MNT --route DIR`: the
# same answers both times, and through udsfs the four sockets are udsfs sockets.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd haproxy haproxy
need_cmd curl curl
need_cmd socat socat

head -c 300000 /dev/urandom >"$TMP/post.bin"

# haproxy binds each unix socket as NAME.PID.tmp, then renames it to NAME: the tables
# list the name it was bound at. Its master binds the master CLI socket, re-executes
# itself (closing that socket) and binds it again: a socket at NAME is no proof that the
# tables list it yet. bound_home PATH: wait for a socket at PATH listed where the mode
# says (udsfs: $U/unix lists PATH.PID.tmp and the kernel has no socket of that name;
# kernel: /proc/net/unix lists it).
listed() { awk 'NR > 1 { print $8 }' "$1" | grep -Eq "$2"; }
bound_home() {
    local path=$1 i pat kpat table
    kpat="^$path\\.[0-9]+\\.tmp\$"
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        table=$U/unix pat="^$(tree_path "$path")\\.[0-9]+\\.tmp\$"
    else
        table=/proc/net/unix pat=$kpat
    fi
    for i in $(seq 1 500); do
        [ -S "$path" ] && listed "$table" "$pat" && break
        [ "$UDSFS_RUN_VIA" == kernel ] || ! listed /proc/net/unix "$kpat" ||
            fail "the kernel has a socket bound at $path.PID.tmp: haproxy's socket was not routed to udsfs"
        sleep 0.04
    done
    [ -S "$path" ] || fail "$UDSFS_RUN_VIA: no socket at $path after 20 s"
    listed "$table" "$pat" || fail "$table lists no socket bound at $path.PID.tmp after 20 s: $(cat "$table")"
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        ! listed /proc/net/unix "$kpat" ||
            fail "the kernel has a socket bound at $path.PID.tmp: haproxy's socket was not routed to udsfs"
        ok "$path is a udsfs socket (in $U/unix as $(tree_path "$path").PID.tmp, not in /proc/net/unix)"
    else
        ok "$path is a kernel socket (UDSFS_RUN_VIA=kernel)"
    fi
}

# haproxy_cfg FILE ADMIN [LINE...]: writes FILE, a haproxy configuration whose admin
# socket is ADMIN (it passes the listeners to a reloaded process), with the global LINEs,
# HTTP defaults and then what comes on stdin (the frontends and backends).
haproxy_cfg() {
    local file=$1 admin=$2 line
    shift 2
    {
        echo global
        echo "    stats socket $admin mode 600 level admin expose-fd listeners"
        for line in "$@"; do echo "    $line"; done
        cat <<'EOF2'
defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
EOF2
        cat
    } >"$file"
}

# one_run MODE DIR: haproxy and its backend with sockets in DIR, its admin sockets in
# $TMP/hap-MODE/run, on MODE's sockets; the answers go to $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/hap-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/run" "$dir"
    local admin=$d/run/admin.sock master=$d/run/master.sock
    haproxy_cfg "$d/haproxy.cfg" "$admin" "pidfile $d/haproxy.pid" "nbthread 2" <<EOF2
frontend fe
    bind unix@$dir/haproxy.sock
    default_backend be
backend be
    server s1 unix@$dir/upstream.sock check inter 200ms rise 1 fall 1
EOF2
    serve UPSTREAM "$dir/upstream.sock" "$d/upstream.out" -- python3 "$LIB_DIR/http_upstream.py" "$dir/upstream.sock"
    run_cmd --route "$d/run" -- haproxy -W -db -S "$master" -f "$d/haproxy.cfg"
    start_bg HAPROXY "${RUN_CMD[@]}" >"$d/haproxy.out" 2>&1
    bound_home "$dir/haproxy.sock"
    bound_home "$admin"
    bound_home "$master"
    expect_socket_home "$dir/upstream.sock"
    # admin CMD: one command on the admin socket, through socat.
    admin() { echo "$1" | via --route "$d/run" -- timeout 10 socat - "UNIX-CONNECT:$admin"; }
    # status: the backend server's state, as show stat gives it.
    status() { admin "show stat" | awk -F, '$1 == "be" && $2 == "s1" { print "s1:", $18 }'; }
    # master_cmd CMD: one command on the master CLI socket; proc: its process list.
    master_cmd() { echo "$1" | via --route "$d/run" -- timeout 10 socat - "UNIX-CONNECT:$master"; }
    proc() { master_cmd "show proc"; }
    # wait_up: until the health check sees the backend server up (10 s at most).
    wait_up() {
        local i
        for i in $(seq 1 250); do
            [ "$(status)" == "s1: UP" ] && break
            sleep 0.04
        done
    }
    wait_up
    local i c=(curl --silent --show-error --max-time 8 --unix-socket "$dir/haproxy.sock")
    {
        status
        admin "show info" | grep -E '^(Name|Nbthread|Process_num|Stopping):'
        via -- "${c[@]}" http://localhost/one || echo "one: curl failed $?"
        via -- "${c[@]}" http://localhost/two http://localhost/three || echo "two+three: curl failed $?"
        via -- "${c[@]}" --data-binary @"$TMP/post.bin" http://localhost/post || echo "post: curl failed $?"
        admin "disable server be/s1"
        status
        via -- "${c[@]}" -o /dev/null -w '%{http_code}\n' http://localhost/maint || echo "maint: curl failed $?"
        admin "enable server be/s1"
        wait_up
        status
        via -- "${c[@]}" http://localhost/back || echo "back: curl failed $?"
        admin "show stat" | awk -F, '$1 == "fe" && $2 == "FRONTEND" { print "frontend sessions:", $8 }'
        # the master CLI: its workers
        proc | awk '$2 == "worker" { n++ } END { print "workers:", n + 0 }'
        # A reload through the master CLI: the master re-executes itself as
        # `haproxy -sf OLD -x sockpair@N ...`, the new worker asks the old one for its
        # listening sockets over their socketpair (SCM_RIGHTS) and serves on them; the
        # old worker leaves.
        local old_worker
        old_worker=$(proc | awk '$2 == "worker" { print $1 }')
        master_cmd reload >/dev/null
        # while the master re-executes, its CLI socket refuses (on the kernel too)
        for i in $(seq 1 250); do
            proc 2>/dev/null | awk -v old="$old_worker" '$2 == "master" && $3 == 1 { m = 1 } $2 == "worker" { n++; if ($1 == old) o = 1 }
                END { exit !(m && n == 1 && !o) }' && break
            sleep 0.04
        done
        proc | awk -v old="$old_worker" '$2 == "master" { print "master reloads:", $3 }
            $2 == "worker" { print "worker after reload:", ($1 == old ? "the old one" : "a new one") }'
        wait_up
        status
        via -- "${c[@]}" http://localhost/reloaded || echo "reloaded: curl failed $?"
        via -- "${c[@]}" --data-binary @"$TMP/post.bin" http://localhost/post2 || echo "post2: curl failed $?"
    } >"$out" 2>&1 || true
    show_answers "$mode" "$out" "$d"/*.out
    stop_bg -USR1 "$HAPROXY" "$UPSTREAM"
}

# seamless_run MODE DIR: a seamless reload between two haproxy processes each started on
# its own (no master): the second, `haproxy -x ADMIN -sf FIRST`, connects to the first's
# admin socket (`expose-fd listeners`, in a --route directory), gets its listening
# sockets by SCM_RIGHTS and serves on them without binding; the first leaves. Answers
# appended to $TMP/MODE.out.
seamless_run() {
    local mode=$1 dir=$2 d=$TMP/hap-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    local admin=$d/run/admin2.sock front=$dir/seamless.sock
    haproxy_cfg "$d/seamless.cfg" "$admin" <<EOF2
frontend fe
    bind unix@$front
    http-request return status 200 content-type text/plain string "served\n"
EOF2
    run_cmd --route "$d/run" -- haproxy -db -f "$d/seamless.cfg"
    start_bg FIRST "${RUN_CMD[@]}" >"$d/first.out" 2>&1
    bound_home "$front"
    bound_home "$admin"
    local first second
    # pid: the pid of the haproxy that answers on the admin socket (-p writes no file
    # without a master or -D)
    pid() { echo "show info" | via --route "$d/run" -- timeout 10 socat - "UNIX-CONNECT:$admin" | awk -F': ' '$1 == "Pid" { print $2 }'; }
    first=$(pid)
    [ -n "$first" ] || fail "$mode: the first haproxy's admin socket gave no pid: $(tail -5 "$d/first.out")"
    local c=(curl --silent --show-error --max-time 8 --unix-socket "$front")
    {
        echo "seamless reload:"
        via -- "${c[@]}" http://localhost/
        run_cmd --route "$d/run" -- haproxy -db -f "$d/seamless.cfg" -x "$admin" -sf "$first"
        start_bg SECOND "${RUN_CMD[@]}" >"$d/second.out" 2>&1
        if ended_within "$FIRST" 20000; then
            reap "$FIRST"
            echo "first process ended: status $REAPED_STATUS"
        else
            echo "first process still running after 20 s"
        fi
        second=$(pid)
        echo "the admin socket now answered by: $([ -n "$second" ] && [ "$second" != "$first" ] && echo "another process" || echo "'$second' (first: $first)")"
        # the first has left: the second answers, on the listener it was passed
        via -- "${c[@]}" http://localhost/a http://localhost/b
        # (no large POST: `http-request return` answers before reading a body, and curl,
        # still sending, may get EPIPE on the kernel too)
        via -- "${c[@]}" --data-binary 'small body' -o /dev/null -w '%{http_code}\n' http://localhost/post
        # the second process bound nothing: the tables still list the first's names only
        local table=/proc/net/unix
        [ "$mode" == kernel ] || table=$U/unix
        # listeners only (flags __SO_ACCEPTCON): a connection the listener accepted
        # carries its name too, and may not be closed yet
        awk 'NR > 1 && $4 == "00010000" { print $8 }' "$table" | grep -E '/(seamless|admin2)\.sock\.[0-9]+\.tmp$' |
            sed -e "s/.*\/\([a-z0-9]*\)\.sock\.$first\.tmp$/\1 bound by the first process/" \
                -e "s/.*\/\([a-z0-9]*\)\.sock\.$second\.tmp$/\1 bound by the second process/" | sort
    } >>"$out" 2>&1 || true
    say "$mode answers, seamless reload:"
    sed -n '/^seamless reload:$/,$s/^/    /p' "$out"
    stop_bg "$SECOND" "$FIRST"
    ! grep -h 'udsfs-preload' "$d"/first.out "$d"/second.out >&2 || fail "the library complained (above)"
}

one_run kernel "$TMP/k"
seamless_run kernel "$TMP/k"
one_run udsfs "$MNT/hap"
seamless_run udsfs "$MNT/hap"
grep -qx 's1: UP' "$TMP/kernel.out" || fail "the kernel run's health check never saw the backend up"
grep -qx 's1: MAINT' "$TMP/kernel.out" || fail "the kernel run could not disable the server over the admin socket"
grep -qx 'upstream saw /back' "$TMP/kernel.out" || fail "the kernel run did not reach the backend after enabling it"
grep -qx 'workers: 1' "$TMP/kernel.out" || fail "the kernel run's master CLI did not list its worker"
grep -qx 'worker after reload: a new one' "$TMP/kernel.out" || fail "the kernel run's reload did not replace the worker"
grep -qx 'upstream saw /reloaded' "$TMP/kernel.out" || fail "the kernel run's new worker did not serve on the passed listener"
grep -qx 'first process ended: status 0' "$TMP/kernel.out" || fail "the kernel run's first process did not leave on -sf"
[ "$(grep -cx served "$TMP/kernel.out")" -eq 3 ] || fail "the kernel run's second process did not serve on the listener it was passed"
grep -qx 'seamless bound by the first process' "$TMP/kernel.out" || fail "the kernel run's passed listener is not the first process's"
same_answers "haproxy" tail -v -n 20 "$TMP/hap-udsfs/haproxy.out"
ok "haproxy (master, worker, admin and master CLI sockets) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

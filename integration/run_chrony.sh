#!/usr/bin/env bash
# run_chrony.sh: chronyd (-x: it never touches the clock; no NTP port, `local stratum`)
# with its command socket, a unix DATAGRAM socket, in a --route directory (mode 0700:
# chronyd refuses one that others may enter), and chronyc: each chronyc binds a socket of
# its own beside the daemon's (chronyc.PID.sock), sends its request and gets the reply at
# that name; privileged commands (`local`, `manual`, `dump`, `reload sources`, ...) are
# accepted only over this socket. tracking, sources, sourcestats, clients, authdata,
# activity, serverstats, selectdata; `local stratum 7` and `local off` seen back in
# tracking, several commands in one chronyc (-m); the privileged commands' answers (200 OK
# and the refusals: makestep's 500 under -x, 503, 505, 513); 6 chronyc at once; chronyc
# as uid 61001 (it cannot bind its reply socket in root's 0700 directory: refused); a
# clean stop on SIGTERM. Three runs: on kernel sockets, then chronyd and every chronyc
# through `udsfs run --mount $MNT --route DIR`, then the same under `--front seccomp`:
# the same answers, the daemon's socket a udsfs socket and no chronyc socket left behind;
# then a chronyc killed (SIGKILL) while chronyd is stopped: its name stays, a socket no
# one holds (sendto: ECONNREFUSED), and chronyd, let go on, answers the next chronyc.
UDSFS_MOUNT_ARGS=(--allow-other) # the chronyc of uid 61001 must reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd chronyd chrony chronyc chrony setpriv util-linux
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
chmod 755 "$TMP" # uid 61001 reaches the mount and the socket directory's parent

# PROBE DIR: a datagram socket's bind at DIR/probe.sock, and an unbound one's sendto
# DIR/chronyd.sock: the errno of each.
PROBE='
import socket, sys
for what, call in (("bind", lambda s: s.bind(sys.argv[1] + "/probe.sock")),
                   ("sendto", lambda s: s.sendto(b"x", sys.argv[1] + "/chronyd.sock"))):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        call(s)
        print(what, "done")
    except OSError as e:
        print(what, e.strerror)
'

# SEND_LEFT DIR: a datagram to each chronyc.*.sock in DIR: its errno.
SEND_LEFT='
import glob, socket, sys
for name in glob.glob(sys.argv[1] + "/chronyc.*.sock"):
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", name)
        print("sent")
    except OSError as e:
        print(e.strerror)
'

# one_run NAME MODE [RUN OPTIONS...]: chronyd with its socket in $TMP/run on MODE's
# sockets (udsfs: chronyd and each chronyc through `udsfs run --route $TMP/run` with the
# RUN OPTIONS); answers in $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 dir=$TMP/run d=$TMP/chrony-$1 out=$TMP/$1.out
    run_on "$mode" --route "$dir" "${@:3}"
    rm -rf "$dir"
    mkdir -p "$d" "$dir"
    chmod 700 "$dir" # chronyd refuses a socket directory that others may enter
    local sock=$dir/chronyd.sock
    cat >"$d/chrony.conf" <<EOF2
bindcmdaddress $sock
cmdport 0
port 0
pidfile $d/chronyd.pid
driftfile $d/drift
dumpdir $d
local stratum 10
EOF2
    run_cmd "${RUN_OPTS[@]}" -- chronyd -d -x -u root -f "$d/chrony.conf"
    start_bg CHRONYD "${RUN_CMD[@]}" >"$d/chronyd.out" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local c=(chronyc -h "$sock")
    # tracking's CSV without its times: reference id, stratum, leap status
    tracking() { v "${c[@]}" -c tracking | cut -d, -f1,3,14; }
    {
        tracking
        v "${c[@]}" -n sources
        v "${c[@]}" -n sourcestats
        v "${c[@]}" -c activity
        v "${c[@]}" clients
        v "${c[@]}" authdata
        v "${c[@]}" -c selectdata
        v "${c[@]}" local stratum 7
        tracking
        v "${c[@]}" -m "local off" "manual on" "manual off" "local stratum 3" tracking |
            grep -v '^\(Ref time\|System time\|Update interval\)'
        tracking
        # privileged commands: what each answers (no sources, no RTC, -x: no clock)
        local cmd
        for cmd in dump "reload sources" rekey cyclelogs onoffline refresh makestep \
            "burst 1/2" smoothing "settime 12:00:00" "rtcdata"; do
            # shellcheck disable=SC2086 # the command's words
            ask "$cmd" "${c[@]}" $cmd
        done
        # waitsync's one try: the reference id and its (zero) correction and skew
        ask "waitsync 1" "${c[@]}" waitsync 1
        ask "local stratum 9" "${c[@]}" local stratum 9
        tracking
        # 6 chronyc at once, each with its own reply socket
        local pids=() p
        for p in 1 2 3 4 5 6; do
            tracking >"$d/many$p.out" 2>&1 &
            pids+=($!)
        done
        exits "${pids[@]}"
        echo "6 chronyc at once: exits $EXITS; answers: $(cat "$d"/many?.out | sort | uniq -c | sed 's/^ *//')"
        # uid 61001 may not bind its reply socket in root's 0700 directory
        ask "tracking as uid 61001" setpriv --reuid=61001 --regid=61001 --clear-groups "${c[@]}" tracking
        # why: its bind beside the daemon's socket, and a send to it, are refused
        ask "uid 61001's own bind and sendto" setpriv --reuid=61001 --regid=61001 --clear-groups \
            /usr/bin/python3 -c "$PROBE" "$dir"
        # serverstats: NTP packets received and dropped, command packets dropped (not the
        # command packets received: on a loaded machine a chronyc that retries counts twice)
        v "${c[@]}" -c serverstats | cut -d, -f1,2,4
        echo "left in the socket directory: $(cd "$dir" && echo *)"
        # a chronyc killed while chronyd is stopped leaves its bound name behind; chronyd,
        # let go on, sends its reply to that name (no one there) and goes on answering
        local chronyd_pid
        chronyd_pid=$(ps -e -o pid=,sid=,comm= | awk -v s="$CHRONYD" '$2 == s && $3 == "chronyd" { print $1 }')
        kill -STOP "$chronyd_pid"
        ask "chronyc killed waiting for a stopped chronyd" timeout -s KILL 1 "${c[@]}" tracking
        echo "left: $(cd "$dir" && echo *)"
        echo "the name left is a socket: $(for f in "$dir"/chronyc.*; do [ -S "$f" ] && echo yes || echo no; done)"
        ask "sendto the name left" /usr/bin/python3 -c "$SEND_LEFT" "$dir"
        kill -CONT "$chronyd_pid"
        tracking
    } 2>&1 | sed -e "s#$d#D#g; s#chronyc\.[0-9]*\.sock#chronyc.PID.sock#g" \
        -e '/ Killed  /d' >"$out" || true # bash's word on a killed child (udsfs run exits 137)
    kill -TERM "$CHRONYD" 2>/dev/null || true
    ended_within "$CHRONYD" 10000 || fail "$name: chronyd did not exit on SIGTERM"
    reap "$CHRONYD"
    {
        echo "chronyd exit status: $REAPED_STATUS"
        echo "left after the stop: $(cd "$dir" && echo *)"
    } | sed "s#chronyc\.[0-9]*\.sock#chronyc.PID.sock#g" >>"$out"
    show_answers "$name" "$out" "$d"/*.out
}

t0=$(now_ms)
one_run kernel kernel
say "kernel run: $(($(now_ms) - t0)) ms"
kernel_said '7F7F0101,7,Normal' "the kernel run did not take 'local stratum 7'"
kernel_said '7F7F0101,9,Normal' "the kernel run did not take 'local stratum 9'"
kernel_said 'dump: exit 0' "the kernel run's dump was not accepted"
kernel_said 'makestep: exit 1' "the kernel run's makestep did not fail under -x"
kernel_said '6 chronyc at once: exits 0 0 0 0 0 0; answers: 6 7F7F0101,9,Normal' "the kernel run's 6 chronyc did not all get tracking"
kernel_said 'tracking as uid 61001: exit 1' "the kernel run's chronyc as uid 61001 was not refused"
kernel_said 'bind Permission denied' "the kernel run's uid 61001 could bind in root's 0700 directory"
kernel_said 'left: chronyc.PID.sock chronyd.sock' "the kernel run's killed chronyc left no name behind"
kernel_said 'Connection refused' "the kernel run's sendto the name a killed chronyc left was not refused"
kernel_said 'chronyd exit status: 0' "the kernel run's chronyd did not exit 0 on SIGTERM"
for run in udsfs seccomp; do
    t0=$(now_ms)
    if [ "$run" == seccomp ]; then one_run seccomp udsfs --front seccomp; else one_run udsfs udsfs; fi
    say "$run run: $(($(now_ms) - t0)) ms"
    same_answers --run "$run" "chronyd and chronyc" tail -n 20 "$TMP/chrony-$run/chronyd.out"
    ok "chronyd and chronyc (its own bound datagram socket, privileged commands) through udsfs run --route${RUN_OPTS[2]:+ ${RUN_OPTS[*]:2}}: the same $(wc -l <"$TMP/$run.out") answers as on kernel sockets"
done

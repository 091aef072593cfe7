#!/usr/bin/env bash
# run_supervisord.sh: supervisord (Debian's supervisor) with its control socket in a
# directory routed into the mount (`udsfs run --route`), and supervisorctl asking it for
# the status of a program, stopping and starting it; on kernel sockets, then through
# `udsfs run --mount $MNT --route DIR`: the same answers both times, and through udsfs
# the control socket is a udsfs socket. supervisord binds NAME.PID, hard-links NAME to
# it and unlinks NAME.PID: on d20381b link() was not interposed, the link copied the
# routed symlink, the unlink removed the node it pointed at, and supervisorctl got
# ENOENT.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd supervisord supervisor
need_cmd supervisorctl supervisor

# one_run MODE: supervisord and supervisorctl on MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 d=$TMP/sv-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/run"
    cat >"$d/supervisord.conf" <<EOF2
[unix_http_server]
file=$d/run/supervisor.sock
[supervisord]
logfile=$d/supervisord.log
pidfile=$d/supervisord.pid
childlogdir=$d
nodaemon=true
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://$d/run/supervisor.sock
[program:sleeper]
command=sleep 1000
startsecs=0
EOF2
    run_cmd --route "$d/run" -- supervisord -c "$d/supervisord.conf"
    start_bg SUPERVISORD "${RUN_CMD[@]}" >"$d/supervisord.out" 2>&1
    local sock=$d/run/supervisor.sock
    local i
    for i in $(seq 1 400); do
        [ -S "$sock" ] && break
        sleep 0.05
    done
    [ -S "$sock" ] || fail "$mode: no socket at $sock: $(tail -5 "$d/supervisord.out")"
    # The socket is bound as supervisor.sock.PID (the name linked, then unlinked): the
    # tables list that name.
    local pat
    pat="$(tree_path "$sock")\\.[0-9]+\$"
    if [ "$mode" == udsfs ]; then
        awk 'NR > 1 { print $8 }' "$U/unix" | grep -Eq "^$pat" ||
            fail "$U/unix lists no socket bound at $sock.PID: $(cat "$U/unix")"
        ! grep -q "$sock" /proc/net/unix || fail "the kernel has a socket bound at $sock.PID"
        ok "$sock is a udsfs socket (in $U/unix as $(tree_path "$sock").PID, not in /proc/net/unix)"
    else
        grep -Eq " $sock\\.[0-9]+\$" /proc/net/unix || fail "/proc/net/unix lists no socket at $sock.PID"
    fi
    local ctl=(timeout 20 supervisorctl -c "$d/supervisord.conf")
    for i in $(seq 1 100); do
        via --route "$d/run" -- "${ctl[@]}" status sleeper 2>&1 | grep -q RUNNING && break
        sleep 0.1
    done
    {
        via --route "$d/run" -- "${ctl[@]}" status sleeper | awk '{ print $1, $2 }'
        via --route "$d/run" -- "${ctl[@]}" stop sleeper
        via --route "$d/run" -- "${ctl[@]}" status sleeper | awk '{ print $1, $2 }'
        via --route "$d/run" -- "${ctl[@]}" start sleeper
        via --route "$d/run" -- "${ctl[@]}" pid | grep -c '^[0-9][0-9]*$'
        via --route "$d/run" -- "${ctl[@]}" shutdown
    } >"$out" 2>&1 || true
    exit_status "$out" "supervisord" "$SUPERVISORD" 10000 "$d/supervisord.log"
    show_answers "$mode" "$out" "$d/supervisord.out"
}

one_run kernel
one_run udsfs
grep -q 'sleeper RUNNING' "$TMP/kernel.out" || fail "the kernel run did not see the program running"
same_answers "supervisorctl"
ok "supervisord and supervisorctl through udsfs run --route: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

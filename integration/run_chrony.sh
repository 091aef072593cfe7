#!/usr/bin/env bash
# run_chrony.sh: chronyd (-x: it never touches the clock; no NTP port, `local stratum`)
# with its command socket, a unix DATAGRAM socket, in a --route directory, and chronyc:
# each chronyc binds a socket of its own beside the daemon's (chronyc.PID.sock), sends
# its request and gets the reply at that name; privileged commands (`local`, `manual`)
# are accepted only over this socket. tracking, sources, serverstats, activity, `local
# stratum 7` and `local off` seen back in tracking, several commands in one chronyc
# (-m), chronyc under --front seccomp, a clean stop; on kernel sockets, then every
# program through `udsfs run --mount $MNT --route DIR`: the same answers, the daemon's
# socket a udsfs socket and no chronyc socket left behind.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd chronyd chrony
need_cmd chronyc chrony

# one_run MODE: chronyd with its socket in $TMP/run on MODE's sockets; answers in
# $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$TMP/run d=$TMP/chrony-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d" "$dir"
    chmod 700 "$dir" # chronyd refuses a socket directory that others may enter
    local sock=$dir/chronyd.sock
    cat >"$d/chrony.conf" <<EOF2
bindcmdaddress $sock
cmdport 0
port 0
pidfile $d/chronyd.pid
driftfile $d/drift
local stratum 10
EOF2
    run_cmd --route "$dir" -- chronyd -d -x -u root -f "$d/chrony.conf"
    start_bg CHRONYD "${RUN_CMD[@]}" >"$d/chronyd.out" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local c=(timeout 20 chronyc -h "$sock")
    # tracking's CSV without its times: reference id, stratum, leap status
    tracking() { via --route "$dir" "$@" -- "${c[@]}" -c tracking | cut -d, -f1,3,14; }
    {
        tracking
        via --route "$dir" -- "${c[@]}" -n sources
        via --route "$dir" -- "${c[@]}" -c activity
        via --route "$dir" -- "${c[@]}" local stratum 7
        tracking
        via --route "$dir" -- "${c[@]}" -m "local off" "manual on" "manual off" "local stratum 3" tracking |
            grep -v '^\(Ref time\|System time\|Update interval\)'
        tracking --front seccomp
        via --route "$dir" --front seccomp -- "${c[@]}" local stratum 9
        tracking
        via --route "$dir" -- "${c[@]}" -c serverstats | cut -d, -f1-4
        echo "left in the socket directory: $(cd "$dir" && echo *)"
    } >"$out" 2>&1 || true
    kill -TERM "$CHRONYD" 2>/dev/null || true
    ended_within "$CHRONYD" 10000 || fail "$mode: chronyd did not exit on SIGTERM"
    reap "$CHRONYD"
    {
        echo "chronyd exit status: $REAPED_STATUS"
        echo "left after the stop: $(cd "$dir" && echo *)"
    } >>"$out"
    show_answers "$mode" "$out" "$d"/*.out
}

one_run kernel
rm -rf "$TMP/run"
one_run udsfs
grep -qx '7F7F0101,7,Normal' "$TMP/kernel.out" || fail "the kernel run did not take 'local stratum 7'"
grep -qx '200 OK' "$TMP/kernel.out" || fail "the kernel run's privileged commands were not accepted"
same_answers "chronyd and chronyc" tail -n 20 "$TMP/chrony-udsfs/chronyd.out"
ok "chronyd and chronyc (its own bound datagram socket, privileged commands, --front seccomp) through udsfs run --route: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

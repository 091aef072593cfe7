#!/usr/bin/env bash
# run_xvfb.sh: an X server, Xvfb (package xvfb), and X clients of x11-utils (xdpyinfo,
# xwininfo -root, xprop -root), on kernel sockets and then all of them through `udsfs run
# --route /tmp/.X11-unix` (Xvfb binds /tmp/.X11-unix/XN there, and @/tmp/.X11-unix/XN in
# the abstract namespace, which through udsfs is the mount's). Two servers a run:
#   both  Xvfb's default: the abstract name and the path; libxcb's clients connect to the
#         abstract name first, so they use it;
#   path  `-nolisten local`: the path only; the clients' abstract connect is refused and
#         they fall back to the path;
#   seccomp  as both, the server under `udsfs run --front seccomp` (its socket calls
#         trapped by the supervisor; the clients through the library as before).
# On each: the three clients' answers; a client that stays (`xprop -root -spy
# CUT_BUFFER0`) sees another client set the root window's CUT_BUFFER0 (the server
# carries an event between two connections); uid 65534's clients (through udsfs on
# root's mount, --allow-other) read that property too and get xdpyinfo's answer, also
# from a user and network namespace of their own (on Linux the abstract name is not
# there: they connect to the path; both kinds), and a client under --front seccomp; the
# server ends on SIGTERM and takes its socket with it. -noreset: by default the server
# resets when its last client leaves, and a client that connects meanwhile may be
# dropped ("unable to open display": once in three runs, on the kernel). Display
# numbers are Xvfb's own choice (-displayfd), written as N in the answers, which must be
# the same as on the kernel line by line. Guards: through udsfs the listeners are in the
# mount's table ($U/unix) and not the kernel's (/proc/net/unix), and the staying
# client's connection is a descriptor of a udsfs socket's data file, not a kernel
# socket (on the kernel the reverse: which checks the checks).
UDSFS_MOUNT_ARGS=(--allow-other) # uid 65534's clients reach root's mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd Xvfb xvfb xdpyinfo x11-utils xwininfo x11-utils xprop x11-utils unshare util-linux
X=/tmp/.X11-unix
chmod o+x "$TMP" # uid 65534's clients write their answers below it
chmod 1777 "$MNT" || fail "chmod 1777 the mount root"

# abstract_home NAME: where the abstract listener @NAME is: "udsfs", "kernel", "both"
# or "none".
abstract_home() {
    local u=0 k=0
    awk -v p="@$1" 'NR > 1 && $6 == "01" && $8 == p { f = 1 } END { exit !f }' "$U/unix" && u=1
    awk -v p="@$1" 'NR > 1 && $6 == "01" && $8 == p { f = 1 } END { exit !f }' /proc/net/unix && k=1
    case $u$k in 10) echo udsfs ;; 01) echo kernel ;; 11) echo both ;; *) echo none ;; esac
}

# conn_home PID: where the X connection of client PID (`udsfs run`'s process there, or
# the client itself) is: "udsfs" when the client (the xprop below PID) holds a udsfs
# socket's data file and no kernel socket, "kernel" for the reverse.
conn_home() {
    local pid=$1 c i fds
    for i in $(seq 1 250); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" == xprop ] && break
        c=$(cat /proc/"$pid"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1) || true
        [ -z "$c" ] || pid=$c
        sleep 0.02
    done
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" == xprop ] || fail "no xprop found below the staying client"
    fds=$(for l in /proc/"$pid"/fd/*; do readlink "$l"; done)
    local udsfs kernel
    udsfs=$(grep -c "^$U/sock/[0-9]*/data\$" <<<"$fds" || true)
    kernel=$(grep -c '^socket:\[' <<<"$fds" || true)
    if [ "$udsfs" -ge 1 ] && [ "$kernel" -eq 0 ]; then
        echo udsfs
    elif [ "$udsfs" -eq 0 ] && [ "$kernel" -ge 1 ]; then
        echo kernel
    else
        echo "mixed ($udsfs udsfs, $kernel kernel sockets: $(tr '\n' ' ' <<<"$fds"))"
    fi
}

# wait_line FILE TEXT WHY: waits up to 10 s for a line holding TEXT in FILE.
wait_line() {
    local i
    for i in $(seq 1 500); do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.02
    done
    fail "$3: $(cat "$1" 2>/dev/null)"
}

# one_server MODE KIND OUT [Xvfb options...]: a server of KIND (both, path, seccomp) on
# MODE's sockets, its clients' answers appended to OUT with the display number written N.
one_server() {
    local mode=$1 kind=$2 out=$3 d=$TMP/$1-$2 n xvfb spy front=()
    shift 3
    mkdir -m 755 "$d"
    [ "$kind" != seccomp ] || front=(--front seccomp)
    run_cmd --route "$X" "${front[@]}" -- Xvfb -displayfd 3 -nolisten tcp -noreset "$@"
    start_bg xvfb "${RUN_CMD[@]}" 3>"$d/display" >"$d/xvfb.log" 2>&1
    wait_line "$d/display" "" "$mode: Xvfb ($kind) wrote no display number"
    for _ in $(seq 1 250); do
        n=$(tr -dc 0-9 <"$d/display")
        [ -z "$n" ] || break
        sleep 0.02
    done
    [ -n "$n" ] || fail "$mode: Xvfb ($kind) wrote no display number: $(cat "$d/xvfb.log")"
    wait_listening "$X/X$n"
    expect_socket_home "$X/X$n"
    local want=$UDSFS_RUN_VIA
    [ "$kind" != path ] || want=none
    local home
    home=$(abstract_home "$X/X$n")
    [ "$home" == "$want" ] || fail "$mode: Xvfb ($kind)'s abstract listener @$X/X$n is in: $home, want $want"
    ok "$mode: Xvfb ($kind) on :$n; its abstract listener in: $home"
    export DISPLAY=:$n
    {
        echo "== $kind: xdpyinfo"
        via --route "$X" -- xdpyinfo || echo "xdpyinfo failed: $?"
        echo "== $kind: xwininfo -root"
        via --route "$X" -- xwininfo -root || echo "xwininfo failed: $?"
        echo "== $kind: xprop -root"
        via --route "$X" -- xprop -root || echo "xprop failed: $?"
    } >"$d/answers" 2>&1
    run_cmd --route "$X" -- xprop -root -spy CUT_BUFFER0
    start_bg spy "${RUN_CMD[@]}" >"$d/spy" 2>&1
    wait_line "$d/spy" "CUT_BUFFER0:  not found." "$mode: the staying client did not start"
    home=$(conn_home "$spy")
    [ "$home" == "$UDSFS_RUN_VIA" ] || fail "$mode: the staying client's X connection is: $home, want $UDSFS_RUN_VIA"
    ok "$mode: the staying client's X connection is a $home socket"
    via --route "$X" -- xprop -root -f CUT_BUFFER0 8s -set CUT_BUFFER0 "set by pid $$" ||
        fail "$mode: xprop -set failed"
    wait_line "$d/spy" "set by pid $$" "$mode: the staying client saw no change of CUT_BUFFER0"
    {
        echo "== $kind: the staying client"
        cat "$d/spy"
        echo "== $kind: uid 65534's xprop -root CUT_BUFFER0"
        run_cmd --route "$X" -- xprop -root CUT_BUFFER0
        as_uid 65534 "${RUN_CMD[@]}" || echo "failed: $?"
        echo "== $kind: uid 65534's xdpyinfo (its first 5 lines)"
        run_cmd --route "$X" -- xdpyinfo
        as_uid 65534 "${RUN_CMD[@]}" | head -5 || echo "failed: $?"
        echo "== $kind: uid 65534's xprop -root CUT_BUFFER0 in a user and network namespace of its own"
        run_cmd --route "$X" -- xprop -root CUT_BUFFER0
        as_uid 65534 unshare -Urn "${RUN_CMD[@]}" || echo "failed: $?"
        echo "== $kind: xprop -root CUT_BUFFER0 under --front seccomp"
        via --route "$X" --front seccomp -- xprop -root CUT_BUFFER0 || echo "failed: $?"
    } >>"$d/answers" 2>&1
    stop_bg "$spy"
    kill -TERM "$xvfb"
    exit_status "$d/answers" "Xvfb ($kind)" "$xvfb" 10000 "$d/xvfb.log"
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        ! udsfs_has_socket "$X/X$n" || fail "$mode: Xvfb ended and left $X/X$n in $U/unix"
    fi
    [ ! -e "$X/X$n" ] || fail "$mode: Xvfb ended and left $X/X$n ($(ls -l "$X/X$n"))"
    echo "== $kind: after SIGTERM: $X/XN gone, @$X/XN in: $(abstract_home "$X/X$n")" >>"$d/answers"
    sed "s/:$n\b/:N/g; s/X$n\b/XN/g; s/pid $$/pid P/" "$d/answers" >>"$out"
    unset DISPLAY
}

for mode in kernel udsfs; do
    UDSFS_RUN_VIA=$mode
    : >"$TMP/$mode.out"
    one_server "$mode" both "$TMP/$mode.out"
    one_server "$mode" path "$TMP/$mode.out" -nolisten local
    one_server "$mode" seccomp "$TMP/$mode.out"
    # their answers in short: the headings and each answer's first 3 lines
    awk '/^== / { n = 0; print; next } n++ < 3' "$TMP/$mode.out" >"$TMP/$mode.short"
    show_answers "$mode" "$TMP/$mode.short" "$TMP/$mode"-*/xvfb.log
done
grep -q '^name of display:    :N' "$TMP/kernel.out" || fail "xdpyinfo answered nothing on the kernel"
grep -q 'CUT_BUFFER0(STRING) = "set by pid P"' "$TMP/kernel.out" || fail "the property did not come through on the kernel"
[ "$(grep -c '^Xvfb (.*) exit status: 0$' "$TMP/kernel.out")" -eq 3 ] || fail "Xvfb did not exit 0 on SIGTERM on the kernel: $(grep 'exit status' "$TMP/kernel.out")"
same_answers "Xvfb and its clients"
ok "Xvfb (abstract and path, path only, under the supervisor) and its clients through udsfs run: the same $(wc -l <"$TMP/udsfs.out") lines as on kernel sockets"

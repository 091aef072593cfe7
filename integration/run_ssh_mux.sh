#!/usr/bin/env bash
# run_ssh_mux.sh: OpenSSH connection multiplexing (ControlMaster). `ssh -M -S CTL -fN`
# authenticates to a test sshd of its own (TCP on 127.0.0.1, on the kernel), daemonizes
# and listens on the unix socket CTL; every later `ssh -S CTL` is a mux client that
# connects to it, passes its stdin, stdout and stderr (pipes, a file, /dev/null) over
# SCM_RIGHTS, and the master checks its peer's uid (getpeereid), writes the remote
# command's output straight into the passed descriptors and sends its exit status back.
# Checked: `-O check`; agent forwarding (-A: an ssh-agent on a socket beside CTL, which
# the daemonized master connects to for each session that asks; `ssh-add -l` remotely);
# a command's stdout, stderr and exit status 3; stdin from a pipe and 300 KB through
# `cat`, stdin /dev/null; a client whose stdout is a file, and one
# whose stdout and stderr are a socketpair's end (a udsfs socket passed on); 20 clients
# at once; `-W` stdio forwarding; `-O forward -L DIR/fwd.sock` (the daemonized master
# binds a second unix socket; a client reads sshd's banner through it) and `-O cancel`;
# uid 65534 on a 0666 CTL, refused by the master's getpeereid; ControlPersist (the
# first ssh forks, its child goes on as master) and `-O stop`; a client killed in its
# session (the master closes its socket and stdout at once); `-O exit` (the master
# ends, CTL removed). CTL and fwd.sock are udsfs sockets. On kernel sockets (CTL in a
# plain directory), then master and clients through `udsfs run --mount $MNT` (CTL in
# the mount; sshd on the kernel, a TCP server), then again under `--front seccomp`:
# the same answers as on the kernel; and ControlPath DIR/cm-%C in a `--route` directory
# (as ssh_config's usual ~/.ssh/cm-%C) through the library, as on the kernel; a mux
# client in a network namespace of its own (`unshare -n`) passes its stdio too (through
# the fd channel's path socket: its abstract name is in the daemon's namespace).
UDSFS_MOUNT_ARGS=(--allow-other) # uid 65534's client
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

chmod 755 "$TMP"
need_cmd ssh openssh-client ssh-keygen openssh-client ssh-agent openssh-client ssh-add openssh-client python3 python3
[ -x /usr/sbin/sshd ] || fail "/usr/sbin/sshd is not installed (package openssh-server; .ci/run installs it)"

# The test's own sshd: root by key only, on a free port of 127.0.0.1.
ssh-keygen -q -t ed25519 -N '' -f "$TMP/hostkey" || fail "ssh-keygen could not make a host key"
ssh-keygen -q -t ed25519 -N '' -C udsfs-test -f "$TMP/key" || fail "ssh-keygen could not make a key"
cp "$TMP/key.pub" "$TMP/authorized_keys"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/sshd_config" <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $TMP/hostkey
AuthorizedKeysFile $TMP/authorized_keys
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile $TMP/sshd.pid
MaxSessions 40
MaxStartups 40
# bash run by sshd reads ~/.bashrc when SHLVL says it is the first shell: root's own may
# print (a pyenv rehash racing 20 sessions did), which is not what is compared here.
SetEnv SHLVL=1
EOF
mkdir -p /run/sshd # privilege separation's directory
start_bg SSHD /usr/sbin/sshd -f "$TMP/sshd_config" -D -e >"$TMP/sshd.log" 2>&1
# At exit, before the groups: sshd's connection processes (each a session of its own,
# which killing sshd's group leaves) are killed, so every master, daemonized where the
# script cannot name it, loses its connection and ends, also after a failure.
eval "$(declare -f _run_kill_groups | sed '1s/_run_kill_groups/_lib_run_kill_groups/')"
_run_kill_groups() {
    pkill -KILL -P "$SSHD" 2>/dev/null
    _lib_run_kill_groups
}
for _ in $(seq 1 500); do
    grep -q "Server listening" "$TMP/sshd.log" && break
    proc_alive "$SSHD" || fail "sshd ended: $(cat "$TMP/sshd.log")"
    sleep 0.02
done
grep -q "Server listening" "$TMP/sshd.log" || fail "sshd did not listen within 10 s: $(cat "$TMP/sshd.log")"
SSH_OPTS=(-F /dev/null -i "$TMP/key" -o UserKnownHostsFile="$TMP/known_hosts"
    -o StrictHostKeyChecking=accept-new -o BatchMode=yes -o LogLevel=ERROR)
head -c 300000 /dev/urandom >"$TMP/blob"

# SOCKOUT: python3 -c "$SOCKOUT" CMD...: CMD (a mux client running `seq 1 20000; echo
# to-err >&2`) with stdout and stderr one end of a socketpair, stdin /dev/null; prints what
# the other end read: its length, whether it is seq's output in order with "to-err\n" taken
# out once, and whether that line was whole. The master writes the remote stdout and
# stderr as each comes, and a write to a full socket may be partial, so "to-err\n" may land
# anywhere in seq's output, even inside a line (seen through udsfs once in 12 runs at load,
# whose buffer fills at other points than the kernel's); where it lands is not compared,
# the order of stdout's bytes is.
SOCKOUT='import socket, subprocess, sys
a, b = socket.socketpair()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=a, stderr=a)
a.close()
got = b""
while True:
    x = b.recv(65536)
    if not x:
        break
    got += x
want = b"".join(b"%d\n" % i for i in range(1, 20001))
rest = got.replace(b"to-err\n", b"", 1)
print("status", p.wait(), "read", len(got), "stdout in order" if rest == want else "stdout NOT in order",
      "to-err" if len(rest) < len(got) else "no to-err")'
# BANNER: python3 -c "$BANNER" SOCK: the first 8 bytes a server sends on SOCK.
BANNER='import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.recv(8))'

# norm: pids made constant.
norm() { sed -E -e 's/pid=[0-9]+/pid=PID/'; }

# ctl_home CTL: waits (10 s) for the socket file CTL; ssh binds CTL.RANDOM, links CTL to it
# and unlinks CTL.RANDOM, so the tables list the socket under that first name: through
# udsfs it must be in $U/unix and the kernel must have no socket of that name, on the
# kernel /proc/net/unix has it.
ctl_home() {
    local ctl=$1 i
    for i in $(seq 1 500); do
        [ -S "$ctl" ] && break
        sleep 0.02
    done
    [ -S "$ctl" ] || fail "$UDSFS_RUN_VIA: no socket file at $ctl 10 s after the master started: $(ls -la "${ctl%/*}")"
    if [ "$UDSFS_RUN_VIA" == udsfs ]; then
        awk -v p="$(tree_path "$ctl")." 'NR > 1 && index($8, p) == 1 { f = 1 } END { exit !f }' "$U/unix" ||
            fail "$U/unix lists no socket bound at $ctl.*: $(cat "$U/unix")"
        ! awk -v p="$ctl." 'NR > 1 && index($8, p) == 1 { f = 1 } END { exit !f }' /proc/net/unix ||
            fail "the kernel has a socket bound at $ctl.*: the master's socket was not a udsfs socket"
        ok "$ctl is a udsfs socket (in $U/unix as $(awk -v p="$(tree_path "$ctl")." 'index($8, p) == 1 { print $8 }' "$U/unix"), not in /proc/net/unix)"
    else
        awk -v p="$ctl." 'NR > 1 && index($8, p) == 1 { f = 1 } END { exit !f }' /proc/net/unix ||
            fail "/proc/net/unix lists no socket bound at $ctl.*"
        ok "$ctl is a kernel socket (UDSFS_RUN_VIA=kernel)"
    fi
}

# forget_group PID: PID (a master, not this script's child) has ended: its number is no
# longer one for the exit trap to kill (it may be another's by then).
forget_group() {
    local g kept=()
    for g in "${RUN_GROUPS[@]}"; do
        [ "$g" == "$1" ] || kept+=("$g")
    done
    RUN_GROUPS=(${kept[@]+"${kept[@]}"})
}

# fds_more PID BEFORE OP N: waits (10 s at most) until PID holds OP N descriptors more
# than BEFORE (OP a test(1) comparison); prints how many more it holds then.
fds_more() {
    local t0 n
    t0=$(now_ms)
    while :; do
        n=$(($(ls "/proc/$1/fd" | wc -l) - $2))
        [ "$n" "$3" "$4" ] && break
        [ $(($(now_ms) - t0)) -lt 10000 ] || break
        sleep 0.02
    done
    echo "$n"
}

# one_run MODE OUT DIR [FRONT]: the master with CTL at DIR/ctl and every check, on MODE's
# sockets (FRONT: the udsfs run front); answers in $TMP/OUT.out, files in $TMP/ssh-OUT.
one_run() {
    local mode=$1 name=$2 dir=$3 front=() d=$TMP/ssh-$2 out=$TMP/$2.out i rc pid pid2
    local t0
    t0=$(now_ms)
    [ -z "${4:-}" ] || front=(--front "$4")
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    local ctl=$dir/ctl pids=()
    # ssh CMD...: a mux client on CTL (through udsfs run with FRONT).
    mux() { via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -S "$ctl" "$@"; }
    run_cmd ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -S "$ctl"
    local mux_cmd=("${RUN_CMD[@]}")
    # An ssh-agent holding the key, which the master forwards (-A): for a session that
    # asks, the daemonized master connects to the agent's socket anew.
    local agent_sock=$dir/agent.sock
    serve AGENT "$agent_sock" "$d/agent.out" ${front[@]+"${front[@]}"} -- ssh-agent -D -a "$agent_sock"
    SSH_AUTH_SOCK=$agent_sock via ${front[@]+"${front[@]}"} -- timeout 20 ssh-add "$TMP/key" >"$out" 2>&1 || true
    rc=0
    SSH_AUTH_SOCK=$agent_sock via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -A -M -S "$ctl" -fN \
        -p "$PORT" root@127.0.0.1 >"$d/master.out" 2>&1 || rc=$?
    sed -i "s|$TMP|TMP|" "$out"
    echo "master -fN: status $rc $(cat "$d/master.out")" >>"$out"
    ctl_home "$ctl"
    pid=$(mux -O check x 2>&1 | sed -n 's/^Master running (pid=\([0-9]*\)).*/\1/p')
    [ -n "$pid" ] || fail "$name: -O check named no master pid: $(mux -O check x 2>&1)"
    RUN_GROUPS+=("$pid") # daemon(): a session of its own; killed whole on a failure
    {
        rc=0
        mux -O check x 2>&1 | norm || rc=$?
        echo "-O check: status $rc"

        rc=0
        mux x 'echo hi; echo err >&2; exit 3' >"$d/cmd.out" 2>"$d/cmd.err" || rc=$?
        echo "command: stdout [$(cat "$d/cmd.out")] stderr [$(cat "$d/cmd.err")] status $rc"

        echo "stdin from a pipe: [$(printf abc | mux x cat)]"
        echo "the agent forwarded: [$(mux -A x 'ssh-add -l | cut -d" " -f3' </dev/null 2>&1)]"
        echo "300000 bytes through cat: $(mux x cat <"$TMP/blob" | md5sum | cut -d' ' -f1) (sent $(md5sum <"$TMP/blob" | cut -d' ' -f1))"
        echo "stdin /dev/null: [$(mux x 'wc -c' </dev/null)]"

        rc=0
        mux x 'seq 1 20000; echo to-err >&2' >"$d/file.out" 2>"$d/file.err" </dev/null || rc=$?
        echo "stdout a file: $(wc -l <"$d/file.out") lines, md5 $(md5sum <"$d/file.out" | cut -d' ' -f1), stderr [$(cat "$d/file.err")] status $rc"

        for i in $(seq 1 20); do
            (
                r=0
                mux x "echo client $i; exit $((i % 4))" >"$d/par$i.out" 2>&1 </dev/null || r=$?
                echo "$r" >"$d/par$i.rc"
            ) &
            pids+=("$!")
        done
        wait "${pids[@]}"
        for i in $(seq 1 20); do
            echo "parallel client $i: [$(cat "$d/par$i.out")] status $(cat "$d/par$i.rc")"
        done

        rc=0
        via ${front[@]+"${front[@]}"} -- python3 -c "$SOCKOUT" timeout 30 ssh "${SSH_OPTS[@]}" -S "$ctl" x 'seq 1 20000; echo to-err >&2' || rc=$?
        echo "stdout and stderr a socketpair: python status $rc"

        rc=0
        mux -W "127.0.0.1:$PORT" x </dev/null 2>&1 | head -c 8 || rc=$?
        echo " <- -W 127.0.0.1:PORT (stdio forwarding): status $rc"

        rc=0
        mux -O forward -L "$dir/fwd.sock:127.0.0.1:$PORT" x 2>&1 || rc=$?
        echo "-O forward -L DIR/fwd.sock: status $rc"
        (expect_socket_home "$dir/fwd.sock") >"$d/guard.out" 2>&1 || echo "guard failed: $(cat "$d/guard.out")"
        rc=0
        via ${front[@]+"${front[@]}"} -- python3 -c "$BANNER" "$dir/fwd.sock" 2>&1 || rc=$?
        echo "banner through the forwarded socket: status $rc"
        rc=0
        mux -O cancel -L "$dir/fwd.sock:127.0.0.1:$PORT" x 2>&1 || rc=$?
        echo "-O cancel: status $rc"
        [ -e "$dir/fwd.sock" ] && echo "fwd.sock still there" || echo "fwd.sock removed"

        chmod 755 "$dir" && chmod 666 "$ctl"
        rc=0
        as_uid 65534 env HOME=/ "${mux_cmd[@]}" -O check -p 9 127.0.0.1 </dev/null 2>&1 | norm || rc=$?
        echo "uid 65534 on a 0666 CTL: status $rc"
        # A mux client in a network namespace of its own (`unshare -n`, as root): its
        # stdin, stdout and stderr are passed to the master as on the kernel ("hi",
        # status 3). Before the fd channel's path socket (src/fdchannel.rs) it printed,
        # through the library and the seccomp front alike,
        #   udsfs-preload[N]: fd channel @udsfs-fdpass-N: not answered by the daemon's uid 0: refused
        #   mm_send_fd: sendmsg(0): Connection refused
        #   mux_client_request_session: send fds failed
        # and status 255: the channel's abstract name is in the daemon's network namespace.
        rc=0
        unshare -n "${mux_cmd[@]}" x 'echo hi; exit 3' </dev/null 2>&1 || rc=$?
        echo "a client in a network namespace of its own: status $rc"

        # ControlPersist: the first ssh binds CTL2, forks, and its child goes on as the
        # master while the parent is the command's mux client.
        rc=0
        via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -o ControlMaster=auto -o ControlPersist=60 \
            -S "$dir/ctl2" -p "$PORT" root@127.0.0.1 'echo first' </dev/null 2>&1 || rc=$?
        echo "ControlPersist first command: status $rc"
        rc=0
        via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -o ControlMaster=auto -o ControlPersist=60 \
            -S "$dir/ctl2" -p "$PORT" root@127.0.0.1 'echo second' </dev/null 2>&1 || rc=$?
        echo "ControlPersist second command: status $rc"
        pid2=$(via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -S "$dir/ctl2" -O check x 2>&1 | sed -n 's/^Master running (pid=\([0-9]*\)).*/\1/p')
        echo "ControlPersist master: ${pid2:+running}"
        [ -z "$pid2" ] || RUN_GROUPS+=("$pid2") # (ends 60 s idle; at once on a failure)
        rc=0
        via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -S "$dir/ctl2" -O stop x 2>&1 || rc=$?
        echo "-O stop: status $rc"
        if [ -n "$pid2" ] && ended_within "$pid2" 10000; then
            forget_group "$pid2"
            echo "ControlPersist master ended"
        else
            echo "ControlPersist master still runs 10 s after -O stop"
        fi
        [ -e "$dir/ctl2" ] && echo "CTL2 still there" || echo "CTL2 removed"

        # A client killed while its command runs: the master sees its connection end
        # and closes that socket and the passed stdout at once (stdin /dev/null it closed
        # at its end; the passed stderr it keeps until the remote command ends).
        local before kid more
        before=$(ls "/proc/$pid/fd" | wc -l)
        # (no timeout(1) here: it would put ssh in a process group of its own)
        run_cmd ${front[@]+"${front[@]}"} -- ssh "${SSH_OPTS[@]}" -S "$ctl" x 'sleep 8'
        setsid "${RUN_CMD[@]}" </dev/null >/dev/null 2>&1 &
        kid=$!
        more=$(fds_more "$pid" "$before" -ge 3)
        [ "$more" -lt 3 ] || more="3 or more" # (4 until it has read stdin's EOF)
        if [ "$mode" == udsfs ]; then
            # The mount's connections now, for the log: with UDSFS_LANES=on the library's
            # mux connection is usually laned (fd passing and all), but not always: a
            # lane is asked for, and an ask refused while the other end is parked in the
            # daemon leaves the connection without one (docs/LANE.md, "Asks refused under
            # load"; seen once with two runs at once at load 25).
            say "$name: lanes of the connections while a session is open: $(cat "$U"/sock/*/status 2>/dev/null |
                grep -o '^lane=.*' | sort | uniq -c | tr -s ' \n' ' ')" >>"$d/guard.out"
        fi
        echo "a client's session open: the master holds $more descriptors more than before it"
        kill -KILL -- "-$kid"
        wait "$kid" 2>/dev/null || true
        more=$(fds_more "$pid" "$before" -le 1)
        echo "that client killed: the master holds $more descriptors more than before it"

        rc=0
        mux -O exit x 2>&1 | norm || rc=$?
        echo "-O exit: status $rc"
        if ended_within "$pid" 10000; then
            forget_group "$pid"
            echo "master ended"
        else
            echo "master still runs 10 s after -O exit"
        fi
        for i in $(seq 1 250); do
            [ -e "$ctl" ] || break
            sleep 0.02
        done
        [ -e "$ctl" ] && echo "CTL still there" || echo "CTL removed"
        rc=0
        mux -O check x 2>&1 | sed "s|$dir|DIR|" || rc=$?
        echo "-O check after exit: status $rc"
    } >>"$out" 2>&1 || true
    kill "$AGENT" 2>/dev/null || true
    ended_within "$AGENT" 10000 || fail "$name: ssh-agent did not end on SIGTERM"
    reap "$AGENT"
    forget_group "$AGENT"
    cat "$d/guard.out"
    ! grep -q '^FAIL' "$d/guard.out" || fail "$name: $(grep '^FAIL' "$d/guard.out")"
    show_answers "$name" "$out" "$TMP/sshd.log"
    say "$name pass: $(($(now_ms) - t0)) ms"
}

# route_run MODE DIR [--route DIR]: ControlPath DIR/cm-%C, as ssh_config's usual
# ~/.ssh/cm-%C, DIR a kernel directory (a --route through udsfs): the master, a command,
# -O exit; answers appended to $TMP/route-MODE.out.
route_run() {
    local mode=$1 dir=$2 out=$TMP/route-$1.out rc=0 p
    shift 2
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir"
    local cm=(-S "$dir/cm-%C" -p "$PORT" root@127.0.0.1)
    via "$@" -- timeout 30 ssh "${SSH_OPTS[@]}" -M -fN "${cm[@]}" >>"$out" 2>&1 || rc=$?
    echo "routed master -fN: status $rc" >>"$out"
    if [ "$mode" == udsfs ]; then
        awk -v p="$(tree_path "$dir")/cm-" 'NR > 1 && index($8, p) == 1 { f = 1 } END { exit !f }' "$U/unix" ||
            fail "$U/unix lists no socket bound at $dir/cm-*: $(cat "$U/unix")"
        ! grep -q " $dir/cm-" /proc/net/unix || fail "the kernel has a socket bound at $dir/cm-*: the routed master's socket was not a udsfs socket"
        ok "the routed master's $dir/cm-* is a udsfs socket (in $U/unix, not in /proc/net/unix)"
    fi
    for p in "$dir"/cm-*; do
        [ -S "$p" ] && echo "${p##*/} is a socket" || echo "${p##*/} is no socket"
    done >>"$out"
    rc=0
    via "$@" -- timeout 30 ssh "${SSH_OPTS[@]}" "${cm[@]}" 'echo hi; exit 3' >>"$out" 2>&1 </dev/null || rc=$?
    echo "routed command: status $rc" >>"$out"
    rc=0
    via "$@" -- timeout 30 ssh "${SSH_OPTS[@]}" -O exit "${cm[@]}" >>"$out" 2>&1 || rc=$?
    echo "routed -O exit: status $rc" >>"$out"
    for p in $(seq 1 250); do
        [ -z "$(ls "$dir")" ] && break
        sleep 0.02
    done
    echo "left in the directory: [$(ls "$dir")]" >>"$out"
}

one_run kernel kernel "$TMP/k"
kernel_said 'command: stdout \[hi\] stderr \[err\] status 3' "the kernel run's command did not answer as meant"
kernel_said 'master ended' "the kernel run's master did not end on -O exit"
kernel_said 'muxclient: master hello exchange failed.*' "the kernel run's master did not refuse uid 65534"
kernel_said 'the agent forwarded: \[udsfs-test\]' "the kernel run's master did not forward the agent"
kernel_said 'status 0 read 108901 stdout in order to-err' "the kernel run's socketpair client did not read seq's output in order and to-err"
kernel_said "b'SSH-2.0-'" "the kernel run read no banner through the forwarded socket"
kernel_said 'that client killed: the master holds 1 descriptors more than before it' \
    "the kernel run's master did not close a killed client's socket and stdout at once"
one_run udsfs udsfs "$MNT/lib"
same_answers "ssh ControlMaster (the library)" tail -n 20 "$TMP/sshd.log"
ok "ssh ControlMaster and its mux clients through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
one_run udsfs seccomp "$MNT/seccomp" seccomp
if ! diff "$TMP/kernel.out" "$TMP/seccomp.out" >&2; then
    fail "ssh ControlMaster under --front seccomp answered differently from the kernel (< kernel, > seccomp)"
fi
ok "ssh ControlMaster and its mux clients through udsfs run --front seccomp: the same answers as on kernel sockets"
route_run kernel "$TMP/kernel-route"
grep -qx "routed command: status 3" "$TMP/route-kernel.out" || fail "the kernel run's routed command did not answer as meant"
route_run udsfs "$TMP/route" --route "$TMP/route"
sed 's/^/    /' "$TMP/route-udsfs.out"
diff "$TMP/route-kernel.out" "$TMP/route-udsfs.out" >&2 ||
    fail "ssh ControlMaster with a routed ControlPath answered differently from the kernel (< kernel, > udsfs)"
ok "ssh ControlMaster with its ControlPath in a --route directory: the same answers as on kernel sockets"

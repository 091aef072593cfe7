#!/usr/bin/env bash
# run_ssh_mux.sh: OpenSSH connection multiplexing (ControlMaster). `ssh -M -S CTL -fN`
# authenticates to a test sshd of its own (TCP on 127.0.0.1, on the kernel), daemonizes
# and listens on the unix socket CTL; every later `ssh -S CTL` is a mux client that
# connects to it, passes its stdin, stdout and stderr (pipes, a file, /dev/null) over
# SCM_RIGHTS, and the master checks its peer's uid (getpeereid), writes the remote
# command's output straight into the passed descriptors and sends its exit status back.
# Checked: `-O check`; a command's stdout, stderr and exit status 3; stdin from a pipe
# and 300 KB through `cat`; 20 clients at once; a client whose stdout is a file and one
# whose stdin is /dev/null; `-O exit` (the master ends, CTL removed); CTL a udsfs socket.
# On kernel sockets (CTL in a plain directory), then master and clients through `udsfs
# run --mount $MNT` (CTL in the mount), then again under `--front seccomp`: the same
# answers as on the kernel.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd ssh openssh-client ssh-keygen openssh-client python3 python3
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
for _ in $(seq 1 500); do
    grep -q "Server listening" "$TMP/sshd.log" && break
    proc_alive "$SSHD" || fail "sshd ended: $(cat "$TMP/sshd.log")"
    sleep 0.02
done
grep -q "Server listening" "$TMP/sshd.log" || fail "sshd did not listen within 10 s: $(cat "$TMP/sshd.log")"
SSH_OPTS=(-F /dev/null -i "$TMP/key" -o UserKnownHostsFile="$TMP/known_hosts"
    -o StrictHostKeyChecking=accept-new -o BatchMode=yes -o LogLevel=ERROR)
head -c 300000 /dev/urandom >"$TMP/blob"

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

# one_run MODE OUT DIR [FRONT]: the master with CTL at DIR/ctl and every check, on MODE's
# sockets (FRONT: the udsfs run front); answers in $TMP/OUT.out, files in $TMP/ssh-OUT.
one_run() {
    local mode=$1 name=$2 dir=$3 front=() d=$TMP/ssh-$2 out=$TMP/$2.out i rc pid
    local t0
    t0=$(now_ms)
    [ -z "${4:-}" ] || front=(--front "$4")
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    local ctl=$dir/ctl pids=()
    # ssh CMD...: a mux client on CTL (through udsfs run with FRONT).
    mux() { via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -S "$ctl" "$@"; }
    rc=0
    via ${front[@]+"${front[@]}"} -- timeout 30 ssh "${SSH_OPTS[@]}" -M -S "$ctl" -fN -p "$PORT" root@127.0.0.1 \
        >"$d/master.out" 2>&1 || rc=$?
    echo "master -fN: status $rc $(cat "$d/master.out")" >"$out"
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
        mux -O exit x 2>&1 | norm || rc=$?
        echo "-O exit: status $rc"
        if ended_within "$pid" 10000; then echo "master ended"; else echo "master still runs 10 s after -O exit"; fi
        for i in $(seq 1 250); do
            [ -e "$ctl" ] || break
            sleep 0.02
        done
        [ -e "$ctl" ] && echo "CTL still there" || echo "CTL removed"
        rc=0
        mux -O check x 2>&1 | sed "s|$dir|DIR|" || rc=$?
        echo "-O check after exit: status $rc"
    } >>"$out" 2>&1 || true
    show_answers "$name" "$out" "$TMP/sshd.log"
    say "$name pass: $(($(now_ms) - t0)) ms"
}

one_run kernel kernel "$TMP/k"
kernel_said 'command: stdout \[hi\] stderr \[err\] status 3' "the kernel run's command did not answer as meant"
kernel_said 'master ended' "the kernel run's master did not end on -O exit"
one_run udsfs udsfs "$MNT/lib"
same_answers "ssh ControlMaster (the library)" tail -n 20 "$TMP/sshd.log"
ok "ssh ControlMaster and its mux clients through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
one_run udsfs seccomp "$MNT/seccomp" seccomp
if ! diff "$TMP/kernel.out" "$TMP/seccomp.out" >&2; then
    fail "ssh ControlMaster under --front seccomp answered differently from the kernel (< kernel, > seccomp)"
fi
ok "ssh ControlMaster and its mux clients through udsfs run --front seccomp: the same answers as on kernel sockets"

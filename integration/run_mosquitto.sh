#!/usr/bin/env bash
# run_mosquitto.sh: the mosquitto MQTT broker (package mosquitto) as uid 61001 on a unix
# stream socket (`listener 0 SOCK`, anonymous clients), in the foreground, and its clients
# (package mosquitto-clients: mosquitto_pub, mosquitto_sub with --unix SOCK) as 61001:
# retained messages (two topics, one cleared by an empty retained one), QoS 0/1/2 (the
# QoS each message came with), wildcards (+ and # at once: one copy of a message both
# match), a subscriber that gets 500 lines while mosquitto_pub -l sends them, a 1 MiB
# random payload file (-f) that must come back equal, a persistent session (-c -i) that
# gets the QoS 1 messages sent while it was away, will messages (a client that
# disconnects cleanly sends none, one killed with SIGKILL sends its will), $SYS (the
# broker's version; a `#` subscriber gets the retained topics but no $SYS topic: their
# values vary). Ten subscribers are held open at once while the udsfs runs count the
# sockets whose status says lane=direct: with lanes (the mount's default) the library's
# run must have laned both ends of each connection; with UDSFS_LANES=off (tests/
# integration.rs's lanes_off pass) none; under --front seccomp none either (the
# supervisor carries the programs, not the library). Three runs: on kernel sockets, then
# the broker and every client through `udsfs run` with the socket in the mount, then
# under `--front seccomp`: the same answers each time, no error or warning in the
# broker's log, the broker's exit 0 on SIGTERM, no processes left.
UDSFS_MOUNT_ARGS=(--allow-other) # the broker and its clients run as uid 61001
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd mosquitto mosquitto mosquitto_pub mosquitto-clients mosquitto_sub mosquitto-clients \
    setpriv util-linux

# uid 61001 reaches the files below $TMP.
chmod 755 "$TMP"
mkdir -p "$TMP/files"
head -c 1048576 /dev/urandom >"$TMP/files/big"
chmod 755 "$TMP/files"
chmod 644 "$TMP/files"/*

# How many subscribers are held open at once while the lanes are counted.
HELD=10

# one_run NAME MODE DIR [RUN OPTIONS...]: mosquitto with its socket DIR/mqtt.sock on
# MODE's sockets (udsfs: each program through `udsfs run` with the RUN OPTIONS); the
# answers go to $TMP/NAME.out. Through udsfs, it also counts the lanes of the $HELD
# subscribers' connections (into D/laned) while they are held open.
one_run() {
    local name=$1 mode=$2 dir=$3 d=$TMP/mq-$1 out=$TMP/$1.out
    run_on "$mode" "${@:4}"
    local sock=$dir/mqtt.sock
    dirs_of 61001 "$d" "$dir"
    cat >"$d/mosquitto.conf" <<EOF
listener 0 $sock
allow_anonymous true
persistence false
log_dest stderr
log_type error
log_type warning
EOF
    chmod 644 "$d/mosquitto.conf"
    local as61001=(setpriv --reuid=61001 --regid=61001 --clear-groups)
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" mosquitto -c "$d/mosquitto.conf"
    start_bg BROKER "${RUN_CMD[@]}" >"$d/mosquitto.log" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local u=(--unix "$sock")
    # pub ARGS, sub ARGS: mosquitto_pub, mosquitto_sub with ARGS; their output, then
    # their exit status.
    pub() { ask "pub $*" "${as61001[@]}" mosquitto_pub "${u[@]}" "$@"; }
    sub() { ask "sub $*" "${as61001[@]}" mosquitto_sub "${u[@]}" "$@"; }
    # sub_bg VAR OUT READY ARGS...: a mosquitto_sub with ARGS in the background (VAR its
    # PID, its output in OUT) once its output holds the line READY: a retained message
    # its subscriptions match, sent by the broker only after it made them all (one
    # SUBSCRIBE), so what is published from then on reaches it.
    sub_bg() {
        local _var=$1 _out=$2 _ready=$3 i
        shift 3
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" timeout 60 mosquitto_sub "${u[@]}" "$@"
        start_bg "$_var" "${RUN_CMD[@]}" >"$_out" 2>&1
        for i in $(seq 1 1000); do
            grep -qx -- "$_ready" "$_out" && return 0
            proc_alive "${!_var}" || break
            sleep 0.02
        done
        fail "$name: mosquitto_sub $* did not get its retained '$_ready' within 20 s: $(cat "$_out")"
    }
    # ended PID WHAT [OUT [S]]: WHAT's exit status once PID ended (S seconds at most,
    # 20 if not given; else the failure says how many lines it wrote to OUT, and its
    # last ones).
    ended() {
        local s=${4:-20}
        ended_within "$1" $((s * 1000)) ||
            fail "$name: $2 did not end within $s s${3:+: $(wc -l <"$3") lines out, the last: $(tail -n 3 "$3" | tr '\n' '|')}"
        reap "$1"
        echo "$2: exit $REAPED_STATUS"
    }
    local p
    {
        # The programs started in this block (a subshell: the script's exit trap does
        # not know them) go with it when a step fails.
        trap '_block_status=$?; set +e; [ $_block_status -eq 0 ] || _run_kill_groups' EXIT
        echo "socket: $(stat -c '%A %u:%g' "$sock")"
        echo "-- retained"
        pub -t r/a -m hello -r
        pub -t r/b -m world -r -q 2
        sub -t 'r/#' -v -C 2 | sort
        pub -t r/a -r -n
        sub -t 'r/#' -F '%t %r %p' -C 1
        echo "-- qos 0/1/2 (topic, qos received, payload)"
        pub -t q/ready -m ready -r -q 1
        sub_bg SUB "$d/q.out" "q/ready q1 ready" -t 'q/#' -q 2 -F '%t q%q %p' -C 7
        for p in 0 1 2; do pub -t "q/$p" -q "$p" -m "sent with qos $p"; done
        sub_bg SUB1 "$d/q1.out" "q/ready q1 ready" -t 'q/#' -q 1 -F '%t q%q %p' -C 4
        for p in 0 1 2; do pub -t "q/$p" -q "$p" -m "again with qos $p"; done
        ended "$SUB" "qos 2 subscriber" "$d/q.out"
        sort "$d/q.out"
        ended "$SUB1" "qos 1 subscriber" "$d/q1.out"
        sort "$d/q1.out"
        echo "-- wildcards"
        pub -t w/ready/x -m ready -r -q 1
        sub_bg SUB "$d/w.out" "w/ready/x ready" -t 'w/+/x' -t 'w/2/#' -v -C 5
        for p in w/1/x w/2/y w/3/y w/2/x w/1/x/deeper w/2/z/deeper w; do pub -t "$p" -q 1 -m "to $p"; done
        ended "$SUB" "wildcard subscriber" "$d/w.out"
        cat "$d/w.out"
        echo "-- 500 lines"
        pub -t n/ready -m ready -r -q 1
        sub_bg SUB "$d/n.out" "ready" -t 'n/#' -q 1 -C 501
        local t0 rc=0
        t0=$(now_ms)
        # (60 s, not `pub`'s 20: through the supervisor, --front seccomp, on one FUSE
        # worker at load ~15, 500 QoS 1 messages took 9 s)
        seq 1 500 | via ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" timeout 60 \
            mosquitto_pub "${u[@]}" -t n/lines -q 1 -l 2>&1 || rc=$?
        echo "pub -t n/lines -q 1 -l: exit $rc"
        ended "$SUB" "500-line subscriber" "$d/n.out" 60
        echo "$(($(now_ms) - t0))" >"$d/n.ms"
        echo "lines after ready: $(tail -n +2 "$d/n.out" | wc -l), equal to seq 1 500: $(tail -n +2 "$d/n.out" | cmp - <(seq 1 500) 2>&1 && echo yes)"
        echo "-- 1 MiB payload"
        pub -t big/ready -m ready -r -q 1
        sub_bg SUB "$d/big.out" "ready" -t 'big/#' -q 1 -C 2
        pub -t big/file -q 1 -f "$TMP/files/big"
        ended "$SUB" "1 MiB subscriber" "$d/big.out"
        echo "1 MiB payload back: $(cmp -i 6:0 -n 1048576 "$d/big.out" "$TMP/files/big" 2>&1 && echo equal), $(wc -c <"$d/big.out") bytes out"
        echo "-- persistent session"
        sub -c -i h119-session -q 1 -t s/x -E
        pub -t s/x -q 1 -m "queued 1"
        pub -t s/x -q 1 -m "queued 2"
        sub -c -i h119-session -q 1 -t s/x -v -C 2
        echo "-- will messages"
        pub -t will/ready -m ready -r -q 1
        sub_bg WATCH "$d/will.out" "will/ready ready" -t 'will/#' -v -C 2
        sub -t will/ready -C 1 --will-topic will/clean --will-payload "clean never sent" --will-qos 1
        sub_bg WILLING "$d/willing.out" "ready" -t will/ready -C 9 --will-topic will/killed --will-payload "killed, will sent" --will-qos 1
        # (bash says so on stderr: that line is dropped below)
        kill_session "$WILLING"
        ended "$WILLING" "client killed"
        ended "$WATCH" "will watcher" "$d/will.out"
        cat "$d/will.out"
        echo "-- \$SYS"
        sub -t '$SYS/broker/version' -v -C 1
        echo "# (every retained topic, no \$SYS one):"
        sub -t '#' -v -C 6 | sort
        echo "-- $HELD subscribers held open"
        pub -t hold/ready -m ready -r -q 1
        local held=() i
        for i in $(seq 1 "$HELD"); do
            sub_bg SUB "$d/hold$i.out" "hold/ready ready" -t 'hold/#' -q 1 -v -C 2
            held+=("$SUB")
        done
        if [ "$mode" == udsfs ]; then
            # both ends of each connection (the sockets named mqtt.sock: each client's
            # libmosquitto has a socketpair of its own too; the block's a subshell: the
            # count goes out in a file)
            held_lanes "$d/laned" "${held[0]}" $((2 * HELD)) /mqtt.sock
        fi
        pub -t hold/go -q 1 -m go
        for i in $(seq 1 "$HELD"); do
            ended "${held[i - 1]}" "held subscriber $i" "$d/hold$i.out"
            cat "$d/hold$i.out"
        done
    } 2>&1 | sed -e "s#$sock#SOCK#g; s#$d#D#g" -e '/ Killed  *setsid /d' >"$out" || true
    kill -TERM "$BROKER" 2>/dev/null || true
    ended_within "$BROKER" 10000 || fail "$name: mosquitto did not end within 10 s of SIGTERM: $(tail -5 "$d/mosquitto.log")"
    reap "$BROKER"
    echo "mosquitto after SIGTERM: exit $REAPED_STATUS" >>"$out"
    echo "mosquitto's errors and warnings: $(cat "$d/mosquitto.log")" >>"$out"
    session_left "$BROKER" 5 >>"$out"
    show_answers "$name" "$out" "$d/mosquitto.log" "$d"/*.out
    say "$name run: the 500 lines took $(cat "$d/n.ms" 2>/dev/null || echo ?) ms"
}

timed_run kernel kernel "$TMP/k"
kernel_said 'r/b 1 world' "the kernel run's retained r/a was not cleared"
kernel_said 'q/2 q2 sent with qos 2' "the kernel run's QoS 2 message did not come with QoS 2"
kernel_said 'lines after ready: 500, equal to seq 1 500: yes' "the kernel run's 500 lines did not all come in order"
kernel_said '1 MiB payload back: equal, 1048583 bytes out' "the kernel run's 1 MiB payload did not come back equal"
kernel_said 'will/killed killed, will sent' "the kernel run's killed client's will did not arrive"
kernel_said 'held subscriber 10: exit 0' "the kernel run's held subscribers did not all get their message"
kernel_said 'mosquitto after SIGTERM: exit 0' "the kernel run's mosquitto did not exit 0 on SIGTERM"
kernel_said "mosquitto's errors and warnings: " "the kernel run's mosquitto logged errors or warnings"
kernel_said 'processes left: none' "the kernel run left processes"

udsfs_runs mosquitto mq $((2 * HELD)) "the $HELD subscribers' connections"

#!/usr/bin/env bash
# run_pulseaudio.sh: PulseAudio 16 (packages pulseaudio, pulseaudio-utils; no system or
# user configuration: `pulseaudio -n -F config.pa` with HOME and XDG dirs in a scratch
# directory) as uid 61001, with a null sink and module-native-protocol-unix on one socket,
# auth-anonymous=0 and auth-cookie-enabled=0: a client is let in only when the
# SCM_CREDENTIALS it sends at auth (read with SO_PASSCRED, which the server sets on the
# accepted socket) name the server's own uid. Clients of the same uid then share memory:
# the server and client pass memfd pools over the socket (SCM_RIGHTS) and the server
# hands the client an srbchannel (a ring buffer in a memfd, and its eventfd wakeups).
# Clients: pactl info, list, load-module and unload-module, stat; pacat --playback of
# 0.6 s of random frames to the null sink while parec records its monitor (the sound
# found in the recording: integration/pa_sound.py), with shm on and then off (a client
# config with `enable-shm = no`: the audio then travels in the socket's bytes), paplay of
# a WAV; 6 clients at once; pactl info as uid 61002 and as root (refused: their
# credentials are not the server's uid); `pactl exit` ends it: exit 0, no process left,
# and the server's log shows whom it let in and what memory it negotiated. Three runs:
# on kernel sockets, then the server and every client through `udsfs run` with the
# socket in the mount, then the same under `--front seccomp`: the same answers each time
# (volatile parts: client indexes, the cookie, the sinks' states, stat's counts).
UDSFS_MOUNT_ARGS=(--allow-other) # the server and its clients run as uid 61001
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd pulseaudio pulseaudio pactl pulseaudio-utils pacat pulseaudio-utils \
    parec pulseaudio-utils paplay pulseaudio-utils setpriv util-linux
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"

# uid 61001 reaches the files below $TMP.
chmod 755 "$TMP"
python3 "$LIB_DIR/pa_sound.py" make "$TMP/play.raw" "$TMP/play.wav"
chmod 644 "$TMP/play.raw" "$TMP/play.wav"

# one_run NAME MODE DIR [RUN OPTIONS...]: PulseAudio with its socket DIR/native and its
# home $TMP/pa-NAME/home, on MODE's sockets (udsfs: each program through `udsfs run` with
# the RUN OPTIONS); the answers go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 dir=$3 d=$TMP/pa-$1 out=$TMP/$1.out
    run_on "$mode" "${@:4}"
    local sock=$dir/native
    dirs_of 61001 "$d/home" "$d/rec" "$dir"
    dirs_of 61002 "$d/home2"
    cat >"$d/config.pa" <<EOF2
load-module module-null-sink sink_name=null
load-module module-native-protocol-unix socket=$sock auth-anonymous=0 auth-cookie-enabled=0
EOF2
    printf 'enable-shm = no\n' >"$d/noshm.conf"
    # env HOME: a user's own HOME, XDG dirs and this run's server (not env -i: `udsfs
    # run`'s library travels in LD_PRELOAD).
    local env1=(env -u DBUS_SESSION_BUS_ADDRESS -u PULSE_COOKIE -u PULSE_CLIENTCONFIG
        XDG_RUNTIME_DIR="$d/home/rt" XDG_CONFIG_HOME="$d/home/cfg" PULSE_SERVER="unix:$sock")
    local as61001=(setpriv --reuid=61001 --regid=61001 --clear-groups "${env1[@]}" HOME="$d/home")
    local as61002=(setpriv --reuid=61002 --regid=61002 --clear-groups "${env1[@]}" HOME="$d/home2"
        XDG_RUNTIME_DIR="$d/home2/rt" XDG_CONFIG_HOME="$d/home2/cfg")
    local asroot=("${env1[@]}" HOME="$d/home2" XDG_RUNTIME_DIR="$d/home2/rootrt" XDG_CONFIG_HOME="$d/home2/rootcfg")
    # -vvvv: the log says whom auth let in and what memory each connection negotiated.
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" pulseaudio -n --daemonize=no \
        --exit-idle-time=-1 --use-pid-file=no --log-target=stderr -vvvv -F "$d/config.pa"
    start_bg PULSE "${RUN_CMD[@]}" >"$d/pulse.log" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local raw=(--raw --format=s16le --rate=44100 --channels=2)
    # sound WHAT [ENV...]: parec records the null sink's monitor while pacat plays
    # play.raw to the null sink (both as 61001, with ENV), then what was heard.
    sound() {
        local what=$1 rec=$d/rec/$1.raw rc=0 parec_pid i outputs
        shift
        outputs=$(grep -c 'Created output .* on null.monitor' "$d/pulse.log" || true)
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" "$@" \
            parec "${raw[@]}" --latency-msec=20 -d null.monitor "$rec"
        start_bg REC "${RUN_CMD[@]}" >"$d/rec/$what.out" 2>&1
        # parec's stream exists once the server logs one more output of the monitor
        # (asking the server would be a connection more, counted below).
        for i in $(seq 1 500); do
            [ "$(grep -c 'Created output .* on null.monitor' "$d/pulse.log")" -gt "$outputs" ] && break
            sleep 0.02
        done
        v "${as61001[@]}" "$@" pacat --playback "${raw[@]}" --latency-msec=100 -d null "$TMP/play.raw" 2>&1 || rc=$?
        echo "$what playback: exit $rc"
        # the null sink renders in real time: the drained sound reaches the monitor
        # within its latency. Then parec alone is told to stop (`udsfs run` passes on
        # its exit status).
        sleep 0.3
        parec_pid=$(ps -e -o pid=,sid=,comm= | awk -v s="$REC" '$2 == s && $3 == "parec" { print $1 }')
        [ -n "$parec_pid" ] && kill -TERM "$parec_pid"
        rc=0
        wait "$REC" || rc=$?
        echo "$what parec, told to stop: exit $rc"
        cat "$d/rec/$what.out"
        echo "$what recording: $(python3 "$LIB_DIR/pa_sound.py" heard "$TMP/play.raw" "$rec")"
    }
    {
        echo "socket: $(stat -L -c '%A %U:%G' "$sock")"
        ask "info" "${as61001[@]}" pactl info
        ask "sinks" "${as61001[@]}" pactl list short sinks
        ask "sources" "${as61001[@]}" pactl list short sources
        local extra
        extra=$(v "${as61001[@]}" pactl load-module module-null-sink sink_name=extra 2>&1) || echo "load-module: failed: $extra"
        echo "load-module: index ${extra:+given}"
        ask "sinks with extra" "${as61001[@]}" pactl list short sinks
        ask "unload-module" "${as61001[@]}" pactl unload-module "$extra"
        ask "sinks after unload" "${as61001[@]}" pactl list short sinks
        sound shm
        sound noshm PULSE_CLIENTCONFIG="$d/noshm.conf"
        ask "paplay" "${as61001[@]}" paplay -d null "$TMP/play.wav"
        ask "stat" "${as61001[@]}" pactl stat
        # 6 clients at once: three infos, three playbacks (one without shm).
        local pids=() p
        for p in 1 2 3; do
            v "${as61001[@]}" pactl info >"$d/many$p.out" 2>&1 &
            pids+=($!)
        done
        v "${as61001[@]}" pacat --playback "${raw[@]}" --latency-msec=100 -d null "$TMP/play.raw" >"$d/many4.out" 2>&1 &
        pids+=($!)
        v "${as61001[@]}" PULSE_CLIENTCONFIG="$d/noshm.conf" pacat --playback "${raw[@]}" --latency-msec=100 -d null "$TMP/play.raw" >"$d/many5.out" 2>&1 &
        pids+=($!)
        v "${as61001[@]}" paplay -d null "$TMP/play.wav" >"$d/many6.out" 2>&1 &
        pids+=($!)
        exits "${pids[@]}"
        echo "6 clients at once: exits $EXITS; infos alike: $(grep -h '^Server Version' "$d"/many[123].out | uniq -c | sed 's/^ *//')"
        # refused: their credentials are not the server's uid (auth-cookie-enabled=0).
        ask "info as 61002" "${as61002[@]}" pactl info
        ask "info as root" "${asroot[@]}" pactl info
        ask "exit" "${as61001[@]}" pactl exit
    } 2>&1 | sed -e "s#$d#D#g; s#$dir#S#g" \
        -e 's/^\(Client Index\|Cookie\): .*/\1: N/' \
        -e 's/\b\(IDLE\|SUSPENDED\|RUNNING\)$/STATE/' \
        -e 's/^\(Currently in use\|Allocated during whole lifetime\|Sample cache size\): .*/\1: N/' >"$out" || true
    # a server that did not end was told nothing or let nobody in: the answers say why.
    ended_within "$PULSE" 15000 || {
        sed 's/^/    /' "$out" >&2
        fail "$name: pulseaudio did not end within 15 s of pactl exit (its answers above)"
    }
    exit_status "$out" pulseaudio "$PULSE" 0 "$d/pulse.log"
    {
        # the server's own account of the connections, from its log.
        local l="$d/pulse.log"
        echo "let in (uid 61001): $(grep -c 'Got credentials: uid=61001 gid=61001 success=1' "$l")"
        echo "refused (uid 61002): $(grep -c 'Got credentials: uid=61002 gid=61002 success=0' "$l")"
        echo "refused (root): $(grep -c 'Got credentials: uid=0 gid=0 success=0' "$l")"
        echo "shared memfd negotiated: $(grep -c 'Negotiated SHM type: shared memfd' "$l")"
        echo "no SHM negotiated: $(grep -c 'Negotiated SHM: no' "$l")"
        echo "srbchannel enabled: $(grep -c 'Client enabled srbchannel' "$l")"
        echo "access denied: $(grep -c 'Denied access to client with invalid authentication data' "$l")"
        session_left "$PULSE" 5
        echo "socket after exit: $(name_gone "$sock")"
    } >>"$out"
    show_answers "$name" "$out" "$d/pulse.log"
}

# same_as_kernel_run NAME: run NAME's answers are the kernel run's.
same_as_kernel_run() {
    if ! diff "$TMP/kernel.out" "$TMP/$1.out" >"$TMP/diff"; then
        cat "$TMP/diff" >&2
        grep -E '^[EW]:' "$TMP/pa-$1/pulse.log" | tail -n 20 >&2
        fail "PulseAudio's $1 run answered differently from the kernel (< kernel, > $1)"
    fi
    ok "PulseAudio and its clients, $1 run: the same $(wc -l <"$TMP/$1.out") answers as on kernel sockets"
}

one_run kernel kernel "$TMP/k"
kernel_said 'info: exit 0' "the kernel run's pactl info failed"
kernel_said 'shm recording: heard' "the kernel run's recording (shm) did not hold the sound played"
kernel_said 'noshm recording: heard' "the kernel run's recording (no shm) did not hold the sound played"
kernel_said 'paplay: exit 0' "the kernel run's paplay failed"
kernel_said '6 clients at once: exits 0 0 0 0 0 0; infos alike: 3 Server Version: .*' "the kernel run's 6 clients did not all succeed"
kernel_said 'Connection failure: Access denied' "the kernel run's other users were not refused"
kernel_said 'info as 61002: exit 1' "the kernel run's uid 61002 was not refused"
kernel_said 'refused (uid 61002): 1' "the kernel run's server did not log uid 61002's credentials"
kernel_said 'shared memfd negotiated: [1-9][0-9]*' "the kernel run negotiated no shared memfd"
kernel_said 'no SHM negotiated: [1-9][0-9]*' "the kernel run's no-shm clients negotiated shm"
kernel_said 'srbchannel enabled: [1-9][0-9]*' "the kernel run enabled no srbchannel"
kernel_said 'pulseaudio exit status: 0' "PulseAudio did not exit 0 on pactl exit on the kernel"
kernel_said 'processes left: none' "the kernel run left processes"

one_run udsfs udsfs "$MNT/pa"
same_as_kernel_run udsfs
one_run seccomp udsfs "$MNT/seccomp" --front seccomp
same_as_kernel_run seccomp

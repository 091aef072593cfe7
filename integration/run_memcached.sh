#!/usr/bin/env bash
# run_memcached.sh: memcached (package memcached) as uid 61001 on a unix stream socket
# (`-s SOCK -a 0700`: only its own uid may connect), and its clients as 61001:
# libmemcached-tools' memcstat, memccp, memccat, memcexist, memcrm, memcflush, memcdump,
# memcping, and integration/memcache_text.py speaking the text protocol (set/add/replace/
# append/prepend/incr/decr/gets/cas/delete/touch/flush_all, noreply, a 900 KB value read
# back equal, a 2 MB one refused, quit's EOF; 20 connections at once, each 200 set+get of
# its own keys checked; `stats conns` with 3 connections open: the accepted connections'
# address memcached reads from accept); memcstat as uid 61002 (refused by the socket's
# 0700: EACCES) and the server's own counters (memcstat's, the stable ones). Three runs:
# on kernel sockets, then the server and every client through `udsfs run` with the socket
# in the mount, then under `--front seccomp`: the same answers each time. While the 20
# connections are held open, the udsfs runs count the sockets whose status says
# lane=direct: with lanes (the mount's default) the library's runs must have laned the
# connections, and with UDSFS_LANES=off (tests/integration.rs's lanes_off pass) none;
# under --front seccomp none either (the supervisor carries the programs, not the library).
UDSFS_MOUNT_ARGS=(--allow-other) # the server and its clients run as uid 61001
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd memcached memcached memcstat libmemcached-tools memccp libmemcached-tools \
    memccat libmemcached-tools memcrm libmemcached-tools memcflush libmemcached-tools \
    setpriv util-linux
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"

# uid 61001 reaches the files below $TMP.
chmod 755 "$TMP"
mkdir -p "$TMP/files"
printf 'hello from memccp\n' >"$TMP/files/small"
head -c 300000 /dev/urandom >"$TMP/files/blob"
chmod 755 "$TMP/files"
chmod 644 "$TMP/files"/*
CLIENT=$TMP/memcache_text.py
cp "$LIB_DIR/memcache_text.py" "$CLIENT"
chmod 644 "$CLIENT"

# The counters of memcstat's that the same requests make the same in every run (not
# times, pids, rusage, memory, bytes_written: its own stats answers hold times; nor
# curr_items and get_flushed, which depend on when the LRU crawler reaped the flushed
# items).
STABLE_STATS='version|total_connections|rejected_connections|cmd_get|cmd_set|cmd_flush|cmd_touch|get_hits|get_misses|delete_misses|delete_hits|incr_misses|incr_hits|decr_misses|decr_hits|cas_misses|cas_hits|cas_badval|touch_hits|store_too_large|total_items|threads'

# one_run NAME MODE DIR [RUN OPTIONS...]: memcached with its socket DIR/mc.sock on MODE's
# sockets (udsfs: each program through `udsfs run` with the RUN OPTIONS); the answers go
# to $TMP/NAME.out. Through udsfs, it also counts the lanes of the 20 connections
# (into D/laned) while they are held open.
one_run() {
    local name=$1 mode=$2 dir=$3 d=$TMP/mc-$1 out=$TMP/$1.out
    run_on "$mode" "${@:4}"
    local sock=$dir/mc.sock
    dirs_of 61001 "$d" "$dir"
    local as61001=(setpriv --reuid=61001 --regid=61001 --clear-groups)
    local as61002=(setpriv --reuid=61002 --regid=61002 --clear-groups)
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" memcached -s "$sock" -a 0700 -t 2 -c 256 -m 64
    start_bg MEMCACHED "${RUN_CMD[@]}" >"$d/memcached.log" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local s=--servers=$sock
    # stable_stats: memcstat's counters named in STABLE_STATS.
    stable_stats() { v "${as61001[@]}" memcstat "$s" 2>&1 | grep -E "^[[:space:]]($STABLE_STATS):" || true; }
    {
        echo "socket: $(stat -c '%A %U:%G' "$sock")"
        ask "memcping" "${as61001[@]}" memcping "$s"
        ask "memccp" "${as61001[@]}" memccp "$s" "$TMP/files/small" "$TMP/files/blob"
        ask "memccat small" "${as61001[@]}" memccat "$s" small
        echo "memccat blob: $(v "${as61001[@]}" memccat "$s" blob | head -c 300000 | cmp - "$TMP/files/blob" 2>&1 && echo equal)"
        ask "memcexist small" "${as61001[@]}" memcexist "$s" small
        echo "memcdump (sorted): $(v "${as61001[@]}" memcdump "$s" 2>&1 | sort | tr '\n' ' ')"
        ask "memcrm small" "${as61001[@]}" memcrm "$s" small
        ask "memcexist small after memcrm" "${as61001[@]}" memcexist "$s" small
        ask "memccat small after memcrm" "${as61001[@]}" memccat "$s" small
        ask "memcflush" "${as61001[@]}" memcflush "$s"
        echo "memccat blob after memcflush: $(v "${as61001[@]}" memccat "$s" blob 2>/dev/null | wc -c) bytes"
        ask "text protocol" "${as61001[@]}" /usr/bin/python3 "$CLIENT" "$sock" basics
        # 20 connections at once, held open (until $d/release) while the lanes are counted.
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- "${as61001[@]}" timeout 60 /usr/bin/python3 "$CLIENT" "$sock" many 20 200 "$d/release"
        start_bg MANY "${RUN_CMD[@]}" >"$d/many.out" 2>&1
        local i
        for i in $(seq 1 1500); do
            grep -q 'wrong answers' "$d/many.out" && break
            sleep 0.02
        done
        if [ "$mode" == udsfs ]; then
            # both ends of each of the 20 connections (the block's a subshell: the
            # count goes out in a file)
            held_lanes "$d/laned" "$MANY" 40
        fi
        touch "$d/release"
        local rc=0
        wait "$MANY" || rc=$?
        cat "$d/many.out"
        echo "20 clients: exit $rc"
        ask "stats conns" "${as61001[@]}" /usr/bin/python3 "$CLIENT" "$sock" conns 3
        # refused by the socket's mode 0700 (memcstat names the error; not its address)
        ask "memcstat as 61002" "${as61002[@]}" memcstat "$s" | sed 's/(0x[0-9a-f]*)/(ADDR)/'
        echo "counters:"
        stable_stats
    } 2>&1 | sed -e "s#$sock#SOCK#g; s#$d#D#g" >"$out" || true
    kill -TERM "$MEMCACHED" 2>/dev/null || true
    ended_within "$MEMCACHED" 10000 || fail "$name: memcached did not end within 10 s of SIGTERM: $(tail -5 "$d/memcached.log")"
    reap "$MEMCACHED"
    echo "memcached after SIGTERM: exit $REAPED_STATUS" >>"$out"
    session_left "$MEMCACHED" 5 >>"$out"
    show_answers "$name" "$out" "$d/memcached.log" "$d/many.out"
}

timed_run kernel kernel "$TMP/k"
kernel_said 'memccp: exit 0' "the kernel run's memccp failed"
kernel_said 'memccat blob: equal' "the kernel run's memccat did not give back the file memccp stored"
kernel_said 'big read back: equal' "the kernel run's 900 KB value did not come back equal"
kernel_said '20 clients x 200 set+get: wrong answers 0' "the kernel run's 20 clients got wrong answers"
kernel_said 'memcstat as 61002: exit 1' "the kernel run's memcstat as uid 61002 was not refused"
kernel_said '.*SYSTEM ERROR(Permission denied).*' "the kernel run's uid 61002 was not refused with EACCES"
kernel_said 'processes left: none' "the kernel run left processes"

udsfs_runs memcached mc 40 "memcached's 20 connections"

#!/usr/bin/env bash
# run_redis.sh: redis-server listening on a unix socket only (no TCP port), and its own
# clients — redis-cli (strings, a list, a hash, a 1 MiB value, MULTI/EXEC, a pub/sub
# message between two clients) and redis-benchmark (50 clients, every request checked
# by the tool) — on kernel sockets, then server and clients through `udsfs run --mount
# $MNT` with the socket in the mount: the same answers both times, and through udsfs
# the server's socket is a udsfs socket. Lanes off here (issue 30: the real programs pass
# with lanes off too); run_redis_lanes.sh runs every check again with lanes on (the
# mount's default), setting UDSFS_MOUNT_ARGS before it sources this script.
[ -n "${UDSFS_MOUNT_ARGS+set}" ] || UDSFS_MOUNT_ARGS=(--no-lanes)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd redis-server redis-server
need_cmd redis-cli redis-tools
need_cmd redis-benchmark redis-tools

head -c 1048576 /dev/urandom | base64 -w0 >"$TMP/big.txt"
BIG_SUM=$(md5sum <"$TMP/big.txt" | cut -d' ' -f1)

# one_run MODE DIR: redis on DIR/redis.sock with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/redis-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    local sock=$dir/redis.sock
    run_cmd -- redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 \
        --save '' --appendonly no --dir "$d" --daemonize no --logfile "$d/redis.log"
    start_bg REDIS "${RUN_CMD[@]}" >"$d/redis.out" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    local cli=(timeout 30 redis-cli -s "$sock")
    {
        via -- "${cli[@]}" PING
        via -- "${cli[@]}" SET greeting hello
        via -- "${cli[@]}" GET greeting
        via -- "${cli[@]}" INCRBY counter 41
        via -- "${cli[@]}" INCR counter
        via -- "${cli[@]}" RPUSH list a b c d
        via -- "${cli[@]}" LRANGE list 0 -1
        via -- "${cli[@]}" HSET h f1 v1 f2 v2
        via -- "${cli[@]}" HGETALL h
        # A value larger than any one message: many reads and writes on the stream.
        via -- "${cli[@]}" -x SET big <"$TMP/big.txt"
        via -- "${cli[@]}" STRLEN big
        echo "big value md5 equal: $([ "$(via -- "${cli[@]}" --raw GET big | head -c -1 | md5sum | cut -d' ' -f1)" == "$BIG_SUM" ] && echo yes || echo no)"
        printf 'MULTI\nINCR counter\nGET greeting\nEXEC\n' | via -- "${cli[@]}"
        # Pub/sub: a subscriber (a second connection held open) gets one message.
        run_cmd -- timeout 20 redis-cli -s "$sock" SUBSCRIBE chan
        "${RUN_CMD[@]}" >"$d/sub.out" 2>&1 &
        local sub=$! i
        for i in $(seq 1 200); do
            [ "$(via -- "${cli[@]}" PUBSUB NUMSUB chan | tail -1)" == 1 ] && break
            sleep 0.05
        done
        via -- "${cli[@]}" PUBLISH chan news
        for i in $(seq 1 200); do
            grep -qx news "$d/sub.out" && break
            sleep 0.05
        done
        kill "$sub" 2>/dev/null
        wait "$sub" 2>/dev/null
        echo "subscriber got: $(grep -cx news "$d/sub.out")"
        # 50 clients at once; redis-benchmark fails a run whose replies are wrong.
        via -- timeout 120 redis-benchmark -s "$sock" -c 50 -n 5000 -t set,get,lpush,lpop -q --csv |
            awk -F, 'NR > 1 { gsub(/"/, ""); print "benchmark", $1, ($2 + 0 > 0 ? "ran" : "failed") }'
        via -- "${cli[@]}" DBSIZE
        via -- "${cli[@]}" SHUTDOWN NOSAVE
    } >"$out" 2>&1 || true
    exit_status "$out" "redis-server" "$REDIS" 10000 "$d/redis.log"
    show_answers "$mode" "$out" "$d"/*.out "$d/redis.log"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/redis"
kernel_said 'big value md5 equal: yes' "the kernel run did not get the 1 MiB value back"
kernel_said 'subscriber got: 1' "the kernel run's subscriber did not get the message"
[ "$(grep -c '^benchmark .* ran$' "$TMP/kernel.out")" -ge 4 ] || fail "redis-benchmark did not run on the kernel"
same_answers "redis" tail -n 20 "$TMP/redis-udsfs/redis.log"
ok "redis-server, redis-cli and redis-benchmark (50 clients) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

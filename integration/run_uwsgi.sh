#!/usr/bin/env bash
# run_uwsgi.sh: uWSGI (its master, 2 python3 workers and its http router) on unix sockets
# only: the workers accept on a uwsgi-protocol socket and an http one, the router takes
# HTTP on a third and forwards each request to the workers' uwsgi socket (a connect of
# its own, non-blocking, in its event loop), and the master serves its stats as JSON on
# a fourth. curl asks through the router and directly (GETs, a 300,000-byte POST's
# length and md5, 40 requests 4 at a time), `uwsgi --connect-and-read` reads the stats
# (the sockets, the workers, the requests they counted); SIGTERM (--die-on-term) ends it
# all (`udsfs run` passes SIGTERM on to uwsgi, not SIGINT). On kernel
# sockets, then every program through `udsfs run --mount $MNT` on the mount's default
# (lanes on): the same answers, and the four listeners udsfs sockets. Then, through udsfs,
# a request held half sent, straight and through the router: its connections laned.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd uwsgi uwsgi-core
need_cmd curl curl
[ -e /usr/lib/uwsgi/plugins/python3_plugin.so ] ||
    fail "uwsgi's python3 plugin is not installed (package uwsgi-plugin-python3; .ci/run installs it)"
[ -e /usr/lib/uwsgi/plugins/http_plugin.so ] ||
    fail "uwsgi's http plugin is not installed (package uwsgi-core; .ci/run installs it)"

sed "s/@SERVER@/uwsgi/" "$LIB_DIR/wsgi_app.py" >"$TMP/app.py"
# The stats the runs can share: names below the run's directory, no pids or times.
cat >"$TMP/stats.py" <<'EOF2'
import json, os, sys
s = json.load(sys.stdin)
for sock in s["sockets"]:
    print("stats socket", os.path.basename(sock["name"]), sock["proto"])
print("stats workers", len(s["workers"]), "requests", sum(w["requests"] for w in s["workers"]),
      "exceptions", sum(w["exceptions"] for w in s["workers"]))
EOF2
# held.py SOCK UDSFS_DIR WANT LANE: holds a request half sent on SOCK until WANT sockets
# new to the mount (the connection's ends, and the router's to a worker) all say LANE in
# their status (10 s at most), then sends the rest and prints the reply.
cp "$LIB_DIR/udsfs_socks.py" "$TMP/"
cat >"$TMP/held.py" <<'EOF2'
import os, socket, sys, time
from udsfs_socks import lanes, sockets
sock, u, want, lane = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
before = sockets(u)
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.sendall(b"POST /held HTTP/1.0\r\nContent-Length: 10\r\n\r\nhello")
end = time.monotonic() + 10
while True:
    seen = lanes(u, {i for i, _ in sockets(u) - before})
    if (len(seen) >= want and all(l == lane for l in seen)) or time.monotonic() > end:
        break
    time.sleep(0.05)
print("held on %s: %d new sockets, lanes %s" % (os.path.basename(sock), len(seen), " ".join(sorted(set(seen)))))
s.sendall(b"world")
reply = b"".join(iter(lambda: s.recv(4096), b""))
print(reply.decode().split("\r\n\r\n", 1)[1], end="")
EOF2
head -c 300000 /dev/urandom >"$TMP/post.bin"

# one_run MODE DIR: uwsgi with its sockets in DIR on MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/uwsgi-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    run_cmd -- uwsgi --plugin http,python3 --master --processes 2 --die-on-term \
        --socket "$dir/uwsgi.sock" --http "$dir/front.sock" --http-socket "$dir/direct.sock" \
        --stats "$dir/stats.sock" --chdir "$TMP" --wsgi-file app.py --logto "$d/uwsgi.log"
    start_bg UWSGI "${RUN_CMD[@]}" >"$d/uwsgi.out" 2>&1
    local s
    for s in uwsgi front direct stats; do
        wait_listening "$dir/$s.sock"
        expect_socket_home "$dir/$s.sock"
    done
    local front=(timeout 30 curl -sS --unix-socket "$dir/front.sock")
    local direct=(timeout 30 curl -sS --unix-socket "$dir/direct.sock")
    {
        via -- "${front[@]}" 'http://x/router?a=1'
        via -- "${direct[@]}" 'http://x/direct?b=2'
        via -- "${front[@]}" --data-binary @"$TMP/post.bin" 'http://x/post'
        via -- "${direct[@]}" --data-binary @"$TMP/post.bin" 'http://x/post'
        # Two requests on one connection to the workers' http socket.
        via -- "${direct[@]}" 'http://x/one' 'http://x/two'
        # 40 requests 4 at a time through the router.
        seq 1 40 | via -- xargs -P 4 -I{} "${front[@]}" -o /dev/null -w '%{http_code}\n' 'http://x/many?{}' |
            sort | uniq -c | sed 's/^ */many: /'
        # The master's stats: 2 + 2 + 2 + 40 requests reached the workers.
        via -- timeout 30 uwsgi --connect-and-read "$dir/stats.sock" 2>&1 | python3 "$TMP/stats.py"
        kill -TERM "$UWSGI"
    } >"$out" 2>&1 || true
    exit_status "$out" "uwsgi" "$UWSGI" 15000 "$d/uwsgi.log"
    show_answers "$mode" "$out" "$d/uwsgi.out" "$d/uwsgi.log"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/uwsgi"
kernel_said 'uwsgi saw POST /post?, 300000 bytes, md5 .*' "the kernel run's POST did not reach the app whole"
kernel_said 'many: 40 200' "the kernel run's 40 requests did not all get a 200"
kernel_said 'stats workers 2 requests 46 exceptions 0' "the kernel run's stats do not count the 46 requests"
kernel_said 'uwsgi exit status: 0' "uwsgi did not exit 0 on SIGTERM on the kernel"
same_answers "uwsgi" tail -n 20 "$TMP/uwsgi-udsfs/uwsgi.log"

# The lanes: a request held half sent straight to the workers (its 2 ends) and through
# the router (4 ends: curl's connection and the router's to a worker) on the mount's
# lanes (lane=direct; lane=none on the lanes_off pass's --no-lanes mount).
lane=direct
[ "${UDSFS_LANES:-}" != off ] || lane=none
mkdir -p "$MNT/held" "$TMP/uwsgi-held"
UDSFS_RUN_VIA=udsfs
run_cmd -- uwsgi --plugin http,python3 --master --processes 2 --die-on-term \
    --socket "$MNT/held/uwsgi.sock" --http "$MNT/held/front.sock" --http-socket "$MNT/held/direct.sock" \
    --chdir "$TMP" --wsgi-file app.py --logto "$TMP/uwsgi-held/uwsgi.log"
start_bg HELD "${RUN_CMD[@]}" >"$TMP/uwsgi-held/uwsgi.out" 2>&1
wait_listening "$MNT/held/front.sock"
wait_listening "$MNT/held/direct.sock"
for hop in direct:2 front:4; do
    got=$(via -- timeout 30 python3 "$TMP/held.py" "$MNT/held/${hop%:*}.sock" "$U" "${hop#*:}" "$lane" 2>&1) || true
    say "$got"
    printf '%s\n' "$got" | grep -qx "held on ${hop%:*}.sock: ${hop#*:} new sockets, lanes $lane" ||
        { tail -n 30 "$TMP/uwsgi-held/uwsgi.log" | sed 's/^/   uwsgi.log| /' >&2; false; } ||
        fail "a request held on ${hop%:*}.sock: want its ${hop#*:} sockets lane=$lane: $got"
    printf '%s\n' "$got" | grep -qx 'uwsgi saw POST /held?, 10 bytes, md5 fc5e038d38a57032085441e7fe7010b0' ||
        fail "the held request on ${hop%:*}.sock did not get its answer: $got"
done
stop_bg -TERM "$HELD"
ok "requests held on uwsgi's sockets: their connections (the router's to the workers too) lane=$lane"
ok "uwsgi (master, 2 workers, http router, stats) and curl through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

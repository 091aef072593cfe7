#!/usr/bin/env bash
# run_varnish.sh: Varnish Cache (varnishd -F: its manager, running as the varnish user,
# binds the listener, compiles the VCL with cc and forks a child that drops to the
# vcache user, accepts on the inherited listener and fetches from the backend) listening
# on a unix socket (-a PATH,user=,group=,mode=: varnish chowns and chmods it), with a
# backend on another unix socket (the VCL's .path), a python3 HTTP server. curl asks
# over varnish's socket: a GET (a miss), the same GET (a hit: obj.hits and the two xids
# of X-Varnish say so, and the backend's request count stays), a 300,000-byte POST (passed
# to the backend: its length and md5), 40 requests 4 at a time, a request while the
# backend's socket is 0755 (the vcache child may not connect: errno 13, a 503) and
# while the backend is down (errno 111, a 503); varnishadm (over TCP, its own secret)
# bans a URL; varnishstat and varnishlog read the shared-memory log (files, not
# sockets: not through udsfs, and the same either way); SIGTERM ends varnishd. On kernel
# sockets, then varnishd, the backend and curl through `udsfs run --mount $MNT`: the same
# answers, and the listener and the backend's socket udsfs sockets.
# The manager (user varnish) and the child (user vcache) use the mount too.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd varnishd varnish
need_cmd varnishadm varnish
need_cmd varnishstat varnish
need_cmd varnishlog varnish
need_cmd curl curl
need_cmd cc gcc
id vcache >/dev/null 2>&1 || fail "the user vcache is missing (the varnish package makes it; .ci/run installs it)"

# varnish's manager (user varnish) and its child (user vcache) read the work directory
# and the VCL, and the child connects to the backend, all below $TMP.
chmod 755 "$TMP"
head -c 300000 /dev/urandom >"$TMP/post.bin"

# backend.py SOCK: an HTTP/1.1 server on SOCK (http_upstream.py's, with PYTHONPATH=$LIB_DIR);
# a GET says which request it was of those it saw, GET /count how many it saw before, a
# POST the length and md5 of its body.
cat >"$TMP/backend.py" <<'EOF2'
import hashlib, sys, threading
from http_upstream import Handler, ThreadingServer
seen, lock = [0], threading.Lock()
class Backend(Handler):
    content_type = "text/plain"
    def count(self):
        with lock:
            seen[0] += 1
            return seen[0]
    def say(self, text):
        self.reply(text.encode())
    def do_GET(self):
        n = self.count()
        if self.path == "/count":
            self.say("backend saw %d requests before this one\n" % (n - 1))
        else:
            self.say("backend saw GET %s, its request %d\n" % (self.path, n))
    def do_POST(self):
        self.count()
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.say("backend saw POST %s, %d bytes, md5 %s\n" % (self.path, len(body), hashlib.md5(body).hexdigest()))
ThreadingServer(sys.argv[1], Backend).serve_forever()
EOF2

# The counters that do not depend on timing (keep-alive reuse of backend connections
# does), by name.
COUNTERS=(MAIN.sess_conn MAIN.client_req MAIN.cache_hit MAIN.cache_miss MAIN.s_pass MAIN.backend_fail MAIN.bans_added)

# varnish_up D: varnishd (work directory D/work) says its child is running (10 s at most).
varnish_up() {
    local i
    for i in $(seq 1 100); do
        timeout 5 varnishadm -n "$1/work" -t 2 status 2>/dev/null | grep -qx 'Child in state running' && return 0
        sleep 0.1
    done
    return 1
}

# one_run MODE DIR: varnishd and its backend with their sockets in DIR, on MODE's
# sockets; the answers go to $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/varnish-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d" "$dir"
    local listener=$dir/varnish.sock backend_sock=$dir/backend.sock
    cat >"$d/default.vcl" <<EOF2
vcl 4.1;
backend default { .path = "$backend_sock"; }
sub vcl_recv {
    if (req.url == "/count") { return (pass); }
}
sub vcl_deliver {
    set resp.http.X-Hits = obj.hits;
}
EOF2
    # umask 022: the backend's socket is 0755, which the vcache child may not connect
    # to until it is made 0666 below.
    serve BACKEND "$backend_sock" "$d/backend.out" -- env PYTHONPATH="$LIB_DIR" python3 "$TMP/backend.py" "$backend_sock"
    # backend_local_error_holddown=0: varnish tries the backend again at once after a
    # failed connect (10 s later by default).
    run_cmd -- varnishd -F -n "$d/work" -a "$listener,user=varnish,group=varnish,mode=660" \
        -f "$d/default.vcl" -s malloc,16m -p backend_local_error_holddown=0
    start_bg VARNISHD "${RUN_CMD[@]}" >"$d/varnishd.out" 2>&1
    wait_listening "$listener"
    expect_socket_home "$listener"
    expect_socket_home "$backend_sock"
    # the child accepts on the listener, and has the VCL: its acceptor has started
    # (else varnishd says why and stops it)
    varnish_up "$d" || fail "$mode: varnishd's child did not start: $(tail -8 "$d/varnishd.out")"
    local c=(timeout 20 curl -sS --unix-socket "$listener")
    # ask [CURL ARGS...]: one request; its status, whether it came from the cache
    # (obj.hits, and X-Varnish's xids: 2 on a hit, 1 on a miss), then its body; no xids,
    # dates or ages. show_body=0 for the 503s (their bodies hold an xid).
    ask() {
        local show_body=${show_body:-1}
        via -- "${c[@]}" -D "$d/headers" -o "$d/body" "$@" || echo "curl failed: $?"
        tr -d '\r' <"$d/headers" | awk 'NR == 1 { $1 = ""; s = $0 } tolower($1) == "x-hits:" { h = $2 }
            tolower($1) == "x-varnish:" { x = NF - 1 } END { printf "status%s, obj.hits %s, xids %d\n", s, h, x }'
        [ "$show_body" == 0 ] || cat "$d/body"
    }
    # counters: varnishstat's, once client_req says the N requests are counted (the
    # child adds its threads' counts to the shared memory when they go idle).
    counters() {
        local i want=$1 args=() n
        for n in "${COUNTERS[@]}"; do args+=(-f "$n"); done
        for i in $(seq 1 250); do
            [ "$(varnishstat -n "$d/work" -t 2 -1 -f MAIN.client_req | awk '{ print $2 }')" == "$want" ] && break
            sleep 0.02
        done
        varnishstat -n "$d/work" -t 2 -1 "${args[@]}" | awk '{ print "counter", $1, $2 }'
    }
    {
        # -a's user=, group= and mode=: the manager chowned and chmodded its socket
        echo "listener: $(stat -c '%A %U:%G' "$listener")"
        # The backend's socket is 0755 and root's: the vcache child may not connect.
        show_body=0 ask http://v/denied
        via -- chmod 666 "$backend_sock"
        ask http://v/a
        ask http://v/a
        ask --data-binary @"$TMP/post.bin" http://v/post
        # 40 distinct URLs, 4 at a time: 40 misses
        run_cmd -- "${c[@]}" -o /dev/null -w '%{http_code} obj.hits %header{x-hits}\n'
        # (a curl that fails says how: its status, 124 if it hung 20 s)
        seq 1 40 | xargs -P 4 -I{} bash -c '"$@" || echo "curl exit $?"' _ "${RUN_CMD[@]}" 'http://v/many?{}' |
            sort | uniq -c | sed 's/^ */many: /'
        # a hit (which of the backend's requests it was depends on the 4 at a time)
        ask http://v/many?7 | sed 's/, its request [0-9]*$//'
        ask http://v/count
        # a ban over the management CLI (TCP): /a is fetched again
        via -- timeout 10 varnishadm -n "$d/work" ban req.url == /a || echo "varnishadm ban failed: $?"
        via -- timeout 10 varnishadm -n "$d/work" status || echo "varnishadm status failed: $?"
        ask http://v/a
        # The backend down: its socket is still there, nothing listens.
        kill "$BACKEND"
        wait "$BACKEND" 2>/dev/null || true
        show_body=0 ask http://v/down
        counters 48
        # Why the fetches failed, as the child logged it (errno 13, then 111).
        timeout 10 varnishlog -n "$d/work" -d -g raw -i FetchError | sed 's/^ *[0-9]* *//'
        kill -TERM "$VARNISHD"
    } >"$out" 2>&1 || true
    exit_status "$out" varnishd "$VARNISHD" 15000 "$d/varnishd.out"
    show_answers "$mode" "$out" "$d/varnishd.out" "$d/backend.out"
    # A child that died (the manager starts another) fails the run, whatever the
    # answers: its panic says where. (Through udsfs, seen: SIGSEGV in the cache-epoll
    # thread, at udsfs_user_copy_fixup or in the library's .bss: varnish gives all its
    # threads one sigaltstack and its SIGSEGV handler SA_ONSTACK, and the library's
    # probe of epoll_ctl(EPOLL_CTL_DEL, fd, NULL)'s event faults on purpose; two
    # threads' faults at once share that stack.)
    ! grep -q '^Error: Child ([0-9]*) died' "$d/varnishd.out" ||
        fail "$mode: varnishd's child died (the manager restarted it):
$(sed -n '/^Error: Child ([0-9]*) died/,$p' "$d/varnishd.out" | head -24)"
    ! grep -Eq '(curl exit|curl failed:) 124$' "$out" ||
        fail "$mode: a curl to varnishd hung 20 s (exit 124; answers above)"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/varnish"
kernel_said 'status 503 Backend fetch failed, obj.hits 0, xids 1' "the kernel run got no 503 from varnish"
kernel_said 'FetchError *b backend default: fail errno 13 (Permission denied)' "the kernel run's vcache child could connect to a 0755 root socket"
kernel_said 'backend saw GET /a, its request 1' "the kernel run's first GET did not reach the backend"
kernel_said 'status 200 OK, obj.hits 1, xids 2' "the kernel run's second GET was not a hit"
kernel_said "backend saw POST /post, 300000 bytes, md5 $(md5sum <"$TMP/post.bin" | cut -d' ' -f1)" "the kernel run's POST did not reach the backend whole"
kernel_said 'many: 40 200 obj.hits 0' "the kernel run's 40 requests were not all 200s and misses"
kernel_said 'backend saw 42 requests before this one' "the kernel run's backend did not count 42 requests (a, post, 40 many)"
kernel_said 'backend saw GET /a, its request 44' "the kernel run's ban did not make varnish fetch /a again"
kernel_said 'FetchError *b backend default: fail errno 111 (Connection refused)' "the kernel run's last fetch was not refused"
kernel_said 'counter MAIN.cache_hit 2' "the kernel run's varnish did not count 2 hits"
kernel_said 'listener: srw-rw---- varnish:varnish' "the kernel run's listener is not varnish's, mode 0660"
kernel_said 'varnishd exit status: 0' "varnishd did not exit 0 on SIGTERM on the kernel"
same_answers "varnish" tail -n 20 "$TMP/varnish-udsfs/varnishd.out"
ok "varnishd (manager, vcache child), its backend and curl through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

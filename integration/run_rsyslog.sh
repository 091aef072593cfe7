#!/usr/bin/env bash
# run_rsyslog.sh: rsyslogd's imuxsock on a /dev/log-style DATAGRAM socket (a --route
# directory standing for /dev), with SCM_CREDENTIALS (UsePIDFromSystem, Annotate,
# ParseTrusted: the sender's pid, uid and gid from the kernel's credentials) and an
# omuxsock action forwarding every message to a second datagram socket (a python3
# receiver, SO_PASSCRED too); its clients are util-linux's logger (-u, -d, a 6000-byte
# message, 300 lines from stdin), python's logging.handlers.SysLogHandler, and logger
# as user 65534 (also claiming pid 1 in its credentials: refused), logger under
# --front seccomp. On kernel sockets, then every program through `udsfs run --mount $MNT
# --route DIR`: the same answers, and both sockets udsfs sockets.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd rsyslogd rsyslog
need_cmd logger bsdutils
need_cmd setpriv util-linux
chmod 755 "$TMP" # user 65534 reaches the log socket

# The forward's receiver: every datagram to its socket, with the sender's credentials
# (rsyslogd's own: its pid checked against $1, the pid file's).
cat >"$TMP/recv.py" <<'EOF2'
import os, socket, struct, sys
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
os.chmod(path, 0o666)
open(out + ".ready", "w").close()
with open(out, "w") as f:
    while True:
        data, anc, flags, _ = s.recvmsg(65536, socket.CMSG_SPACE(12))
        creds = [struct.unpack("iII", d[:12]) for lv, ty, d in anc
                 if lv == socket.SOL_SOCKET and ty == socket.SCM_CREDENTIALS]
        pid, uid, gid = creds[0] if creds else (-1, -1, -1)
        f.write("%d %d %d %d %s\n" % (pid, uid, gid, flags, data.decode(errors="replace")))
        f.flush()
EOF2

# A logging client that says its own pid, to be checked against the one rsyslogd got
# from the credentials.
cat >"$TMP/pylog.py" <<'EOF2'
import logging, logging.handlers, os, sys
h = logging.handlers.SysLogHandler(address=sys.argv[1], facility="daemon")
h.ident = "pylog: "
log = logging.getLogger("p")
log.addHandler(h)
log.warning("python SysLogHandler says hello")
log.error("python error line")
with open(os.environ["SENDERS"], "a") as f:
    f.write("pylog %d\n" % os.getpid())
EOF2

# lg TAG ARGS...: logger -t TAG ARGS...; its pid (this shell's, which exec keeps) is
# noted in $SENDERS, to be checked against the one rsyslogd took from the credentials.
cat >"$TMP/lg" <<'EOF2'
#!/bin/sh
tag=$1
shift
echo "$tag $$" >>"$SENDERS"
exec logger -t "$tag" "$@"
EOF2
chmod 755 "$TMP/lg"

# SO_TIMESTAMP, which imuxsock asks for on its socket (the time a message came in):
# set on a socket bound at $1, then a datagram's SCM_TIMESTAMP.
cat >"$TMP/timestamp.py" <<'EOF2'
import errno, socket, sys
SO_TIMESTAMP = 29  # SO_TIMESTAMP_OLD; its cmsg is SCM_TIMESTAMP, 29 too
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
try:
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
    print("setsockopt(SO_TIMESTAMP): 0, reads back", s.getsockopt(socket.SOL_SOCKET, SO_TIMESTAMP))
except OSError as e:
    print("setsockopt(SO_TIMESTAMP):", errno.errorcode[e.errno])
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.sendto(b"x", sys.argv[1])
data, anc, flags, _ = s.recvmsg(16, socket.CMSG_SPACE(16))
print("recvmsg:", data, "cmsgs:", [(lv, ty, len(d)) for lv, ty, d in anc])
EOF2

head -c 6000 /dev/zero | tr '\0' x >"$TMP/big.txt"
seq 1 300 | sed 's/^/line /' >"$TMP/lines.txt"

EXCEPTIONS=$LIB_DIR/rsyslog_exceptions.txt
listed() { grep -qx "$1" "$EXCEPTIONS"; }

# one_run MODE: rsyslogd on $dir/log with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$TMP/route d=$TMP/rs-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d" "$dir"
    chmod 755 "$dir"
    local sock=$dir/log fwd=$dir/fwd
    cat >"$d/rs.conf" <<EOF2
global(workDirectory="$d" maxMessageSize="16k")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$sock" CreatePath="off" Annotate="on" ParseTrusted="on"
      UsePIDFromSystem="on" RateLimit.Interval="0")
module(load="omuxsock")
template(name="line" type="string"
         string="%syslogtag%|%syslogfacility-text%.%syslogseverity-text%|%msg%|pid=%\$!pid%|uid=%\$!uid%|gid=%\$!gid%\n")
template(name="fwd" type="string" string="%syslogtag%%msg%")
*.* action(type="omfile" file="$d/out.log" template="line")
\$OMUxSockSocket $fwd
*.* :omuxsock:;fwd
EOF2
    run_cmd --route "$dir" -- python3 "$TMP/recv.py" "$fwd" "$d/fwd.log"
    start_bg RECV "${RUN_CMD[@]}" >"$d/recv.out" 2>&1
    wait_for "$d/fwd.log.ready" 20 "$mode: the forward's receiver did not start" "$d/recv.out"
    run_cmd --route "$dir" -- rsyslogd -n -f "$d/rs.conf" -i "$d/pid"
    start_bg RSYSLOG "${RUN_CMD[@]}" >"$d/rsyslog.out" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    expect_socket_home "$fwd"
    export SENDERS=$d/senders
    : >"$SENDERS"
    chmod 666 "$SENDERS"
    local lg=(timeout 20 "$TMP/lg")
    local to=(-u "$sock" --socket-errors=on)
    {
        via --route "$dir" -- "${lg[@]}" tagA "${to[@]}" -p local3.warn hello from logger
        via --route "$dir" -- "${lg[@]}" tagB "${to[@]}" -d -p mail.err datagram only
        via --route "$dir" -- "${lg[@]}" tagC "${to[@]}" -S 16000 -f "$TMP/big.txt"
        via --route "$dir" -- "${lg[@]}" tagD "${to[@]}" -f "$TMP/lines.txt"
        run_cmd --route "$dir" -- "${lg[@]}" tagE "${to[@]}" -p user.info from user nobody
        as_uid 65534 "${RUN_CMD[@]}"
        # uid 65534 claims pid 1 in its SCM_CREDENTIALS: refused (EPERM, no
        # CAP_SYS_ADMIN), logger sends again without them and the message carries its
        # real pid. (Root's --id is left out: logger leaves the uid and gid of its
        # credentials unset, and root may send any.)
        run_cmd --route "$dir" -- "${lg[@]}" tagN "${to[@]}" --id=1 -p user.info nobody claims pid 1
        as_uid 65534 "${RUN_CMD[@]}"
        run_cmd --route "$dir" --front seccomp -- "${lg[@]}" tagM "${to[@]}" --id=1 -p user.info nobody claims pid 1 under the supervisor
        as_uid 65534 "${RUN_CMD[@]}"
        via --route "$dir" -- python3 "$TMP/pylog.py" "$sock"
        # under the seccomp supervisor: its sendmsg and the credentials it carries
        via --route "$dir" --front seccomp -- "${lg[@]}" tagS "${to[@]}" -p local1.notice through the supervisor
        via --route "$dir" -- "${lg[@]}" tagF "${to[@]}" -p local7.debug last one
    } >"$out" 2>&1 || true
    local i
    for i in $(seq 1 400); do
        grep -q 'last one$' "$d/fwd.log" && grep -q 'last one|' "$d/out.log" 2>/dev/null && break
        sleep 0.05
    done
    local rspid
    rspid=$(cat "$d/pid" 2>/dev/null || echo none) # rsyslogd removes it as it ends
    kill -TERM "$RSYSLOG" 2>/dev/null || true
    ended_within "$RSYSLOG" 10000 || fail "$mode: rsyslogd did not exit on SIGTERM"
    reap "$RSYSLOG"
    kill -TERM "$RECV" 2>/dev/null || true
    ended_within "$RECV" 5000 || fail "$mode: the forward's receiver did not exit on SIGTERM"
    reap "$RECV"
    {
        echo "rsyslogd wrote $(wc -l <"$d/out.log") lines"
        # Each line's pid from the credentials against its sender's own.
        awk -F'|' 'NR == FNR { split($0, a, " "); want[a[1]] = a[2]; next }
        {
            tag = $1; sub(/\[.*/, "", tag); sub(/:$/, "", tag)
            p = $4; sub(/^pid=/, "", p)
            if (!(tag in want)) who = "sender unknown"
            else who = (p == want[tag] ? "pid is the sender'"'"'s" : "pid is not the sender'"'"'s")
            if (p == 1) who = who " (pid 1)"
            msg = $3; gsub(/line [0-9]+/, "line N", msg)
            if (length(msg) > 40) msg = substr(msg, 1, 40) "... (" length($3) " bytes)"
            print tag "|" $2 "|" msg "|" who "|" $5 "|" $6 }' "$SENDERS" "$d/out.log" | uniq -c
        echo "forwarded: $(wc -l <"$d/fwd.log") messages, $(awk -v p="$rspid" '$1 == p && $2 == 0 && $3 == 0' "$d/fwd.log" | wc -l) with rsyslogd's pid and root's ids"
        cut -d' ' -f4- "$d/fwd.log" | sed 's/\[[0-9]*\]//; s/line [0-9]*$/line N/; s/x\{100,\}/x.../' | uniq -c
        echo "rsyslogd exit status: $REAPED_STATUS"
    } >>"$out"
    if [ "$mode" == udsfs ] && listed seccomp_other_user; then
        # the listed difference: uid 65534's message under its supervisor carries the
        # supervisor's pid, which says so once; taken out here, checked below
        if awk '
            index($0, "udsfs run (seccomp): the daemon does not let the supervisor act for thread ") == 1 &&
                /: its sockets carry the supervisor.s credentials$/ { w = 1; next }
            index($0, " tagM|") && sub(/\|pid is not the sender.s\|/, "|pid is the sender'"'"'s|") { t = 1 }
            { print }
            END { exit !(w && t) }' "$out" >"$out.fixed"; then
            mv "$out.fixed" "$out"
            echo yes >"$TMP/seccomp_other_user.seen"
        fi
    fi
    via --route "$dir" -- python3 "$TMP/timestamp.py" "$dir/ts" >"$TMP/ts-$mode.out" 2>&1 || true
    if [ "$mode" == udsfs ] && listed so_timestamp; then
        # the listed difference's own complaint (rsyslogd's setsockopt) is expected
        sed -i '/udsfs-preload\[[0-9]*\]: setsockopt(SOL_SOCKET, 29) is not offered on udsfs sockets (ENOPROTOOPT)$/d' "$d/rsyslog.out"
    fi
    show_answers "$mode" "$out" "$d"/*.out
}

one_run kernel
rm -rf "$TMP/route"
one_run udsfs
grep -q '^ *300 tagD|user.notice| line N|pid is the sender.s|uid=0|gid=0$' "$TMP/kernel.out" ||
    fail "the kernel run did not log logger's 300 lines with its credentials"
[ "$(grep -c '^ *1 pylog|.*|pid is the sender.s|uid=0|gid=0$' "$TMP/kernel.out")" -eq 2 ] ||
    fail "the kernel run did not give the python client's pid from its credentials"
grep -q 'tagE|user.info|.*uid=65534|gid=65534$' "$TMP/kernel.out" ||
    fail "the kernel run did not give user 65534's ids from the credentials"
[ "$(grep -c "tag[NM]|user.info| nobody claims pid 1.*|pid is the sender's|uid=65534|gid=65534$" "$TMP/kernel.out")" -eq 2 ] ||
    fail "the kernel run did not refuse user 65534's claim to be pid 1"
same_answers "rsyslog" tail -n 20 "$TMP/rs-udsfs/rsyslog.out" "$LOG"
if listed seccomp_other_user; then
    [ -e "$TMP/seccomp_other_user.seen" ] ||
        fail "uid 65534's logger under --front seccomp answers as on the kernel but $EXCEPTIONS still lists seccomp_other_user: remove it there"
    say "known difference (listed in $EXCEPTIONS): uid 65534's logger under --front seccomp on root's mount sends the supervisor's pid"
fi
ok "rsyslogd (imuxsock with SCM_CREDENTIALS, omuxsock), logger and python's SysLogHandler through udsfs run --route: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

# SO_TIMESTAMP: as on the kernel, or the listed difference.
grep -q "cmsgs: \[(1, 29, 16)\]" "$TMP/ts-kernel.out" || fail "the kernel gave no SCM_TIMESTAMP: $(cat "$TMP/ts-kernel.out")"
if diff "$TMP/ts-kernel.out" "$TMP/ts-udsfs.out" >"$TMP/diff-ts"; then
    ! listed so_timestamp || fail "SO_TIMESTAMP answers as on the kernel but $EXCEPTIONS still lists it: remove it there and in README.md"
    ok "SO_TIMESTAMP and SCM_TIMESTAMP as on the kernel"
else
    cat "$TMP/diff-ts" >&2
    listed so_timestamp || fail "SO_TIMESTAMP through udsfs run answered differently from the kernel (< kernel, > udsfs)"
    grep -qx 'setsockopt(SO_TIMESTAMP): ENOPROTOOPT' "$TMP/ts-udsfs.out" ||
        fail "SO_TIMESTAMP differs through udsfs, but not as listed (ENOPROTOOPT): see above"
    say "known difference (listed in $EXCEPTIONS): setsockopt(SO_TIMESTAMP) is ENOPROTOOPT on a udsfs socket, no SCM_TIMESTAMP"
fi

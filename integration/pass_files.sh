#!/usr/bin/env bash
# Files that are not udsfs sockets, and pidfds, in the file dialect, without the
# preload library: a python client of the daemon's fd channel (@udsfs-fdpass-PID)
# deposits a pipe's write end, writes a `msg` record with `rights=file:T` (between two
# udsfs sockets' numbers), reads the record at the receiver (`rights=` in the same order,
# the file as `file:U`), claims U and writes through it into the pipe. Only the
# receiving user can claim, only once; a deposit nobody sends dies with its channel
# connection; an unclaimed received file dies with the receiving socket; the daemon
# holds as many descriptors at the end as at the start. Then `passpidfd on`: records
# carry `pidfd=` with the writer's pid, and `status` shows passpidfd=1.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
export LC_ALL=C

fds_of_daemon() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
BASE_FDS=$(fds_of_daemon)

cat >"$TMP/channel.py" <<'PY'
# A client of the daemon's fd channel: deposit, send by record, receive, claim.
import array, os, socket, struct, sys

FILE_TAG = 1 << 63
mnt, daemon = sys.argv[1], int(sys.argv[2])
u = os.path.join(mnt, ".udsfs")

def channel():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(f"\0udsfs-fdpass-{daemon}")
    pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    assert pid == daemon, f"channel answered by {pid}"
    return c

def answer(c):
    msg, anc, _, _ = c.recvmsg(8 * 254, socket.CMSG_SPACE(4 * 253))
    if msg[:1] == b"E":
        return "E", os.strerror(struct.unpack("i", msg[1:5])[0])
    fds = []
    for level, ty, data in anc:
        if ty == socket.SCM_RIGHTS:
            fds += array.array("i", data[: len(data) - len(data) % 4]).tolist()
    return msg[:1].decode(), (msg[1:], fds)

def deposit_many(c, fds):
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    return answer(c)

def deposit(c, fd):
    kind, (body, _) = deposit_many(c, [fd])
    assert kind == "T", kind
    return struct.unpack("Q", body)[0]

def claim(c, tag):
    c.send(b"C" + struct.pack("Q", tag | FILE_TAG))
    kind, got = answer(c)
    return got[1] if kind == "F" else (kind, got)

def pair(ty):
    f = open(os.path.join(u, ty, "pair"), "rb+", buffering=0)
    n, m = f.read(64).split()
    return f, int(n), int(m)

keep, a, b = pair("dgram")
keep2, s1, s2 = pair("stream")
r, w = os.pipe()
c = channel()
tag = deposit(c, w)
os.close(w)
print("deposit tag has the tag bit:", bool(tag & FILE_TAG))
with open(os.path.join(u, "sock", str(a), "msg"), "wb", buffering=0) as f:
    f.write(f"len=2 rights={s1},file:{tag & ~FILE_TAG},{s2}\nhi".encode())
# (The second socket of a pair lives while one of its files is open: keep it.)
fb = open(os.path.join(u, "sock", str(b), "msg"), "rb", buffering=0)
header = fb.read(4096).split(b"\n")[0].decode()
rights = dict(kv.split("=", 1) for kv in header.split())["rights"].split(",")
print("rights: socket, file, socket:", [x.startswith("file:") for x in rights])
got = int(rights[1][len("file:"):])
if os.fork() == 0:
    os.setgid(65534); os.setuid(65534)
    print("another user claims:", claim(channel(), got))
    sys.stdout.flush()
    os._exit(0)
os.wait()
fds = claim(c, got)
print("claimed:", len(fds), "fd")
print("claimed again:", claim(c, got))
os.write(fds[0], b"through the pipe")
os.close(fds[0])
print("pipe reads:", os.read(r, 100))
print("pipe then EOF:", os.read(r, 100) == b"")
# A deposit never sent dies with its connection; a received file nobody
# claims dies with the receiving socket.
r2, w2 = os.pipe()
c2 = channel()
deposit(c2, w2)
c2.close()
r3, w3 = os.pipe()
tag3 = deposit(c, w3)
with open(os.path.join(u, "sock", str(a), "msg"), "wb", buffering=0) as f:
    f.write(f"len=1 rights=file:{tag3 & ~FILE_TAG}\nx".encode())
os.close(w2); os.close(w3)
c.close()
print("an unsent deposit closes:", os.read(r2, 1) == b"")
keep.close()   # the pair's handle and the receiver's msg file: both sockets close,
fb.close()     # the queue with them
print("an unclaimed received file closes:", os.read(r3, 1) == b"")
# One sendmsg's worth (253) may wait unsent per connection, not more.
c4 = channel()
kind, (tags, _) = deposit_many(c4, [r] * 253)
print("253 deposits:", kind, len(tags) // 8)
print("one more:", deposit_many(c4, [r]))
c4.close()
# A reader that never claims holds at most its RLIMIT_NOFILE of received
# files in the daemon; the rest close at once (Linux: MSG_CTRUNC).
import resource
keep5, a5, b5 = pair("dgram")
c5 = channel()
kind, (body, _) = deposit_many(c5, [r] * 60)
tags = [t & ~FILE_TAG for t in struct.unpack("60Q", body)]
with open(os.path.join(u, "sock", str(a5), "msg"), "wb", buffering=0) as f:
    f.write(("len=1 rights=" + ",".join(f"file:{t}" for t in tags) + "\nz").encode())
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (40, hard))
fb5 = open(os.path.join(u, "sock", str(b5), "msg"), "rb", buffering=0)
header = fb5.read(8192).split(b"\n")[0].decode()
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print("60 files to a reader with RLIMIT_NOFILE 40:", header.count("file:"), "held")
fb5.close(); keep5.close(); c5.close()
PY
python3 "$TMP/channel.py" "$MNT" "$DAEMON_PID" >"$TMP/channel.out" 2>"$TMP/channel.err" ||
    fail "channel.py: $(cat "$TMP/channel.out" "$TMP/channel.err")"
cat >"$TMP/channel.want" <<'OUT'
deposit tag has the tag bit: True
rights: socket, file, socket: [False, True, False]
another user claims: ('E', 'Bad file descriptor')
claimed: 1 fd
claimed again: ('E', 'Bad file descriptor')
pipe reads: b'through the pipe'
pipe then EOF: True
an unsent deposit closes: True
an unclaimed received file closes: True
253 deposits: T 253
one more: ('E', 'Too many references: cannot splice')
60 files to a reader with RLIMIT_NOFILE 40: 40 held
OUT
diff "$TMP/channel.want" "$TMP/channel.out" >&2 || fail "the fd channel and msg records differ from the documented behaviour"
ok "a pipe passed by record (rights=N,file:T,M), claimed once by its receiver only; unsent and unclaimed files closed"

# Nothing held any more (the two stream sockets passed by number, never opened by
# anyone, went with the receiver too).
for _ in $(seq 200); do
    [ "$(fds_of_daemon)" -le "$BASE_FDS" ] && break
    sleep 0.02
done
expect_eq "daemon descriptors after the file passing" "$BASE_FDS" "$(fds_of_daemon)"

# ---- pidfd= in records
new_pair P dgram
exec {ctlm}<>"$U/sock/$P_M/ctl"
ctl "$ctlm" "passpidfd on" || fail "passpidfd on"
expect_status "$P_M" passpidfd 1
expect_status "$P_N" passpidfd 0
exec {mmsg}<"$U/sock/$P_M/msg"
bash -c 'printf hello >"$1"; echo $$ >"$2"' _ "$U/sock/$P_N/data" "$TMP/writer.pid"
recv_record "$mmsg" || fail "no record at the passpidfd receiver"
[[ " $REC_HEADER " == *" pidfd=$(cat "$TMP/writer.pid") "* ]] ||
    fail "record '$REC_HEADER' lacks pidfd=$(cat "$TMP/writer.pid") (the writer)"
[[ " $REC_HEADER " != *" creds="* ]] || fail "record '$REC_HEADER' has creds= without passcred"
ok "passpidfd on: the record carries pidfd= of the writer ($REC_HEADER), no creds="
ctl "$ctlm" "passpidfd off" || fail "passpidfd off"
send "$P_N" again
recv_record "$mmsg" || fail "no second record"
[[ " $REC_HEADER " != *" pidfd="* ]] || fail "record '$REC_HEADER' has pidfd= after passpidfd off"
ok "passpidfd off: no pidfd= ($REC_HEADER)"
expect_errno EINVAL ctl "$ctlm" "passpidfd maybe"

# ---- a file passed by a program in a network namespace of its own
# The fd channel's abstract name exists in the daemon's network namespace only: from
# `unshare -n` (root) and `unshare -Urn` (user 61061, in a user namespace too), a pipe's
# end passed over a udsfs socketpair through `udsfs run` (both fronts) goes by the
# channel's path socket (the second line of .udsfs/fdchannel). Before it, each printed
# "fd channel @udsfs-fdpass-N: not answered by the daemon's uid 0: refused" and
# sendmsg failed ECONNREFUSED; on Linux it works.
need_preload
for_other_users
[ "$(sed -n 2p "$U/fdchannel")" = "$(sed -n 2p "$U/fdchannel" | grep -E '^/.+/fdchannel$')" ] &&
    [ -S "$(sed -n 2p "$U/fdchannel")" ] || fail ".udsfs/fdchannel names no path socket: $(tr '\n' ';' <"$U/fdchannel")"
say ".udsfs/fdchannel: $(tr '\n' ' ' <"$U/fdchannel")"
cat >"$TMP/netns_pass.py" <<'PY'
import array, os, socket
a, b = socket.socketpair()
r, w = os.pipe()
a.sendmsg([b"f"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
os.close(w)
_, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(4))
got = array.array("i", anc[0][2])[0]
os.write(got, b"through the pipe")
os.close(got)
print("passed a pipe:", os.read(r, 64))
PY
chmod 644 "$TMP/netns_pass.py"
run_in() { env UDSFS_PRELOAD="$PRELOAD_LIB" "$@" 2>&1; }
userns=yes
as_uid 61061 unshare -Urn true 2>/dev/null || userns=no
for front in preload seccomp; do
    run=(timeout 60 "$UDSFS_BIN" run --mount "$MNT" --front "$front" -- /usr/bin/python3 "$TMP/netns_pass.py")
    got=$(run_in unshare -n "${run[@]}") || true
    say "root in unshare -n, $front front: $got"
    [ "$got" = "passed a pipe: b'through the pipe'" ] || fail "unshare -n, $front front: a pipe not passed: $got"
    if [ $userns = yes ]; then
        got=$(as_uid 61061 env UDSFS_PRELOAD="$PRELOAD_LIB" unshare -Urn "${run[@]}" 2>&1) || true
        say "user 61061 in unshare -Urn, $front front: $got"
        [ "$got" = "passed a pipe: b'through the pipe'" ] || fail "unshare -Urn as 61061, $front front: a pipe not passed: $got"
    fi
done
[ $userns = yes ] || say "user namespaces are closed to user 61061 here: its unshare -Urn pass not run"
ok "a pipe passed over a udsfs socketpair from a network namespace of its own (root's unshare -n; $([ $userns = yes ] && echo "user 61061's unshare -Urn" || echo "not user 61061's unshare -Urn")), both fronts"

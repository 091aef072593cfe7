#!/usr/bin/env bash
# The faults that act at once (src/engine/fault_point.rs), measured on both ends:
# 1. refuse, full, short_write, ctrunc, limit_data through `udsfs run`
#    (integration/fault_effects.py): each call's result, errno and timing.
# 2. reset_peer, die_after, limit_data against the kernel: integration/fault_peer.py
#    kills the peer's process on kernel sockets where the rule acts through udsfs;
#    the errno sequences (and SIGPIPE) must be equal.
# 3. .udsfs/faults: add, list, del, clear; EINVAL naming the field; a socket's ctl
#    `fault ...`, refused on a dgram socket for a stream-only fault; an injection in
#    an attached capture.
# 4. Two users on an --allow-other mount: a user's rule leaves root's sockets alone,
#    root's acts on the user's.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3

# ---------------------------------------------------------------- 1. effects
# full_on TYPE: what the full rule does to a TYPE socket's sends (stream, dgram: the same).
full_on() {
    printf '%s\n' "$1 full non-blocking send: EAGAIN" \
        "$1 full blocking send at a signal: interrupted waited: True ended within 100 ms of it: True" \
        "$1 full blocking send with SO_SNDTIMEO 200 ms: EAGAIN in time: True" \
        "$1 full blocking send waits: True" \
        "$1 full send once the rule is gone: 1" \
        "$1 full receiver got: b'y'"
}
out=$(on_udsfs python3 "$LIB_DIR/fault_effects.py" "$MNT")
printf '%s\n' "$out"
expect_eq "what the immediate faults do" "$out" "refuse connect: ECONNREFUSED
refuse counters: matched=1 injected=1
refuse EAGAIN non-blocking connect: EAGAIN
refuse EAGAIN blocking connect with SO_SNDTIMEO 200 ms: EAGAIN in time: True
refuse EAGAIN blocking connect waits: True
refuse EAGAIN blocking connect once the rule is gone: ok
$(full_on stream)
$(full_on dgram)
full writable before the rule: poll, select, epoll: True True True
full writable under the rule: poll, select, epoll: False False False
full poll for POLLOUT waits: True
full poll for POLLOUT once the rule is gone: True after waiting: True
full writable after the rule: poll, select, epoll: True True True
full times=2 non-blocking: messages that met EAGAIN: [True, True, False, False] the first retried often: True each waited the timeout: [True, True]
full times=2 non-blocking counters: matched=4 injected=2
full times=2 blocking: sends that waited the timeout: [True, True, False]
full times=2 blocking counters: matched=3 injected=2
full receiver got: b'ABCDabc'
refuse EAGAIN times=1 connect and retries: ['EAGAIN', 'EAGAIN', 'EAGAIN', 'EAGAIN']
refuse EAGAIN times=1 another connect: ok
refuse EAGAIN times=1 counters: matched=2 injected=1
refuse EAGAIN times=1 the retry once the rule is gone: ok
short_write send of 100: 5
short_write send of 100 with MSG_NOSIGNAL: 5
short_write send of 3: 3
short_write sendall of 12: ok
short_write receiver got: b'ssssstttttabc0123456789ab'
short_write send of 300000: 5
short_write receiver got: b'uuuuu'
short_write counters: matched=7 injected=5
short_write large send: returns 5000 then without the rule 1048576 receiver got 1053576 bytes, the prefix then the whole: True
short_write large send with MSG_NOSIGNAL: returns 5000 then without the rule 1048576 receiver got 1053576 bytes, the prefix then the whole: True
short_write large sendmsg passing a socket: returns 5000 then without the rule 1048576 receiver got 1053576 bytes, the prefix then the whole: True
short_write large write: returns 5000 then without the rule 1048576 receiver got 1053576 bytes, the prefix then the whole: True
short_write large sendall: ok
short_write large sendall: receiver got 1048576 bytes, each once: True counters: matched=210 injected=209
limit_data large send: 5000
limit_data send after it: EPIPE
limit_data large send: receiver got 5000 bytes, the prefix: True
ctrunc send: 3
ctrunc receiver got: b'fds' fds: 0 MSG_CTRUNC: True
ctrunc: the dropped socket's peer reads: b''
ctrunc: the dropped pipe end's reader reads: b''
limit_data send of 7: 7
limit_data send of 6: 3
limit_data next send: EPIPE
limit_data receiver got: b'0123456789' then EOF
limit_data receiver send: EPIPE
limit_data sender reads: b''
done"
expect_eq "rules left after the effects" "$(cat "$U/faults")" ""

# short_write on a data file without the library: write(2) returns the rule's count
# (the daemon's FUSE reply is short; data files are direct_io, so the kernel hands
# it on), also for a write larger than one FUSE request, and for a blocking writer.
out=$(py '
fd, a, b = pair("stream")
wa = os.open(f"{U}/sock/{a}/data", os.O_RDWR)
rb = os.open(f"{U}/sock/{b}/data", os.O_RDWR | os.O_NONBLOCK)
print("add:", faults_write(f"socket {b} up short_write bytes=7\n"))
print("data write of 100:", os.write(wa, b"d" * 100))
print("data write of 300000:", os.write(wa, b"e" * 300000))
print("data write of 7:", os.write(wa, b"f" * 7))
print("reader got:", os.read(rb, 1000))
print("clear:", faults_write("clear\n"))
print("data write of 100 without the rule:", os.write(wa, b"g" * 100))
')
printf '%s\n' "$out"
expect_eq "short_write through a data file" "$out" "add: OK
data write of 100: 7
data write of 300000: 7
data write of 7: 7
reader got: b'dddddddeeeeeeefffffff'
clear: OK
data write of 100 without the rule: 100"

# short_write and limit_data on a stream `msg` record: write(2) reports the header and
# the payload bytes queued, the rest of the record is neither queued nor kept (the
# next bytes written are its payload, as after any partial msg write): a writer that
# follows write(2)'s count sends each byte once, and the reader gets what was reported.
out=$(py '
import hashlib
def sha(b):
    return hashlib.sha256(b).hexdigest()[:16]
fd, a, b = pair("stream")
wm = os.open(f"{U}/sock/{a}/msg", os.O_WRONLY)
rb = os.open(f"{U}/sock/{b}/data", os.O_RDONLY | os.O_NONBLOCK)
def follow(buf):
    """Writes buf as write(2) says (the rest after each short count); the counts."""
    counts = []
    while buf:
        n = os.write(wm, buf)
        counts.append(n)
        buf = buf[n:]
    return counts
print("add:", faults_write(f"socket {b} up short_write bytes=7\n"))
print("record of 100:", os.write(wm, b"len=100\n" + b"r" * 100))
print("reader got:", drain(rb))
print("the rest, as write(2) said:", follow(b"r" * 93)[:3], "...")
print("reader got the rest once:", drain(rb) == b"r" * 93)
two = b"len=10\n0123456789len=3\nabc"
print("two records in one write:", follow(two))
print("reader got:", drain(rb))
# The bytes an earlier write gave were reported: a cut among them does not stop
# the write until some of its own bytes are queued.
print("a record begun:", os.write(wm, b"len=20\n" + b"A" * 10))
print("its rest, as write(2) said:", follow(b"B" * 10))
print("reader got:", drain(rb))
print("clear:", faults_write("clear\n"))
p = os.urandom(300000)
rec = b"len=300000\n" + p
print("add:", faults_write(f"socket {b} up short_write bytes=5000\n"))
n = os.write(wm, rec)
print("record of 300000:", n, "payload queued:", n - 11)
got = drain(rb)
print("reader got:", len(got), "bytes, the prefix:", got == p[:5000])
print("clear:", faults_write("clear\n"))
def read_all(n):
    got = b""
    while len(got) < n:
        time.sleep(0.002)
        got += drain(rb)
    return got
# This handle would take the next bytes as the rest of that payload; a new one
# starts afresh, as the library opens one for each large send.
os.close(wm)
wm = os.open(f"{U}/sock/{a}/msg", os.O_WRONLY)
t, r = in_thread(lambda: read_all(300000))
print("a fresh record of 300000 without the rule:", os.write(wm, rec) == len(rec))
t.join(10)
print("reader got:", len(r.get("n", b"")), "bytes, whole:", r.get("n") == p)
print("add:", faults_write(f"socket {b} up limit_data bytes=1000\n"))
q = os.urandom(300000)
n = os.write(wm, b"len=300000\n" + q)
print("record of 300000 under limit_data:", n, "payload queued:", n - 11)
print("the next write:", err(os.write, wm, q[n - 11:]))
time.sleep(0.1)
got = drain(rb)
print("reader got:", len(got), "bytes, the prefix:", got == q[:1000], "then EOF:", os.read(rb, 10) == b"")
print("clear:", faults_write("clear\n"))
')
printf '%s\n' "$out"
expect_eq "short_write and limit_data through a msg file" "$out" "add: OK
record of 100: 15
reader got: b'rrrrrrr'
the rest, as write(2) said: [7, 7, 7] ...
reader got the rest once: True
two records in one write: [14, 12]
reader got: b'0123456789abc'
a record begun: 17
its rest, as write(2) said: [4, 6]
reader got: b'AAAAAAAAAABBBBBBBBBB'
clear: OK
add: OK
record of 300000: 5011 payload queued: 5000
reader got: 5000 bytes, the prefix: True
clear: OK
a fresh record of 300000 without the rule: True
reader got: 300000 bytes, whole: True
add: OK
record of 300000 under limit_data: 1011 payload queued: 1000
the next write: EPIPE
reader got: 1000 bytes, the prefix: True then EOF: True
clear: OK"

# ---------------------------------------------------------------- 2. against the kernel
kernel_vs_udsfs "$LIB_DIR/fault_peer.py"
for f in reset_peer die_after limit_data; do
    grep -q "fault rule [0-9:]* (name [a-z]*.sock [a-z]* $f" "$LOG" || fail "no log line of a $f injection"
done
ok "each injection is logged with its rule"

# ---------------------------------------------------------------- 3. the file
out=$(py '
F = f"{U}/faults"
print("add:", faults_write("name run/db.sock down full toxicity=0.5 seed=7\n"))
print("add:", faults_write("uid 1000 refuse errno=EAGAIN times=3\n"))
ids = [l.split("\t")[0] for l in open(F)]
def listed():
    text = open(F).read().replace("\t", "|")
    for n, i in enumerate(ids):
        text = text.replace(f"{i}|", f"#{n + 1}|")
    return text
print("list:", listed(), end="")
print("bad number:", faults_write("name x latency latency=1 jitter=x\n"))
print("bad fault:", faults_write("name x slowness\n"))
print("del #1:", faults_write(f"del {ids[0]}\n"))
print("del #1 again:", faults_write(f"del {ids[0]}\n"))
print("list:", listed(), end="")
print("clear:", faults_write("clear\n"))
print("list after clear:", repr(open(F).read()))
dfd, D = clone("dgram")
sfd, S = clone("stream")
print("ctl stream-only fault on dgram:", err(ctl, dfd, "fault short_write bytes=3"))
print("ctl fault on dgram:", err(ctl, dfd, "fault up full"))
print("ctl fault on stream:", err(ctl, sfd, "fault short_write bytes=3"))
print("ctl bad fault:", err(ctl, sfd, "fault down latency latency=q"))
print("listed:", sorted(l.split("\t")[1].replace(f"socket {D} ", "socket D ").replace(f"socket {S} ", "socket S ") for l in open(F)))
os.close(sfd)
os.close(dfd)
time.sleep(0.2)
print("gone with their sockets:", repr(open(F).read()))
')
printf '%s\n' "$out"
expect_eq ".udsfs/faults and ctl fault" "$out" "add: OK
add: OK
list: #1|name run/db.sock down full timeout=0 toxicity=0.5 seed=7|matched=0 injected=0
#2|uid 1000 refuse errno=EAGAIN times=3|matched=0 injected=0
bad number: EINVAL
bad fault: EINVAL
del #1: OK
del #1 again: ENOENT
list: #2|uid 1000 refuse errno=EAGAIN times=3|matched=0 injected=0
clear: OK
list after clear: ''
ctl stream-only fault on dgram: EINVAL
ctl fault on dgram: OK
ctl fault on stream: OK
ctl bad fault: EINVAL
listed: ['socket D up full timeout=0', 'socket S short_write bytes=3']
gone with their sockets: ''"
grep -q "latency: jitter: not a number: 'x'" "$LOG" || fail "the log does not name the bad field"
grep -q "short_write: stream sockets only" "$LOG" || fail "the log does not say why the ctl fault was refused"
ok "refusals are logged naming the field"

# An injection is marked in a capture: a comment naming the rule.
printf 'name cap.sock up short_write bytes=2\n' >"$U/faults"
UDSFS_PRELOAD=$PRELOAD_LIB "$UDSFS_BIN" run --mount "$MNT" --capture "$TMP/fault.pcapng" -- python3 -c '
import os, socket, sys
p = os.path.join(sys.argv[1], "cap.sock")
l = socket.socket(socket.AF_UNIX); l.bind(p); l.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); a, _ = l.accept()
c.sendall(b"hello")
got = b""
while len(got) < 5:
    got += a.recv(10)
assert got == b"hello", got
' "$MNT" || fail "the capture run failed"
printf 'clear\n' >"$U/faults"
grep -aq "fault rule [0-9:]*: short_write send stream" "$TMP/fault.pcapng" ||
    fail "the capture has no comment marking the injection"
ok "the capture marks the injection"

# ---------------------------------------------------------------- 4. two users
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to run as another user"
chmod o+x "$TMP"
PY3=$(python3 -c 'import sys; print(sys.executable)')
CLIENT_PY=$TMP/fault_user.py
with_helpers "$CLIENT_PY" <<'PYEOF'
F = f"{U}/faults"
def connect(name):
    fd, _ = clone("stream")
    return err(ctl, fd, "connect " + name)
mode = sys.argv[1]
if mode == "own":
    lfd, _ = listening("u/l.sock", 8)
    mfd, _ = listening("u/m.sock", 8)
    print("add name * refuse:", faults_write("name * refuse\n"))
    print("connect to my own listener:", connect("u/l.sock"))
    print("connect to root's listener:", connect("r.sock"))
    print("rules I see:", sorted(l.split("\t")[1] for l in open(F)))
    print("del root's rule:", faults_write(f"del {sys.argv[2]}\n"))
    print("clear:", faults_write("clear\n"))
    print("connect to my own listener after clear:", connect("u/l.sock"))
    print("connect to the one root's rule names:", connect("u/m.sock"))
    print("rules I see after clear:", sorted(l.split("\t")[1] for l in open(F)))
PYEOF
mkdir "$MNT/u"
chown 1000:1000 "$MNT/u"
new_sock R stream
ctl "$R_FD" "bind r.sock"
ctl "$R_FD" "listen 8"
chmod 666 "$MNT/r.sock"
printf 'name u/m.sock refuse\n' >"$U/faults"
ROOT_RULE=0:$(cut -f1 "$U/faults") # a rule of another user is named OWNER:N
out=$(as_user 1000 own "$ROOT_RULE")
printf '%s\n' "$out"
expect_eq "a user's rules act on that user's sockets only; root's on every socket" "$out" "add name * refuse: OK
connect to my own listener: ECONNREFUSED
connect to root's listener: OK
rules I see: ['name * refuse errno=ECONNREFUSED', 'name u/m.sock refuse errno=ECONNREFUSED']
del root's rule: EPERM
clear: OK
connect to my own listener after clear: OK
connect to the one root's rule names: ECONNREFUSED
rules I see after clear: ['name u/m.sock refuse errno=ECONNREFUSED']"
expect_eq "root's rule acted on the user's connect only" "$(cut -f3 "$U/faults")" "matched=1 injected=1"
out=$(py '
fd, _ = clone("stream")
print(err(ctl, fd, "connect r.sock"))
')
expect_eq "root's connect to its own listener" "$out" "OK"
printf 'clear\n' >"$U/faults"
expect_eq "root's clear" "$(cat "$U/faults")" ""

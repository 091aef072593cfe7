#!/usr/bin/env bash
# Descriptor exhaustion and trust attacks on the daemon, by unprivileged users of an
# --allow-other mount. The daemon runs with
# RLIMIT_NOFILE 1024, so clients may make it hold at most 512 descriptors
# (src/engine/fds.rs: a quarter and 256 more stay its own), 256 per user
# (--user-share 50). Each attack prints what it tried and what it got:
#  1. pidfd flood: a dgram pair with `passpidfd on`; 3000 times: write one byte, raw
#     UDSFS_IOC_MSG receive without MSGF_ROOM, never claim. The daemon must hold a
#     handful more descriptors, not 3000 (one pin per sending process);
#  2. deposit flood over the fd channel: 253 files per connection on 4 connections;
#     refused past the user's share (ETOOMANYREFS); another user still deposits;
#  3. unclaimed-file flood: deposits sent to the attacker's own receiver and read as
#     records, never claimed: refused past the share as well;
#  4. connection flood: 1000 connections to the fd channel; the ones past the share
#     are refused with ETOOMANYREFS and the daemon's count stays bounded;
#  5. a SIGKILLed parked reader ends within a generous bound while the floods hold
#     their shares (measured and printed);
#  6. squatting: before the mount, user 65534 binds @udsfs-fdpass-PID for the next
#     pids; the daemon picks another name, serves it as .udsfs/fdchannel, and a pipe
#     passed through `udsfs run` arrives while the squatter gets no connection;
#  7. pid reuse: a client connects and exits, a new process gets its pid
#     (kernel.ns_last_pid); the server's SO_PEERPIDFD through `udsfs run` refers to
#     the dead client (pidfd_send_signal: ESRCH), not to the new process;
#  8. pid namespaces: user 65534 in `unshare -p -f --mount-proc`, through `udsfs
#     run`, reads SO_PEERCRED and SCM_CREDENTIALS pids of its own namespace, and its
#     true explicit SCM_CREDENTIALS (its own getpid()) are accepted, not EPERM, and
#     F_SETOWN of its own getpid() gets it SIGURG (F_GETOWN reads it back);
# 10. a file of this mount reached through a bind mount in user 65534's own user and
#     mount namespace (another path, the same mount) is refused as a deposit (EINVAL),
#     as the file reached by the mount's own path is; a plain file is taken (control);
# 11. a connection to the fd channel deposited over itself, then closed: the daemon
#     would hold it (and its thread) for good; refused (EINVAL), after 50 such tries
#     the daemon holds no more descriptors than before;
# 12. a file whose close never ends: user 65534 deposits a file of another FUSE mount
#     whose server then stops answering (here root's second mount, SIGSTOPped: where
#     /dev/fuse is 0666 any user runs such a server through fusermount3), and closes
#     its connection, so the daemon drops the deposit; user 40001's deposit must still
#     be answered (within 3 s) and the mount still read;
#  9. on a mount without --allow-other, user 65534 connects to the fd channel by its
#     usual name: refused with EACCES before anything is read from it.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
export LC_ALL=C

command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
need_preload
PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP"
A=65534
B=40001
LIMIT=1024
BUDGET=512

cat >"$TMP/att.py" <<'PYEOF'
import array, errno, fcntl, os, signal, socket, struct, sys, time
MNT, mode = os.environ["MNT"], sys.argv[1]
U = os.path.join(MNT, ".udsfs")
FILE_TAG = 1 << 63
IOC_MSG = 0xFFF85503
MSG_BUF = 16376
HEAD = "<11I I 256s 253Q"

def name(e):
    return errno.errorcode.get(e, str(e))

def report(**kv):
    print(" ".join(f"{k}={v}" for k, v in kv.items()), flush=True)

def pair(ty):
    f = open(os.path.join(U, ty, "pair"), "rb+", buffering=0)
    n, m = f.read(64).split()
    return f, int(n), int(m)

def channel():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with open(os.path.join(U, "fdchannel")) as f:
        c.connect("\0" + f.read().split("\n")[0])
    return c

def answer(c):
    msg, anc, _, _ = c.recvmsg(8 * 254, socket.CMSG_SPACE(4 * 253))
    if msg[:1] == b"E":
        return "E", struct.unpack("i", msg[1:5])[0]
    if not msg:
        return "EOF", 0
    return msg[:1].decode(), msg[1:]

def deposit(c, fds):
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    return answer(c)

if mode == "pidfd_flood":
    keep, a, b = pair("dgram")
    # (The pair's second socket lives while one of its files is open.)
    w = os.open(os.path.join(U, "sock", str(a), "data"), os.O_WRONLY)
    r = os.open(os.path.join(U, "sock", str(b), "data"), os.O_RDWR)
    with open(os.path.join(U, "sock", str(b), "ctl"), "w") as ctl:
        ctl.write("passpidfd on\n")
    with_file = 0
    for i in range(int(sys.argv[2])):
        os.write(w, b"x")
        head = struct.pack(HEAD, 2, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"", *([0] * 253))
        buf = bytearray(head + bytes(MSG_BUF - len(head)))
        fcntl.ioctl(r, IOC_MSG, buf, True)
        has_creds = struct.unpack_from("<I", buf, 24)[0]
        with_file += (has_creds & 4) != 0
    report(received=int(sys.argv[2]), with_pidfd_file=with_file)
    time.sleep(float(sys.argv[3]))
elif mode == "deposit_flood":
    r, w = os.pipe()
    conns, got, then = [], 0, "none"
    for i in range(int(sys.argv[2])):
        c = channel()
        conns.append(c)
        kind, body = deposit(c, [w] * 253)
        if kind == "T":
            got += len(body) // 8
            continue
        # All or none per request: then one at a time, to find the edge.
        while True:
            kind, body = deposit(c, [w])
            if kind != "T":
                break
            got += 1
        then = name(body) if kind == "E" else kind
        break
    report(deposited=got, then=then)
    time.sleep(float(sys.argv[3]))
elif mode == "unclaimed_flood":
    r, w = os.pipe()
    keep, a, b = pair("dgram")
    fb = os.open(os.path.join(U, "sock", str(b), "msg"), os.O_RDONLY)
    fa = os.open(os.path.join(U, "sock", str(a), "msg"), os.O_WRONLY)
    c = channel()
    held, then = 0, "none"
    for i in range(int(sys.argv[2])):
        kind, body = deposit(c, [w])
        if kind != "T":
            then = name(body) if kind == "E" else kind
            break
        tag = struct.unpack("Q", body)[0] & ~FILE_TAG
        os.write(fa, f"len=1 rights=file:{tag}\nx".encode())
        header = os.read(fb, 8192).split(b"\n")[0].decode()
        held += header.count("file:")
    report(received_unclaimed=held, then=then)
    time.sleep(float(sys.argv[3]))
elif mode == "conn_flood":
    conns, refused = [], {}
    for i in range(int(sys.argv[2])):
        try:
            c = channel()
        except OSError as e:
            refused[name(e.errno)] = refused.get(name(e.errno), 0) + 1
            continue
        c.settimeout(5)
        try:
            # A refused connection has its answer queued already, then EOF.
            c.send(b"C" + struct.pack("Q", FILE_TAG | 1))
        except OSError:
            pass
        try:
            kind, body = answer(c)
        except OSError as e:
            kind, body = "E", e.errno
        if kind == "E" and body == errno.EBADF:
            conns.append(c)
        else:
            k = name(body) if kind == "E" else kind
            refused[k] = refused.get(k, 0) + 1
            c.close()
    report(served=len(conns), refused=",".join(f"{k}:{v}" for k, v in sorted(refused.items())) or "none")
    time.sleep(float(sys.argv[3]))
elif mode == "outsider":
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect("\0udsfs-fdpass-" + sys.argv[2])
    r, w = os.pipe()
    c.settimeout(5)
    try:
        c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
    except OSError:
        pass  # refused already: its answer waits
    try:
        kind, body = answer(c)
    except OSError as e:
        kind, body = "E", e.errno
    report(deposit=name(body) if kind == "E" else kind)
elif mode == "squat":
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    first = int(open("/proc/sys/kernel/ns_last_pid").read()) + 1
    socks = []
    for pid in range(first, first + 4000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.bind(f"\0udsfs-fdpass-{pid}")
            s.listen(16)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            s.close()
    with open(sys.argv[3], "w") as f:
        f.write("accepted=0\n")
    report(squatted=len(socks), first=first, last=first + 3999)
    deadline = time.time() + float(sys.argv[2])
    accepted = 0
    while time.time() < deadline:
        for s in socks:
            try:
                s.accept()[0].close()
                accepted += 1
            except BlockingIOError:
                pass
        # whole or not at all: the script may read it at any moment
        with open(sys.argv[3] + ".new", "w") as f:
            f.write(f"accepted={accepted}\n")
        os.rename(sys.argv[3] + ".new", sys.argv[3])
        time.sleep(0.05)
PYEOF

# shellcheck disable=SC2034 # read by lib.sh
CLIENT_PY=$TMP/att.py
HOLD_WAIT_S=60
daemon_fds() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
field() { sed -n "s/.*\<$2=\([^ ]*\).*/\1/p" "$1"; }
bounded() { # bounded WHAT: the daemon's count stays below its RLIMIT less the reserve
    local n
    n=$(daemon_fds)
    say "  daemon holds $n descriptors (base $BASE, clients' bound $BUDGET, RLIMIT_NOFILE $LIMIT)"
    [ "$n" -lt $((LIMIT - 256)) ] || fail "$1: the daemon holds $n descriptors, at its reserve"
}
# killed_reader_ends WHAT: a reader parked on an empty socket, SIGKILLed, must end.
killed_reader_ends() {
    local n m pid t0
    read -r n m < <(dd bs=64 count=1 status=none <"$U/dgram/pair" 2>/dev/null || true)
    # The pair dies when its handle closes: hold it while the reader waits.
    exec {pairfd}<>"$U/dgram/pair"
    read -r n m <&"$pairfd"
    dd bs=16 count=1 status=none <"$U/sock/$m/data" >/dev/null &
    pid=$!
    wait_parked "$pid"
    t0=$(now_ms)
    kill -9 "$pid"
    ended_within "$pid" 2000 "$t0" || fail "$1: a SIGKILLed parked reader still runs after 2000 ms"
    wait "$pid" 2>/dev/null || true
    eval "exec $pairfd>&-"
    ok "$1: a SIGKILLed parked reader ended in ${ELAPSED_MS} ms"
}

# ---- 6 (first: it must precede the mount). Squatting the channel's name.
mkdir "$TMP/sq" && chown $A "$TMP/sq"
setpriv --reuid=$A --regid=$A --clear-groups "$PY3" "$TMP/att.py" squat 60 "$TMP/sq/result" >"$TMP/squat.out" 2>&1 &
SQUATTER=$!
for _ in $(seq 3000); do [ -s "$TMP/squat.out" ] && break; sleep 0.01; done
say "attack: user $A binds the channel names of the next pids before the mount: $(cat "$TMP/squat.out")"

ulimit -n $LIMIT
udsfs_mount --allow-other
BASE=$(daemon_fds)
SQ_FIRST=$(field "$TMP/squat.out" first)
SQ_LAST=$(field "$TMP/squat.out" last)
CHAN=$(head -n1 "$U/fdchannel")
say "  daemon pid $DAEMON_PID; .udsfs/fdchannel names @$CHAN"
if [ "$DAEMON_PID" -ge "$SQ_FIRST" ] && [ "$DAEMON_PID" -le "$SQ_LAST" ]; then
    [ "$CHAN" != "udsfs-fdpass-$DAEMON_PID" ] || fail "the daemon publishes the squatted name $CHAN"
    grep -q "taken by another process" "$LOG" || fail "no log line for the squatted name"
    ok "squatting: the daemon's usual name was taken; it listens on @$CHAN instead"
else
    fail "the daemon's pid $DAEMON_PID fell outside the squatted range $SQ_FIRST..$SQ_LAST (a busy machine?)"
fi
cat >"$TMP/passpipe.py" <<'PYEOF'
import os, socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
r, w = os.pipe()
socket.send_fds(a, [b"p"], [w])
msg, fds, _, _ = socket.recv_fds(b, 16, 4)
os.write(fds[0], b"through")
print("pipe:", os.read(r, 16).decode())
PYEOF
got=$(on_udsfs python3 "$TMP/passpipe.py" 2>&1) || fail "passing a pipe through udsfs run while squatted: $got"
sleep 0.3
squat=$(cat "$TMP/sq/result" 2>/dev/null || echo 'accepted=?')
kill "$SQUATTER" 2>/dev/null || true
wait "$SQUATTER" 2>/dev/null || true
[ "$got" = "pipe: through" ] || fail "passing a pipe while squatted: got '$got'"
[ "$squat" = accepted=0 ] || fail "squatting: the squatter got connections: $squat"
ok "squatting: a pipe passed through udsfs run arrives ($got); the squatter's listeners: $squat"

# ---- 1. pidfd flood
say "attack: user $A: passpidfd on, 3000 x (write one byte, raw UDSFS_IOC_MSG receive without MSGF_ROOM)"
hold "$TMP/p1" $A pidfd_flood 3000 3600
say "  got: $(cat "$TMP/p1")"
[ "$(field "$TMP/p1" with_pidfd_file)" = 3000 ] || fail "pidfd flood: every message should carry the pinned pidfd: $(cat "$TMP/p1")"
n=$(daemon_fds)
[ "$n" -le $((BASE + 24)) ] || fail "pidfd flood: the daemon went from $BASE to $n descriptors"
ok "pidfd flood: daemon descriptors $BASE -> $n"
bounded "pidfd flood"
release_holders

# ---- 2. deposit flood
say "attack: user $A deposits 253 files per fd-channel connection on 4 connections"
hold "$TMP/d1" $A deposit_flood 4 3600
say "  got: $(cat "$TMP/d1")"
dep=$(field "$TMP/d1" deposited)
[ "$(field "$TMP/d1" then)" = ETOOMANYREFS ] || fail "deposit flood: want ETOOMANYREFS past the share: $(cat "$TMP/d1")"
[ "$dep" -le $((BUDGET / 2)) ] || fail "deposit flood: $dep deposits exceed the share $((BUDGET / 2))"
bounded "deposit flood"
killed_reader_ends "deposit flood"
cat >"$TMP/passpipe_errno.py" <<'PYEOF'
import errno, os, socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
r, w = os.pipe()
try:
    socket.send_fds(a, [b"p"], [w])
    print("sendmsg of a pipe: sent")
except OSError as e:
    print("sendmsg of a pipe:", errno.errorcode.get(e.errno, e.errno))
PYEOF
got=$(on_udsfs setpriv --reuid=$A --regid=$A --clear-groups "$PY3" "$TMP/passpipe_errno.py" 2>&1) || fail "passpipe_errno: $got"
say "  a program of user $A through udsfs run, its share full: $got"
[[ $got == *"sendmsg of a pipe: ETOOMANYREFS" ]] || fail "a sendmsg past the share: want ETOOMANYREFS, got '$got'"
ok "deposit flood: a program of user $A passing a pipe gets ETOOMANYREFS, as Linux past its in-flight limit"
say "attack: user $B deposits while $A holds its share"
hold "$TMP/d2" $B deposit_flood 1 3600
say "  got: $(cat "$TMP/d2")"
[ "$(field "$TMP/d2" deposited)" -ge 200 ] || fail "user $B could not deposit its own share: $(cat "$TMP/d2")"
ok "deposit flood: $A got $dep then ETOOMANYREFS; $B still deposits"
bounded "two deposit floods"
release_holders
say "bound: descriptors held for clients: $BUDGET of RLIMIT_NOFILE $LIMIT, $((BUDGET / 2)) per user (ETOOMANYREFS)"

# ---- 3. unclaimed-file flood
say "attack: user $A sends 1000 files to its own receiver, reads the records, never claims"
hold "$TMP/u1" $A unclaimed_flood 1000 3600
say "  got: $(cat "$TMP/u1")"
held=$(field "$TMP/u1" received_unclaimed)
[ "$held" -le $((BUDGET / 2)) ] || fail "unclaimed flood: $held unclaimed files held, over the share"
[ "$(field "$TMP/u1" then)" = ETOOMANYREFS ] || fail "unclaimed flood: want ETOOMANYREFS: $(cat "$TMP/u1")"
ok "unclaimed flood: $held held, then ETOOMANYREFS"
bounded "unclaimed flood"
killed_reader_ends "unclaimed flood"
release_holders

# ---- 4. connection flood
say "attack: user $A opens 1000 connections to the fd channel"
hold "$TMP/c1" $A conn_flood 1000 3600
say "  got: $(cat "$TMP/c1")"
served=$(field "$TMP/c1" served)
[ "$served" -le $((BUDGET / 2)) ] || fail "connection flood: $served connections served, over the share"
[[ $(field "$TMP/c1" refused) == *ETOOMANYREFS* ]] || fail "connection flood: no ETOOMANYREFS: $(cat "$TMP/c1")"
ok "connection flood: $served served, the rest refused"
bounded "connection flood"
killed_reader_ends "connection flood"
hold "$TMP/c2" $B conn_flood 10 3600
[ "$(field "$TMP/c2" served)" = 10 ] || fail "user $B could not connect during $A's flood: $(cat "$TMP/c2")"
ok "connection flood: user $B still connects ($(cat "$TMP/c2"))"
release_holders

# ---- 7. pid reuse against SO_PEERPIDFD
cp "$LIB_DIR/pid_reuse.py" "$TMP/"
cat >"$TMP/reuse.py" <<'PYEOF'
import os, signal, socket, sys, time
from pid_reuse import fork_with_pid
path = os.path.join(sys.argv[1], "reuse.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
child = os.fork()
if child == 0:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    os._exit(0)
os.waitpid(child, 0)
reuser = fork_with_pid(child, 200)
print("client", child, "exited; new process with its pid:", reuser is not None, flush=True)
conn, _ = srv.accept()
fd = conn.getsockopt(socket.SOL_SOCKET, 77)
try:
    signal.pidfd_send_signal(fd, 0)
    print("SO_PEERPIDFD refers to: the new process")
except ProcessLookupError:
    print("SO_PEERPIDFD refers to: the dead client")
if reuser:
    os.kill(reuser, signal.SIGKILL)
    os.waitpid(reuser, 0)
PYEOF
say "attack: a client connects and exits; a new process gets its pid; the server asks SO_PEERPIDFD"
got=$(on_udsfs python3 "$TMP/reuse.py" "$MNT" 2>&1) || fail "pid reuse: $got"
say "  got: $(tr '\n' ';' <<<"$got")"
[[ $got == *"its pid: True"* ]] || fail "pid reuse: the pid did not recur: $got"
[[ $got == *"refers to: the dead client"* ]] || fail "pid reuse: SO_PEERPIDFD names the process that reused the pid"
ok "pid reuse: SO_PEERPIDFD refers to the dead client (pidfd_send_signal: ESRCH)"
bounded "at the end"

# ---- 8. pid namespaces
cat >"$TMP/pidns.py" <<'PYEOF'
import os, socket, struct
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
pid = struct.unpack("3i", b.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
print(f"SO_PEERCRED pid {pid}, own getpid {os.getpid()}")
b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
a.send(b"x")
_, anc, _, _ = b.recvmsg(16, socket.CMSG_SPACE(12))
print(f"SCM_CREDENTIALS pid {struct.unpack('3i', anc[0][2])[0]}")
try:
    a.sendmsg([b"y"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS,
                        struct.pack("3i", os.getpid(), os.getuid(), os.getgid()))])
    _, anc, _, _ = b.recvmsg(16, socket.CMSG_SPACE(12))
    print(f"explicit true credentials: sent, received pid {struct.unpack('3i', anc[0][2])[0]}")
except OSError as e:
    print(f"explicit true credentials: errno {e.errno}")
import fcntl, signal, time
urg = []
signal.signal(signal.SIGURG, lambda *_: urg.append(1))
s1, s2 = socket.socketpair()
fcntl.fcntl(s2, fcntl.F_SETOWN, os.getpid())
s1.send(b"!", socket.MSG_OOB)
for _ in range(200):
    if urg:
        break
    time.sleep(0.01)
print(f"F_GETOWN {fcntl.fcntl(s2, fcntl.F_GETOWN)}, SIGURG to the owner: {bool(urg)}")
PYEOF
say "attack (of correctness): user $A in a new pid namespace reads and sends credentials"
got=$(on_udsfs unshare -p -f --mount-proc setpriv --reuid=$A --regid=$A --clear-groups "$PY3" "$TMP/pidns.py" 2>&1) ||
    fail "pid namespace: $got"
say "  got: $(tr '\n' ';' <<<"$got")"
want=$'SO_PEERCRED pid 1, own getpid 1\nSCM_CREDENTIALS pid 1\nexplicit true credentials: sent, received pid 1\nF_GETOWN 1, SIGURG to the owner: True'
[ "$got" = "$want" ] || fail "pid namespace: want the namespace's own pids and the true credentials accepted"
ok "pid namespace: SO_PEERCRED, SCM_CREDENTIALS and F_GETOWN in the caller's namespace; true credentials accepted; SIGURG arrives"

# ---- 10. this mount's files by another path
cat >"$TMP/bound.py" <<'PYEOF'
import array, os, socket, struct, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect("\0" + open(sys.argv[1]).read().split("\n")[0])
for path in sys.argv[2:]:
    fd = os.open(path, os.O_RDONLY)
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    msg = c.recv(64)
    got = "E" + str(struct.unpack("i", msg[1:5])[0]) if msg[:1] == b"E" else msg[:1].decode()
    print(f"{path}: {got}")
PYEOF
# (the system's interpreter: in a user namespace a pyenv one under /root is refused)
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PY3
nsuser() { setpriv --reuid=$A --regid=$A --clear-groups unshare -Urm "$@"; }
if nsuser true 2>/dev/null; then
    mkdir -m 0777 "$TMP/bound"
    say "attack: user $A binds the mount elsewhere in its own namespaces and deposits its files"
    # shellcheck disable=SC2016 # expanded by the inner sh
    got=$(nsuser sh -c 'mount --bind "$1" "$2" && exec "$3" "$4" "$1/.udsfs/fdchannel" "$2/.udsfs/unix" "$1/.udsfs/unix" /etc/hosts' \
        sh "$MNT" "$TMP/bound" "$SYSPY" "$TMP/bound.py" 2>&1) || fail "bind-mount deposit: $got"
    say "  got: $(tr '\n' ';' <<<"$got")"
    [ "$got" = "$TMP/bound/.udsfs/unix: E22
$MNT/.udsfs/unix: E22
/etc/hosts: T" ] || fail "a file of this mount by another path was deposited (want EINVAL): $got"
    ok "bind mount: this mount's file by another path is refused (EINVAL), a plain file taken"
else
    say "  (user namespaces are off for user $A: the bind-mount deposit is not tried)"
fi

# ---- 11. a channel connection deposited over itself
cat >"$TMP/cycle.py" <<'PYEOF'
import array, os, socket, struct, sys
name = "\0" + open(sys.argv[1]).read().split("\n")[0]
got = {}
for i in range(50):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(name)
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [c.fileno()]))])
    m = c.recv(64)
    k = "E" + str(struct.unpack("i", m[1:5])[0]) if m[:1] == b"E" else m[:1].decode()
    got[k] = got.get(k, 0) + 1
    c.close()
print(" ".join(f"{k}:{v}" for k, v in sorted(got.items())))
PYEOF
before=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
say "attack: user $A deposits 50 channel connections each over itself, then closes them"
got=$(setpriv --reuid=$A --regid=$A --clear-groups "$PY3" "$TMP/cycle.py" "$U/fdchannel" 2>&1) || fail "self-deposit: $got"
sleep 0.5
after=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
say "  got: $got; daemon descriptors $before before, $after after"
[ "$got" = "E22:50" ] || fail "a channel connection was deposited over itself: $got"
[ "$after" -le $((before + 2)) ] || fail "the daemon kept $((after - before)) descriptors of closed connections"
ok "self-deposit: refused (EINVAL); the daemon keeps nothing"

# ---- 12. a deposit whose close never ends
cat >"$TMP/stuck.py" <<'PYEOF'
import array, os, socket, sys, time
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect("\0" + open(sys.argv[1]).read().split("\n")[0])
c.settimeout(3)
if sys.argv[2] == "deposit-and-wait":
    fd = os.open(sys.argv[3], os.O_RDONLY)
    c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    print("deposit", c.recv(64)[:1].decode(), flush=True)
    os.close(fd)
    while not os.path.exists(sys.argv[4]):
        time.sleep(0.02)
    c.close()
    print("closed", flush=True)
else:
    r, w = os.pipe()
    t = time.time()
    try:
        c.sendmsg([b"D"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
        got = c.recv(64)[:1].decode()
    except OSError as e:
        got = type(e).__name__
    print(f"deposit of user {os.getuid()}: {got}", flush=True)
PYEOF
M2=$TMP/mnt2
mkdir -m 0755 "$M2"
out=$(timeout 30 "$UDSFS_BIN" mount --background --allow-other --log-file "$TMP/log2" "$M2" </dev/null) || fail "second mount: $out"
D2=$(tail -n1 <<<"$out" | tr -d '[:space:]')
mkdir -m 0777 "$TMP/stuck"
setpriv --reuid=$A --regid=$A --clear-groups "$PY3" "$TMP/stuck.py" "$U/fdchannel" deposit-and-wait "$M2/.udsfs/unix" "$TMP/stuck/go" >"$TMP/stuck.out" 2>&1 &
STUCK=$!
for _ in $(seq 250); do grep -q deposit "$TMP/stuck.out" && break; sleep 0.02; done
kill -STOP "$D2"
touch "$TMP/stuck/go"
wait "$STUCK" || true
sleep 0.5
say "attack: user $A deposits a file of a FUSE mount whose server then stops, and closes its connection"
got=$(setpriv --reuid=$B --regid=$B --clear-groups "$PY3" "$TMP/stuck.py" "$U/fdchannel" other 2>&1)
read_ok=$(timeout 3 setpriv --reuid=$B --regid=$B --clear-groups cat "$U/unix" >/dev/null 2>&1 && echo yes || echo no)
kill -CONT "$D2"
timeout 10 "$UDSFS_BIN" umount "$M2" >/dev/null 2>&1 || umount -l "$M2" || true
say "  got: $(tr '\n' ';' <"$TMP/stuck.out") then $got; the mount read by user $B: $read_ok"
grep -q "deposit T" "$TMP/stuck.out" || fail "the stuck-close setup: the deposit was not taken: $(cat "$TMP/stuck.out")"
[ "$got" = "deposit of user $B: T" ] || fail "a close stuck in another FUSE server stopped the fd channel for user $B: $got"
[ "$read_ok" = yes ] || fail "a close stuck in another FUSE server stopped the mount"
ok "stuck close: user $B's deposit answered, the mount answers"

# ---- 9. who may use the fd channel of a private mount
udsfs_unmount
udsfs_mount
say "attack: user $A deposits a file over the fd channel of root's mount without --allow-other"
got=$(as_user $A outsider "$DAEMON_PID" 2>&1) || fail "outsider: $got"
say "  got: $got"
[ "$got" = "deposit=EACCES" ] || fail "a user who may not use the mount reached its fd channel: $got"
grep -q "may not use this mount" "$LOG" || fail "no log line for the refused user"
ok "private mount: the fd channel refuses user $A (EACCES)"

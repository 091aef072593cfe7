#!/usr/bin/env bash
# adversarial_lanes2.sh: user B (uid 61052) against what the last session built, on a
# shared --allow-other --lanes mount where user A (uid 61051) runs its programs. Each
# case prints what B tried and what A got:
#  route_unlink  A binds a routed socket in A's sticky world-writable directory (1777,
#               A's) after B's own routed bind there made the mount's copy of it (so B
#               owns the copy); B's program through the supervisor (`udsfs run --front
#               seccomp --route`), then through the library, unlinks A's socket path:
#               Linux says EPERM (sticky: not B's file, not B's directory) and A's
#               clients still reach A. Both fronts (calls/src/routed.rs `remove`)
#               removed the node in the mount first, as B, where B's copy of the
#               directory let it, and answered 0 since "either gone is a success": A's
#               clients got ECONNREFUSED.
#  route_squat  B makes A's routed directory in the mount itself (mkdir -p, 0777) before
#               A's program binds in its own 0700 directory there; B then moves A's node
#               aside on the mount and binds its own socket at that name: A's client,
#               connecting to A's own path, must reach A's server (Linux: B cannot even
#               enter A's directory), not B's.
#  route_mntns  B, root of a user and mount namespace of its own (unshare -Urm), mounts a
#               tmpfs of its own over the kernel directory that holds A's 0700 one and
#               makes there a 0777 directory of the same name, then binds through the
#               mount's own files (a ctl file's "bind") at a name in the mount's copy
#               of A's directory: the daemon must not take the copy's owner and mode
#               from what B's namespace shows (B's 0777): the copy stays A's 0700, B's
#               bind is EACCES and A's client reaches A.
#  route_ancestor B made the mount's directory above A's route first (plain, B's 0777) and
#               A's routed directory's copy in it; A's `udsfs run --route` of its 0700
#               directory declares it to the daemon, and A binds there. B then moves
#               the copy of A's directory aside in B's directory above it, makes
#               its own in its place and binds its socket at A's name: A's client
#               must reach A (Linux: B cannot move a directory in root's 0755 one).
#               A declaration kept on the node would stay with the copy moved aside
#               (B's new one: no copy, B's, A's client reaches B); the directories
#               above a route root are copies too, root's 0755 from A's declaration
#               on, so B's move is EACCES.
#  plain_copies A, on the mount without a route, makes M/run (where the kernel has
#               root's /run) 0711 and its own directory in it, binds a socket there and
#               connects to it: the copies stay A's as made, as on a mount with no
#               routes (a directory is a copy of the kernel's only at, above or below a
#               declared route root).
#  route_dgram  B made, before A's route was declared, its own copy of A's 0700 directory
#               below A's route root (plain then, B's 0777) and bound a datagram socket
#               in it; A's run declares the route (which corrects the root's copy, not
#               the ones below it) and A's program sends a datagram to that name before
#               any bind or stream connect below the root: B must get nothing (Linux:
#               ENOENT, B could not bind in A's directory). A datagram send that walked
#               the copies as they were gave B A's datagram.
#  userns_share B as root of a user namespace of its own (unshare -Ur) takes laned pairs
#               until refused: its share (204), as outside it, not root's (no share):
#               holds (a lane is charged to the connection's maker's uid as the daemon
#               sees it); with the payer made root it printed 4096 (checked).
#  share_draining B takes its share of lanes (--user-share 5: 204), holds each region's
#               busy word up and starts every way down (an open of the data file), then
#               asks for more within 450 ms, while its lanes still wait in the daemon
#               (regions mapped) for BUSY_WAIT: none may come (lane.rs `lane_end` gave
#               the share back at the way down's start: 40 more, the daemon mapping 245).
#  sigio_ns     B, root of a user and pid namespace of its own (unshare -Upfr) with the
#               library, makes its child's pid there the number A's process has in the
#               daemon's (ns_last_pid), owns a udsfs socket by it (F_SETOWN, O_ASYNC)
#               and sends to it: A's process must get no SIGIO. Holds (the owner is not
#               mapped out of B's namespace, and the setter's uid is checked); with both
#               weakened (pidns.rs owner_from_task, urg.rs uid_may_signal) A got SIGIO 1.
#  hup_drained  A's server waits in epoll (selectors, through the library) on B's
#               laned connections (arg 5 asked by B raw, arg 6 by A's library); B takes
#               both ends' eventfds (arg 4), and a child of B spins reading A's while B
#               closes its socket: A must see each EOF at once (within 1 s), as it does
#               when B closes without that child (checked first); so too with A waiting
#               in poll, and in a blocking recv per connection. (Before each end had a
#               daemon-only eventfd: 2-5 of 10 EOFs 1.4 s late or never, in epoll.)
#  head_lie     B's one laned connection to A's epoll server: B writes A's published
#               head word of the ring B writes (only A's reader writes it) one behind
#               B's tail and wakes A once through A's eventfd: the look at the region's
#               words said readable, A's read EAGAIN, and A's loop spun (83 ticks of CPU
#               in 2 s); A must stay idle (as after the wake-up alone, checked first):
#               its read finds the lie, ECONNRESET.
# A case listed in integration/adversarial_lanes2_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other --lanes --user-share 5) # (5%: B fills its share of lanes, 204, in a moment)
source "$(dirname "$0")/lib.sh"

attack_users adversarial_lanes2 61051 61052
# B's raw moves (the library's own requests, without it)
with_helpers "$TMP/lanes.py" lane_raw.py <"$LIB_DIR/adversarial_lanes.py"
chmod 644 "$TMP/lanes.py"
# (verdict CASE OK WHAT: lib.sh, against $EXCEPTIONS)

# py NAME: a python program from stdin, readable by A and B.
py() {
    cat >"$TMP/$1"
    chmod 644 "$TMP/$1"
}
py serve.py <<'PY'
# serve.py PATH WORD N: binds PATH, answers WORD to each of N connections, prints each.
import os, socket, sys
path, word, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(8)
print("listening", flush=True)
for _ in range(n):
    c, _ = s.accept()
    c.sendall(word)
    c.close()
PY
py ask.py <<'PY'
# ask.py PATH: connects to PATH and prints what it answers, or the errno.
import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    print("got", s.recv(100).decode() or "EOF", flush=True)
except OSError as e:
    print("connect:", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
py unlink.py <<'PY'
# unlink.py PATH: unlinks PATH, prints 0 or the errno.
import errno, os, sys
try:
    os.unlink(sys.argv[1])
    print("unlink: 0", flush=True)
except OSError as e:
    print("unlink:", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
# run_as UID ROUTE... -- PROGRAM ARGS: the program through `udsfs run --front seccomp`
# with each ROUTE routed (-: none), as UID.
run_as() {
    local uid=$1 routes=()
    shift
    while [ "$1" != -- ]; do
        [ "$1" = - ] || routes+=(--route "$1")
        shift
    done
    shift
    # (umask 0: B wants its copies of directories as open as the kernel's; A's own
    # programs' umask does not matter here)
    as_uid "$uid" sh -c 'umask 0; exec "$@"' - env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front "${FRONT:-seccomp}" \
        "${routes[@]}" -- /usr/bin/python3 "$TMP/$1" "${@:2}"
}
# try_serve_as UID OUT ROUTE -- PATH WORD N: A's or B's server in the background, waited
# for until it listens or ends (a bind refused); serve_as: one that must be up.
try_serve_as() {
    local uid=$1 out=$2 route=$3
    shift 4
    run_as "$uid" "$route" -- serve.py "$@" >"$out" 2>&1 &
    servers+=($!)
    for _ in $(seq 1000); do
        grep -q listening "$out" && break
        kill -0 "${servers[-1]}" 2>/dev/null || break
        sleep 0.01
    done
}
serve_as() {
    try_serve_as "$@"
    grep -q listening "$2" || fail "no server as $1: $(cat "$2")"
}

servers=()
stop_servers() {
    kill "${servers[@]}" 2>/dev/null || true
    wait "${servers[@]}" 2>/dev/null || true
    servers=()
}

# route_unlink
R=$TMP/r1
mkdir -m 755 "$R"
mkdir -m 1777 "$R/pub"
chown "$A:$A" "$R/pub"
serve_as $B "$TMP/b1.out" "$R" -- "$R/pub/b.sock" B 0
serve_as $A "$TMP/a1.out" "$R" -- "$R/pub/a.sock" A 2
serve_as $A "$TMP/a1l.out" "$R" -- "$R/pub/a2.sock" A 1
say "the mount's copy of A's sticky directory: $(stat -c '%A %u' "$MNT$R/pub"); the kernel's: $(stat -c '%A %u' "$R/pub")"
before=$(run_as $A "$R" -- ask.py "$R/pub/a.sock" 2>&1)
got=$(run_as $B "$R" -- unlink.py "$R/pub/a.sock" 2>&1)
lib=$(FRONT=preload run_as $B "$R" -- unlink.py "$R/pub/a2.sock" 2>&1)
after=$(run_as $A "$R" -- ask.py "$R/pub/a.sock" 2>&1)
after2=$(run_as $A "$R" -- ask.py "$R/pub/a2.sock" 2>&1)
say "A's client before: $before; B's unlink of A's $R/pub/a.sock: $got, of a2.sock through the library: $lib; A's clients after: $after, $after2"
verdict route_unlink "$([ "$got" = "unlink: EPERM" ] && [ "$lib" = "unlink: EPERM" ] && [ "$after" = "got A" ] && [ "$after2" = "got A" ] && echo 1)" \
    "B's unlink of A's socket paths in A's sticky directory: supervised $got, through the library $lib (Linux: EPERM); A's clients after them: $after, $after2 (before: $before)"
stop_servers

# route_squat
R=$TMP/r2
mkdir -m 755 "$R"
mkdir -m 700 "$R/adir"
chown "$A:$A" "$R/adir"
# (B's mkdir in the copy of root's $TMP is refused once that copy carries the kernel's
# owner and mode; B's copy is then made by root for B, as if B had made it first)
squat=$(as_uid $B mkdir -m 777 -p "$MNT$R/adir" 2>&1 && echo made) || true
if [ ! -d "$MNT$R/adir" ]; then
    mkdir -p "$MNT$R/adir" && chown "$B:$B" "$MNT$R/adir" "$MNT$R"
fi
chmod 777 "$MNT$R" "$MNT$R/adir"
say "B's mkdir -p of the copy: ${squat:-made}; the copies before A binds: $(stat -c '%A %u' "$MNT$R" "$MNT$R/adir" | tr '\n' ' ')"
serve_as $A "$TMP/a2.out" "$R" -- "$R/adir/a.sock" A 2
say "the mount's copy of A's 0700 directory: $(stat -c '%A %u' "$MNT$R/adir"); the kernel's: $(stat -c '%A %u' "$R/adir")"
before=$(run_as $A "$R" -- ask.py "$R/adir/a.sock" 2>&1)
moved=$(as_uid $B mv "$MNT$R/adir/a.sock" "$MNT$R/adir/aside" 2>&1 && echo moved) || true
# B's server at A's name, if B may bind there (Linux: EACCES)
try_serve_as $B "$TMP/b2.out" - -- "$MNT$R/adir/a.sock" B 1
bbind=$(tail -n 1 "$TMP/b2.out")
after=$(run_as $A "$R" -- ask.py "$R/adir/a.sock" 2>&1)
say "A's client before: $before; B's move of A's node aside: $moved; B's bind at its name: $bbind; A's client after: $after"
# Linux on the same steps, on the kernel's tree: B's mkdir, move and bind in A's 0700 directory
linux=$(as_uid $B sh -c 'mkdir "$1/adir/x" 2>&1; mv "$1/adir/a.sock" "$1/adir/aside" 2>&1; python3 -c "
import socket, sys
try:
    socket.socket(socket.AF_UNIX).bind(sys.argv[1]); print(\"bind: 0\")
except OSError as e:
    print(\"bind:\", e.strerror)" "$1/adir/b.sock"' - "$R" | tr '\n' ';')
say "Linux, B in A's 0700 directory: $linux"
grep -q "mkdir.*Permission denied;mv.*Permission denied;bind: Permission denied" <<<"$linux" ||
    fail "route_squat: Linux let B in A's 0700 directory: $linux"
verdict route_squat "$([ "$after" = "got A" ] && echo 1)" \
    "B made A's routed directory in the mount first; A's client after B moved A's node and bound its own: $after (Linux: got A; before: $before)"
stop_servers

# route_mntns
R=$TMP/r3
mkdir -m 755 "$R" "$R/in"
mkdir -m 700 "$R/in/adir"
chown "$A:$A" "$R/in/adir"
serve_as $A "$TMP/a3.out" "$R" -- "$R/in/adir/a.sock" A 1
py ctlbind.py <<'PY'
# ctlbind.py PATH: binds a new stream socket to PATH through the mount's own files (its
# ctl file's "bind"), prints "bind: 0" or the errno.
import errno, os, sys
u = os.environ["U"]
h = os.open(u + "/stream/clone", os.O_RDWR)
n = int(os.read(h, 64))
c = os.open("%s/sock/%d/ctl" % (u, n), os.O_WRONLY)
try:
    os.write(c, b"bind " + sys.argv[1].encode() + b"\n")
    print("bind: 0", flush=True)
except OSError as e:
    print("bind:", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
got=$(as_uid $B unshare -Urm sh -c 'mount -t tmpfs -o mode=755 none "$1/in" && mkdir -m 777 "$1/in/adir" &&
    echo "B sees $(stat -c "%A %u" "$1/in/adir")" && U="$2" exec python3 "$3" "$4"' - \
    "$R" "$U" "$TMP/ctlbind.py" "$MNT$R/in/adir/b.sock" 2>&1 | tr '\n' ' ') || true
copy=$(stat -c '%A %u' "$MNT$R/in/adir")
after=$(run_as $A "$R" -- ask.py "$R/in/adir/a.sock" 2>&1)
say "B in a mount namespace of its own, A's directory shown as its own 0777: $got; the mount's copy then: $copy; A's client: $after"
verdict route_mntns "$(grep -q 'bind: EACCES' <<<"$got" && [ "$copy" = "drwx------ $A" ] && [ "$after" = "got A" ] && echo 1)" \
    "B's bind in the copy of A's 0700 directory from a mount namespace showing it as B's 0777: $got; the copy after: $copy (A's: drwx------ $A); A's client: $after"
stop_servers

# route_ancestor
R=$TMP/r4
mkdir -m 755 "$R"
mkdir -m 700 "$R/adir"
chown "$A:$A" "$R/adir"
# (B's copy of $R is made by root for B, as if B had made it before any route was
# declared: the copy of root's $TMP is a copy by now, above the routes above)
mkdir -p "$MNT$R" && chown "$B:$B" "$MNT$R" && chmod 777 "$MNT$R"
squat=$(as_uid $B mkdir -m 777 "$MNT$R/adir" 2>&1 && echo made) || true
say "B's copies before A's run: $(stat -c '%A %u' "$MNT$R" "$MNT$R/adir" | tr '\n' ' ')(B's mkdir of A's: ${squat})"
serve_as $A "$TMP/a4.out" "$R/adir" -- "$R/adir/a.sock" A 2
say "after A's declaration and bind: $(stat -c '%A %u' "$MNT$R" "$MNT$R/adir" | tr '\n' ' ')"
before=$(run_as $A "$R/adir" -- ask.py "$R/adir/a.sock" 2>&1)
moved=$(as_uid $B mv "$MNT$R/adir" "$MNT$R/aside" 2>&1 && echo moved) || true
made=$(as_uid $B mkdir -m 777 "$MNT$R/adir" 2>&1 && echo made) || true
try_serve_as $B "$TMP/b4.out" - -- "$MNT$R/adir/a.sock" B 1
bbind=$(tail -n 1 "$TMP/b4.out")
after=$(run_as $A "$R/adir" -- ask.py "$R/adir/a.sock" 2>&1)
say "A's client before: $before; B's move of the copy of A's directory: $moved; B's own in its place: $made; B's bind at A's name: $bbind; A's client after: $after"
verdict route_ancestor "$([ "$after" = "got A" ] && echo 1)" \
    "B moved the copy of A's routed directory aside in B's directory above it and bound at A's name: A's client got: $after (Linux: got A; before: $before)"
stop_servers

# plain_copies
mkdir_a=$(as_uid $A sh -c 'mkdir -m 711 "$1/run" && mkdir -m 700 "$1/run/ap"' - "$MNT" 2>&1 && echo made) || true
serve_as $A "$TMP/a5.out" - -- "$MNT/run/ap/p.sock" A 1
asked=$(run_as $A - -- ask.py "$MNT/run/ap/p.sock" 2>&1)
copies=$(stat -c '%A %u' "$MNT/run" "$MNT/run/ap" | tr '\n' ' ')
say "A's mkdir of M/run 0711 and M/run/ap 0700 on the mount without routes: $mkdir_a; its bind and connect there: $asked; the directories then: $copies(the kernel's /run: $(stat -c '%A %u' /run))"
verdict plain_copies "$([ "$mkdir_a" = made ] && [ "$asked" = "got A" ] && [ "$copies" = "drwx--x--x $A drwx------ $A " ] && echo 1)" \
    "A's own M/run and M/run/ap after A's bind and connect below them: $copies(made as drwx--x--x $A drwx------ $A; connect: $asked)"
stop_servers

# route_dgram
py dgserve.py <<'PY'
# dgserve.py PATH SECS: binds a datagram socket at PATH, prints what it receives in SECS s.
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(float(sys.argv[2]))
print("listening", flush=True)
try:
    print("got", s.recv(100).decode(), flush=True)
except socket.timeout:
    print("got nothing", flush=True)
PY
py dgsend.py <<'PY'
# dgsend.py PATH: sends a datagram to PATH, prints "sent" or the errno.
import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.sendto(b"A's secret", sys.argv[1])
    print("sent", flush=True)
except OSError as e:
    print("sendto:", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
R=$TMP/r5
mkdir -m 755 "$R"
mkdir -m 700 "$R/adir"
chown "$A:$A" "$R/adir"
# (B's copy of $R made by root for B, as in route_ancestor; $R is no route yet)
mkdir -p "$MNT$R" && chown "$B:$B" "$MNT$R" && chmod 777 "$MNT$R"
as_uid $B mkdir -m 777 "$MNT$R/adir"
run_as $B - -- dgserve.py "$MNT$R/adir/log" 5 >"$TMP/b6.out" 2>&1 &
bserver=$!
for _ in $(seq 500); do grep -q listening "$TMP/b6.out" && break; sleep 0.01; done
say "B's copies and datagram socket before A's run: $(stat -c '%A %u' "$MNT$R" "$MNT$R/adir" | tr '\n' ' ')$(head -n 1 "$TMP/b6.out")"
sent=$(run_as $A "$R" -- dgsend.py "$R/adir/log" 2>&1)
wait $bserver || true
bgot=$(tail -n 1 "$TMP/b6.out")
say "A's datagram to its own $R/adir/log: $sent; B's socket: $bgot; the copies then: $(stat -c '%A %u' "$MNT$R" "$MNT$R/adir" | tr '\n' ' ')"
verdict route_dgram "$([ "$bgot" = "got nothing" ] && grep -qE 'sendto: (ENOENT|ECONNREFUSED)' <<<"$sent" && echo 1)" \
    "A's datagram to a name in the copy of its 0700 directory B made before A's route was declared: A: $sent, B: $bgot (Linux: sendto ENOENT, B nothing)"

# userns_share: B as root of a user namespace of its own takes lanes until refused
got=$(as_uid $B unshare -Ur env MNT="$MNT" U="$U" python3 "$TMP/lanes.py" take_lanes 5000 0 2>&1) ||
    fail "B's lanes in a user namespace: $got"
own=$(as_uid $B env MNT="$MNT" U="$U" python3 "$TMP/lanes.py" take_lanes 5000 0 2>&1) ||
    fail "B's lanes: $own"
n=$(awk '{ print $3 }' <<<"$got")
verdict userns_share "$([ "$n" -le 204 ] && echo 1)" \
    "B as root of its own user namespace: $got; B outside it: $own (its share: 204 of the mount's 4096)"

# share_draining
lane_maps() { grep -c udsfs-lane "/proc/$DAEMON_PID/maps" || true; }
as_uid $B env MNT="$MNT" U="$U" python3 "$TMP/lanes.py" share_draining 0.45 2 >"$TMP/sd.out" 2>&1 &
sd_pid=$!
for _ in $(seq 6000); do [ -s "$TMP/sd.out" ] && break; sleep 0.01; done
maps=$(lane_maps)
wait $sd_pid || fail "B's share_draining: $(cat "$TMP/sd.out")"
say "B: $(cat "$TMP/sd.out"); the daemon then mapped $maps lane regions"
more=$(sed -n 's/.*of that: \([0-9]*\) .*/\1/p' "$TMP/sd.out")
# (an ask begun in the window may be granted after the first way down ended, 50 ms
# later: one is allowed; without the fix 40 came. Opens slower than the window leave
# no ask in it: said, not failed)
grep -q "0 (the window closed)" "$TMP/sd.out" && say "share_draining: inconclusive: B's opens outlasted the window"
verdict share_draining "$([ "${more:-2}" -le 1 ] && echo 1)" \
    "B's share of lanes held while their ways down wait on its busy words: $(cat "$TMP/sd.out"); the daemon's lane mappings then: $maps"

# sigio_ns: B names, from a pid namespace of its own, a pid that is A's in the daemon's
py victim.py <<'PY'
# victim.py SECONDS: counts SIGIO for SECONDS, printing its pid first and the count last.
import os, signal, sys, time
got = []
signal.signal(signal.SIGIO, lambda *_: got.append(1))
print(os.getpid(), flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    time.sleep(0.05)
print("A's process: SIGIO", len(got), flush=True)
PY
py sigio_ns.py <<'PY'
# sigio_ns.py P: in a pid namespace of its own (root of its user namespace), makes its
# child's pid there P (ns_last_pid), then a socketpair whose end is owned by the child
# (F_SETOWN P, O_ASYNC) and one message to that end.
import fcntl, os, signal, socket, sys, time
P = int(sys.argv[1])
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(P - 1))
r, w = os.pipe()
child = os.fork()
if child == 0:
    got = []
    signal.signal(signal.SIGIO, lambda *_: got.append(1))
    os.write(w, b"x")
    time.sleep(1.5)
    print(f"B's child (pid {os.getpid()} in B's namespace): SIGIO {len(got)}", flush=True)
    os._exit(0)
os.read(r, 1)
a, b = socket.socketpair()
kind = "udsfs" if "/.udsfs/" in os.readlink(f"/proc/self/fd/{a.fileno()}") else "kernel"
fcntl.fcntl(a, fcntl.F_SETOWN, child)
fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) | os.O_ASYNC)
b.send(b"x")
print(f"B: a {kind} socket owned by its child, pid {child} in B's namespace (A's is {P} in the daemon's)", flush=True)
os.waitpid(child, 0)
PY
as_uid $A /usr/bin/python3 "$TMP/victim.py" 4 >"$TMP/victim.out" 2>&1 &
victim=$!
for _ in $(seq 500); do [ -s "$TMP/victim.out" ] && break; sleep 0.01; done
P=$(head -1 "$TMP/victim.out")
got=$(as_uid $B unshare -Upfr --mount-proc env LD_PRELOAD="$PRELOAD_LIB" UDSFS_MOUNT="$MNT" \
    /usr/bin/python3 "$TMP/sigio_ns.py" "$P" 2>&1) || fail "B's sigio_ns: $got"
wait $victim
say "$got"
say "$(tail -1 "$TMP/victim.out")"
grep -q "udsfs socket owned by its child, pid $P " <<<"$got" || fail "sigio_ns: B's child did not get A's pid number: $got"
verdict sigio_ns "$(grep -qx "A's process: SIGIO 0" "$TMP/victim.out" && echo 1)" \
    "B's udsfs socket owned, in B's pid namespace, by pid $P, A's process's pid in the daemon's: $(tail -1 "$TMP/victim.out") (B: $(tr '\n' '|' <<<"$got"))"

# hup_drained
py epoll_server.py <<'PY'
# epoll_server.py NAME N [WAY]: A's server in a selectors (epoll) loop on @NAME,
# nonblocking: prints each EOF (or error) with its time (CLOCK_MONOTONIC); ends after
# the N-th. WAY poll: a poll() loop instead; block: a thread per connection in a
# blocking recv.
import errno, os, selectors, socket, sys, threading, time
name, n = sys.argv[1], int(sys.argv[2])
way = sys.argv[3] if len(sys.argv) > 3 else "epoll"
sel = selectors.PollSelector() if way == "poll" else selectors.DefaultSelector()
lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lst.bind("\0" + name)
lst.listen(16)
if way == "block":
    print("listening blocking", os.getpid(), flush=True)

    def reader(c, i):
        try:
            while c.recv(100):
                pass
            print(f"eof {i} {time.monotonic():.3f}", flush=True)
        except OSError as e:
            print(f"error {i} {errno.errorcode.get(e.errno)}", flush=True)

    ts = []
    for i in range(1, n + 1):
        c, _ = lst.accept()
        ts.append(threading.Thread(target=reader, args=(c, i)))
        ts[-1].start()
    for t in ts:
        t.join()
    sys.exit(0)
lst.setblocking(False)
sel.register(lst, selectors.EVENT_READ, 0)
print("listening", type(sel).__name__, os.getpid(), flush=True)
got = accepted = 0
while got < n:
    for key, _ in sel.select():
        if key.data == 0:
            c, _ = lst.accept()
            c.setblocking(False)
            accepted += 1
            sel.register(c, selectors.EVENT_READ, accepted)
            continue
        try:
            d = key.fileobj.recv(100)
        except BlockingIOError:
            continue
        except OSError as e:
            d = b""
            print(f"error {key.data} {errno.errorcode.get(e.errno)}", flush=True)
        if not d:
            print(f"eof {key.data} {time.monotonic():.3f}", flush=True)
            sel.unregister(key.fileobj)
            key.fileobj.close()
            got += 1
PY
N=10
declare -A hup_server hup_client
# hup_start MODE [WAY]: starts A's server (waiting in epoll, or WAY poll or block) and
# B's N connections, B draining A's eventfd at each close (MODE drain) or not (nodrain).
hup_start() {
    local run=$1${2:-}
    as_uid $A env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
        /usr/bin/python3 "$TMP/epoll_server.py" "hup$run$$" $N "${2:-epoll}" >"$TMP/hs.$run.out" 2>&1 &
    hup_server[$run]=$!
    for _ in $(seq 1000); do grep -q listening "$TMP/hs.$run.out" && break; sleep 0.01; done
    as_uid $B env MNT="$MNT" U="$U" python3 "$TMP/lanes.py" hup_drain "hup$run$$" $N 1 "$1" >"$TMP/hc.$run.out" 2>&1 &
    hup_client[$run]=$!
}
# hup_end MODE [WAY]: waits for hup_start's run to end; sets late (ms from B's close to
# A's EOF, each connection), missed (how many came later than 1 s, or never) and laned.
hup_end() {
    local run=$1${2:-}
    local hs=$TMP/hs.$run.out hc=$TMP/hc.$run.out
    wait "${hup_client[$run]}" || fail "B's client: $(cat "$hc")"
    for _ in $(seq 30); do [ "$(grep -c '^eof' "$hs")" -ge $N ] && break; sleep 0.1; done
    kill "${hup_server[$run]}" 2>/dev/null || true
    wait "${hup_server[$run]}" 2>/dev/null || true
    say "B ($1 ${2:-epoll}): $(tr '\n' '|' <"$hc")"
    say "A: $(tr '\n' '|' <"$hs")"
    late=$(awk '/^closed/ { c[$2] = $3 } /^eof/ { e[$2] = $3 } END {
        for (i = 1; i <= '$N'; i++) printf "%s ", (i in e) ? sprintf("%.0f", (e[i] - c[i]) * 1000) : "never"
    }' "$hc" "$hs")
    missed=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "never" || $i > 1000) n++ } END { print n + 0 }' <<<"$late")
    laned=$(grep -c "lane direct, A's eventfd: yes" "$hc" || true)
}
# Without B's drain A sees each EOF at once (else the failure below is not B's doing).
hup_start nodrain
hup_end nodrain
[ "$missed" = 0 ] && [ "$laned" = $N ] ||
    fail "hup_drained: without B's drain: $laned of $N laned, A saw each EOF after (ms): $late"
ok "hup_drained: B's $N laned connections closed without a drain: A saw each EOF after (ms): $late"
# (A waiting in epoll, in poll, and in a blocking recv on each connection: each
# sleeps on its end's eventfd, which B holds. The three runs at once: each its own
# server, connections and eventfds; their 2.5 s a connection is nearly all sleep.)
hups=() hup_ok=1
for way in epoll poll block; do hup_start drain $way; done
for way in epoll poll block; do
    hup_end drain $way
    hups+=("A in $way: $laned of $N laned, each EOF after (ms): $late($missed later than 1 s or never)")
    [ "$missed" = 0 ] && [ "$laned" = $N ] || hup_ok=
done
verdict hup_drained "$hup_ok" \
    "B closed $N connections (A's eventfd in B's hands) while a child of B drained A's eventfd: $(printf '%s; ' "${hups[@]}")(Linux: each EOF at once)"

# head_lie: A's server as hup_drained's; B's one connection, A's head word lied about.
# head_run MODE (lie, nolie): sets ticks, A's CPU in the 2 s after B's move.
head_run() {
    as_uid $A env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
        /usr/bin/python3 "$TMP/epoll_server.py" "head$1$$" 1 >"$TMP/hl.out" 2>&1 &
    local hl_pid=$! hb_pid apid t0 t1
    for _ in $(seq 1000); do grep -q listening "$TMP/hl.out" && break; sleep 0.01; done
    apid=$(awk '/listening/ { print $3 }' "$TMP/hl.out")
    as_uid $B env MNT="$MNT" U="$U" python3 "$TMP/lanes.py" head_lie "head$1$$" 1 3 "$1" >"$TMP/hb.out" 2>&1 &
    hb_pid=$!
    for _ in $(seq 1000); do grep -q scribbled "$TMP/hb.out" && break; sleep 0.01; done
    # (A's server ends once its connection ends: then it spends nothing more)
    t0=$(awk '{ print $14 + $15 }' "/proc/$apid/stat" 2>/dev/null || echo 0)
    sleep 2
    t1=$(awk '{ print $14 + $15 }' "/proc/$apid/stat" 2>/dev/null || echo "$t0")
    wait $hb_pid || fail "B's head_lie: $(cat "$TMP/hb.out")"
    kill $hl_pid 2>/dev/null || true
    wait $hl_pid 2>/dev/null || true
    say "B ($1): $(tr '\n' '|' <"$TMP/hb.out")"
    say "A: $(tr '\n' '|' <"$TMP/hl.out")"
    ticks=$((t1 - t0))
}
head_run nolie
[ "$ticks" -le 20 ] || fail "head_lie: A's server spent $ticks ticks in 2 s after B's wake-up alone"
ok "head_lie: A's server after B's wake-up alone: $ticks ticks in 2 s"
head_run lie
verdict head_lie "$([ "$ticks" -le 20 ] && echo 1)" \
    "A's server's CPU in the 2 s after B lied about A's head word and woke A once: $ticks ticks of $(getconf CLK_TCK)/s (Linux: idle; after the wake-up alone: idle; A: $(tr '\n' '|' <"$TMP/hl.out"))"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"

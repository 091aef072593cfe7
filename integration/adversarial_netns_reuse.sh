#!/usr/bin/env bash
# adversarial_netns_reuse.sh: a socket keeps its network namespace alive, so that the
# namespace's number never goes to another namespace while the socket lives. Linux's
# socket holds a reference on its namespace (sock_net); a namespace is known by its nsfs
# inode number, and the kernel gives a freed number to the next new namespace at once
# (the lowest free one). A daemon that kept only the number let a later namespace with
# the same number find (and collide with) the names of sockets made in the freed one.
#
# B (uid 61008), in a network namespace of its own (unshare -rn), binds @NAME, listens,
# and hands the listener over SCM_RIGHTS to root's holder in the host's namespace; then
# B's namespace has no process left. New namespaces come one after another (C, uid 61009,
# five times `unshare -rn`; root once `unshare -n`), and each connects to @NAME (kernel:
# ECONNREFUSED) and binds @NAME (kernel: ok). The holder then counts the connections
# waiting at the listener it holds (kernel: 0) and closes it.
#   1. the kernel: the answers, and whether a freed namespace's number goes to the next
#      namespace (it does when nothing holds the namespace; said, not asserted);
#   2. udsfs: the kernel's answers.
#   3. a flood of namespaces: the daemon holds one descriptor per namespace it files sockets
#      under, charged to the user whose socket opened it (RLIMIT_NOFILE 1024 here: 512 held
#      for clients, 256 per user). C (one process) forks 400 children, each in a user and
#      network namespace of its own (unshare(CLONE_NEWUSER|CLONE_NEWNET)), each making one
#      socketpair and keeping it (sleeping). Linux has no such bound (all 400 made on the
#      kernel); udsfs refuses C's socketpair in a new namespace with ENFILE past C's share
#      (each child costs two: its namespace, and its pidfd, pinned as its pair's peer),
#      while one in a namespace C already holds is made, the daemon stays under its bound,
#      and B's socketpair in a new namespace of its own and in the host's is made. Once
#      C's children exit, the daemon's descriptors are back where they were.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
# The daemon's descriptor bound (3.): a quarter and 256 more stay its own.
LIMIT=1024
ulimit -n $LIMIT
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3 unshare util-linux setpriv util-linux
for_other_users signs
B=61008
C=61009
NAME=netns-reuse-$$
TRIES=(c1 c2 c3 c4 c5 root)

# The probe and ns_probe_lib.py in a directory its other users may list (an import
# reads the directory).
install -d -m 755 "$TMP/py"
install -m 644 "$LIB_DIR/ns_probe_lib.py" "$TMP/py/"
cat >"$TMP/py/reuse.py" <<'EOF'
import os, socket, subprocess, sys, time

from ns_probe_lib import on_udsfs, res, stream, wait_for

mode, name, tmp = sys.argv[1:4]



print("where:", "udsfs" if on_udsfs() else "kernel", flush=True)
if mode == "hold":  # root, host namespace: B's listener, made in B's namespace
    b_uid = sys.argv[4]
    mine, theirs = socket.socketpair()
    child = subprocess.Popen(
        ["setpriv", f"--reuid={b_uid}", f"--regid={b_uid}", "--clear-groups",
         "unshare", "-rn", "/usr/bin/python3", __file__, "listen", name, tmp,
         str(theirs.fileno())],
        pass_fds=[theirs.fileno()])
    theirs.close()
    msg, fds, _, _ = socket.recv_fds(mine, 64, 1)
    if child.wait() != 0 or len(fds) != 1:
        sys.exit(f"B's listener never came: status {child.returncode}, {len(fds)} files")
    held = socket.socket(fileno=fds[0])
    print("note B's namespace:", msg.decode())
    print("held listener's name:", res(lambda: held.getsockname()[1:].decode()))
    print("held listener listens:", held.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    # B's namespace has no process left: give the kernel time to free it (cleanup_net
    # runs later, from a work queue: about 70 ms here).
    time.sleep(0.5)
    open(f"{tmp}/held", "w").close()
    wait_for(f"{tmp}/release")
    held.setblocking(False)
    waiting = 0
    while res(lambda: held.accept() and None) == "ok":
        waiting += 1
    print("connections waiting at the held listener:", waiting)
    held.close()
elif mode == "listen":  # B in its own namespace: @name, handed over, then exit
    to_holder = socket.socket(fileno=int(sys.argv[4]))
    s = stream()
    s.bind("\0" + name)
    s.listen(8)
    socket.send_fds(to_holder, [os.readlink("/proc/self/ns/net").encode()], [s.fileno()])
elif mode == "probe":  # a new namespace
    print("note namespace:", os.readlink("/proc/self/ns/net"))
    print("connect:", res(lambda: stream().connect("\0" + name)))
    s = stream()
    print("bind:", res(lambda: s.bind("\0" + name)))
elif mode == "where":  # a namespace with nothing held: its number
    print("note namespace:", os.readlink("/proc/self/ns/net"))
print("done", flush=True)
EOF

PY=(/usr/bin/python3 "$TMP/py/reuse.py")
# on_fs KIND: the command line that runs the script on kernel sockets (KIND kernel) or
# through `udsfs run` on $MNT, into the array RUN (setpriv and unshare run it in turn).
on_fs() {
    RUN=("${PY[@]}")
    [ "$1" == kernel ] || RUN=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "${PY[@]}")
}
# in_new_ns WHO CMD...: CMD in a new network namespace: C's own (c*), or root's.
in_new_ns() {
    case $1 in
    c*) as_uid "$C" unshare -rn "${@:2}" ;;
    root) unshare -n "${@:2}" ;;
    esac
}
note() { sed -n "s/^note $2: //p" "$TMP/$1.out"; }
# answers FILE: the lines compared with the kernel's (where:, note and done lines left out).
answers() { grep -v -e 'where: ' -e ': note ' -e '^note ' -e 'done$' "$1"; }

# attack KIND: B's listener held, B's namespace gone, then each new namespace's answers
# (prefixed with who made it), then the holder's, into $TMP/KIND.out.
attack() {
    local kind=$1 holder who
    rm -f "$S/held" "$S/release"
    on_fs "$kind"
    "${RUN[@]}" hold "$NAME" "$S" "$B" >"$TMP/$kind.hold" 2>&1 &
    holder=$!
    wait_for "$S/held" 20 "$kind: the holder never got B's listener" "$TMP/$kind.hold"
    [ "$kind" == kernel ] || say "the daemon holds open, with B's listener alive: $(daemon_netns | paste -sd' ' | grep . || echo none)"
    : >"$TMP/$kind.out"
    for who in "${TRIES[@]}"; do
        in_new_ns "$who" "${RUN[@]}" probe "$NAME" "$S" >"$TMP/$kind-$who.out" 2>&1 ||
            fail "$kind: the try in $who's namespace failed: $(cat "$TMP/$kind-$who.out")"
        tail -1 "$TMP/$kind-$who.out" | grep -qx "done" ||
            fail "$kind: the try in $who's namespace did not finish: $(cat "$TMP/$kind-$who.out")"
        sed "s/^/$who: /" "$TMP/$kind-$who.out" >>"$TMP/$kind.out"
        sleep 0.3
    done
    let_go "$S/release" "$holder" "$kind: the holder failed" "$TMP/$kind.hold"
    tail -1 "$TMP/$kind.hold" | grep -qx "done" || fail "$kind: the holder did not finish: $(cat "$TMP/$kind.hold")"
    grep -qx "where: $kind" "$TMP/$kind.hold" || fail "$kind: the holder did not use $kind sockets"
    [ "$(grep -c "^[a-z0-9]*: where: $kind$" "$TMP/$kind.out")" == "${#TRIES[@]}" ] ||
        fail "$kind: a try did not use $kind sockets: $(grep 'where:' "$TMP/$kind.out" | paste -sd';')"
    cat "$TMP/$kind.hold" >>"$TMP/$kind.out"
}
# daemon_netns: the network namespaces the daemon holds descriptors of.
daemon_netns() { find "/proc/$DAEMON_PID/fd" -type l -lname 'net:*' -printf '%l\n' 2>/dev/null | sort -u; }

# reused KIND: which tries' namespaces got the number of B's gone one (said, not asserted).
reused() {
    local old who
    old=$(sed -n "s/^note B's namespace: //p" "$TMP/$1.out")
    who=$(awk -v old="$old" '$2 == "note" && $4 == old { sub(":", "", $1); print $1 }' "$TMP/$1.out" | paste -sd' ')
    echo "new namespaces with the number of B's ($old): ${who:-none}"
}

# 1. The kernel. First, without a socket: a freed namespace's number goes to the next.
as_uid "$B" unshare -rn "${PY[@]}" where - - >"$TMP/free-b.out"
sleep 0.3
in_new_ns c0 "${PY[@]}" where - - >"$TMP/free-c.out"
if [ "$(note free-b namespace)" == "$(note free-c namespace)" ]; then
    say "the kernel gives a freed namespace's number to the next one: yes ($(note free-b namespace))"
else
    say "the kernel gives a freed namespace's number to the next one: no ($(note free-b namespace), then $(note free-c namespace))"
fi
attack kernel
printf '%s\n' "${TRIES[@]}" | while read -r who; do
    printf '%s\n' "$who: connect: ECONNREFUSED" "$who: bind: ok"
done | cat - <(printf '%s\n' "held listener's name: $NAME" "held listener listens: 1" \
    "connections waiting at the held listener: 0") | cmp -s - <(answers "$TMP/kernel.out") ||
    fail "1. the kernel's answers are not the expected ones: $(answers "$TMP/kernel.out" | paste -sd';')"
ok "1. kernel: B's listener held past its namespace; in each new namespace (${TRIES[*]}) @$NAME is refused and free to bind; $(reused kernel)"

# 2. udsfs.
attack udsfs
if ! diff <(answers "$TMP/kernel.out") <(answers "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "2. udsfs answered differently from the kernel (< kernel, > udsfs); $(reused udsfs)"
fi
ok "2. udsfs: the kernel's answers; $(reused udsfs)"
# Once the sockets are gone, so are the namespaces held for them (closed in the background).
for _ in $(seq 100); do [ -z "$(daemon_netns)" ] && break; sleep 0.05; done
[ -z "$(daemon_netns)" ] || fail "2. the daemon still holds $(daemon_netns | paste -sd' ') with every socket closed"
ok "2. the daemon holds no network namespace once the sockets are closed"

# 3. A flood of namespaces, C's own, each with a socketpair kept open by a sleeping child.
FLOOD=400
SHARE=$(((LIMIT - LIMIT / 4 - 256) / 2))
cat >"$TMP/py/flood.py" <<'EOF'
import ctypes, errno, os, socket, sys, time

from ns_probe_lib import res

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
mode, sign_dir = sys.argv[1:3]
kept = []  # the sockets a child holds while it sleeps


def pair():
    kept.extend(socket.socketpair())


def into_new_ns():  # as `unshare -rn`: root of a user namespace of its own
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return "unshare: " + errno.errorcode[ctypes.get_errno()]
    for f, line in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{f}", "w") as m:
            m.write(line)
    return None


a, b = socket.socketpair()
print("where:", "udsfs" if "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{a.fileno()}") else "kernel", flush=True)
if mode == "probe":  # one socketpair where the caller is
    print("socketpair:", res(pair))
    sys.exit(0)
release_r, release_w = os.pipe()  # EOF in each child once the holder lets go
ask_r, ask_w = os.pipe()  # to the first child: one more socketpair, in its namespace
answers, first_refused, first_reports = {}, None, None
for i in range(int(sys.argv[3])):
    rep_r, rep_w = os.pipe()
    if os.fork() == 0:
        os.close(release_w), os.close(ask_w), os.close(rep_r)
        r = into_new_ns() or res(pair)
        os.write(rep_w, r.encode())
        if r == "ok":
            if i == 0 and os.read(ask_r, 1):
                os.write(rep_w, res(pair).encode())
            os.read(release_r, 1)
        os._exit(0)
    os.close(rep_w)
    r = os.read(rep_r, 100).decode() or "the child died"
    if r.startswith("unshare") or r == "the child died":
        sys.exit(f"namespace {i}: {r}")
    answers[r] = answers.get(r, 0) + 1
    if r != "ok" and first_refused is None:
        first_refused = i
    if i == 0:
        first_reports = rep_r
    else:
        os.close(rep_r)
print("answers:", " ".join(f"{k} {v}" for k, v in sorted(answers.items())))
print("first refused:", first_refused)
os.write(ask_w, b"x")
print("again in the first namespace:", os.read(first_reports, 100).decode() or "the child died", flush=True)
open(f"{sign_dir}/flooded", "w").close()
while not os.path.exists(f"{sign_dir}/release"):
    time.sleep(0.05)
os.close(release_w)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
print("done", flush=True)
EOF
FL=(/usr/bin/python3 "$TMP/py/flood.py")
field() { sed -n "s/^$2: //p" "$TMP/$1"; }
daemon_fds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

# flood_on KIND: the command line that runs flood.py on KIND sockets, into FLOOD_RUN.
flood_on() {
    FLOOD_RUN=("${FL[@]}")
    [ "$1" == kernel ] || FLOOD_RUN=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "${FL[@]}")
}
# probe_b KIND WHERE: B's socketpair on KIND sockets, in a new namespace of its own (new)
# or the host's; its answer.
probe_b() {
    local out=$TMP/probe-$1-$2.out
    flood_on "$1"
    case $2 in
    new) as_uid "$B" unshare -rn "${FLOOD_RUN[@]}" probe - >"$out" 2>&1 ;;
    host) as_uid "$B" "${FLOOD_RUN[@]}" probe - >"$out" 2>&1 ;;
    esac || fail "3. $1: B's probe in the $2 namespace failed: $(cat "$out")"
    grep -qx "where: $1" "$out" || fail "3. $1: B's probe did not use $1 sockets: $(cat "$out")"
    field "probe-$1-$2.out" socketpair
}

# flood KIND: C's flood on KIND sockets; B probes while C holds; then C lets go.
flood() {
    local kind=$1 out=$TMP/flood-$1.out holder
    rm -f "$S/flooded" "$S/release"
    flood_on "$kind"
    as_uid "$C" "${FLOOD_RUN[@]}" flood "$S" "$FLOOD" >"$out" 2>&1 &
    holder=$!
    wait_for "$S/flooded" 30 "3. $kind: C's flood never ended" "$out"
    grep -qx "where: $kind" "$out" || fail "3. $kind: C's flood did not use $kind sockets: $(cat "$out")"
    if [ "$kind" == udsfs ]; then
        PINNED=$(daemon_netns | wc -l)
        FLOODED_FDS=$(daemon_fds)
        PIDFDS=$(find "/proc/$DAEMON_PID/fd" -type l -lname 'anon_inode:*pidfd*' 2>/dev/null | wc -l)
    fi
    B_NEW=$(probe_b "$kind" new)
    B_HOST=$(probe_b "$kind" host)
    let_go "$S/release" "$holder" "3. $kind: C's flood failed" "$out"
    tail -1 "$out" | grep -qx "done" || fail "3. $kind: C's flood did not finish: $(cat "$out")"
    say "3. $kind: C's $FLOOD namespaces: $(field "flood-$kind.out" answers), first refused: $(field "flood-$kind.out" 'first refused'); again in the first one: $(field "flood-$kind.out" 'again in the first namespace'); B in a new namespace: $B_NEW, in the host's: $B_HOST"
}

flood kernel
if [ "$(field flood-kernel.out answers)" != "ok $FLOOD" ] || [ "$B_NEW $B_HOST" != "ok ok" ] ||
    [ "$(field flood-kernel.out 'again in the first namespace')" != ok ]; then
    fail "3. the kernel refused a socketpair: $(cat "$TMP/flood-kernel.out")"
fi
ok "3. kernel: no bound on the namespaces one user's sockets live in ($FLOOD of $FLOOD)"

BASE_FDS=$(daemon_fds)
flood udsfs
say "3. udsfs: the daemon held $FLOODED_FDS descriptors with C's flood held ($BASE_FDS before), $PINNED of them network namespaces, $PIDFDS pidfds (a socketpair's maker is pinned as its peer: one per child); bound: $((LIMIT - LIMIT / 4 - 256)) of RLIMIT_NOFILE $LIMIT for clients, $SHARE per user"
FIRST=$(field flood-udsfs.out 'first refused')
ANSWERS=$(field flood-udsfs.out answers)
[ "$FIRST" != None ] || fail "3. udsfs: C was never refused: the bound did not hold ($ANSWERS)"
[ "$ANSWERS" == "ENFILE $((FLOOD - FIRST)) ok $FIRST" ] ||
    fail "3. udsfs: C's answers are not $FIRST made, then ENFILE for each later one: $ANSWERS"
[ "$FIRST" -le "$SHARE" ] || fail "3. udsfs: C held $FIRST namespaces, past its share of $SHARE"
[ "$PINNED" -le "$SHARE" ] || fail "3. udsfs: the daemon held $PINNED namespaces for C, past its share of $SHARE"
# All the daemon holds for clients then is C's: its share, not more.
[ $((FLOODED_FDS - BASE_FDS)) -le "$SHARE" ] ||
    fail "3. udsfs: the daemon held $((FLOODED_FDS - BASE_FDS)) descriptors more for C, past its share of $SHARE"
[ "$(field flood-udsfs.out 'again in the first namespace')" == ok ] ||
    fail "3. udsfs: C's socketpair in a namespace it holds was refused: $(field flood-udsfs.out 'again in the first namespace')"
[ "$B_NEW $B_HOST" == "ok ok" ] ||
    fail "3. udsfs: B was refused while C held its share: in a new namespace $B_NEW, in the host's $B_HOST"
ok "3. udsfs: C refused (ENFILE, udsfs's own bound) in each new namespace past its $FIRST; again in one it holds: made; B's made in a new namespace and the host's"
for _ in $(seq 100); do [ "$(daemon_fds)" -le "$BASE_FDS" ] && break; sleep 0.05; done
[ "$(daemon_fds)" -le "$BASE_FDS" ] ||
    fail "3. udsfs: the daemon holds $(daemon_fds) descriptors 5 s after C's flood ended, $BASE_FDS before ($(daemon_netns | wc -l) namespaces)"
ok "3. udsfs: once C's children exit the daemon holds $(daemon_fds) descriptors, as before ($BASE_FDS)"

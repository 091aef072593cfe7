#!/usr/bin/env bash
# adversarial_root_run.sh: user B's program in a run that root started (`udsfs run
# --front seccomp` as root of a command that drops to B, as a service does), attacking
# the supervisor, which makes B's bind() on B's behalf and is root. The kernel paths a
# bind looks at and makes (the routed name's link, the directory an unrouted path's
# errno is read from) must be judged as B, as Linux's unix_bind would (mknod as B):
# B first makes the routed names' directories in the (--allow-other) mount itself, so
# that the daemon's bind, made for B, succeeds there.
#  1. a bind of a routed name in a root-owned 0755 directory B may not write: EACCES,
#     and no link left there (it was made by root and stayed);
#  2. a routed name in a world-writable directory through B's symlink to a directory
#     only root may enter: EACCES, nothing made in that directory (it was: B could put
#     a name of its choice in /etc so, /etc/nologin keeping every other user out);
#  3. a bind of a udsfs socket (a connected client) to an unrouted path in a directory
#     only root may search: the same errno for a name that exists there as for one that
#     does not (root's lookup said EADDRINUSE: B learnt which names exist in a
#     directory it may not read; Linux says EACCES for both, and so does udsfs);
#  5. likewise a connect to a routed name through B's symlink into root's directory:
#     the same errno for a file there and for nothing there (root's lookup said
#     ECONNREFUSED for the file, ENOENT for nothing);
#  6. an unlink of a routed name (trapped with --route; the supervisor removes the
#     name's node in the mount): B may not remove root's socket name in root's
#     directory of the mount, nor, through B's symlink in the mount, root's file in a
#     0700 directory (root's supervisor removed both: any file of the system);
#  6b. likewise rename and rmdir of routed names (trapped with --route; the supervisor
#     makes the kernel's rename or rmdir as B, then moves or removes the node in the
#     mount): through B's symlink in the mount, B may not move root's file out of a 0700
#     directory nor remove root's empty directory there;
#  7. the directories a routed bind makes below the mount are made as B: B's symlink
#     in the mount does not lead root's mkdir into root's 0700 directory;
#  8. root's run in a pid namespace of its own, its command dropping to B: B's send and
#     connect to root's server carry B's uid (SCM_CREDENTIALS, SO_PEERCRED) as on the
#     kernel while the daemon grants the supervisor's act-for; on a daemon that refuses
#     it (no CAP_SYS_PTRACE to read the pidfd the grant names), the supervisor says so
#     and B's calls are refused: never root's credentials (uid 0).
#  4. B's own routed bind in a directory of B's still works, the link B's (it was
#     root's, which B could not remove from a sticky directory).
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

attack_needs "attacks udsfs run itself"
B=61002
R=$TMP/r # routed, root's 0755: B may not make names there
mkdir -m 755 "$R"
S=$TMP/s # routed, world-writable and sticky
mkdir -m 1777 "$S"
SECRET=$TMP/secret # root's 0700
mkdir -m 700 "$SECRET"
echo key >"$SECRET/present"
BDIR=$TMP/bdir # routed, B's
mkdir -m 755 "$BDIR"
chown "$B:$B" "$BDIR"
ln -s "$SECRET" "$S/l"
chown -h "$B:$B" "$S/l"

# B's directories in the mount, where the daemon lets B bind.
# (B may not make copies of root's directories since they carry the kernel's owners:
# then they are made for B, as B could make them before, for the checks below)
as_uid "$B" mkdir -p "$MNT$R" "$MNT$S/l" 2>/dev/null || {
    say "B may not make $MNT$R and $MNT$S/l (copies of root's directories): made for B"
    mkdir -p "$MNT$R" "$MNT$S/l" && chown "$B:$B" "$MNT$R" "$MNT$S/l"
} || fail "B's directories in the mount cannot be made"

# bind.py LISTENER ARG...: for each ARG (PATH binds a new socket to PATH, connect:PATH
# connects one to PATH, unlink:PATH unlinks PATH, rename:OLD:NEW renames OLD, rmdir:PATH
# removes directory PATH) prints ARG and what came of it; the
# binds after "--" with a udsfs client socket (connected to LISTENER, bound nowhere), so
# that the bind reaches the supervisor's udsfs side. LISTENER "-": none.
cat >"$TMP/bind.py" <<'PY'
import os, socket, sys
print("ids", os.getresuid(), flush=True)
args = sys.argv[1:]
if args[0] != "-":
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(args[0])
    lst.listen(8)
udsfs = False
for arg in args[1:]:
    if arg == "--":
        udsfs = True
        continue
    op, path = arg.split(":", 1) if arg.startswith(("connect:", "unlink:", "rename:", "rmdir:")) else ("bind", arg)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if op == "connect":
            s.connect(path)
            print(arg, "connected", flush=True)
        elif op == "unlink":
            os.unlink(path)
            print(arg, "unlinked", flush=True)
        elif op == "rename":
            old, new = path.split(":", 1)
            os.rename(old, new)
            print(arg, "renamed", flush=True)
        elif op == "rmdir":
            os.rmdir(path)
            print(arg, "removed", flush=True)
        else:
            if udsfs:
                s.connect(args[0])
            s.bind(path)
            print(arg, "bound", flush=True)
    except OSError as e:
        print(arg, "errno", e.errno, flush=True)
PY
chmod 644 "$TMP/bind.py"

# b_in_root_run [--route DIR]... -- ARG...: root's `udsfs run --front seccomp`, its
# command made user B before it runs bind.py ARG...
b_in_root_run() {
    local routes=()
    while [ "$1" != -- ]; do
        routes+=("$1" "$2")
        shift 2
    done
    shift
    env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp "${routes[@]}" -- \
        setpriv --reuid="$B" --regid="$B" --clear-groups /usr/bin/python3 "$TMP/bind.py" "$@"
}

# root's run; the command becomes B before it binds.
out=$(b_in_root_run --route "$R" --route "$S" --route "$BDIR" -- \
    "$BDIR/srv" "$R/x" "$S/l/made" "$BDIR/mine" "connect:$S/l/present" "connect:$S/l/absent" \
    -- "$SECRET/present" "$SECRET/absent" 2>&1) || fail "the run failed: $out"
say "B's binds under root's supervisor:"
say "$out"
grep -q "ids ($B, $B, $B)" <<<"$out" || fail "the program did not run as $B: $out"

# 1.
got=$(grep "^$R/x " <<<"$out")
say "1. bind of $R/x (root's 0755 directory, routed): $got; there now: $(ls -l "$R" | tail -n +2)"
[ "$got" == "$R/x errno 13" ] || fail "1. B bound a name in a directory only root may write: '$got' (Linux: EACCES)"
[ ! -e "$R/x" ] && [ ! -L "$R/x" ] || fail "1. a link was left in root's directory: $(ls -l "$R/x")"
ok "1. B's routed bind in root's directory: EACCES, nothing made"

# 2.
got=$(grep "^$S/l/made " <<<"$out")
say "2. bind through B's symlink into root's 0700 directory: $got; there now: $(ls -A "$SECRET" | tr '\n' ' ')"
[ "$got" == "$S/l/made errno 13" ] || fail "2. B's bind followed its symlink into root's 0700 directory: '$got' (Linux: EACCES)"
[ ! -L "$SECRET/made" ] || fail "2. a link was made in root's 0700 directory: $(ls -l "$SECRET/made")"
ok "2. through a symlink into root's directory: EACCES, nothing made"

# 3.
got=$(grep "^$SECRET/present " <<<"$out" | sed 's/.* errno/errno/')
none=$(grep "^$SECRET/absent " <<<"$out" | sed 's/.* errno/errno/')
say "3. bind to a name in root's 0700 directory (unrouted): one there: $got; none there: $none"
[ -n "$got" ] && [ "$got" == "$none" ] || fail "3. B learnt what root's 0700 directory holds: a name there gave '$got', none '$none' (Linux: EACCES for both)"
# Linux's own answer, which udsfs gives since calls/src/bind.rs takes the lookup's errno.
[ "$got" == "errno 13" ] || fail "3. a bind into root's 0700 directory gave '$got' (Linux: EACCES)"
ok "3. an unrouted path in root's directory: $got whether a name is there or not"

# 4.
got=$(grep "^$BDIR/mine " <<<"$out")
say "4. B's own routed bind: $got, link $(stat -c '%U %N' "$BDIR/mine" 2>&1), node $(stat -c '%U %A' "$MNT$BDIR/mine" 2>&1)"
[ "$got" == "$BDIR/mine bound" ] || fail "4. B's bind in its own directory failed: '$got'"
[ "$(stat -c %u "$BDIR/mine")" == "$B" ] || fail "4. B's link is not B's: $(stat -c '%u %N' "$BDIR/mine")"
ok "4. B's own routed bind works, the link B's"

# 5.
got=$(grep "^connect:$S/l/present " <<<"$out" | sed 's/.* errno/errno/')
none=$(grep "^connect:$S/l/absent " <<<"$out" | sed 's/.* errno/errno/')
say "5. connect to a routed name through B's symlink into root's 0700 directory: a file there: $got; none there: $none"
[ -n "$got" ] && [ "$got" == "$none" ] || fail "5. B learnt what root's 0700 directory holds: a file there gave '$got', none '$none' (Linux: EACCES for both)"
ok "5. a connect into root's directory: $got whether a file is there or not"

# 6. unlink of routed names (trapped with --route): the supervisor removes the name's
# node in the mount. As root, B removed root's socket name in root's directory of the
# mount, and through B's symlink in the mount any file of root's.
T=$TMP/t # routed, root's 0755, in the kernel and in the mount
mkdir -m 755 "$T" "$MNT$T" 2>/dev/null || mkdir -p -m 755 "$MNT$T"
/usr/bin/python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$MNT$T/rootsock" ||
    fail "6. root cannot bind in the mount"
[ -S "$MNT$T/rootsock" ] || fail "6. root's socket node is missing: $(ls -l "$MNT$T")"
echo precious >"$SECRET/file"
as_uid "$B" ln -s "$SECRET" "$MNT$S/l/esc" || fail "6. B cannot make a symlink in the mount"
out=$(b_in_root_run --route "$T" --route "$S" -- - "unlink:$T/rootsock" "unlink:$S/l/esc/file" 2>&1) || fail "6. the run failed: $out"
say "6. B's unlinks under root's supervisor:"
say "$out"
say "   root's socket node now: $(ls -l "$MNT$T/rootsock" 2>&1); root's file: $(ls -l "$SECRET/file" 2>&1)"
[ -S "$MNT$T/rootsock" ] || fail "6. B removed root's socket name in root's directory of the mount"
[ -f "$SECRET/file" ] || fail "6. B removed a file in root's 0700 directory, through its symlink in the mount"
ok "6. B's unlinks of root's names: refused, both still there"

# 6b. rename and rmdir of routed names (trapped with --route): the supervisor makes the
# kernel's call, then moves or removes the node in the mount. B's kernel directory
# $S/bd holds a link as a routed bind leaves it (bd/file -> its node) and an empty
# directory; B's $MNT$S/bd is a symlink to root's 0700 directory, which holds a file and
# an empty directory of those names. As root, the supervisor would move root's file
# and remove root's directory.
as_uid "$B" mkdir -m 755 "$S/bd" "$S/bd/empty" || fail "6b. B cannot make its directories"
as_uid "$B" ln -s "$MNT$S/bd/file" "$S/bd/file" || fail "6b. B cannot make its link"
as_uid "$B" ln -s "$SECRET" "$MNT$S/bd" || fail "6b. B cannot make a symlink in the mount"
echo precious >"$SECRET/file"
mkdir -m 755 "$SECRET/empty"
out=$(b_in_root_run --route "$S" -- - "rename:$S/bd/file:$S/bd/moved" "rmdir:$S/bd/empty" 2>&1) || fail "6b. the run failed: $out"
say "6b. B's rename and rmdir under root's supervisor, $MNT$S/bd -> $SECRET:"
say "$out"
say "   root's 0700 directory now holds: $(ls -lA "$SECRET" | tail -n +2 | tr '\n' ';')"
grep -q "^rename:$S/bd/file:$S/bd/moved renamed" <<<"$out" || fail "6b. B's rename of its own link failed: $out"
grep -q "^rmdir:$S/bd/empty removed" <<<"$out" || fail "6b. B's rmdir of its own directory failed: $out"
[ -f "$SECRET/file" ] && [ ! -e "$SECRET/moved" ] || fail "6b. B moved root's file in a 0700 directory, through its symlink in the mount"
[ -d "$SECRET/empty" ] || fail "6b. B removed root's directory in a 0700 directory, through its symlink in the mount"
ok "6b. B's rename and rmdir: its own names only, root's file and directory still there"

# 7. a routed bind makes the name's directories below the mount too (mirror_dirs): B's
# symlink in the mount must not lead root's mkdir into root's 0700 directory, where it
# made a directory of the mode of B's kernel one (0777).
B2=$TMP/b2 # routed, B's, with a 0777 subdirectory
mkdir -m 755 "$B2"
mkdir -m 777 "$B2/sub"
chown -R "$B:$B" "$B2"
chmod 777 "$B2/sub"
# (B may not write the copy of root's $TMP once the copies carry the kernel's owners:
# the link is then made for B, as if B had made it before they did)
as_uid "$B" ln -s "$SECRET" "$MNT$B2" 2>/dev/null || {
    say "7. B may not make $MNT$B2 (the copy of root's $TMP is root's 0755): made for B"
    ln -s "$SECRET" "$MNT$B2" && chown -h "$B:$B" "$MNT$B2"
} || fail "7. no symlink in the mount"
out=$(b_in_root_run --route "$B2" -- "$B2/sub/srv" 2>&1) || say "7. (the run: $out)"
say "7. B's bind of $B2/sub/srv with $MNT$B2 -> $SECRET: $out"
say "   root's 0700 directory now holds: $(ls -lA "$SECRET" | tail -n +2 | tr '\n' ';')"
[ ! -e "$SECRET/sub" ] || fail "7. root's mkdir followed B's symlink in the mount: $(ls -ld "$SECRET/sub")"
ok "7. no directory made in root's directory through B's symlink in the mount"

# 8. a grant the daemon refuses for another user's thread: the supervisor's own (root's)
# credentials must not stand in for B's program (src/supervisor/actfor.rs `Grant::new`).
# Root's run in a pid namespace of its own names B's thread with a pidfd, whose
# /proc/TID/fdinfo the daemon reads (src/fuse/actfor.rs `in_daemon_ns`): a ptrace-mode
# read, which a root daemon without CAP_SYS_PTRACE (a capability bounding set that lacks
# it, as systemd's CapabilityBoundingSet= or a container's default set leave it) may not
# make of root's supervisor. So every grant of that run is refused (EBADF), B's included.
# One program (pid namespace of its own, started as root) connects to root's server, drops
# to B, sends on that connection and connects again: what the server sees of B (the
# send's SCM_CREDENTIALS, the second connection's SO_PEERCRED) is compared
#  8a. on kernel sockets: B's uid for both (the reference);
#  8b. through root's seccomp run on the script's daemon (all capabilities): the grants
#      hold (integration/actfor_pidns.sh), B's uid for both, as on the kernel;
#  8c. the same on a daemon without CAP_SYS_PTRACE: the supervisor must say that the
#      daemon refused to let it act for B's thread (else the part is vacuous, as it was
#      once pid namespaces got grants), and B's send and connect must be refused or carry
#      B's uid: never uid 0 (root's supervisor's; B passed for root).
cat >"$TMP/peer_server.py" <<'PY'
# peer_server.py PATH READY DONE: root's server; per connection, in order, its SO_PEERCRED
# uid and what came on it: "scm uid N" (the SCM_CREDENTIALS of the first message) or
# "closed" (nothing sent). Stops once DONE exists and no connection waits.
import os, socket, struct, sys, time
path, ready, done = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(path)
os.chmod(path, 0o777)
s.listen(8)
open(ready, "w").close()
s.settimeout(0.05)
deadline = time.monotonic() + 30
n = 0
while time.monotonic() < deadline:
    try:
        c, _ = s.accept()
    except socket.timeout:
        if os.path.exists(done):
            break
        continue
    n += 1
    _, uid, _ = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    print(f"conn {n} peer uid {uid}", flush=True)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    c.settimeout(10)
    try:
        data, anc, _, _ = c.recvmsg(16, socket.CMSG_SPACE(12))
    except OSError as e:
        print(f"conn {n} recv {e}", flush=True)
        continue
    scm = [struct.unpack("3i", d[:12])[1] for lvl, typ, d in anc
           if lvl == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS]
    print(f"conn {n} scm uid {scm[0]}" if data and scm else f"conn {n} closed" if not data
          else f"conn {n} data without SCM_CREDENTIALS", flush=True)
else:
    print("timed out", flush=True)
PY
cat >"$TMP/peer_client.py" <<'PY'
# peer_client.py PATH DONE B: as root, connects to PATH; as B (all ids), sends on that
# connection, then connects again; says what each gave, and makes DONE.
import os, socket, sys
path, done, b = sys.argv[1], sys.argv[2], int(sys.argv[3])
first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
first.connect(path)
os.setgroups([])
os.setresgid(b, b, b)
os.setresuid(b, b, b)
print("ids", os.getresuid(), flush=True)
try:
    first.send(b"x")
    print("send sent", flush=True)
except OSError as e:
    print("send errno", e.errno, flush=True)
first.close()
second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    second.connect(path)
    print("connect connected", flush=True)
except OSError as e:
    print("connect errno", e.errno, flush=True)
second.close()
open(done, "w").close()
PY
chmod 644 "$TMP/peer_server.py" "$TMP/peer_client.py"
DONE8=$TMP/done8 # where B makes its DONE files
mkdir -m 1777 "$DONE8"

# peer_case NAME SERVER_DIR RUN...: root's server at SERVER_DIR/srv (on the kernel, or
# through root's `udsfs run` when SERVER_DIR is in the mount), and the client in a pid
# namespace of its own through RUN... (nothing: the kernel). Leaves the server's lines in
# $TMP/NAME.srv, the client's in $TMP/NAME.out, its stderr in $TMP/NAME.err.
peer_case() {
    local name=$1 dir=$2 srv
    shift 2
    local done=$DONE8/$name
    rm -f "$TMP/$name.ready"
    if [ "$#" -gt 0 ]; then
        env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- /usr/bin/python3 \
            "$TMP/peer_server.py" "$dir/srv" "$TMP/$name.ready" "$done" >"$TMP/$name.srv" 2>&1 &
    else
        /usr/bin/python3 "$TMP/peer_server.py" "$dir/srv" "$TMP/$name.ready" "$done" >"$TMP/$name.srv" 2>&1 &
    fi
    srv=$!
    wait_for "$TMP/$name.ready" 10 "8. $name: root's server did not start" "$TMP/$name.srv"
    timeout 60 unshare --pid --fork --mount-proc "$@" /usr/bin/python3 "$TMP/peer_client.py" "$dir/srv" \
        "$done" "$B" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        fail "8. $name: the client failed: $(cat "$TMP/$name.out" "$TMP/$name.err")"
    wait "$srv" || fail "8. $name: root's server failed: $(cat "$TMP/$name.srv")"
    say "8. $name: client: $(paste -sd';' "$TMP/$name.out"); root's server: $(paste -sd';' "$TMP/$name.srv")"
    [ -s "$TMP/$name.err" ] && say "   its stderr: $(cat "$TMP/$name.err")"
    grep -qx "ids ($B, $B, $B)" "$TMP/$name.out" || fail "8. $name: the client did not become $B"
    grep -qx "conn 1 peer uid 0" "$TMP/$name.srv" || fail "8. $name: root's own connection did not reach the server"
    ! grep -q "timed out" "$TMP/$name.srv" || fail "8. $name: the client's DONE never came"
}
RUN_SECCOMP=(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp --)
# What the server sees of B (send, connect), in order.
seen_of_b() { grep -v '^conn 1 peer uid' "$TMP/$1.srv"; }

# 8a.
mkdir -m 755 "$TMP/ksrv"
peer_case kernel "$TMP/ksrv"
printf 'conn 1 scm uid %s\nconn 2 peer uid %s\nconn 2 closed\n' "$B" "$B" | cmp -s - <(seen_of_b kernel) ||
    fail "8a. the kernel's server did not see B's uid for B's send and connect: $(seen_of_b kernel | paste -sd';')"
ok "8a. kernel: B's send and connect carry uid $B"

# 8b.
peer_case granted "$MNT" "${RUN_SECCOMP[@]}"
! grep -q "does not let the supervisor act for" "$TMP/granted.err" ||
    fail "8b. the daemon refused a grant: $(cat "$TMP/granted.err")"
[ "$(seen_of_b granted)" == "$(seen_of_b kernel)" ] ||
    fail "8b. through root's run in a pid namespace, root's server saw '$(seen_of_b granted | paste -sd';')' of B, the kernel's '$(seen_of_b kernel | paste -sd';')'"
ok "8b. root's run in a pid namespace, grants held: B's send and connect carry uid $B, as on the kernel"

# 8c.
udsfs_unmount
udsfs_mount_noptrace --allow-other
peer_case refused "$MNT" "${RUN_SECCOMP[@]}"
grep -q "the daemon does not let the supervisor act for thread [0-9]* (.*), whose user is not the supervisor's (uid $B)" "$TMP/refused.err" ||
    fail "8c. the supervisor did not say that the daemon refused to let it act for B's thread (the part would prove nothing): $(cat "$TMP/refused.err")"
got=$(seen_of_b refused | paste -sd';')
! grep -qE '^conn [0-9]+ (scm|peer) uid 0$' <(seen_of_b refused) ||
    fail "8c. with the grant refused, B's calls reached root's server as uid 0 (root's supervisor's credentials): $got"
# B's send: refused, or B's uid (never sent without credentials either).
send=$(grep '^send ' "$TMP/refused.out") || true
case "$send" in
"send sent") grep -qx "conn 1 scm uid $B" "$TMP/refused.srv" || fail "8c. B's send went through, the server saw: $got" ;;
"send errno "*) grep -qx "conn 1 closed" "$TMP/refused.srv" || fail "8c. B's send failed ($send), yet the server saw: $got" ;;
*) fail "8c. no word of B's send: $(cat "$TMP/refused.out")" ;;
esac
conn=$(grep '^connect ' "$TMP/refused.out") || true
case "$conn" in
"connect connected") grep -qx "conn 2 peer uid $B" "$TMP/refused.srv" || fail "8c. B's connect went through, the server saw: $got" ;;
"connect errno "*) ! grep -q '^conn 2 ' "$TMP/refused.srv" || fail "8c. B's connect failed ($conn), yet the server saw: $got" ;;
*) fail "8c. no word of B's connect: $(cat "$TMP/refused.out")" ;;
esac
ok "8c. a daemon without CAP_SYS_PTRACE refused root's run in a pid namespace B's grant; B's $send, $conn; root's server saw of B: '$got' (the kernel: uid $B), never uid 0"

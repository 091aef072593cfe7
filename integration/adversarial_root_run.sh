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
#  8. root's run in a pid namespace of its own (its grants name B's thread with a pidfd
#     since integration/actfor_pidns.sh's fix; before, they were refused): B's connection
#     does not carry root's credentials (SO_PEERCRED uid 0).
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

# 8. where the daemon refuses the supervisor's act-for grant, the supervisor's own
# credentials must not stand in for another user's program: root's run in a pid
# namespace of its own (the thread ids it names are not the daemon's, so every grant is
# refused) of a command that drops to B. B's connect to root's udsfs server must not
# show the server SO_PEERCRED uid 0 (it did: B passed for root).
cat >"$TMP/peer_server.py" <<'PY'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
open(sys.argv[2], "w").close()
s.settimeout(60)
try:
    c, _ = s.accept()
    pid, uid, gid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    print("peer uid", uid, flush=True)
except OSError as e:
    print("accept", e, flush=True)
PY
chmod 644 "$TMP/peer_server.py"
rm -f "$TMP/srv.ready"
env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
    /usr/bin/python3 "$TMP/peer_server.py" "$MNT/rootsrv" "$TMP/srv.ready" >"$TMP/srv.out" 2>&1 &
SRV=$!
wait_for "$TMP/srv.ready" 10 "8. root's server did not start" "$TMP/srv.out"
chmod 777 "$MNT/rootsrv"
cout=$(unshare --pid --fork --mount-proc env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp -- \
    setpriv --reuid="$B" --regid="$B" --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1]); print("connected", flush=True)
except OSError as e:
    print("connect errno", e.errno, flush=True)
' "$MNT/rootsrv" 2>&1) || true
grep -q "^connected" <<<"$cout" && sleep 1
kill "$SRV" 2>/dev/null || true
wait "$SRV" 2>/dev/null || true
say "8. B's connect from root's run in a pid namespace: $cout"
say "   root's server saw: $(cat "$TMP/srv.out")"
! grep -q "^peer uid 0$" "$TMP/srv.out" || fail "8. B's connection from root's run in a pid namespace carried root's credentials (SO_PEERCRED uid 0)"
ok "8. root's run in a pid namespace does not lend B root's credentials: $(head -1 <<<"$cout")"

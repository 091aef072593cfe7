#!/usr/bin/env bash
# adversarial_routed_dirs.sh: user B against user A's socket in A's routed directory, in
# one `udsfs run --route` of root's (as a service manager starts both), through each
# front. A binds a datagram socket in its directory d (0755 then), makes the socket
# 0777 and then d 0700, as a server shuts its run directory once it is up: on Linux B
# may no longer reach the socket (EACCES: no search permission on d).
#  1. B's connect and sendto to the routed name: EACCES. The mount's copy of d kept the
#     mode d had at the bind (0755), which was all the daemon's walk looked at: B
#     connected and its message reached A's socket.
#  2. d made 0711 (search only): B's sendto goes through, as on Linux.
#  3. B through the mount's path to the name, under the front: EACCES (the same tree
#     path: the kernel's d decides); through the mount's own files (a ctl file's
#     "connect", no front) the copy of d decides, which takes d's mode (0700) at A's next
#     bind below d (it stayed 0755: B connected). Before that bind the copy is as it
#     was (README "What is routed"): printed, not judged.
#  4. what reached A's socket: only the message of 2.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

attack_needs "attacks udsfs run's routes"
A=61005
B=61006
C=61007

# a.py R STEP...: A's side. Binds R/d/s.sock, then for each STEP waits for the file
# f/STEP.go (beside R) and does it: "chmod:MODE" (of d), "bind" (R/d/t.sock), "drain" (prints what
# s.sock received); after each, makes f/STEP.done.
cat >"$TMP/a.py" <<'PY'
import os, socket, sys, time
r = sys.argv[1]
d = r + "/d"
os.mkdir(d, 0o755)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(d + "/s.sock")
os.chmod(d + "/s.sock", 0o777)
os.chmod(d, 0o700)
print("A bound", d + "/s.sock", "and made", d, "0700", flush=True)
open(r + "/../f/up", "w").close()
for i, step in enumerate(sys.argv[2:]):
    go = "%s/../f/%d.go" % (r, i)
    while not os.path.exists(go):
        time.sleep(0.02)
    if step.startswith("chmod:"):
        os.chmod(d, int(step[6:], 8))
        print("A: chmod", step[6:], d, flush=True)
    elif step == "bind":
        t = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        t.bind(d + "/t.sock")
        print("A bound", d + "/t.sock", flush=True)
    elif step == "drain":
        s.setblocking(False)
        got = []
        while True:
            try:
                got.append(s.recv(100).decode())
            except BlockingIOError:
                break
        print("A received:", " ".join(got) if got else "nothing", flush=True)
    open("%s/../f/%d.done" % (r, i), "w").close()
PY
# b.py OP:PATH...: B's tries, each printed with its result.
cat >"$TMP/b.py" <<'PY'
import os, socket, sys
for arg in sys.argv[1:]:
    op, path = arg.split(":", 1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        if op.startswith("ctl"):
            # The mount's own files, no front: a new socket's ctl file.
            u = os.environ["U"]
            h = os.open(u + "/dgram/clone", os.O_RDWR)
            n = int(os.read(h, 64))
            c = os.open("%s/sock/%d/ctl" % (u, n), os.O_WRONLY)
            os.write(c, b"connect " + path.encode() + b"\n")
        elif op == "connect":
            s.connect(path)
        else:
            s.sendto(op.encode(), path)
        print(arg, "ok", flush=True)
    except OSError as e:
        print(arg, "errno", e.errno, flush=True)
PY
chmod 644 "$TMP/a.py" "$TMP/b.py"

# want_line PREFIX WANT WHAT WHY: the line of $out that starts with PREFIX (a grep
# pattern) must be WANT; else the script fails: "[$front] WHAT: 'the line' WHY".
want_line() {
    local got
    got=$(grep "^$1" <<<"$out" || true)
    [ "$got" == "$2" ] || fail "[$front] $3: '$got' $4"
}

# ---- issue 29: B's route declarations against A's plain directories on the mount.
# Anyone may declare a route root (the xattr a `udsfs run --route /P` writes); a
# declaration governs the declarer's own routed walks, not another user's plain
# directories (README "What is routed"). Each case prints what B tried and what A got:
#  decl_userns    B, root of a user namespace of its own (unshare -Ur), declares K/r and K
#                 (first, on a mount where nothing is declared yet) where A has its plain
#                 0700 M/K/r and a socket: A's directories stay A's, A reaches A. (Before:
#                 M/K/r root's 0755, A's socket node dropped: ENOENT.)
#  decl_existing  A made M/K/p (its own 0700, plain, where the kernel has root's 0755
#                 K/p) and serves a socket there; B runs `udsfs run --route K/p` (its
#                 declaration, its routed connect to A's name), declares /tmp and the
#                 dirs above too, lists M/K/p and binds there: A's directories must stay
#                 A's, as made, and A's client reach A. (Before: B's declaration made
#                 M/tmp root's 1777, M/K/p root's 0755, A's socket node dropped: ENOENT.)
#  decl_before    B declares K/q first; A then makes M/K/q 0700 and serves there: A's
#                 directory is A's. (Before: A's mkdir made root's 0755 copy, A's bind
#                 EACCES.)
#  decl_mode      (at the end, once root's runs below made the copies of /tmp and TMP
#                 root's) A made M/K/am/m 0700 (plain, in A's copy of its K/am), where
#                 the kernel's K/am/m is A's too, 0777; C (B's declarations are spent)
#                 runs `udsfs run --route K/am/m` and connects below it, then binds in
#                 M/K/am/m: it stays 0700 and C's bind is EACCES (another's declaration
#                 opens no directory of A's either; it made it 0777 and C bound).
#  decl_many      B declares 60,000 paths from 60 processes one after another (pids
#                 reused in turn): at most PER_USER (256) are taken, the rest ENOSPC,
#                 and the mount still answers. (Held before too: the bound is per uid.)
#  decl_squat     (at the end) C made M/K/s (plain, C's 0777; C's own declarations do not
#                 cover it) where the kernel's K/s is root's 1777 (a /tmp) and A owns
#                 nothing on the path; A's `udsfs run --route K/s` binds K/s/a.sock, C
#                 moves A's node aside and binds its own there: A's client must not reach
#                 C. A's walk may not take C's directory (A has no kernel directory
#                 there), so A's bind and connect are refused (EACCES: a squatter's DoS,
#                 not an impersonation; before this walk refused, A bound in C's
#                 directory and its client got C).
K=$TMP/k
mkdir -m 755 "$K" "$K/p" "$K/q" "$K/r"
mkdir -m 755 "$K/am"
mkdir -m 1777 "$K/s"
mkdir -m 777 "$K/am/m"
chown $A:$A "$K/am" "$K/am/m"
chmod 777 "$K/am/m"
py_file() { cat >"$TMP/$1"; chmod 644 "$TMP/$1"; }
py_file serve.py <<'PY'
# serve.py PATH N [WORD]: binds PATH (stream), answers WORD ("A") to N connections.
import socket, sys
import os
word = (sys.argv[3] if len(sys.argv) > 3 else "A").encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(8)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.sendall(word)
    c.close()
PY
py_file ask.py <<'PY'
# ask.py PATH...: connects to each PATH, prints what it answers or the errno.
import errno, socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        print("got", s.recv(100).decode() or "EOF", flush=True)
    except OSError as e:
        print("connect:", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
py_file declare.py <<'PY'
# declare.py PATH...: declares each PATH a route root (as `udsfs run --route` does),
# prints the result; "many N PROCS": N paths from PROCS processes in turn, prints the
# counts of results.
import collections, errno, os, sys
f = os.environ["U"] + "/dgram/clone"
def declare(p):
    try:
        os.setxattr(f, "user.udsfs.route", p.encode())
        return "0"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
if sys.argv[1] == "many":
    n, procs = int(sys.argv[2]), int(sys.argv[3])
    total = collections.Counter()
    for k in range(procs):
        r, w = os.pipe()
        if os.fork() == 0:
            c = collections.Counter(declare("/many/%d/%d" % (k, i)) for i in range(n // procs))
            os.write(w, repr(dict(c)).encode())
            os._exit(0)
        os.close(w)
        got = b"".join(iter(lambda: os.read(r, 4096), b""))  # to EOF
        os.close(r)
        os.wait()
        total.update(eval(got))
    print("declared:", dict(sorted(total.items())), flush=True)
else:
    for p in sys.argv[1:]:
        print("declare %s: %s" % (p, declare(p)), flush=True)
PY
# plain_run UID PROGRAM ARGS: PROGRAM through `udsfs run` without a route, as UID.
plain_run() {
    local uid=$1
    shift
    as_uid "$uid" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp \
        -- /usr/bin/python3 "$TMP/$1" "${@:2}"
}
# a_serves DIR N: A's server at DIR/a.sock in the background, up.
a_serves() {
    plain_run $A serve.py "$1/a.sock" "$2" >"$TMP/serve.$3.out" 2>&1 &
    a_servers+=($!)
    for _ in $(seq 500); do grep -q listening "$TMP/serve.$3.out" && return; sleep 0.02; done
    fail "A's server at $1 did not come up: $(cat "$TMP/serve.$3.out")"
}
decl_failed=()
a_servers=()
judge() {
    if [ "$2" = 1 ]; then ok "$1: $3"; else decl_failed+=("$1: $3"); say "FAIL: $1: $3"; fi
}
shown() { stat -c '%a %u' "$@" | tr '\n' ' '; }

# decl_userns
as_uid $A mkdir -p "$MNT$K/r"
as_uid $A chmod 700 "$MNT$K/r"
a_serves "$MNT$K/r" 1 3
bdecl=$(as_uid $B unshare -Ur env U="$U" /usr/bin/python3 "$TMP/declare.py" "$K/r" "$K" 2>&1 | tr '\n' ' ')
after=$(shown "$MNT$K/r")
asked=$(plain_run $A ask.py "$MNT$K/r/a.sock" 2>&1)
say "decl_userns: B as root of its own user namespace: $bdecl; A's M/K/r then: $after; A's client: $asked"
judge decl_userns "$([ "$after" = "700 $A " ] && [ "$asked" = "got A" ] && echo 1)" \
    "A's M/K/r after B's declaration from a user namespace: $after(want 700 $A), A's client: $asked"

# decl_existing
as_uid $A mkdir -p "$MNT$K/p" || true
as_uid $A chmod 700 "$MNT$K/p" || true
a_serves "$MNT$K/p" 2 1
before=$(shown "$MNT/tmp" "$MNT$TMP" "$MNT$K" "$MNT$K/p")
brun=$(as_uid $B env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp --route "$K/p" \
    -- /usr/bin/python3 "$TMP/ask.py" "$K/p/a.sock" 2>&1 | tr '\n' ' ')
bdecl=$(as_uid $B env U="$U" /usr/bin/python3 "$TMP/declare.py" /tmp "$TMP" "$K" "$K/p/deeper" 2>&1 | tr '\n' ' ')
bls=$(as_uid $B ls "$MNT$K/p" 2>&1 | tr '\n' ' ') || true
bbind=$(plain_run $B ask.py "$MNT$K/p/a.sock" 2>&1)
after=$(shown "$MNT/tmp" "$MNT$TMP" "$MNT$K" "$MNT$K/p")
asked=$(plain_run $A ask.py "$MNT$K/p/a.sock" 2>&1)
say "decl_existing: A's M/tmp M/TMP M/K M/K/p before: $before; B's routed run at $K/p: $brun; B's declarations: $bdecl"
say "  B's ls of A's M/K/p: $bls; B's plain connect to A's name: $bbind; the directories after: $after; A's client: $asked"
judge decl_existing "$([ "$after" = "$before" ] && [ "$asked" = "got A" ] && [ "$before" = "755 $A 755 $A 755 $A 700 $A " ] && echo 1)" \
    "A's plain directories after B's declarations: $after(made $before), A's client: $asked (want got A)"

# decl_before
bdecl=$(as_uid $B env U="$U" /usr/bin/python3 "$TMP/declare.py" "$K/q" 2>&1)
made=$(as_uid $A mkdir -m 700 "$MNT$K/q" 2>&1 && echo made) || true
plain_run $A serve.py "$MNT$K/q/a.sock" 1 >"$TMP/serve.2.out" 2>&1 &
a_servers+=($!)
for _ in $(seq 500); do grep -q listening "$TMP/serve.2.out" && break; sleep 0.02; done
sleep 0.2
asked=$(plain_run $A ask.py "$MNT$K/q/a.sock" 2>&1)
after=$(shown "$MNT$K/q")
say "decl_before: $bdecl; A's mkdir -m 700 M/K/q then: $made, $after; A's server: $(head -c 300 "$TMP/serve.2.out" | tr '\n' ' '); A's client: $asked"
judge decl_before "$([ "$after" = "700 $A " ] && [ "$asked" = "got A" ] && echo 1)" \
    "A's M/K/q made after B's declaration of K/q: $after(want 700 $A), A's client: $asked (want got A)"

# decl_many
many=$(as_uid $B env U="$U" /usr/bin/python3 "$TMP/declare.py" many 60000 60 2>&1)
alive=$(stat -c %F "$U/dgram/clone" 2>&1)
taken=$(sed -n "s/.*'0': \([0-9]*\).*/\1/p" <<<"$many")
say "decl_many: B's 60,000 declarations: $many"
judge decl_many "$([ -n "$taken" ] && [ "$taken" -le 256 ] && grep -q "ENOSPC" <<<"$many" && echo 1)" \
    "B's 60,000 declarations: $many (want at most 256 taken, the rest ENOSPC); the mount after: $alive"
kill "${a_servers[@]}" 2>/dev/null || true
wait "${a_servers[@]}" 2>/dev/null || true
[ ${#decl_failed[@]} -eq 0 ] || fail "issue 29 cases failed: ${decl_failed[*]}"

for front in preload seccomp; do
    W=$TMP/$front
    R=$W/r # routed, world-writable: A makes its directory there
    mkdir -p -m 1777 "$R" "$W/f" # f: A's and the script's signs to each other
    chmod 755 "$W"
    # One run of root's: A's server in the background, B's tries one step at a time.
    cat >"$W/run.sh" <<SH
set -u
step() { touch "$W/f/\$1.go"; for i in \$(seq 300); do [ -e "$W/f/\$1.done" ] && return; sleep 0.02; done; echo "A did not do step \$1"; cat "$W/a.out"; }
setpriv --reuid=$A --regid=$A --clear-groups /usr/bin/python3 "$TMP/a.py" "$R" chmod:711 chmod:700 bind drain >"$W/a.out" 2>&1 &
a=\$!
for i in \$(seq 200); do [ -e "$W/f/up" ] && break; sleep 0.05; done
b() { setpriv --reuid=$B --regid=$B --clear-groups /usr/bin/python3 "$TMP/b.py" "\$@"; }
echo "1."; b "connect:$R/d/s.sock" "1-sendto:$R/d/s.sock"
step 0; echo "2."; b "2-sendto:$R/d/s.sock"
# d 0700 again; B through the mount's own files (no front) before and after A's bind
# below d, which brings the copy along.
step 1; echo "3a."; U=$U LD_PRELOAD= setpriv --reuid=$B --regid=$B --clear-groups /usr/bin/python3 "$TMP/b.py" "ctl-before:${R#/}/d/s.sock"
step 2; echo "3."; b "connect:$MNT$R/d/s.sock"
U=$U LD_PRELOAD= setpriv --reuid=$B --regid=$B --clear-groups /usr/bin/python3 "$TMP/b.py" "ctl:${R#/}/d/s.sock"
step 3
wait \$a
cat "$W/a.out"
SH
    out=$(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front "$front" --route "$R" -- \
        bash "$W/run.sh" 2>&1) || fail "[$front] the run failed: $out"
    say "[$front] A's socket in A's routed directory, B's tries:"
    say "$out"
    want_line "connect:$R/d/s.sock " "connect:$R/d/s.sock errno 13" \
        "1. B connected to A's socket in A's 0700 routed directory" "(Linux: EACCES)"
    want_line 1-sendto: "1-sendto:$R/d/s.sock errno 13" \
        "1. B's sendto reached A's socket in A's 0700 routed directory" "(Linux: EACCES)"
    ok "[$front] 1. B's connect and sendto into A's 0700 routed directory: EACCES"
    want_line 2-sendto: "2-sendto:$R/d/s.sock ok" "2. B's sendto with search permission on d" "(Linux: sent)"
    ok "[$front] 2. d 0711: B's sendto goes through"
    say "[$front] 3. the mount's copy of d after A's bind in d 0700: $(stat -c '%a %U' "$MNT$R/d")"
    want_line "connect:$MNT" "connect:$MNT$R/d/s.sock errno 13" \
        "3. B connected to A's socket through the mount's path under the front" "(Linux: EACCES)"
    ok "[$front] 3. through the mount's path under the front: EACCES (the kernel's d decides)"
    say "[$front] 3a. before A's bind, through the mount's own files (the copy as it was, README): $(grep "^ctl-before:" <<<"$out")"
    want_line ctl: "ctl:${R#/}/d/s.sock errno 13" \
        "3. B connected to A's socket through the mount's own files after A's bind in d 0700" \
        "(want EACCES: the copy follows d)"
    ok "[$front] 3. through the mount's own files too, once A bound below d"
    got=$(grep "^A received:" <<<"$out" || true)
    [ "$got" == "A received: 2-sendto" ] || fail "[$front] 4. A's socket received '$got' (want only B's message of 2)"
    ok "[$front] 4. A's socket received only the message B was allowed to send"
done
# decl_mode
# (M/K root's and A's M/K/am: the copies of root's K and A's K/am, as A's routed run
# would have made them)
mkdir -p "$MNT$K/am" && chown 0:0 "$MNT$K" && chown $A:$A "$MNT$K/am" && chmod 755 "$MNT$K" "$MNT$K/am"
as_uid $A mkdir -m 700 "$MNT$K/am/m" || true
before=$(shown "$MNT$K/am/m")
# (as C: B's declarations are spent, decl_many)
brun=$(as_uid $C env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp --route "$K/am/m" \
    -- /usr/bin/python3 "$TMP/ask.py" "$K/am/m/x.sock" 2>&1 | tr '\n' ' ') || true
after=$(shown "$MNT$K/am/m")
cbind=$(plain_run $C serve.py "$MNT$K/am/m/c.sock" 0 2>&1 | tail -n 1) || true
say "decl_mode: A's M/K/am/m: $before(the kernel's: $(shown "$K/am/m")); C's routed run at $K/am/m: $brun; A's M/K/am/m then: $after; C's bind in it: $cbind"
judge decl_mode "$([ "$after" = "700 $A " ] && grep -q "Permission denied" <<<"$cbind" && echo 1)" \
    "A's plain M/K/am/m after C's declaration and routed connect below it: $after(want 700 $A, as A made it); C's bind there: $cbind (want EACCES)"

# decl_squat
mkdir -p "$MNT$K/s" && chown $C:$C "$MNT$K/s" && chmod 777 "$MNT$K/s"
arun() { as_uid $A env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp --route "$K/s" -- /usr/bin/python3 "$@"; }
arun "$TMP/serve.py" "$K/s/a.sock" 1 >"$TMP/serve.6.out" 2>&1 &
a_servers+=($!)
for _ in $(seq 300); do grep -q "listening\|Error" "$TMP/serve.6.out" && break; sleep 0.02; done
abind=$(tail -n 1 "$TMP/serve.6.out")
moved=$(as_uid $C mv "$MNT$K/s/a.sock" "$MNT$K/s/aside" 2>&1 && echo moved) || true
plain_run $C serve.py "$MNT$K/s/a.sock" 1 C >"$TMP/serve.7.out" 2>&1 &
a_servers+=($!)
for _ in $(seq 300); do grep -q "listening\|Error" "$TMP/serve.7.out" && break; sleep 0.02; done
asked=$(arun "$TMP/ask.py" "$K/s/a.sock" 2>&1) || true
say "decl_squat: C's M/K/s: $(shown "$MNT$K/s")(the kernel's: $(shown "$K/s")); A's routed bind: $abind; C's move of A's node: $moved; C's bind: $(tail -n 1 "$TMP/serve.7.out"); A's client: $asked"
judge decl_squat "$([ "$asked" != "got C" ] && echo 1)" \
    "A's routed client at its name in C's squatted M/K/s: $asked (want anything but C's answer)"
kill "${a_servers[@]}" 2>/dev/null || true
wait "${a_servers[@]}" 2>/dev/null || true

[ ${#decl_failed[@]} -eq 0 ] || fail "issue 29 cases failed: ${decl_failed[*]}"
say "adversarial_routed_dirs: all passed"

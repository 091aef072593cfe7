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
say "adversarial_routed_dirs: all passed"

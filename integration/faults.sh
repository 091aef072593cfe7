#!/usr/bin/env bash
# Faults: clients die at random points, the daemon is unmounted or terminated under
# load, and nothing hangs or leaks.
# 1. A client parked in `connect` (full backlog) through its .udsfs/stream/clone
#    handle holds up no one else: another process's `bind` on its own new socket,
#    through its own clone handle, completes at once (and a SIGKILL would end it).
# 2. UDSFS_FAULT_KILLS (60) SIGKILLs, each to a random one of 8 live clients, after a
#    random delay: clients blocked in read (dgram, stream pair, seqpacket msg), in a
#    write on a full queue (dgram to a full receiver, stream pair over its send
#    buffer), in accept (own and shared listener), in connect on a full backlog (ctl
#    and .udsfs/connect/), or in the middle of a msg record split over two writes
#    (killed between the writes, or blocked in the second). Each killed client must be
#    gone within 1 s; every 10 kills a dgram round trip must work; afterwards the
#    socket count (.udsfs/gc sockets=, .udsfs/unix rows) and parked requests must be
#    back to the baseline within 5 s, the full receiver must hold only what was there
#    before (no half record, no late send of a dead writer) and the full listener only
#    its one pending connection (no late connect of a dead client).
# 3. `udsfs umount` with 100 clients parked in the mount: all of them end with an error
#    within 2 s; the daemon exits and the mount is gone.
# 4. SIGTERM to the daemon with 20 parked clients: the same, and the directory is a
#    plain empty directory again, usable, and mountable again.
# Prints the figures: faults injected, how many hit a parked client, end times.
# UDSFS_FAULT_SEED replays a run's random choices.
source "$(dirname "$0")/lib.sh"

# The driver: python, forking clients that block in the mount; lib.sh's prelude
# (udsfs_files.py) comes first. argv: MODE [ARGS]; modes: holdup, kills, umount UDSFS_BIN, sigterm PID.
read -r -d '' DRIVER <<'EOF' || true
import random, subprocess

sys.stdout.reconfigure(line_buffering=True)
MODE = sys.argv[1]
SEED = int(os.environ.get("UDSFS_FAULT_SEED") or random.randrange(1 << 30))
rnd = random.Random(SEED)
problems = []

# descriptors this process inherited on the mount (the shell's) are not ours to keep
for fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(M + "/"):
            os.close(int(fd))
    except OSError:
        pass

def gc():
    return dict(l.split("=", 1) for l in open(U + "/gc").read().split())

def counts():
    g = gc()
    rows = len(open(U + "/unix").read().splitlines()) - 1
    return int(g["sockets"]), rows, int(g["parked"])

# ---- fixtures: a dgram receiver whose queue is full, a listener whose backlog is
# full, a listener nobody accepts on
# (names of this run: a node outlives its socket)
FDG, FLS, SLS = (f"{name}-{os.getpid()}" for name in ("full.dg", "full.ls", "shared.ls"))
dg_fd, DG = clone("dgram"); ctl(dg_fd, "bind " + FDG)
t_fd, T = clone("dgram"); ctl(t_fd, "connect " + FDG)
tw = os.open(f"{U}/sock/{T}/data", os.O_WRONLY | os.O_NONBLOCK)
FILLED = fill(tw, b"fill")
ls_fd, LS = clone("stream"); ctl(ls_fd, "bind " + FLS); ctl(ls_fd, "listen 0")
pending = os.open(U + "/connect/" + FLS, os.O_RDWR | os.O_NONBLOCK)
try:
    os.open(U + "/connect/" + FLS, os.O_RDWR | os.O_NONBLOCK)
    problems.append(f"a second connect to {FLS} (listen 0, one pending) did not fail")
except BlockingIOError:
    pass
sh_fd, SH = clone("stream"); ctl(sh_fd, "bind " + SLS); ctl(sh_fd, "listen 4")

# ---- the clients: each blocks in the mount (or, for msg-split-sleep, in userspace
# between the two writes of one record)
def read_dgram():
    fd, n = clone("dgram")
    os.read(os.open(f"{U}/sock/{n}/data", os.O_RDONLY), 100)

def read_stream_pair():
    fd, n, m = pair("stream")
    os.read(os.open(f"{U}/sock/{m}/data", os.O_RDWR), 100)

def read_seqpacket_msg():
    fd, n, m = pair("seqpacket")
    os.read(os.open(f"{U}/sock/{n}/msg", os.O_RDWR), 100)

def write_full_dgram():
    fd, n = clone("dgram"); ctl(fd, "connect " + FDG)
    os.write(os.open(f"{U}/sock/{n}/data", os.O_WRONLY), b"late")

def write_full_stream():
    fd, n, m = pair("stream")
    d = os.open(f"{U}/sock/{n}/data", os.O_WRONLY)
    while True:
        os.write(d, b"z" * 65536)

def accept_own():
    fd, n = clone("stream"); ctl(fd, "bind"); ctl(fd, "listen 1")
    os.open(f"{U}/sock/{n}/accept", os.O_RDONLY)

def accept_shared():
    os.open(f"{U}/sock/{SH}/accept", os.O_RDONLY)

def connect_view_full():
    os.open(U + "/connect/" + FLS, os.O_RDWR)

def connect_ctl_full():
    fd, n = clone("stream"); ctl(fd, "connect " + FLS)

def msg_split(second):
    fd, n = clone("dgram"); ctl(fd, "connect " + FDG)
    m = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
    os.write(m, b"len=10\nhello")
    if second:
        os.write(m, b"world")  # completes the record: blocks on the full queue
    else:
        time.sleep(3600)

def msg_split_sleep():
    msg_split(False)

def msg_split_block():
    msg_split(True)

def msg_header_split():
    fd, n = clone("dgram"); ctl(fd, "connect " + FDG)
    m = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
    os.write(m, b"len=4 to")
    time.sleep(3600)

BLOCKING = [read_dgram, read_stream_pair, read_seqpacket_msg, write_full_dgram,
            write_full_stream, accept_own, accept_shared, connect_view_full,
            connect_ctl_full, msg_split_block]
KINDS = BLOCKING + [msg_split_sleep, msg_header_split]

rep_r, rep_w = os.pipe()
os.set_blocking(rep_r, False)

def spawn(kind, stay):
    pid = os.fork()
    if pid == 0:
        os.close(rep_r)
        try:
            kind()
            what = "returned"
        except OSError as e:
            what = errno.errorcode.get(e.errno, str(e.errno))
        os.write(rep_w, f"{os.getpid()} {kind.__name__} {what}\n".encode())
        if stay:
            time.sleep(3600)  # the kill is still to come
        os._exit(0 if what == "returned" else 1)
    return pid

def reports():
    out = b""
    while True:
        try:
            chunk = os.read(rep_r, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        out += chunk
    return [l.split() for l in out.decode().splitlines()]

def proc_state(pid):
    try:
        st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        return f"{st}, wchan {open(f'/proc/{pid}/wchan').read()}"
    except OSError:
        return "gone"

def wchan(pid):
    try:
        return open(f"/proc/{pid}/wchan").read()
    except OSError:
        return ""

def parked(pid):
    """Waiting for the daemon's answer to a request (parked there)."""
    return wchan(pid) == "request_wait_answer"

def blocked(pid):
    """Parked, or waiting in the kernel's FUSE code for its turn (an inode lock)."""
    return parked(pid) or "fuse" in wchan(pid)

def wait_gone(pid, limit):
    t0 = time.monotonic()
    while True:
        r, st = os.waitpid(pid, os.WNOHANG)
        if r:
            return time.monotonic() - t0, st
        if time.monotonic() - t0 > limit:
            return None, None
        time.sleep(0.0005)

def round_trip(i):
    fd, n, m = pair("dgram")
    a = os.open(f"{U}/sock/{n}/data", os.O_RDWR)
    b = os.open(f"{U}/sock/{m}/data", os.O_RDWR | os.O_NONBLOCK)
    os.write(a, b"probe %d" % i)
    t0 = time.monotonic()
    while True:
        try:
            got = os.read(b, 100)
            break
        except BlockingIOError:
            if time.monotonic() - t0 > 1:
                problems.append(f"round trip {i}: nothing arrived within 1 s")
                got = None
                break
            time.sleep(0.001)
    for x in (a, b, fd):
        os.close(x)
    if got is not None and got != b"probe %d" % i:
        problems.append(f"round trip {i}: got {got!r}")
    return got is not None

def wait_all(pids, limit, pred):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if all(pred(p) for p in pids):
            return True
        time.sleep(0.01)
    return False

def fail_out():
    for p in problems:
        print("PROBLEM:", p)
    sys.exit(1 if problems else 0)

if MODE == "holdup":
    # a client parked in `connect` through a .udsfs/stream/clone handle; then another
    # process runs a command on its own new socket through the same clone file
    def bind_own_stream():
        fd, n = clone("stream"); ctl(fd, "bind")
    def bind_own_dgram():
        fd, n = clone("dgram"); ctl(fd, "bind")
    a = spawn(connect_ctl_full, True)
    if not wait_all([a], 5, parked):
        problems.append(f"connect to {FLS} did not park ({proc_state(a)})")
        fail_out()
    print(f"pid {a} parked in `connect {FLS}` written to its .udsfs/stream/clone handle")
    for kind in (bind_own_dgram, bind_own_stream):
        b = spawn(kind, False)
        took, st = wait_gone(b, 1)
        if took is not None:
            print(f"{kind.__name__}: another process's `bind` on its own new socket took {took*1000:.1f} ms")
            continue
        problems.append(f"{kind.__name__}: another process's `bind` on its own new socket (pid {b}) "
                        f"is held up for 1 s by the parked connect ({proc_state(b)})")
        os.kill(b, signal.SIGKILL)
        if wait_gone(b, 1)[0] is None:
            problems.append(f"{kind.__name__}: and SIGKILL does not end it within 1 s ({proc_state(b)})")
        os.kill(a, signal.SIGKILL)
        took, st = wait_gone(b, 2)
        print(f"{kind.__name__}: pid {b} ended "
              + (f"{took*1000:.0f} ms after the parked connect was killed" if took is not None else "not even then"))
        break
    os.kill(a, signal.SIGKILL)
    wait_gone(a, 2)
    reports()
    fail_out()

if MODE == "kills":
    KILLS = int(os.environ.get("UDSFS_FAULT_KILLS") or 60)
    base = counts()
    print(f"seed {SEED}; fixtures: dgram {DG} at {FDG} holding {FILLED} messages (full), "
          f"listener {LS} at {FLS} (listen 0, one pending), listener {SH} at {SLS}; "
          f"baseline sockets={base[0]} unix rows={base[1]} parked={base[2]}")
    live = {}
    times, kinds, hit_parked, trips, stuck = [], {}, 0, 0, []
    def kill(pid):
        global hit_parked
        kind = live.pop(pid)
        was_parked = parked(pid)
        hit_parked += was_parked
        os.kill(pid, signal.SIGKILL)
        took, st = wait_gone(pid, 2)
        if took is None:
            problems.append(f"{kind.__name__} (pid {pid}, parked={was_parked}) still there 2 s after SIGKILL "
                            f"(state {proc_state(pid)})")
            stuck.append(pid)
            return
        times.append(took)
        kinds[kind.__name__] = kinds.get(kind.__name__, 0) + 1
        if took > 1.0:
            problems.append(f"{kind.__name__} (pid {pid}, parked={was_parked}) took {took*1000:.0f} ms to end after SIGKILL")
    for i in range(KILLS):
        while len(live) < 8:
            k = rnd.choice(KINDS)
            live[spawn(k, True)] = k
        if rnd.random() < 0.2:
            # the newest client, at once: mid-open, mid-clone, mid-command
            time.sleep(rnd.uniform(0, 0.003))
            kill(max(live))
        else:
            time.sleep(rnd.uniform(0, 0.06))
            kill(rnd.choice(sorted(live)))
        if i % 10 == 9:
            trips += round_trip(i)
    for pid in sorted(live):
        kill(pid)
    for pid in stuck:
        took, st = wait_gone(pid, 5)
        if took is not None:
            print(f"pid {pid} ended only after the other clients were killed")
    # a client that got past its blocking call (or failed before it) says so
    for r in reports():
        problems.append(f"client {r[1]} (pid {r[0]}) did not block: {r[2]}")
    times.sort()
    print(f"faults injected: {len(times)} SIGKILLs, {hit_parked} of them to a client parked in the mount; "
          f"end after the kill: median {times[len(times)//2]*1000:.1f} ms, max {times[-1]*1000:.1f} ms")
    print("kills by client kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(f"dgram round trips during the kills: {trips}")
    if hit_parked < len(times) // 3:
        problems.append(f"only {hit_parked} of {len(times)} kills hit a parked client")
    t0 = time.monotonic()
    while counts() != base and time.monotonic() - t0 < 5:
        time.sleep(0.01)
    now = counts()
    print(f"after the kills: sockets={now[0]} unix rows={now[1]} parked={now[2]} "
          f"({(time.monotonic() - t0)*1000:.0f} ms to settle)")
    if now != base:
        problems.append(f"sockets/rows/parked {now}, baseline {base}: leaked")
    # nothing of the dead arrives late at the full receiver or the full listener
    st = status(DG)
    if st["rcvq_msgs"] != str(FILLED):
        problems.append(f"{FDG} holds {st['rcvq_msgs']} messages, want {FILLED}")
    d = os.open(f"{U}/sock/{DG}/data", os.O_RDONLY | os.O_NONBLOCK)
    got = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:  # drained: a parked dead writer would now get in
        try:
            got.append(os.read(d, 100))
        except BlockingIOError:
            time.sleep(0.01)
    late = [g for g in got if g != b"fill"]
    if len(got) != FILLED or late:
        problems.append(f"{FDG} gave {len(got)} messages (want {FILLED}), of the dead: {late[:5]}")
    a = os.open(f"{U}/sock/{LS}/accept", os.O_RDONLY | os.O_NONBLOCK)
    os.close(a)
    time.sleep(0.3)
    try:
        os.close(os.open(f"{U}/sock/{LS}/accept", os.O_RDONLY | os.O_NONBLOCK))
        problems.append(f"{FLS} had a second pending connection: a dead client's connect went through")
    except BlockingIOError:
        pass
    # a dead client's accept left parked would take this connection
    c = os.open(U + "/connect/" + SLS, os.O_RDWR | os.O_NONBLOCK)
    time.sleep(0.05)
    try:
        os.close(os.open(f"{U}/sock/{SH}/accept", os.O_RDONLY | os.O_NONBLOCK))
    except BlockingIOError:
        problems.append(f"a connection to {SLS} was taken by a dead client's accept")
    os.close(c)
    if round_trip(-1):
        print("dgram round trip after the kills: ok")
    fail_out()

if MODE in ("umount", "sigterm"):
    n = 100 if MODE == "umount" else 20
    pids = {spawn(BLOCKING[i % len(BLOCKING)], False): BLOCKING[i % len(BLOCKING)] for i in range(n)}
    if not wait_all(pids, 10, blocked):
        idle = [k.__name__ for p, k in pids.items() if not blocked(p)]
        problems.append(f"{len(idle)} clients did not block in the mount: {idle[:10]}")
        fail_out()
    time.sleep(0.1)
    held = sorted({k.__name__ for p, k in pids.items() if not parked(p)})
    g = gc()
    print(f"{n} clients blocked in the mount: {sum(map(parked, pids))} parked "
          f"in the daemon (.udsfs/gc parked={g['parked']}, sockets={g['sockets']}), the others waiting "
          f"in the kernel behind a parked request ({', '.join(held) or 'none'})")
    t0 = time.monotonic()
    if MODE == "umount":
        r = subprocess.run([sys.argv[2], "umount", M], capture_output=True, timeout=10)
        print(f"udsfs umount returned {r.returncode} after {(time.monotonic() - t0)*1000:.0f} ms")
        if r.returncode != 0:
            problems.append(f"udsfs umount: status {r.returncode}: {r.stderr.decode()}")
    else:
        os.kill(int(sys.argv[2]), signal.SIGTERM)
    ends, codes = [], {}
    for pid, kind in pids.items():
        left = 2.0 - (time.monotonic() - t0)
        took, st = wait_gone(pid, max(left, 0))
        if took is None:
            problems.append(f"{kind.__name__} (pid {pid}) still parked 2 s after the {MODE} "
                            f"(wchan {open(f'/proc/{pid}/wchan').read()})")
            os.kill(pid, signal.SIGKILL)
            continue
        ends.append(time.monotonic() - t0)
        code = os.waitstatus_to_exitcode(st)
        codes[code] = codes.get(code, 0) + 1
    outcomes = {}
    for r in reports():
        key = f"{r[1]}:{r[2]}"
        outcomes[key] = outcomes.get(key, 0) + 1
        if r[2] == "returned":
            problems.append(f"{r[1]} (pid {r[0]}) returned without an error after the {MODE}")
    if ends:
        print(f"after the {MODE}: {len(ends)} of {n} clients ended, the last {max(ends)*1000:.0f} ms after it; "
              f"exit codes {codes}; errors {outcomes}")
    fail_out()
EOF

# Failures of the driver's checks are collected, so that every part runs and reports.
FAILED=()

# ---- 1. a parked client holds up nobody
say "--- 1. a client parked in connect (through a clone handle) holds up no one else"
if py "$DRIVER" holdup; then
    ok "commands on other sockets ran while a connect was parked"
else
    FAILED+=("1: a connect parked on a clone handle held up another process's command and made it unkillable")
fi

# ---- 2. random SIGKILLs
say "--- 2. SIGKILL to clients at random points"
if py "$DRIVER" kills | tee "$TMP/kills.out"; then
    ok "nothing hung, nothing leaked"
else
    FAILED+=("2: clients killed at random points: $(grep -c '^PROBLEM' "$TMP/kills.out") problems")
fi
proc_alive "$DAEMON_PID" || fail "the daemon died during the kills"
ok "daemon $DAEMON_PID still running"
KILLED=$(sed -n 's/^faults injected: \([0-9]*\) .*/\1/p' "$TMP/kills.out")

# ---- 3. udsfs umount with 100 parked clients
say "--- 3. udsfs umount with 100 clients parked"
daemon=$DAEMON_PID
py "$DRIVER" umount "$UDSFS_BIN" || fail "udsfs umount with 100 parked clients (above)"
ended_within "$daemon" 3000 || fail "daemon $daemon still runs 3 s after udsfs umount"
DAEMON_PID=
! grep -q " $MNT " /proc/mounts || fail "$MNT is still in /proc/mounts after udsfs umount"
ok "daemon gone and $MNT unmounted"

# ---- 4. SIGTERM with 20 parked clients
say "--- 4. SIGTERM to the daemon with 20 clients parked"
udsfs_mount
daemon=$DAEMON_PID
py "$DRIVER" sigterm "$daemon" || fail "SIGTERM with 20 parked clients (above)"
ended_within "$daemon" 3000 || fail "daemon $daemon still runs 3 s after SIGTERM"
DAEMON_PID=
! grep -q " $MNT " /proc/mounts || fail "$MNT is still in /proc/mounts after SIGTERM"
! mounted "$MNT" || fail "$MNT is still in /proc/self/mountinfo after SIGTERM"
ok "daemon gone and $MNT unmounted"
listing=$(ls -A "$MNT") || fail "ls $MNT after SIGTERM"
[ -z "$listing" ] || fail "$MNT is not empty after SIGTERM: $listing"
if ! { : >"$MNT/probe" && rm "$MNT/probe"; }; then
    fail "cannot create and remove a file in $MNT after SIGTERM"
fi
ok "$MNT is a plain, empty, writable directory again"
udsfs_mount
new_pair Q dgram
send "$Q_N" "again" || fail "send on the new mount"
expect_eq "dgram round trip on the mount made again on $MNT" "$(recv "$Q_M")" again
close_fd "$Q_FD"

[ "${#FAILED[@]}" -eq 0 ] || fail "$(printf '%s\n' "${FAILED[@]}")"
say "faults injected: $((KILLED + 2)) ($KILLED SIGKILLs to clients, 1 udsfs umount under 100 parked clients, 1 SIGTERM under 20)"

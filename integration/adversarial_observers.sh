#!/usr/bin/env bash
# adversarial_observers.sh: what user B's captures give away of user A's sockets, and
# what they cost A, on an --allow-other mount (A = 61001, B = 61002). Each attack prints
# what it tried and what it got; the script fails at the end if one got through.
#  1. the passed-away socket: B makes a stream socket, passes it to A's service (a dgram
#     socket of A's, over a `msg` record's rights=) and closes every copy of its own; A
#     connects it to A's listener in a 0700 directory and they exchange a secret. B's
#     capture, open all along, must hold neither secret: a capture shows a message only
#     if its reader may open one of its ends when it is sent (src/engine/access.rs),
#     not because it made the socket once. Root's capture holds both (the capture works).
#  2. ids and counters: B's capture of its own three messages, with 300 of A's
#     1000-byte messages between A's own sockets around them and a 64 KiB buffer: its
#     packet ids are 1, 2, 3 (no gap counting A's messages) and no drop count or
#     interface statistics block counts anything (A's bytes would overflow the buffer).
#  3. captures by the thousand: 4 processes of B each try to open 15000 captures
#     (UDSFS_OBSERVER_ATTEMPTS) and shrink each with `buffer 1`; at most 64 stay open at
#     once (each is charged at least 64 KiB, and a user has at most 64), the rest get
#     ENOBUFS. A's 100-byte round trip (a dgram pair through `data`) is measured under
#     B's captures and alone just after, in three turns, and the best turn must be
#     within 3x: a message costs only the taps that may see it (it took 12 ms under
#     60000 captures, 100x, when every message walked every tap). The 1.5x goal is a
#     `scripts/bench` figure, not a timed test.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"

for_other_users
export ATTEMPTS=${UDSFS_OBSERVER_ATTEMPTS:-15000}

py "$(
    cat <<'EOF'
A, B = 61001, 61002
THROUGH = []

def die(msg):
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)

def holds(what, got, want):
    """An attack's outcome: printed, and counted as through when it is not `want`."""
    ok = got == want
    print(f"{'ok' if ok else 'GOT THROUGH'}: {what} -> {got!r} (want {want!r})", flush=True)
    if not ok:
        THROUGH.append(f"{what}: {got!r}, want {want!r}")

def capture(lines=b""):
    """A capture of the mount, non-blocking, with its filter `lines` written."""
    fd = os.open(f"{U}/capture", os.O_RDWR | os.O_NONBLOCK)
    if lines:
        os.write(fd, lines)
    return fd


def blocks(data):
    """(type, body) of each pcapng block."""
    i, out = 0, []
    while i + 12 <= len(data):
        ty, ln = int.from_bytes(data[i:i+4], "little"), int.from_bytes(data[i+4:i+8], "little")
        out.append((ty, data[i+8:i+ln-4]))
        i += ln
    return out

def options(body):
    """The options after a block's fixed part, {code: [value]}."""
    opts, i = {}, 0
    while i + 4 <= len(body):
        code, ln = int.from_bytes(body[i:i+2], "little"), int.from_bytes(body[i+2:i+4], "little")
        if code == 0:
            break
        opts.setdefault(code, []).append(body[i+4:i+4+ln])
        i += 4 + ((ln + 3) & ~3)
    return opts

def packets(data):
    """(packet id, drop count, payload tail, comment) of each Enhanced Packet Block."""
    out = []
    for ty, body in blocks(data):
        if ty != 6:
            continue
        caplen = int.from_bytes(body[12:16], "little")
        o = options(body[20 + ((caplen + 3) & ~3):])
        u64 = lambda c: int.from_bytes(o[c][0], "little") if c in o else None
        out.append((u64(5), u64(4), body[20:20+caplen][-12:], o.get(1, [b""])[0].decode()))
    return out

def statistics(data):
    """(isb_ifrecv, isb_ifdrop) of each Interface Statistics Block."""
    out = []
    for ty, body in blocks(data):
        if ty == 5:
            o = options(body[12:])
            out.append(tuple(int.from_bytes(o[c][0], "little") if c in o else None for c in (4, 5)))
    return out

a, b = Actor(A, nofile=20000), Actor(B, nofile=20000)

# ---- 1. the passed-away socket
root_cap = capture()
b.do("bcap = capture()")
a.do("os.mkdir(M + '/apriv', 0o700);"
     "Lf, L = clone('stream'); ctl(Lf, 'bind apriv/srv.sock'); ctl(Lf, 'listen');"
     "Rf, R = clone('dgram'); old = os.umask(0); ctl(Rf, 'bind svc.sock'); os.umask(old);"
     "rm = opn(R, 'msg')")
b.do("Sf, S = clone('stream'); Tf, T = clone('dgram'); tm = opn(T, 'msg');"
     "os.write(tm, f'len=5 to=svc.sock rights={S}\\nhello'.encode());"
     "[os.close(f) for f in (tm, Tf, Sf)]")
S = b.ev("S")
a.do("h, _ = record(rm); H = int(h['rights']); hc = opn(H, 'ctl');"
     "ctl(hc, 'connect apriv/srv.sock'); hd = opn(H, 'data');"
     "af = os.open(f'{U}/sock/{L}/accept', os.O_RDWR); C = int(os.read(af, 64)); cd = opn(C, 'data');"
     "os.write(hd, b'A-SECRET-UP'); got_up = os.read(cd, 100);"
     "os.write(cd, b'A-SECRET-DOWN'); got_down = os.read(hd, 100)")
print(f"B made socket {S} and passed it to A's svc.sock; A received it as entry "
      f"{a.ev('H')}, connected it to apriv/srv.sock (accepted as {a.ev('C')}) and "
      f"exchanged {a.ev('got_up')!r} / {a.ev('got_down')!r}", flush=True)
b.do("raw = drain(bcap)")
shown = b.ev("[(i, d, p.hex(), c) for i, d, p, c in packets(raw)]")
print(f"B's capture shows {len(shown)} packets:", flush=True)
for i, d, p, c in shown:
    print(f"  id={i} drops={d} payload tail={bytes.fromhex(p)!r} comment={c!r}", flush=True)
holds("B's capture holds A's secret (either way)", b.ev("b'A-SECRET' in raw"), False)
root_all = drain(root_cap)
holds("root's capture holds both secrets",
      b"A-SECRET-UP" in root_all and b"A-SECRET-DOWN" in root_all, True)
a.do("[os.close(f) for f in (hd, hc, cd, af)]")
b.do("os.close(bcap)")
os.close(root_cap)

# ---- 2. ids and counters
b.do("bcap = capture(b'buffer 65536\\n'); pf, p1, p2 = pair('dgram'); "
     "p1d, p2d = opn(p1, 'data'), opn(p2, 'data')")
a.do("qf, q1, q2 = pair('dgram'); q1d, q2d = opn(q1, 'data'), opn(q2, 'data')\n"
     "def talk(n):\n"
     "    for _ in range(n):\n"
     "        os.write(q1d, b'a' * 1000); os.read(q2d, 2000)")
for i in range(3):
    b.do(f"os.write(p1d, b'B-{i}'); os.read(p2d, 100)")
    if i < 2:
        a.do("talk(150)")
b.do("raw = drain(bcap)")
cap = b.ev("[(i, d, p.hex(), c) for i, d, p, c in packets(raw)]")
isb = b.ev("statistics(raw)")
print(f"B's capture while A sent 300 messages of 1000 bytes between its own sockets: "
      f"{len(cap)} packets, ids {[i for i, *_ in cap]}, drop counts {[d for _, d, *_ in cap]}, "
      f"interface statistics (ifrecv, ifdrop) {isb}", flush=True)
holds("the packet ids of B's capture of its 3 messages", [i for i, *_ in cap], [1, 2, 3])
holds("the drop counts in B's capture", [d for _, d, *_ in cap if d], [])
holds("the interface statistics blocks in B's capture", isb, [])
b.do("[os.close(f) for f in (p1d, p2d, pf, bcap)]")

# ---- 3. captures by the thousand
a.do("xf, x1, x2 = pair('dgram'); x1d, x2d = opn(x1, 'data'), opn(x2, 'data')\n"
     "def rtt(n):\n"
     "    t = time.monotonic()\n"
     "    for _ in range(n):\n"
     "        os.write(x1d, b'p' * 100); os.read(x2d, 200)\n"
     "        os.write(x2d, b'q' * 100); os.read(x1d, 200)\n"
     "    return (time.monotonic() - t) / n * 1e6")
a.ev("rtt(50)")  # warm up
alone, under = [a.ev("rtt(200)")], []
workers = [Actor(B, nofile=20000) for _ in range(4)]
OPEN = (
    "held, refused, errs = [], 0, set()\n"
    "for _ in range(ATTEMPTS):\n"
    "    try:\n"
    "        fd = os.open(U + '/capture', os.O_RDWR)\n"
    "    except OSError as e:\n"
    "        refused += 1; errs.add(errno.errorcode[e.errno]); continue\n"
    "    try:\n"
    "        os.write(fd, b'buffer 1\\n')\n"
    "    except OSError as e:\n"
    "        errs.add('buffer ' + errno.errorcode[e.errno])\n"
    "    held.append(fd)\n"
)

def open_all(attempts):
    for w in workers:
        w.send(f"ATTEMPTS = {attempts}\n" + OPEN)
    for w in workers:
        w.answer()
    return [w.ev("len(held)") for w in workers]

t = time.monotonic()
opened = open_all(int(os.environ["ATTEMPTS"]))
took = time.monotonic() - t
errs = sorted(set(sum((w.ev("sorted(errs)") for w in workers), [])))
print(f"B's 4 processes tried {4 * int(os.environ['ATTEMPTS'])} captures with `buffer 1` in "
      f"{took:.1f} s: {opened} open ({sum(opened)}), refusals: {errs}", flush=True)
holds("B's captures open at once", sum(opened), 64)
holds("what B's opens past the bound got", errs, ["ENOBUFS"])
holds("A opening a capture meanwhile", a.ev("err(lambda: os.close(capture()))"), "OK")
holds("root opening a capture meanwhile", err(lambda: os.close(capture())), "OK")
# A's round trips alone and under B's captures, in turns (the machine's other load
# drifts): B's captures of the first turn are those above; in each next turn B's
# processes try as many again.
counts = [sum(opened)]
for turn in range(3):
    if turn:
        counts.append(sum(open_all(int(os.environ["ATTEMPTS"]))))
    # The burst of opens leaves the machine's other work to catch up a moment after.
    time.sleep(1)
    under.append(a.ev("rtt(200)"))
    for w in workers:
        w.do("[os.close(f) for f in held]")
    time.sleep(0.2)  # the releases of B's closes reach the daemon a moment later
    alone.append(a.ev("rtt(200)"))
# Each turn's figure under B's captures against the one alone just after it: the
# best of those ratios (a turn the machine's other load spoiled shows in the others).
ratio = min(u / al for u, al in zip(under, alone[1:]))
print(f"A's 100-byte round trip, runs of 200: {[round(x) for x in alone]} us alone, "
      f"{[round(x) for x in under]} us under B's {counts} captures (turns: under, then "
      f"alone); best turn {ratio:.2f}x", flush=True)
holds("A's round trip under B's captures within 3x of alone (best turn)", ratio <= 3, True)

if THROUGH:
    die(f"{len(THROUGH)} got through: " + "; ".join(THROUGH))
print("ok: every observer attack refused", flush=True)
EOF
)"

#!/usr/bin/env bash
# udsfs ss against ss -x, column by column. One python process builds the same scenario
# twice, on kernel sockets (paths in a scratch directory) and through the mount's files:
# a stream listener on srv.sock (backlog 5) with an accepted connection that has 5 bytes
# queued and a client not yet accepted; a dgram receiver on an abstract name and a
# sender connected to it with 3 bytes queued; an unconnected seqpacket socket with
# passcred on; a stream socketpair. The process holds each udsfs socket by its
# .udsfs/sock/N/ctl file. Then for each set of flags and filters the script runs
# `ss -x...` and `udsfs ss -x...` and compares every column of every row, after
# normalising what must differ: socket inode numbers (each becomes the role of its
# socket), the path prefix (scratch directory / mount), fd numbers, the node's ino:/dev:,
# and the fields only udsfs prints (refs:, passcred:, peercred:).
source "$(dirname "$0")/lib.sh"
command -v ss >/dev/null || fail "ss is missing (package iproute2; .ci/run installs it)"
mkdir "$TMP/k"

UDSFS_BIN=$UDSFS_BIN K=$TMP/k python3 - <<'EOF' || fail "ss and udsfs ss differ"
import os, re, socket, subprocess, sys

M, U, K, BIN = os.environ["MNT"], os.environ["U"], os.environ["K"], os.environ["UDSFS_BIN"]
ABS = f"ops_ss_{os.getpid()}"
fails = 0

# ---- the scenario on kernel sockets
def ks(ty):
    return socket.socket(socket.AF_UNIX, ty)
kroles = {}
L = ks(socket.SOCK_STREAM); L.bind(f"{K}/srv.sock"); L.listen(5)
C1 = ks(socket.SOCK_STREAM); C1.connect(f"{K}/srv.sock")
A1, _ = L.accept()
C1.send(b"hello")
C2 = ks(socket.SOCK_STREAM); C2.connect(f"{K}/srv.sock")
G = ks(socket.SOCK_DGRAM); G.bind("\0" + ABS)
H = ks(socket.SOCK_DGRAM); H.connect("\0" + ABS); H.send(b"xyz")
Q = ks(socket.SOCK_SEQPACKET); Q.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
P1, P2 = socket.socketpair()
for role, s in dict(L=L, C1=C1, A1=A1, C2=C2, G=G, H=H, Q=Q, P1=P1, P2=P2).items():
    kroles[str(os.fstat(s.fileno()).st_ino)] = role

# ---- the same through the mount
def hold(n):
    return os.open(f"{U}/sock/{n}/ctl", os.O_RDWR)
def clone(ty):
    fd = os.open(f"{U}/{ty}/clone", os.O_RDWR)
    n = os.read(fd, 64).split()[0].decode()
    h = hold(n)
    os.close(fd)
    return n, h
def cmd(h, text):
    os.write(h, text.encode() + b"\n")
def send(n, data):
    fd = os.open(f"{U}/sock/{n}/data", os.O_WRONLY)
    os.write(fd, data)
    os.close(fd)
uroles, held = {}, []
def made(role, n, h):
    uroles[n] = role
    held.append(h)
    return n, h
l, lh = made("L", *clone("stream")); cmd(lh, "bind srv.sock"); cmd(lh, "listen 5")
c1, c1h = made("C1", *clone("stream")); cmd(c1h, "connect srv.sock")
afd = os.open(f"{U}/sock/{l}/accept", os.O_RDWR)
a1 = os.read(afd, 64).split()[0].decode()
made("A1", a1, hold(a1)); os.close(afd)
send(c1, b"hello")
c2, c2h = made("C2", *clone("stream")); cmd(c2h, "connect srv.sock")
g, gh = made("G", *clone("dgram")); cmd(gh, "bind @" + ABS)
h, hh = made("H", *clone("dgram")); cmd(hh, "connect @" + ABS); send(h, b"xyz")
q, qh = made("Q", *clone("seqpacket")); cmd(qh, "passcred on")
pfd = os.open(f"{U}/stream/pair", os.O_RDWR)
p1, p2 = os.read(pfd, 64).split()
made("P1", p1.decode(), hold(p1.decode())); made("P2", p2.decode(), hold(p2.decode()))
os.close(pfd)

def rows(cmdline, roles, prefix):
    out = subprocess.run(cmdline, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{cmdline}: status {out.returncode}: {out.stderr}")
    lines = out.stdout.splitlines()
    has_state = "State" in lines[0].split()
    got = []
    for line in lines[1:]:
        t = line.split()
        if not has_state:
            t.insert(1, "-")
        netid, state, rq, sq, local, port, peer, pport, rest = *t[:8], t[8:]
        if port not in roles:
            continue  # someone else's kernel socket
        local = local[len(prefix) + 1:] if local.startswith(prefix + "/") else local
        norm, in_peers = [], False
        for x in rest:
            x = re.sub(r"fd=\d+", "fd=*", x)
            if x.startswith(("refs:", "passcred:", "peercred:")):
                continue
            if x.startswith(("ino:", "dev:")):
                x = x.split(":")[0] + ":*"
            if in_peers and x.isdigit():
                x = roles.get(x, "?" + x)
            in_peers = x == "peers:" or (in_peers and not x.startswith(("ino", "dev", "<")))
            norm.append(x)
        got.append((netid, state, rq, sq, local, roles[port], peer,
                    roles.get(pport, pport), " ".join(norm)))
    return sorted(got), out.stdout

cases = [
    ("", []), ("a", []), ("l", []), ("an", []), ("ae", []), ("ap", []), ("aep", []),
    ("lpe", []), ("a", ["state", "listening"]), ("a", ["state", "connected"]),
    ("", ["state", "established"]), ("a", ["state", "closed"]),
    ("a", ["src", "{P}/srv.sock"]), ("a", ["src", "@ops_ss_*"]),
    ("a", ["exclude", "listening"]),
]
for flags, filt in cases:
    kf = [w.replace("{P}", K) for w in filt]
    uf = [w.replace("{P}", M) for w in filt]
    want, kout = rows(["ss", "-x" + flags] + kf, kroles, K)
    got, uout = rows([BIN, "ss", "-x" + flags, M] + uf, uroles, M)
    name = " ".join(["-x" + flags] + filt)
    if want == got and want:
        print(f"ok: ss {name}: {len(want)} rows equal column by column")
        continue
    fails += 1
    print(f"FAIL: ss {name} differs" + (" (no rows)" if not want else ""))
    print("  ss -x:\n    " + kout.replace("\n", "\n    "))
    print("  udsfs ss:\n    " + uout.replace("\n", "\n    "))
    for r in sorted(set(want) - set(got)):
        print("  only in ss:      ", r)
    for r in sorted(set(got) - set(want)):
        print("  only in udsfs ss:", r)
if os.environ.get("UDSFS_SS_SHOW"):
    print(subprocess.run([BIN, "ss", "-xaep", M], capture_output=True, text=True).stdout)
sys.exit(1 if fails else 0)
EOF
ok "udsfs ss matches ss -x on every flag set and filter"

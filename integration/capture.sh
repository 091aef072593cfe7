#!/usr/bin/env bash
# capture.sh: the mount's messages as pcapng, checked with tshark field by field. Stream,
# dgram and seqpacket conversations run in python3 through `udsfs run` while `udsfs
# capture` (the mount's .udsfs/capture) records them: the payloads tshark reports are
# byte-equal to what was sent, in order, with their direction, one packet per dgram and
# seqpacket message; passed sockets and files, SCM_CREDENTIALS, MSG_OOB and MSG_TRUNC are
# in the packet comments; connect, accept, shutdown and close come in order. Then curl
# against a Python HTTP server under `udsfs run --capture --capture-proto http`: tshark
# decodes the request and the response in both encodings (upper-pdu and tcp), and when the
# server names the protocol on its own socket's ctl (`capture_proto http`). Last, a
# filtered capture of three concurrent conversations holds exactly the matching ones;
# .udsfs/sock/N/capture holds only that socket's conversation and polls readable once a
# message came; a capture that is not read drops, and counts exactly what it lost.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd tshark tshark
need_cmd curl curl
[ "$UDSFS_RUN_VIA" == udsfs ] || fail "capture.sh checks udsfs captures: UDSFS_RUN_VIA must be udsfs"

cat >"$TMP/conv.py" <<'EOF'
# The three conversations; what was sent goes to expect.json (hex payloads).
import json, os, socket, struct, sys

M = os.environ["MNT"]
exp = {}


def connected(ty, name):
    """A listener bound at M/name, a client connected to it, and the accepted end."""
    lst = socket.socket(socket.AF_UNIX, ty)
    lst.bind(M + "/" + name)
    lst.listen()
    cli = socket.socket(socket.AF_UNIX, ty)
    cli.connect(M + "/" + name)
    acc, _ = lst.accept()
    return lst, cli, acc


# stream: three sends, a reply, an OOB byte, shutdown, close.
srv, cli, conn = connected(socket.SOCK_STREAM, "st.sock")
sent = [b"alpha", b"beta-" * 300, bytes(range(256))]
for m in sent:
    cli.sendall(m)
    got = b""
    while len(got) < len(m):
        got += conn.recv(len(m) - len(got))
    assert got == m
conn.sendall(b"reply")
assert cli.recv(5) == b"reply"
cli.send(b"!", socket.MSG_OOB)
assert conn.recv(1, socket.MSG_OOB) == b"!"
cli.shutdown(socket.SHUT_WR)
assert conn.recv(10) == b""
conn.close()
cli.close()
srv.close()
exp["stream"] = {"out": b"".join(sent + [b"!"]).hex(), "in": b"reply".hex()}

# dgram: four messages, one with explicit SCM_CREDENTIALS, one cut by a short read.
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
r.bind(M + "/dg.sock")
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.bind(M + "/dgc.sock")
msgs = [b"one", b"two2", b"x" * 1000]
for m in msgs:
    c.sendto(m, M + "/dg.sock")
creds = struct.pack("iII", os.getpid(), os.getuid(), os.getgid())
c.sendmsg([b"with creds"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0, M + "/dg.sock")
c.sendto(b"0123456789", M + "/dg.sock")
for m in msgs + [b"with creds"]:
    assert r.recv(2000) == m
assert r.recv(4) == b"0123"
c.close()
r.close()
exp["dgram"] = {"msgs": [m.hex() for m in msgs + [b"with creds", b"0123456789"]], "pid": os.getpid()}

# seqpacket: records both ways, one passing a socket and a pipe.
ls, cl, sv = connected(socket.SOCK_SEQPACKET, "sq.sock")
passed = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
passed.bind(M + "/passed.sock")
rd, wr = os.pipe()
cl.send(b"rec1")
assert sv.recv(100) == b"rec1"
socket.send_fds(cl, [b"record-2 with fds"], [passed.fileno(), rd])
data, fds, _, _ = socket.recv_fds(sv, 100, 4)
assert data == b"record-2 with fds" and len(fds) == 2
sv.send(b"ack")
assert cl.recv(100) == b"ack"
cl.send(b"rec3")
assert sv.recv(100) == b"rec3"
for x in [cl, sv, ls, passed]:
    x.close()
exp["seqpacket"] = {
    "msgs": [[d, m.hex()] for d, m in [("out", b"rec1"), ("out", b"record-2 with fds"), ("in", b"ack"), ("out", b"rec3")]]
}
json.dump(exp, open(sys.argv[1], "w"))
print("conversations done")
EOF

cat >"$TMP/check.py" <<'EOF'
# Checks a capture (tshark's fields) against expect.json; prints one line per check.
import json, subprocess, sys

cap, exp = sys.argv[1], json.load(open(sys.argv[2]))
fields = ["frame.interface_name", "frame.packet_flags_direction", "frame.comment", "data.data"]
cmd = ["tshark", "-r", cap, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
for f in fields:
    cmd += ["-e", f]
out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
rows = [dict(zip(fields, l.split("\t"))) for l in out.splitlines()]
DIR = {"0x00000002": "out", "0x00000001": "in", "": None}

def iface(name):
    return [r for r in rows if r["frame.interface_name"] == name]

def payloads(rs):
    return [(DIR[r["frame.packet_flags_direction"]], r["data.data"]) for r in rs if r["data.data"]]

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def ok(msg):
    print("ok:", msg)

# stream: bytes per direction equal, in order; events in order.
st = iface("st.sock")
p = payloads(st)
out_b = "".join(d for w, d in p if w == "out")
in_b = "".join(d for w, d in p if w == "in")
if out_b != exp["stream"]["out"]:
    fail("stream client->server bytes differ: %d hex chars vs %d" % (len(out_b), len(exp["stream"]["out"])))
if in_b != exp["stream"]["in"]:
    fail("stream server->client bytes: %s" % in_b)
ok("stream: %d payload packets, bytes equal to what was sent in each direction" % len(p))
oob = [r for r in st if "MSG_OOB" in r["frame.comment"]]
if len(oob) != 1 or oob[0]["data.data"] != "21":
    fail("stream: the OOB byte's packet: %r" % oob)
ok("stream: the MSG_OOB byte is one packet, marked in its comment")
events = [r["frame.comment"].split(":")[0] for r in st if not r["data.data"]]
want = ["connect", "accept", "shutdown(SHUT_WR)", "close", "close"]
if events != want:
    fail("stream events: %r, want %r" % (events, want))
ok("stream events in order: %s" % ", ".join(events))
first_data = next(i for i, r in enumerate(st) if r["data.data"])
last_data = max(i for i, r in enumerate(st) if r["data.data"])
if not (st[0]["frame.comment"].startswith("connect") and st[-1]["frame.comment"].startswith("close")
        and first_data > 1 and last_data < len(st) - 2):
    fail("stream: events and payloads out of order")
ok("stream: connect and accept before the payloads, shutdown and close after")

# dgram: one packet per message, in order, inbound to the receiver.
dg = iface("dg.sock")
p = payloads(dg)
if [d for _, d in p] != exp["dgram"]["msgs"]:
    fail("dgram payloads: %r" % p)
if any(w != "in" for w, _ in p):
    fail("dgram directions: %r" % p)
ok("dgram: %d messages, one packet each, byte-equal and in order" % len(p))
cred = [r for r in dg if "SCM_CREDENTIALS pid %d uid 0 gid 0" % exp["dgram"]["pid"] in r["frame.comment"]]
if len(cred) != 1 or cred[0]["data.data"] != b"with creds".hex():
    fail("dgram: SCM_CREDENTIALS comment: %r" % cred)
ok("dgram: SCM_CREDENTIALS shown in the comment of its message")
trunc = [r for r in dg if "MSG_TRUNC" in r["frame.comment"]]
if len(trunc) != 1 or "4 bytes" not in trunc[0]["frame.comment"]:
    fail("dgram: MSG_TRUNC note: %r" % trunc)
ok("dgram: the short read shows as MSG_TRUNC: %s" % trunc[0]["frame.comment"])

# seqpacket: one packet per record, in order, with directions; passed socket and pipe.
sq = iface("sq.sock")
p = payloads(sq)
want = [tuple(x) for x in exp["seqpacket"]["msgs"]]
if p != want:
    fail("seqpacket payloads: %r, want %r" % (p, want))
ok("seqpacket: %d records, one packet each, in order with their directions" % len(p))
rights = [r["frame.comment"] for r in sq if "SCM_RIGHTS" in r["frame.comment"]]
if len(rights) != 1 or "dgram passed.sock" not in rights[0] or "file pipe" not in rights[0]:
    fail("seqpacket: SCM_RIGHTS comment: %r" % rights)
ok("seqpacket: passed socket and pipe in the comment: %s" % rights[0])
EOF

CAP=$TMP/conv.pcapng
capture_start CAPTURE "$CAP"
via -- python3 "$TMP/conv.py" "$TMP/expect.json"
capture_stop "$CAPTURE"
python3 "$TMP/check.py" "$CAP" "$TMP/expect.json"

# ---------------------------------------------------------------- HTTP, both encodings
cat >"$TMP/webserver.py" <<'EOF'
import http.server, os, socketserver, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def address_string(self):
        return "unix"

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = b"hello over udsfs\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

server = socketserver.UnixStreamServer(sys.argv[1], Handler)
if len(sys.argv) > 3:
    # The server names its own protocol on its socket's ctl (the preload library's
    # descriptor is the socket's data file); accepted connections take it.
    sock_dir = os.path.dirname(os.readlink(f"/proc/self/fd/{server.fileno()}"))
    with open(os.path.join(sock_dir, "ctl"), "w") as ctl:
        ctl.write(f"capture_proto {sys.argv[3]}\n")
open(sys.argv[2], "w").close()
server.handle_request()
server.server_close()
EOF
cat >"$TMP/http.sh" <<EOF
python3 "$TMP/webserver.py" "$MNT/http.sock" "$TMP/http.ready" \$OWN_PROTO &
for i in \$(seq 100); do [ -e "$TMP/http.ready" ] && break; sleep 0.05; done
curl --silent --show-error --fail --max-time 20 --unix-socket "$MNT/http.sock" http://localhost/page
wait
EOF
# Last, `own`: the server writes `capture_proto http` to its socket's ctl, which wins over
# the run's --capture-proto json.
for format in upper-pdu tcp own; do
    rm -f "$MNT/http.sock" "$TMP/http.ready"
    proto=(--capture-proto http) own=
    [ "$format" = own ] && proto=(--capture-proto json) own=http
    out=$(env UDSFS_PRELOAD="$PRELOAD_LIB" OWN_PROTO="$own" "$UDSFS_BIN" run --mount "$MNT" \
        --capture "$TMP/http-$format.pcapng" --capture-format "${format/own/upper-pdu}" "${proto[@]}" \
        -- bash "$TMP/http.sh")
    expect_eq "$format: curl's body" "$out" "hello over udsfs"
    shown=$(tshark -r "$TMP/http-$format.pcapng" -Y http -T fields -e http.request.method -e http.request.uri \
        -e http.response.code | tr '\t' ' ' | sed 's/^ *//; s/ *$//')
    printf '%s\n' "$shown" | grep -qx "GET /page" || fail "$format: tshark -Y http shows no request: $shown"
    printf '%s\n' "$shown" | grep -qx "200" || fail "$format: tshark -Y http shows no response: $shown"
    ok "$format: tshark -Y http decodes the GET and the 200 response"
done
follow=$(tshark -r "$TMP/http-tcp.pcapng" -q -z follow,tcp,ascii,0)
grep -q "GET /page HTTP/1.1" <<<"$follow" && grep -q "hello over udsfs" <<<"$follow" ||
    fail "tcp: Follow TCP Stream does not show the conversation: $follow"
ok "tcp: Follow TCP Stream shows the request and the response body"

# ---------------------------------------------------------------- filters
# Three conversations at once; a capture by name, one by pid, one by socket number.
cat >"$TMP/three.py" <<'EOF'
import os, socket, sys, time
M = os.environ["MNT"]
name, rounds = sys.argv[1], int(sys.argv[2])
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
r.bind(M + "/" + name)
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.connect(M + "/" + name)
open(M + "/../" + name + ".ready", "w").write(str(os.getpid()))
while not os.path.exists(M + "/../go"):
    time.sleep(0.01)
for i in range(rounds):
    c.send(("%s %d" % (name, i)).encode())
    r.recv(100)
EOF
for n in fa.sock fb.sock other.sock; do
    run_cmd -- python3 "$TMP/three.py" "$n" 50
    start_bg "PY_${n%%.*}" "${RUN_CMD[@]}"
done
for n in fa.sock fb.sock other.sock; do
    t0=$(now_ms)
    until [ -s "$TMP/$n.ready" ]; do
        [ $(($(now_ms) - t0)) -lt 10000 ] || fail "$n did not start"
        sleep 0.02
    done
done
fb_pid=$(cat "$TMP/fb.sock.ready")
capture_start CAP_NAME "$TMP/byname.pcapng" --name 'f?.sock'
capture_start CAP_PID "$TMP/bypid.pcapng" --pid "$fb_pid"
touch "$TMP/go"
for p in "$PY_fa" "$PY_fb" "$PY_other"; do
    ended_within "$p" 20000 || fail "a conversation did not end"
done
capture_stop "$CAP_NAME"
capture_stop "$CAP_PID"
count() {
    tshark -r "$1" -Y data -T fields -e data.data | python3 -c '
import sys, collections
c = collections.Counter(bytes.fromhex(l.strip()).decode().split()[0] for l in sys.stdin if l.strip())
print(";".join("%d %s" % (n, k) for k, n in sorted(c.items())))'
}
expect_eq "by name f?.sock: messages per conversation" "$(count "$TMP/byname.pcapng")" "50 fa.sock;50 fb.sock"
expect_eq "by pid of fb's process: messages" "$(count "$TMP/bypid.pcapng")" "50 fb.sock"

# ---------------------------------------------------------------- a socket's capture, poll, drops
# .udsfs/sock/N/capture of one seqpacket pair while another talks; poll says readable only
# once a message came; a capture with a small buffer that is not read drops, and the
# drop count it reports equals the messages it lost.
cat >"$TMP/sockcap.py" <<'EOF2'
import os, select, sys, time
U = os.environ["U"]

def pair():
    fd = os.open(U + "/seqpacket/pair", os.O_RDWR)
    a, b = os.read(fd, 100).split()
    return fd, [os.open(U + "/sock/%s/data" % n.decode(), os.O_RDWR) for n in (a, b)], a.decode()

h1, (a, b), n1 = pair()
h2, (c, d), _ = pair()
cap = os.open(U + "/sock/%s/capture" % n1, os.O_RDWR | os.O_NONBLOCK)
head = os.read(cap, 1 << 20)
p = select.poll()
p.register(cap, select.POLLIN)
assert p.poll(0) == [], "nothing captured yet"
os.write(c, b"not-this-one")
os.write(a, b"this-one")
assert os.read(b, 100) == b"this-one" and os.read(d, 100) == b"not-this-one"
assert p.poll(2000), "readable once a message came"
body = os.read(cap, 1 << 20)
open(sys.argv[1], "wb").write(head + body)

# A stalled capture of the whole mount with room for a few records only.
st = os.open(U + "/capture", os.O_RDWR | os.O_NONBLOCK)
os.write(st, b"buffer 2000\n")
for i in range(100):
    os.write(a, b"m%03d" % i)
    os.read(b, 100)
out = b""
while True:
    try:
        chunk = os.read(st, 1 << 20)
    except BlockingIOError:
        break
    if not chunk:
        break
    out += chunk
open(sys.argv[2], "wb").write(out)
print("socket capture done")
EOF2
python3 "$TMP/sockcap.py" "$TMP/sock.pcapng" "$TMP/stalled.pcapng"
got=$(tshark -r "$TMP/sock.pcapng" -Y data -T fields -e data.data 2>/dev/null |
    python3 -c 'import sys; print(" ".join(bytes.fromhex(l).decode() for l in sys.stdin.read().split()))')
expect_eq "sock/N/capture payloads" "$got" "this-one"
kept=$(tshark -r "$TMP/stalled.pcapng" -Y data -T fields -e data.data 2>/dev/null | grep -c .)
lost=$(python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
i, lost = 0, 0
while i < len(b):
    ty, ln = struct.unpack_from("<II", b, i)
    if ty == 5:  # interface statistics: options after 12 bytes of body
        j = i + 20
        while j < i + ln - 4:
            code, olen = struct.unpack_from("<HH", b, j)
            if code == 5:
                lost = struct.unpack_from("<Q", b, j + 4)[0]
            j += 4 + (olen + 3) // 4 * 4
    i += ln
print(lost)' "$TMP/stalled.pcapng")
[ "$lost" -gt 0 ] || fail "the stalled capture lost nothing (kept $kept)"
expect_eq "messages kept + drop count of the stalled capture" "$((kept + lost))" 100

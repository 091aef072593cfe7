#!/usr/bin/env bash
# An unmodified Python program (integration/run_checks.py) runs the socket API twice:
# on kernel sockets in a scratch directory, and through `udsfs run` with its names in
# the mount. Both runs must print the same results line by line (socketpair, options,
# FIONREAD, MSG_PEEK/DONTWAIT/TRUNC/WAITALL, SIGPIPE and MSG_NOSIGNAL, a path server
# with SO_PEERCRED, send_fds/recv_fds, shutdown, abstract names, autobind,
# SCM_CREDENTIALS, 100000-byte datagrams), and the udsfs run must really have used
# udsfs sockets (their descriptors are .udsfs/sock/N/data files).
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
CHECKS=$ROOT/integration/run_checks.py

mkdir "$TMP/k"
python3 "$CHECKS" "$TMP/k" kernel >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "the checks fail on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "kernel run did not finish"
ok "kernel run: $(wc -l <"$TMP/kernel.out") results"

on_udsfs python3 "$CHECKS" "$MNT" udsfs >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "the checks fail through udsfs run: $(tail -3 "$TMP/udsfs.err")"
tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"

where=$(grep -c 'where: udsfs$' "$TMP/udsfs.out" || true)
expect_eq "descriptors that were udsfs sockets (pair, server, accepted)" "$where" 3
grep -q 'where: kernel$' "$TMP/udsfs.out" && fail "a socket stayed a kernel socket through udsfs run"
if ! diff <(grep -v 'where: ' "$TMP/kernel.out") <(grep -v 'where: ' "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "udsfs run: the same $(grep -vc 'where: ' "$TMP/udsfs.out") results as the kernel"
[ ! -s "$TMP/udsfs.err" ] || fail "the library complained: $(cat "$TMP/udsfs.err")"

# What udsfs cannot carry fails with Linux's errno for the class and a log line.
cat >"$TMP/refusals.py" <<'PY'
import errno, os, socket, sys
tmp = sys.argv[1]
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
a, b = socket.socketpair()
with open(os.path.join(tmp, "plain"), "w") as f:
    print("file over udsfs:", err(lambda: socket.send_fds(a, [b"x"], [f.fileno()])))
with open(os.path.join(os.environ["UDSFS_MOUNT"], ".udsfs/unix")) as f:
    print("a mount file over udsfs:", err(lambda: socket.send_fds(a, [b"x"], [f.fileno()])))
k = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
k.bind(os.path.join(tmp, "k.sock"))
k.listen(1)
kc = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
kc.connect(os.path.join(tmp, "k.sock"))
print("udsfs over kernel:", err(lambda: socket.send_fds(kc, [b"x"], [a.fileno()])))
ks, _ = k.accept()
print("kernel over kernel:", err(lambda: socket.send_fds(kc, [b"x"], [ks.fileno()])))
d, e = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
print("udsfs to a kernel name:", err(lambda: d.sendto(b"x", os.path.join(tmp, "k.sock"))))
PY
on_udsfs python3 "$TMP/refusals.py" "$TMP" >"$TMP/refusals.out" 2>"$TMP/refusals.err" ||
    fail "refusals: $(cat "$TMP/refusals.err")"
cat >"$TMP/refusals.want" <<'OUT'
file over udsfs: ok
a mount file over udsfs: EINVAL
udsfs over kernel: EINVAL
kernel over kernel: ok
udsfs to a kernel name: ECONNREFUSED
OUT
diff "$TMP/refusals.want" "$TMP/refusals.out" >&2 || fail "refusals differ from the documented ones"
for cause in "the daemon refused files" "cannot be passed over a kernel socket" "kernel AF_UNIX name outside the mount"; do
    grep -q "$cause" "$TMP/refusals.err" || fail "no log line says '$cause': $(cat "$TMP/refusals.err")"
done
ok "refusals: a file passes over udsfs; EINVAL for a file of the mount that is not a socket and for udsfs over the kernel, ECONNREFUSED to a kernel name; each logged"

# Hostile ioctls on a data file (no library): malformed requests get EINVAL, unknown
# commands ENOTTY, a short buffer EFAULT from the kernel; the daemon keeps serving.
new_pair P stream
cat >"$TMP/hostile.py" <<'PY'
import errno, fcntl, struct, sys
def iowr(nr, size):
    return (3 << 30) | (size << 16) | (ord("U") << 8) | nr
CTL, MSG = iowr(1, 496), iowr(3, 16376)
f = open(sys.argv[1], "r+b", buffering=0)
def try_(cmd, buf):
    try:
        fcntl.ioctl(f, cmd, buf)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
ctl = bytearray(496)
struct.pack_into("IiI", ctl, 0, 99, 0, 0)
print("unknown op:", try_(CTL, ctl))
struct.pack_into("IiI", ctl, 0, 1, 0, 500)
print("address longer than its field:", try_(CTL, ctl))
msg = bytearray(16376)
struct.pack_into("III", msg, 0, 1, 0, 100000)
print("send longer than the buffer:", try_(MSG, msg))
print("not a udsfs command:", try_(iowr(9, 8), bytearray(8)))
struct.pack_into("IiI", ctl, 0, 6, 0, 0)
print("info still answers:", try_(CTL, ctl), struct.unpack_from("q", ctl, 16)[0])
PY
python3 "$TMP/hostile.py" "$U/sock/$P_N/data" >"$TMP/hostile.out" 2>&1 || fail "hostile ioctls: $(cat "$TMP/hostile.out")"
cat >"$TMP/hostile.want" <<'OUT'
unknown op: EINVAL
address longer than its field: EINVAL
send longer than the buffer: EINVAL
not a udsfs command: ENOTTY
info still answers: ok 1
OUT
diff "$TMP/hostile.want" "$TMP/hostile.out" >&2 || fail "hostile ioctls answered otherwise"
grep -q "address of 500 bytes refused" "$LOG" || fail "no log line for the malformed address"
ok "hostile ioctls: EINVAL and ENOTTY with log lines; the daemon keeps answering"

#!/usr/bin/env bash
# fstat, fchmod and fchown of socket descriptors (issue 28 item 3): each udsfs socket
# has a mode and an owner as Linux's sockfs inode (src/engine/sockinode.rs), which its
# data file shows (src/fuse/attr.rs) and both fronts' fstat and statx report
# (udsfs_proto::mount::socket_stat). tests/conformance/fstat_mode.py on kernel sockets,
# through `udsfs run` (the library) and `udsfs run --front seccomp` (the supervisor):
# equal outputs. It has the attacks: another user holding root's socket received over
# SCM_RIGHTS (mode 0000) tries fchmod and fchown, and so does a user that is root of a
# user namespace of its own; each gets Linux's EPERM, the socket's mode and owner stay,
# and the receiver can still use it.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
chmod o+x "$TMP" # mktemp -d made it 0700; nobody must reach $MNT inside it
kernel_vs_fronts "$ROOT/tests/conformance/fstat_mode.py"
! grep -q 'child broke' "$TMP/kernel.out" || fail "a child broke on the kernel: $(grep 'child broke' "$TMP/kernel.out")"
grep -q "panicked" "$LOG" && fail "the daemon panicked: $(grep -m3 panicked "$LOG")"
ok "fstat shows a socket's mode and owner; fchmod and fchown change them as Linux lets them"

# 2. The same attack on the mount's files, where a received socket is an entry
# (.udsfs/sock/H) before its open adopts it: nobody reads root's socket (mode 0000)
# from a record and, before opening it, tries chmod and chown of its data file by path.
# The entry shows the socket's owner from the start, so the kernel refuses as it does
# fchmod of the descriptor; the open passes all the same, as Linux hands the receiver
# its descriptor.
out=$(py '
pfd, x, y = pair("stream")
xd, yd = opn(x, "data"), opn(y, "data")
os.chmod(f"{U}/sock/{x}/data", 0)
cfd, t, r = pair("dgram")
tmsg, rmsg = opn(t, "msg", os.O_WRONLY), opn(r, "msg", os.O_RDONLY)
os.write(tmsg, f"len=1 rights={x}\nz".encode())

def shown(p):
    s = os.stat(p)
    return f"{stat.S_IMODE(s.st_mode):o} {s.st_uid}:{s.st_gid}"

def nobody(w):
    os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
    h = int(record(rmsg)[0]["rights"])
    p = f"{U}/sock/{h}/data"
    out = [f"the entry before its open: {shown(p)}",
           f"nobody chmod 0666 by path: {err(os.chmod, p, 0o666)}",
           f"nobody chown to itself by path: {err(os.chown, p, 65534, 65534)}",
           f"nobody chgrp to its group by path: {err(os.chown, p, -1, 65534)}"]
    d = os.open(p, os.O_RDWR)
    s = os.fstat(d)
    out += [f"its open: OK, {stat.S_IMODE(s.st_mode):o} {s.st_uid}:{s.st_gid}",
            f"nobody fchmod 0666: {err(os.fchmod, d, 0o666)}"]
    os.write(d, b"via nobody")
    os.write(w, "\n".join(out).encode())
    os._exit(0)

r_, w_ = os.pipe()
pid = os.fork()
if pid == 0:
    nobody(w_)
os.close(w_)
print(os.read(r_, 4096).decode())
os.waitpid(pid, 0)
print("root reads on the other end:", os.read(yd, 64).decode())
print("the socket after:", shown(f"{U}/sock/{x}/data"))
')
printf '%s\n' "$out"
want='the entry before its open: 666 0:0
nobody chmod 0666 by path: EPERM
nobody chown to itself by path: EPERM
nobody chgrp to its group by path: EPERM
its open: OK, 0 0:0
nobody fchmod 0666: EPERM
root reads on the other end: via nobody
the socket after: 0 0:0'
expect_eq "nobody and root's received socket, on the files" "$out" "$want"
grep -q "panicked" "$LOG" && fail "the daemon panicked: $(grep -m3 panicked "$LOG")"
ok "a received entry's chmod and chown are checked against its socket's owner"

# 3. The library's fcntl asks whether a descriptor is a udsfs socket (a statx of it) at
# most once per call: the file flags' part (F_SETFL's O_DIRECT, F_GETFL's answer) and
# the daemon's (O_ASYNC, once the process has used it) share the answer. 100 F_SETFL and
# 100 F_GETFL on a udsfs socket after O_ASYNC was set: 200 statx of it, not 400.
need_cmd strace strace
cat >"$TMP/fcntl_asks.py" <<'PY'
import fcntl, os, socket
a, b = socket.socketpair()
fd = a.fileno()
assert "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{fd}"), "not a udsfs socket"
fcntl.fcntl(fd, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
os.access("/fcntl-asks-start", os.F_OK)
for _ in range(100):
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK)
for _ in range(100):
    fcntl.fcntl(fd, fcntl.F_GETFL)
os.access("/fcntl-asks-end", os.F_OK)
PY
strace -f -qq -e trace=statx,access,faccessat,faccessat2 -o "$TMP/fcntl.strace" \
    env LD_PRELOAD="$PRELOAD_LIB" UDSFS_MOUNT="$MNT" python3 "$TMP/fcntl_asks.py" ||
    fail "the fcntl program failed under strace"
asks=$(sed -n '/fcntl-asks-start/,/fcntl-asks-end/p' "$TMP/fcntl.strace" | grep -c 'statx(.*AT_EMPTY_PATH')
expect_eq "statx of the descriptor by the library's 200 fcntl calls" "$asks" 200

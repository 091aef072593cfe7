#!/usr/bin/env bash
# fd_numbers.sh: the descriptor numbers udsfs sockets get, as Linux gives every new
# descriptor the lowest number free (fs/file.c alloc_fd): socketpair, socket, connect,
# accept (twice, the second into a closed one's number; FD_CLOEXEC kept), and recvmsg's
# SCM_RIGHTS (a regular file, a socket, the file again, with MSG_CMSG_CLOEXEC): after
# each, the numbers it gave and the lowest free one. On kernel sockets, then through
# `udsfs run` with the library and with the seccomp front: the same numbers. The library
# opened socketpair's and accept's data files while it held the control handle that
# named them, below them, so each left a hole (socketpair gave 4 and 5 with 3 free;
# gpg-agent logged every connection as fd 11, the kernel's 10), and a recvmsg's files
# claimed from the fd channel came before the socket between them ([11, 8, 13], the
# kernel's [9, 12, 13]).
source "$(dirname "$0")/lib.sh"
need_preload

cat >"$TMP/fdn.py" <<'PY'
import array, fcntl, os, socket, sys
d = sys.argv[1]
def lowest():
    r = os.open("/dev/null", os.O_RDONLY)
    os.close(r)
    return r
def flags(fd):
    return "cloexec=%d nonblock=%d" % (fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC,
                                       bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK))
a, b = socket.socketpair()
print("socketpair", a.fileno(), b.fileno(), flags(b.fileno()), "lowest", lowest())
l = socket.socket(socket.AF_UNIX)
l.bind(d + "/l.sock")
l.listen()
print("listener", l.fileno(), "lowest", lowest())
c = socket.socket(socket.AF_UNIX)
c.connect(d + "/l.sock")
print("connect", c.fileno(), "lowest", lowest())
s, _ = l.accept()
print("accept", s.fileno(), flags(s.fileno()), "lowest", lowest())
c2 = socket.socket(socket.AF_UNIX)
c2.connect(d + "/l.sock")
s.close()

s2, _ = l.accept()  # where the closed one was
print("accept again", s2.fileno(), flags(s2.fileno()), "lowest", lowest())
x, y = socket.socketpair()
f = os.open("/dev/null", os.O_RDONLY)
a.sendmsg([b"m"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [f, x.fileno(), f]))])
os.close(f)
x.close()
_, anc, _, _ = b.recvmsg(10, socket.CMSG_SPACE(12), socket.MSG_CMSG_CLOEXEC)
fds = array.array("i")
fds.frombytes(anc[0][2])
print("recvmsg", list(fds), [flags(n) for n in fds], "lowest", lowest())
for n in fds[:2]:
    os.close(n)
print("dgram", socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).fileno(), "lowest", lowest())
os.unlink(d + "/l.sock")
PY

# one MODE CMD...: the numbers python3 fdn.py gets with its sockets in DIR, in $TMP/MODE.out.
one() {
    local mode=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    "$@" python3 "$TMP/fdn.py" "$dir" >"$TMP/$mode.out" 2>&1 || fail "$mode: fdn.py failed: $(cat "$TMP/$mode.out")"
    say "$mode:"
    sed 's/^/    /' "$TMP/$mode.out"
}
one kernel "$TMP/k"
one library "$MNT/l" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --
one seccomp "$MNT/s" "$UDSFS_BIN" run --front seccomp --mount "$MNT" --
grep -qx 'socketpair 3 4 cloexec=1 nonblock=0 lowest 5' "$TMP/kernel.out" ||
    fail "the kernel run did not start at descriptor 3: $(head -1 "$TMP/kernel.out")"
for mode in library seccomp; do
    diff "$TMP/kernel.out" "$TMP/$mode.out" >&2 ||
        fail "udsfs run ($mode) gave other descriptor numbers than the kernel (< kernel, > udsfs)"
done
ok "socketpair, connect, accept and recvmsg's SCM_RIGHTS give the kernel's lowest free numbers through the library and the seccomp front"

#!/usr/bin/env bash
# run_seccomp_passfd.sh: descriptors passed by a Go program with the net package's
# WriteMsgUnix/ReadMsgUnix (integration/go/passfd: raw system calls) under `udsfs run`'s
# seccomp supervisor, chosen without --front although cgo links it dynamically: a regular file and one end of a socketpair the program made. The
# same exchange runs first on kernel sockets (the reference), then through udsfs: Go to
# Go (both supervised), Go to a Python receiver through the library, and a Python sender
# through the library to the Go receiver. Every output equals the kernel's, except that
# through udsfs the socketpair is a udsfs socket (its data file), on both sides; the
# listening socket is a udsfs one; SO_PEERCRED shows the Go sender's own pid.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd go golang-go
need_cmd python3 python3
export GOCACHE=$ROOT/target/gocache GOPATH=$ROOT/target/gopath GOPROXY=off GOFLAGS= GO111MODULE=on
(cd "$ROOT/integration/go/passfd" && go build -o "$TMP/passfd" .) || fail "go build failed"
# With cgo (gcc present), Go links the C library: a program interpreter, yet raw socket
# calls. `udsfs run` without --front must still choose the supervisor (src/run.rs: by
# Go's build id note), which is what every run below relies on.
readelf -l "$TMP/passfd" | grep -q INTERP || fail "the Go program was linked static: expected cgo's dynamic link"
printf 'the passed file\n' >"$TMP/passed.txt"

# The Python twins of `passfd send` and `passfd recv` (same lines; the receiver also
# prints the sender's SO_PEERCRED pid).
cat >"$TMP/passfd.py" <<'PY'
import array, os, socket, struct, sys

def kind(fd):
    t = os.readlink("/proc/self/fd/%d" % fd)
    return "udsfs socket" if "/.udsfs/sock/" in t else "kernel socket" if t.startswith("socket:") else "file"

def receive_one(c):
    fds = array.array("i")
    msg, anc, flags, _ = c.recvmsg(64, socket.CMSG_SPACE(16))
    assert not flags & socket.MSG_CTRUNC, "MSG_CTRUNC"
    assert len(anc) == 1 and anc[0][:2] == (socket.SOL_SOCKET, socket.SCM_RIGHTS), anc
    fds.frombytes(anc[0][2])
    assert len(fds) == 1, list(fds)
    return msg.decode(), fds[0]

mode, path = sys.argv[1], sys.argv[2]
if mode == "send":
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    f = os.open(sys.argv[3], os.O_RDONLY)
    c.sendmsg([b"file"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [f]))])
    os.close(f)
    mine, theirs = socket.socketpair()
    c.sendmsg([b"pair"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [theirs.fileno()]))])
    theirs.close()
    print("socketpair:", kind(mine.fileno()))
    got = b""
    while chunk := mine.recv(100):
        got += chunk
    print("through the passed socket:", got.decode(), end="")
    print("reply:", c.makefile().readline(), end="")
    print("pid:", os.getpid())
else:
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    print("listening pid", os.getpid(), flush=True)
    c, _ = s.accept()
    text, fd = receive_one(c)
    body = os.read(fd, 100).decode()
    os.close(fd)
    print("%s: %s" % (text, body), end="")
    text, fd = receive_one(c)
    print("%s: received a %s" % (text, kind(fd)))
    os.write(fd, b"written by the receiver\n")
    os.close(fd)
    print("%s: written" % text)
    c.sendall(b"received 2\n")
    pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    print("peer pid", pid)
PY

# exchange NAME SENDER RECEIVER [VIA]: RECEIVER (go|py) listens at $SOCK_DIR/NAME.sock,
# SENDER sends to it; both through VIA (udsfs or kernel). Leaves the two outputs in
# $TMP/NAME.send and $TMP/NAME.recv.
exchange() {
    local name=$1 sender=$2 receiver=$3 via=$4 dir sock
    if [ "$via" = kernel ]; then dir=$TMP; else dir=$MNT; fi
    sock=$dir/$name.sock
    rm -f "$sock"
    prog() {
        case $1 in
        go) echo "$TMP/passfd" ;;
        py) echo "python3 $TMP/passfd.py" ;;
        esac
    }
    local front=()
    [ "$via" = udsfs ] && front=("$UDSFS_BIN" run --mount "$MNT" --)
    # shellcheck disable=SC2046 # prog's words
    start_bg RECV "${front[@]}" $(prog "$receiver") recv "$sock" >"$TMP/$name.recv" 2>&1
    for _ in $(seq 200); do grep -q '^listening' "$TMP/$name.recv" && break; sleep 0.05; done
    grep -q '^listening' "$TMP/$name.recv" || fail "$name: the receiver did not listen: $(cat "$TMP/$name.recv")"
    if [ "$via" = udsfs ]; then
        udsfs_has_socket "$sock" || fail "$name: $U/unix lists no socket at $sock"
        ! kernel_has_socket "$sock" || fail "$name: the kernel has a socket at $sock"
    fi
    # shellcheck disable=SC2046
    timeout 30 "${front[@]}" $(prog "$sender") send "$sock" "$TMP/passed.txt" >"$TMP/$name.send" 2>&1 ||
        fail "$name: the sender failed: $(cat "$TMP/$name.send")"
    ended_within "$RECV" 20000 || fail "$name: the receiver did not finish: $(cat "$TMP/$name.recv")"
    reap "$RECV"
    expect_eq "$name: receiver's exit status" "$REAPED_STATUS" 0
}

# what FILE: its lines without pids (they differ from run to run).
what() { grep -v -e '^pid' -e '^listening pid' -e '^peer pid' "$1"; }

exchange kernel go go kernel
expect_eq "kernel reference: sender" "$(what "$TMP/kernel.send")" "socketpair: kernel socket
through the passed socket: written by the receiver
reply: received 2"
expect_eq "kernel reference: receiver" "$(what "$TMP/kernel.recv")" "file: the passed file
pair: received a kernel socket
pair: written"
ok "kernel: Go passed a file and a socket to Go"

for case in "go go" "go py" "py go"; do
    read -r sender receiver <<<"$case"
    name=$sender-to-$receiver
    exchange "$name" "$sender" "$receiver" udsfs
    expect_eq "$name: sender" "$(what "$TMP/$name.send")" "$(what "$TMP/kernel.send" | sed 's/kernel socket/udsfs socket/')"
    expect_eq "$name: receiver" "$(what "$TMP/$name.recv")" "$(what "$TMP/kernel.recv" | sed 's/kernel socket/udsfs socket/')"
    if [ "$receiver" = py ]; then
        expect_eq "$name: SO_PEERCRED pid of the Go sender" "$(sed -n 's/^peer pid //p' "$TMP/$name.recv")" \
            "$(sed -n 's/^pid: //p' "$TMP/$name.send")"
    fi
    ok "$name through udsfs: the file and the socketpair end arrived, as on the kernel"
done

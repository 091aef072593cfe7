#!/usr/bin/env bash
# run_java.sh: Java's own AF_UNIX sockets (OpenJDK 16+ NIO: SocketChannel and
# ServerSocketChannel of StandardProtocolFamily.UNIX, UnixDomainSocketAddress), one JVM
# running integration/java/UnixNio.java (compiled here with javac): a thread-pool server
# (an ExecutorService of 8) and a Selector (epoll) server, each under many client
# threads, some channels written by several threads at once (frames of writer id, seq,
# length and CRC32, which the servers check whole and echo); 6 MiB up and 5 MiB down
# around a shutdownOutput, 16 MiB echoed full duplex on each of 3 connections at once (a reader and a writer thread on one
# channel); EOF, EPIPE and ECONNRESET after the peer's close; a read blocked while
# another thread closes the channel or interrupts the reader, a write blocked on a full
# socket while the channel is closed; connects that fail (no file, a closed listener's
# file, a directory, a bound client's name) with their exception types and messages;
# the socket file deleted after bind; the socket file's attributes (isOther, unix:mode);
# addresses, SO_PEERCRED, SO_SNDBUF. Run on kernel sockets, then through `udsfs run`
# with the sockets in the mount (lanes on), under a `--route` directory, and on a
# `--no-lanes` mount: each phase's lines must be the kernel's, or the phase is listed
# for that pass in integration/run_java_exceptions.txt (a listed phase that passes
# fails the script). The program itself says where its listeners live ("where:":
# /proc/net/unix, or the mount's .udsfs/unix and not /proc/net/unix: the guard that
# the JVM's sockets were udsfs sockets) and how many ends of its held connections said
# lane=direct ("lanes:"); those lines are checked, not compared. A phase that hangs is
# given up after its time limit (the JVM's threads' stacks go to PASS.err) and the later
# phases still run.
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd java openjdk-17-jre-headless javac openjdk-17-jdk-headless
EXCEPTIONS=$LIB_DIR/run_java_exceptions.txt
exceptions_listed "$EXCEPTIONS" mount route nolanes >"$TMP/listed" || exit 1

mkdir "$TMP/classes"
javac -d "$TMP/classes" "$LIB_DIR/java/UnixNio.java" || fail "javac integration/java/UnixNio.java failed"
spec=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${spec%%.*}" -ge 16 ] 2>/dev/null || fail "java is version '$spec': AF_UNIX SocketChannels need JDK 16 or later"

# java_run PASS DIR [--route R]: UnixNio with its sockets in DIR, on kernel sockets (PASS
# kernel) or through `udsfs run`; its answers in $TMP/PASS.out, its stderr in PASS.err.
java_run() {
    local pass=$1 dir=$2 rc=0 ms mnt=$MNT wait=5000
    shift 2
    UDSFS_RUN_VIA=udsfs
    # The kernel run looks for no lanes; on --no-lanes a second shows none come.
    [ "$pass" != kernel ] || UDSFS_RUN_VIA=kernel mnt=$TMP/no-mount
    [ "$pass" != nolanes ] || wait=1000
    mkdir -p "$dir"
    # A small heap and the serial collector: fewer JVM threads on 2 loaded cores.
    run_cmd "$@" -- timeout 100 java -Xmx256m -XX:+UseSerialGC -DlanesWait="$wait" -cp "$TMP/classes" \
        UnixNio "$dir" "$mnt"
    timed ms "${RUN_CMD[@]}" >"$TMP/$pass.out" 2>"$TMP/$pass.err" || rc=$?
    show_answers "$pass (exit status $rc, $ms ms)" "$TMP/$pass.out" "$TMP/$pass.err"
    [ "$rc" -eq 0 ] || fail "$pass: java exited with status $rc: $(tail -20 "$TMP/$pass.err")"
    [ "$(tail -1 "$TMP/$pass.out")" == done ] || fail "$pass: the program did not finish: $(tail -20 "$TMP/$pass.err")"
}

# checked PASS: the lines that are checked, not compared: where the listeners live and
# how many ends had lanes (with lanes: some; a connect/accept connection gets its lane at
# an ask of a plain call, and these make one echo and idle: 6 of 8 in one run of 3).
checked() {
    local pass=$1 want_where=udsfs lanes_pool="[1-9][0-9]* of 12" lanes_sel="[1-9] of 8"
    case $pass in
    kernel) want_where=kernel lanes_pool="no udsfs mount here" lanes_sel=$lanes_pool ;;
    nolanes) lanes_pool="0 of 12" lanes_sel="0 of 8" ;;
    esac
    expect_eq "$pass: where the pool's and the selector's listeners live" \
        "$(grep '^where: ' "$TMP/$pass.out" | tr '\n' ' ')" "where: $want_where where: $want_where "
    grep -qx "lanes: pool: $lanes_pool.*" "$TMP/$pass.out" ||
        fail "$pass: want 'lanes: pool: $lanes_pool', got '$(grep '^lanes: pool' "$TMP/$pass.out")'"
    grep -qx "lanes: selector: $lanes_sel.*" "$TMP/$pass.out" ||
        fail "$pass: want 'lanes: selector: $lanes_sel', got '$(grep '^lanes: selector' "$TMP/$pass.out")'"
    ok "$pass: held connections' ends: $(grep '^lanes: ' "$TMP/$pass.out" | tr '\n' ' ')"
}

java_run kernel "$TMP/k"
checked kernel
kernel_said 'clients: 16 own connections x 40 frames, 3 shared by 4 writers x 60 frames: 1360 of 1360 echoes good' \
    "the kernel run's pool clients did not get every echo"
kernel_said 'duplex: server echoed 16777216 bytes; client got 16777216 bytes back, crc ok' "the kernel run's duplex failed"
kernel_said 'peer closed with bytes unread: java.net.SocketException: Connection reset' \
    "the kernel run did not see ECONNRESET"

java_run mount "$MNT/j"
checked mount
R=$TMP/routed
java_run route "$R/j" --route "$R"
checked route
udsfs_unmount
udsfs_mount --no-lanes
java_run nolanes "$MNT/n"
checked nolanes

# Each phase's lines (those after its "== NAME" line, but where: and lanes:) against the
# kernel's, with the exceptions file's verdict.
python3 - "$TMP" "$EXCEPTIONS" <<'EOF' || fail "a phase answered differently from the kernel (above)"
import sys, difflib
tmp, exceptions = sys.argv[1], sys.argv[2]
listed = set()
for l in open(f"{tmp}/listed"):
    passes, name = l.split()
    listed |= {(p, name) for p in passes.split(",")}

def phases(p):
    r, cur = {}, None
    for l in open(f"{tmp}/{p}.out"):
        l = l.rstrip("\n")
        if l.startswith("== "):
            cur = l[3:]
            r[cur] = []
        elif cur and not l.startswith(("where: ", "lanes: ")):
            r[cur].append(l)
    return r

kernel = phases("kernel")
failed = []
for p in ("mount", "route", "nolanes"):
    got = phases(p)
    for name, want in kernel.items():
        same = got.get(name) == want
        if same and (p, name) in listed:
            failed.append(f"{p} {name}: as the kernel, but {exceptions} lists it: unlist it")
        elif same:
            print(f"ok: {p} {name}: as on the kernel ({len(want)} lines)")
        else:
            diff = "\n".join("    " + d for d in difflib.unified_diff(want, got.get(name, ["(no such phase)"]), "kernel", p, lineterm="", n=0))
            if (p, name) in listed:
                print(f"known defect (listed in {exceptions}): {p} {name}:\n{diff}")
            else:
                failed.append(f"{p} {name}: not as on the kernel:\n{diff}")
for f in failed:
    print("FAIL: " + f, file=sys.stderr)
sys.exit(1 if failed else 0)
EOF
ok "Java NIO AF_UNIX: every phase as on the kernel in the mount, route and --no-lanes passes, or listed"

#!/usr/bin/env bash
# run_socket_activate.sh: systemd-socket-activate, which binds and listens itself and
# then starts its child with a fresh environment (only LISTEN_FDS and its kin), in
# both of its modes: handing the listening socket to one child as fd 3 (a python
# server that takes it with socket(fileno=3) and accepts), and --inetd --accept,
# where each connection becomes the stdin and stdout of a `cat`. On kernel sockets,
# then through `udsfs run --mount $MNT` with the socket in the mount: the same answers,
# and the socket is a udsfs socket. The child runs without LD_PRELOAD and
# UDSFS_MOUNT: before the supervisor's filter carried every process of a run, python
# got ENOTSOCK from fd 3 and cat said "input file is output file".
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd systemd-socket-activate systemd

cat >"$TMP/server.py" <<'EOF2'
import socket
s = socket.socket(fileno=3)
print("server: family", s.family.name, "type", s.type.name, flush=True)
for _ in range(2):
    c, _ = s.accept()
    c.sendall(c.recv(100).upper())
    c.close()
EOF2
cat >"$TMP/client.py" <<'EOF2'
import socket, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.settimeout(20)
c.connect(sys.argv[1])
c.sendall(sys.argv[2].encode())
c.shutdown(socket.SHUT_WR)
out = b"".join(iter(lambda: c.recv(100), b""))  # to EOF
print("reply:", out.decode())
EOF2

# one_run MODE DIR: both modes with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/sa-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    run_cmd -- timeout 60 systemd-socket-activate -l "$dir/fd3.sock" python3 "$TMP/server.py"
    start_bg FD3 "${RUN_CMD[@]}" >"$d/fd3.out" 2>&1
    wait_listening "$dir/fd3.sock"
    expect_socket_home "$dir/fd3.sock"
    serve INETD "$dir/inetd.sock" "$d/inetd.out" -- timeout 60 systemd-socket-activate -l "$dir/inetd.sock" --accept --inetd cat
    expect_socket_home "$dir/inetd.sock"
    {
        via -- timeout 30 python3 "$TMP/client.py" "$dir/fd3.sock" hello
        via -- timeout 30 python3 "$TMP/client.py" "$dir/fd3.sock" again
        via -- timeout 30 python3 "$TMP/client.py" "$dir/inetd.sock" echoed-by-cat
        via -- timeout 30 python3 "$TMP/client.py" "$dir/inetd.sock" and-again
    } >"$out" 2>&1 || true
    exit_status "$out" "fd 3 server" "$FD3" 10000 "$d/fd3.out"
    grep '^server:' "$d/fd3.out" >>"$out" || echo "fd 3 server said nothing: $(tail -3 "$d/fd3.out")" >>"$out"
    grep -c '^Spawned cat' "$d/inetd.out" | sed 's/^/inetd children spawned: /' >>"$out"
    ! grep -q 'input file is output file' "$d/inetd.out" || echo "cat: input file is output file" >>"$out"
    kill_session "$INETD" # through udsfs run, timeout is a process group of its own
    wait "$INETD" 2>/dev/null || true
    show_answers "$mode" "$out" "$d"/*.out
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/sa"
grep -qx 'reply: HELLO' "$TMP/kernel.out" || fail "the kernel run's fd 3 server did not answer"
grep -qx 'reply: echoed-by-cat' "$TMP/kernel.out" || fail "the kernel run's inetd cat did not answer"
same_answers "systemd-socket-activate" tail -n 5 "$TMP"/sa-udsfs/*.out
ok "systemd-socket-activate (fd 3 and --inetd) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"

# adversarial_pins.sh's programs; udsfs_files.py's helpers come first (with_helpers).
import array, errno, os, socket, struct, sys, time

from pid_reuse import fork_with_pid
mode = sys.argv[1]
SO_PASSPIDFD, SO_PEERPIDFD = 76, 77

def try_(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

if mode in ("hold", "holdpass"):
    # B: accept every connection and keep it, unread, until the file sys.argv[3] appears
    # (holdpass: with SO_PASSPIDFD, which accepted sockets inherit).
    path, stop = sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if mode == "holdpass":
        s.setsockopt(socket.SOL_SOCKET, SO_PASSPIDFD, 1)
    s.bind(path); os.chmod(path, 0o777); s.listen(256); s.settimeout(0.1)
    print("listening", flush=True)
    held = []
    while not os.path.exists(stop):
        try:
            c, _ = s.accept(); held.append(c)
        except socket.timeout:
            pass
    print("held", len(held), flush=True)
elif mode in ("clients", "nsclients", "senders"):
    # A: N short-lived processes, each connects (nsclients: from a user and network
    # namespace of its own; senders: and sends a byte) and exits.
    path, n = sys.argv[2], int(sys.argv[3])
    refused = 0
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            if mode == "nsclients":
                import ctypes
                CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
                if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER | CLONE_NEWNET):
                    os.write(2, f"unshare: {ctypes.get_errno()}\n".encode())
                    os._exit(1)
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if try_(lambda: c.connect(path)) != "ok":
                os._exit(2)
            if mode == "senders" and try_(lambda: c.send(b"x")) != "ok":
                os._exit(2)
            os._exit(0)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if status not in (0, 2):
            sys.exit(f"{mode}: a client failed")
        refused += status == 2
    print(f"{mode}: {n - refused} of {n} done", flush=True)
elif mode == "probe":
    # A: its own socketpair: pass a pipe end, ask SO_PEERPIDFD.
    a, b = socket.socketpair()
    r, w = os.pipe()
    def pass_file():
        a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r]))])
        msg, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(4))
        if not anc:
            raise OSError(errno.EBADMSG, "no file came")
    def peer_pidfd():
        b.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4)
    print("probe: pass", try_(pass_file), "peerpidfd", try_(peer_pidfd), flush=True)
elif mode == "reader":
    # In a pid namespace of its own (pid 1's child): a client of this namespace connects
    # and exits; once the script says its pid is reused, accept and read SO_PEERCRED.
    path, signs = sys.argv[2], sys.argv[3]
    def sign(name, text):
        with open(f"{signs}/{name}.new", "w") as f:
            f.write(text)
        os.rename(f"{signs}/{name}.new", f"{signs}/{name}")
    def global_pid():
        return int(os.readlink("/proc/self"))  # /proc is the daemon's: its pid there
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path); s.listen(4)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        os.write(w, str(global_pid()).encode())
        os._exit(0)
    os.close(w)
    dead = int(os.read(r, 32))
    os.waitpid(child, 0)
    sign("dead", f"{global_pid()} {dead}")
    for _ in range(3000):
        if os.path.exists(f"{signs}/reused"):
            break
        time.sleep(0.01)
    new = open(f"{signs}/reused").read().strip()
    conn, _ = s.accept()
    pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    what = {child: "the dead client's", int(new or -1): "the new process's", 0: "0"}
    print("peercred:", what.get(pid, f"another: {pid}"), flush=True)
elif mode == "reuser":
    # Root, outside: gives the dead client's pid (in the daemon's namespace) to a new
    # process of the reader's namespace (ns_last_pid, then a fork there).
    import ctypes, signal
    signs = sys.argv[2]
    for _ in range(3000):
        if os.path.exists(f"{signs}/dead"):
            break
        time.sleep(0.01)
    reader, dead = map(int, open(f"{signs}/dead").read().split())
    fd = os.open(f"/proc/{reader}/ns/pid", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x20000000) != 0:
        sys.exit(f"setns: {ctypes.get_errno()}")
    new = fork_with_pid(dead, 3000)
    nspid = ""
    if new:
        st = open(f"/proc/{new}/status").read()
        nspid = [l for l in st.splitlines() if l.startswith("NStgid:")][0].split()[-1]
    with open(f"{signs}/reused.new", "w") as f:
        f.write(nspid)
    os.rename(f"{signs}/reused.new", f"{signs}/reused")
    print("reused:", bool(new), flush=True)
    time.sleep(3)
    if new:
        os.kill(new, signal.SIGKILL); os.waitpid(new, 0)
elif mode == "churn":
    # A: rounds of W processes alive at once, each with a socketpair of its own (a pin
    # each) and SO_PEERPIDFD asked; the first round stays until the script's sign.
    rounds, width, signs = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    got = {}
    for rnd in range(rounds):
        r, w = os.pipe()
        go_r, go_w = os.pipe()
        kids = []
        for _ in range(width):
            pid = os.fork()
            if pid == 0:
                os.close(r); os.close(go_w)
                a, b = socket.socketpair()
                res = try_(lambda: b.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))
                os.write(w, (res + "\n").encode())
                os.read(go_r, 1)
                os._exit(0)
            kids.append(pid)
        os.close(w); os.close(go_r)
        for res in lines_from(r, width).split():
            got[res] = got.get(res, 0) + 1
        if rnd == 0:
            open(f"{signs}/full", "w").close()
            for _ in range(3000):
                if os.path.exists(f"{signs}/probed"):
                    break
                time.sleep(0.01)
        os.close(go_w)
        for pid in kids:
            os.waitpid(pid, 0)
        os.close(r)
    print("churn:", " ".join(f"{k}={v}" for k, v in sorted(got.items())), flush=True)

import array, errno, os, socket, sys, time
mode = sys.argv[1]
SO_PEERPIDFD = 77

def try_(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

if mode == "hold":
    # B: accept every connection and keep it until the file sys.argv[3] appears.
    path, stop = sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path); os.chmod(path, 0o777); s.listen(256); s.settimeout(0.1)
    print("listening", flush=True)
    held = []
    while not os.path.exists(stop):
        try:
            c, _ = s.accept(); held.append(c)
        except socket.timeout:
            pass
    print("held", len(held), flush=True)
elif mode == "clients":
    # A: N short-lived processes, each connects and exits.
    path, n = sys.argv[2], int(sys.argv[3])
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            os._exit(0)
        os.waitpid(pid, 0)
    print("clients", n, flush=True)
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

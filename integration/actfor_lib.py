# Helpers of the act-for attack scripts (adversarial_actfor.sh, adversarial_actfor2.sh),
# appended after udsfs_files.py by `with_helpers FILE actfor_lib.py`. The script sets
# DATA (a dgram socket's data file) and RECV (root's receiver's abstract name, e.g.
# "rootd") before it calls named().

def named(target, pid, uid, gid):
    # A send ioctl (proto/src/ioctl.rs MsgHead) naming thread `target` as
    # the one it is made for (`status` on a send), with SCM_CREDENTIALS.
    import fcntl, struct
    buf = bytearray(16376)
    # (the head: 14 u32, timeo_left, stamp, tstamp and pad, 80 bytes; then
    # `addr`, "\0" RECV; the payload after the whole head, at 2360)
    addr = b"\0" + RECV.encode()
    buf[:80] = struct.pack("14IQQII", 1, 0, 1, 0, len(addr), target, 1, 0, pid, uid, gid, 0, 0, 0, 0, 0, 0, 0)
    buf[80:80 + len(addr)] = addr
    buf[2360] = ord("x")
    d = os.open(DATA, os.O_RDWR)
    try:
        return err(fcntl.ioctl, d, 0xFFF85503, buf)
    finally:
        os.close(d)

def child(argv=None):
    # A child waiting on a pipe; told to go, it execs argv (or exits).
    r, w = os.pipe()
    sr, sw = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        if argv:
            os.dup2(sr, 0)
            nul = os.open("/dev/null", os.O_WRONLY)
            os.dup2(nul, 1)
            os.dup2(nul, 2)
            os.execv(argv[0], argv)
        os._exit(0)
    os.close(r)
    return pid, w

def euid(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return int(line.split()[2])

def wait_euid0(pid):
    for _ in range(200):
        if euid(pid) == 0:
            return True
        time.sleep(0.02)
    return False

def report(what, got):
    print(f"{what}: {got}", flush=True)

# SO_PASSPIDFD, SO_PEERPIDFD and SCM_PIDFD (Linux 6.5): what a receiver
# gets, in which order, with which flags. Printed pids are relative (self,
# parent, child) so that both runs print the same.
import fcntl, os, socket, struct

SO_PASSPIDFD, SO_PEERPIDFD, SCM_PIDFD = 76, 77, 4

def pid_of(pidfd):
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])

def who(pid):
    return {os.getpid(): "self", os.getppid(): "parent"}.get(pid, "child" if pid == child else pid)

def show(label, msg, anc, flags):
    out = []
    for level, ty, data in anc:
        if ty == SCM_PIDFD:
            fd = struct.unpack("i", data[:4])[0]
            cloexec = bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
            out.append(f"PIDFD({who(pid_of(fd))}, cloexec={cloexec})")
            os.close(fd)
        elif ty == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", data[:12])[0]
            out.append(f"CREDENTIALS({who(pid)})")
        elif ty == socket.SCM_RIGHTS:
            fds = struct.unpack(f"{len(data) // 4}i", data)
            out.append(f"RIGHTS({len(fds)})")
            for fd in fds:
                os.close(fd)
    print(f"  {label}: {msg!r} {' '.join(out) or '-'} flags={flags}")

child = None
for ty in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    print(ty.name)
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    print("  SO_PASSPIDFD default:", b.getsockopt(socket.SOL_SOCKET, SO_PASSPIDFD))
    b.setsockopt(socket.SOL_SOCKET, SO_PASSPIDFD, 1)
    print("  SO_PASSPIDFD set:", b.getsockopt(socket.SOL_SOCKET, SO_PASSPIDFD))
    peer = b.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    print("  SO_PEERPIDFD:", who(pid_of(peer)))
    os.close(peer)
    space = socket.CMSG_SPACE(4) * 3 + socket.CMSG_SPACE(12)
    if ty == socket.SOCK_STREAM:
        # Sent before anyone asked for credentials: no pidfd for it.
        c, d = socket.socketpair(socket.AF_UNIX, ty)
        c.send(b"early")
        d.setsockopt(socket.SOL_SOCKET, SO_PASSPIDFD, 1)
        c.send(b"late")
        show("sent before SO_PASSPIDFD", *d.recvmsg(10, space)[:3])
        show("sent after", *d.recvmsg(10, space)[:3])
        c.close(); d.close()
    a.send(b"one")
    show("pidfd only", *b.recvmsg(10, space)[:3])
    r, w = os.pipe()
    a.sendmsg([b"two"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", r))])
    b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    show("with rights and creds", *b.recvmsg(10, space, socket.MSG_CMSG_CLOEXEC)[:3])
    # A message from a child, still alive when it is read: the child's pidfd.
    hold_r, hold_w = os.pipe()
    child = os.fork()
    if child == 0:
        a.send(b"kid")
        os.read(hold_r, 1)
        os._exit(0)
    show("from a child", *b.recvmsg(10, space)[:3])
    os.write(hold_w, b"x")
    os.waitpid(child, 0)
    for f in (hold_r, hold_w):
        os.close(f)
    # From a child already exited and reaped when it is read: Linux 6.18
    # gives a pidfd that names no process any more (fdinfo Pid: -1).
    child = os.fork()
    if child == 0:
        a.send(b"gone")
        os._exit(0)
    os.waitpid(child, 0)
    show("from a reaped child", *b.recvmsg(10, space)[:3])
    b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
    a.send(b"small")
    show("no room", *b.recvmsg(10, 0)[:3])
    for f in (r, w):
        os.close(f)
    a.close(); b.close()
# Without a peer: ENODATA.
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"\0pidfds-" + str(os.getpid()).encode())
try:
    s.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    print("unconnected SO_PEERPIDFD: no error")
except OSError as e:
    print("unconnected SO_PEERPIDFD:", os.strerror(e.errno))
print("done")

# Files in flight count against the sending user's RLIMIT_NOFILE, as
# unix_inflight counts every passed file: past it sendmsg fails with
# ETOOMANYREFS, whether the next file is a pipe or an AF_UNIX socket, and
# receiving one makes room again. Run as root; drops to nobody.
import errno, os, resource, socket, time

def pass_until_refused(sock, fd, limit=100):
    for n in range(limit):
        try:
            socket.send_fds(sock, [b"x"], [fd])
        except OSError as e:
            return n, errno.errorcode[e.errno]
    return limit, "no error"

r, w = os.pipe()
resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
os.setgid(65534)
os.setuid(65534)
a, b = socket.socketpair()
c, d = socket.socketpair()
print("pipe end:", *pass_until_refused(a, r))
print("then a unix socket:", *pass_until_refused(a, c.fileno(), 1))
msg, fds, flags, _ = socket.recv_fds(b, 1, 1)
print("received", msg, len(fds), "fd")
for fd in fds:
    os.close(fd)
print("after one received:", *pass_until_refused(a, r))
b.close()
# The queue's files were closed with it: the user has none in flight. (A
# FUSE close returns before the daemon's release: wait for that, not longer.)
for _ in range(400):
    n, _ = pass_until_refused(c, r, 1)
    if n == 1:
        break
    time.sleep(0.025)
print("after the receiver closed:", n + pass_until_refused(c, r, 4)[0], "passes")

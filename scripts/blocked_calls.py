"""scripts/bench row 9: CPU used while message calls are blocked. Four threads of
this process block in recvfrom (dgram), recv with MSG_PEEK (dgram), recvmsg with a
control buffer (stream) and sendto to a full datagram receiver bound in DIR; then
utime+stime of this process (and of the daemon, with --pid) are read from /proc over
SECONDS. Run through `udsfs run` (the library's message paths) or on kernel sockets.
Usage: blocked_calls.py DIR SECONDS [DAEMON_PID]. Prints RESULT lines."""

import os
import socket
import sys
import threading
import time


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def main():
    d, seconds = sys.argv[1], float(sys.argv[2])
    daemon = int(sys.argv[3]) if len(sys.argv) > 3 else None
    keep = []
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    c, e = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    f, g = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(d, f"blocked-{os.getpid()}.sock")
    r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    r.bind(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setblocking(False)
    try:
        while True:
            s.sendto(b"x" * 100, path)
    except BlockingIOError:
        pass
    s.setblocking(True)
    keep += [a, b, c, e, f, g, r, s]
    calls = [
        lambda: b.recvfrom(100),
        lambda: e.recv(100, socket.MSG_PEEK),
        lambda: g.recvmsg(100, 64),
        lambda: s.sendto(b"y" * 100, path),
    ]
    for call in calls:
        threading.Thread(target=call, daemon=True).start()
    time.sleep(0.5)
    hz = os.sysconf("SC_CLK_TCK")
    p0 = cpu_ticks(os.getpid())
    d0 = cpu_ticks(daemon) if daemon else 0
    t0 = time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - t0
    p1 = cpu_ticks(os.getpid())
    d1 = cpu_ticks(daemon) if daemon else 0
    print(f"RESULT proc_cpu_percent {100 * (p1 - p0) / hz / took:.2f}")
    if daemon:
        print(f"RESULT daemon_cpu_percent {100 * (d1 - d0) / hz / took:.2f}")
    sys.stdout.flush()
    os.unlink(path)
    os._exit(0)


main()

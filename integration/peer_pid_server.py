# peer_pid_server.py PATH N: a stream server at PATH that answers N connections,
# each its first line prefixed "py got ", and prints each peer's SO_PEERCRED pid
# (run_seccomp.sh, run_exec_static.sh).
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    line = c.makefile().readline()
    pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    c.sendall(("py got " + line).encode())
    print("peer pid", pid, flush=True)
    c.close()
print("served", flush=True)

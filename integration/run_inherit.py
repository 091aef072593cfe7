#!/usr/bin/env python3
"""Descriptors of udsfs sockets survive fork, dup and exec, and the copies keep
working as sockets (run_inherit.sh runs this through `udsfs run`)."""
import os, socket, struct, subprocess, sys

a, b = socket.socketpair()
assert "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{a.fileno()}"), "not a udsfs socket"

# fork: the child sends on its copy and reads what the parent sends
pid = os.fork()
if pid == 0:
    a.send(b"from the child")
    got = a.recv(100)
    os._exit(0 if got == b"from the parent" else 3)
print("fork:", b.recv(100).decode())
b.send(b"from the parent")
_, status = os.waitpid(pid, 0)
print("child status:", os.waitstatus_to_exitcode(status))

# dup: the copy is the same socket, with its options
d = socket.socket(fileno=os.dup(a.fileno()))
d.send(b"through the dup")
print("dup:", b.recv(100).decode(), d.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))
pc = struct.unpack("3i", d.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
print("dup peercred pid is ours:", pc[0] == os.getpid())

# exec: another program gets the descriptor and uses it as a socket
os.set_inheritable(a.fileno(), True)
child = subprocess.Popen(
    [sys.executable, "-c",
     "import socket,sys; s=socket.socket(fileno=int(sys.argv[1])); "
     "s.sendmsg([b'from the exec', b'd program']); "
     "print(s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE), s.recv(100).decode())",
     str(a.fileno())],
    pass_fds=[a.fileno()], stdout=subprocess.PIPE, text=True)
got = b.recv(100).decode()
b.send(b"to the exec'd program")
out, _ = child.communicate(timeout=20)
print("exec:", got, "| child printed:", out.strip(), "| rc", child.returncode)

# a shell redirection writes to the socket's data file as to any file
subprocess.run(["sh", "-c", f"echo from sh >&{a.fileno()}"], pass_fds=[a.fileno()], check=True)
print("sh:", b.recv(100).decode().strip())

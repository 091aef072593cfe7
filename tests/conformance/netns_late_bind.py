"""A socket keeps the network namespace it was made in: a process that makes sockets,
then unshare(CLONE_NEWNET)s, and then binds, autobinds, connects or sends with them
files and finds abstract names in the namespace each socket was made in (Linux:
sock_net(sk)), and a socket made after the unshare in the new one. Run once on
kernel sockets and once through `udsfs run` (integration/adversarial_userns.sh); the
outputs must be equal. Needs root. Usage: netns_late_bind.py DIR (unused: every name
here is abstract)."""

import ctypes
import os
import socket
import time

from differential import res, say, where

CLONE_NEWNET = 0x40000000
DGRAM = socket.SOCK_DGRAM


def unshare_net():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare")


def main():
    tag = f"late-{os.getpid()}"
    host = socket.socket(socket.AF_UNIX, DGRAM)
    host.bind(f"\0{tag}-host")
    host.setblocking(False)
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        early = socket.socket(socket.AF_UNIX, DGRAM)
        early_auto = socket.socket(socket.AF_UNIX, DGRAM)
        early_send = socket.socket(socket.AF_UNIX, DGRAM)
        unshare_net()
        late = socket.socket(socket.AF_UNIX, DGRAM)
        lines = [
            ("bind the early socket", res(lambda: early.bind(f"\0{tag}-early"))),
            ("bind the late socket", res(lambda: late.bind(f"\0{tag}-late"))),
            ("autobind the early socket", res(lambda: early_auto.bind(""))),
            ("early socket sends to the host's name", res(lambda: early_send.sendto(b"e", f"\0{tag}-host") and None)),
            ("late socket sends to the host's name", res(lambda: late.sendto(b"l", f"\0{tag}-host") and None)),
            ("late socket sends to the early socket's name", res(lambda: late.sendto(b"l", f"\0{tag}-early") and None)),
            ("late socket connects to the late socket's own name", res(lambda: socket.socket(socket.AF_UNIX, DGRAM).connect(f"\0{tag}-late"))),
        ]
        out = "".join(f"child: {w}: {r}\n" for w, r in lines)
        out += early_auto.getsockname().hex() + "\n"
        os.write(wr, out.encode())
        os.close(wr)
        # Hold the sockets until the parent has looked (it kills this child).
        time.sleep(30)
        os._exit(0)
    os.close(wr)
    buf = b""
    while not buf.endswith(b"\n") or buf.count(b"\n") < 8:
        b = os.read(rd, 4096)
        if not b:
            break
        buf += b
    lines = buf.decode().splitlines()
    for line in lines[:-1]:
        say(line)
    auto = bytes.fromhex(lines[-1])
    s = socket.socket(socket.AF_UNIX, DGRAM)
    say("host: the early socket sent here:", res(lambda: host.recv(8)))
    say("host: sends to the early socket's name:", res(lambda: s.sendto(b"h", f"\0{tag}-early") and None))
    say("host: sends to the late socket's name:", res(lambda: s.sendto(b"h", f"\0{tag}-late") and None))
    say("host: sends to the early socket's autobound name:", res(lambda: s.sendto(b"h", auto) and None))
    os.kill(pid, 9)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    where()
    main()
    say("done")
